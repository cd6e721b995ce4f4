"""Re-fetch calls: later tool calls that fetch again what the compaction dropped."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import SUM, Column, compaction_metric


@compaction_metric(
    label="Re-fetch calls",
    direction="lower",
    anchor_based=True,
    definition="Later tool calls whose arguments mention an anchor of the span that is in neither tail nor summary.",
    compaction_meaning="tool calls in F_k whose arguments mention a path/identifier/URL anchor of S_k that is in "
    "neither T_k nor Σ_k",
    over_compactions=SUM,
    type="count",
    needs="summary",
    compaction_columns=(Column("refetched_anchors", "distinct anchors those calls mention", "count"),),
)
def refetch_calls(attempt: Attempt) -> dict[str, object]:
    calls, anchors = attempt.refetches
    return {"refetch_calls": calls, "refetched_anchors": len(anchors)}
