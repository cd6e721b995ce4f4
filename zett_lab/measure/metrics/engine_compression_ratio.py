"""Engine compression ratio: what the engine's not-smaller check compares."""

from __future__ import annotations

import math

from ..attempt import Attempt
from ..catalogue import compaction_metric


@compaction_metric(
    label="Engine compression ratio",
    direction="higher",
    definition="1 - summary_tokens/older_tokens: what the engine's not-smaller check compares.",
    compaction_meaning="1 - summary_tokens/older_tokens, what the engine's not-smaller check compares",
    arithmetic=True,
    over_compactions=None,
)
def engine_compression_ratio(attempt: Attempt) -> float:
    summary, older = attempt.summary_tokens, attempt.older_tokens
    return 1 - summary / older if summary is not None and older else math.nan
