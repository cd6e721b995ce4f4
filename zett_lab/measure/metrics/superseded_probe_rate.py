"""Update probes answered with the old value: gold update probes whose next context shows only the stale answer."""

from __future__ import annotations

import math

from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Update probes answered with the old value",
    direction="lower",
    definition="Share of gold update probes covered by an applied compaction whose next step's context shows only "
    "the superseded answer.",
    conversation_meaning="share of (update probe, applied compaction covering it) pairs whose next step's context "
    "shows only the superseded answer (lower is better)",
)
def superseded_probe_rate(tables: TraceTables) -> float:
    probes = tables.applied_probes
    updates = probes[probes["type"] == "update"] if len(probes) else probes
    if not len(updates):
        return math.nan
    stale = updates["superseded_in_context"].fillna(False).astype(bool)
    wrong = stale & ~updates["in_context"].fillna(False).astype(bool)
    return float(wrong.mean())
