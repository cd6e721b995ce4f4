"""One unit of a sweep's work, as a worker process runs it: some cells of one conversation, engine and summarizer.

:func:`run_unit` answers each cell from a replay proven to stand for it (:class:`~zett_lab.study.reuse.ProofStore`),
else replays it, forked from the finished replay that shares the most turns with it
(:class:`~zett_lab.study.reuse.ForkPlanner`) or from the start. Proofs and forks are used for an engine only along the
limits it declares (:func:`~zett_lab.replay.engine.engine_reuse`; both for the stock engine). Each distinct replay gets
its results row (budget figures, cost, loss metrics) once.
What comes back (:class:`UnitResult`) is plain data that pickles: the cells, the distinct replays' tables and, for a
worker that keeps its own summary cache, the summaries it made.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd
from zett_agent.model import ModelRequest

from ..collector import frozen_for
from ..errors import SettingError
from ..load.conversation import Conversation
from ..measure.catalogue import load_plugins
from ..measure.columns import ANCHOR_COLUMNS, frame
from ..measure.cost import add_costs, cost_summary
from ..measure.losses import conversation_index, measure_lost_and_counted
from ..measure.message_index import held_index
from ..replay.engine import effort_identity, engine_reuse
from ..replay.run import replay_forkable
from ..replay.schema import TraceRow
from ..replay.setting import ReplayOptions, Setting, TraceSettings
from ..replay.trace import Trace, computed_summary_seconds, failure_counts, summary_calls
from ..summarizers import CachedSummary, CacheError, CacheSpec, SummaryCache
from ..summarizers.cache import CacheStats
from ..summarizers.offline.selection import Anchors
from .grid import STOCK_ENGINE
from .kept import conversation_key
from .kept_indexes import KEEP_FROM_CPU_S, KeptIndexes, pickled
from .kept_measuring import kept_measuring
from .regions import Region, region
from .reuse import STORE, ForkPlanner, Proven, StoreKey, sorted_sent
from .sources import ANCHOR_COUNTS_TABLE, LOSS_TABLES, LOST_ANCHORS_TABLE, TableWriter
from .ticks import TickChannel, tick

#: ``Unit.cache`` for a worker that uses its own default summary cache (no shared filesystem).
WORKER_CACHE = "worker"


@dataclass(frozen=True, slots=True)
class Unit:
    """Cells of one conversation, engine and summarizer, with everything a worker needs to answer them."""

    index: int
    conversation: Conversation
    fingerprint: str
    #: The Setting of the unit's engine and summarizer (at its first cell's limits; each cell replays it at its own).
    setting: Setting
    #: How each replay runs (its summary cache is the unit's :attr:`cache`, opened by the worker).
    options: ReplayOptions
    label: str
    #: ``(max_tokens, keep_recent_tokens)`` to answer.
    cells: list[tuple[int, int]]
    #: The driver's cache (a SummaryCache or its path), False for none, or :data:`WORKER_CACHE`.
    cache: SummaryCache | str | bool
    metrics: bool
    primary_model: str | None
    prices: Mapping[str, object] | None
    concurrency: int
    reuse: bool
    engine_label: str = STOCK_ENGINE
    #: Where to report each cell done (:mod:`zett_lab.study.ticks`); None: nobody watches.
    ticks: TickChannel | None = None
    #: The sweep's folder when the worker shares this machine's disk: it writes its replays' tables there.
    #: None (a cluster): the tables travel back with the result.
    tables_to: TableWriter | None = None
    #: Metric modules of the user's registered in the driver (:func:`~zett_lab.measure.catalogue.plugin_modules`):
    #: the worker imports them before it measures.
    metric_modules: tuple[tuple[str, str | None], ...] = ()
    #: The conversation's units run as several tasks on workers sharing :attr:`tables_to`: the first to start
    #: builds its anchor index and leaves it there for the others (:meth:`TableWriter.write_index`).
    index_shared: bool = False


@dataclass(frozen=True, slots=True)
class CellResult:
    """One answered (or failed) cell."""

    max_tokens: int
    keep_recent_tokens: int
    source_id: str | None
    #: A replay ran for this cell (False: proven identical to another replay and shares it).
    replayed: bool
    #: Steps taken from an earlier replay this one was forked from (0: replayed from the start).
    shared_steps: int
    row: dict[str, Any] | None
    error: str | None
    seconds: float
    model_calls: int
    cache_hits: int


@dataclass(frozen=True, slots=True)
class SourcePayload:
    """One distinct replay: its tables, the settings it stands for, and its results row."""

    source_id: str
    region: Region
    #: Its tables (steps, compactions, loss tables), or None when the worker wrote them itself (``Unit.tables_to``).
    tables: dict[str, pd.DataFrame] | None
    #: The tokens each step sent, sorted (:func:`~zett_lab.study.reuse.sorted_sent`).
    sent: np.ndarray
    #: Its settings, by name (they cross a process boundary).
    settings: TraceSettings
    #: The engine's events, or None when the worker wrote them with the tables.
    engine_events: list[TraceRow] | None
    row: dict[str, Any] | None
    row_error: str | None
    #: Failures among the attempts this replay made itself (not the ones a fork shares with its parent).
    failures: pd.DataFrame


@dataclass(frozen=True, slots=True)
class UnitResult:
    """What a unit sends back to the driver."""

    index: int
    cells: list[CellResult]
    sources: dict[str, SourcePayload]
    #: ``(key, summary)`` the worker's own cache gained (only with :data:`WORKER_CACHE`).
    new_summaries: list[tuple[str, CachedSummary]]
    worker: str
    seconds: float
    cpu_seconds: float
    #: CPU seconds of ``cpu_seconds`` spent on what a worker builds once per conversation (the anchor index
    #: its measuring reads), 0 when the worker had it already.
    setup_cpu_seconds: float = 0.0
    #: Seconds its replays spent computing summaries the cache did not hold
    #: (:func:`~zett_lab.replay.trace.computed_summary_seconds`): what a later run of the unit does not spend again.
    summary_seconds: float = 0.0


class _CollectingCache:
    """A summary cache that also remembers what was put into it, to send it back to the driver."""

    def __init__(self, cache: SummaryCache) -> None:
        self.cache = cache
        self.path = cache.path
        self.new: list[tuple[str, CachedSummary]] = []
        self._lock = threading.Lock()

    def key(self, identity: str, request: ModelRequest) -> str:
        return self.cache.key(identity, request)

    def get(self, key: str) -> CachedSummary | None:
        return self.cache.get(key)

    def put(self, key: str, summary: CachedSummary, *, identity: str | None = None) -> None:
        self.cache.put(key, summary, identity=identity)
        with self._lock:
            self.new.append((key, summary))

    def stats(self) -> CacheStats:
        return self.cache.stats()


def worker_name() -> str:
    """Where a unit ran: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def unit_store_key(unit: Unit) -> StoreKey:
    """Replays comparable for reuse: same conversation, summarizer (with effort), engine, the rest of the
    Setting but its limits, the options that bound a pass, the cache and row contents."""
    setting, options = unit.setting, unit.options
    names = setting.names()
    rest = {k: v for k, v in names.items() if k not in ("max_tokens", "keep_recent_tokens", "summarizer", "engine")}
    rest.pop("counter")
    rest.update(strict=options.strict, engine_timeout=options.engine_timeout, on_missing_usage=options.on_missing_usage)
    cache = unit.cache
    cache_key = "off" if cache is False else str(getattr(cache, "path", cache))
    row_options = json.dumps(
        [unit.metrics, unit.primary_model, unit.prices, unit.metric_modules], sort_keys=True, default=repr
    )
    identity = effort_identity(setting.summarizer_name, setting.reasoning_effort)
    return (
        unit.fingerprint,
        identity,
        setting.engine_name,
        json.dumps(rest, sort_keys=True, default=str),
        setting.counter_name,
        cache_key,
        row_options,
    )


