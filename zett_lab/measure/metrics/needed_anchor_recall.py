"""Needed-anchor recall: of what was used again later and is no longer in view, the share the summary kept."""

from __future__ import annotations

import math
from typing import Any

from ..attempt import Attempt, sequential_sum
from ..catalogue import Column, compaction_metric, pooled, ratio


@compaction_metric(
    label="Needed-anchor recall",
    direction="higher",
    definition="Of the span's anchors the user or the agent uses again later (in its text, tool-call arguments or "
    "commands, not merely a tool result) and that the kept tail no longer shows, the share the summary keeps, "
    "weighted by how rare each is in the conversation: NAR_k = Σ rarity(N_k ∩ Σ_k) / Σ rarity(N_k) "
    "(pooled over applied compactions per conversation).",
    compaction_meaning="NAR_k = needed_retained_weight / needed_weight: rarity-weighted (NaN when N_k is empty)",
    over_compactions=pooled("needed_retained_weight", "needed_weight"),
    conversation_meaning="pooled NAR over applied compactions: Σ needed_retained_weight / Σ needed_weight",
    needs="summary",
    headline=True,
    compaction_columns=(
        Column(
            "needed_anchors",
            "|N_k|: span anchors the user or the agent uses again in F_k (text, tool-call arguments, commands; "
            "not a tool result) that are not in T_k (nor in the system prompt)",
            "count",
        ),
        Column("needed_retained", "|N_k ∩ Σ_k|", "count"),
        Column("needed_weight", "Σ rarity over N_k (common names weigh little)", "float"),
        Column("needed_retained_weight", "Σ rarity over N_k ∩ Σ_k", "float"),
    ),
)
def needed_anchor_recall(attempt: Attempt) -> dict[str, Any]:
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
