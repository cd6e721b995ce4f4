"""Instrumented replay of a recorded conversation through zett-agent's real runtime.

The recorded assistant messages are played back by a replay model, recorded
tool results by replay tools, and a real :class:`CompactionExtension` decides
everything about compaction. zett_lab only listens: a thin subclass records
what the engine's own methods computed (estimate, window, checkpoint) and the
summary model is wrapped in a recording proxy (the only place its usage and
latency can be seen), which also consults the persistent summary cache.

Example::

    >>> import zett_lab
    >>> conversation = zett_lab.load("fixtures/sessions.sqlite", session="ci-flaky-kafka")  # doctest: +SKIP
    >>> trace = zett_lab.replay(conversation, max_tokens=20_000, keep_recent_tokens=4_000)  # doctest: +SKIP
    >>> trace.steps[["step", "estimate", "triggered", "applied"]]  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import numbers
import time
import warnings
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import zett_agent
from zett_agent.agent import Agent, AgentRunConfig, AgentRunContext
from zett_agent.events import AgentEventType
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    RetryOptions,
)
from zett_agent.tools.base import AgentTool, current_tool_call_id

from ..asyncrun import closing_stream, run_sync
from ..errors import (
    InputError,
    ResultFailure,
    SettingError,
    SettingWarning,
    SummaryFailureWarning,
    ZettLabError,
)
from ..load.conversation import Conversation, starts_turn
from ..tokens import MAX_TOKEN_SETTING, TokenCounter
from ..tokens import count_tokens as default_counter
from .explain import BELOW_THRESHOLD, NO_TURN_BOUNDARY, NOT_SMALLER, SUMMARY_FAILED, window_skip_reason
from .trace import Trace

#: Manual (on-demand) compaction points: an int is a turn index, ``"step:N"`` a model step.
CompactAt = Iterable[int | str]

USAGE_MODES = ("none", "recorded", "synthetic")


class ReplayError(ZettLabError):
    """The runtime rejected the recording (or a summary failed in strict mode); names the step."""


class SummaryError(ReplayError, ResultFailure):
    """A summary failed and ``strict=True`` stopped the replay there (the message names the step and cause)."""


class _TurnInterrupted(Exception):
    """Ends a request whose recorded turn stopped after a tool result, before a new user message.

    An ordinary exception (raised from ``before_model``, not from a tool) so the
    runtime fails that request cleanly and accepts the next one.
    """


class _EndOfRecording(BaseException):
    """Raised inside the runtime when the recording has nothing more to play.

    A BaseException so the runtime's tool runner does not turn it into a failed
    tool result; replay catches it and ends cleanly on a log that was cut off.
    """


def check_limits(max_tokens: object, keep_recent_tokens: object) -> None:
    """Raise :class:`SettingError` unless both limits are positive integers up to :data:`MAX_TOKEN_SETTING`."""
    for name, value in (("max_tokens", max_tokens), ("keep_recent_tokens", keep_recent_tokens)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise SettingError(f"{name} must be a positive integer, got {value!r}")
        if int(value) > MAX_TOKEN_SETTING:
            raise SettingError(
                f"{name}={value} is larger than zett_lab can use (at most {MAX_TOKEN_SETTING:,} tokens); "
                f"to never compact, give a value above the conversation's size"
            )


def keep_fills_budget(max_tokens: int, keep_recent_tokens: int) -> str | None:
    """What ``keep_recent_tokens >= max_tokens`` means for the engine, or None for any other setting."""
    if keep_recent_tokens < max_tokens:
        return None
    return (
        f"keep_recent_tokens={keep_recent_tokens} >= max_tokens={max_tokens}: the kept tail alone fills the budget, "
        "so once the context exceeds max_tokens the engine either finds no window (the recent budget covers "
        "everything) or keeps a tail that is still over max_tokens; expect steps over budget and few or no compactions"
    )


@dataclass
class _Pass:
    """What one compaction pass saw and decided, filled in as the engine runs."""

    trigger: str | None
    n_recorded: int
    n_messages: int = 0
    estimate: int | None = None
    estimator_tokens: int | None = None
    estimate_source: str | None = None
    window: tuple[list, list, list] | None = None
    window_checked: bool = False
    window_skip: str | None = None
    summary_call: dict[str, Any] | None = None
    checkpoint: CompactedMessage | None = None
    applied: bool = False
    error: BaseException | None = None


@dataclass
class _Recorder:
    """Mutable state shared by the replay model, tools, proxy and compaction subclass."""

    conversation: Conversation
    counter: TokenCounter
    max_tokens: int
    keep_recent_tokens: int
    summarizer_identity: str
    strict: bool
    assistant_indices: list[int]
    cursor: int = 0
    turn: int = 0
    turn_start: int = 0
    turn_end: int = 0
    interrupted_turns: list[int] = field(default_factory=list)
    turn_step: int = 0
    step_rows: list[dict[str, Any]] = field(default_factory=list)
    compaction_rows: list[dict[str, Any]] = field(default_factory=list)
    engine_events: list[dict[str, Any]] = field(default_factory=list)
    current: _Pass | None = None
    ended: bool = False
    checkpoint_id: int | None = None
    span_start: int = 0
    strict_failure: BaseException | None = None

    @property
    def n_recorded(self) -> int:
        """Original messages seen so far: everything before the next recorded assistant message."""
        if self.cursor < len(self.assistant_indices):
            return self.assistant_indices[self.cursor]
        return len(self.conversation.messages)

    def turn_was_interrupted(self) -> bool:
        """The runtime wants another model step, but the recorded turn ended on a tool result.

        A new user message follows it in the recording.
        """
        next_assistant = self.assistant_indices[self.cursor] if self.cursor < len(self.assistant_indices) else None
        return self.turn_end < len(self.conversation.messages) and (
            next_assistant is None or next_assistant >= self.turn_end
        )

    def begin_pass(self, trigger: str | None, n_recorded: int) -> _Pass:
        self.current = _Pass(trigger=trigger, n_recorded=n_recorded)
        return self.current

    def finish_pass(self, step: int) -> dict[str, Any] | None:
        """Turn the current pass into a compaction row when it attempted (or was asked for) a summary."""
        state = self.current
        if state is None or not (state.window is not None or state.trigger == "manual" or state.error is not None):
            return None
        row = _compaction_row(self, state, step)
        self.compaction_rows.append(row)
        if state.applied:
            self.checkpoint_id = row["compaction_id"]
        return row


def _skip_reason(state: _Pass, max_tokens: int) -> str | None:
    if state.applied:
        return None
    if state.error is not None:
        return SUMMARY_FAILED
    if state.trigger is None and (state.estimate is None or state.estimate <= max_tokens):
        return BELOW_THRESHOLD
    if state.window is None:
        return state.window_skip or NO_TURN_BOUNDARY
    return NOT_SMALLER


def _compaction_row(recorder: _Recorder, state: _Pass, step: int) -> dict[str, Any]:
    counter = recorder.counter
    older, recent = (state.window[1], state.window[2]) if state.window else ([], [])
    older_tokens = counter(older) if state.window else None
    summary_tokens = counter([state.checkpoint]) if state.checkpoint is not None else None
    call = state.summary_call or {}
    error = state.error
    return {
        "compaction_id": len(recorder.compaction_rows),
        "conversation_id": recorder.conversation.id,
        "step": step,
        "turn": recorder.turn,
        "trigger": state.trigger or "auto",
        "span_start": recorder.span_start if state.window else None,
        "span_end": state.n_recorded - len(recent) if state.window else None,
        "n_recorded": state.n_recorded,
        "older_messages": len(older) if state.window else None,
        "older_tokens": older_tokens,
        "recent_messages": len(recent) if state.window else None,
        "recent_tokens": counter(recent) if state.window else None,
        "summary_tokens": summary_tokens,
        "compression_ratio": 1 - summary_tokens / older_tokens if summary_tokens is not None and older_tokens else None,
        "applied": state.applied,
        "skip_reason": _skip_reason(state, recorder.max_tokens),
        "summary_text": call.get("text"),
        "summarizer": recorder.summarizer_identity,
        "latency_s": call.get("latency_s"),
        "cache_hit": call.get("cache_hit"),
        "summary_input_tokens": call.get("input_tokens"),
        "summary_output_tokens": call.get("output_tokens"),
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "error_kind": _error_kind(error, call) if error is not None else None,
    }


def _error_kind(error: BaseException, call: dict[str, Any]) -> str:
    """A short, stable name for why a summary attempt failed."""
    if call.get("tool_calls"):
        return "tool_call"
    if "cannot call tools" in str(error):
        return "tool_call"
    if call.get("text") == "" or "nonempty text summary" in str(error):
        return "empty_summary"
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    name = type(error).__name__
    return f"{name}:{status}" if isinstance(status, int) else name


class _InstrumentedCompaction(CompactionExtension):
    """The real engine, with its own intermediate results written down as it computes them."""

    def __init__(self, recorder: _Recorder, manual_steps: set[int], **options: Any) -> None:
        super().__init__(**options)
        self.name = "CompactionExtension"
        self._recorder = recorder
        self._manual_steps = manual_steps

    def _count_context_tokens(self, context: AgentRunContext) -> int:
        estimate = super()._count_context_tokens(context)
        state = self._recorder.current
        if state is not None and state.estimate is None:
            messages = context.state.messages
            baseline = self._usage_baselines.get(context)
            from_usage = baseline is not None and baseline[1] <= len(messages)
            state.estimate = estimate
            state.estimate_source = "usage" if from_usage else "estimator"
            state.estimator_tokens = self.count_tokens(messages) if from_usage else estimate
            state.n_messages = len(messages)
        return estimate

    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        window = CompactionExtension._select_compaction_window(
            messages, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens
        )
        state = self._recorder.current
        if state is not None:
            state.window, state.window_checked = window, True
            if window is None:

                state.window_skip = window_skip_reason(
                    messages, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens
                )
        return window

    async def _summarize_checkpoint(self, context, older, *, model, reasoning_effort):
        checkpoint = await super()._summarize_checkpoint(context, older, model=model, reasoning_effort=reasoning_effort)
        if self._recorder.current is not None:
            self._recorder.current.checkpoint = checkpoint
        return checkpoint

    async def compact(self, context: AgentRunContext, *, force: bool = False):
        state = self._recorder.current
        if state is not None and state.n_messages == 0:
            state.n_messages = len(context.state.messages)
        try:
            event = await super().compact(context, force=force)
        except Exception as error:
            if state is None:
                raise
            state.error = error
            if self._recorder.strict:
                self._recorder.strict_failure = error
                raise
            await _leave_compacting_phase(context)
            return None
        if state is not None:
            state.applied = event is not None
        return event

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        recorder = self._recorder
        if recorder.turn_was_interrupted():
            # No model step happened here in the recording (the user interrupted):
            # end the request before the engine acts.
            recorder.interrupted_turns.append(recorder.turn)
            raise _TurnInterrupted
        step = len(recorder.step_rows)
        if step in self._manual_steps:
            recorder.begin_pass("manual", recorder.n_recorded)
            await self.compact(context, force=True)
            recorder.finish_pass(step)
        recorder.begin_pass(None, recorder.n_recorded)
        await self.compact(context)

    async def on_compact(self, context: AgentRunContext) -> None:
        recorder = self._recorder
        recorder.begin_pass("manual", recorder.turn_start)
        await self.compact(context, force=True)
        recorder.finish_pass(len(recorder.step_rows))
        recorder.current = None


async def _leave_compacting_phase(context: AgentRunContext) -> None:
    """Non-strict mode goes on after a failed summary, where the engine would fail the request.

    The engine announced ``COMPACTION_STARTED``; put the runtime back to READY the
    way ``COMPACTION_COMPLETED`` would, without publishing a completion that did not happen.
    """
    from zett_agent.events import AgentPhase, AgentPhaseTransitionMixin

    if context.state.phase is AgentPhase.COMPACTING:
        await AgentPhaseTransitionMixin._transition_phase(context, AgentPhase.READY, expected=(AgentPhase.COMPACTING,))


class _RecordingSummarizer:
    """Wraps the summary model: records text, usage, latency and errors; serves the cache."""

    def __init__(self, model: AgentModel, identity: str, recorder: _Recorder | _SpanRecorder, cache: Any) -> None:
        self._model = model
        self._identity = identity
        self._recorder = recorder
        self._cache = cache
        self.retry = RetryOptions(max_retries=0)

    async def stream(self, request: ModelRequest):
        call: dict[str, Any] = {"cache_hit": False}
        if self._recorder.current is not None:
            self._recorder.current.summary_call = call
        key = self._cache.key(self._identity, request) if self._cache is not None else None
        cached = self._cache.get(key) if key is not None else None
        if cached is not None:
            call.update(
                cache_hit=True, text=cached.text.strip(), latency_s=cached.latency_s,
                input_tokens=cached.input_tokens, output_tokens=cached.output_tokens,
            )
            yield ModelEvent.text(cached.text)
            usage = ModelUsage(input_tokens=cached.input_tokens or 0, output_tokens=cached.output_tokens or 0)
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content=cached.text), usage=usage))
            return
        started = time.perf_counter()
        async with closing_stream(self._model.stream(request)) as events:
            async for event in events:
                if event.response is not None:
                    response = event.response
                    usage = response.usage
                    reported = usage.input_tokens > 0 or usage.output_tokens > 0
                    call.update(
                        text=response.message.content.strip(),
                        tool_calls=bool(response.message.tool_calls),
                        latency_s=time.perf_counter() - started,
                        input_tokens=usage.input_tokens if reported else None,
                        output_tokens=usage.output_tokens if reported else None,
                    )
                    if key is not None and call["text"] and not call["tool_calls"]:
                        from ..summarizers.cache import CachedSummary

                        self._cache.put(
                            key,
                            CachedSummary(
                                text=response.message.content, latency_s=call["latency_s"],
                                input_tokens=call["input_tokens"], output_tokens=call["output_tokens"],
                            ),
                        )
                elif event.tool_call_delta is not None:
                    call["tool_calls"] = True
                yield event


class _ReplayModel:
    """Plays back the recorded assistant messages, one per model step, and records each step."""

    retry = RetryOptions(max_retries=0)

    def __init__(
        self, recorder: _Recorder, usage_for: Callable[[int, ModelRequest, AssistantMessage], ModelUsage]
    ) -> None:
        self._recorder = recorder
        self._usage_for = usage_for

    async def stream(self, request: ModelRequest):
        recorder = self._recorder
        step = len(recorder.step_rows)
        compaction = recorder.finish_pass(step)
        state = recorder.current
        recorder.current = None
        responded = recorder.cursor < len(recorder.assistant_indices)
        # assistant_indices holds the indices of AssistantMessage only (see replay()).
        message = (
            cast(AssistantMessage, recorder.conversation.messages[recorder.assistant_indices[recorder.cursor]])
            if responded
            else None
        )
        recorder.step_rows.append(_step_row(recorder, step, state, compaction, request.messages, message))
        recorder.turn_step += 1
        if message is None:
            recorder.ended = True
            raise _EndOfRecording
        index = recorder.assistant_indices[recorder.cursor]
        recorder.cursor += 1
        reply = copy.deepcopy(message)
        yield ModelEvent.completed(ModelResponse(reply, usage=self._usage_for(index, request, reply)))


def _step_row(
    recorder: _Recorder,
    step: int,
    state: _Pass | None,
    compaction: dict[str, Any] | None,
    sent: Sequence[AnyMessage],
    reply: AssistantMessage | None,
) -> dict[str, Any]:
    counter = recorder.counter
    originals = sum(1 for m in sent if not isinstance(m, (SystemMessage, CompactedMessage)))
    has_checkpoint = any(isinstance(m, CompactedMessage) for m in sent)
    context_tokens = counter(sent)
    window = state.window if state is not None else None
    older, recent = (window[1], window[2]) if window else (None, None)
    applied = bool(state and state.applied)
    return {
        "conversation_id": recorder.conversation.id,
        "turn": recorder.turn,
        "step": step,
        "turn_step": recorder.turn_step,
        "n_recorded": recorder.n_recorded,
        "n_messages": state.n_messages if state else len(sent),
        "estimate": state.estimate if state else None,
        "estimator_tokens": state.estimator_tokens if state else None,
        "estimate_source": state.estimate_source if state else None,
        "max_tokens": recorder.max_tokens,
        "keep_recent_tokens": recorder.keep_recent_tokens,
        "triggered": bool(state and state.window_checked),
        "trigger": "auto" if state and state.window_checked else None,
        "skip_reason": _skip_reason(state, recorder.max_tokens) if state else BELOW_THRESHOLD,
        "older_messages": len(older) if older is not None else None,
        "older_tokens": counter(older) if older is not None else None,
        "recent_messages": len(recent) if recent is not None else None,
        "recent_tokens": counter(recent) if recent is not None else None,
        "cutoff_index": state.n_recorded - len(recent) if state is not None and recent is not None else None,
        "compaction_id": compaction["compaction_id"] if compaction else None,
        "summary_tokens": compaction["summary_tokens"] if compaction else None,
        "applied": applied,
        "context_tokens_after": context_tokens,
        "over_budget_after": context_tokens > recorder.max_tokens,
        "checkpoint_id": recorder.checkpoint_id if has_checkpoint else None,
        "kept_from": recorder.n_recorded - originals,
        "responded": reply is not None,
        "output_tokens": counter([reply]) if reply is not None else 0,
        "zett_agent_version": zett_agent.__version__,
    }


class _RecordedTools:
    """One replay tool per recorded tool name, answering each call id with its recorded result."""

    def __init__(self, conversation: Conversation, recorder: _Recorder) -> None:
        self._recorder = recorder
        self._results: dict[str, deque[ToolMessage]] = defaultdict(deque)
        names: set[str] = set()
        for message in conversation.messages:
            if isinstance(message, ToolMessage):
                self._results[message.tool_call_id].append(message)
            elif isinstance(message, AssistantMessage):
                names.update(call.name for call in message.tool_calls)
        self.tools = [
            AgentTool(
                name=name,
                description=f"Replays the recorded results of {name}.",
                parameters={"type": "object"},
                handler=self._answer,
                guidelines=(),
            )
            for name in sorted(names)
        ]

    async def _answer(self, **_: Any) -> Any:
        queue = self._results.get(current_tool_call_id() or "")
        if not queue:
            self._recorder.ended = True
            raise _EndOfRecording
        result = queue.popleft()
        content = copy.deepcopy(result.content)
        if not result.success:
            raise _RecordedFailure(result.text if not isinstance(content, str) else content)
        return content


class _RecordedFailure(Exception):
    """Re-raises a recorded failed tool result so the runtime stores it with ``success=False``."""


def _check_replayable(conversation: Conversation) -> None:
    """Reject shapes the runtime cannot be driven through, naming the message index."""
    where = conversation.source or f"conversation {conversation.id!r}"
    messages = conversation.messages
    for turn in conversation.turns:
        if not isinstance(messages[turn.start], UserMessage):
            raise InputError(
                where,
                f"message {turn.start}",
                "replay feeds each turn as a user request; an internal agent message cannot start a turn",
            )
    for index, message in enumerate(messages[:-1]):
        if isinstance(message, AssistantMessage) and not message.tool_calls and not starts_turn(messages[index + 1]):
            raise InputError(
                where,
                f"message {index + 1}",
                "an assistant answer is followed by another message in the same turn; the runtime ends a request at "
                "an answer",
            )


def _parse_compact_at(
    compact_at: CompactAt | None, conversation: Conversation, n_steps: int
) -> tuple[set[int], set[int]]:
    turns: set[int] = set()
    steps: set[int] = set()
    n_turns = len(conversation.turns)
    for item in compact_at or ():
        kind, value = (
            ("turn", item)
            if isinstance(item, int)
            else tuple(str(item).split(":", 1))
            if ":" in str(item)
            else ("?", item)
        )
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = -1
        if kind not in ("turn", "step") or number < 0:
            raise SettingError(f"compact_at entry {item!r}: use a turn index (int) or 'step:N'")
        limit = n_turns if kind == "turn" else n_steps
        if number >= limit:
            raise SettingError(
                f"compact_at entry {item!r} points past the end of conversation {conversation.id!r} ({limit} {kind}s)"
            )
        (turns if kind == "turn" else steps).add(number)
    return turns, steps


def _usage_function(
    mode: str, conversation: Conversation, counter: TokenCounter, overhead: int, on_missing_usage: str
) -> Callable[[int, ModelRequest, AssistantMessage], ModelUsage]:
    if mode not in USAGE_MODES:
        raise SettingError(f"usage must be one of {', '.join(USAGE_MODES)}, got {mode!r}")
    if mode == "none":
        return lambda index, request, reply: ModelUsage()
    if mode == "synthetic":
        if isinstance(overhead, bool) or not isinstance(overhead, int) or overhead < 0:
            raise SettingError(f"usage_overhead must be a non-negative integer, got {overhead!r}")
        return lambda index, request, reply: ModelUsage(
            input_tokens=counter(request.messages) + overhead, output_tokens=counter([reply])
        )
    if not conversation.usage:
        if on_missing_usage == "error":
            raise SettingError(
                f"conversation {conversation.id!r} has no recorded usage; use usage='none' or "
                "on_missing_usage='estimate'"
            )
        warnings.warn(
            f"conversation {conversation.id!r} has no recorded usage; the estimator decides every step", stacklevel=3
        )
    return lambda index, request, reply: conversation.usage.get(index, ModelUsage())


def resolve_summarizer(summarizer: AgentModel | str | None) -> AgentModel:
    """An AgentModel from a model, a spec string, or None (the default offline summarizer)."""
    from ..summarizers import DEFAULT_SUMMARIZER
    from ..summarizers import summarizer as build

    if summarizer is None:
        return build(DEFAULT_SUMMARIZER)
    if isinstance(summarizer, str):
        return build(summarizer)
    if not callable(getattr(summarizer, "stream", None)):
        raise SettingError(
            f"summarizer must be a zett-agent AgentModel or a spec string, got {type(summarizer).__name__}"
        )
    return summarizer


def resolve_cache(cache: Any) -> Any:
    """A SummaryCache from a cache, a path, None (the default cache) or False (no cache)."""
    if cache is False:
        return None
    from ..summarizers.cache import SummaryCache

    if cache is None or cache is True:
        return SummaryCache()
    if isinstance(cache, (str, Path)):
        return SummaryCache(cache)
    return cache


def replay(
    conversation: Conversation,
    *,
    max_tokens: int,
    keep_recent_tokens: int,
    summarizer: AgentModel | str | None = None,
    count_tokens: TokenCounter | None = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
    cache: Any = None,
    strict: bool = False,
    compact_at: CompactAt | None = None,
    usage: str = "none",
    usage_overhead: int = 0,
    on_missing_usage: str = "error",
    store: str | Path | None = None,
    warn: bool = True,
) -> Trace:
    """Replay ``conversation`` through zett-agent's runtime with a real ``CompactionExtension``.

    Args:
        conversation: What to replay (see :func:`zett_lab.load`).
        max_tokens, keep_recent_tokens: The engine's two limits (positive integers).
        summarizer: Summary model: an AgentModel or a spec for :func:`zett_lab.summarizer`;
            None uses the default offline summarizer.
        count_tokens: The engine's counter; None uses zett_lab's exact memoizing counter.
        reasoning_effort: Reasoning effort the engine passes to the summary model.
        cache: A :class:`~zett_lab.summarizers.SummaryCache`, a path to one, None for
            the default cache, or False for none.
        strict: Stop at the first failed summary with a :class:`SummaryError` (the engine
            fails the request) instead of recording it as a failed attempt and going on.
        compact_at: On-demand passes: turn indices (``Agent.compact`` before that
            turn) and ``"step:N"`` (``compact(force=True)`` before model step N).
        usage: ``"none"`` (estimator only), ``"recorded"`` (the recording's provider
            usage becomes the engine's baseline) or ``"synthetic"`` (counter + overhead).
        usage_overhead: Tokens added to synthetic usage (tool schemas, provider framing).
        on_missing_usage: With ``usage="recorded"`` on a conversation without usage:
            ``"error"`` or ``"estimate"`` (warn and use the estimator).
        store: Also write the replay through zett-agent's SQLite session storage to
            this new file (see :mod:`zett_lab.replay.stored`).
        warn: Give a :class:`~zett_lab.errors.SettingWarning` for ``keep_recent_tokens >=
            max_tokens`` and one :class:`~zett_lab.errors.SummaryFailureWarning` per distinct
            cause of failed summaries (a sweep turns this off and warns once for all cells).

    Returns:
        A :class:`Trace` with one row per model step and one per summary attempt; failed
        summaries are counted per cause in :attr:`Trace.failure_counts`.
    """
    check_limits(max_tokens, keep_recent_tokens)
    max_tokens, keep_recent_tokens = int(max_tokens), int(keep_recent_tokens)
    meaning = keep_fills_budget(max_tokens, keep_recent_tokens)
    if warn and meaning:
        warnings.warn(meaning, SettingWarning, stacklevel=2)
    conversation.validate()
    effort = ReasoningEffort(reasoning_effort)
    counter = count_tokens or default_counter
    from ..summarizers import summarizer_identity

    model = resolve_summarizer(summarizer)
    identity = summarizer_identity(model)
    summary_cache = resolve_cache(cache)
    messages = conversation.messages
    assistant_indices = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    _check_replayable(conversation)
    manual_turns, manual_steps = _parse_compact_at(compact_at, conversation, len(assistant_indices) + 1)
    recorder = _Recorder(
        conversation=conversation, counter=counter, max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens,
        summarizer_identity=identity, strict=strict, assistant_indices=assistant_indices,
        span_start=next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), 0),
    )
    usage_for = _usage_function(usage, conversation, counter, usage_overhead, on_missing_usage)
    compaction = _InstrumentedCompaction(
        recorder, manual_steps,
        model=_RecordingSummarizer(model, f"{identity}|effort={effort.value}", recorder, summary_cache),
        max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens, count_tokens=counter, reasoning_effort=effort,
    )
    if store is None:
        history: Any = InMemoryMessageAccumulator()
    else:
        from .stored import storage_extension

        history = storage_extension(store, conversation.id)
    started = time.perf_counter()
    run_sync(_drive(conversation, recorder, [history, compaction], usage_for, manual_turns))
    settings = {
        "max_tokens": max_tokens,
        "keep_recent_tokens": keep_recent_tokens,
        "summarizer": identity,
        "reasoning_effort": effort.value,
        "counter": getattr(counter, "__qualname__", type(counter).__name__),
        "usage": usage,
        "usage_overhead": usage_overhead,
        "compact_at": [str(c) for c in compact_at or ()],
        "strict": strict,
        "zett_agent_version": zett_agent.__version__,
        "replay_seconds": round(time.perf_counter() - started, 3),
        "cache": summary_cache.stats() if summary_cache is not None else None,
        "store": str(store) if store is not None else None,
        "interrupted_turns": recorder.interrupted_turns,
    }
    trace = Trace.from_rows(
        conversation, recorder.step_rows, recorder.compaction_rows, settings, recorder.engine_events
    )
    if store is not None:
        from .stored import link_snapshots, stored_view

        trace.compactions = link_snapshots(trace.compactions, stored_view(store, conversation.id))
    if warn:
        for failure in trace.failure_counts.itertuples(index=False):
            warnings.warn(
                f"conversation {conversation.id!r}: {failure.count} summary call(s) failed: {failure.cause}",
                SummaryFailureWarning, stacklevel=2,
            )
    return trace


async def _drive(
    conversation: Conversation,
    recorder: _Recorder,
    extensions: list[Any],
    usage_for: Callable[[int, ModelRequest, AssistantMessage], ModelUsage],
    manual_turns: set[int],
) -> None:
    tools = _RecordedTools(conversation, recorder)
    config = AgentRunConfig(session_id=conversation.id)
    agent = await Agent.create(
        _ReplayModel(recorder, usage_for),
        config=config,
        system_prompt=conversation.system_prompt or "",
        tools=tools.tools,
        extensions=extensions,
        parallel_tool_call=False,
        max_iterations=1_000_000,
    )
    try:
        for turn in conversation.turns:
            recorder.turn, recorder.turn_start, recorder.turn_end, recorder.turn_step = (
                turn.index,
                turn.start,
                turn.end,
                0,
            )
            if turn.index in manual_turns:
                await _consume(agent.compact(config=config), recorder)
            # _check_replayable proved that every turn starts with a UserMessage.
            user = cast(UserMessage, copy.deepcopy(conversation.messages[turn.start]))
            try:
                await _consume(agent.stream(user, config=config), recorder)
            except (Exception, _EndOfRecording, _TurnInterrupted) as error:
                if recorder.ended:
                    return
                if recorder.interrupted_turns[-1:] == [turn.index]:
                    continue
                where = f"conversation {conversation.id!r}, turn {turn.index}, step {len(recorder.step_rows) - 1}"
                failure = recorder.strict_failure
                if failure is not None:
                    cause = f"{type(failure).__name__}: {failure}"
                    raise SummaryError(f"{where}: summary failed (strict): {cause}") from failure
                if isinstance(error, ZettLabError):
                    raise
                raise ReplayError(f"{where}: {type(error).__name__}: {error}") from error
    finally:
        recorder.current = None
        for extension in extensions:
            close = getattr(extension, "close", None)
            if close is not None:
                await close()


async def _consume(events: Any, recorder: _Recorder) -> None:
    """Drain an event stream, keeping the engine's own compaction events for cross-checks."""
    async with aclosing(events) as stream:
        async for event in stream:
            if event.type is AgentEventType.COMPACTION_COMPLETED:
                compacted = event.compaction
                recorder.engine_events.append(
                    {
                        "step": len(recorder.step_rows),
                        "applied": bool(event.applied),
                        "compressed_to": compacted.compressed_to if compacted else None,
                        "kept_to": compacted.kept_to if compacted else None,
                        "summary": compacted.summary if compacted else None,
                    }
                )


class _SpanContext:
    """What the engine's summary step needs from a run context: a session id and somewhere to emit deltas."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    async def emit(self, event: Any) -> None:
        return None


class _SpanRecorder:
    """Where the recording summary call leaves its record while one span is summarized."""

    current: _Pass | None = None


def summarize_spans(
    conversation: Conversation,
    spans: Sequence[tuple[int, int, int]],
    *,
    summarizer: AgentModel | str | None = None,
    count_tokens: TokenCounter | None = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
    cache: Any = None,
) -> Trace:
    """Summarize exact spans ``messages[span_start:span_end]`` with the engine's own summary step.

    For comparing a summarizer with a recorded (native) summary on the identical span: each
    ``(span_start, span_end, n_recorded)`` becomes one compaction row in the trace schema (no
    steps), summarized by ``CompactionExtension._summarize_checkpoint`` (the engine's request,
    instructions and checks) through the same recording, cached summary call a replay uses. A
    summary the engine would discard as not smaller is recorded with ``applied=False``; a failed
    one with its error, as in a replay.
    """
    effort = ReasoningEffort(reasoning_effort)
    counter = count_tokens or default_counter
    from ..summarizers import summarizer_identity

    model = resolve_summarizer(summarizer)
    identity = summarizer_identity(model)
    recorder = _SpanRecorder()
    recording = _RecordingSummarizer(model, f"{identity}|effort={effort.value}", recorder, resolve_cache(cache))
    engine = CompactionExtension(
        model=recording, max_tokens=1, keep_recent_tokens=1, count_tokens=counter, reasoning_effort=effort
    )
    messages = conversation.messages
    rows = []
    for k, (start, end, n_recorded) in enumerate(spans):
        older = [m for m in messages[start:end] if not isinstance(m, SystemMessage)]
        recent = [m for m in messages[end:n_recorded] if not isinstance(m, SystemMessage)]
        recorder.current = _Pass(trigger="span", n_recorded=n_recorded)
        checkpoint, error = None, None
        try:
            context = cast(AgentRunContext, _SpanContext(conversation.id))  # all the summary step reads of a context
            summarizing = engine._summarize_checkpoint(context, older, model=recording, reasoning_effort=effort)
            checkpoint = run_sync(summarizing)
        except Exception as exc:  # noqa: BLE001 - a failed summary is a recorded attempt, never a result
            error = exc
        call = recorder.current.summary_call or {}
        older_tokens, summary_tokens = counter(older), counter([checkpoint]) if checkpoint is not None else None
        applied = summary_tokens is not None and summary_tokens < older_tokens
        rows.append({
            "compaction_id": k, "conversation_id": conversation.id, "step": None, "turn": None, "trigger": "span",
            "span_start": start, "span_end": end, "n_recorded": n_recorded, "older_messages": len(older),
            "older_tokens": older_tokens, "recent_messages": len(recent), "recent_tokens": counter(recent),
            "summary_tokens": summary_tokens,
            "compression_ratio": (
                1 - summary_tokens / older_tokens if summary_tokens is not None and older_tokens else None
            ),
            "applied": applied,
            "skip_reason": None if applied else ("summary failed" if error is not None else "summary not smaller"),
            "summary_text": call.get("text"), "summarizer": identity, "latency_s": call.get("latency_s"),
            "cache_hit": call.get("cache_hit"), "summary_input_tokens": call.get("input_tokens"),
            "summary_output_tokens": call.get("output_tokens"),
            "error": f"{type(error).__name__}: {error}" if error is not None else None,
            "error_kind": _error_kind(error, call) if error is not None else None,
        })
    settings = {
        "summarizer": identity, "reasoning_effort": effort.value, "max_tokens": None, "keep_recent_tokens": None,
        "counter": getattr(counter, "__qualname__", type(counter).__name__), "spans": "given",
        "zett_agent_version": zett_agent.__version__,
    }
    return Trace.from_rows(conversation, [], rows, settings, [])
