"""Instrumented replay of a recorded conversation through zett-agent's real runtime.

The recorded assistant messages are played back by a replay model, recorded tool
results by replay tools, and a real compaction engine decides everything about
compaction: the stock ``CompactionExtension`` or a user's subclass (``Setting.engine``).
zett_lab only listens, through the probe of :mod:`zett_lab.replay.engine` placed in
front of the engine's class, and the summary channel around the summary model.

Example::

    >>> import zett_lab
    >>> conversation = zett_lab.load("fixtures/sessions.sqlite", session="ci-flaky-kafka")  # doctest: +SKIP
    >>> setting = zett_lab.Setting(max_tokens=20_000, keep_recent_tokens=4_000)
    >>> trace = zett_lab.replay(conversation, setting)  # doctest: +SKIP
    >>> trace.steps[["step", "estimate", "triggered", "applied"]]  # doctest: +SKIP
"""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import zett_agent
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEvent, AgentEventType
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from zett_agent.model import AgentModel, ModelRequest, ModelUsage, ReasoningEffort

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
from ..summarizers import DEFAULT_SUMMARIZER, resolve_cache, summarizer_identity
from ..summarizers.cache import CacheSpec
from ..tokens import TokenCounter, counter_identity
from ..tokens import count_tokens as default_counter
from .deadline import pass_deadline
from .engine import (
    EngineSpec,
    ReplayProbe,
    SummaryChannel,
    build_engine,
    drive_replay,
    effort_identity,
    engine_name,
    limit_passes,
    summarize_span,
)
from .fork import Fork, ForkableRun, TurnMark
from .playback import EndOfRecording, RecordedTools, ReplayCursor, ReplayModel, TurnInterrupted
from .recorder import Recording, summary_call_columns
from .schema import NOT_SMALLER, SUMMARY_FAILED, TraceRow
from .setting import ReplayOptions, Setting, TraceSettings, build_summarizer, compose, keep_fills_budget
from .trace import Trace


class ReplayError(ZettLabError):
    """The runtime rejected the recording (or a pass failed in strict mode); names the step."""


class SummaryError(ReplayError, ResultFailure):
    """A summary failed and ``strict=True`` stopped the replay there (the message names the step and cause)."""


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


def _manual_points(setting: Setting, conversation: Conversation, n_steps: int) -> tuple[set[int], set[int]]:
    """The Setting's manual compaction points as (turns, steps), each checked against the conversation."""
    turns: set[int] = set()
    steps: set[int] = set()
    n_turns = len(conversation.turns)
    for point in setting.compact_at:
        kind, number = ("turn", point) if isinstance(point, int) else ("step", int(point.partition(":")[2]))
        limit = n_turns if kind == "turn" else n_steps
        if number >= limit:
            raise SettingError(
                f"compact_at entry {point!r} points past the end of conversation {conversation.id!r} ({limit} {kind}s)"
            )
        (turns if kind == "turn" else steps).add(number)
    return turns, steps


def _usage_function(
    setting: Setting, conversation: Conversation, counter: TokenCounter, on_missing_usage: str
) -> Callable[[int, ModelRequest, AssistantMessage], ModelUsage]:
    if setting.usage == "none":
        return lambda index, request, reply: ModelUsage()
    if setting.usage == "synthetic":
        overhead = setting.usage_overhead
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


def replay(
    conversation: Conversation,
    setting: Setting | None = None,
    options: ReplayOptions | None = None,
    **changes: Any,
) -> Trace:
    """Replay ``conversation`` through zett-agent's runtime with a real compaction engine.

    Args:
        conversation: What to replay (see :func:`zett_lab.load`).
        setting: What decides the engine's path (:class:`~zett_lab.replay.setting.Setting`: the two
            limits, summarizer, engine, counter, reasoning effort, usage baseline, manual passes).
        options: How the replay runs (:class:`~zett_lab.replay.setting.ReplayOptions`: summary
            cache, strict, engine timeout, storage, warnings); default ReplayOptions().
        **changes: Fields of either, by name (``max_tokens=20_000, keep_recent_tokens=4_000,
            strict=True``): they build the Setting and options (:func:`~zett_lab.replay.setting.compose`).

    Returns:
        A :class:`Trace` with one row per model step and one per summary attempt; failed
        attempts are counted per cause in :attr:`Trace.failure_counts`, and ``trace.settings``
        keeps the Setting and the facts of the run.

    Raises:
        SettingError: a bad setting; :class:`~zett_lab.replay.engine.EngineError` for an engine
            that is not a CompactionExtension or a factory that fails or ignores the limits.
        ReplayError: the runtime failed a request (in strict mode: a failed pass).

    Example::

        >>> from zett_lab import Setting
        >>> trace = replay(conversation, Setting(max_tokens=20_000, keep_recent_tokens=4_000))  # doctest: +SKIP
    """
    setting, options = compose(setting, options, changes)
    trace, _ = replay_forkable(conversation, setting, options, stacklevel=3)
    return trace


