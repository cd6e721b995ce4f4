"""Input tokens of the primary model: the context each step sent, summed (per conversation, and per sweep cell)."""

from __future__ import annotations

from ..catalogue import Metric, TraceTables, conversation_metric, register


@conversation_metric(
    label="Primary input tokens",
    direction="lower",
    definition="Sum over steps of the context each step sent to the primary model.",
    conversation_meaning="sum of context_tokens_after (what the primary model was sent, all steps)",
    levels=("conversation",),
    kind="cost",
    type="count",
    across="sum",
)
def primary_input_tokens(tables: TraceTables) -> int:
    steps = tables.steps
    return int(steps["context_tokens_after"].fillna(0).sum()) if len(steps) else 0


register(
    Metric(
        "total_input_tokens",
        ("cell",),
        "lower",
        "Total input tokens",
        "Primary input tokens plus summary-call input tokens: the tokens a setting costs.",
        kind="cost",
        type="count",
        across="sum",
        computed_by="zett_lab.replay.trace.Trace.summary (every replay's budget figures)",
    )
)
