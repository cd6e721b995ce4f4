"""The probe: a mixin in front of an engine class that writes down what the engine's own methods computed and
returns what they returned, and its two kinds (:class:`ReplayProbe`, :class:`LiveProbe`)."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from zett_agent.agent import AgentRunContext
from zett_agent.events import AgentPhase, AgentPhaseTransitionMixin
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.events import CompactionEvent, ExtensionEvent, MessageAppendedEvent
from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import (
    AgentModel,
    ModelRequest,
    ModelResponse,
    ReasoningEffort,
)

from ...summarizers.cache import CacheError
from ..deadline import PassDeadline
from ..explain import window_skip_reason
from ..playback import ReplayCursor, TurnInterrupted
from ..recorder import PassRecord, Window
from ..schema import NO_WINDOW
from .summary_channel import BoundChannel, channel_for_pass

# --- the probe ----------------------------------------------------------------------------------------

#: The pass a running ``compact`` records into. The window hook is static in the engine (it gets no
#: context), and concurrent requests run in their own asyncio tasks, so a context variable keeps them apart.
_COMPACTING: contextvars.ContextVar[PassRecord | None] = contextvars.ContextVar("zett_lab_compacting", default=None)
_Probe = TypeVar("_Probe", bound="EngineProbe")


class EngineProbe(CompactionExtension):
    """Mixin in front of an engine class: records what the engine computes, returns it unchanged.

    Subclasses say which pass a context belongs to (:meth:`_probe_pass`) and whether a
    failure is re-raised (``_probe_strict``: a live agent fails its request exactly as the
    uninstrumented engine would; a non-strict replay records the failure and goes on).
    """

    _probe_strict: bool = True
    _probe_counter: Callable[[Sequence[AnyMessage]], int] | None = None
    #: The time limit of each pass (a replay's ``engine_timeout``); None: unbounded, as in a live agent.
    _probe_deadline: PassDeadline | None = None

    def _probe_pass(self, context: AgentRunContext) -> PassRecord | None:
        raise NotImplementedError

    def _probe_failed(self, state: PassRecord) -> None:
        """A pass failed and is re-raised (strict): where the failure should be remembered, if anywhere."""

    def _count_context_tokens(self, context: AgentRunContext) -> int:
        estimate = super()._count_context_tokens(context)
        state = self._probe_pass(context)
        if state is not None and state.estimate is None:
            messages = context.state.messages
            baseline = self._usage_baselines.get(context)
            from_usage = baseline is not None and baseline[1] <= len(messages)
            state.estimate = estimate
            state.estimate_source = "usage" if from_usage else "estimator"
            state.estimator_tokens = (self._probe_counter or self.count_tokens)(messages) if from_usage else estimate
            state.n_messages = len(messages)
        return estimate

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
        state = _COMPACTING.get()
        if state is not None:
            state.window, state.window_checked = window, True
            if window is None:
                # The probe's counter gives the engine's integers, memoized (the walk is quadratic in the engine's).
                state.window_skip = self._explain_no_window(
                    messages, keep_recent_tokens, self._probe_counter or count_tokens
                )
        return window

    def _explain_no_window(
        self, messages: Sequence[AnyMessage], keep: int, count: Callable[[Sequence[AnyMessage]], int]
    ) -> str:
        """The engine's own reason (``explain_no_window``), the stock walk's, or a generic one."""
        explain = getattr(self, "explain_no_window", None)
        if callable(explain):
            return str(explain(messages, keep_recent_tokens=keep, count_tokens=count))
        if uses_stock_window(type(self)):
            return window_skip_reason(messages, keep_recent_tokens=keep, count_tokens=count) or NO_WINDOW
        return NO_WINDOW

    async def _summarize_checkpoint(
        self,
        context: AgentRunContext,
        older: Sequence[AnyMessage],
        *,
        model: AgentModel,
        reasoning_effort: ReasoningEffort,
    ):
        state = self._probe_pass(context)
        if state is not None:
            model = channel_for_pass(model, state)
        try:
            checkpoint = await super()._summarize_checkpoint(
                context, older, model=model, reasoning_effort=reasoning_effort
            )
        except BaseException as error:
            if state is not None:
                state.error_in_summary = True
            if isinstance(model, BoundChannel):
                deadline = self._probe_deadline
                expired = isinstance(error, asyncio.CancelledError) and deadline is not None and deadline.expired
                model.failed(deadline.expired_error() if expired and deadline is not None else error)
            raise
        if state is not None:
            state.checkpoint = checkpoint
        return checkpoint

    async def compact(self, context: AgentRunContext, *, force: bool = False) -> CompactionEvent | None:
        state = self._probe_pass(context)
        if state is None:
            return await super().compact(context, force=force)
        if state.n_messages == 0:
            state.n_messages = len(context.state.messages)
        before = list(context.state.messages)
        running = _COMPACTING.set(state)
        deadline = self._probe_deadline
        try:
            if deadline is None:
                event = await super().compact(context, force=force)
            else:
                event = await deadline.run(super().compact(context, force=force))
        except CacheError:
            raise  # the summary cache is unusable: the replay stops with its one message, no pass records it
        except Exception as error:
            state.error = error
            if self._probe_strict:
                self._probe_failed(state)
                raise
            await leave_compacting_phase(context)
            return None
        finally:
            _COMPACTING.reset(running)
        state.applied = event is not None
        if event is not None and state.window is None:
            state.window = window_of_event(before, event)
        return event


def stock_window(
    messages: Sequence[AnyMessage], keep_recent_tokens: int, count_tokens: Callable[[Sequence[AnyMessage]], int]
) -> Window | None:
    """The stock engine's own window rule (``CompactionExtension._select_compaction_window``) on one context."""
    return CompactionExtension._select_compaction_window(
        messages, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens
    )


