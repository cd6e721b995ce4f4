"""Needed-anchor losses: anchors needed later (docs/needed-later.md) that the summary dropped, counted at each
compaction (an anchor every later summary drops again counts once per compaction)."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import SUM, compaction_metric


@compaction_metric(
    label="Needed-anchor losses",
    direction="lower",
    anchor_based=True,
    definition="Anchors needed later (see needed-anchor recall) that a summary dropped, counted at each compaction: "
    "Σ_k |N_k \\ Σ_k| over a conversation's applied compactions, so an anchor that each later summary drops again "
    "counts once per compaction (the list of what was lost but needed later shows each anchor once).",
    compaction_meaning="|N_k \\ Σ_k|: anchors needed later that the summary dropped (listed in losses.anchors)",
    over_compactions=SUM,
    type="count",
    needs="summary",
    headline=True,
)
def lost_but_needed(attempt: Attempt) -> int:
    return int((attempt.needed_later & ~attempt.in_summary).sum())
