"""Lost but needed: anchors used again later that the context no longer shows."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import SUM, compaction_metric


@compaction_metric(
    label="Lost but needed",
    direction="lower",
    definition="Anchors used again later that the context no longer shows: |N_k \\ Σ_k| (summed per conversation).",
    compaction_meaning="|N_k \\ Σ_k|: anchors needed later that the context no longer shows (listed in losses.anchors)",
    over_compactions=SUM,
    type="count",
    needs="summary",
)
def lost_but_needed(attempt: Attempt) -> int:
    return int((attempt.needed_later & ~attempt.in_summary).sum())
