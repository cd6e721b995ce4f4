"""Constraint survival: the share of the rules stated in the span that the summary or the kept tail still conveys.

Instructions are followed, not typed again, so reuse cannot show that a summary needed them
("needed later" cannot see them): they are audited as constraints instead. A constraint is a
sentence of a user message (the user's rules, and the task a harness states as a user message)
that restricts what to do or how (:data:`~zett_lab.load.anchors.ANCHOR_TYPES` ``constraint``:
always / never / must / don't / avoid / no new / only change ... sentences). The system prompt's
rules are never compacted by zett-agent, so they are not counted. A constraint is kept when the
summary or the tail holds it (the fuzzy sentence match of :class:`~zett_lab.measure.lookup.TextIndex`:
most of its content words, and its negation); the dropped ones are listed by
:meth:`~zett_lab.measure.losses.Losses.dropped_constraints`.
"""

from __future__ import annotations

from typing import Any

from ...load.anchors import ANCHOR_TYPES
from ..attempt import Attempt
from ..catalogue import Column, compaction_metric, pooled, ratio

_CONSTRAINT = ANCHOR_TYPES.index("constraint")


@compaction_metric(
    label="Constraint survival",
    direction="higher",
    definition="Share of the rules the user or the task stated in the span (always/never/must/don't/avoid/no new/"
    "only ... sentences) that the summary or the kept tail still conveys (pooled over applied compactions per "
    "conversation); the dropped ones are listed.",
    compaction_meaning="constraints_kept / constraints (NaN when the span states none)",
    over_compactions=pooled("constraints_kept", "constraints"),
    needs="summary",
    headline=True,
    compaction_columns=(
        Column("constraints", "rules the user or the task stated in the span", "count"),
        Column("constraints_kept", "constraints the summary or the kept tail conveys", "count"),
    ),
)
def constraint_survival(attempt: Attempt) -> dict[str, Any]:
    constraint = attempt.types == _CONSTRAINT
    total = int(constraint.sum())
    kept = int((constraint & (attempt.in_summary | attempt.span.in_tail)).sum())
    return {"constraint_survival": ratio(kept, total), "constraints": total, "constraints_kept": kept}
