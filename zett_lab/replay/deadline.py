"""A time limit on each compaction pass of a replay: a pass that does not finish is a failed pass, never a hang.

A replay runs a user's engine, which may never return. :class:`PassDeadline` bounds every pass
(``compact``, the summary call included) to ``engine_timeout`` seconds; a pass that runs over raises
:class:`EngineTimeout` inside it, which the probe records like any other failure of the pass.
What bounds what:

- **Awaiting forever** (an engine or summary model that never answers): the pass's task is
  cancelled at the limit. Always bounded (unless the engine swallows the cancellation).
- **Python code that never ends** (a window rule stuck in a loop): a watchdog thread raises
  :class:`EngineTimeout` in the thread running the pass, delivered before its next bytecode
  (CPython's ``PyThreadState_SetAsyncExc``; on the main thread, a ``SIGALRM`` sent to it, whose
  handler raises). Bounded in every thread.
- **One blocking call into C** (``time.sleep(3600)``, a socket read without a timeout): bounded
  only on the main thread while ``SIGALRM`` is free (no handler and no ``ITIMER_REAL`` of anyone
  else's), since a signal is the only thing that interrupts a system call and Python runs signal
  handlers only on the main thread. That covers scripts, the command line and a sweep's worker
  processes; not a notebook (whose replays run on a helper thread beside its event loop) nor a
  sweep's concurrent replays in threads, where such a call delays the timeout until it returns.
- **Never bounded**: C code that neither returns nor lets Python check for signals (a C
  extension's own loop). Python cannot stop a thread from outside, so nothing can.

The watchdog only interrupts a thread whose stack is inside the pass at that moment (the signal
handler checks exactly; off the main thread the check and the interruption are two steps, so a pass
that ends in between gets the timeout just after it, where the replay stops with an error naming it).
"""

from __future__ import annotations

import asyncio
import ctypes
import math
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

from ..errors import SettingError

T = TypeVar("T")

#: Seconds a pass may take by default: ten minutes, far longer than a summary call should take (a
#: provider summary of a long context takes seconds to a few minutes; zett-agent's providers give
#: up after 600 s of silence), yet an engine that hangs costs a replay minutes, not forever.
DEFAULT_ENGINE_TIMEOUT = 600.0
#: The error kind a timed-out pass is recorded with (``error_kind`` column).
TIMEOUT_KIND = "timeout"


class EngineTimeout(Exception):
    """An engine's compaction pass did not finish within ``engine_timeout`` seconds."""

    error_kind = TIMEOUT_KIND

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "the engine's pass did not finish within its time limit"


def check_engine_timeout(value: object) -> float | None:
    """``engine_timeout`` as seconds (None: unbounded); :class:`SettingError` unless positive and finite."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SettingError(f"engine_timeout must be a positive number of seconds or None, got {value!r}")
    return float(value)


class PassDeadline:
    """The time limit of the passes of one replay, and the watchdog that enforces it off the event loop.

    Use as a context manager around the replay (it starts and stops the watchdog and, on the main
    thread, the ``SIGALRM`` handler), and :meth:`run` around each pass.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends: float | None = None
        self._thread: int | None = None
        self._stopped = threading.Event()
        self._signal = False
        self._interrupted = False
        self._expired = False
        self._watchdog: threading.Thread | None = None

    async def run(self, work: Awaitable[T]) -> T:
        """``await work`` within the limit; :class:`EngineTimeout` (with what the pass was doing) when over it.

        Code that catches the interruption and raises its own error instead (a library turning
        every exception into a ``ValueError``) still ends as the timeout it is.
        """
        self._interrupted = self._expired = False
        self._thread, self._ends = threading.get_ident(), time.monotonic() + self.seconds
        task = asyncio.current_task()
        assert task is not None, "a pass runs in a task"
        expiry = asyncio.get_running_loop().call_later(self.seconds, self._expire, task)
        try:
            return await work
        except (Exception, asyncio.CancelledError) as error:
            if self._expired:
                _uncancel(task)
                raise self.expired_error() from None
            if self._interrupted and not isinstance(error, asyncio.CancelledError):
                cause = None if isinstance(error, EngineTimeout) else error
                raise EngineTimeout(
                    self._message("was still running (synchronous code that never returned)")
                ) from cause
            raise
        finally:
            expiry.cancel()
            self._ends = None

    @property
    def expired(self) -> bool:
        """Whether the running pass's await was cancelled because its time ran out."""
        return self._expired

    def expired_error(self) -> EngineTimeout:
        """The error a pass whose await ran out of time ends with."""
        return EngineTimeout(self._message("was still waiting (an await that never finished)"))

    def _expire(self, task: asyncio.Task[object]) -> None:
        """The limit passed while the pass awaited: cancel it (asyncio.timeout does the same, from Python 3.11)."""
        if self._ends is not None:
            self._expired = True
            task.cancel()

    def _message(self, doing: str) -> str:
        return f"the engine's pass did not finish within engine_timeout={self.seconds:g} s: it {doing}"

    # --- the watchdog -------------------------------------------------------------------------------

    def __enter__(self) -> PassDeadline:
        self._signal = _take_sigalrm(self._on_alarm)
        self._watchdog = threading.Thread(target=self._watch, name="zett_lab pass deadline", daemon=True)
        self._watchdog.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        # The watchdog finishes its round first: a SIGALRM it sends must still find our handler.
        if self._watchdog is not None:
            self._watchdog.join()
        if self._signal:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

    def _watch(self) -> None:
        """Sleep until the running pass is due; interrupt its thread if it is still inside the pass."""
        wait = self.seconds
        while not self._stopped.wait(wait):
            ends, thread = self._ends, self._thread
            now = time.monotonic()
            if ends is None or now < ends:
                wait = self.seconds if ends is None else ends - now
                continue
            if thread is not None and thread == threading.main_thread().ident and self._signal:
                signal.pthread_kill(thread, signal.SIGALRM)  # the handler checks the stack itself
            elif thread is not None and _inside_pass(sys._current_frames().get(thread)):
                self._interrupted = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(EngineTimeout))
            wait = min(1.0, self.seconds)  # an await ends by asyncio's cancellation; else try again

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        ends = self._ends
        if ends is not None and time.monotonic() >= ends and _inside_pass(frame):
            self._interrupted = True
            raise EngineTimeout


def _uncancel(task: asyncio.Task[object]) -> None:
    """Take back the cancellation the timeout asked for (Python 3.11+ counts them; 3.10 does not)."""
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()


def _inside_pass(frame: FrameType | None) -> bool:
    """Whether a thread's stack (its innermost frame) is inside :meth:`PassDeadline.run`."""
    while frame is not None:
        if frame.f_code is _RUN_CODE:
            return True
        frame = frame.f_back
    return False


_RUN_CODE = PassDeadline.run.__code__


def _take_sigalrm(handler: Callable[[int, FrameType | None], None]) -> bool:
    """Install ``handler`` for SIGALRM when this is the main thread and nobody else uses SIGALRM."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGALRM) is not signal.SIG_DFL or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
        return False
    signal.signal(signal.SIGALRM, handler)
    return True


@contextmanager
def pass_deadline(seconds: float | None) -> Iterator[PassDeadline | None]:
    """A :class:`PassDeadline` running for the duration of a replay, or None when unbounded."""
    if seconds is None:
        yield None
        return
    with PassDeadline(seconds) as deadline:
        yield deadline
