"""Compactions whose kept tail already fills the budget: the system prompt and the kept messages alone reach max_tokens."""

from __future__ import annotations

from ...records import flags
from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Kept tail over budget",
    direction="lower",
    definition="Applied compactions after which the system prompt and the kept messages alone reached max_tokens: "
    "the step is still sent over budget and the next one has nothing but the checkpoint left to summarize.",
    conversation_meaning="applied compactions with context_tokens_after - summary_tokens >= max_tokens",
    kind="budget",
    type="count",
    across="sum",
)
def tail_over_budget(tables: TraceTables) -> int:
    steps = tables.steps
    if not len(steps) or "applied" not in steps:
        return 0
    applied = flags(steps["applied"])
    kept = steps["context_tokens_after"].astype(float) - steps["summary_tokens"].astype(float).fillna(0)
    return int((applied & (kept >= steps["max_tokens"].astype(float)).to_numpy(dtype=bool)).sum())
