"""Failed summaries: attempts that produced no usable summary (never counted as a result)."""

from __future__ import annotations

from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Failed summaries",
    direction="lower",
    definition="Summary attempts that produced no usable summary (never counted as a result).",
    conversation_meaning="attempts whose summary failed",
    kind="budget",
    type="count",
    across="sum",
)
def failed(tables: TraceTables) -> int:
    compactions = tables.compactions
    return int((compactions["status"] == "failed").sum()) if len(compactions) else 0
