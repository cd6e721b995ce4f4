"""Comparing summarizers (or engines) over the same units: paired means, bootstrap CIs, win rates, Wilcoxon.

``compare({"anchors": traces_a, "mask": traces_b, ...})`` measures every trace
(or takes :class:`~zett_lab.measure.losses.Losses` as given) and compares the
summarizers **paired** on the same units:

``level="compaction"`` (default)
    A unit is one compaction attempt, identified by
    ``(conversation_id, span_start, span_end, step)`` within one setting
    (``max_tokens``, ``keep_recent_tokens`` are part of the key, so a sweep's settings
    never pair with each other). Only attempts that produced a
    summary count (status applied or not smaller). When two summarizers' schedules
    differ (a shorter summary delays the next trigger, a rejected summary is retried
    one step later), later attempts no longer line up: they are simply left out of the
    pairs. The summary table uses the units *every* summarizer has; each pairwise
    row uses the units both of its pair have. ``Comparison.matched`` reports, per
    summarizer, how many attempts it had and how many were matched, so a comparison
    resting on few matched spans is visible. Typically the first compaction of each
    conversation always matches (same window, same step), later ones only while the
    schedules agree.
``level="conversation"``
    A unit is one conversation (``losses.conversation`` rows: applied compactions
    pooled per conversation), matched on ``(conversation_id, max_tokens,
    keep_recent_tokens)``. Every conversation counts whatever the schedules did, at
    the price of comparing aggregates over different spans.

Statistics are deterministic for a given ``seed``: percentile bootstrap of the mean
(per summarizer) and of the mean paired difference (per pair), computed with a seeded
NumPy generator; Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, two-sided, zero
differences dropped) on the paired differences; win/tie/loss rates of A vs B per unit
(ties within ``tie_tolerance``).

Offline baselines are always includable: ``compare(..., baselines=("mask", "truncate"))``
replays the same conversations at the same settings with those summarizers (needs
traces, not bare Losses, for at least one summarizer).

Recorded production summaries are subjects too: a name ``native:<agent>`` (``native:claude-code``,
``native:openhands``, ``native:zett-agent`` for the snapshots of a zett-agent session recorded with
compaction on; :data:`zett_lab.measure.native.NATIVE_SUBJECTS`) takes the imported conversations,
and every baseline (offline, or a provider summarizer such as ``"openai:gpt-5-mini"`` when its key is
set) summarizes each native compaction's identical span through the engine's summary step
(:func:`zett_lab.measure.native.span_traces`), so the pairs, confidence intervals and win rates are
per native compaction::

    >>> compare({"native:claude-code": conversations}, baselines=("anchors", "mask"))  # doctest: +SKIP

Engines compare the same way: ``compare({"stock": stock_traces, "split": split_traces},
by="engine")`` pairs them per conversation on the same setting and summarizer (``level``
defaults to ``"conversation"``: two engines rarely cut the same spans) on
:data:`ENGINE_METRICS` (steps over budget, context reduction, needed-anchor recall). A
``Sweep`` (or its results table) can be passed instead of a mapping: ``compare(sweep,
by="engine")`` groups its complete cells by that column and pairs them on the per-conversation
metrics it computed.

Example::

    >>> result = compare({"anchors": anchors_traces, "mask": mask_traces}, seed=0)  # doctest: +SKIP
    >>> result.summary      # one row per (summarizer, metric)  # doctest: +SKIP
    >>> result.pairwise     # one row per (a, b, metric)        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import html
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, Protocol, TypeAlias, cast

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..formatting import decimal, frame_html
from ..load.conversation import Conversation
from ..replay.schema import NOT_SMALLER
from ..replay.setting import ReplayOptions
from .catalogue import CATALOGUE, default_metrics
from .losses import Losses, measure


def metric_direction_higher(name: str) -> bool:
    """Whether larger is better for a compared column: the catalogue's word, larger for a column it does not list."""
    entry = CATALOGUE.get(name)
    return entry.higher_is_better if entry else True


