"""What a report states, computed once with the earlier stages' own functions.

:func:`report_sweep` runs the sweep a report over recorded conversations needs.
:func:`build_report_data` takes what the stages produced (traces, a :class:`Sweep`,
:class:`Losses`, a :class:`Comparison`) and computes everything a report shows: the per-replay
results with costs, the paired comparison, the recommended setting
(:func:`~zett_lab.study.choose.recommend`), the lost-but-needed items and the losses of the
replays shown in detail. :mod:`zett_lab.show.report` only renders the :class:`ReportData`.

Failed replays, and replays whose summaries failed, are kept apart: they are counted per cause,
never averaged into a metric, and a setting with such a replay is never recommended.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import ResultFailure, SettingError
from ..load.conversation import Conversation
from ..measure import Losses
from ..measure.catalogue import default_metrics
from ..replay.deadline import DEFAULT_ENGINE_TIMEOUT
from ..replay.engine import EngineSpec
from ..replay.trace import Trace, combine_failure_counts
from ..tokens import count_tokens
from .alerts import Alert, study_alerts
from .choose import NoFeasibleSetting, measured_cells
from .compare import Comparison, compare
from .grid import STOCK_ENGINE, resolve_context_window
from .recommendation import Recommendation, recommend
from .report_lost import DIGITS, cell_entries, dropped_constraint_items, lost_but_needed_items, trace_index
from .report_measured import Measured
from .report_native import report_production
from .report_tables import cost_overview, costs_per_replay, metric_summary, price_names
from .results import Sweep
from .sweep import sweep

#: Summarizers a report over recorded conversations runs: the built-in offline ones, the
#: default first (no network, no key, deterministic).
DEFAULT_REPORT_SUMMARIZERS: tuple[str, ...] = ("anchors", "extractive", "truncate", "mask")

#: Primary model whose list prices turn token counts into money in the cost section.
DEFAULT_PRIMARY_MODEL = "gpt-5-mini"

#: Context timelines a report draws at most (:func:`timeline_conversations`).
TIMELINES_SHOWN = 24

#: The cost and the loss of the report's Pareto front.
RECOMMEND_COST = "total_input_tokens"
RECOMMEND_LOSS = "lost_but_needed"

#: The columns that make one replay of a report.
_REPLAY_KEYS = ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens"]


def _round_sig(value: float, digits: int = 2) -> int:
    if value <= 0:
        return 0
    magnitude = 10 ** (math.floor(math.log10(value)) - digits + 1)
    return int(round(value / magnitude) * magnitude)


def default_grid(
    conversations: Sequence[Conversation], context_window: int | str | None = None
) -> dict[str, list[int]]:
    """A small grid scaled to the conversations: what ``zett-lab report`` runs by default.

    ``max_tokens`` at a quarter, half and all of the median conversation's size (two
    significant digits, at least 2,000), ``keep_recent_tokens`` at a quarter and half of the
    smallest ``max_tokens``. On the bundled fixtures: 6.1k/12k/24k × 1.5k/3k.

    ``context_window`` (tokens, or a model name from :data:`~zett_lab.study.grid.CONTEXT_WINDOWS`;
    the report passes its primary model): conversations longer than the window are scaled to
    the window instead, since a ``max_tokens`` above it is a context the model cannot take. A
    model without a known window leaves the grid as it is.
    """
    sizes = sorted(count_tokens(c.messages) for c in conversations) or [8000]
    median = max(sizes[len(sizes) // 2], 8000)
    window = _known_window(context_window)
    if window is not None:
        median = min(median, max(window, 8000))
    max_tokens = sorted({max(2000, _round_sig(median * share)) for share in (0.25, 0.5, 1.0)})
    keep = sorted({max(500, _round_sig(max_tokens[0] * share)) for share in (0.25, 0.5)})
    return {"max_tokens": max_tokens, "keep_recent_tokens": keep}


def _known_window(context_window: int | str | None) -> int | None:
    try:
        return resolve_context_window(context_window)
    except SettingError:
        if isinstance(context_window, str):
            return None  # a model whose window is not listed: no cap
        raise


@dataclass(frozen=True)
class Failure:
    """A replay that could not run (the report lists it instead of stopping)."""

    conversation_id: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int
    error: str


def report_sweep(
    conversations: Sequence[Conversation] | str | Path | Sequence[str | Path],
    summarizers: Sequence[Any] | None = None,
    grid: Mapping[str, Sequence[int]] | None = None,
    *,
    cache: Any = None,
    progress: bool = False,
    executor: Any = None,
    primary_model: str = DEFAULT_PRIMARY_MODEL,
    strict: bool = False,
    engines: Mapping[str, EngineSpec] | None = None,
    engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT,
) -> Sweep:
    """The sweep a report over recorded conversations shows.

    Args:
        conversations: Conversations, or a path / paths for :func:`zett_lab.load_all`.
        summarizers: Specs or models (default :data:`DEFAULT_REPORT_SUMMARIZERS`).
        grid: ``{"max_tokens": [...], "keep_recent_tokens": [...]}`` (default :func:`default_grid`
            within ``primary_model``'s context window).
        cache: Summary cache for the replays (see :func:`zett_lab.replay`).
        progress: Show a progress bar (a widget in a notebook, on stderr in a terminal).
        executor: Passed to :func:`zett_lab.sweep` (None: a process pool).
        primary_model: Price-table model for the money columns.
        strict: Stop at the first failed summary or replay (:class:`~zett_lab.errors.ResultFailure`).
        engines: ``{label: engine}`` to compare (see :func:`zett_lab.sweep`); the report then
            shows each engine (or engine · summarizer) where it shows a summarizer.
        engine_timeout: Seconds each compaction pass may take (see :func:`zett_lab.replay`).

    Raises:
        SettingError: no conversation.
        ResultFailure: no replay succeeded (the first error is named), or ``strict`` stopped.
    """
    if isinstance(conversations, (str, Path)) or (
        isinstance(conversations, (list, tuple)) and conversations and isinstance(conversations[0], (str, Path))
    ):
        from ..load import load_all

        conversations = load_all(conversations)
    conversations = list(conversations)
    if not conversations:
        raise SettingError("a report needs at least one conversation")
    grid = dict(grid or default_grid(conversations, primary_model))
    result = sweep(
        conversations,
        max_tokens=list(grid["max_tokens"]),
        keep_recent_tokens=list(grid["keep_recent_tokens"]),
        summarizers=list(summarizers or DEFAULT_REPORT_SUMMARIZERS),
        cache=cache,
        progress=bool(progress),
        executor=executor,
        primary_model=primary_model,
        strict=strict,
        engines=engines,
        engine_timeout=engine_timeout,
    )
    errors = result.results["error"].dropna()
    if not len(result.results) or len(errors) == len(result.results):
        raise ResultFailure(f"no replay succeeded{f' (first error: {errors.iloc[0]})' if len(errors) else ''}")
    return result


@dataclass(eq=False)
class ReportData:
    """Everything a report shows, as computed by :func:`build_report_data`.

    Attributes:
        entries: ``(summarizer label, trace)`` of every complete replay.
        summarizers: Summarizer labels in report order.
        conversations: The conversations studied, once each, in the order first replayed.
        grid: The ``max_tokens`` and ``keep_recent_tokens`` values replayed.
        failures: Replays that could not run.
        failure_counts: Failed summary calls and replays per distinct cause
            (:data:`~zett_lab.replay.schema.FAILURE_COLUMNS`).
        attempted: How many replays were attempted (measured or not).
        unmeasured_settings: ``(summarizer, max_tokens, keep_recent_tokens)`` with a failed
            replay or summary in any conversation: never recommended.
        results: One row per measured replay (it ran and every summary succeeded): settings,
            budget figures, loss metrics, costs.
        comparison: The paired comparison of the summarizers (None with one summarizer).
        recommendation: The recommended setting with the rule, the constraints honoured, the alternatives,
            the held-out check and the verdict
            (:meth:`~zett_lab.study.recommendation.Recommendation.record`; None: nothing to recommend).
        alerts: What a reader must know first (:func:`~zett_lab.study.alerts.study_alerts`), most severe first.
        explore_id: The conversation the interactive explorer shows.
        timeline_ids: The conversations whose context timeline the report draws (at most
            :data:`TIMELINES_SHOWN`, see :func:`timeline_conversations`), in report order.
        lost_items: The top lost-but-needed anchors at the recommended setting.
        dropped_constraints: The rules summaries dropped at the recommended setting
            (:func:`~zett_lab.study.report_lost.dropped_constraint_items`).
        metrics: Per summarizer: means with confidence intervals, paired differences, totals.
        costs: Tokens and money per configuration and the prices used.
        conversation_tokens: Tokens of every conversation (the engine's counter).
        losses: Losses of the replays shown in detail, by ``id`` of their trace. Their per-anchor
            tables hold only the anchors lost but needed later (the explorer's replays not at the
            recommended setting: none); the flags the anchor-retention figure reads are in ``anchor_flags``.
        anchor_flags: Per replay at the recommended setting (by ``id`` of its trace): the
            :func:`~zett_lab.study.report_measured.retention_counts` of its per-anchor table.
        native: The conversations' recorded production summaries beside the baselines on the same
            spans (:func:`~zett_lab.study.report_native.report_production`); empty without any.
        native_skipped: Report summarizers that could not summarize those spans (named in the report).
    """

    entries: list[tuple[str, Trace]]
    summarizers: list[str]
    conversations: list[Conversation]
    grid: dict[str, list[int]]
    failures: list[Failure]
    failure_counts: pd.DataFrame
    attempted: int
    unmeasured_settings: set[tuple[str, int, int]]
    results: pd.DataFrame
    comparison: Comparison | None
    recommendation: dict[str, Any] | None
    alerts: list[Alert]
    explore_id: str
    timeline_ids: list[str]
    lost_items: list[dict[str, Any]]
    dropped_constraints: list[dict[str, Any]]
    metrics: dict[str, Any]
    costs: dict[str, Any]
    conversation_tokens: dict[str, int]
    losses: dict[int, Losses] = field(repr=False)
    anchor_flags: dict[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    native: list[dict[str, Any]] = field(default_factory=list, repr=False)
    native_skipped: list[str] = field(default_factory=list)

    @property
    def traces(self) -> list[Trace]:
        return [trace for _, trace in self.entries]

    def trace_for(
        self, conversation_id: str, summarizer: str, max_tokens: int, keep_recent_tokens: int
    ) -> Trace | None:
        """The trace of one replay, or None."""
        return self._trace_index.get((conversation_id, summarizer, int(max_tokens), int(keep_recent_tokens)))

    @cached_property
    def _trace_index(self) -> dict[tuple[str, str, int, int], Trace]:
        return trace_index(self.entries)

    def cell_traces(self, max_tokens: int, keep_recent_tokens: int) -> list[tuple[str, Trace]]:
        """``(summarizer, trace)`` of every replay at one setting."""
        return cell_entries(self.entries, max_tokens, keep_recent_tokens)

    def losses_for(self, trace: Trace) -> Losses:
        """The losses of a replay the report shows in detail."""
        try:
            return self.losses[id(trace)]
        except KeyError:
            raise KeyError(
                f"replay of {trace.conversation.id!r} at max_tokens={trace.settings.max_tokens} "
                "was not measured for the report"
            ) from None

    def anchor_flags_for(self, trace: Trace) -> pd.DataFrame:
        """The counted per-anchor flags of a replay at the recommended setting (see ``anchor_flags``)."""
        try:
            return self.anchor_flags[id(trace)]
        except KeyError:
            raise KeyError(
                f"replay of {trace.conversation.id!r} at max_tokens={trace.settings.max_tokens} "
                "is not at the recommended setting"
            ) from None


def build_report_data(
    traces: Iterable[Trace] = (),
    sweep: Sweep | None = None,
    losses: Losses | None = None,
    comparison: Comparison | None = None,
    *,
    failures: Iterable[Failure] = (),
    constraints: str | Mapping[str, Any] | None = None,
    objectives: str | Sequence[str] | None = None,
    explore: str | None = None,
    primary_model: str = DEFAULT_PRIMARY_MODEL,
    top_lost: int = 30,
    native_baselines: Sequence[str] | Mapping[str, Any] | None = None,
    executor: Executor | str | None = None,
) -> ReportData:
    """Compute everything a report shows from replays (see :class:`ReportData`).

    Args:
        traces: Replays, any mix of conversations, settings and summarizers.
        sweep: A :class:`Sweep` (its complete cells are added to ``traces``, its failed
            cells to ``failures``).
        losses: :class:`Losses` of ``traces`` (measured when None).
        comparison: :class:`Comparison` of the summarizers (computed, paired per
            conversation and setting, when None and there are two or more).
        failures: Replays that could not run.
        constraints: Constraints a recommended setting must meet, before the default ones
            (:func:`~zett_lab.study.recommendation.recommend`); one no setting meets rules nothing out.
        objectives: What the recommendation ranks by, most important first (default: steps over budget,
            then lost-but-needed items, then total input tokens).
        explore: Conversation for the interactive explorer (default: the one with the most
            applied compactions).
        primary_model: Price-table model for the money columns.
        top_lost: How many lost-but-needed items to list.
        native_baselines: Summarizer specs (or label -> spec or model) for the production summaries:
            what the user named on this run. Default: the report's offline summarizers, rebuilt from their
            identities; a provider named only in saved results is never called (it is listed as skipped).
        executor: Where replays the report shows in full are measured when their sweep did not keep their
            losses (traces given directly, a sweep run with ``metrics=False``): an Executor (e.g. a
            ``dask.distributed`` client's ``get_executor()``), ``"serial"`` (here), or None (the running
            process pool, else here).
    """
    if isinstance(executor, str) and executor != "serial":
        raise SettingError(f"executor must be None, 'serial' or a concurrent.futures.Executor, got {executor!r}")
    if isinstance(top_lost, bool) or not isinstance(top_lost, int) or top_lost < 0:
        raise SettingError(f"top_lost must be a non-negative int, got {top_lost!r}")
    direct, entries, failures = _replays(traces, sweep, failures)
    measured = Measured(executor)
    summarizers = _summarizer_order(entries, sweep)
    priced, unpriced = price_names(entries)
    replay_costs = costs_per_replay(_to_price(entries, len(direct), sweep, primary_model), primary_model, priced)
    measured.measure_all([trace for _, trace in direct if _given_row(losses, trace) is None])
    attempted = _results(sweep, [_direct_row(label, t, losses, measured) for label, t in direct], replay_costs)
    results = _complete(attempted)
    counts = combine_failure_counts(
        ([sweep.failure_counts] if sweep is not None else [])
        + [trace.failure_counts.assign(summarizer=label) for label, trace in direct]
    )
    conversations = _conversations(entries)
    explore_id = _explore_id(results, conversations, explore)
    recommended = _recommend(attempted, constraints, objectives)
    recommendation = recommended.record(DIGITS) if recommended is not None else None
    _measure_shown(entries, explore_id, recommendation, measured)
    if comparison is None and len(summarizers) >= 2:
        chosen = results[results["summarizer"].isin(summarizers)]
        shown = [m for m in default_metrics() if m in results.columns]
        comparison = compare(chosen, metrics=shown, level="conversation", seed=0)
    measured.finish()
    lost_items = lost_but_needed_items(entries, recommendation, summarizers, measured.shown, top_lost)
    dropped = dropped_constraint_items(entries, recommendation, measured.shown, top_lost)
    native, native_skipped = report_production(conversations, _identities(entries, summarizers), native_baselines)
    return ReportData(
        entries=entries,
        summarizers=summarizers,
        conversations=conversations,
        grid=_grid(entries),
        failures=failures,
        failure_counts=counts,
        attempted=len(attempted),
        unmeasured_settings=_unmeasured_settings(attempted),
        results=results,
        comparison=comparison,
        recommendation=recommendation,
        alerts=study_alerts(attempted, recommended, counts, _identities(entries, summarizers)),
        explore_id=explore_id,
        timeline_ids=timeline_conversations(results, recommendation, conversations),
        lost_items=lost_items,
        dropped_constraints=dropped,
        metrics=metric_summary(results, summarizers, comparison, counts),
        costs=cost_overview(results, primary_model, unpriced),
        conversation_tokens={c.id: int(count_tokens(c.messages)) for c in conversations},
        losses=dict(measured.by_id),
        anchor_flags=dict(measured.anchor_flags),
        native=native,
        native_skipped=native_skipped,
    )


def _replays(
    traces: Iterable[Trace], sweep: Sweep | None, failures: Iterable[Failure]
) -> tuple[list[tuple[str, Trace]], list[tuple[str, Trace]], list[Failure]]:
    """The replays a report covers: ``(label, trace)`` of those given directly, of all, and the failed ones.

    A sweep adds its complete cells to the replays and its failed cells to the failures.
    """
    direct = [(t.settings.summarizer, t) for t in traces]
    entries, failed = list(direct), list(failures)
    if sweep is not None:
        entries.extend(_sweep_entries(sweep))
        failed.extend(_sweep_failures(sweep))
    if not entries:
        raise SettingError("a report needs at least one trace (pass traces=, sweep=, or use Report.build)")
    return direct, entries, failed


def _identities(entries: list[tuple[str, Trace]], summarizers: list[str]) -> dict[str, str]:
    """Per summarizer label, the identity of the summarizer its first replay ran with."""
    return {name: next(t for label, t in entries if label == name).settings.summarizer for name in summarizers}


def _grid(entries: list[tuple[str, Trace]]) -> dict[str, list[int]]:
    """The ``max_tokens`` and ``keep_recent_tokens`` values replayed, in increasing order."""
    return {
        "max_tokens": sorted({t.setting.max_tokens for _, t in entries}),
        "keep_recent_tokens": sorted({t.setting.keep_recent_tokens for _, t in entries}),
    }


def _unmeasured_settings(attempted: pd.DataFrame) -> set[tuple[str, int, int]]:
    """``(summarizer, max_tokens, keep_recent_tokens)`` of every replay that failed or whose summary failed."""
    unmeasured = attempted[~measured_cells(attempted)]
    return {
        (str(r.summarizer), int(r.max_tokens), int(r.keep_recent_tokens)) for r in unmeasured.itertuples(index=False)
    }


def _sweep_entries(sweep: Sweep) -> list[tuple[str, Trace]]:
    """``(label, trace)`` for every complete cell of a sweep (tables read from disk when used; label: :func:`compared_label`)."""
    if not isinstance(sweep, Sweep):
        raise SettingError(f"sweep= must be a zett_lab.study.Sweep, got {type(sweep).__name__}")
    label = compared_label(sweep)
    entries: list[tuple[str, Trace]] = []
    for cell, trace in sweep.stored_traces():
        summarizer, engine = sweep.labels(cell.setting)
        entries.append((label(engine, summarizer), trace))
    return entries


def compared_label(sweep: Sweep) -> Callable[[str, str], str]:
    """How a report names what it compares: the summarizer, the engine, or both when a sweep varies both."""
    engines, summarizers = sweep.config.get("engines", [STOCK_ENGINE]), sweep.config.get("summarizers", [])
    if len(engines) <= 1:
        return lambda engine, summarizer: str(summarizer)
    if len(summarizers) <= 1:
        return lambda engine, summarizer: str(engine)
    return lambda engine, summarizer: f"{engine} · {summarizer}"


def _sweep_failures(sweep: Sweep) -> list[Failure]:
    table = sweep.results
    if "error" not in table.columns:
        return []
    failed = table[table["error"].notna()]
    label = compared_label(sweep)
    return [
        Failure(
            str(r.conversation_id),
            label(getattr(r, "engine", STOCK_ENGINE), str(r.summarizer)),
            int(r.max_tokens),
            int(r.keep_recent_tokens),
            " ".join(str(r.error).split())[:400],
        )
        for r in failed.itertuples(index=False)
    ]


def _summarizer_order(entries: list[tuple[str, Trace]], sweep: Sweep | None) -> list[str]:
    """Summarizer labels: the sweep's order first, then the others as first replayed."""
    names = list(dict.fromkeys(label for label, _ in entries))
    if sweep is None:
        return names
    label = compared_label(sweep)
    engines = sweep.config.get("engines", [STOCK_ENGINE])
    labels = [label(e, s) for e in engines for s in sweep.config.get("summarizers", [])]
    return [n for n in labels if n in names] + [n for n in names if n not in labels]


def _conversations(entries: list[tuple[str, Trace]]) -> list[Conversation]:
    """The conversations studied, once each, in the order first replayed."""
    seen: dict[str, Conversation] = {}
    for _, trace in entries:
        seen.setdefault(trace.conversation.id, trace.conversation)
    return list(seen.values())


def _given_row(losses: Losses | None, trace: Trace) -> dict[Hashable, Any] | None:
    """The conversation row of ``trace`` in losses given to the report, None when they have none."""
    if losses is None or not len(losses.conversation):
        return None
    table = losses.conversation
    match = table[
        (table["conversation_id"] == trace.conversation.id)
        & (table["summarizer"] == trace.settings.summarizer)
        & (table["max_tokens"] == trace.setting.max_tokens)
        & (table["keep_recent_tokens"] == trace.setting.keep_recent_tokens)
    ]
    return match.iloc[0].to_dict() if len(match) else None


def _direct_row(label: str, trace: Trace, losses: Losses | None, measured: Measured) -> dict[str, Any]:
    """The results row of a trace given directly: budget figures and loss metrics (given, else measured)."""
    row = trace.summary()
    given = _given_row(losses, trace)
    found = given if given is not None else measured.by_id[id(trace)].conversation.iloc[0].to_dict()
    for key, value in found.items():
        row.setdefault(str(key), value)
    row["summarizer"] = label
    row.setdefault("summarizer_identity", str(trace.settings.summarizer))
    return row


def _to_price(
    entries: list[tuple[str, Trace]], direct: int, sweep: Sweep | None, primary_model: str
) -> list[tuple[str, Trace]]:
    """The replays whose costs the report computes: the ``direct`` first ``entries`` (given directly), and a
    sweep's cells it did not price with ``primary_model`` (a summary model with no list price; a sweep priced
    for another model)."""
    if sweep is None or sweep.config.get("primary_model") != primary_model:
        return list(entries)
    table = _compared(sweep)
    if "total_cost_usd" not in table.columns:
        return list(entries)
    keys = set(table.loc[table["total_cost_usd"].isna(), _REPLAY_KEYS].itertuples(index=False, name=None))
    return entries[:direct] + [(label, trace) for label, trace in entries[direct:] if _replay_key(label, trace) in keys]


def _replay_key(label: str, trace: Trace) -> tuple[str, str, int, int]:
    return (trace.conversation.id, label, trace.setting.max_tokens, trace.setting.keep_recent_tokens)


def _results(sweep: Sweep | None, direct_rows: list[dict[str, Any]], costs: pd.DataFrame) -> pd.DataFrame:
    """One row per attempted replay (a sweep's failed cells included, ``error`` set), with costs: a sweep's
    own, else the report's (:func:`_to_price`)."""
    parts = [_compared(sweep)] if sweep is not None else []
    if direct_rows:
        parts.append(pd.DataFrame(direct_rows))
    table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if len(costs) and len(table):
        table = table.merge(costs, on=_REPLAY_KEYS, how="left", suffixes=("", "_priced"))
        for column in costs.columns:
            if f"{column}_priced" in table.columns:
                priced = table.pop(f"{column}_priced")
                table[column] = table[column].mask(priced.notna(), priced)
    for column in ("max_tokens", "keep_recent_tokens"):
        table[column] = table[column].astype("int64")
    return table.sort_values(
        ["summarizer", "max_tokens", "keep_recent_tokens", "conversation_id"], kind="stable"
    ).reset_index(drop=True)


def _compared(sweep: Sweep) -> pd.DataFrame:
    """A sweep's results with ``summarizer`` naming what the report compares (see :func:`compared_label`)."""
    table = sweep.results.copy()
    if "engine" in table.columns:
        label = compared_label(sweep)
        table["summarizer"] = [label(e, s) for e, s in zip(table["engine"], table["summarizer"], strict=True)]
    return table


def _complete(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of measured replays (a failed replay or summary is never averaged into a metric)."""
    return results[measured_cells(results)].reset_index(drop=True)


def recommend_report_setting(
    results: pd.DataFrame,
    constraints: str | Mapping[str, Any] | None = None,
    objectives: str | Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """The recommended setting of a report, as plain data (:meth:`~zett_lab.study.recommendation.Recommendation.record`).

    :func:`~zett_lab.study.recommendation.recommend` with the report's constraints and objectives (default: stay
    within budget, then fewest lost-but-needed items, then fewest tokens). A setting with a failed replay or a
    failed summary in ``results`` (:func:`~zett_lab.study.choose.measured_cells`) is never chosen. None when
    nothing can be recommended.
    """
    chosen = _recommend(results, constraints, objectives)
    return chosen.record(DIGITS) if chosen is not None else None


def _recommend(
    results: pd.DataFrame, constraints: str | Mapping[str, Any] | None, objectives: str | Sequence[str] | None
) -> Recommendation | None:
    if results is None or not len(results):
        return None
    try:
        return recommend(results, constraints, objectives=objectives)
    except NoFeasibleSetting:
        return None


def _rows_at(results: pd.DataFrame, summarizer: str | None, max_tokens: int, keep_recent_tokens: int) -> pd.DataFrame:
    """The results rows of one summarizer at one setting."""
    return results[
        (results["summarizer"] == summarizer)
        & (results["max_tokens"] == max_tokens)
        & (results["keep_recent_tokens"] == keep_recent_tokens)
    ]


def timeline_conversations(
    results: pd.DataFrame, recommendation: dict[str, Any] | None, conversations: list[Conversation]
) -> list[str]:
    """The conversations whose timeline a report draws, in report order: every one, or with more than
    :data:`TIMELINES_SHOWN`, those whose replay at the recommended setting applied the most compactions
    (then sent the most steps over budget). A page over a year of sessions stays one a reader can scroll."""
    ids = [c.id for c in conversations]
    if recommendation is None or len(ids) <= TIMELINES_SHOWN:
        return ids
    at = _rows_at(
        results, recommendation["summarizer"], recommendation["max_tokens"], recommendation["keep_recent_tokens"]
    )
    busiest = at.sort_values(
        ["compactions_applied", "steps_over_budget", "conversation_id"], ascending=[False, False, True], kind="stable"
    )
    chosen = set(busiest["conversation_id"].head(TIMELINES_SHOWN))
    return [i for i in ids if i in chosen]


def _explore_id(results: pd.DataFrame, conversations: list[Conversation], explore: str | None) -> str:
    """The conversation the explorer shows: the one asked for, else the one with the most applied compactions."""
    if explore is not None:
        ids = [c.id for c in conversations]
        if explore not in ids:
            raise SettingError(f"explore={explore!r} is not a conversation of this report; have: {', '.join(ids[:20])}")
        return explore
    if not len(results):
        return conversations[0].id
    totals = results.groupby("conversation_id", sort=True)["compactions_applied"].sum()
    steps = results.groupby("conversation_id", sort=True)["steps"].max()
    return sorted(totals.index, key=lambda cid: (-int(totals[cid]), int(steps[cid]), str(cid)))[0]


def _measure_shown(
    entries: list[tuple[str, Trace]], explore_id: str, recommendation: dict[str, Any] | None, measured: Measured
) -> None:
    """Measure the replays the report shows in detail.

    Those at the recommended setting fully (their anchors are listed and plotted; started here,
    collected by :meth:`Measured.finish`); the explorer's without the per-anchor table (it shows
    per-compaction figures).
    """
    if recommendation is not None:
        cell = cell_entries(entries, recommendation["max_tokens"], recommendation["keep_recent_tokens"])
        measured.start_shown([trace for _, trace in cell])
    for _, trace in entries:
        if trace.conversation.id == explore_id and id(trace) not in measured.shown_ids:
            measured.without_anchors(trace)
