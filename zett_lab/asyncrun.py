"""Running zett-agent's async runtime from ordinary (and notebook) code."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine
from contextlib import AbstractAsyncContextManager, aclosing
from typing import TypeVar, cast

T = TypeVar("T")


def run_sync(coroutine: Coroutine[object, None, T]) -> T:
    """Run a coroutine to completion, also from inside a running event loop (Jupyter).

    In a notebook a loop is already running, so the coroutine gets its own loop
    in a worker thread instead of failing with "asyncio.run() cannot be called".
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def closing_stream(stream: AsyncIterator[T]) -> AbstractAsyncContextManager[AsyncIterator[T]]:
    """``contextlib.aclosing`` for an event stream typed ``AsyncIterator``.

    zett-agent's model and agent streams are async generators (they have ``aclose``), but their
    annotations say only ``AsyncIterator``; this is the one place that narrowing is stated.
    """
    return aclosing(cast("AsyncGenerator[T, None]", stream))
