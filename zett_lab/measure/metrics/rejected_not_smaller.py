"""Summaries not smaller: attempts the engine discarded because the checkpoint did not shrink the span."""

from __future__ import annotations

from ...replay.schema import NOT_SMALLER
from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Summaries not smaller",
    direction="lower",
    definition="Attempts the engine discarded because the checkpoint was not smaller than the span.",
    conversation_meaning="attempts discarded because the summary was not smaller",
    kind="budget",
    type="count",
    across="sum",
)
def rejected_not_smaller(tables: TraceTables) -> int:
    compactions = tables.compactions
    return int((compactions["status"] == NOT_SMALLER).sum()) if len(compactions) else 0
