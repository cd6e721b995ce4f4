"""Anchor retention: the share of the span's exact items the summary holds."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import MEAN, Column, compaction_metric, ratio


@compaction_metric(
    label="Anchor retention",
    direction="higher",
    anchor_based=True,
    definition="Share of the span's exact items (paths, identifiers, errors, commands, ...) present in the summary.",
    compaction_meaning="retained_anchors / span_anchors (NaN when the span has none or there is no summary)",
    over_compactions=MEAN,
    needs="summary",
    headline=True,
    compaction_columns=(Column("retained_anchors", "|A(S_k) ∩ A(Σ_k)|", "count"),),
)
def anchor_retention(attempt: Attempt) -> dict[str, object]:
    kept = int(attempt.in_summary.sum())
    return {"anchor_retention": ratio(kept, len(attempt.span.ids)), "retained_anchors": kept}
