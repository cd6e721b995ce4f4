"""Every touch point with zett-agent's internals: the instrumented engine and what drives it.

- :class:`EngineProbe` is a mixin placed in front of an engine class (the stock
  ``CompactionExtension`` or a user's subclass): it writes down what the engine's own
  methods computed (estimate, window, checkpoint, outcome) and always returns what they
  returned, so the engine decides exactly as it would alone. :class:`ReplayProbe` and
  :class:`LiveProbe` add where a pass begins and ends in a replay and in a live agent.
- :class:`SummaryChannel` wraps the summary model (the engine calls it directly, so its
  usage and latency are visible nowhere else) and serves the persistent summary cache.
- :func:`summarize_span` runs the engine's own summary step on one given span, and
  :func:`storage_sequences` reads the raw-log sequence numbers a session storage extension keeps.

The replay model and tools that play a recording back through the runtime (public interfaces
only) are in :mod:`zett_lab.replay.playback`.

Nothing here re-implements the engine; :mod:`zett_lab.replay.explain` holds the only
re-implemented logic (why a stock window was not found), checked against the engine in tests.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from zett_agent.agent import AgentRunContext
from zett_agent.events import AgentPhase, AgentPhaseTransitionMixin
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.events import CompactionEvent, ExtensionEvent, MessageAppendedEvent
from zett_agent.extensions.persistence import BaseSessionPersistenceExtension
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage
from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    RetryOptions,
)

from ..asyncrun import closing_stream, run_sync
from ..errors import SettingError
from ..summarizers.cache import CachedSummary, CacheError
from ..tokens import EXACT_COUNTER, provision_o200k
from .deadline import PassDeadline
from .explain import window_skip_reason
from .playback import ReplayCursor, TurnInterrupted
from .recorder import PassRecord, Window, error_kind
from .schema import NO_WINDOW

#: A class or a factory called like ``CompactionExtension(model, *, max_tokens, keep_recent_tokens,
#: count_tokens, reasoning_effort)``; None is the stock engine.
EngineSpec = type[CompactionExtension] | Callable[..., CompactionExtension] | None
#: The attribute an engine class sets to declare the limits along which one replay provably stands for
#: other settings (``("max_tokens",)``, ``("max_tokens", "keep_recent_tokens")``); see ``study.boundaries``.
#: Declaring also promises that the engine keeps nothing between requests but the session's history (as
#: the stock engine): forked replays (``replay.fork``) start a new engine at a turn along those limits.
REUSE_ATTRIBUTE = "zett_lab_reuse"
#: The limits the stock engine is proven to read only in its two comparisons.
STOCK_REUSE = ("max_tokens", "keep_recent_tokens")


class EngineError(SettingError):
    """An engine that cannot be used: not a CompactionExtension, a failing or wrong factory."""


# --- the summary model ----------------------------------------------------------------------------


#: How often a replay asks for the summary of one span: the first attempt and one retry. A span is the
#: stretch of the conversation a summary stands for, named by its first message (the first dialogue
#: message, or the checkpoint it continues): the engine asks again at every later step while the context
#: is over budget, with the same start and a longer end; after this many failed requests the later ones
#: fail at once, without a request (:class:`SummaryNotAsked`), with the last failure's cause and kind.
SPAN_ATTEMPTS = 2
#: Failed summary requests a replay makes at most, over all its spans; the later ones fail at once. With
#: each pass bounded by ``engine_timeout``, the time one replay spends on failing summaries is at most
#: ``REPLAY_FAILED_REQUESTS * engine_timeout`` (documented in docs/reference/limits.md).
REPLAY_FAILED_REQUESTS = 6


class UnfinishedSummary(Exception):
    """The provider did not finish the summary: its stream ended without a finish reason (cut off), or it
    stopped for another reason than the end of its answer (the output limit, a refusal, an interruption).

    Never applied, never cached, never measured: a failed attempt with this cause.
    """

    error_kind = "unfinished"


class SummaryNotAsked(Exception):
    """The summary was not asked for: its span (or the replay) already failed as often as the policy allows.

    It carries the last failure's ``error_kind``, and its message starts with that failure's, so the
    attempts count under the cause they failed for.
    """

    #: The recorder shows the message alone (it already names the error it repeats).
    names_its_cause = True

    def __init__(self, message: str, error_kind: str) -> None:
        super().__init__(message)
        self.error_kind = error_kind


def speaks_a_wire_protocol(model: object) -> bool:
    """Whether a summary model is a provider behind a streaming protocol (zett-agent's providers, built or
    passed), whose answer is finished only when the provider says so (a finish reason)."""
    from zett_agent.providers.base import RetryingProvider

    from ..summarizers import LimitedModel, ProviderSummarizer

    while isinstance(model, LimitedModel):
        model = model.model
    return isinstance(model, (ProviderSummarizer, RetryingProvider))


def unfinished(response: ModelResponse, from_provider: bool) -> str | None:
    """Why a summary response is not a finished summary, or None when it is.

    A provider's answer counts only with a finish reason that says the model ended its answer
    (``stop`` and its synonyms); a model that is not a provider (an offline summarizer, a user's
    object) counts unless it says it stopped for another reason.
    """
    chars = f" ({len(response.message.content)} characters received)"
    if response.finish_reason is None:
        if from_provider:
            return "the provider's stream ended without a finish reason: the response was cut off" + chars
        return None
    stop = response.stop
    if stop is not None and not stop.ok:
        return f"the provider did not finish the summary: {stop.describe()}" + chars
    return None


class SummaryChannel:
    """The summary model as the engine sees it: records text, usage, latency and errors; serves the cache.

    One channel is configured per replay (model, identity, cache); :meth:`bound` gives the
    per-call proxy that writes into one pass's record, so concurrent requests never mix. A replay's
    channel (``policy=True``) counts only finished summaries (:func:`unfinished`) and asks for one
    span's summary at most :data:`SPAN_ATTEMPTS` times, and at most :data:`REPLAY_FAILED_REQUESTS`
    failed requests in all; a live agent's channel only records (the agent decides as it would alone).
    """

    retry = RetryOptions(max_retries=0)

    def __init__(
        self,
        model: AgentModel,
        identity: str,
        cache: Any = None,
        cache_identity: str | None = None,
        *,
        policy: bool = True,
    ) -> None:
        self.model = model
        self.identity = identity
        self.cache = cache
        self.cache_identity = cache_identity or identity
        self.policy = policy
        self.from_provider = speaks_a_wire_protocol(model)
        #: Per span (its first message's digest): failed requests, the last cause and its error kind.
        self.span_failures: dict[str, tuple[int, str, str]] = {}
        self.failed_requests = 0
        self._last: tuple[str, str] = ("", "")

    def bound(self, call: dict[str, Any]) -> _BoundChannel:
        return _BoundChannel(self, call)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Used unbound (outside a probed pass): nothing is recorded."""
        async for event in self.bound({}).stream(request):
            yield event

    def refusal(self, span: str) -> SummaryNotAsked | None:
        """The error a summary of ``span`` fails with at once, or None when it may be asked for."""
        if not self.policy:
            return None
        failed, cause, kind = self.span_failures.get(span, (0, "", ""))
        if failed >= SPAN_ATTEMPTS:
            return SummaryNotAsked(
                f"{cause} [not asked again: the summary of this span already failed {failed} times in this replay; "
                f"a span is asked at most {SPAN_ATTEMPTS} times]",
                kind,
            )
        if self.failed_requests >= REPLAY_FAILED_REQUESTS:
            cause, kind = self._last
            return SummaryNotAsked(
                f"{cause} [not asked again: {self.failed_requests} summary requests of this replay failed; "
                f"a replay makes at most {REPLAY_FAILED_REQUESTS}]",
                kind,
            )
        return None

    def failed(self, span: str, error: BaseException, kind: str) -> None:
        """A request for ``span`` was sent and failed with ``error`` (of ``kind``)."""
        failed, _, _ = self.span_failures.get(span, (0, "", ""))
        if isinstance(error, asyncio.CancelledError):
            cause = "CancelledError: the pass was cancelled while the summary was being written"
        else:
            cause = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        self.span_failures[span] = (failed + 1, cause, kind)
        self._last = (cause, kind)
        self.failed_requests += 1


