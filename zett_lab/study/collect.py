"""Running a sweep's plan: units submitted to an executor, a bounded number at a time, and collected as they finish.

:func:`run_plan` submits the :class:`~zett_lab.study.plan.Plan`'s units (on a local pool several small units
of one conversation as one task, :func:`next_batch`) and hands each finished unit to the :class:`Collector`,
which writes its replays' tables to disk at once and keeps its cells as rows. A lost task marks only its own
units' cells. The caller's work for after the sweep starts at the sweep's tail (:class:`Tail`).
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ResultFailure
from ..progress import Progress
from ..summarizers import CacheError
from .executors import parallelism, stop_workers
from .grid import Cell
from .kept_times import UnitRun
from .plan import Plan
from .reuse import STORE, Proven
from .sources import Source, SourceFolder, TableWriter
from .ticks import CellTicks
from .units import CellResult, Unit, UnitResult, run_units

#: Units of one conversation run as one task while together they cost at most this share of one worker's
#: part of the sweep (on a local pool; on a cluster each unit is a task, so a lost worker costs only its own).
BATCH_SHARE = 0.25


@dataclass
class Collector:
    """What the driver keeps as units finish: each replay's tables go to disk, cells stay as rows.

    Not frozen: the driver merges each unit's results into it as units finish.
    """

    plan: Plan
    reuse: bool
    remote: bool
    folder: SourceFolder = field(default_factory=SourceFolder)
    sources: dict[str, Source] = field(default_factory=dict)
    cells: dict[int, dict[tuple[int, int], CellResult]] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    #: Per finished unit: where it ran, its wall and CPU seconds (its tables are on disk, not here).
    finished: dict[int, UnitRun] = field(default_factory=dict)
    merged: int = 0

    @property
    def tables_to(self) -> TableWriter | None:
        """Where units write their replays: this sweep's folder, unless they may run on other machines."""
        return None if self.remote else self.folder.writer

    def answer_from_store(self, unit: Unit) -> list[tuple[int, int]]:
        """Answer the cells this session's proven replays stand for; return the rest."""
        answered = self.cells.setdefault(unit.index, {})
        remaining = []
        for cell in unit.cells:
            proven = STORE.find(self.plan.keys[unit.index], *cell) if self.reuse else None
            if proven is None or proven.source is None:
                remaining.append(cell)
                continue
            self.sources.setdefault(proven.source_id, proven.source)
            answered[cell] = CellResult(
                cell[0], cell[1], proven.source_id, False, 0, proven.derived_row(*cell), proven.row_error, 0.0, 0, 0
            )
        return remaining

    def receive(self, unit: Unit, result: UnitResult) -> None:
        """Write the unit's replays to disk, keep its cells, merge the summaries its worker made."""
        self.finished[unit.index] = UnitRun(
            result.worker, result.seconds, result.cpu_seconds, result.setup_cpu_seconds, result.summary_seconds
        )
        for sid, payload in result.sources.items():
            if payload.tables is not None:
                self.folder.write(sid, payload.tables)
            if payload.engine_events is not None:
                self.folder.write_events(sid, payload.engine_events)
            source = Source(
                sid,
                unit.conversation.id,
                payload.region,
                payload.settings,
                None,
                self.folder,
                payload.failures,
            )
            self.sources[sid] = source
            if self.reuse and payload.row is not None:
                STORE.add(
                    self.plan.keys[unit.index],
                    Proven(sid, payload.region, payload.sent, payload.row, payload.row_error, source=source),
                )
        cells = self.cells.setdefault(unit.index, {})
        for cell in result.cells:
            cells[(cell.max_tokens, cell.keep_recent_tokens)] = cell
        cache = self.plan.cache
        if cache is not None and result.new_summaries:
            for key, summary in result.new_summaries:
                if key not in cache:
                    cache.put(key, summary)
                    self.merged += 1

    def rows(self) -> tuple[list[dict[str, object]], dict[Cell, str]]:
        """The results rows, in grid order, and which replay each complete cell uses."""
        plan = self.plan
        share = {"max": dict(plan.max_values), "keep": dict(plan.keep_values)}
        identity = dict(zip(plan.labels, plan.identities, strict=True))
        rows: list[dict[str, object]] = []
        cell_map: dict[Cell, str] = {}
        for unit in plan.units:
            worker = self.finished[unit.index].worker if unit.index in self.finished else None
            answered = self.cells.get(unit.index, {})
            for m, k in unit.cells:
                base: dict[str, Any] = {
                    "conversation_id": unit.conversation.id,
                    "engine": unit.engine_label,
                    "summarizer": unit.label,
                    "max_tokens": m,
                    "keep_recent_tokens": k,
                }
                if plan.window is not None:
                    base.update(
                        context_window=plan.window, max_tokens_share=share["max"][m], keep_recent_share=share["keep"][k]
                    )
                cell = answered.get((m, k))
                if cell is None:
                    rows.append(
                        {
                            **base,
                            "engine_identity": unit.setting.engine_name,
                            "summarizer_identity": identity[unit.label],
                            "error": self.failures.get(unit.index) or "not run",
                        }
                    )
                    continue
                row = {key: value for key, value in (cell.row or {}).items() if key not in base and key != "summarizer"}
                rows.append(
                    {
                        **base,
                        **row,
                        "engine_identity": unit.setting.engine_name,
                        "summarizer_identity": identity[unit.label],
                        "replayed": cell.replayed,
                        "shared_steps": cell.shared_steps,
                        "model_calls": cell.model_calls,
                        "cache_hits": cell.cache_hits,
                        "seconds": cell.seconds,
                        "worker": worker if cell.replayed else None,
                        "error": cell.error,
                    }
                )
                if cell.source_id is not None:
                    cell_map[Cell(unit.conversation.id, unit.setting.with_limits(m, k).named())] = cell.source_id
        return rows, cell_map


