"""Constraint survival: the share of the rules stated in the span that the summary or the kept tail still conveys.

Instructions are followed, not typed again, so reuse cannot show that a summary needed them
("needed later" cannot see them): they are audited as constraints instead. A constraint is a
sentence of a user message (the user's rules, and the task a harness states as a user message)
that restricts what to do or how (:data:`~zett_lab.load.anchors.ANCHOR_TYPES` ``constraint``:
always / never / must / don't / avoid / no new / only change ... sentences; not those of an in-context
demonstration of another task). The system prompt's rules are never compacted by zett-agent, so they
are not counted. A constraint is kept when the model still has it after the compaction: the summary
holds it (the sentence match of :class:`~zett_lab.measure.lookup.Clauses`: most of its content words
in one clause, and its negation), the tail holds it as written, or the standing context (the system
prompt and the messages before the span, sent with every request) holds it by the summary's rule, so
a rule the system prompt states in its own words is not dropped
(:func:`~zett_lab.measure.attempt.kept_sentences`). The dropped ones are listed by
:meth:`~zett_lab.measure.losses.Losses.dropped_constraints`. Its measured precision is in
``docs/trust.md``.
"""

from __future__ import annotations

from ...load.anchors import ANCHOR_TYPES
from ..attempt import Attempt
from ..catalogue import Column, compaction_metric, pooled, ratio

_CONSTRAINT = ANCHOR_TYPES.index("constraint")


@compaction_metric(
    label="Constraint survival",
    direction="higher",
    anchor_based=True,
    definition="Share of the rules the user or the task stated in the span (always/never/must/don't/avoid/no new/"
    "only ... sentences) that the model still has after the compaction: in the summary, in the kept tail, or in "
    "the system prompt or the messages kept before the span (pooled over applied compactions per conversation); "
    "the dropped ones are listed.",
    compaction_meaning="constraints_kept / constraints (NaN when the span states none)",
    over_compactions=pooled("constraints_kept", "constraints"),
    needs="summary",
    headline=True,
    compaction_columns=(
        Column("constraints", "rules the user or the task stated in the span", "count"),
        Column(
            "constraints_kept",
            "constraints the summary, the kept tail, the system prompt or the messages before the span convey",
            "count",
        ),
    ),
)
def constraint_survival(attempt: Attempt) -> dict[str, object]:
    constraint = attempt.types == _CONSTRAINT
    total = int(constraint.sum())
    kept = int((constraint & (attempt.in_summary | attempt.span.in_tail)).sum())
    return {"constraint_survival": ratio(kept, total), "constraints": total, "constraints_kept": kept}
