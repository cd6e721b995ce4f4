"""The summary model as the engine sees it: records each summary call and serves the summary cache.

The engine calls its summary model directly, so a call's usage and latency are visible nowhere else; the
channel also applies a replay's retry policy (:data:`SPAN_ATTEMPTS`, :data:`REPLAY_FAILED_REQUESTS`)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from zett_agent.messages import AssistantMessage
from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelUsage,
    ReasoningEffort,
    RetryOptions,
)

from ...asyncrun import closing_stream
from ...summarizers.cache import CachedSummary, CacheError, SummaryCache
from ...summarizers.key_bytes import message_bytes
from ..recorder import PassRecord, SummaryCall, error_kind

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

    from ...summarizers import LimitedModel, ProviderSummarizer

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
        cache: SummaryCache | None = None,
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

    def bound(self, call: SummaryCall) -> BoundChannel:
        """The proxy the engine calls for one pass, recording into ``call``."""
        return BoundChannel(self, call)

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
    """A span's name: a digest of the first message the summary request holds after its instructions, as the
    cache key writes it (remembered per message: a long span's first message is a checkpoint of most of it)."""
    return hashlib.sha256(message_bytes(request.messages[1:2])).hexdigest()


@dataclass
class BoundChannel:
    """Not frozen: it notes the span it sent when the engine's summary call goes out."""

    channel: SummaryChannel
    call: SummaryCall
    retry: RetryOptions = field(default_factory=lambda: RetryOptions(max_retries=0))
    #: The span of the request sent through this proxy (None: served from the cache, refused, or not yet sent).
    sent_span: str | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        channel, call = self.channel, self.call
        call.update({"identity": channel.identity, "cache_hit": False})
        cache = channel.cache
        key = cache.key(channel.cache_identity, request) if cache is not None else None
        cached = cache.get(key) if cache is not None and key is not None else None
        if cached is not None:
            call.update(
                {
                    "cache_hit": True,
                    "text": cached.text.strip(),
                    "latency_s": cached.latency_s,
                    "input_tokens": cached.input_tokens,
                    "output_tokens": cached.output_tokens,
                }
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
                    if cache is not None and key is not None and call["text"] and not call["tool_calls"]:
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
            {
                "text": response.message.content.strip(),
                "tool_calls": bool(response.message.tool_calls),
                "latency_s": latency,
                "input_tokens": usage.input_tokens if reported else None,
                "output_tokens": usage.output_tokens if reported else None,
            }
        )


def effort_identity(identity: str, reasoning_effort: ReasoningEffort | str | None) -> str:
    """A summarizer identity with the reasoning effort the engine passes it (both decide its summaries: the cache's key)."""
    effort = ReasoningEffort(reasoning_effort if reasoning_effort is not None else ReasoningEffort.LOW).value
    return f"{identity}|effort={effort}"


def channel_for_pass(model: AgentModel, state: PassRecord) -> AgentModel:
    """The model the engine passed, recording into ``state`` (a replay's channel keeps its cache)."""
    call: SummaryCall = {}
    state.summary_call = call
    if not isinstance(model, SummaryChannel):
        from ...summarizers import summarizer_identity

        model = SummaryChannel(model, summarizer_identity(model), policy=False)  # a live agent decides alone
    return model.bound(call)