def prefix_key(unit: Unit) -> StoreKey:
    """Replays that can fork from each other: same conversation, engine, replay options and cache (any summarizer)."""
    return tuple(part for n, part in enumerate(unit_store_key(unit)) if n in (0, 2, 3, 4, 5))


@dataclass(slots=True)
class _Answer:
    """Not frozen: its time is added once the replay it waited for has run."""

    proven: Proven
    replayed: bool
    shared_steps: int = 0
    seconds: float = 0.0
    #: Compaction rows taken from the replay this one was forked from.
    shared_compactions: int = 0


@dataclass
class _UnitRun:
    """The state of one unit while it runs (not frozen: the worker updates it as the unit's cells are answered)."""

    unit: Unit
    #: The unit's Setting with its summary model built once (each cell replays it at its own limits).
    setting: Setting
    key: StoreKey
    cache: SummaryCache | _CollectingCache | bool
    planner: ForkPlanner
    answers: dict[tuple[int, int], _Answer] = field(default_factory=dict)
    failed: dict[tuple[int, int], tuple[str, float]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: CPU seconds spent building the conversation's anchor index (see :attr:`UnitResult.setup_cpu_seconds`).
    setup_cpu: float = 0.0
    #: Anchor indexes kept beside the summary cache (:mod:`~zett_lab.study.kept_indexes`), None without one.
    kept: KeptIndexes | None = None

    def replay_cell(self, cell: tuple[int, int]) -> None:
        """Replay one cell (forked where a finished replay provably shares its start) and remember it."""
        unit, (max_tokens, keep) = self.unit, cell
        began = time.perf_counter()
        fork = self.planner.fork_for(max_tokens, keep) if unit.reuse else None
        try:
            trace, run = replay_forkable(
                unit.conversation,
                self.setting.with_limits(max_tokens, keep),
                dataclasses.replace(unit.options, cache=cast(CacheSpec, self.cache), warn=False),  # or a cache alike
                fork=fork,
            )
        except CacheError:
            raise  # the summary cache is unusable: the sweep stops with its one message, no cell records it
        except Exception as exc:  # noqa: BLE001 - a cell records its own failure
            with self.lock:
                self.failed[cell] = (f"{type(exc).__name__}: {exc}", time.perf_counter() - began)
            tick(unit.ticks, unit.index, worker_name())
            return
        where = (
            region(trace, count_tokens=self.setting.token_counter(), limits=engine_reuse(self.setting.engine_spec()))
            if unit.reuse
            else Region.point(max_tokens, keep, "reuse off")
        )
        proven = Proven.of(f"{os.getpid()}-{uuid.uuid4().hex[:12]}", where, trace)
        with self.lock:
            if unit.reuse:
                STORE.add(self.key, proven)
                self.planner.add(trace, run)
            self.answers[cell] = _Answer(
                proven,
                True,
                fork.mark.steps if fork is not None else 0,
                time.perf_counter() - began,
                fork.mark.compactions if fork is not None else 0,
            )
        tick(unit.ticks, unit.index, worker_name())


def _open_cache(unit: Unit) -> SummaryCache | _CollectingCache | bool:
    if unit.cache is False:
        return False
    if unit.cache == WORKER_CACHE:
        return _CollectingCache(SummaryCache())
    return unit.cache if isinstance(unit.cache, SummaryCache) else SummaryCache(str(unit.cache))


#: The message lists of the conversations this process replayed, by fingerprint (the last few).
_MESSAGES: OrderedDict[str, list[Any]] = OrderedDict()
_MESSAGES_KEPT = 4


def shared_messages(conversation: Conversation, digest: str) -> Conversation:
    """``conversation`` holding the message list this process already has for the same fingerprint.

    Every unit (and every task of a report) arrives with its own copy of the conversation; one shared
    list lets the anchor index, the observed values and the token counts kept per list serve them all
    (building a long conversation's index takes seconds, and each copy kept one alive).
    """
    held = _MESSAGES.get(digest)
    if held is None or len(held) != len(conversation.messages):  # (a list changed in place since: not shared)
        held = _MESSAGES[digest] = conversation.messages
        while len(_MESSAGES) > _MESSAGES_KEPT:
            _MESSAGES.popitem(last=False)
    _MESSAGES.move_to_end(digest)
    return conversation if held is conversation.messages else dataclasses.replace(conversation, messages=held)


def run_unit(unit: Unit) -> UnitResult:
    """Answer every cell of ``unit`` (see the module docstring)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    load_plugins(unit.metric_modules)
    unit = dataclasses.replace(unit, conversation=shared_messages(unit.conversation, unit.fingerprint))
    setting = dataclasses.replace(unit.setting, summarizer=unit.setting.summary_model())
    planner = ForkPlanner(
        prefix_key(unit),
        setting.summarizer_name,
        setting.token_counter(),
        engine_reuse(setting.engine_spec()),
    )
    cache = _open_cache(unit)
    state = _UnitRun(unit, setting, unit_store_key(unit), cache, planner)
    state.kept = KeptIndexes.beside(getattr(cache, "path", None))
    state.setup_cpu = _share_index(unit, state.kept)
    lines_to = unit.tables_to if _shares_lines(unit, setting) else None
    if lines_to is not None:
        lines_to.take_lines(unit.fingerprint)
    keep_order = {cell: n for n, cell in enumerate(unit.cells)}
    # Highest max_tokens first: its replay compacts least, and lower ones fork from it where they first differ.
    pending = sorted(set(unit.cells), key=lambda cell: (-cell[0], -cell[1]))
    while pending:
        remaining = []
        for cell in pending:
            proven = STORE.find(state.key, *cell) if unit.reuse else None
            if proven is not None:
                state.answers[cell] = _Answer(proven, False)
                tick(unit.ticks, unit.index, worker_name())
            else:
                remaining.append(cell)
        if not remaining:
            break
        wave = _spread(remaining, unit.concurrency)
        if len(wave) == 1:
            state.replay_cell(wave[0])
        else:
            with cf.ThreadPoolExecutor(max_workers=len(wave)) as threads:
                list(threads.map(state.replay_cell, wave))
        if lines_to is not None:  # after its first replay, whose spans hold most of the conversation's lines
            lines_to.give_lines(unit.fingerprint)
            lines_to = None
        pending = [cell for cell in remaining if cell not in wave]
    sources = _finish_sources(state)
    cells = sorted(_cell_results(state), key=lambda c: keep_order[(c.max_tokens, c.keep_recent_tokens)])
    collected = state.cache.new if isinstance(state.cache, _CollectingCache) else []
    return UnitResult(
        index=unit.index,
        cells=cells,
        sources=sources,
        new_summaries=collected,
        worker=worker_name(),
        seconds=time.perf_counter() - started,
        cpu_seconds=time.process_time() - cpu_started,
        setup_cpu_seconds=state.setup_cpu,
        summary_seconds=sum(
            computed_summary_seconds(trace.compactions, a.shared_compactions)
            for a in state.answers.values()
            if a.replayed and (trace := a.proven.trace) is not None
        ),
    )


def run_units(units: list[Unit]) -> list[UnitResult]:
    """:func:`run_unit` for each of a few units (at least one) of one conversation, one after another in one worker:
    they share its message list, anchor index and token counts, built once instead of once per worker."""
    first = units[0]
    with frozen_for((first.fingerprint, first.tables_to), messages=len(first.conversation.messages)):
        return [run_unit(unit) for unit in units]


def _finish_sources(state: _UnitRun) -> dict[str, SourcePayload]:
    """Rows for the replays the cells use (computed once each), as payloads for the driver."""
    used = list({id(a.proven): a.proven for a in state.answers.values()}.values())
    began = time.perf_counter()
    state.setup_cpu += _index_conversation(used, state.unit, state.kept)
    with kept_measuring(getattr(state.cache, "path", None), used, state.unit.fingerprint, state.unit.metrics):
        source_rows(used, state.unit)
    share = (time.perf_counter() - began) / max(1, sum(a.replayed for a in state.answers.values()))
    for answer in state.answers.values():
        if answer.replayed:
            answer.seconds += share
    shared = {a.proven.source_id: a.shared_compactions for a in state.answers.values() if a.replayed}
    payloads = {}
    for proven in used:
        trace = proven.trace
        if trace is None:  # a proof received from the driver without its tables: nothing to send
            continue
        tables = {"steps": trace.steps, "compactions": trace.compactions}
        if proven.kept is not None:  # measured by this unit, or by the earlier one (or sweep) that ran it
            kept, counts = proven.kept
            tables.update({f"losses-{name}": getattr(kept, name) for name in LOSS_TABLES if name != "anchors"})
            tables.update(
                {
                    "losses-anchors": frame([], ANCHOR_COLUMNS),
                    LOST_ANCHORS_TABLE: kept.anchors,
                    ANCHOR_COUNTS_TABLE: counts,
                }
            )
        written = state.unit.tables_to
        if written is not None:
            written.write(proven.source_id, tables)
            written.write_events(proven.source_id, trace.engine_events)
        payloads[proven.source_id] = SourcePayload(
            source_id=proven.source_id,
            region=proven.region,
            tables=None if written is not None else tables,
            sent=sorted_sent(trace.steps),
            settings=trace.settings.named(),
            engine_events=None if written is not None else trace.engine_events,
            row=proven.row,
            row_error=proven.row_error,
            failures=failure_counts(trace.compactions.iloc[shared.get(proven.source_id, 0) :]),
        )
    return payloads


#: Seconds a worker waits for the anchor index another worker claimed (:func:`_share_index`) before building its
#: own: the builder of a long session's takes seconds; one that failed or died leaves a claim and no index.
INDEX_WAIT_S = 120.0


def _share_index(unit: Unit, kept: KeptIndexes | None) -> float:
    """For a conversation whose units run on several workers (:attr:`Unit.index_shared`): when no other unit has
    claimed it, build its anchor index before replaying and leave it in the sweep's folder, so the other workers
    take it instead of building their own (a long conversation's index costs seconds of CPU; reading it, a tenth);
    return the CPU seconds spent. An index kept from an earlier run (``kept``) is taken by each worker as it
    measures: none is built."""
    writer, conversation = unit.tables_to, unit.conversation
    if not (unit.index_shared and unit.metrics and writer is not None):
        return 0.0
    if held_index(conversation.messages, conversation.harness_context) is not None:
        return 0.0
    if kept is not None and kept.file(conversation_key(conversation, unit.fingerprint)).exists():
        return 0.0
    if not writer.claim_index(unit.fingerprint):
        return 0.0
    began = time.process_time()
    try:
        built = pickled(conversation_index(conversation).built())  # once, for both files
    except BaseException:
        writer.release_index(unit.fingerprint)  # the others build their own instead of waiting for it
        raise
    writer.write_index(unit.fingerprint, built)
    cpu = time.process_time() - began
    if kept is not None and cpu >= KEEP_FROM_CPU_S:
        kept.write(conversation_key(conversation, unit.fingerprint), built)
    return cpu


def _shares_lines(unit: Unit, setting: Setting) -> bool:
    """Whether the unit summarizes with the anchors summarizer a conversation whose units run on several workers
    sharing the sweep's folder: the first to have replayed leaves its lines' items there for the others
    (:meth:`~zett_lab.study.sources.TableWriter.give_lines`), which take them when they start."""
    return unit.index_shared and unit.tables_to is not None and isinstance(setting.summarizer, Anchors)


def _index_conversation(sources: list[Proven], unit: Unit, kept: KeptIndexes | None) -> float:
    """Build the anchor index the replays' measuring reads, before measuring them, or take the one another worker
    left in the sweep's folder (:func:`_share_index`) or an earlier run kept (``kept``, which keeps what this one
    builds when it costs :data:`~zett_lab.study.kept_indexes.KEEP_FROM_CPU_S` or more); return its CPU seconds (0
    when this process has it already, or nothing is measured). Timed apart: a worker builds it once per
    conversation, whatever number of units it runs (what a schedule of the units on more workers must charge each
    worker)."""
    traces = [p.trace for p in sources if p.row is None and p.trace is not None]
    if not unit.metrics or not traces:
        return 0.0
    began = time.process_time()
    conversation = traces[0].conversation
    if held_index(conversation.messages, conversation.harness_context) is None:
        key = conversation_key(conversation, unit.fingerprint)
        built = unit.tables_to.wait_index(unit.fingerprint, INDEX_WAIT_S) if unit.tables_to is not None else None
        if built is None and kept is not None:
            built = kept.read(conversation, key)
        index = conversation_index(conversation, built)
        if built is None and kept is not None:
            fresh = index.built()  # (its arrays and needles, which measuring builds anyway)
            if time.process_time() - began >= KEEP_FROM_CPU_S:
                kept.write(key, pickled(fresh))
    return time.process_time() - began


def _cell_results(state: _UnitRun) -> list[CellResult]:
    out = []
    for (max_tokens, keep), (error, seconds) in state.failed.items():
        out.append(CellResult(max_tokens, keep, None, True, 0, None, error, seconds, 0, 0))
    for (max_tokens, keep), answer in state.answers.items():
        proven = answer.proven
        if answer.replayed:
            calls, hits = summary_calls(proven.trace.compactions) if proven.trace is not None else (0, 0)
            row = dict(proven.row or {})
        else:
            calls = hits = 0
            row = proven.derived_row(max_tokens, keep)
        out.append(
            CellResult(
                max_tokens,
                keep,
                proven.source_id,
                answer.replayed,
                answer.shared_steps,
                row,
                proven.row_error,
                answer.seconds,
                calls,
                hits,
            )
        )
    return out


def source_rows(sources: list[Proven], unit: Unit) -> None:
    """Fill ``row`` (budget figures, cost, loss metrics) of replays that have none yet, and ``kept``: their
    losses as a report keeps them (:func:`~zett_lab.measure.losses.measure_lost_and_counted`: a report shows
    any cell in full without measuring it again, also of a later sweep answered from these replays).

    Costs of all of them are computed in one :func:`zett_lab.measure.cost.add_costs` call
    (the tables concatenated with a ``run_id``), metrics per replay. A failure is kept in
    ``row_error`` and reported by every cell that uses that replay.
    """
    todo = [p for p in sources if p.row is None and p.trace is not None]
    if not todo:
        return
    traces = [p.trace for p in todo if p.trace is not None]
    rows = {n: dict(trace.summary()) for n, trace in enumerate(traces)}
    _add_costs(todo, traces, rows, unit)
    if unit.metrics:
        for n, (proven, trace) in enumerate(zip(todo, traces, strict=True)):
            try:
                losses, counts = measure_lost_and_counted(trace)
            except Exception as exc:  # noqa: BLE001 - reported by the cells
                proven.row_error = proven.row_error or f"metrics: {type(exc).__name__}: {exc}"
                continue
            proven.kept = (losses, counts)
            for key, value in losses.conversation.iloc[0].to_dict().items():
                rows[n].setdefault(str(key), value)
    for n, proven in enumerate(todo):
        proven.row = rows[n]


def _add_costs(todo: list[Proven], traces: list[Trace], rows: dict[int, dict[str, Any]], unit: Unit) -> None:
    try:
        runs = list(range(len(traces)))
        steps = _stacked([t.steps for t in traces], run_id=runs)
        compactions = _stacked(
            [t.compactions for t in traces],
            run_id=runs,
            max_tokens=[t.setting.max_tokens for t in traces],
            keep_recent_tokens=[t.setting.keep_recent_tokens for t in traces],
        )
        priced_steps, priced_compactions = add_costs(
            steps, compactions, primary_model=unit.primary_model or "offline", prices=unit.prices
        )
        for record in cost_summary(priced_steps, priced_compactions).to_dict("records"):
            row = rows[int(record["run_id"])]
            for key, value in record.items():
                if key in ("run_id", "conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "steps"):
                    continue
                if unit.primary_model is None and key in ("primary_cost_usd", "total_cost_usd"):
                    continue
                row[str(key)] = value
    except SettingError as exc:
        # No list price for this summarizer (a custom or self-hosted model): the replay and its
        # metrics stand; only the money is unknown until prices= names it.
        for row in rows.values():
            row["cost_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported by the cells
        for proven in todo:
            proven.row_error = f"cost: {type(exc).__name__}: {exc}"


def _stacked(tables: list[pd.DataFrame], **per_table: list[Any]) -> pd.DataFrame:
    """``tables`` one under another, plus a column per keyword holding each table's value on its rows.

    Equal to concatenating ``table.assign(**values)``, without copying every table first.
    """
    stacked = pd.concat(tables, ignore_index=True)
    lengths = [len(table) for table in tables]
    for name, values in per_table.items():
        stacked[name] = np.repeat(np.asarray(values), lengths)
    return stacked


def _spread(values: list[tuple[int, int]], n: int) -> list[tuple[int, int]]:
    """Up to ``n`` cells spread over a list: the first, the last, evenly between."""
    if n <= 1 or len(values) <= 1:
        return values[:1]
    if len(values) <= n:
        return list(values)
    picks = sorted({round(i * (len(values) - 1) / (n - 1)) for i in range(n)})
    return [values[i] for i in picks]
