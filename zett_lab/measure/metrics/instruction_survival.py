"""Instruction survival: the share of the span's user constraints still visible after the compaction."""

from __future__ import annotations

from typing import Any

from ...load.anchors import ANCHOR_TYPES
from ..attempt import Attempt
from ..catalogue import Column, compaction_metric, pooled, ratio

_CONSTRAINT = ANCHOR_TYPES.index("constraint")


@compaction_metric(
    label="Instruction survival",
    direction="higher",
    definition="Share of the span's user constraints (always/never/must/don't sentences) visible in summary or tail.",
    compaction_meaning="constraints_visible / constraints (NaN when the span has none)",
    over_compactions=pooled("constraints_visible", "constraints"),
    needs="summary",
    headline=True,
    compaction_columns=(
        Column("constraints", "user constraints in the span", "count"),
        Column("constraints_visible", "constraints visible in Σ_k ∪ T_k", "count"),
    ),
)
def instruction_survival(attempt: Attempt) -> dict[str, Any]:
    constraint = attempt.types == _CONSTRAINT
    total = int(constraint.sum())
    visible = int((constraint & (attempt.in_summary | attempt.span.in_tail)).sum())
    return {"instruction_survival": ratio(visible, total), "constraints": total, "constraints_visible": visible}
