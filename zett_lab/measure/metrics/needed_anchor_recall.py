"""Needed-anchor recall: of what the agent needed later and could have had only from the span, the share the
summary kept (what "needed later" means: docs/needed-later.md)."""

from __future__ import annotations

import math

from ..attempt import Attempt, sequential_sum
from ..catalogue import Column, compaction_metric, pooled, ratio


@compaction_metric(
    label="Needed-anchor recall",
    direction="higher",
    anchor_based=True,
    definition="Of the span's anchors needed later (the agent uses them again, they are specific, and until that use "
    "nothing it saw since the compaction showed them in any spelling: not the kept tail, a re-read, the system "
    "prompt or what the harness re-sent), the share the summary keeps, weighted by how rare each is in the "
    "conversation: NAR_k = Σ rarity(N_k ∩ Σ_k) / Σ rarity(N_k) (pooled over applied compactions per conversation).",
    compaction_meaning="NAR_k = needed_retained_weight / needed_weight: rarity-weighted (NaN when N_k is empty)",
    over_compactions=pooled("needed_retained_weight", "needed_weight"),
    conversation_meaning="pooled NAR over applied compactions: Σ needed_retained_weight / Σ needed_weight",
    needs="summary",
    headline=True,
    compaction_columns=(
        Column(
            "needed_anchors",
            "|N_k|: span anchors needed later (see the anchors table's needed_later)",
            "count",
        ),
        Column("needed_retained", "|N_k ∩ Σ_k|", "count"),
        Column("needed_weight", "Σ rarity over N_k (common names weigh little)", "float"),
        Column("needed_retained_weight", "Σ rarity over N_k ∩ Σ_k", "float"),
    ),
)
def needed_anchor_recall(attempt: Attempt) -> dict[str, object]:
    needed, kept = attempt.needed_later, attempt.needed_later & attempt.in_summary
    rarity = attempt.index.arrays.rarity[attempt.span.ids]
    weight, kept_weight = sequential_sum(rarity[needed]), sequential_sum(rarity[kept])
    return {
        "needed_anchor_recall": ratio(kept_weight, weight) if needed.any() else math.nan,
        "needed_anchors": int(needed.sum()),
        "needed_retained": int(kept.sum()),
        "needed_weight": weight,
        "needed_retained_weight": kept_weight,
    }
