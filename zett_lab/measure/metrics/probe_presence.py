"""Probe presence: the share of gold probes the span covers whose answer the next step's context still shows."""

from __future__ import annotations

import math

from ..attempt import Attempt
from ..catalogue import Column, TraceTables, compaction_metric, ratio


def _pairs(tables: TraceTables) -> float:
    probes = tables.applied_probes
    return float(probes["in_context"].astype(float).mean()) if len(probes) else math.nan


@compaction_metric(
    label="Probe presence",
    direction="higher",
    definition="Share of gold probes covered by the span whose answer is in the context the next step sees.",
    compaction_meaning="probes_present / probes_covered (NaN when no probe is covered)",
    over_compactions=_pairs,
    conversation_meaning="share of (probe, applied compaction covering it) pairs whose answer is in the next "
    "step's context",
    headline=True,
    compaction_columns=(
        Column("probes_covered", "gold probes whose message_index lies in the span", "count"),
        Column(
            "probes_present",
            "of those, answers present (normalized substring) in the context the next step sees",
            "count",
        ),
    ),
)
def probe_presence(attempt: Attempt) -> dict[str, object]:
    rows = attempt.probe_rows
    present = sum(bool(row["in_context"]) for row in rows)
    return {"probe_presence": ratio(present, len(rows)), "probes_covered": len(rows), "probes_present": present}
