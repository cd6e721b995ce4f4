"""The per-summarizer and per-configuration tables of a report: costs, the comparison, metric summaries.

Computed with the measure stage's own functions (:func:`~zett_lab.measure.cost.add_costs`,
:func:`~zett_lab.study.compare`, :func:`~zett_lab.measure.statistics.bootstrap_mean_ci`) from the
per-replay results of :mod:`.replays`; the summaries are plain, JSON-ready data (floats rounded to
:data:`DIGITS`, as in every document of a report).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

import pandas as pd

from ..errors import SettingError
from ..measure.catalogue import CATALOGUE, EXACT, default_metrics
from ..measure.cost import add_costs, cost_summary, load_prices
from ..measure.statistics import bootstrap_mean_ci
from ..records import JSONObject, plain, records
from ..replay.trace import Trace
from ..study.compare import Comparison

#: Report documents round floats to this many digits.
DIGITS = 6

#: Price-table name used for summary models with no known list price (their tokens still count).
_UNPRICED = "unpriced-summary-model"

#: Catalogue metrics the outcome totals show (beside the loss table's): their validity is shown too.
_TOTAL_METRICS = ("lost_but_needed",)

#: Per-configuration cost columns of the cost section.
COST_COLUMNS = (
    "primary_input_tokens",
    "primary_cached_input_tokens",
    "cached_input_share",
    "cache_breaks",
    "summary_calls",
    "summary_input_tokens",
    "summary_output_tokens",
    "primary_cost_usd",
    "summary_cost_usd",
    "total_cost_usd",
)


#: Replays priced together (their step tables concatenated): memory stays bounded on large sweeps.
_COST_CHUNK = 32


def price_names(entries: list[tuple[str, Trace]]) -> tuple[dict[str, str], list[str]]:
    """Per summarizer label, the price-table name its summaries are priced by; and the labels with no
    list price (their tokens count, priced at $0)."""
    table = load_prices()
    priced: dict[str, str] = {}
    for label, trace in entries:
        if label in priced:
            continue
        identity = trace.settings.summarizer
        try:
            table.lookup(identity)
            priced[label] = identity
        except SettingError:
            priced[label] = _UNPRICED
    return priced, sorted(label for label, name in priced.items() if name == _UNPRICED)


def costs_per_replay(entries: list[tuple[str, Trace]], primary_model: str, priced: dict[str, str]) -> pd.DataFrame:
    """Tokens and money per replay, each summarizer priced as ``priced`` (:func:`price_names`) names it."""
    table = load_prices()
    offline = {label for label, name in priced.items() if name != _UNPRICED and table.lookup(name)[0] == "offline"}
    parts = [
        _costs_of(entries[start : start + _COST_CHUNK], primary_model, priced, offline)
        for start in range(0, len(entries), _COST_CHUNK)
    ]
    if not parts:
        return pd.DataFrame()
    summary = pd.concat(parts, ignore_index=True).drop(columns=["steps"])
    for column in ("max_tokens", "keep_recent_tokens"):
        summary[column] = summary[column].astype("int64")
    return summary


def _costs_of(
    entries: list[tuple[str, Trace]], primary_model: str, priced: dict[str, str], offline: set[str]
) -> pd.DataFrame:
    """:func:`cost_summary` of some replays, each summarizer priced as ``priced`` names it.

    The summary texts of ``offline`` summarizers are left out: they cost nothing, so their texts are
    never counted, and an observation mask's replay holds ~50 M characters of them.
    """
    steps, compactions = [], []
    for label, trace in entries:
        steps.append(trace.steps.assign(summarizer=label))
        if len(trace.compactions):
            table = trace.compactions.drop(columns="summary_text") if label in offline else trace.compactions
            compactions.append(
                table.assign(
                    summarizer=label,
                    max_tokens=trace.setting.max_tokens,
                    keep_recent_tokens=trace.setting.keep_recent_tokens,
                )
            )
    all_compactions = pd.concat(compactions, ignore_index=True) if compactions else None
    labels = all_compactions["summarizer"].to_numpy() if all_compactions is not None else None
    if all_compactions is not None:
        all_compactions["summarizer"] = all_compactions["summarizer"].map(lambda s: priced.get(s, s))
    priced_steps, priced_compactions = add_costs(
        pd.concat(steps, ignore_index=True),
        all_compactions,
        primary_model=primary_model,
        prices={_UNPRICED: {"input": 0.0, "cached_input": 0.0, "output": 0.0, "source": "no list price known"}},
    )
    if all_compactions is not None and len(priced_compactions):
        priced_compactions["summarizer"] = labels
    return cost_summary(priced_steps, priced_compactions if all_compactions is not None else None)


class MetricSummary(TypedDict):
    """The report's metrics section (:func:`metric_summary`): per summarizer and metric its mean with an interval
    (``rows``), paired differences, outcome totals, how far to trust each metric, and notes."""

    level: str
    confidence: float
    rows: list[JSONObject]
    pairwise: list[JSONObject]
    totals: list[dict[str, object]]
    validity: dict[str, dict[str, object] | None]
    notes: list[str]


def metric_summary(
    results: pd.DataFrame,
    summarizers: list[str],
    comparison: Comparison | None,
    failure_counts: pd.DataFrame,
    shown_elsewhere: Iterable[str] = (),
) -> MetricSummary:
    """Per summarizer: loss metrics with confidence intervals, paired differences, and outcome totals.

    ``failed`` counts the summarizer's failed summary calls (from ``failure_counts``: the replays
    they happened in are not in ``results``). ``validity`` covers the metrics shown here and
    ``shown_elsewhere`` (the recommendation's figures), so every metric the report shows has it.
    """
    totals = _outcome_totals(results, summarizers, failure_counts)
    also = [*_TOTAL_METRICS, *shown_elsewhere]
    if comparison is not None:
        rows = records(comparison.summary, ["summarizer", "metric", "n", "mean", "ci_low", "ci_high"], DIGITS)
        return {
            "level": comparison.level,
            "confidence": float(comparison.settings.get("confidence", 0.95)),
            "rows": rows,
            "pairwise": records(comparison.pairwise, _PAIRWISE_COLUMNS, DIGITS),
            "totals": totals,
            "validity": metric_validity([*(str(row["metric"]) for row in rows), *also]),
            "notes": list(comparison.notes),
        }
    rows = _metric_means(results, summarizers)
    return {
        "level": "conversation",
        "confidence": 0.95,
        "rows": rows,
        "pairwise": [],
        "totals": totals,
        "validity": metric_validity([*(str(row["metric"]) for row in rows), *also]),
        "notes": [],
    }


#: The columns of a paired comparison a report keeps.
_PAIRWISE_COLUMNS = [
    "a",
    "b",
    "metric",
    "n",
    "mean_diff",
    "ci_low",
    "ci_high",
    "win_rate",
    "tie_rate",
    "loss_rate",
    "p_value",
]


def _outcome_totals(
    results: pd.DataFrame, summarizers: list[str], failure_counts: pd.DataFrame
) -> list[dict[str, Any]]:
    """Per summarizer: replays, compactions, rejected and failed summaries, steps over budget, losses, re-fetches."""
    calls = failure_counts[failure_counts["what"] == "summary call"].groupby("summarizer")["count"].sum()
    totals = []
    for name in summarizers:
        part = results[results["summarizer"] == name]
        totals.append(
            {
                "summarizer": name,
                "replays": len(part),
                "compactions": int(part["compactions"].sum()),
                "rejected_not_smaller": int(part["rejected_not_smaller"].sum()),
                "failed": int(calls.get(name, 0)),
                "steps_over_budget": int(part["steps_over_budget"].sum()),
                "lost_but_needed_per_replay": plain(part["lost_but_needed"].mean(), DIGITS) if len(part) else None,
                "refetch_calls": int(part["refetch_calls"].sum()),
            }
        )
    return totals


def _metric_means(results: pd.DataFrame, summarizers: list[str]) -> list[JSONObject]:
    """Per summarizer and default metric: the mean per conversation with its bootstrap interval (one summarizer:
    nothing to pair)."""
    rows: list[JSONObject] = []
    for name in summarizers:
        part = results[results["summarizer"] == name]
        for metric in (m for m in default_metrics() if m in part):
            values = pd.to_numeric(part[metric], errors="coerce").dropna().to_numpy(float)
            low, high = bootstrap_mean_ci(values, seed=0) if len(values) else (math.nan, math.nan)
            rows.append(
                {
                    "summarizer": name,
                    "metric": metric,
                    "n": len(values),
                    "mean": plain(values.mean(), DIGITS) if len(values) else None,
                    "ci_low": plain(low, DIGITS),
                    "ci_high": plain(high, DIGITS),
                }
            )
    return rows


#: The means per conversation the "every configuration" table shows (headed by their catalogue labels).
CONFIGURATION_COLUMNS = [
    "compactions",
    "steps_over_budget",
    "needed_anchor_recall",
    "lost_but_needed",
    "primary_input_tokens",
]


def configuration_means(results: pd.DataFrame, rec: Mapping[str, object] | None) -> list[dict[str, object]]:
    """Every configuration's means per conversation, the recommended one marked."""
    keys = ["summarizer", "max_tokens", "keep_recent_tokens"]
    columns = CONFIGURATION_COLUMNS
    table = results.groupby(keys, sort=True)[[c for c in columns if c in results]].mean().reset_index()
    chosen = (rec.get("summarizer"), rec["max_tokens"], rec["keep_recent_tokens"]) if rec else None
    return [
        {
            **{c: row.get(c) for c in columns},
            **{k: row[k] for k in keys},
            "recommended": (row["summarizer"], int(row["max_tokens"]), int(row["keep_recent_tokens"])) == chosen,
        }
        for row in table.to_dict("records")
    ]


def metric_validity(names: Iterable[str]) -> dict[str, dict[str, object] | None]:
    """How far to trust each named metric, as plain data: its measured precision and recall (value, low, high,
    n), their words (``figures``) and what they were measured on (``source``); for an exact metric (counted from
    the replay: :attr:`~zett_lab.measure.catalogue.Metric.exact`) ``exact`` true and :data:`EXACT` as its
    words; None for a metric not validated.
    """
    shown: dict[str, dict[str, Any] | None] = {}
    for name in dict.fromkeys(names):
        entry = CATALOGUE.get(name)
        validity = entry.validity if entry is not None else None
        if validity is not None:
            shown[name] = {
                "exact": False,
                "precision": None if validity.precision is None else dataclasses.asdict(validity.precision),
                "recall": None if validity.recall is None else dataclasses.asdict(validity.recall),
                "figures": validity.figures(),
                "source": validity.source,
            }
        elif entry is not None and entry.exact:
            shown[name] = {"exact": True, "precision": None, "recall": None, "figures": EXACT, "source": ""}
        else:
            shown[name] = None
    return shown


def cost_overview(results: pd.DataFrame, primary_model: str, unpriced: list[str]) -> dict[str, object]:
    """Tokens and money per configuration (means per conversation), with the prices used."""
    present = [c for c in COST_COLUMNS if c in results.columns]
    keys = ["summarizer", "max_tokens", "keep_recent_tokens"]
    grouped = results.groupby(keys, sort=True)[present].mean().reset_index()
    grouped["conversations"] = results.groupby(keys, sort=True).size().to_numpy()
    prices = load_prices()
    _, price = prices.lookup(primary_model)
    return {
        "primary_model": primary_model,
        "primary_price_usd_per_million": {
            "input": price.input,
            "cached_input": price.cached_input,
            "output": price.output,
        },
        "prices_as_of": prices.as_of,
        "unpriced": unpriced,
        "rows": records(grouped, [*keys, "conversations", *present], DIGITS),
    }
