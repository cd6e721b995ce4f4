"""Steps with only earlier checkpoints: over the threshold, and only checkpoints older than the cut."""

from __future__ import annotations

from ...replay.schema import ONLY_CHECKPOINTS
from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Steps with only earlier checkpoints",
    direction="lower",
    definition="Steps over the threshold where only earlier checkpoints could be summarized.",
    kind="budget",
    type="count",
    across="sum",
)
def steps_only_checkpoints(tables: TraceTables) -> int:
    steps = tables.steps
    return int((steps["skip_reason"] == ONLY_CHECKPOINTS).sum()) if len(steps) and "skip_reason" in steps else 0
