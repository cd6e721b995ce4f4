"""Cells done, reported from wherever a sweep's units run, so a progress bar moves cell by cell.

A unit (one conversation × summarizer × engine) can take minutes on a long session; counting
only finished units would leave the bar still until the end. A unit puts ``(unit index, cells)``
on a channel after each cell, and the driver reads the channel while it waits for units: in
this process the count goes straight to the bar, threads share a :class:`queue.Queue`, local
worker processes a manager's queue. Units on a cluster (``dask.distributed``) count when they
finish: the channel would have to reach back to this machine.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import queue
from collections.abc import Callable
from typing import Any, Protocol

from .executors import SerialExecutor, process_context

#: Seconds the driver waits for a unit before it reads the channel again.
POLL_S = 0.25


class TickChannel(Protocol):
    """Where a unit reports ``(unit index, cells done, worker)``."""

    def put(self, item: tuple[int, int, str]) -> None: ...


def tick(channel: TickChannel | None, unit_index: int, worker: str, cells: int = 1) -> None:
    """Report cells done on ``worker``; never fails the unit (the driver may have stopped listening)."""
    if channel is None:
        return
    with contextlib.suppress(Exception):
        channel.put((unit_index, cells, worker))


class _Direct:
    """The channel of units that run in the driver's own thread: each report is counted at once."""

    def __init__(self, on_cells: Callable[[int, int, str], None]) -> None:
        self._on_cells = on_cells

    def put(self, item: tuple[int, int, str]) -> None:
        self._on_cells(*item)


class CellTicks:
    """The driver's side: the channel units get, and the reports read from it.

    ``on_cells(unit_index, cells, worker)`` is called for every report, always in the driver's thread
    (from :meth:`drain`, or directly for units run in that thread). ``on_cells=None``: nobody
    watches, no channel.
    """

    def __init__(self, runner: cf.Executor, on_cells: Callable[[int, int, str], None] | None) -> None:
        self.channel: TickChannel | None = None
        self._queue: Any = None
        self._manager: Any = None
        self._on_cells = on_cells
        if on_cells is None:
            return
        if isinstance(runner, SerialExecutor):
            self.channel = _Direct(on_cells)
        elif isinstance(runner, cf.ThreadPoolExecutor):
            self.channel = self._queue = queue.Queue()
        elif isinstance(runner, cf.ProcessPoolExecutor):
            try:
                self._manager = process_context().Manager()
            except Exception:  # noqa: BLE001 - no manager process: units count when they finish
                return
            self.channel = self._queue = self._manager.Queue()

    @property
    def poll_s(self) -> float | None:
        """How long to wait for a unit before reading the channel (None: nothing to read)."""
        return POLL_S if self._queue is not None else None

    def drain(self) -> None:
        """Pass every report waiting on the channel to ``on_cells``."""
        if self._queue is None or self._on_cells is None:
            return
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            except Exception:  # noqa: BLE001 - the manager is gone: units count when they finish
                self._queue = None
                return
            self._on_cells(*item)

    def close(self) -> None:
        """Stop the manager process, if one was started."""
        if self._manager is not None:
            with contextlib.suppress(Exception):
                self._manager.shutdown()
            self._manager = None
