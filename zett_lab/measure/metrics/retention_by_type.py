"""Anchor retention per anchor type: one metric per type of :data:`~zett_lab.load.anchors.ANCHOR_TYPES`."""

from __future__ import annotations

from collections.abc import Callable

from ...load.anchors import ANCHOR_TYPES
from ..attempt import Attempt
from ..catalogue import compaction_metric, ratio


def _retention_of(code: int) -> Callable[[Attempt], float]:
    def retention(attempt: Attempt) -> float:
        total, kept = attempt.per_type
        return ratio(int(kept[code]), int(total[code]))

    return retention


for _code, _type in enumerate(ANCHOR_TYPES):
    compaction_metric(
        name=f"retention_{_type}",
        label=f"Retention of {_type} anchors",
        direction="higher",
        anchor_based=True,
        definition=f"Anchor retention over {_type} anchors only.",
        compaction_meaning=f"anchor retention over {_type} anchors only (NaN when the span has none)",
        over_compactions=None,
        needs="summary",
    )(_retention_of(_code))
