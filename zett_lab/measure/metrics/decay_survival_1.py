"""Survival to the next summary: how much of what one summary kept the next one still holds."""

from __future__ import annotations

import math

from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Survival to the next summary",
    direction="higher",
    anchor_based=True,
    definition="Mean share of anchors kept at an applied compaction still present in the next applied summary.",
    conversation_meaning="mean share of anchors kept at an applied compaction still in the next applied summary (j=1)",
)
def decay_survival_1(tables: TraceTables) -> float:
    decay = tables.decay
    first = decay[decay["j"] == 1] if len(decay) else decay
    return float(first["survival"].mean()) if len(first) else math.nan