def uses_stock_window(engine_class: type) -> bool:
    """Whether an engine class selects its window with the stock ``_select_compaction_window``."""
    for klass in engine_class.__mro__:
        if issubclass(klass, EngineProbe) and klass.__module__ == __name__:
            continue
        if "_select_compaction_window" in vars(klass):
            return klass is CompactionExtension
    return False


def window_of_event(before: Sequence[AnyMessage], event: CompactionEvent) -> Window:
    """The window an applied compaction replaced, read from its event (for engines that skip the window hook)."""
    instructions = [m for m in before if isinstance(m, SystemMessage)]
    dialogue: list[AnyMessage] = [m for m in before if not isinstance(m, SystemMessage)]
    return instructions, dialogue[: event.compressed_to], dialogue[event.kept_from - 1 : event.kept_to]


async def leave_compacting_phase(context: AgentRunContext) -> None:
    """Non-strict replays go on after a failed pass, where the engine would fail the request.

    The engine announced ``COMPACTION_STARTED``; put the runtime back to READY the way
    ``COMPACTION_COMPLETED`` would, without publishing a completion that did not happen.
    """
    if context.state.phase is AgentPhase.COMPACTING:
        await AgentPhaseTransitionMixin._transition_phase(context, AgentPhase.READY, expected=(AgentPhase.COMPACTING,))


# --- the probe in front of an engine class --------------------------------------------------------------------


#: Instrumented classes already built, so each (engine class, probe) pair is built once.
_INSTRUMENTED: dict[tuple[type, type], type[CompactionExtension]] = {}


def instrumented_class(engine_class: type[CompactionExtension], probe: type[EngineProbe]) -> type[CompactionExtension]:
    """``probe`` placed in front of ``engine_class`` (the user's class runs unchanged behind it)."""
    if issubclass(engine_class, probe):
        return engine_class
    built = _INSTRUMENTED.get((engine_class, probe))
    if built is None:
        name = f"{probe.__name__}[{engine_class.__name__}]"
        built = _INSTRUMENTED[(engine_class, probe)] = type(name, (probe, engine_class), {"__module__": __name__})
    return built


# --- the probe of a replay (its model, tools and cursor are in replay/playback.py) --------------------


