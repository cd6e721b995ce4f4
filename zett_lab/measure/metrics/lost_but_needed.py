"""Lost but needed: anchors needed later (docs/needed-later.md) that the summary dropped."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import SUM, compaction_metric


@compaction_metric(
    label="Lost but needed",
    direction="lower",
    anchor_based=True,
    definition="Anchors needed later (see needed-anchor recall) that the summary dropped: |N_k \\ Σ_k| (summed per "
    "conversation).",
    compaction_meaning="|N_k \\ Σ_k|: anchors needed later that the summary dropped (listed in losses.anchors)",
    over_compactions=SUM,
    type="count",
    needs="summary",
    headline=True,
)
def lost_but_needed(attempt: Attempt) -> int:
    return int((attempt.needed_later & ~attempt.in_summary).sum())
