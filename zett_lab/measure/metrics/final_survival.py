"""Survival to the last summary: how much of what the first summary kept the last one still holds."""

from __future__ import annotations

import math

from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Survival to the last summary",
    direction="higher",
    anchor_based=True,
    definition="Share of anchors kept at the first applied compaction still present in the last applied summary.",
    conversation_meaning="share of anchors kept at the first applied compaction still in the last applied summary",
)
def final_survival(tables: TraceTables) -> float:
    decay = tables.decay
    if not len(decay):
        return math.nan
    first, last = decay["from_compaction"].min(), decay["to_compaction"].max()
    pick = decay[(decay["from_compaction"] == first) & (decay["to_compaction"] == last)]
    return float(pick["survival"].iloc[0]) if len(pick) else math.nan