COMPACTION_KEY = ("conversation_id", "max_tokens", "keep_recent_tokens", "span_start", "span_end", "step")
CONVERSATION_KEY = ("conversation_id", "max_tokens", "keep_recent_tokens")

SUMMARY_COLUMNS = {
    "summarizer": "name given in the input mapping",
    "metric": "metric column of losses.compactions / losses.conversation",
    "n": "matched units with a value for this metric",
    "mean": "mean over those units",
    "ci_low": "bootstrap percentile CI of the mean, lower bound",
    "ci_high": "upper bound",
}
PAIRWISE_COLUMNS = {
    "a": "first summarizer",
    "b": "second summarizer",
    "metric": "metric",
    "n": "units both have a value for",
    "mean_a": "mean of a over those units",
    "mean_b": "mean of b",
    "mean_diff": "mean of a - b",
    "ci_low": "bootstrap percentile CI of mean_diff, lower bound",
    "ci_high": "upper bound",
    "win_rate": (
        "share of units where a is better than b (beyond tie_tolerance; the catalogue says which way is better)"
    ),
    "tie_rate": "share of ties",
    "loss_rate": "share where b is better than a",
    "wilcoxon_stat": "Wilcoxon signed-rank statistic (NaN when every difference is a tie or n < 1)",
    "p_value": "two-sided p-value of the Wilcoxon test",
}


@dataclass
class Comparison:
    """Result of :func:`compare`.

    The name column of every table is ``by`` (``summarizer`` or ``engine``).

    Attributes:
        summary: per (summarizer, metric): n, mean, bootstrap CI (columns in ``SUMMARY_COLUMNS``).
        pairwise: per (a, b, metric): paired difference, CI, win/tie/loss rates, Wilcoxon
            (columns in ``PAIRWISE_COLUMNS``).
        matched: per summarizer: ``units`` it had, ``matched`` units common to all summarizers,
            ``duplicates`` rows sharing a unit key with an earlier row (dropped; e.g. the same
            trace passed twice).
        units: the matched unit table: key columns plus ``<metric>`` columns, one row per
            (unit, summarizer).
        level: ``"compaction"`` or ``"conversation"``.
        losses: the Losses each summarizer was measured to.
        settings: seed, confidence level, resamples, metrics.
    """

    summary: pd.DataFrame
    pairwise: pd.DataFrame
    matched: pd.DataFrame
    units: pd.DataFrame
    level: str
    losses: dict[str, Losses] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    #: What the compared names are: ``"summarizer"`` or ``"engine"`` (the name column of every table).
    by: str = "summarizer"

    def __repr__(self) -> str:
        names = ", ".join(map(str, self.matched[self.by])) if len(self.matched) else ""
        common = int(self.matched["matched"].min()) if len(self.matched) else 0
        return f"Comparison(level={self.level!r}, {self.by}s=[{names}], matched units={common})"

    def table(self, metric: str | None = None) -> pd.DataFrame:
        """Summary as a wide table: rows the compared names, columns ``metric`` means (or one metric's mean and CI)."""
        if metric is not None:
            return self.summary[self.summary["metric"] == metric].set_index(self.by)[["n", "mean", "ci_low", "ci_high"]]
        return self.summary.pivot(index=self.by, columns="metric", values="mean")

    def _repr_html_(self) -> str:
        return (
            f"<div><h4>{html.escape(repr(self))}</h4><h5>Matched units</h5>{frame_html(self.matched)}"
            f"<h5>Means with {self.settings.get('confidence', 0.95):.0%} bootstrap CI</h5>"
            f"{frame_html(self.summary)}"
            f"<h5>Paired differences</h5>{frame_html(self.pairwise, max_rows=60, formatters={'p_value': partial(decimal, digits=4)})}</div>"
        )


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray, *, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, seeded. (NaN, NaN) for no values; (x, x) for one value.

    Paired designs pass the per-unit differences: resampling units of the differences is the
    paired bootstrap, so :func:`scipy.stats.bootstrap` on one sample fits it exactly.
    """
    from scipy import stats

    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if len(x) == 0:
        return (math.nan, math.nan)
    if np.all(x == x[0]):
        return (float(x.mean()), float(x.mean()))
    result = stats.bootstrap(
        (x,),
        np.mean,
        confidence_level=confidence,
        n_resamples=resamples,
        method="percentile",
        vectorized=True,
        batch=max(1, 2_000_000 // len(x)),  # bounded memory on long conversations
        random_state=np.random.default_rng(seed),
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def wilcoxon_test(differences: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test on paired differences; (NaN, NaN) when undefined."""
    from scipy import stats

    d = np.asarray(differences, dtype=float)
    d = d[~np.isnan(d)]
    if len(d) == 0 or np.all(d == 0):
        return (math.nan, math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
        except ValueError:
            return (math.nan, math.nan)
    return (float(result.statistic), float(result.pvalue))


def _as_losses(value: Any) -> Losses:
    if isinstance(value, Losses):
        return value
    if hasattr(value, "compactions") and hasattr(value, "conversation") and hasattr(value, "steps"):
        return measure(value)
    if isinstance(value, Iterable):
        items = list(value)
        if all(isinstance(item, Losses) for item in items):
            return Losses.concat(items)
        return measure(items)
    raise TypeError(f"expected Traces or Losses, got {type(value).__name__}")


def _traces_of(value: Any) -> list[Any]:
    if hasattr(value, "steps") and hasattr(value, "conversation"):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, Losses):
        return [item for item in value if hasattr(item, "steps") and hasattr(item, "conversation")]
    return []


