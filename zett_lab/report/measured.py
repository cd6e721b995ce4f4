"""The losses of the replays a report shows, measured once each and kept as the report uses them.

The replays at the recommended setting are measured with their anchors. The report lists the
lost-but-needed anchors and draws per-type counts of the others, so only those rows and the
figure's flags, counted, are made
(:func:`~zett_lab.measure.losses.measure_lost_and_counted`): never the per-anchor table, which
on a long conversation has millions of rows. A sweep keeps them for every replay it measured, so
a report over a sweep reads them; otherwise (traces, a sweep run with ``metrics=False``) the executor the
report was given (a ``dask.distributed`` cluster's, say), else a running process pool, measures them on its
workers (a conversation's traces spread over the workers), and the conversation's anchor index never enters
the report's own process.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
from collections.abc import Sequence

import pandas as pd

from ..load.conversation import Conversation
from ..measure import Losses, measure
from ..measure.losses import measure_lost_and_counted
from ..measure.message_index import release_indexes
from ..replay.trace import Trace
from ..study.executors import SerialExecutor, parallelism, running_pool
from ..study.grid import fingerprint
from ..study.results import StoredTrace
from ..study.units import shared_messages


def measure_shown(traces: Sequence[Trace]) -> list[tuple[Losses, pd.DataFrame]]:
    """Per trace: its losses with only the lost-but-needed anchor rows, and its per-anchor flags counted."""
    return [measure_lost_and_counted(trace) for trace in traces]


def measure_shown_on_worker(traces: Sequence[Trace]) -> list[tuple[Losses, pd.DataFrame]]:
    """:func:`measure_shown` in a pool's worker, on the message list the worker's replays of that conversation
    used (:func:`~zett_lab.study.units.shared_messages`): its anchor index is built already."""
    shared: dict[int, Conversation] = {}
    for trace in traces:
        if id(trace.conversation) not in shared:
            shared[id(trace.conversation)] = shared_messages(trace.conversation, fingerprint(trace.conversation))
    return measure_shown([dataclasses.replace(trace, conversation=shared[id(trace.conversation)]) for trace in traces])


def _plain(trace: Trace) -> Trace:
    """The trace's tables and settings as a plain :class:`Trace`: what a worker needs to measure it (not the
    engine's events, which measuring never reads and which repeat every summary)."""
    return Trace(
        conversation=trace.conversation,
        steps=trace.steps,
        compactions=trace.compactions,
        settings=trace.settings.named(),
    )


def _balanced(traces: Sequence[Trace], tasks: int) -> list[list[Trace]]:
    """``traces`` in at most ``tasks`` groups of about equal compaction attempts (the cost of measuring one)."""
    groups: list[list[Trace]] = [[] for _ in range(max(1, min(tasks, len(traces))))]
    sizes = [0] * len(groups)
    for trace in sorted(traces, key=lambda t: -len(t.compactions)):
        smallest = sizes.index(min(sizes))
        groups[smallest].append(trace)
        sizes[smallest] += len(trace.compactions)
    return groups


def report_executor(executor: cf.Executor | str | None) -> cf.Executor | None:
    """Where a report's own work may go, given its ``executor``: that executor, the running process pool when
    None (the one its sweep ran on), else (``"serial"``, or None with no pool running) nowhere but this process."""
    if executor is None:
        return running_pool()
    if isinstance(executor, (str, SerialExecutor)):
        return None
    return executor