class Tail:
    """The caller's work for after the sweep (``sweep(at_tail=...)``), run in a thread of this process from the
    sweep's tail: once every task has gone out and fewer are left than workers, so that a core the sweep no
    longer fills does it while the last units finish, rather than after them with the workers idle.

    :meth:`join` starts it if it never started (a sweep that had no such tail), waits for it, and raises what
    it raised: a failure of that work is never lost in a thread.
    """

    def __init__(self, work: Callable[[], object] | None) -> None:
        self._work = work
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> None:
        """Start the work in its thread, once."""
        if self._work is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="zett-lab-sweep-tail", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._work is not None
        try:
            self._work()
        except BaseException as error:  # noqa: BLE001 - raised again by join(), in the sweep's thread
            self._error = error

    def join(self) -> None:
        """Wait for the work (started now if it never was); raise its error."""
        self.start()
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error


def next_batch(order: deque[Unit], costs: dict[int, float], budget: float) -> list[Unit]:
    """The next unit of ``order``, with the units after it of the same conversation while together they cost
    at most ``budget``: one task, so one worker builds that conversation's anchor index once."""
    batch = [order.popleft()]
    spent = costs[batch[0].index]
    while order and order[0].fingerprint == batch[0].fingerprint and spent + costs[order[0].index] <= budget:
        spent += costs[order[0].index]
        batch.append(order.popleft())
    return batch