def _baseline_traces(results: Mapping[str, Any], names: Iterable[str]) -> dict[str, list[Any]]:
    """Replay the conversations of the given traces with offline baselines, same settings."""
    from ..replay.run import replay

    template: list[Any] = []
    for value in results.values():
        template = _traces_of(value)
        if template:
            break
    if not template:
        raise ValueError("baselines need Traces (not only Losses) for at least one summarizer, to know what to replay")
    # The traces' own Settings with another summarizer; a recording without usage falls back to the estimator.
    options = ReplayOptions(on_missing_usage="estimate")
    return {
        name: [
            replay(trace.conversation, dataclasses.replace(trace.setting, summarizer=name), options)
            for trace in template
        ]
        for name in names
    }


def _native_results(results: Mapping[str, Any], baselines: Iterable[str]) -> dict[str, Any]:
    """Native subjects as traces of their compactions, and the baselines summarized on the same spans."""
    from .native import NATIVE_PREFIX, native_trace, span_traces

    natives = [name for name in results if name.startswith(NATIVE_PREFIX)]
    if len(natives) > 1:
        raise SettingError(
            f"compare one native subject at a time ({', '.join(natives)} summarize different spans); "
            "compare_native_subjects() runs one comparison per subject"
        )
    out: dict[str, Any] = {}
    spans: list[Any] = []
    for name, value in results.items():
        if not name.startswith(NATIVE_PREFIX):
            if any(trace.settings.setting is not None for trace in _traces_of(value)):
                raise SettingError(
                    f"{name!r} holds replays at a setting, which never pair with native compactions; "
                    f"pass it as baselines=[{name!r}] to summarize the native spans with it"
                )
            out[name] = value
            continue
        items = [value] if hasattr(value, "messages") or hasattr(value, "compactions") else list(value)
        traces = [native_trace(item, subject=name) if hasattr(item, "native_compactions") else item for item in items]
        traces = [trace for trace in traces if len(trace.compactions)]
        if not traces:
            raise SettingError(f"no native compactions of {name!r} in the conversations given")
        out[name] = traces
        spans.extend(traces)
    for spec in baselines:
        if spec not in out:
            out[spec] = span_traces(spans, spec)
    return out