def _span_key(request: ModelRequest) -> str:
    """A span's name: a digest of the first message the summary request holds after its instructions."""
    from zett_agent.storage import encode_messages

    first = request.messages[1:2]
    return hashlib.sha256(json.dumps(encode_messages(list(first)), sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class _BoundChannel:
    channel: SummaryChannel
    call: dict[str, Any]
    retry: RetryOptions = field(default_factory=lambda: RetryOptions(max_retries=0))
    #: The span of the request sent through this proxy (None: served from the cache, refused, or not yet sent).
    sent_span: str | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        channel, call = self.channel, self.call
        call.update(identity=channel.identity, cache_hit=False)
        cache = channel.cache
        key = cache.key(channel.cache_identity, request) if cache is not None else None
        cached = cache.get(key) if key is not None else None
        if cached is not None:
            call.update(
                cache_hit=True,
                text=cached.text.strip(),
                latency_s=cached.latency_s,
                input_tokens=cached.input_tokens,
                output_tokens=cached.output_tokens,
            )
            yield ModelEvent.text(cached.text)
            usage = ModelUsage(input_tokens=cached.input_tokens or 0, output_tokens=cached.output_tokens or 0)
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(content=cached.text), finish_reason="stop", usage=usage)
            )
            return
        span = _span_key(request)
        refusal = channel.refusal(span)
        if refusal is not None:
            raise refusal
        self.sent_span = span
        started = time.perf_counter()
        async with closing_stream(channel.model.stream(request)) as events:
            async for event in events:
                if event.response is not None:
                    self._record(event.response, time.perf_counter() - started)
                    problem = unfinished(event.response, channel.from_provider) if channel.policy else None
                    if problem is not None:
                        call["text"] = None  # what arrived is no summary: never shown, cached or measured
                        raise UnfinishedSummary(problem)
                    if key is not None and call["text"] and not call["tool_calls"]:
                        cache.put(
                            key,
                            CachedSummary(
                                text=event.response.message.content,
                                latency_s=call["latency_s"],
                                input_tokens=call["input_tokens"],
                                output_tokens=call["output_tokens"],
                            ),
                        )
                elif event.tool_call_delta is not None:
                    call["tool_calls"] = True
                yield event

    def failed(self, error: BaseException) -> None:
        """The summary step failed (in the stream, or in the engine's checks of what it returned)."""
        if self.sent_span is not None and not isinstance(error, CacheError):
            self.channel.failed(self.sent_span, error, error_kind(error, self.call))
            self.sent_span = None

    def _record(self, response: ModelResponse, latency: float) -> None:
        usage = response.usage
        reported = usage.input_tokens > 0 or usage.output_tokens > 0
        self.call.update(
            text=response.message.content.strip(),
            tool_calls=bool(response.message.tool_calls),
            latency_s=latency,
            input_tokens=usage.input_tokens if reported else None,
            output_tokens=usage.output_tokens if reported else None,
        )


