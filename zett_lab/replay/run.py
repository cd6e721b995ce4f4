"""Instrumented replay of a recorded conversation through zett-agent's real runtime.

The recorded assistant messages are played back by a replay model, recorded tool
results by replay tools, and a real compaction engine decides everything about
compaction: the stock ``CompactionExtension`` or a user's subclass (``engine=``).
zett_lab only listens, through the probe of :mod:`zett_lab.replay.engine` placed in
front of the engine's class, and the summary channel around the summary model.
(Over 600 lines on purpose: most of it is the two public entry points' documented
signatures, one keyword per replay option, and the request driver they share.)

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
from collections.abc import Callable, Iterable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, cast

import zett_agent
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from zett_agent.model import AgentModel, ModelRequest, ModelUsage, ReasoningEffort

from ..asyncrun import run_sync
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
from .deadline import DEFAULT_ENGINE_TIMEOUT, check_engine_timeout, pass_deadline
from .engine import (
    EngineSpec,
    ReplayProbe,
    SummaryChannel,
    build_engine,
    check_engine,
    engine_name,
    summarize_span,
)
from .fork import Fork, ForkableRun, TurnMark
from .playback import EndOfRecording, RecordedTools, ReplayCursor, ReplayModel, TurnInterrupted
from .recorder import NOT_SMALLER, SUMMARY_FAILED, Recording, summary_call_columns
from .trace import Trace

#: Manual (on-demand) compaction points: an int is a turn index, ``"step:N"`` a model step.
CompactAt = Iterable[int | str]

USAGE_MODES = ("none", "recorded", "synthetic")


class ReplayError(ZettLabError):
    """The runtime rejected the recording (or a pass failed in strict mode); names the step."""


class SummaryError(ReplayError, ResultFailure):
    """A summary failed and ``strict=True`` stopped the replay there (the message names the step and cause)."""


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
        import warnings

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
    engine: EngineSpec = None,
    count_tokens: TokenCounter | None = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
    cache: Any = None,
    strict: bool = False,
    engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT,
    compact_at: CompactAt | None = None,
    usage: str = "none",
    usage_overhead: int = 0,
    on_missing_usage: str = "error",
    store: str | Path | None = None,
    warn: bool = True,
) -> Trace:
    """Replay ``conversation`` through zett-agent's runtime with a real compaction engine.

    Args:
        conversation: What to replay (see :func:`zett_lab.load`).
        max_tokens, keep_recent_tokens: The engine's two limits (positive integers).
        summarizer: Summary model: an AgentModel or a spec for :func:`zett_lab.summarizer`;
            None uses the default offline summarizer.
        engine: The compaction engine: None (the stock ``CompactionExtension``), a subclass of
            it, or a factory called with ``CompactionExtension``'s keyword arguments that returns
            one. It is instrumented the same way as the stock engine; ``settings["engine"]`` names it.
        count_tokens: The engine's counter; None uses zett_lab's exact memoizing counter.
        reasoning_effort: Reasoning effort the engine passes to the summary model.
        cache: A :class:`~zett_lab.summarizers.SummaryCache`, a path to one, None for
            the default cache, or False for none.
        strict: Stop at the first failed summary with a :class:`SummaryError` (the engine
            fails the request; an engine failing outside its summary call stops with a
            :class:`ReplayError`) instead of recording it as a failed attempt and going on.
        engine_timeout: Seconds each compaction pass (the summary call included) may take; a
            pass over it is a failed attempt (``error_kind`` ``"timeout"``) or, with ``strict``, a
            :class:`ReplayError`. None: unbounded. What can and cannot be interrupted is in
            :mod:`zett_lab.replay.deadline`.
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
            cause of failed attempts (a sweep turns this off and warns once for all cells).

    Returns:
        A :class:`Trace` with one row per model step and one per summary attempt; failed
        attempts are counted per cause in :attr:`Trace.failure_counts`.

    Raises:
        SettingError: a bad setting; :class:`~zett_lab.replay.engine.EngineError` for an engine
            that is not a CompactionExtension or a factory that fails or ignores the limits.
        ReplayError: the runtime failed a request (in strict mode: a failed pass).
    """
    trace, _ = replay_forkable(
        conversation,
        max_tokens=max_tokens,
        keep_recent_tokens=keep_recent_tokens,
        summarizer=summarizer,
        engine=engine,
        count_tokens=count_tokens,
        reasoning_effort=reasoning_effort,
        cache=cache,
        strict=strict,
        engine_timeout=engine_timeout,
        compact_at=compact_at,
        usage=usage,
        usage_overhead=usage_overhead,
        on_missing_usage=on_missing_usage,
        store=store,
        warn=warn,
        stacklevel=3,
    )
    return trace


def replay_forkable(
    conversation: Conversation,
    *,
    max_tokens: int,
    keep_recent_tokens: int,
    summarizer: AgentModel | str | None = None,
    engine: EngineSpec = None,
    count_tokens: TokenCounter | None = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
    cache: Any = None,
    strict: bool = False,
    engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT,
    compact_at: CompactAt | None = None,
    usage: str = "none",
    usage_overhead: int = 0,
    on_missing_usage: str = "error",
    store: str | Path | None = None,
    warn: bool = True,
    fork: Fork | None = None,
    stacklevel: int = 2,
) -> tuple[Trace, ForkableRun | None]:
    """:func:`replay`, also returning what later replays can fork from (None with ``store=``).

    ``fork`` starts this replay at a mark of an earlier one instead of at the first turn:
    the caller has proven that this setting takes the same decisions as that replay up to
    the mark (:mod:`zett_lab.replay.fork`); a fork of another conversation, engine or
    summarizer is refused. Same arguments otherwise.
    """
    check_limits(max_tokens, keep_recent_tokens)
    max_tokens, keep_recent_tokens = int(max_tokens), int(keep_recent_tokens)
    meaning = keep_fills_budget(max_tokens, keep_recent_tokens)
    if warn and meaning:
        warnings.warn(meaning, SettingWarning, stacklevel=stacklevel)
    check_engine(engine)
    time_limit = check_engine_timeout(engine_timeout)
    conversation.validate()
    effort = ReasoningEffort(reasoning_effort)
    counter = count_tokens or default_counter
    from ..summarizers import summarizer_identity

    model = resolve_summarizer(summarizer)
    identity = summarizer_identity(model)
    summary_cache = resolve_cache(cache)
    _check_replayable(conversation)
    cursor, manual_turns = _cursor(conversation, counter, max_tokens, keep_recent_tokens, identity, compact_at)
    marks: list[TurnMark] = []
    if fork is not None:
        if store is not None or compact_at:
            raise SettingError("a forked replay takes no store= and no compact_at=")
        fork.check(conversation.id, engine_name(engine), identity)
        marks = fork.resume(cursor)
    usage_for = _usage_function(usage, conversation, counter, usage_overhead, on_missing_usage)
    compaction = build_engine(
        engine,
        ReplayProbe,
        model=SummaryChannel(model, identity, summary_cache, f"{identity}|effort={effort.value}"),
        max_tokens=max_tokens,
        keep_recent_tokens=keep_recent_tokens,
        count_tokens=counter,
        reasoning_effort=effort,
    )
    compaction._replay, compaction._probe_strict, compaction._probe_counter = cursor, strict, counter  # type: ignore[attr-defined]
    started = time.perf_counter()
    history = fork.history(conversation.id) if fork is not None else _history(store, conversation.id)
    first_turn = fork.mark.turn if fork is not None else 0
    with pass_deadline(time_limit) as deadline:
        compaction._probe_deadline = deadline  # type: ignore[attr-defined]
        run_sync(_drive(cursor, [history, compaction], usage_for, manual_turns, engine_name(engine), first_turn, marks))
    settings = {
        "max_tokens": max_tokens,
        "keep_recent_tokens": keep_recent_tokens,
        "summarizer": identity,
        "engine": engine_name(engine),
        "reasoning_effort": effort.value,
        "counter": getattr(counter, "__qualname__", type(counter).__name__),
        "usage": usage,
        "usage_overhead": usage_overhead,
        "compact_at": [str(c) for c in compact_at or ()],
        "strict": strict,
        "engine_timeout": time_limit,
        "zett_agent_version": zett_agent.__version__,
        "replay_seconds": round(time.perf_counter() - started, 3),
        "cache": summary_cache.stats() if summary_cache is not None else None,
        "store": str(store) if store is not None else None,
        "interrupted_turns": cursor.interrupted_turns,
    }
    recording = cursor.recording
    trace = Trace.from_rows(
        conversation, recording.step_rows, recording.compaction_rows, settings, recording.engine_events
    )
    if store is not None:
        from .stored import link_snapshots, stored_view

        trace.compactions = link_snapshots(trace.compactions, stored_view(store, conversation.id))
    if warn:
        _warn_failures(trace, stacklevel + 1)
    if store is not None:
        return trace, None
    run = ForkableRun(
        conversation.id,
        engine_name(engine),
        identity,
        recording.step_rows,
        recording.compaction_rows,
        recording.engine_events,
        cursor.interrupted_turns,
        marks,
    )
    return trace, run


def _cursor(
    conversation: Conversation,
    counter: TokenCounter,
    max_tokens: int,
    keep_recent_tokens: int,
    identity: str,
    compact_at: CompactAt | None,
) -> tuple[ReplayCursor, set[int]]:
    """Where the replay starts: an empty recording, the recorded replies, the manual passes (turns returned)."""
    messages = conversation.messages
    assistant_indices = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    manual_turns, manual_steps = _parse_compact_at(compact_at, conversation, len(assistant_indices) + 1)
    recording = Recording(
        conversation_id=conversation.id,
        counter=counter,
        max_tokens=max_tokens,
        keep_recent_tokens=keep_recent_tokens,
        summarizer_identity=identity,
        span_start=next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), 0),
    )
    return ReplayCursor(conversation, recording, assistant_indices, manual_steps), manual_turns


def _history(store: str | Path | None, session_id: str) -> Any:
    """The history extension: in memory, or zett-agent's SQLite session storage on a new file (``store=``)."""
    if store is None:
        return InMemoryMessageAccumulator()
    from .stored import storage_extension

    return storage_extension(store, session_id)


