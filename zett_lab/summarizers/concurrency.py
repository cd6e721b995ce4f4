"""At most ``max_concurrency`` summary calls at once, per event loop (:class:`LimitedModel`)."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncIterator

from zett_agent.model import (
    AgentModel,
    ModelEvent,
    ModelRequest,
    RetryOptions,
)

from ..errors import SettingError
from .identity import summarizer_identity


def check_concurrency(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingError(f"max_concurrency must be a positive int or None, got {value!r}")
    return value


class PerLoop:
    """One semaphore per running event loop (asyncio primitives are bound to one loop)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def semaphore(self) -> asyncio.Semaphore | None:
        if self.limit is None:
            return None
        loop = asyncio.get_running_loop()
        with self._lock:
            semaphore = self._semaphores.get(loop)
            if semaphore is None:
                semaphore = self._semaphores[loop] = asyncio.Semaphore(self.limit)
            return semaphore


async def limited(stream: AsyncIterator[ModelEvent], semaphore: asyncio.Semaphore | None) -> AsyncIterator[ModelEvent]:
    """Pass ``stream`` through, holding ``semaphore`` (if any) for the whole call; always close it."""
    try:
        if semaphore is None:
            async for event in stream:
                yield event
        else:
            async with semaphore:
                async for event in stream:
                    yield event
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class LimitedModel:
    """Wrap any AgentModel so at most ``max_concurrency`` summary calls run at once (per event loop)."""

    def __init__(self, model: AgentModel, max_concurrency: int | None) -> None:
        self.model = model
        self.max_concurrency = check_concurrency(max_concurrency)
        self._limit = PerLoop(self.max_concurrency)
        self.retry = getattr(model, "retry", RetryOptions())

    @property
    def identity(self) -> str:
        return summarizer_identity(self.model)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return self._stream(request)

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in limited(self.model.stream(request), self._limit.semaphore()):
            yield event

    async def aclose(self) -> None:
        close = getattr(self.model, "aclose", None)
        if close is not None:
            await close()
