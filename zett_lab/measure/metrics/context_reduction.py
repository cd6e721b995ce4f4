"""Context reduction: how much smaller the whole context became."""

from __future__ import annotations

import math

from ..attempt import Attempt
from ..catalogue import MEAN, compaction_metric


@compaction_metric(
    label="Context reduction",
    direction="higher",
    definition="1 - (tok(summary) + tok(tail)) / tok(before): how much smaller the context became.",
    compaction_meaning="1 - (tok(Σ_k)+tok(T_k))/tok(before)",
    arithmetic=True,
    over_compactions=MEAN,
    headline=True,
)
def context_reduction(attempt: Attempt) -> float:
    summary, before = attempt.summary_tokens, attempt.before_tokens
    return 1 - (summary + attempt.tail_tokens) / before if summary is not None and before else math.nan
