"""Summary latency: the wall time of one summary call."""

from __future__ import annotations

from ..attempt import Attempt
from ..catalogue import compaction_metric


@compaction_metric(
    name="latency_s",
    label="Summary latency (s)",
    direction="lower",
    definition="Wall time of the summary call.",
    compaction_meaning="summary call wall time (trace)",
    over_compactions=None,
    kind="cost",
    type="float",
    needs="attempt",
)
def latency(attempt: Attempt) -> float | None:
    return attempt.row.get("latency_s")