class ReplayProbe(EngineProbe):
    """The probe of a replay: one pass before every replayed model step, plus the manual passes asked for."""

    _replay: ReplayCursor

    def _probe_pass(self, context: AgentRunContext) -> PassRecord | None:
        return self._replay.current

    def _probe_failed(self, state: PassRecord) -> None:
        self._replay.strict_failure = state

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        replay = self._replay
        if replay.turn_was_interrupted():
            # No model step happened here in the recording (the user interrupted):
            # end the request before the engine acts.
            replay.interrupted_turns.append(replay.recording.turn)
            raise TurnInterrupted
        step = replay.recording.steps
        if step in replay.manual_steps:
            replay.begin_pass("manual", replay.n_recorded)
            await self.compact(context, force=True)
            replay.finish_pass(step)
        replay.begin_pass(None, replay.n_recorded)
        await super().before_model(context, request)

    async def on_compact(self, context: AgentRunContext) -> None:
        replay = self._replay
        replay.begin_pass("manual", replay.turn_start)
        await super().on_compact(context)
        replay.finish_pass(replay.recording.steps)
        replay.current = None


def drive_replay(
    engine: CompactionExtension, cursor: ReplayCursor, strict: bool, counter: Callable[[Sequence[AnyMessage]], int]
) -> None:
    """Point an engine built with :class:`ReplayProbe` in front at the replay it records into (``cursor``), with
    whether a failure is re-raised and the counter the replay measures with."""
    probe = _probe_of(engine, ReplayProbe)
    probe._replay, probe._probe_strict, probe._probe_counter = cursor, strict, counter


def limit_passes(engine: CompactionExtension, deadline: PassDeadline | None) -> None:
    """Bound each pass of an engine with a probe in front by ``deadline`` (a replay's ``engine_timeout``)."""
    _probe_of(engine, EngineProbe)._probe_deadline = deadline


# --- live agents ---------------------------------------------------------------------------------------------


class LiveProbe(EngineProbe):
    """The probe of a live agent: a pass per model step and per ``Agent.compact``, kept apart per request.

    ``_live`` is the recorder that writes the trace file (:mod:`zett_lab.replay.live`); it is
    told where each pass begins and ends, each model step's response and each new message.
    Failures are recorded and re-raised: the agent fails exactly as it would uninstrumented.
    """

    _live: Any

    def _probe_pass(self, context: AgentRunContext) -> PassRecord | None:
        return self._live.pass_of(context)

    async def before_model(self, context: AgentRunContext, request: ModelRequest) -> None:
        self._live.begin_pass(context, None)
        try:
            await super().before_model(context, request)
        finally:
            self._live.end_pass(context)

    async def after_model(self, context: AgentRunContext, response: ModelResponse) -> None:
        await super().after_model(context, response)
        self._live.step(context, response)

    async def on_compact(self, context: AgentRunContext) -> None:
        self._live.begin_pass(context, "manual")
        try:
            await super().on_compact(context)
        finally:
            self._live.end_pass(context, manual=True)

    async def on_state(self, context: AgentRunContext) -> None:
        await super().on_state(context)
        await self._live.reconcile(context)  # once per session and process: what the storage holds is in the trace

    async def on_event(self, context: AgentRunContext, event: ExtensionEvent) -> None:
        await super().on_event(context, event)
        if isinstance(event, MessageAppendedEvent):
            self._live.message(context, event.message, event.usage)
        elif isinstance(event, CompactionEvent):
            self._live.event(context, event)


def record_live(engine: CompactionExtension, recorder: Any, counter: Callable[[Sequence[AnyMessage]], int]) -> None:
    """Point an engine grafted with :class:`LiveProbe` in front at the recorder that writes its trace file, and the
    counter it measures with."""
    probe = _probe_of(engine, LiveProbe)
    probe._live, probe._probe_counter = recorder, counter


def _probe_of(engine: CompactionExtension, probe: type[_Probe]) -> _Probe:
    if not isinstance(engine, probe):
        raise TypeError(f"{type(engine).__name__} has no {probe.__name__} in front of it")
    return engine
