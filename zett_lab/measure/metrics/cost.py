"""The cost metrics priced by the cost model (:func:`zett_lab.measure.cost.cost_summary`): they need a price table
and a primary model, which a trace alone does not name, so a sweep and the report compute them there."""

from __future__ import annotations

from ..catalogue import RUN_LEVELS, Metric, register

_COST_MODEL = "zett_lab.measure.cost.cost_summary (list prices of the primary and summary models)"

for _name, _label, _definition in (
    (
        "cache_breaks",
        "Prompt-cache breaks",
        "Steps that paid their whole context uncached: a conversation's first step, and every step after a "
        "compaction changed the context.",
    ),
    (
        "primary_cost_usd",
        "Primary cost (USD)",
        "List-price cost of the primary model's input and output over all steps.",
    ),
    ("summary_cost_usd", "Summary cost (USD)", "List-price cost of the summary calls."),
    ("total_cost_usd", "Total cost (USD)", "Primary plus summary cost."),
):
    register(
        Metric(
            _name,
            RUN_LEVELS,
            "lower",
            _label,
            _definition,
            kind="cost",
            type="count" if _name == "cache_breaks" else "float",
            across="sum",
            computed_by=_COST_MODEL,
        )
    )