def replay_forkable(
    conversation: Conversation,
    setting: Setting,
    options: ReplayOptions | None = None,
    *,
    fork: Fork | None = None,
    stacklevel: int = 2,
) -> tuple[Trace, ForkableRun | None]:
    """:func:`replay`, also returning what later replays can fork from (None with ``store=``).

    ``fork`` starts this replay at a mark of an earlier one instead of at the first turn:
    the caller has proven that this setting takes the same decisions as that replay up to
    the mark (:mod:`zett_lab.replay.fork`); a fork of another conversation, engine or
    summarizer is refused.
    """
    options = options or ReplayOptions()
    meaning = keep_fills_budget(setting.max_tokens, setting.keep_recent_tokens)
    if options.warn and meaning:
        warnings.warn(meaning, SettingWarning, stacklevel=stacklevel)
    conversation.validate()
    _check_replayable(conversation)
    engine, counter, model = setting.engine_spec(), setting.token_counter(), setting.summary_model()
    identity = setting.summarizer_name
    summary_cache = resolve_cache(options.cache)
    cursor, manual_turns = _cursor(conversation, setting)
    marks: list[TurnMark] = []
    if fork is not None:
        if options.store is not None or setting.compact_at:
            raise SettingError("a forked replay takes no store= and no compact_at=")
        fork.check(conversation.id, engine_name(engine), identity)
        marks = fork.resume(cursor)
    usage_for = _usage_function(setting, conversation, counter, options.on_missing_usage)
    effort = ReasoningEffort(setting.reasoning_effort)
    channel = SummaryChannel(model, identity, summary_cache, effort_identity(identity, effort))
    compaction = _probed_engine(engine, setting, channel, counter, cursor, options.strict)
    started = time.perf_counter()
    history = fork.history(conversation.id) if fork is not None else _history(options.store, conversation.id)
    first_turn = fork.mark.turn if fork is not None else 0
    with pass_deadline(options.engine_timeout) as deadline:
        limit_passes(compaction, deadline)
        run_sync(_drive(cursor, [history, compaction], usage_for, manual_turns, engine_name(engine), first_turn, marks))
    settings = TraceSettings(
        setting=setting,
        summarizer=identity,
        counter=counter_identity(counter),
        zett_agent_version=zett_agent.__version__,
        strict=options.strict,
        engine_timeout=options.engine_timeout,
        replay_seconds=round(time.perf_counter() - started, 3),
        cache=summary_cache.stats() if summary_cache is not None else None,
        store=str(options.store) if options.store is not None else None,
        interrupted_turns=tuple(cursor.interrupted_turns),
    )
    recording = cursor.recording
    trace = Trace.from_rows(
        conversation, recording.step_rows, recording.compaction_rows, settings, recording.engine_events
    )
    if options.store is not None:
        from .stored import link_snapshots, stored_view

        trace = dataclasses.replace(
            trace, compactions=link_snapshots(trace.compactions, stored_view(options.store, conversation.id))
        )
    if options.warn:
        _warn_failures(trace, stacklevel + 1)
    if options.store is not None:
        return trace, None
    return trace, _forkable_run(conversation, engine, identity, cursor, marks)


def _probed_engine(
    engine: EngineSpec,
    setting: Setting,
    channel: SummaryChannel,
    counter: TokenCounter,
    cursor: ReplayCursor,
    strict: bool,
) -> CompactionExtension:
    """The setting's engine with the replay's probe in front, its summary model behind the recording channel."""
    compaction = build_engine(
        engine,
        ReplayProbe,
        model=channel,
        max_tokens=setting.max_tokens,
        keep_recent_tokens=setting.keep_recent_tokens,
        count_tokens=counter,
        reasoning_effort=ReasoningEffort(setting.reasoning_effort),
    )
    drive_replay(compaction, cursor, strict, counter)
    return compaction


def _forkable_run(
    conversation: Conversation, engine: EngineSpec, identity: str, cursor: ReplayCursor, marks: list[TurnMark]
) -> ForkableRun:
    """What later replays of the conversation can fork from: this replay's rows and its turn marks."""
    recording = cursor.recording
    return ForkableRun(
        conversation.id,
        engine_name(engine),
        identity,
        recording.step_rows,
        recording.compaction_rows,
        recording.engine_events,
        cursor.interrupted_turns,
        marks,
    )


def _cursor(conversation: Conversation, setting: Setting) -> tuple[ReplayCursor, set[int]]:
    """Where the replay starts: an empty recording, the recorded replies, the manual passes (turns returned)."""
    messages = conversation.messages
    assistant_indices = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    manual_turns, manual_steps = _manual_points(setting, conversation, len(assistant_indices) + 1)
    recording = Recording(
        conversation_id=conversation.id,
        setting=setting,
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


async def _consume(events: AsyncIterator[AgentEvent], recording: Recording) -> None:
    """Drain an event stream, keeping the engine's own compaction events for cross-checks."""
    async with closing_stream(events) as stream:
        async for event in stream:
            if event.type is AgentEventType.COMPACTION_COMPLETED:
                recording.engine_events.append(engine_event(event, recording.steps))


def engine_event(event: AgentEvent, step: int) -> TraceRow:
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
    counter: TokenCounter | None = None,
    reasoning_effort: ReasoningEffort | str = ReasoningEffort.LOW,
    cache: CacheSpec = None,
) -> Trace:
    """Summarize exact spans ``messages[span_start:span_end]`` with the engine's own summary step.

    For comparing a summarizer with a recorded (native) summary on the identical span: each
    ``(span_start, span_end, n_recorded)`` becomes one compaction row in the trace schema (no
    steps), summarized by the engine's own summary step (its request, instructions and checks;
    :func:`~zett_lab.replay.engine.summarize_span`) through the same recording, cached summary
    channel a replay uses. A summary the engine would discard as not smaller is recorded with
    ``applied=False``; a failed one with its error, as in a replay. The trace has no Setting
    (no limits decided anything): ``trace.settings.setting`` is None.
    """
    effort = ReasoningEffort(reasoning_effort)
    counter = counter or default_counter
    model = build_summarizer(summarizer or DEFAULT_SUMMARIZER)
    identity = summarizer_identity(model)
    channel = SummaryChannel(model, identity, resolve_cache(cache), effort_identity(identity, effort))
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
    settings = TraceSettings(
        setting=None,
        summarizer=identity,
        counter=counter_identity(counter),
        zett_agent_version=zett_agent.__version__,
    )
    return Trace.from_rows(conversation, [], rows, settings, [])
