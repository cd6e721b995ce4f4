"""Steps with no whole-turn boundary: over the threshold, and nothing the engine could cut at."""

from __future__ import annotations

from ...replay.schema import NO_TURN_BOUNDARY
from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Steps with no whole-turn boundary",
    direction="lower",
    definition="Steps over the threshold where the engine found no whole-turn boundary to cut at.",
    kind="budget",
    type="count",
    across="sum",
)
def steps_no_boundary(tables: TraceTables) -> int:
    steps = tables.steps
    return int((steps["skip_reason"] == NO_TURN_BOUNDARY).sum()) if len(steps) and "skip_reason" in steps else 0
