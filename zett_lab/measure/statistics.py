"""Paired statistics over the same units: means with bootstrap confidence intervals, paired differences, win
rates and Wilcoxon tests. Pure: computed from the loss tables (or a sweep's results table) it is given;
:func:`zett_lab.study.compare` gathers them (measuring, replaying baselines, summarizing native spans) and
returns a :class:`~zett_lab.study.compare.Comparison`.

A unit is one compaction attempt (``level="compaction"``: identified by ``(conversation_id, max_tokens,
keep_recent_tokens, span_start, span_end, step)``; only attempts that produced a summary count) or one
conversation at one setting (``level="conversation"``). The summary table uses the units *every* compared
name has; each pairwise row the units both of its pair have.

Statistics are deterministic for a given ``seed``: percentile bootstrap of the mean (per name) and of the
mean paired difference (per pair), computed with a seeded NumPy generator; Wilcoxon signed-rank test
(``scipy.stats.wilcoxon``, two-sided, zero differences dropped) on the paired differences; win/tie/loss
rates of A vs B per unit (ties within ``tie_tolerance``; the catalogue says which way is better).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..replay.schema import NOT_SMALLER
from .catalogue import CATALOGUE
from .losses import Losses


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


#: What the names of a comparison can stand for; the other dimension is part of the unit key.
GROUPINGS = ("summarizer", "engine")


class PairedTables(NamedTuple):
    """The statistics of a comparison (columns: ``SUMMARY_COLUMNS``, ``PAIRWISE_COLUMNS``; the name column is ``by``).

    ``matched``: per name, ``units`` it had, ``matched`` units common to all, ``duplicates`` rows sharing a
    unit key with an earlier row (dropped); ``units``: the common units' key and metric columns, one row per
    (unit, name).
    """

    summary: pd.DataFrame
    pairwise: pd.DataFrame
    matched: pd.DataFrame
    units: pd.DataFrame


def paired(
    tables: dict[str, pd.DataFrame],
    duplicates: Mapping[str, int],
    metrics: Sequence[str],
    by: str,
    *,
    confidence: float,
    resamples: int,
    seed: int,
    tie_tolerance: float,
) -> PairedTables:
    """Means with bootstrap intervals over the units every name has, and paired differences per pair of names.

    ``tables``: per name, the metric columns indexed by the unit key (:func:`unit_tables`, :func:`sweep_tables`).
    """
    common = _common_units(tables)
    bootstrap = _Bootstrap(confidence, resamples, seed)
    matched_rows = [
        {by: name, "units": len(table), "matched": len(common), "duplicates": duplicates[name]}
        for name, table in tables.items()
    ]
    return PairedTables(
        summary=pd.DataFrame(
            _summary_rows(tables, common, metrics, bootstrap, by), columns=[by, *list(SUMMARY_COLUMNS)[1:]]
        ),
        pairwise=pd.DataFrame(_pair_rows(tables, metrics, bootstrap, tie_tolerance), columns=list(PAIRWISE_COLUMNS)),
        matched=pd.DataFrame(matched_rows, columns=[by, "units", "matched", "duplicates"]),
        units=_matched_units(tables, common, by),
    )


class _Bootstrap(NamedTuple):
    """Bootstrap settings of a comparison (each interval gets its own seed derived from ``seed``)."""

    confidence: float
    resamples: int
    seed: int

    def ci(self, values: np.ndarray, seed_offset: int) -> tuple[float, float]:
        return bootstrap_mean_ci(
            values, confidence=self.confidence, resamples=self.resamples, seed=self.seed + seed_offset
        )


def unit_tables(
    losses: Mapping[str, Losses], metrics: Sequence[str], level: str, by: str
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


def sweep_tables(
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
