"""Running zett-agent's async runtime from ordinary (and notebook) code."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, aclosing, contextmanager
from typing import Any, TypeVar, cast

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


@contextmanager
def signals_deferred() -> Iterator[Callable[[], None]]:
    """Hold Ctrl-C (and a SIGTERM handled in Python) until the caller's check point, the function yielded.

    For an event loop writing a database: the loop would otherwise cancel whatever await the signal
    lands in, a connection's close among them (a traceback from the database driver). The check point
    runs the signal's own handler (``KeyboardInterrupt``, :class:`~zett_lab.errors.Terminated`) between two
    writes, and the caller's ``finally`` closes the database as usual; a signal that came after the last
    check point acts when the block ends. Only in the main thread (elsewhere signals are not delivered); a
    signal left to the system's default is not held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    held = {number: handler for number, handler in handlers.items() if callable(handler)}
    received: list[int] = []

    def note(number: int, frame: Any) -> None:
        received.append(number)

    def act() -> None:
        """Put the handlers back, then run the first held signal's."""
        for number, handler in held.items():
            signal.signal(number, handler)
        if received and held:
            held.clear()
            cast("Callable[[int, Any], None]", signal.getsignal(received[0]))(received[0], None)

    def check() -> None:
        if received:
            act()

    for number in held:
        signal.signal(number, note)
    try:
        yield check
    finally:
        act()
