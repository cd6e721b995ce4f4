"""Thrashing compactions: back-to-back compactions that free less than a tenth of the context."""

from __future__ import annotations

from ...records import flags
from ..catalogue import TraceTables, conversation_metric

#: A compaction that frees less than this share of the context frees too little to be worth a summary call.
THRASH_FREED_SHARE = 0.1


@conversation_metric(
    label="Thrashing compactions",
    direction="lower",
    definition=f"Applied compactions that freed less than {THRASH_FREED_SHARE:.0%} of the context, right after "
    "the previous model step's own compaction attempt: the engine summarizes again and again for little room.",
    conversation_meaning="applied compactions with 1 - context_tokens_after / estimator_tokens < "
    f"{THRASH_FREED_SHARE} whose previous step also attempted a compaction",
    kind="budget",
    type="count",
    across="sum",
)
def thrash_compactions(tables: TraceTables) -> int:
    steps = tables.steps
    if not len(steps) or "applied" not in steps:
        return 0
    applied = flags(steps["applied"])
    attempted_before = steps["compaction_id"].notna().shift(1, fill_value=False).to_numpy(dtype=bool)
    before = steps["estimator_tokens"].astype(float).to_numpy()
    after = steps["context_tokens_after"].astype(float).to_numpy()
    freed_little = (before - after) < THRASH_FREED_SHARE * before
    return int((applied & attempted_before & freed_little).sum())