def effort_identity(identity: str, reasoning_effort: ReasoningEffort | str | None) -> str:
    """A summarizer identity with the reasoning effort the engine passes it (both decide its summaries: the cache's key)."""
    effort = ReasoningEffort(reasoning_effort if reasoning_effort is not None else ReasoningEffort.LOW).value
    return f"{identity}|effort={effort}"


def _channel(model: AgentModel, state: PassRecord) -> AgentModel:
    """The model the engine passed, recording into ``state`` (a replay's channel keeps its cache)."""
    call: dict[str, Any] = {}
    state.summary_call = call
    if not isinstance(model, SummaryChannel):
        from ..summarizers import summarizer_identity

        model = SummaryChannel(model, summarizer_identity(model), policy=False)  # a live agent decides alone
    return model.bound(call)


# --- the probe ----------------------------------------------------------------------------------------

#: The pass a running ``compact`` records into. The window hook is static in the engine (it gets no
#: context), and concurrent requests run in their own asyncio tasks, so a context variable keeps them apart.
_COMPACTING: contextvars.ContextVar[PassRecord | None] = contextvars.ContextVar("zett_lab_compacting", default=None)


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
            model = _channel(model, state)
        try:
            checkpoint = await super()._summarize_checkpoint(
                context, older, model=model, reasoning_effort=reasoning_effort
            )
        except BaseException as error:
            if state is not None:
                state.error_in_summary = True
            if isinstance(model, _BoundChannel):
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


# --- building an instrumented engine --------------------------------------------------------------------


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