class SweepResults(Protocol):
    """A sweep as :func:`compare` reads it: its per-conversation results table (the study stage's ``Sweep``)."""

    @property
    def results(self) -> pd.DataFrame: ...


#: What :func:`compare` takes: name -> a trace, traces, losses or a list of losses; a sweep; or a sweep's results
#: table.
Compared: TypeAlias = Mapping[str, Any] | pd.DataFrame | SweepResults


def compare_native_subjects(
    conversations: Iterable[Conversation], baselines: Iterable[str], **options: Any
) -> dict[str, Comparison]:
    """One :func:`compare` per native subject found in the conversations (``native:<agent>`` -> Comparison),
    each against the baselines summarizing that subject's spans; ``options`` go to :func:`compare`."""
    from .native import native_traces

    baselines = tuple(baselines)
    return {
        subject: compare({subject: traces}, baselines=baselines, **options)
        for subject, traces in native_traces(list(conversations)).items()
    }


def compare(
    results: Compared,
    *,
    by: str = "summarizer",
    metrics: Sequence[str] | None = None,
    level: str | None = None,
    baselines: Iterable[str] = (),
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    tie_tolerance: float = 1e-9,
) -> Comparison:
    """Compare summarizers, or engines, paired over the same units (see the module docstring).

    Args:
        results: name -> list of Traces, a Trace, Losses, or a list of Losses; or a ``Sweep``
            or its results table (grouped by its ``by`` column, paired on its per-conversation metrics).
        by: what the names stand for: ``"summarizer"`` or ``"engine"``. Engines are paired on
            the same conversation, setting and summarizer.
        metrics: columns of ``losses.compactions`` (level "compaction") or
            ``losses.conversation`` (level "conversation"); the catalogue says which way is better.
            None: the catalogue's default set at the level (:func:`~zett_lab.measure.catalogue.default_metrics`),
            or :data:`ENGINE_METRICS` when ``by="engine"``.
        level: ``"compaction"`` (matched spans) or ``"conversation"`` (per-conversation
            aggregates). None: compaction for summarizers, conversation for engines (two
            engines rarely cut the same spans).
        baselines: summarizer specs (``"mask"``, ``"truncate"``, a provider spec...) to replay and
            add under their own names when not already present; with ``native:<agent>`` subjects,
            summarized on the native spans instead (``by="summarizer"`` only).
        confidence, resamples, seed: bootstrap settings (deterministic for a seed).
        tie_tolerance: differences within it count as ties for win rates.
    """
    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    level = level or ("conversation" if by == "engine" else "compaction")
    if level not in ("compaction", "conversation"):
        raise ValueError(f"level must be 'compaction' or 'conversation', got {level!r}")
    metrics = list(
        metrics if metrics is not None else (ENGINE_METRICS if by == "engine" else default_metrics("compaction"))
    )
    losses: dict[str, Losses] = {}
    sweep_table = results if isinstance(results, pd.DataFrame) else getattr(results, "results", None)
    if isinstance(sweep_table, pd.DataFrame):
        tables, duplicate_counts = _sweep_tables(sweep_table, by, level, metrics)
    else:
        if not results:
            raise ValueError(f"compare needs at least one {by}")
        losses = _losses_with_baselines(cast(Mapping[str, Any], results), baselines if by == "summarizer" else ())
        tables, duplicate_counts = _unit_tables(losses, metrics, level, by)
    common = _common_units(tables)
    bootstrap = _Bootstrap(confidence, resamples, seed)
    matched_rows = [
        {by: name, "units": len(table), "matched": len(common), "duplicates": duplicate_counts[name]}
        for name, table in tables.items()
    ]
    return Comparison(
        summary=pd.DataFrame(
            _summary_rows(tables, common, metrics, bootstrap, by), columns=[by, *list(SUMMARY_COLUMNS)[1:]]
        ),
        pairwise=pd.DataFrame(_pair_rows(tables, metrics, bootstrap, tie_tolerance), columns=list(PAIRWISE_COLUMNS)),
        matched=pd.DataFrame(matched_rows, columns=[by, "units", "matched", "duplicates"]),
        units=_matched_units(tables, common, by),
        level=level,
        losses=losses,
        settings={"seed": seed, "confidence": confidence, "resamples": resamples, "metrics": list(metrics)},
        by=by,
    )


