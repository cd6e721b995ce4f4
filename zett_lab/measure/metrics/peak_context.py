"""Peak context: the largest context any model step was sent (per conversation, and per sweep cell)."""

from __future__ import annotations

from ..catalogue import Metric, TraceTables, conversation_metric, register

_DEFINITION = "The largest context any model step was sent."


@conversation_metric(
    label="Peak context (tokens)",
    direction="lower",
    definition=_DEFINITION,
    conversation_meaning="max context_tokens_after",
    levels=("conversation",),
    kind="budget",
    type="count",
)
def peak_context_tokens(tables: TraceTables) -> int:
    steps = tables.steps
    return int(steps["context_tokens_after"].max()) if len(steps) else 0


register(
    Metric(
        "peak_context",
        ("cell",),
        "lower",
        "Peak context (tokens)",
        _DEFINITION,
        kind="budget",
        type="count",
        computed_by="zett_lab.replay.trace.Trace.summary (every replay's budget figures)",
    )
)