def engine_name(engine: EngineSpec) -> str:
    """How a trace names an engine: ``CompactionExtension`` (stock), ``module.Class``, or a factory's name."""
    if engine is None or engine is CompactionExtension:
        return "CompactionExtension"
    if isinstance(engine, functools.partial):
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(engine.keywords.items()))
        return f"{engine_name(engine.func)}({options})"
    module = getattr(engine, "__module__", None) or ""
    name = getattr(engine, "__qualname__", None) or type(engine).__qualname__
    return f"{module}.{name}" if module and module != "builtins" else name


def engine_reuse(engine: EngineSpec) -> tuple[str, ...]:
    """The limits along which a replay of ``engine`` may stand for other settings (empty: none).

    The stock engine is proven for both (``study.boundaries``); a user engine gets only what
    its class declares in ``zett_lab_reuse``; a factory other than ``functools.partial`` of a
    declaring class gets nothing (its options may read the limits anywhere).
    """
    if engine is None or engine is CompactionExtension:
        return STOCK_REUSE
    target = engine.func if isinstance(engine, functools.partial) else engine
    if not isinstance(target, type):
        return ()
    declared = getattr(target, REUSE_ATTRIBUTE, ())
    return tuple(limit for limit in STOCK_REUSE if limit in declared)


def check_engine(engine: EngineSpec) -> None:
    """Raise :class:`EngineError` unless ``engine`` is None, a CompactionExtension subclass, or a callable."""
    if engine is None:
        return
    if isinstance(engine, type):
        if not issubclass(engine, CompactionExtension):
            name = f"{engine.__module__}.{engine.__qualname__}"
            raise EngineError(f"engine {name} is not a subclass of zett_agent's CompactionExtension")
        return
    if isinstance(engine, CompactionExtension):
        raise EngineError(
            f"engine= takes a class or a factory, not a configured instance ({type(engine).__name__}); "
            "to record a live agent's extension use zett_lab.instrument(extension, path)"
        )
    if not callable(engine):
        raise EngineError(f"engine must be a CompactionExtension subclass or a factory, got {type(engine).__name__}")


def build_engine(engine: EngineSpec, probe: type[EngineProbe], **options: Any) -> CompactionExtension:
    """An instrumented engine: ``engine`` (class or factory) built with ``options``, ``probe`` in front."""
    check_engine(engine)
    name = engine_name(engine)
    target = CompactionExtension if engine is None else engine
    try:
        if isinstance(target, type):
            built = instrumented_class(target, probe)(**options)
        else:
            made = target(**options)
            if not isinstance(made, CompactionExtension):
                raise EngineError(f"engine factory {name} returned {type(made).__name__}, not a CompactionExtension")
            built = graft(made, probe)
    except EngineError:
        raise
    except Exception as error:
        raise EngineError(
            f"engine {name} could not be built with {sorted(options)}: {type(error).__name__}: {error}"
        ) from error
    for limit in ("max_tokens", "keep_recent_tokens"):
        if getattr(built, limit, None) != options[limit]:
            raise EngineError(
                f"engine {name} has {limit}={getattr(built, limit, None)!r} but was asked for {options[limit]!r}; "
                "a factory must pass the limits on, or the trace would name a setting the engine did not use"
            )
    return built


def graft(extension: CompactionExtension, probe: type[EngineProbe]) -> CompactionExtension:
    """A copy of a configured extension with ``probe`` in front of its class (the original is untouched).

    Attributes are shared shallowly; a bound method the extension stored on itself in
    ``__init__`` stays bound to the original object.
    """
    grafted = copy.copy(extension)
    grafted.__class__ = instrumented_class(type(extension), probe)
    return grafted


# --- replay: the probe of a replay (its model, tools and cursor are in playback.py) -----------------------


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


# --- one span, summarized by the engine's own summary step -----------------------------------------------------


