"""The cyclic collector in zett_lab's processes: a pool worker freezes what it holds for one long conversation of
one sweep and frees the cyclic garbage of it once it moves to another (collector.frozen_for); a short
conversation's task freezes nothing; a user's interpreter never freezes anything."""

from __future__ import annotations

import gc
import weakref

from tests.helpers import coding_conversation
from zett_lab import collector
from zett_lab.collector import FREEZE_FROM_MESSAGES, collector_paused, frozen_for
from zett_lab.study import sweep
from zett_lab.study.executors import default_executor, shutdown_default_executor
from zett_lab.summarizers.offline.cutting import Truncate


class _Cycle:
    """An object in a reference cycle (only the cyclic collector frees it), holding ``size`` lists it would visit."""

    def __init__(self, size: int) -> None:
        self.itself = self
        self.items = [[] for _ in range(size)]


def _tasks_leaving_cycles(holders: list[str], size: int = 0, short: tuple[str, ...] = ()) -> dict[str, list]:
    """In this process, a task per holder (as :func:`~zett_lab.study.units.run_units` runs one: a conversation of
    :data:`FREEZE_FROM_MESSAGES` messages, one message fewer for the holders in ``short``), each leaving an object
    in a cycle made in a paused block, holding ``size`` lists (by default as many as the process holds objects).
    Per task, as it starts: the objects frozen and which earlier tasks' cycles are alive; inside it, the objects
    frozen; after the last, the objects frozen and the cycles alive after a ``gc.collect()``."""
    size = size or len(gc.get_objects())
    made: list[weakref.ref[_Cycle]] = []
    seen: dict[str, list] = {"frozen_at_start": [], "alive_at_start": [], "frozen_inside": []}
    for holder in holders:
        with frozen_for(holder, messages=FREEZE_FROM_MESSAGES - (holder in short)):
            seen["frozen_at_start"].append(gc.get_freeze_count())
            seen["alive_at_start"].append([n for n, ref in enumerate(made) if ref() is not None])
            with collector_paused():
                cycle = _Cycle(size)
            seen["frozen_inside"].append(gc.get_freeze_count())
            made.append(weakref.ref(cycle))
            del cycle
    seen["frozen_after"] = [gc.get_freeze_count()]
    gc.collect()
    seen["alive_after_collect"] = [n for n, ref in enumerate(made) if ref() is not None]
    seen["size"] = [size]
    return seen


def test_a_pool_worker_frees_a_conversations_cyclic_garbage_once_it_moves_to_another():
    """In a worker of the default pool, leaving a paused block inside a task freezes every object the worker holds
    (the collector skips them), and they stay frozen over the tasks of one conversation; the first task of another
    unfreezes them and collects what died in cycles meanwhile (here much more than a quarter of what the worker
    holds), before anything is frozen again; the last conversation's garbage waits for the next."""
    seen = default_executor().submit(_tasks_leaving_cycles, ["a", "a", "b", "c"]).result()
    assert all(frozen > seen["size"][0] for frozen in seen["frozen_inside"])  # the task's large object and the rest
    assert seen["frozen_at_start"][1] > seen["size"][0]  # a's first task left everything frozen for its second
    assert seen["alive_at_start"][1] == [0]  # its cycle too, frozen
    assert seen["frozen_at_start"][2:] == [0, 0]  # b and c each started with nothing frozen...
    assert seen["alive_at_start"][2:] == [[], []]  # ...and the earlier conversations' cycles freed
    assert seen["frozen_after"][0] > seen["size"][0] and seen["alive_after_collect"] == [3]  # c's, until the next


