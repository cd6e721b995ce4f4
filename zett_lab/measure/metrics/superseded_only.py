"""Superseded values kept: items of the span whose summary carries only a value that was later changed."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import SUM, compaction_metric


@compaction_metric(
    label="Superseded values kept",
    direction="lower",
    definition="Items of the span whose summary carries only a superseded value (summed per conversation).",
    compaction_meaning="of superseded_updates, Σ_k carries only a superseded value (an error: worse than dropping it)",
    over_compactions=SUM,
    type="count",
    needs="summary",
)
def superseded_only(attempt: Attempt) -> int:
    return sum(status == "superseded" for _, status in attempt.updates)