class _SpanContext:
    """What the engine's summary step needs from a run context: a session id and somewhere to emit deltas."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    async def emit(self, event: Any) -> None:
        return None


def summarize_span(
    older: Sequence[AnyMessage], channel: SummaryChannel, effort: ReasoningEffort, session_id: str, count_tokens: Any
) -> tuple[Any, Exception | None, dict[str, Any]]:
    """``CompactionExtension._summarize_checkpoint`` on one span, outside a run: (checkpoint, error, call record).

    The engine's own request, instructions and checks; the channel records the call and serves the cache.
    """
    engine = CompactionExtension(
        model=channel, max_tokens=1, keep_recent_tokens=1, count_tokens=count_tokens, reasoning_effort=effort
    )
    call: dict[str, Any] = {}
    context = cast(AgentRunContext, _SpanContext(session_id))  # all the summary step reads of a context
    bound = channel.bound(call)
    try:
        summarizing = engine._summarize_checkpoint(context, older, model=bound, reasoning_effort=effort)
        return run_sync(summarizing), None, call
    except Exception as error:  # noqa: BLE001 - a failed summary is a recorded attempt, never a result
        bound.failed(error)
        return None, error, call


class _FrameCapture:
    """A summary model that keeps the request it is sent and answers it with one word."""

    retry = RetryOptions(max_retries=0)

    def __init__(self) -> None:
        self.request: ModelRequest | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.request = request
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content="checkpoint")))


@functools.lru_cache(maxsize=1)
def summary_frame() -> tuple[AnyMessage, AnyMessage]:
    """The messages the engine's summary step puts around a span: its instructions and its closing request.

    Read from the engine itself (its summary step asked to summarize an empty span), never copied: what a
    summary call's input costs beyond the span (:mod:`zett_lab.measure.cost`) follows the installed engine.
    """
    capture = _FrameCapture()
    context = cast(AgentRunContext, _SpanContext("summary-frame"))
    engine = CompactionExtension(model=capture, max_tokens=1, keep_recent_tokens=1)
    run_sync(engine._summarize_checkpoint(context, [], model=capture, reasoning_effort=ReasoningEffort.LOW))
    assert capture.request is not None  # the summary step always sends its request
    messages = capture.request.messages
    return messages[0], messages[-1]


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


class _EngineEstimator:
    """zett-agent's own default estimator (``CompactionExtension._count_tokens``), its vocabulary provisioned
    offline first: the reference every exact counter is checked against, and the naive baseline of benchmarks."""

    identity = EXACT_COUNTER

    def __call__(self, messages: Sequence[AnyMessage]) -> int:
        provision_o200k()
        return CompactionExtension._count_tokens(messages)


engine_count_tokens = _EngineEstimator()


def counts_with_engine_estimator(extension: CompactionExtension) -> bool:
    """Whether an extension counts with zett-agent's own estimator (the default), not a counter it was given."""
    return extension.count_tokens is CompactionExtension._count_tokens


def storage_sequences(context: AgentRunContext) -> list[int | None] | None:
    """Raw-log sequence numbers of the context's non-system messages, from a session storage extension.

    ``SQLiteSessionExtension`` (any ``BaseSessionPersistenceExtension``) keeps one sequence per
    non-system context position (the checkpoint stands for ``compacted_through_sequence``);
    None when the agent has no session storage.
    """
    for extension in context.extensions:
        if isinstance(extension, BaseSessionPersistenceExtension):
            request = extension._requests.get(context)
            return list(request.context_sequences) if request is not None else None
    return None


async def stored_raw_log(context: AgentRunContext) -> list[tuple[int, AnyMessage, ModelUsage | None]] | None:
    """Every message the session storage's raw log holds for the context's session: (sequence, message, usage).

    Read through the storage's own ``list_raw_messages`` (zett-agent's SQL storages, SQLite among
    them), so the agent's own connection answers; None when the agent has no such storage.
    """
    for extension in context.extensions:
        if isinstance(extension, BaseSessionPersistenceExtension):
            listing = getattr(getattr(extension, "storage", None), "list_raw_messages", None)
            if listing is None:
                return None
            records: list[tuple[int, AnyMessage, ModelUsage | None]] = []
            while True:
                page = await listing(context.session_id, after_sequence=records[-1][0] if records else 0, limit=5_000)
                for record in page:
                    usage = None
                    if record.input_tokens is not None:
                        usage = ModelUsage(
                            input_tokens=record.input_tokens,
                            output_tokens=record.output_tokens or 0,
                            cache_read_tokens=record.cache_read_tokens or 0,
                            cache_write_tokens=record.cache_write_tokens or 0,
                            reasoning_tokens=record.reasoning_tokens or 0,
                        )
                    records.append((record.sequence, record.message, usage))
                if len(page) < 5_000:
                    return records
    return None
