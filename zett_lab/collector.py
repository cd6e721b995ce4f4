"""Python's cyclic garbage collector paused for work that makes many objects in no cycle, run less often in the
processes zett_lab owns, and kept off what the sweep's pool workers hold for the long conversation they work on.

A full collection walks every object the process holds; work that allocates millions of tuples, lists and
dicts (building a long conversation's anchor index, summarizing a long span offline) sets off many of them
while none of its objects can be in a cycle, so its garbage goes by reference counting alone. A replay makes
millions of short-lived objects too, and a young collection every 700 of them (Python's default) ran over a
thousand times per worker of a long session's report.

A pool worker also keeps what such work made for a conversation (its index, its lines, the summaries' memos:
hundreds of thousands of objects at a time), and each later collection visited it again. There the objects are
frozen (:func:`gc.freeze`) while the worker works on one long conversation of one sweep, and unfrozen, then
collected, when it moves to another (:func:`frozen_for`).
"""

from __future__ import annotations

import gc
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

#: The collector's thresholds in the processes zett_lab owns (:func:`collect_in_batches`): a young collection
#: every 20,000 allocations instead of 700; the older generations as Python sets them.
BATCH_THRESHOLDS = (20_000, 10, 10)
#: When a pool worker moves to another conversation, the objects it held frozen are collected if they outnumber
#: what the last such collection kept by more than this share (CPython's own rule for its oldest generation), so
#: what waits in cycles never passes this share of what the worker keeps, plus one conversation's (:func:`frozen_for`).
FULL_COLLECTION_GROWTH = 0.25
#: A pool worker freezes what it holds for a conversation of at least this many messages (:func:`frozen_for`): a
#: 5,001-message session's report paid 3.5 s CPU in collections without it, while a report of 150 sessions of 60 to
#: 600 messages lost more to unfreezing and collecting between them than freezing saved (bench/README.md).
FREEZE_FROM_MESSAGES = 1_000


@dataclass
class _Freezing:
    """What :func:`frozen_for` keeps between a pool worker's tasks."""

    #: Set in the sweep's pool workers only (:func:`collect_in_batches`).
    allowed: bool = False
    #: What the objects frozen now are held for (a conversation of a sweep); None before the first task.
    holder: Hashable | None = None
    #: A task runs: leaving :func:`collector_paused` freezes.
    in_task: bool = False
    #: Objects the last full collection on moving to another conversation kept (0 before the first).
    kept: int = 0


_FREEZING = _Freezing()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (when it runs) for a block or a function: building or reading a
    long conversation's index makes millions of tuples, lists and dicts in no cycle, and each full collection
    they set off walks every object the process holds (~1.5 of the 7.5 s CPU building a 5,000-message session's
    index takes; over half of reading it back); an offline summary of a long span likewise. Threads may pause it
    together: it runs again once the first that paused it while it ran is done. In a pool worker's task, leaving
    it freezes every object the process holds (:func:`frozen_for`): no collection visits what the block made."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _FREEZING.in_task:
            gc.freeze()
        if running:
            gc.enable()


def collect_in_batches(*, freeze_tasks: bool = False) -> tuple[int, int, int]:
    """Run the cyclic collector less often in this process (:data:`BATCH_THRESHOLDS`) and return the thresholds
    it had: for processes zett_lab owns (the sweep's pool workers, a ``zett-lab`` command, which sets them back
    when it ends), never a user's own interpreter. On a warm report
    of a 5,000-message session the collector's time fell from 2.1 to 0.8 s CPU in the two workers and from 0.6
    to 0.3 s in the command's process (1,100 young collections per worker became 36). ``freeze_tasks``: the
    process is one of the sweep's pool workers, whose tasks freeze what they hold (:func:`frozen_for`; never a
    user's interpreter or a cluster's worker, which run other work too)."""
    previous = gc.get_threshold()
    gc.set_threshold(*BATCH_THRESHOLDS)
    _FREEZING.allowed = _FREEZING.allowed or freeze_tasks
    return previous


@contextmanager
def frozen_for(holder: Hashable, *, messages: int) -> Iterator[None]:
    """A pool worker's task on ``holder`` (one conversation of one sweep, :func:`~zett_lab.study.units.run_units`):
    when it holds at least :data:`FREEZE_FROM_MESSAGES` ``messages``, leaving :func:`collector_paused` freezes
    every object the process holds (:func:`gc.freeze`), and so does the task's end, so the collector no longer
    visits the index, lines and summaries' memos kept for the conversation, nor runs the young collections they
    set off on leaving the pause. A shorter conversation's task freezes nothing.

    The first task on another holder unfreezes what is frozen (:func:`gc.unfreeze`) and, when it outnumbers what
    the last such collection kept by more than :data:`FULL_COLLECTION_GROWTH`, collects it before anything is
    frozen again. So what died in a reference cycle while frozen waits at most until the worker moves to another
    conversation or sweep, and past that only within that share; a worker that froze nothing pays no collection.
    A no-op where freezing is not allowed (:func:`collect_in_batches`). Cold reports of a 5,001-message session,
    one conversation (load 7-9): the two workers' collections 3.5 -> 0.06 s CPU (43 young, 4 middle and 1 full
    collection per worker -> 6-9 young), their peak memory the same."""
    if not _FREEZING.allowed or _FREEZING.in_task:
        yield
        return
    if holder != _FREEZING.holder:
        held = gc.get_freeze_count()
        if held:
            gc.unfreeze()
            if held > _FREEZING.kept * (1 + FULL_COLLECTION_GROWTH):
                _FREEZING.kept = held - gc.collect()
        _FREEZING.holder = holder
    if messages < FREEZE_FROM_MESSAGES:
        yield
        return
    _FREEZING.in_task = True
    try:
        yield
    finally:
        _FREEZING.in_task = False
        gc.freeze()