class Measured:
    """Losses of traces, measured once each (kept by ``id``, with the trace alive in the report's entries).

    ``executor``: where replays are measured when no sweep kept their losses (traces given directly, a
    sweep run with ``metrics=False``): any :class:`concurrent.futures.Executor` (a ``dask.distributed``
    client's ``get_executor()``), ``"serial"`` (here), or None (the running process pool, else here).
    """

    def __init__(self, executor: cf.Executor | str | None = None) -> None:
        self.executor = executor
        self.by_id: dict[int, Losses] = {}
        self.anchor_flags: dict[int, pd.DataFrame] = {}
        #: Ids of the traces measured in full or being measured (see :meth:`start_shown`).
        self.shown_ids: set[int] = set()
        #: The counted per-anchor flags of the traces measured here (by ``id``; their losses are in ``by_id``).
        self._counted: dict[int, pd.DataFrame] = {}
        self._pending: list[tuple[list[Trace], cf.Future[list[tuple[Losses, pd.DataFrame]]], bool]] = []

    def measure_all(self, traces: Sequence[Trace]) -> None:
        """Every table of replays no sweep measured (traces given directly), anchors as the report keeps them
        (:func:`measure_shown`): on the executor, like :meth:`start_shown`, and collected before returning."""
        self._submit([trace for trace in traces if id(trace) not in self.by_id], shown=False)
        self.finish()

    def without_anchors(self, trace: Trace) -> Losses:
        """Every table but ``anchors`` (left empty): what a sweep measured already, else measured now."""
        if id(trace) not in self.by_id:
            stored = trace.losses(anchors=False) if isinstance(trace, StoredTrace) else None
            self.by_id[id(trace)] = stored if stored is not None else measure(trace, anchors=False)
        return self.by_id[id(trace)]

    def start_shown(self, traces: Sequence[Trace]) -> None:
        """Losses of replays the report shows in full: as their sweep kept them (or measured here before), else
        measured on the executor (collected by :meth:`finish`), else here and now."""
        todo = []
        for trace in traces:
            if id(trace) in self.shown_ids:
                continue
            self.shown_ids.add(id(trace))
            known = self._known_in_full(trace)
            if known is not None:
                self._take([trace], [known], shown=True)
            else:
                todo.append(trace)
        self._submit(todo, shown=True)

    def _submit(self, traces: Sequence[Trace], *, shown: bool) -> None:
        """Measure ``traces`` (:func:`measure_shown`) on the executor, else here. A conversation's traces are split
        into as many tasks as the executor has workers, the most compactions first (a worker reuses the anchor
        index its replays built)."""
        pool = self._pool()
        by_conversation: dict[str, list[Trace]] = {}
        for trace in traces:
            by_conversation.setdefault(trace.conversation.id, []).append(trace)
        for group in by_conversation.values():
            if pool is None:
                self._take(group, measure_shown(group), shown=shown)
                continue
            for task in _balanced(group, parallelism(pool)):
                future = pool.submit(measure_shown_on_worker, [_plain(t) for t in task])
                self._pending.append((task, future, shown))

    def _pool(self) -> cf.Executor | None:
        """The executor to measure on (None: in this process)."""
        return report_executor(self.executor)

    def finish(self) -> None:
        """Collect what the executor measured, then free the anchor indexes this process built."""
        for group, future, shown in self._pending:
            self._take(group, future.result(), shown=shown)
        self._pending.clear()
        release_indexes()

    def shown(self, trace: Trace) -> Losses:
        """A replay shown in full (see :meth:`start_shown`): its losses, anchors kept as the report uses them."""
        if id(trace) not in self.shown_ids:
            self.shown_ids.add(id(trace))
            known = self._known_in_full(trace)
            self._take([trace], [known] if known is not None else measure_shown([trace]), shown=True)
        return self.by_id[id(trace)]

    def _known_in_full(self, trace: Trace) -> tuple[Losses, pd.DataFrame] | None:
        """What :func:`measure_shown` would give, without measuring: from what was measured here, or from what
        the trace's sweep kept (None: neither)."""
        if id(trace) in self._counted:
            return self.by_id[id(trace)], self._counted[id(trace)]
        return trace.lost_and_counted() if isinstance(trace, StoredTrace) else None

    def _take(self, traces: Sequence[Trace], results: Sequence[tuple[Losses, pd.DataFrame]], *, shown: bool) -> None:
        for trace, (losses, flags) in zip(traces, results, strict=True):
            self.by_id[id(trace)], self._counted[id(trace)] = losses, flags
            if shown:
                self.anchor_flags[id(trace)] = flags
