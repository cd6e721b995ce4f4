"""Summary-call tokens: what the summary model reported it read and wrote."""

from __future__ import annotations

from typing import Any

from ..attempt import Attempt
from ..catalogue import Pooling, compaction_metric

#: Every attempt's call counts, applied or not.
_ALL_ATTEMPTS = Pooling("sum", over="attempts")


@compaction_metric(
    label="Summary input tokens",
    direction="lower",
    definition="Input tokens the summary model reported.",
    compaction_meaning="usage the summary model reported (trace)",
    over_compactions=_ALL_ATTEMPTS,
    conversation_meaning="summed summary-call input usage (0 when none reported)",
    kind="cost",
    type="count",
    across="sum",
    needs="attempt",
)
def summary_input_tokens(attempt: Attempt) -> Any:
    return attempt.row.get("summary_input_tokens")


@compaction_metric(
    label="Summary output tokens",
    direction="lower",
    definition="Output tokens the summary model reported.",
    compaction_meaning="usage the summary model reported (trace)",
    over_compactions=_ALL_ATTEMPTS,
    conversation_meaning="summed summary-call output usage",
    kind="cost",
    type="count",
    across="sum",
    needs="attempt",
)
def summary_output_tokens(attempt: Attempt) -> Any:
    return attempt.row.get("summary_output_tokens")