def _warn_failures(trace: Trace, stacklevel: int) -> None:
    """One :class:`~zett_lab.errors.SummaryFailureWarning` per distinct cause of failed attempts."""
    for failure in trace.failure_counts.itertuples(index=False):
        warnings.warn(
            f"conversation {trace.conversation.id!r}: {failure.count} {failure.what}(s) failed: {failure.cause}",
            SummaryFailureWarning,
            stacklevel=stacklevel,
        )


async def _drive(
    cursor: ReplayCursor,
    extensions: list[Any],
    usage_for: Callable[[int, ModelRequest, AssistantMessage], ModelUsage],
    manual_turns: set[int],
    engine: str,
    first_turn: int = 0,
    marks: list[TurnMark] | None = None,
) -> None:
    """Play the turns from ``first_turn`` on; at each turn start where the state is whole, append a mark to ``marks``.

    The state is whole when every recorded tool result before the turn has been answered
    (a fork's tools then hold exactly the results a fresh replay still has) and the history
    is in memory (``marks`` is None for a replay written through session storage).
    """
    conversation, recording = cursor.conversation, cursor.recording
    turns = conversation.turns
    start = turns[first_turn].start if first_turn < len(turns) else 0
    tools = RecordedTools(cursor, start)
    answered = _answered_before(conversation, start)
    history = extensions[0] if isinstance(extensions[0], InMemoryMessageAccumulator) else None
    config = AgentRunConfig(session_id=conversation.id)
    agent = await Agent.create(
        ReplayModel(cursor, usage_for),
        config=config,
        system_prompt=conversation.system_prompt or "",
        tools=tools.tools,
        extensions=extensions,
        parallel_tool_call=False,
        max_iterations=1_000_000,
    )
    try:
        for turn in turns[first_turn:]:
            if (
                marks is not None
                and history is not None
                and turn.index > first_turn
                and (tools.used == answered[turn.start])
            ):
                marks.append(TurnMark.at(turn.index, history, cursor))
            recording.turn, recording.turn_step = turn.index, 0
            cursor.turn_start, cursor.turn_end = turn.start, turn.end
            if turn.index in manual_turns:
                await _consume(agent.compact(config=config), recording)
            # _check_replayable proved that every turn starts with a UserMessage.
            user = cast(UserMessage, copy.deepcopy(conversation.messages[turn.start]))
            try:
                await _consume(agent.stream(user, config=config), recording)
            except (Exception, EndOfRecording, TurnInterrupted) as error:
                if cursor.ended:
                    return
                if cursor.interrupted_turns[-1:] == [turn.index]:
                    continue
                failure, cause = _turn_failure(cursor, engine, turn.index, error)
                if failure is error:
                    raise
                raise failure from cause
    finally:
        cursor.current = None
        for extension in extensions:
            close = getattr(extension, "close", None)
            if close is not None:
                await close()


