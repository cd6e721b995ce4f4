"""How the report writes numbers and settings as text (the same in HTML and Markdown)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...formatting import count, decimal
from ...measure.catalogue import EXACT, NOT_VALIDATED, higher_is_better, label
from ...records import JSONObject, is_missing, read_float, read_mapping
from ...report.tables import MetricSummary

#: How the report writes a figure that is undefined (a rate over nothing, a mean over no units): a visible mark,
#: never a blank or a 0; the glossary says what it means.
UNDEFINED = "n/a"


def defined(text: str) -> str:
    """A figure as written, or :data:`UNDEFINED` where it was written empty (the value is undefined)."""
    return text or UNDEFINED


def ci_text(mean: object, low: object, high: object) -> str:
    """``0.812 [0.700, 0.900]``; :data:`UNDEFINED` with no mean."""
    if is_missing(mean):
        return UNDEFINED
    if is_missing(low) or is_missing(high):
        return decimal(mean)
    return f"{decimal(mean)} [{decimal(low)}, {decimal(high)}]"


def setting_text(max_tokens: int, keep_recent_tokens: int) -> str:
    """``max_tokens=25,000, keep_recent_tokens=1,600``."""
    return f"max_tokens={count(max_tokens)}, keep_recent_tokens={count(keep_recent_tokens)}"


def settings_text(settings: Mapping[str, object]) -> str:
    """Other replay settings as ``key=value, ...`` in key order."""
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def confidence_text(metrics: Mapping[str, object]) -> str:
    """The confidence level of the metric intervals, e.g. ``95%``."""
    return f"{100 * (read_float(metrics, 'confidence') or 0.95):.0f}%"


def metric_table(metrics: MetricSummary, summarizers: list[str]) -> tuple[list[str], dict[tuple[str, str], JSONObject]]:
    """The metrics shown per summarizer (those measured for any, in the document's order) and each row by
    ``(summarizer, metric)``."""
    rows = metrics["rows"]
    by = {(str(r["summarizer"]), str(r["metric"])): r for r in rows}
    shown = dict.fromkeys(str(r["metric"]) for r in rows)
    return [m for m in shown if any((s, m) in by for s in summarizers)], by


def direction_note(metrics: Sequence[str]) -> str:
    """Which way is better for the metric columns shown, from the metric catalogue."""
    higher = [label(m) for m in metrics if higher_is_better(m)]
    lower = [label(m) for m in metrics if not higher_is_better(m)]
    if not lower:
        return "Higher is better for every column."
    if not higher:
        return "Lower is better for every column."
    return f"Higher is better for {', '.join(higher)}; lower is better for {', '.join(lower)}."


def trust_lines(validity: Mapping[str, Mapping[str, object] | None]) -> tuple[list[str], list[str]]:
    """How far to trust the metrics a report shows (``metric name -> validity or None``, in their order): one
    line per measured metric (``Label: precision ...``), one naming the exact ones (counted from the replay), one
    naming those not validated; and what the figures were measured on, once per source."""
    measured = {m: v for m, v in validity.items() if v and not v["exact"]}
    lines = [f"{label(m)}: {v['figures']}" for m, v in measured.items()]
    for words, names in (
        (EXACT, [m for m, v in validity.items() if v and v["exact"]]),
        (NOT_VALIDATED, [m for m, v in validity.items() if not v]),
    ):
        if names:
            lines.append(f"{words[0].upper()}{words[1:]}: {', '.join(label(m) for m in names)}")
    return lines, list(dict.fromkeys(str(v["source"]) for v in measured.values()))


#: What a "how far to trust it" column beside a metric's figures says (the recommendation's table).
TRUST_NOTE = (
    "How far to trust it: the precision and recall of what a metric counts, checked against people's labels on "
    "real conversations (95% intervals), or exact where it is counted from the replay itself"
)


def trust_cell(validity: Mapping[str, object] | None) -> str:
    """How far to trust one metric in a table cell: its measured figures, "exact", or "not validated"."""
    if validity is None:
        return NOT_VALIDATED
    return "exact" if validity["exact"] else str(validity["figures"])


def _one_decimal(value: Any) -> str:
    return decimal(value, 1)


#: The outcome totals per summarizer over all replays: each total's key, its header (the metric catalogue's label
#: where the total is a catalogued metric) and how its value is written.
OUTCOME_TOTALS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("replays", "replays", count),
    ("compactions", "compactions applied", count),
    ("rejected_not_smaller", label("rejected_not_smaller"), count),
    ("failed", label("failed"), count),
    ("steps_over_budget", label("steps_over_budget"), count),
    ("lost_but_needed_per_replay", f"{label('lost_but_needed')} per replay", _one_decimal),
    ("refetch_calls", label("refetch_calls"), count),
)


def outcome_table(totals: Sequence[Mapping[str, object]]) -> tuple[list[str], list[list[str]]]:
    """The outcome totals as headers and written rows (one row per summarizer), the same in HTML and Markdown."""
    headers = ["summarizer", *(header for _, header, _ in OUTCOME_TOTALS)]
    rows = [[str(t["summarizer"]), *(write(t[key]) for key, _, write in OUTCOME_TOTALS)] for t in totals]
    return headers, rows


def production_metrics(entries: Sequence[Mapping[str, object]]) -> list[str]:
    """The metrics the "Production summaries" entries carry per summarizer (all but its status, size and lost items)."""
    summarizers = read_mapping(entries[0], "summarizers") if entries else None
    first = next(iter(summarizers.values()), None) if summarizers else None
    if not isinstance(first, Mapping):
        return []
    return [str(name) for name in first if name not in ("status", "summary_tokens", "lost")]
