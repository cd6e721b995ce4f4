"""Measuring one compaction attempt into its rows: its compaction row (the attempt's own columns, then every
compaction-level metric's), and its anchor, probe and update detail rows, appended to the trace's
:class:`AttemptRows`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..records import int_or_none, is_missing
from ..replay.schema import FAILURE_REASONS, NOT_SMALLER
from .anchor_rows import AnchorPart, AnchorRows
from .attempt import Attempt, AttemptResult, SummaryHolds, TraceView, Window
from .catalogue import Metric
from .updates import Update


@dataclass(frozen=True)
class AttemptRows:
    """Rows collected over the attempts of one trace (anchors as arrays per attempt: there are millions)."""

    compactions: list[dict[str, Any]] = field(default_factory=list)
    #: Where each attempt's per-anchor rows go (None: nowhere, the ``anchors`` table stays empty).
    anchors: AnchorRows | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)


def measure_attempt(
    view: TraceView,
    metrics: Sequence[Metric],
    row: dict[Hashable, Any],
    previous_checkpoint: tuple[int, int] | None,
    rows: AttemptRows,
) -> AttemptResult:
    """Measure one row of ``trace.compactions`` with the compaction-level ``metrics``; appends its compaction row
    and detail rows to ``rows``.

    ``previous_checkpoint`` is (compaction_id, span_end) of the last applied attempt before it.
    """
    cid = int(row["compaction_id"])
    applied = bool(row.get("applied")) if not is_missing(row.get("applied")) else False
    window = _window(row, len(view.messages))
    attempt = Attempt(view, row, cid, applied, window, previous_checkpoint)
    out = _attempt_columns(view, row, cid, applied)
    if window is not None:
        out.update(_window_columns(attempt))
    for entry in metrics:
        if entry.needs == "attempt" or (
            window is not None and (entry.needs == "window" or attempt.summary is not None)
        ):
            out.update(entry.at_compaction(attempt))
    rows.compactions.append(out)
    if window is None:
        return AttemptResult(cid, applied, None, None)
    kept = None
    where = {**view.base, "compaction_id": cid, "applied": applied}
    if attempt.summary is not None:
        kept = SummaryHolds(attempt.span.ids, attempt.in_summary)
        if rows.anchors is not None:
            refetched = np.isin(attempt.span.ids, attempt.refetches[1])
            rows.anchors.add(
                view.index, AnchorPart(where, attempt.span, attempt.in_summary, attempt.needed_later, refetched)
            )
        rows.updates.extend(_update_row(where, update, status) for update, status in attempt.updates)
    rows.probes.extend(attempt.probe_rows)
    return AttemptResult(cid, applied, window, kept)


def _status(row: dict[Hashable, Any], applied: bool) -> str:
    """applied, no window, failed, or not smaller (a summary the engine discarded)."""
    summary_text = row.get("summary_text")
    has_summary = summary_text is not None and not is_missing(summary_text)
    if applied:
        return "applied"
    if int_or_none(row.get("span_start")) is None or int_or_none(row.get("span_end")) is None:
        return "no window"
    if not has_summary or not is_missing(row.get("error")) or row.get("skip_reason") in FAILURE_REASONS:
        return "failed"
    return NOT_SMALLER


def _attempt_columns(view: TraceView, row: dict[Hashable, Any], cid: int, applied: bool) -> dict[str, Any]:
    """The columns every attempt has, as the trace recorded them."""
    return {
        **view.base,
        "max_tokens": view.max_tokens,
        "keep_recent_tokens": view.keep_recent,
        "compaction_id": cid,
        "step": row.get("step"),
        "turn": row.get("turn"),
        "trigger": row.get("trigger"),
        "status": _status(row, applied),
        "applied": applied,
        "span_start": int_or_none(row.get("span_start")),
        "span_end": int_or_none(row.get("span_end")),
        "n_recorded": int_or_none(row.get("n_recorded")),
        "older_tokens": row.get("older_tokens"),
        "summary_tokens": row.get("summary_tokens"),
        "cache_hit": row.get("cache_hit"),
        "error_kind": row.get("error_kind"),
    }


def _window(row: dict[Hashable, Any], n_messages: int) -> Window | None:
    """The attempt's span, tail and future bounds clamped to the conversation, None without a window."""
    span_start, span_end = int_or_none(row.get("span_start")), int_or_none(row.get("span_end"))
    n_recorded = int_or_none(row.get("n_recorded"))
    if span_start is None or span_end is None or n_recorded is None:
        return None
    span_start = max(0, min(span_start, n_messages))
    span_end = max(span_start, min(span_end, n_messages))
    return Window(span_start, span_end, max(span_end, min(n_recorded, n_messages)))


def _window_columns(attempt: Attempt) -> dict[str, Any]:
    """Message counts and token sizes of an attempt with a window."""
    span_start, span_end, n_recorded = attempt.the_window
    summary_tokens = attempt.summary_tokens
    return {
        "span_messages": span_end - span_start,
        "tail_messages": n_recorded - span_end,
        "future_messages": len(attempt.trace.messages) - n_recorded,
        "span_tokens": attempt.span_tokens,
        "tail_tokens": attempt.tail_tokens,
        "before_tokens": attempt.before_tokens,
        "after_tokens": summary_tokens + attempt.tail_tokens if summary_tokens is not None else None,
        "span_anchors": len(attempt.span.ids),
    }


def _update_row(where: dict[str, Any], update: Update, status: str) -> dict[str, Any]:
    """One row of ``losses.updates``."""
    return {
        **where,
        "kind": update.kind,
        "key": update.key,
        "name": update.name,
        "superseded": " | ".join(update.superseded),
        "latest": update.latest,
        "superseded_index": update.superseded_index,
        "latest_index": update.latest_index,
        "status": status,
    }