#: What the names of a comparison can stand for; the other dimension is part of the unit key.
GROUPINGS = ("summarizer", "engine")
#: Metrics compared by default between engines: what a policy spends, cuts and loses.
ENGINE_METRICS: tuple[str, ...] = ("steps_over_budget", "context_reduction", "needed_anchor_recall")


class _Bootstrap(NamedTuple):
    """Bootstrap settings of a comparison (each interval gets its own seed derived from ``seed``)."""

    confidence: float
    resamples: int
    seed: int

    def ci(self, values: np.ndarray, seed_offset: int) -> tuple[float, float]:
        return bootstrap_mean_ci(
            values, confidence=self.confidence, resamples=self.resamples, seed=self.seed + seed_offset
        )


def _losses_with_baselines(results: Mapping[str, Any], baselines: Iterable[str]) -> dict[str, Losses]:
    """Losses per summarizer name, native subjects resolved and missing baselines replayed."""
    results = dict(results)
    if any(name.startswith("native:") for name in results):
        results = _native_results(results, baselines)
    missing = [name for name in baselines if name not in results]
    if missing:
        results.update(_baseline_traces(results, missing))
    return {name: _as_losses(value) for name, value in results.items()}


def _unit_tables(
    losses: dict[str, Losses], metrics: Sequence[str], level: str, by: str
) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """Per name: the metric columns indexed by the unit key (first row of a duplicated key kept),
    and how many duplicate rows were dropped. Engines pair within one summarizer."""
    key = list(COMPACTION_KEY if level == "compaction" else CONVERSATION_KEY) + (
        ["summarizer"] if by == "engine" else []
    )
    tables: dict[str, pd.DataFrame] = {}
    duplicate_counts: dict[str, int] = {}
    for name, item in losses.items():
        if level == "compaction":
            table = item.compactions
            table = table[table["status"].isin(["applied", NOT_SMALLER])] if len(table) else table
        else:
            table = item.conversation
        tables[name], duplicate_counts[name] = _keyed(table, key, metrics, level)
    return tables, duplicate_counts


def _keyed(table: pd.DataFrame, key: list[str], metrics: Sequence[str], level: str) -> tuple[pd.DataFrame, int]:
    """The metric columns indexed by ``key`` (first row of a duplicated key kept), and the duplicates dropped."""
    unknown = [m for m in metrics if m not in table.columns]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown} for level {level!r}")
    table = table[key + list(metrics)].copy()
    for column in key:
        table[column] = table[column].astype(object)
    duplicates = int(table.duplicated(subset=key).sum())
    return table.drop_duplicates(subset=key, keep="first").set_index(key), duplicates


def _sweep_tables(
    results: pd.DataFrame, by: str, level: str, metrics: Sequence[str]
) -> tuple[dict[str, pd.DataFrame], dict[str, int]]:
    """A sweep's complete cells grouped by ``by``, keyed on conversation, setting and the other dimension."""
    if level != "conversation":
        raise ValueError(
            "a Sweep is compared per conversation (level='conversation'); pass traces for level='compaction'"
        )
    if by not in results.columns:
        raise ValueError(f"this sweep has no {by!r} column")
    other = "engine" if by == "summarizer" else "summarizer"
    complete = results[results["error"].isna()] if "error" in results.columns else results
    key = list(CONVERSATION_KEY) + ([other] if other in complete.columns else [])
    tables, duplicate_counts = {}, {}
    for name, part in complete.groupby(by, sort=False):
        tables[str(name)], duplicate_counts[str(name)] = _keyed(part, key, metrics, level)
    return tables, duplicate_counts


