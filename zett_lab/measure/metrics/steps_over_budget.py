"""Steps over budget: model steps that were still sent more than max_tokens."""

from __future__ import annotations

from ..catalogue import TraceTables, conversation_metric


@conversation_metric(
    label="Steps over budget",
    direction="lower",
    definition="Model steps whose context sent was still above max_tokens.",
    conversation_meaning="steps that sent more than max_tokens (over_budget_after)",
    kind="budget",
    type="count",
    across="sum",
    headline=True,
)
def steps_over_budget(tables: TraceTables) -> int:
    steps = tables.steps
    if not len(steps) or "over_budget_after" not in steps:
        return 0
    return int(steps["over_budget_after"].fillna(False).astype(bool).sum())
