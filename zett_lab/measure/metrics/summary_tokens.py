"""Summary-call tokens: what the summary model reported it read and wrote."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..attempt import Attempt
from ..catalogue import Pooling, compaction_metric

#: Every attempt's call counts, applied or not.
_ALL_ATTEMPTS = Pooling("sum", over="attempts")


def _reported(column: str) -> Callable[[Attempt], Any]:
    def reported(attempt: Attempt) -> Any:
        return attempt.row.get(column)

    return reported


for _side, _meaning in (
    ("input", "summed summary-call input usage (0 when none reported)"),
    ("output", "summed summary-call output usage"),
):
    compaction_metric(
        name=f"summary_{_side}_tokens",
        label=f"Summary {_side} tokens",
        direction="lower",
        definition=f"{_side.capitalize()} tokens the summary model reported.",
        compaction_meaning="usage the summary model reported (trace)",
        over_compactions=_ALL_ATTEMPTS,
        conversation_meaning=_meaning,
        kind="cost",
        type="count",
        across="sum",
        needs="attempt",
    )(_reported(f"summary_{_side}_tokens"))
