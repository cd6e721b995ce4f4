"""Superseded-only rate: of the span's items whose value changed, the share the summary carries only stale."""

from __future__ import annotations

from typing import Any

from ..attempt import Attempt
from ..catalogue import Column, TraceTables, compaction_metric, pooled, ratio

_POOLED = pooled("superseded_only", "superseded_updates")


def _conversation(tables: TraceTables) -> dict[str, Any]:
    applied = tables.applied
    total = int(applied["superseded_updates"].fillna(0).sum()) if len(applied) else 0
    return {"superseded_rate": _POOLED(tables, "superseded_rate"), "superseded_updates": total}


@compaction_metric(
    label="Superseded-only rate",
    direction="lower",
    definition="Of the span's items whose value changed within the span (a setting, port, version, moved path, "
    "renamed constant, reversed instruction, a test that failed then passed), the share whose summary carries only "
    "a superseded value: an error, worse than dropping it (pooled over applied compactions per conversation).",
    compaction_meaning="superseded_only / superseded_updates (lower is better; NaN when U_k is empty)",
    over_compactions=_conversation,
    conversation_meaning=_POOLED.describe("superseded_rate") + " (lower is better)",
    needs="summary",
    headline=True,
    compaction_columns=(
        Column(
            "superseded_updates",
            "|U_k|: items of S_k whose value changed within S_k (zett_lab.measure.updates); NA without a summary",
            "count",
        ),
        Column("superseded_latest", "of those, Σ_k carries the latest value", "count"),
    ),
    conversation_columns=(Column("superseded_updates", "Σ superseded_updates over applied compactions", "count"),),
)
def superseded_rate(attempt: Attempt) -> dict[str, object]:
    statuses = [status for _, status in attempt.updates]
    stale = statuses.count("superseded")
    return {
        "superseded_rate": ratio(stale, len(statuses)),
        "superseded_updates": len(statuses),
        "superseded_latest": statuses.count("latest"),
    }