def _turn_failure(
    cursor: ReplayCursor, engine: str, turn: int, error: BaseException
) -> tuple[BaseException, BaseException]:
    """The error a failed request stops the replay with (naming conversation, engine, turn and step), and its cause."""
    named = f"engine {engine}, " if engine != engine_name(None) else ""
    where = f"conversation {cursor.conversation.id!r}, {named}turn {turn}, step {cursor.recording.steps - 1}"
    failed = cursor.strict_failure
    if failed is not None and failed.error is not None:
        cause = f"{type(failed.error).__name__}: {failed.error}"
        if failed.error_in_summary:
            return SummaryError(f"{where}: summary failed (strict): {cause}"), failed.error
        return ReplayError(f"{where}: engine failed (strict): {cause}"), failed.error
    if isinstance(error, ZettLabError):
        return error, error
    return ReplayError(f"{where}: {type(error).__name__}: {error}"), error


def _answered_before(conversation: Conversation, start: int) -> list[int]:
    """``answered[i]``: recorded tool results in ``messages[start:i]`` (what the tools must have answered by then)."""
    answered = [0] * (len(conversation.messages) + 1)
    for index, message in enumerate(conversation.messages):
        answered[index + 1] = answered[index] + (index >= start and isinstance(message, ToolMessage))
    return answered