def test_a_short_conversations_task_freezes_nothing_and_frees_what_a_long_one_left():
    """In a pool worker, the tasks of a conversation under :data:`FREEZE_FROM_MESSAGES` messages freeze nothing
    (the collector treats their objects as usual); the first of them after a long conversation's tasks unfreezes
    what those froze and frees their cycles."""
    seen = default_executor().submit(_tasks_leaving_cycles, ["a", "a", "s", "t"], short=("s", "t")).result()
    assert all(frozen > seen["size"][0] for frozen in seen["frozen_inside"][:2])  # the long conversation's froze
    assert seen["frozen_at_start"][2:] == [0, 0] and seen["alive_at_start"][2] == []  # a's cycles freed on moving
    assert seen["frozen_inside"][2:] == [0, 0] and seen["frozen_after"] == [0]  # the short ones froze nothing
    assert seen["alive_after_collect"] == []


def test_a_users_interpreter_never_freezes_anything():
    """Outside zett_lab's pool workers (here: pytest's process, like a notebook's) a task freezes nothing: its
    cycles are the collector's as usual."""
    seen = _tasks_leaving_cycles(["a", "a", "b"], size=1_000)
    assert seen["frozen_at_start"] == seen["frozen_inside"] == [0, 0, 0] and seen["frozen_after"] == [0]
    assert seen["alive_after_collect"] == []


#: The cycles this process's :class:`_CyclicTruncate` left behind.
_LEFT: list[weakref.ref[_Cycle]] = []


class _CyclicTruncate(Truncate):
    """Truncate, leaving an object in a reference cycle behind each summary."""

    name = "cyclic-truncate"

    def _summarize(self, messages, limit):
        _LEFT.append(weakref.ref(_Cycle(10)))
        return super()._summarize(messages, limit)


def _two_sweeps_in_this_worker(freeze_from: int) -> tuple[int, int, int, list[int]]:
    """Two sweeps of one conversation each, run by this pool worker itself (serially), freezing for conversations
    of ``freeze_from`` messages or more: the objects frozen after the first, the cycles its summaries left, those
    alive once the second sweep is done (no ``gc.collect()``), and the compactions each sweep applied."""
    grid = {"max_tokens": [3_000, 4_000], "keep_recent_tokens": [1_000], "cache": False, "progress": False}
    compactions = []
    default, collector.FREEZE_FROM_MESSAGES = collector.FREEZE_FROM_MESSAGES, freeze_from
    try:
        return _sweep_two(grid, compactions)
    finally:
        collector.FREEZE_FROM_MESSAGES = default


def _sweep_two(grid: dict, compactions: list[int]) -> tuple[int, int, int, list[int]]:
    """:func:`_two_sweeps_in_this_worker`'s sweeps."""
    _LEFT.clear()
    for n in range(2):
        conversation = coding_conversation(turns=8, output_lines=100, cid=f"frozen-{n}")
        done = sweep(conversation, **grid, summarizers=[_CyclicTruncate()], executor="serial")
        assert done.results["error"].isna().all()
        compactions.append(int(done.results["compactions_applied"].sum()))
        if n == 0:
            frozen, first = gc.get_freeze_count(), list(_LEFT)
    return frozen, len(first), sum(ref() is not None for ref in first), compactions


def test_a_real_sweeps_cycles_are_freed_once_its_worker_works_on_another_conversation():
    """A pool worker (a fresh one: its first move to another conversation) runs a sweep of one conversation with a
    summarizer that leaves cyclic garbage in every summary, then a sweep of another, both counted long: what the
    first left was frozen meanwhile, and is freed by the time the second is done, without anyone's
    ``gc.collect()``. With the default bound the same two (short) conversations freeze nothing."""
    shutdown_default_executor()
    frozen, left, alive, compactions = default_executor().submit(_two_sweeps_in_this_worker, 1).result()
    assert min(compactions) > 0 and left > 0
    assert frozen > 0
    assert alive == 0
    frozen, left, alive, compactions = (
        default_executor().submit(_two_sweeps_in_this_worker, FREEZE_FROM_MESSAGES).result()
    )
    assert min(compactions) > 0 and left > 0
    assert frozen == 0
