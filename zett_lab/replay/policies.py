"""Two example compaction policies for the policy lab, written the way a user writes one.

A policy is a subclass of zett-agent's ``CompactionExtension`` that overrides the engine's
own hooks; everything else (the trigger, the summary request, the "not smaller" check, the
``CompactionEvent`` the session storage turns into a snapshot) stays the engine's. Both keep
the context in the shape zett-agent can persist and restore: system messages, one
checkpoint, then a verbatim tail of the raw log (``SessionView`` is exactly that).

- :class:`SplitTurnCompaction` compacts inside an oversized turn. Where the stock window
  finds no whole-turn boundary (an autonomous run is one turn), it cuts between complete
  assistant/tool-result groups instead, never between a tool call and its result.
- :class:`ObservationMaskingCompaction` masks old tool outputs first (observation masking,
  JetBrains "The Complexity Trap"): the checkpoint is the older history with every tool
  output replaced by a placeholder. Only when that is not enough does it ask the summary
  model, and then for a summary of the masked history.

They compose like mixins (``class Both(ObservationMaskingCompaction, SplitTurnCompaction)``).

Example::

    >>> trace = zett_lab.replay(conversation, max_tokens=20_000, keep_recent_tokens=4_000,
    ...                         engine=SplitTurnCompaction)          # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from zett_agent.agent import AgentRunContext
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage, ToolMessage
from zett_agent.model import AgentModel, ReasoningEffort

from ..load.conversation import CHECKPOINT_PREFIX, starts_turn
from ..summarizers.offline import Mask, omitted_output
from .explain import walk_cutoff
from .schema import NO_GROUP_BOUNDARY, ONLY_CHECKPOINTS, RECENT_COVERS_ALL

__all__ = ["ObservationMaskingCompaction", "SplitTurnCompaction", "tool_group_starts"]

Window = tuple[list[SystemMessage], list[AnyMessage], list[AnyMessage]]


def tool_group_starts(dialogue: Sequence[AnyMessage]) -> list[bool]:
    """Where a cut keeps every tool call with its result, per position of ``dialogue``.

    A position is a boundary when it opens a user turn (the stock rule) or holds an
    assistant message while every tool call made before it has its result before it.
    """
    open_calls: set[str] = set()
    starts = []
    for message in dialogue:
        starts.append(starts_turn(message) or (isinstance(message, AssistantMessage) and not open_calls))
        if isinstance(message, AssistantMessage):
            open_calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            open_calls.discard(message.tool_call_id)
    return starts


class SplitTurnCompaction(CompactionExtension):
    """The stock engine, plus windows inside an oversized turn.

    Where the stock window exists it is used unchanged, so this policy differs from the
    stock engine only where the stock engine cannot compact. There, the cutoff walks back
    from the end while the kept tail is under ``keep_recent_tokens`` (the engine's own
    budget walk), then to the nearest tool-group boundary (:func:`tool_group_starts`)
    instead of the turn's user message. The tail then starts with an assistant message
    whose calls all have their results in the tail; the turn's user request goes into the
    checkpoint, which is the price the lab measures (constraint survival, recall).
    """

    #: The limits along which one replay provably stands for others (see ``zett_lab.boundaries``):
    #: ``max_tokens`` is read only in the engine's ``estimate > max_tokens`` comparison; the
    #: window walk is this policy's own, so ``keep_recent_tokens`` is not declared.
    zett_lab_reuse = ("max_tokens",)

    def _select_compaction_window(  # type: ignore[override]
        self,
        messages: Sequence[AnyMessage],
        *,
        keep_recent_tokens: int,
        count_tokens: Callable[[Sequence[AnyMessage]], int],
    ) -> Window | None:
        window = super()._select_compaction_window(
            messages, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens
        )
        if window is not None:
            return window
        instructions = [m for m in messages if isinstance(m, SystemMessage)]
        dialogue: list[AnyMessage] = [m for m in messages if not isinstance(m, SystemMessage)]
        cutoff = self._group_cutoff(dialogue, keep_recent_tokens, count_tokens)
        if cutoff <= 0 or all(isinstance(m, CompactedMessage) for m in dialogue[:cutoff]):
            return None
        return instructions, dialogue[:cutoff], dialogue[cutoff:]

    @staticmethod
    def _group_cutoff(
        dialogue: Sequence[AnyMessage], keep_recent_tokens: int, count_tokens: Callable[[Sequence[AnyMessage]], int]
    ) -> int:
        walked, _ = walk_cutoff(dialogue, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens)
        starts = tool_group_starts(dialogue)
        cutoff = walked
        while cutoff > 0 and not starts[cutoff]:
            cutoff -= 1
        return cutoff

    def explain_no_window(
        self,
        messages: Sequence[AnyMessage],
        *,
        keep_recent_tokens: int,
        count_tokens: Callable[[Sequence[AnyMessage]], int],
    ) -> str:
        """Why :meth:`_select_compaction_window` found nothing (zett_lab records it as ``skip_reason``)."""
        dialogue = [m for m in messages if not isinstance(m, SystemMessage)]
        walked, _ = walk_cutoff(dialogue, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens)
        if walked == 0:
            return RECENT_COVERS_ALL
        cutoff = self._group_cutoff(dialogue, keep_recent_tokens, count_tokens)
        return NO_GROUP_BOUNDARY if cutoff == 0 else ONLY_CHECKPOINTS


class ObservationMaskingCompaction(CompactionExtension):
    """Mask old tool outputs first; summarize only when masking is not enough.

    When the engine compacts, the checkpoint is first the older history with every tool
    output replaced by ``[tool output omitted: N tokens]`` (user and assistant messages,
    tool calls with their arguments and earlier checkpoints kept). It is used when it
    brings the context to at most ``masking_target`` × ``max_tokens`` (so the next steps
    do not compact again at once) and is smaller than what it replaces. Otherwise the
    summary model is asked for a summary of the *masked* history: it never reads the old
    tool outputs, which makes the call cheaper and is what the lab measures the cost of.

    Args:
        masking_target: Share of ``max_tokens`` the masked context must fit in (0 < x <= 1).
        keep_output_tokens: Tool outputs of at most this many tokens are kept verbatim.
        **options: ``CompactionExtension``'s own arguments.
    """

    def __init__(
        self,
        model: AgentModel | None = None,
        *,
        masking_target: float = 0.8,
        keep_output_tokens: int = 0,
        **options: object,
    ) -> None:
        super().__init__(model, **options)  # type: ignore[arg-type]
        if not 0 < masking_target <= 1:
            raise ValueError(f"masking_target must be in (0, 1], got {masking_target!r}")
        self.masking_target = masking_target
        self.keep_output_tokens = keep_output_tokens
        self._mask = Mask(keep_output_tokens=keep_output_tokens)

    async def _summarize_checkpoint(
        self,
        context: AgentRunContext,
        older: Sequence[AnyMessage],
        *,
        model: AgentModel,
        reasoning_effort: ReasoningEffort,
    ) -> CompactedMessage:
        masked = CompactedMessage(content=CHECKPOINT_PREFIX + self._mask.summarize(older))
        messages = context.state.messages
        dialogue = [m for m in messages if not isinstance(m, SystemMessage)]
        after = [*(m for m in messages if isinstance(m, SystemMessage)), masked, *dialogue[len(older) :]]
        if self.count_tokens(after) <= self.masking_target * self.max_tokens and self.count_tokens(
            [masked]
        ) < self.count_tokens(older):
            return masked
        return await super()._summarize_checkpoint(
            context, self._masked(older), model=model, reasoning_effort=reasoning_effort
        )

    def _masked(self, older: Sequence[AnyMessage]) -> list[AnyMessage]:
        """The older messages as the summary model gets them: long tool outputs replaced by a placeholder."""
        out: list[AnyMessage] = []
        for message in older:
            if isinstance(message, ToolMessage):
                tokens = self.count_tokens([message])
                if tokens > self.keep_output_tokens:
                    message = replace(message, content=omitted_output(tokens))
            out.append(message)
        return out
