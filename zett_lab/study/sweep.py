"""Grids of replays: conversations × engines × summarizers × max_tokens × keep_recent_tokens.

:func:`sweep` replays every cell of the grid through the real engine and returns a
:class:`~zett_lab.study.results.Sweep`: a tidy results table (one row per conversation ×
engine × summarizer × setting, with the budget figures of :meth:`Trace.summary`, token and money cost
from :mod:`zett_lab.measure.cost`, the offline loss metrics of :func:`zett_lab.measure`, and
an ``error`` column) plus every cell's :class:`Trace`, kept on disk.

Every cell is exactly what :func:`zett_lab.replay` gives for that setting alone. Speed comes
from sharing work, never from approximating the engine:

- one exact memoizing token counter per worker process, shared by all its replays;
- the persistent summary cache (:class:`~zett_lab.summarizers.SummaryCache`): a summary
  request seen before, in this sweep or an earlier one, is not computed again;
- proven reuse (:mod:`zett_lab.study.boundaries`): one replay proves a whole rectangle of
  settings takes the same decisions (e.g. every ``max_tokens`` above the peak estimate,
  with any ``keep_recent_tokens``); cells inside it get that replay's trace with only the
  setting columns changed;
- forked replays (:mod:`zett_lab.replay.fork`): a setting that takes another replay's
  decisions up to some turn starts there, from the engine state that replay left, so a grid
  pays for each distinct decision path once.

Both proofs are made for the stock engine; a user engine (``engines=``) shares work only
along the limits it declares (``zett_lab_reuse``), one that declares none replays every cell.

Work is split into units of one conversation, engine and summarizer (split further by
``keep_recent_tokens`` when there are fewer units than workers), run on any
:class:`concurrent.futures.Executor` (:mod:`zett_lab.study.executors`), and collected as they
finish: each distinct replay's tables and engine events go to disk at once (a worker on this
machine writes them itself; one on a cluster sends them back), so memory does not grow with the
number of cells. A unit that fails (or a worker that dies) marks only its own cells with the
error, and a rerun picks up the finished summaries from the cache. A cell whose replay had
failed summaries is marked (``failed``, ``summary_error``) and is no measurement
(:func:`~zett_lab.study.choose.measured_cells`). The default pool starts
its workers with ``forkserver``: a script (not a notebook) that sweeps with it needs the
usual ``if __name__ == "__main__":`` guard.

Example::

    >>> import zett_lab
    >>> from zett_lab.study import sweep, recommend
    >>> s = sweep(zett_lab.load_all("fixtures/"), max_tokens=[0.1, 0.2, 0.4],
    ...           keep_recent_tokens=[0.02, 0.05], summarizers=["anchors:0.1", "mask"],
    ...           context_window="gpt-4o")                                   # doctest: +SKIP
    >>> s.results[["conversation_id", "max_tokens", "needed_anchor_recall"]]   # doctest: +SKIP
    >>> recommend(s, "needed_anchor_recall >= 0.9 and constraint_survival == 1")  # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import math
import os
import pickle
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from zett_agent.model import AgentModel, ReasoningEffort

from ..errors import ResultFailure, SettingError, SettingWarning, SummaryFailureWarning
from ..load.conversation import Conversation
from ..load.text import message_text
from ..measure.catalogue import plugin_modules
from ..progress import Progress, ProgressEvent
from ..replay.engine import EngineSpec, ReplayProbe, build_engine, engine_name, engine_reuse
from ..replay.setting import ReplayOptions, Setting, build_summarizer, check_limits, compose, keep_fills_budget
from ..summarizers import DEFAULT_SUMMARIZER, CacheError, SummaryCache, resolve_cache, summarizer_identity
from .choose import measured_cells
from .executors import in_process, is_remote, parallelism, resolve_executor, stop_workers
from .grid import (
    REPLAY_OPTIONS,
    Cell,
    GridValue,
    conversations_of,
    fingerprint,
    is_offline,
    resolve_context_window,
    resolve_engines,
    resolve_values,
    summarizer_label,
)
from .results import Sweep, SweepConfig, results_frame
from .reuse import STORE, Proven, StoreKey
from .sources import Source, SourceFolder, TableWriter
from .store import SweepStore
from .ticks import CellTicks
from .units import WORKER_CACHE, CellResult, Unit, UnitResult, run_units, unit_store_key

#: Concurrent replays per unit for summarizers that call a provider (offline ones run one at a time).
DEFAULT_PROVIDER_CONCURRENCY = 4
#: Units a worker's share of a sweep is cut into at least, where a conversation and summarizer can be cut (by
#: ``keep_recent_tokens``): with one long conversation, one unit per summarizer left a worker idle while another
#: ran the costliest summarizer's unit at the end; forks lose little (a worker forks a unit's replays from any
#: replay it ran before, of any summarizer, up to their first compaction).
UNITS_PER_WORKER = 4
#: Units of one conversation run as one task while together they cost at most this share of one worker's
#: part of the sweep (on a local pool; on a cluster each unit is a task, so a lost worker costs only its own).
BATCH_SHARE = 0.25


@dataclass
class _Plan:
    """A checked grid, cut into units."""

    conversations: list[Conversation]
    window: int | None
    max_values: list[tuple[int, float | None]]
    keep_values: list[tuple[int, float | None]]
    labels: list[str]
    identities: list[str]
    engines: list[tuple[str, EngineSpec]]
    cache: SummaryCache | None
    units: list[Unit]
    keys: dict[int, StoreKey]
    #: The units in the order they are submitted: the costliest first (:func:`replay_cost` × cells).
    order: list[Unit]
    #: Per unit index: its cost (:func:`replay_cost` × cells).
    costs: dict[int, float]
    #: The grid's Setting at its first cell (what every cell shares but its engine, summarizer and limits).
    template: Setting


def sweep(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
    *,
    max_tokens: Sequence[GridValue] | GridValue,
    keep_recent_tokens: Sequence[GridValue] | GridValue,
    summarizers: Sequence[str | AgentModel] | str | None = None,
    engines: Mapping[str, EngineSpec] | None = None,
    executor: cf.Executor | str | None = None,
    progress: bool | Callable[[ProgressEvent], None] = True,
    cache: SummaryCache | str | os.PathLike[str] | bool | None = None,
    context_window: int | str | None = None,
    primary_model: str | None = None,
    prices: Mapping[str, Any] | None = None,
    metrics: bool = True,
    reuse: bool = True,
    **replay_options: Any,
) -> Sweep:
    """Replay every conversation under every setting and summarizer; see the module docstring.

    Args:
        conversations: a Conversation, a list of them, or a path for :func:`zett_lab.load_all`.
        max_tokens, keep_recent_tokens: token counts (ints) or fractions of
            ``context_window`` (floats in (0, 1]). ``keep_recent_tokens >= max_tokens`` is
            allowed (the engine allows it) and simply reported.
        summarizers: specs for :func:`zett_lab.summarizer` and/or AgentModel instances
            (picklable ones for a process executor); None: the default offline summarizer.
        engines: ``{label: engine}``: compaction engines to compare (None: the stock engine,
            a ``CompactionExtension`` subclass, or a factory, as for :func:`zett_lab.replay`);
            the labels fill the ``engine`` column. None: ``{"stock": None}``. Each is built
            once before anything runs, so a failing factory is one error. Proven reuse and
            forks are applied to an engine only along the limits it declares (``zett_lab_reuse``).
        executor: None (the session's process pool, one worker per core), ``"serial"``, or any
            :class:`concurrent.futures.Executor` (e.g. ``distributed.Client.get_executor()``).
        progress: a progress bar with an ETA (tqdm: a widget in a notebook, from the start; on
            stderr in a terminal, once the sweep takes a second); False for none; or a function called with a
            :class:`ProgressEvent` after each unit.
        cache: the summary cache: a SummaryCache, a path, None (the default cache) or False.
        context_window: tokens, or a model name from :data:`~zett_lab.study.grid.CONTEXT_WINDOWS`.
        primary_model: price the primary model's input (``*_usd`` columns); None: tokens only.
        prices: price overrides for :func:`zett_lab.measure.cost.add_costs`.
        metrics: compute the offline loss metrics.
        reuse: share proven-identical replays and forks between settings (off: replay every cell).
        **replay_options: passed to :func:`zett_lab.replay` (``usage``, ``reasoning_effort``,
            ``strict``, ``engine_timeout``, ``compact_at``, ``count_tokens``, ...). With ``strict=True`` the sweep
            stops at its first failed cell.

    Raises:
        SettingError: an empty grid, a bad value, an unknown summarizer spec, engine or option;
            :class:`~zett_lab.replay.engine.EngineError` for an engine that cannot be built.
        ResultFailure: with ``strict=True``, the first failed cell (named).
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    runner, runner_name = resolve_executor(executor)
    if replay_options.get("compact_at"):
        reuse = False  # manual passes: every setting is its own replay
    plan = _plan(
        conversations,
        max_tokens,
        keep_recent_tokens,
        summarizers,
        engines,
        cache,
        context_window,
        runner,
        dict(replay_options),
        metrics=metrics,
        primary_model=primary_model,
        prices=prices,
        reuse=reuse,
        metric_modules=plugin_modules() if metrics else (),
    )
    collector = _Collector(plan, reuse, remote=is_remote(runner))
    tracker = Progress(total=sum(len(u.cells) for u in plan.units), label="sweep", show=progress)
    try:
        _run(plan, runner, collector, tracker, strict=bool(replay_options.get("strict")))
    finally:
        tracker.close()
    rows, cell_map = collector.rows()
    results = results_frame(rows, plan.window is not None)
    config = _config(
        plan,
        collector,
        results,
        runner_name,
        replay_options,
        context_window,
        primary_model=primary_model,
        metrics=metrics,
        reuse=reuse,
        elapsed=time.perf_counter() - started,
        driver_cpu=time.process_time() - cpu_started,
    )
    swept = Sweep(
        results=results,
        config=config,
        store=SweepStore({c.id: c for c in plan.conversations}, collector.sources, cell_map),
    )
    for failure in swept.failure_counts.itertuples(index=False):
        warnings.warn(
            f"{failure.count} {failure.what}(s) failed ({failure.summarizer}): {failure.cause}; "
            "those cells are no measurement (see Sweep.failure_counts)",
            SummaryFailureWarning,
            stacklevel=2,
        )
    return swept


def _plan(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
    max_tokens: Sequence[GridValue] | GridValue,
    keep_recent_tokens: Sequence[GridValue] | GridValue,
    summarizers: Sequence[str | AgentModel] | str | None,
    engines: Mapping[str, EngineSpec] | None,
    cache: SummaryCache | str | os.PathLike[str] | bool | None,
    context_window: int | str | None,
    runner: cf.Executor,
    replay_options: dict[str, Any],
    **unit_options: Any,
) -> _Plan:
    """Check the grid and cut it into units (nothing runs yet; each engine is built once)."""
    unknown = sorted(set(replay_options) - set(REPLAY_OPTIONS))
    if unknown:
        raise SettingError(
            f"unknown sweep option(s) {unknown}; replay options a sweep passes on: {', '.join(REPLAY_OPTIONS)}"
        )
    items = conversations_of(conversations)
    window = resolve_context_window(context_window)
    max_values = resolve_values(max_tokens, "max_tokens", window)
    keep_values = resolve_values(keep_recent_tokens, "keep_recent_tokens", window)
    for m, _ in max_values:
        for k, _ in keep_values:
            check_limits(m, k)
    # The grid's Setting at its first cell, and how each replay runs: every option checked before anything runs.
    template, options = compose(
        None,
        ReplayOptions(warn=False),
        {"max_tokens": max_values[0][0], "keep_recent_tokens": keep_values[0][0], **replay_options},
    )
    _warn_keep_fills_budget(max_values, keep_values)
    specs = (
        [DEFAULT_SUMMARIZER]
        if summarizers is None
        else ([summarizers] if isinstance(summarizers, str) else list(summarizers))
    )
    if not specs:
        raise SettingError("summarizers is empty: a sweep needs at least one summarizer")
    models = [build_summarizer(spec) for spec in specs]  # fails fast on a bad spec
    labels = [summarizer_label(spec) for spec in specs]
    if len(set(labels)) != len(labels):
        raise SettingError(f"summarizers must be distinct, got {labels}")
    _refuse_one_under_two_labels("summarizers", labels, [summarizer_identity(m) for m in models])
    summary_cache = resolve_cache(cache)
    engine_items = resolve_engines(engines, in_process(runner))
    _refuse_one_under_two_labels(
        "engines", [label for label, _ in engine_items], [engine_name(e) for _, e in engine_items]
    )
    for _, engine in engine_items:  # a factory that fails or ignores the limits: one error before anything runs
        build_engine(
            engine,
            ReplayProbe,
            model=models[0],
            max_tokens=template.max_tokens,
            keep_recent_tokens=template.keep_recent_tokens,
            count_tokens=template.token_counter(),
            reasoning_effort=ReasoningEffort(template.reasoning_effort),
        )
    shipped = _shippable(specs, models, in_process(runner))
    unit_cache: SummaryCache | str | bool = (
        False if summary_cache is None else (WORKER_CACHE if is_remote(runner) else summary_cache)
    )
    costs = [replay_cost(conversation) for conversation in items]
    # A part of one worker's share of the whole grid: a conversation and summarizer costing more is cut into
    # groups of keep_recent_tokens, so the workers can be kept evenly busy to the end.
    workers = parallelism(runner)
    share = sum(costs) * len(specs) * len(engine_items) / (workers * UNITS_PER_WORKER) if workers > 1 else math.inf
    summarizer_items = list(zip(shipped, models, labels, strict=True))
    units: list[Unit] = []
    for conversation, cost in zip(items, costs, strict=True):
        digest = fingerprint(conversation)
        groups = _keep_groups([k for k, _ in keep_values], cost, share)
        for (engine_label, engine), (spec, model, label) in itertools.product(engine_items, summarizer_items):
            concurrency = (
                1 if is_offline(model) else (getattr(model, "max_concurrency", None) or DEFAULT_PROVIDER_CONCURRENCY)
            )
            for keeps in groups:
                units.append(
                    Unit(
                        index=len(units),
                        conversation=conversation,
                        fingerprint=digest,
                        setting=dataclasses.replace(template, summarizer=spec, engine=engine),
                        options=options,
                        label=label,
                        cells=[(m, k) for k in keeps for m, _ in max_values],
                        cache=unit_cache,
                        concurrency=concurrency,
                        engine_label=engine_label,
                        **unit_options,
                    )
                )
    keys = {unit.index: unit_store_key(unit) for unit in units}
    cost_of = {id(conversation): cost for conversation, cost in zip(items, costs, strict=True)}
    unit_costs = {unit.index: cost_of[id(unit.conversation)] * len(unit.cells) for unit in units}
    order = sorted(units, key=lambda unit: -unit_costs[unit.index])
    return _Plan(
        items,
        window,
        max_values,
        keep_values,
        labels,
        [summarizer_identity(m) for m in models],
        engine_items,
        summary_cache,
        units,
        keys,
        order,
        unit_costs,
        template,
    )


def _refuse_one_under_two_labels(what: str, labels: list[str], names: list[str]) -> None:
    """A cell is a conversation under a Setting: two labels naming one engine or summarizer would be one cell twice."""
    first: dict[str, str] = {}
    for label, name in zip(labels, names, strict=True):
        if name in first:
            raise SettingError(f"{what} {first[name]!r} and {label!r} are the same ({name}); give it once")
        first[name] = label


def _warn_keep_fills_budget(
    max_values: list[tuple[int, float | None]], keep_values: list[tuple[int, float | None]]
) -> None:
    """One :class:`~zett_lab.errors.SettingWarning` for all settings whose kept tail alone fills the budget."""
    filling = [(m, k) for m, _ in max_values for k, _ in keep_values if keep_fills_budget(m, k)]
    if filling:
        m, k = filling[0]
        warnings.warn(
            f"{len(filling)} of {len(max_values) * len(keep_values)} settings have keep_recent_tokens >= max_tokens; "
            f"e.g. {keep_fills_budget(m, k)}",
            SettingWarning,
            stacklevel=4,
        )


def _shippable(specs: Sequence[str | AgentModel], models: Sequence[AgentModel], local: bool) -> list[str | AgentModel]:
    """What each unit carries of its summarizer: the spec string, or a model that pickles."""
    shipped: list[str | AgentModel] = []
    for spec, model in zip(specs, models, strict=True):
        if isinstance(spec, str) or local:
            shipped.append(spec if isinstance(spec, str) else model)
            continue
        try:
            pickle.dumps(model)
        except Exception as error:
            raise SettingError(
                f"summarizer {summarizer_label(model)!r} cannot be sent to worker processes ({type(error).__name__}: {error}); "
                "pass it as a spec string or use executor='serial'"
            ) from error
        shipped.append(model)
    return shipped


def replay_cost(conversation: Conversation) -> float:
    """A conversation's relative cost in a sweep (messages × characters: each step's runtime grows with the
    context, and longer conversations compact more often, so take more distinct replays)."""
    return float(len(conversation.messages) * sum(len(message_text(m)) for m in conversation.messages))


def _keep_groups(keeps: list[int], cost: float, share: float) -> list[list[int]]:
    """``keep_recent_tokens`` values per unit of one conversation and summarizer: all in one (forks share the
    most), cut into as many groups as it takes for each to cost at most ``share`` (a part of one worker's share of
    the grid, :data:`UNITS_PER_WORKER`).

    Neighbouring values stay together: they take the same decisions longest, so share the most forks.
    """
    parts = min(len(keeps), max(1, math.ceil(cost / share))) if share > 0 else 1
    size = -(-len(keeps) // parts)
    return [keeps[i : i + size] for i in range(0, len(keeps), size)]


@dataclass(frozen=True, slots=True)
class _Ran:
    worker: str
    seconds: float
    cpu_seconds: float
    setup_cpu_seconds: float


@dataclass
class _Collector:
    """What the driver keeps as units finish: each replay's tables go to disk, cells stay as rows."""

    plan: _Plan
    reuse: bool
    remote: bool
    folder: SourceFolder = field(default_factory=SourceFolder)
    sources: dict[str, Source] = field(default_factory=dict)
    cells: dict[int, dict[tuple[int, int], CellResult]] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)
    #: Per finished unit: where it ran, its wall and CPU seconds (its tables are on disk, not here).
    finished: dict[int, _Ran] = field(default_factory=dict)
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
        self.finished[unit.index] = _Ran(result.worker, result.seconds, result.cpu_seconds, result.setup_cpu_seconds)
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

    def rows(self) -> tuple[list[dict[str, Any]], dict[Cell, str]]:
        """The results rows, in grid order, and which replay each complete cell uses."""
        plan = self.plan
        share = {"max": dict(plan.max_values), "keep": dict(plan.keep_values)}
        identity = dict(zip(plan.labels, plan.identities, strict=True))
        rows: list[dict[str, Any]] = []
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


def _next_batch(order: deque[Unit], costs: dict[int, float], budget: float) -> list[Unit]:
    """The next unit of ``order``, with the units after it of the same conversation while together they cost
    at most ``budget``: one task, so one worker builds that conversation's anchor index once."""
    batch = [order.popleft()]
    spent = costs[batch[0].index]
    while order and order[0].fingerprint == batch[0].fingerprint and spent + costs[order[0].index] <= budget:
        spent += costs[order[0].index]
        batch.append(order.popleft())
    return batch


def _run(plan: _Plan, runner: cf.Executor, collector: _Collector, tracker: Progress, *, strict: bool) -> None:
    """Submit units in the plan's order (the costliest first), a bounded number of tasks at a time, and collect
    them as they finish.

    A task is one unit, or on a local pool several units of one small conversation (:func:`_next_batch`;
    together at most :data:`BATCH_SHARE` of one worker's share of the sweep, so the workers stay
    balanced). A lost task marks the cells of its own units failed, no others. The bar moves cell by cell
    where units can report (:mod:`zett_lab.study.ticks`), else unit by unit. ``strict``: stop at the first
    failed cell (:class:`~zett_lab.errors.ResultFailure` naming it).
    """
    order = deque(plan.order)
    workers = parallelism(runner)
    in_flight_limit = max(2, 2 * workers)
    batch_budget = 0.0 if collector.remote else BATCH_SHARE * sum(plan.costs.values()) / workers
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
            for unit in _next_batch(order, plan.costs, batch_budget):
                remaining = collector.answer_from_store(unit)
                if not remaining:
                    finish(unit, None)
                    continue
                task.append(unit)
                sent.append(replace(unit, cells=remaining, ticks=ticks.channel, tables_to=collector.tables_to))
            if not task:
                continue
            try:
                futures[runner.submit(run_units, sent)] = task
            except Exception as error:  # noqa: BLE001 - the executor refused: those cells carry it
                for unit in task:
                    collector.failures[unit.index] = f"executor: {type(error).__name__}: {error}"
                    finish(unit, None)

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


def _stop_at_first_failure(unit: Unit, collector: _Collector) -> None:
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


def _config(
    plan: _Plan,
    collector: _Collector,
    results: Any,
    runner_name: str,
    replay_options: dict[str, Any],
    context_window: int | str | None,
    *,
    primary_model: str | None,
    metrics: bool,
    reuse: bool,
    elapsed: float,
    driver_cpu: float,
) -> SweepConfig:
    finished = collector.finished.values()
    replayed = results["replayed"] == True if "replayed" in results else None  # noqa: E712 - nullable booleans
    shared = results["shared_steps"].fillna(0) if "shared_steps" in results else None
    return SweepConfig(
        conversations=[c.id for c in plan.conversations],
        max_tokens=[m for m, _ in plan.max_values],
        keep_recent_tokens=[k for k, _ in plan.keep_values],
        summarizers=plan.labels,
        summarizer_identities=plan.identities,
        engines=[label for label, _ in plan.engines],
        engine_identities=[engine_name(engine) for _, engine in plan.engines],
        engine_reuse={label: list(engine_reuse(engine)) for label, engine in plan.engines},
        context_window=plan.window,
        context_window_name=context_window if isinstance(context_window, str) else None,
        primary_model=primary_model,
        metrics=metrics,
        reuse=reuse,
        setting={
            name: value
            for name, value in plan.template.names().items()
            if name not in ("max_tokens", "keep_recent_tokens", "summarizer", "engine")
        },
        replay_options={
            k: (v if isinstance(v, (str, int, float, bool, list, type(None))) else repr(v))
            for k, v in replay_options.items()
        },
        cache=str(plan.cache.path) if plan.cache is not None else None,
        executor=runner_name,
        units=len(plan.units),
        workers=sorted({r.worker for r in finished}),
        replays=int(replayed.sum()) if replayed is not None else 0,
        forked=int(((shared > 0) & replayed).sum()) if shared is not None and replayed is not None else 0,
        shared_steps=int(shared.sum()) if shared is not None else 0,
        reused=int((results["replayed"] == False).sum()) if "replayed" in results else 0,  # noqa: E712
        errors=int(results["error"].notna().sum()),
        cells_with_failed_summaries=int((results["error"].isna() & ~measured_cells(results)).sum()),
        model_calls=int(results["model_calls"].fillna(0).sum()) if "model_calls" in results else 0,
        cache_hits=int(results["cache_hits"].fillna(0).sum()) if "cache_hits" in results else 0,
        summaries_merged=collector.merged,
        elapsed_s=round(elapsed, 3),
        worker_cpu_s=round(sum(r.cpu_seconds for r in finished), 3),
        worker_busy_s=round(sum(r.seconds for r in finished), 3),
        driver_cpu_s=round(driver_cpu, 3),
        unit_times=_unit_times(plan, collector),
    )


def _unit_times(plan: _Plan, collector: _Collector) -> list[dict[str, Any]]:
    """Per unit that ran, in submission order: what it was, where it ran, its wall, CPU and setup CPU seconds."""
    out = []
    for unit in plan.order:
        ran = collector.finished.get(unit.index)
        if ran is None:
            continue
        out.append(
            {
                "unit": unit.index,
                "conversation_id": unit.conversation.id,
                "engine": unit.engine_label,
                "summarizer": unit.label,
                "cells": len(unit.cells),
                "worker": ran.worker,
                "seconds": round(ran.seconds, 3),
                "cpu_s": round(ran.cpu_seconds, 3),
                "setup_cpu_s": round(ran.setup_cpu_seconds, 3),
            }
        )
    return out
