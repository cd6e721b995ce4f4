"""Compression ratio: how much smaller the summary is than the raw span it stands for."""

from __future__ import annotations

import math

from ..attempt import Attempt
from ..catalogue import MEAN, compaction_metric


@compaction_metric(
    label="Compression ratio",
    direction="higher",
    definition="CR_k = 1 - tok(summary)/tok(span), against the raw span (mean over applied compactions).",
    compaction_meaning="CR_k = 1 - tok(Σ_k)/tok(S_k), against the raw span (NaN without a summary)",
    arithmetic=True,
    over_compactions=MEAN,
    headline=True,
)
def compression_ratio(attempt: Attempt) -> float:
    summary, span = attempt.summary_tokens, attempt.span_tokens
    return 1 - summary / span if summary is not None and span else math.nan
