"""Work a sweep shares between cells, always backed by a proof (:mod:`zett_lab.study.regions`).

- **Proven reuse**: one replay stands for the whole rectangle of settings that take its
  decisions (:func:`~zett_lab.study.regions.region`); a cell inside it gets that replay's
  trace with only the setting columns changed. :class:`ProofStore` remembers such replays
  per process, bounded by the steps it holds.
- **Forks**: a replay that leaves another one's rectangle only at some turn shares every
  turn before it. :data:`RUNS` keeps the finished replays of this process with the
  rectangle proven for each of their turn starts
  (:func:`~zett_lab.study.regions.prefix_regions`); :class:`ForkPlanner` names the longest
  shared start for a new setting, also from a replay of another summarizer up to its first
  summary attempt; :func:`zett_lab.replay.run.replay_forkable` runs the rest through the
  real runtime.

Both are proven for the stock engine; a user engine shares work only along the limits it
declares (``zett_lab_reuse``, read by :func:`~zett_lab.replay.engine.engine_reuse`), and an
engine that declares none shares nothing, not even a prefix.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..measure import Losses
from ..replay.fork import Fork, ForkableRun
from ..replay.trace import Trace
from ..tokens import TokenCounter
from .regions import Region, prefix_regions
from .sources import Source

#: One conversation × summarizer × replay options × what a row holds: replays under one key are comparable.
StoreKey = tuple[str, ...]


@dataclass(slots=True)
class Proven:
    """A replay and the settings it provably stands for.

    ``trace`` is held by the process that ran the replay, with its losses as a report keeps them
    (``kept``), so a later unit or sweep it answers writes them again without measuring; the driver of
    a sweep holds only what cells need without it: the results ``row`` (budget figures, cost, loss
    metrics), the context each step sent (``sent``, sorted) to count the steps over another
    ``max_tokens``, and where its tables were written (``source``).

    Not frozen: its results ``row`` (and ``row_error``, ``kept``) are set once its replay's metrics are measured.
    """

    source_id: str
    region: Region
    sent: np.ndarray
    row: dict[str, object] | None = None
    row_error: str | None = None
    trace: Trace | None = None
    source: Source | None = None
    #: Its losses with only the listed anchor rows, and the per-anchor flags counted
    #: (:func:`~zett_lab.measure.losses.measure_lost_and_counted`); None: not measured in this process.
    kept: tuple[Losses, pd.DataFrame] | None = None

    @classmethod
    def of(cls, source_id: str, region: Region, trace: Trace) -> Proven:
        return cls(source_id, region, sorted_sent(trace.steps), trace=trace)

    def steps_over(self, max_tokens: int) -> int:
        """Steps of the replay that sent more than ``max_tokens`` tokens."""
        return int(len(self.sent) - np.searchsorted(self.sent, max_tokens, side="right"))

    def derived_row(self, max_tokens: int, keep_recent_tokens: int) -> dict[str, object]:
        """The results row of another setting of the region.

        Only the figures that name the setting differ (``max_tokens``,
        ``keep_recent_tokens``) and the one that compares with it (``steps_over_budget``);
        everything else is a function of the identical trace. ``tests/study/test_sweep.py`` checks
        this against :meth:`Trace.summary` and :func:`zett_lab.measure` of the derived trace.
        """
        base = self.row if self.row is not None else (dict(self.trace.summary()) if self.trace is not None else {})
        return {
            **base,
            "max_tokens": max_tokens,
            "keep_recent_tokens": keep_recent_tokens,
            "steps_over_budget": self.steps_over(max_tokens),
        }

    def size(self) -> int:
        return len(self.sent)


def sorted_sent(steps: pd.DataFrame) -> np.ndarray:
    """The tokens each step sent, sorted (what ``steps_over_budget`` of any ``max_tokens`` needs)."""
    if not len(steps):
        return np.zeros(0, dtype=np.int64)
    return np.sort(steps["context_tokens_after"].to_numpy(dtype=np.int64, na_value=0))


class ProofStore:
    """Replays this process has run or received, with the settings each provably stands for.

    Least recently used keys are dropped once the replays held exceed ``limit`` steps in
    all, so memory stays bounded however many cells and sweeps a session runs.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._items: OrderedDict[StoreKey, list[Proven]] = OrderedDict()
        self._steps = 0
        self._lock = threading.Lock()

    def find(self, key: StoreKey, max_tokens: int, keep_recent_tokens: int) -> Proven | None:
        with self._lock:
            items = self._items.get(key)
            if not items:
                return None
            self._items.move_to_end(key)
            for item in items:
                if item.region.contains(max_tokens, keep_recent_tokens):
                    return item
        return None

    def add(self, key: StoreKey, proven: Proven) -> None:
        with self._lock:
            items = self._items.setdefault(key, [])
            if any(item.source_id == proven.source_id for item in items):
                return
            items.append(proven)
            self._steps += proven.size()
            self._items.move_to_end(key)
            while self._steps > self.limit and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._steps -= sum(item.size() for item in dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._steps = 0


#: Proven replays of this process (a worker keeps its own between units and sweeps).
STORE = ProofStore()


def clear_worker_state() -> None:
    """Forget the proven replays and forkable runs this process remembers (workers of a pool keep their own)."""
    STORE.clear()
    RUNS.clear()


@dataclass(frozen=True, slots=True)
class _Forkable:
    run: ForkableRun
    #: ``regions[i]``: settings proven to take the run's decisions up to its ``i``-th mark (nested).
    regions: list[Region]


class ForkableRuns:
    """Finished replays this process can fork from, per conversation, engine and replay options (bounded).

    Least recently used keys are dropped once the runs held exceed ``limit`` steps in all.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._items: OrderedDict[StoreKey, list[_Forkable]] = OrderedDict()
        self._steps = 0
        self._lock = threading.Lock()

    def add(self, key: StoreKey, item: _Forkable) -> None:
        with self._lock:
            self._items.setdefault(key, []).append(item)
            self._items.move_to_end(key)
            self._steps += item.run.size()
            while self._steps > self.limit and len(self._items) > 1:
                _, dropped = self._items.popitem(last=False)
                self._steps -= sum(i.run.size() for i in dropped)

    def of(self, key: StoreKey) -> list[_Forkable]:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return list(self._items.get(key, ()))

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._steps = 0


#: Finished replays of this process (a worker keeps its own between units and sweeps).
RUNS = ForkableRuns()


@dataclass(frozen=True)
class ForkPlanner:
    """Where a new replay can start from a finished one of this process: the longest proven shared start.

    ``key`` names the conversation, engine and replay options (:data:`RUNS` holds the runs per
    key); ``summarizer`` the summarizer's identity. A run of the same summarizer is forked at any
    mark whose proven rectangle holds the new setting; a run of another summarizer only at a mark
    before its first summary attempt (until then the summarizer was never asked, so nothing of
    the replay depends on it). ``limits`` are the engine's proven limits
    (:func:`~zett_lab.replay.engine.engine_reuse`): every prefix is proven along them only.
    """

    key: StoreKey
    summarizer: str
    counter: TokenCounter | None
    limits: Sequence[str]

    def add(self, trace: Trace, run: ForkableRun | None) -> None:
        if run is None or not run.marks:
            return
        if not self.limits:
            return  # nothing proven for this engine: every replay runs from the start
        regions = prefix_regions(
            trace, [mark.steps for mark in run.marks], count_tokens=self.counter, limits=self.limits
        )
        RUNS.add(self.key, _Forkable(run, regions))

    def fork_for(self, max_tokens: int, keep_recent_tokens: int) -> Fork | None:
        """The mark sharing the most steps with a replay at this setting, or None (replay from the start)."""
        best: Fork | None = None
        for item in RUNS.of(self.key) if self.limits else ():
            same = item.run.summarizer == self.summarizer
            # Rectangles are nested: the ones containing the setting come first.
            count = next(
                (
                    i
                    for i, (r, mark) in enumerate(zip(item.regions, item.run.marks, strict=True))
                    if not r.contains(max_tokens, keep_recent_tokens) or not (same or mark.compactions == 0)
                ),
                len(item.regions),
            )
            if count == 0:
                continue
            mark = item.run.marks[count - 1]
            if mark.steps and (best is None or mark.steps > best.mark.steps):
                best = Fork(item.run, mark)
        return best
