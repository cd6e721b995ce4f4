"""Shared facts of the report's pages: which metrics it shows, how it rounds, what it recommends by."""

from __future__ import annotations

from ...measure.catalogue import HEADLINE_METRICS

#: Loss metrics shown per summarizer (columns of ``Losses.conversation``), from the metric catalogue.
REPORT_METRICS: tuple[str, ...] = HEADLINE_METRICS

#: Report documents round floats to this many digits.
DIGITS = 6

#: The cost and the loss a recommended setting is chosen by.
RECOMMEND_COST = "total_input_tokens"
RECOMMEND_LOSS = "lost_but_needed"


def excerpt(text: str, needle: str | None = None, width: int = 90) -> str:
    """A short piece of ``text`` around ``needle`` (case-insensitive), whitespace collapsed."""
    flat = " ".join(str(text or "").split())
    if not flat:
        return ""
    if needle:
        where = flat.lower().find(" ".join(str(needle).split()).lower())
        if where >= 0:
            start = max(0, where - width)
            end = min(len(flat), where + len(needle) + width)
            return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
    return flat[: 2 * width] + ("…" if len(flat) > 2 * width else "")