async def _consume(events: Any, recording: Recording) -> None:
    """Drain an event stream, keeping the engine's own compaction events for cross-checks."""
    async with aclosing(events) as stream:
        async for event in stream:
            if event.type is AgentEventType.COMPACTION_COMPLETED:
                recording.engine_events.append(engine_event(event, recording.steps))


def engine_event(event: Any, step: int) -> dict[str, Any]:
    """One ``COMPACTION_COMPLETED`` event as a plain record (the cross-check of every compaction row)."""
    compacted = event.compaction
    return {
        "step": step,
        "applied": bool(event.applied),
        "compressed_to": compacted.compressed_to if compacted else None,
        "kept_to": compacted.kept_to if compacted else None,
        "summary": compacted.summary if compacted else None,
    }


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
    instructions and checks) through the same recording, cached summary channel a replay uses. A
    summary the engine would discard as not smaller is recorded with ``applied=False``; a failed
    one with its error, as in a replay.
    """
    effort = ReasoningEffort(reasoning_effort)
    counter = count_tokens or default_counter
    from ..summarizers import summarizer_identity

    model = resolve_summarizer(summarizer)
    identity = summarizer_identity(model)
    channel = SummaryChannel(model, identity, resolve_cache(cache), f"{identity}|effort={effort.value}")
    messages = conversation.messages
    rows = []
    for k, (start, end, n_recorded) in enumerate(spans):
        older = [m for m in messages[start:end] if not isinstance(m, SystemMessage)]
        recent = [m for m in messages[end:n_recorded] if not isinstance(m, SystemMessage)]
        checkpoint, error, call = summarize_span(older, channel, effort, conversation.id, counter)
        older_tokens, summary_tokens = counter(older), counter([checkpoint]) if checkpoint is not None else None
        applied = summary_tokens is not None and summary_tokens < older_tokens
        rows.append(
            {
                "compaction_id": k,
                "conversation_id": conversation.id,
                "step": None,
                "turn": None,
                "trigger": "span",
                "span_start": start,
                "span_end": end,
                "n_recorded": n_recorded,
                "older_messages": len(older),
                "older_tokens": older_tokens,
                "recent_messages": len(recent),
                "recent_tokens": counter(recent),
                "summary_tokens": summary_tokens,
                "compression_ratio": (
                    1 - summary_tokens / older_tokens if summary_tokens is not None and older_tokens else None
                ),
                "applied": applied,
                "skip_reason": None if applied else (SUMMARY_FAILED if error is not None else NOT_SMALLER),
                "summary_text": call.get("text"),
                "summarizer": identity,
                **summary_call_columns(call, error),
            }
        )
    settings = {
        "summarizer": identity,
        "reasoning_effort": effort.value,
        "max_tokens": None,
        "keep_recent_tokens": None,
        "counter": getattr(counter, "__qualname__", type(counter).__name__),
        "spans": "given",
        "zett_agent_version": zett_agent.__version__,
    }
    return Trace.from_rows(conversation, [], rows, settings, [])
