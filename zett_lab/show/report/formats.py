"""How the report writes numbers and settings as text (the same in HTML and Markdown)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...measure.catalogue import higher_is_better, label
from ...records import is_missing
from ...study.report_tables import REPORT_METRICS


def n_int(value: Any) -> str:
    """``12345.6`` -> ``12,346``; missing -> empty."""
    return "" if is_missing(value) else f"{int(round(float(value))):,}"


def n_ratio(value: Any, digits: int = 3) -> str:
    return "" if is_missing(value) else f"{float(value):.{digits}f}"


def n_pct(value: Any) -> str:
    return "" if is_missing(value) else f"{100 * float(value):.1f}%"


def n_usd(value: Any) -> str:
    if is_missing(value):
        return ""
    value = float(value)
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def ci_text(mean: Any, low: Any, high: Any) -> str:
    """``0.812 [0.700, 0.900]``; ``n/a`` with no mean."""
    if is_missing(mean):
        return "n/a"
    if is_missing(low) or is_missing(high):
        return f"{float(mean):.3f}"
    return f"{float(mean):.3f} [{float(low):.3f}, {float(high):.3f}]"


def setting_text(max_tokens: Any, keep_recent_tokens: Any) -> str:
    return f"max_tokens={n_int(max_tokens)}, keep_recent_tokens={n_int(keep_recent_tokens)}"


def settings_text(settings: Mapping[str, Any]) -> str:
    """Other replay settings as ``key=value, ...`` in key order."""
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))


def confidence_text(metrics: Mapping[str, Any]) -> str:
    """The confidence level of the metric intervals, e.g. ``95%``."""
    return f"{100 * float(metrics.get('confidence') or 0.95):.0f}%"


def metric_table(
    document: Mapping[str, Any], summarizers: list[str]
) -> tuple[list[str], dict[tuple[str, str], dict[str, Any]]]:
    """The metrics shown per summarizer (those measured for any) and each row by ``(summarizer, metric)``."""
    by = {(r["summarizer"], r["metric"]): r for r in document["metrics"]["rows"]}
    return [m for m in REPORT_METRICS if any((s, m) in by for s in summarizers)], by


def direction_note(metrics: Sequence[str]) -> str:
    """Which way is better for the metric columns shown, from the metric catalogue."""
    higher = [label(m) for m in metrics if higher_is_better(m)]
    lower = [label(m) for m in metrics if not higher_is_better(m)]
    if not lower:
        return "Higher is better for every column."
    if not higher:
        return "Lower is better for every column."
    return f"Higher is better for {', '.join(higher)}; lower is better for {', '.join(lower)}."