def run_plan(
    plan: Plan,
    runner: cf.Executor,
    collector: Collector,
    tracker: Progress,
    *,
    strict: bool,
    at_tail: Callable[[], object] | None = None,
) -> None:
    """Submit units in the plan's order (the costliest first), a bounded number of tasks at a time, and collect
    them as they finish.

    A task is one unit, or on a local pool several units of one small conversation (:func:`next_batch`;
    together at most :data:`BATCH_SHARE` of one worker's share of the sweep, so the workers stay
    balanced). A lost task marks the cells of its own units failed, no others. The bar moves cell by cell
    where units can report (:mod:`zett_lab.study.ticks`), else unit by unit. ``strict``: stop at the first
    failed cell (:class:`~zett_lab.errors.ResultFailure` naming it). ``at_tail`` (a :class:`Tail`) starts once
    every task has gone out and fewer tasks are left than workers, and is joined before this returns.

    Long on purpose: one submit-wait-collect loop; its closures share the in-flight state (queue, futures, cells).
    """
    order = deque(plan.order)
    tail = Tail(at_tail)
    workers = parallelism(runner)
    in_flight_limit = max(2, 2 * workers)
    batch_budget = 0.0 if collector.remote else BATCH_SHARE * sum(plan.costs.values()) / workers
    # on one machine's workers, the first unit of a conversation sent as several tasks builds its index for all
    shared = split_conversations(plan, batch_budget) if collector.tables_to is not None and workers > 1 else set()
    futures: dict[cf.Future[list[UnitResult]], list[Unit]] = {}
    reported: dict[int, int] = {}

    def on_cells(unit_index: int, cells: int, worker: str) -> None:
        reported[unit_index] = reported.get(unit_index, 0) + cells
        tracker.advance(cells, worker)

    def finish(unit: Unit, worker: str | None) -> None:
        left = len(unit.cells) - reported.pop(unit.index, 0)
        if left > 0:
            tracker.advance(left, worker)

    ticks = CellTicks(runner, on_cells if tracker.watched else None)

    def submit_more() -> None:
        while order and len(futures) < in_flight_limit:
            task, sent = [], []
            for unit in next_batch(order, plan.costs, batch_budget):
                remaining = collector.answer_from_store(unit)
                if not remaining:
                    finish(unit, None)
                    continue
                task.append(unit)
                sent.append(
                    replace(
                        unit,
                        cells=remaining,
                        ticks=ticks.channel,
                        tables_to=collector.tables_to,
                        index_shared=unit.fingerprint in shared,
                    )
                )
            if not task:
                continue
            try:
                futures[runner.submit(run_units, sent)] = task
            except Exception as error:  # noqa: BLE001 - the executor refused: those cells carry it
                for unit in task:
                    collector.failures[unit.index] = f"executor: {type(error).__name__}: {error}"
                    finish(unit, None)
        if not order and len(futures) < workers:
            tail.start()

    try:
        submit_more()
        while futures:
            done, _ = cf.wait(list(futures), timeout=ticks.poll_s, return_when=cf.FIRST_COMPLETED)
            ticks.drain()
            for future in done:
                task = futures.pop(future)
                try:
                    results: list[UnitResult | None] = list(future.result())
                except CacheError:
                    raise  # the summary cache is unusable: every later cell would wait on it, then fail
                except Exception as error:  # noqa: BLE001 - a lost task marks its own units' cells
                    results = [None] * len(task)
                    for unit in task:
                        collector.failures[unit.index] = f"executor: {type(error).__name__}: {error}"
                for unit, result in zip(task, results, strict=True):
                    if result is not None:
                        collector.receive(unit, result)
                    finish(unit, result.worker if result is not None else None)
                    if strict:
                        _stop_at_first_failure(unit, collector)
            submit_more()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: no worker goes on (or outlives this process)
        for future in futures:
            future.cancel()
        stop_workers(runner)
        raise
    except (ResultFailure, CacheError):
        for future in futures:
            future.cancel()
        raise
    finally:
        ticks.close()
        collector.folder.writer.remove_indexes()
    tail.join()


def split_conversations(plan: Plan, batch_budget: float) -> set[str]:
    """The fingerprints of the conversations whose units go out as several tasks (:func:`next_batch`)."""
    tasks: Counter[str] = Counter()
    order = deque(plan.order)
    while order:
        tasks[next_batch(order, plan.costs, batch_budget)[0].fingerprint] += 1
    return {key for key, count in tasks.items() if count > 1}


def _stop_at_first_failure(unit: Unit, collector: Collector) -> None:
    """Strict sweeps: raise :class:`ResultFailure` naming the first failed cell of a finished unit."""
    answered = collector.cells.get(unit.index, {})
    failed = [(m, k, cell.error) for (m, k), cell in answered.items() if cell.error]
    lost = collector.failures.get(unit.index)
    if lost is not None:
        failed.insert(0, (*unit.cells[0], lost))
    if failed:
        max_tokens, keep, error = failed[0]
        engine = f"engine {unit.engine_label!r}, " if unit.setting.engine is not None else ""
        raise ResultFailure(
            f"sweep stopped at its first failure (strict): conversation {unit.conversation.id!r}, {engine}"
            f"summarizer {unit.label!r}, max_tokens={max_tokens}, keep_recent_tokens={keep}: {error}"
        )