def _common_units(tables: dict[str, pd.DataFrame]) -> pd.Index:
    """The units every summarizer has, sorted."""
    common: pd.Index | None = None
    for table in tables.values():
        common = table.index if common is None else common.intersection(table.index)
    if common is None:
        return pd.Index([])
    return common.sort_values() if len(common) else common


def _summary_rows(
    tables: dict[str, pd.DataFrame], common: pd.Index, metrics: Sequence[str], bootstrap: _Bootstrap, by: str
) -> list[dict[str, Any]]:
    """Mean and bootstrap CI per (name, metric) over the common units."""
    rows = []
    for m_index, metric in enumerate(metrics):
        for s_index, (name, table) in enumerate(tables.items()):
            values = (
                pd.to_numeric(table.loc[common, metric], errors="coerce").to_numpy(dtype=float)
                if len(common)
                else np.array([])
            )
            values = values[~np.isnan(values)]
            low, high = bootstrap.ci(values, 7919 * m_index + s_index)
            rows.append(
                {
                    by: name,
                    "metric": metric,
                    "n": len(values),
                    "mean": float(values.mean()) if len(values) else math.nan,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    return rows


def _pair_rows(
    tables: dict[str, pd.DataFrame], metrics: Sequence[str], bootstrap: _Bootstrap, tie_tolerance: float
) -> list[dict[str, Any]]:
    """One row per (pair of summarizers, metric) over the units both have."""
    rows = []
    names = list(tables)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            both = tables[a].index.intersection(tables[b].index)
            for m_index, metric in enumerate(metrics):
                va = pd.to_numeric(tables[a].loc[both, metric], errors="coerce").to_numpy(dtype=float)
                vb = pd.to_numeric(tables[b].loc[both, metric], errors="coerce").to_numpy(dtype=float)
                ok = ~(np.isnan(va) | np.isnan(vb))
                ci = bootstrap.ci(va[ok] - vb[ok], 104729 + 7919 * m_index + 31 * i)
                rows.append(_pair_row(a, b, metric, va[ok], vb[ok], ci, tie_tolerance))
    return rows


def _pair_row(
    a: str, b: str, metric: str, va: np.ndarray, vb: np.ndarray, ci: tuple[float, float], tie_tolerance: float
) -> dict[str, Any]:
    """Paired difference a - b: means, CI, win/tie/loss rates (by the metric's direction), Wilcoxon test."""
    d = va - vb
    stat, p = wilcoxon_test(d)
    n = len(d)
    better = d if metric_direction_higher(metric) else -d  # > 0 where a is better than b
    return {
        "a": a,
        "b": b,
        "metric": metric,
        "n": n,
        "mean_a": float(va.mean()) if n else math.nan,
        "mean_b": float(vb.mean()) if n else math.nan,
        "mean_diff": float(d.mean()) if n else math.nan,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "win_rate": float((better > tie_tolerance).mean()) if n else math.nan,
        "tie_rate": float((np.abs(d) <= tie_tolerance).mean()) if n else math.nan,
        "loss_rate": float((better < -tie_tolerance).mean()) if n else math.nan,
        "wilcoxon_stat": stat,
        "p_value": p,
    }


def _matched_units(tables: dict[str, pd.DataFrame], common: pd.Index, by: str) -> pd.DataFrame:
    """The common units' metric values, one block of rows per name."""
    unit_frames = []
    for name, table in tables.items():
        part = table.loc[common].reset_index() if len(common) else table.iloc[0:0].reset_index()
        part.insert(0, by, name)
        unit_frames.append(part)
    return pd.concat(unit_frames, ignore_index=True) if unit_frames else pd.DataFrame()
