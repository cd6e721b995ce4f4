"""The engine's own summary step outside a run: one given span summarized (:func:`summarize_span`), and the
frame the step puts around every span (:func:`summary_frame`)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Sequence
from typing import cast

from zett_agent.agent import AgentRunContext
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import AnyMessage, AssistantMessage
from zett_agent.model import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ReasoningEffort,
    RetryOptions,
)

from ...asyncrun import run_sync
from ...tokens import TokenCounter
from ..recorder import SummaryCall
from .summary_channel import SummaryChannel


class _SpanContext:
    """What the engine's summary step needs from a run context: a session id and somewhere to emit deltas."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    async def emit(self, event: object) -> None:
        return None


def summarize_span(
    older: Sequence[AnyMessage],
    channel: SummaryChannel,
    effort: ReasoningEffort,
    session_id: str,
    count_tokens: TokenCounter,
) -> tuple[CompactedMessage | None, Exception | None, SummaryCall]:
    """``CompactionExtension._summarize_checkpoint`` on one span, outside a run: (checkpoint, error, call record).

    The engine's own request, instructions and checks; the channel records the call and serves the cache.
    """
    engine = CompactionExtension(
        model=channel, max_tokens=1, keep_recent_tokens=1, count_tokens=count_tokens, reasoning_effort=effort
    )
    call: SummaryCall = {}
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
