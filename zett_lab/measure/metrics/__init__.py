"""The built-in metrics, one module each (a family, such as retention per anchor type, is one module).

Importing this package registers them in the metric catalogue (:mod:`zett_lab.measure.catalogue`) in the
order of :data:`BUILTIN`: the catalogue's order, which is the order of the result tables' metric columns
and of the documentation's metric table. A metric of your own is one module like these, imported before
you measure (see the documentation's "Add a metric" page).
"""

import importlib

#: The built-in metric modules, in catalogue order.
BUILTIN = (
    "needed_anchor_recall",
    "anchor_retention",
    "constraint_survival",
    "probe_presence",
    "compression_ratio",
    "context_reduction",
    "engine_compression_ratio",
    "retention_by_type",
    "lost_but_needed",
    "superseded_rate",
    "superseded_only",
    "superseded_probe_rate",
    "refetch_calls",
    "decay_survival_1",
    "final_survival",
    "steps_over_budget",
    "steps_no_boundary",
    "steps_only_checkpoints",
    "thrash_compactions",
    "tail_over_budget",
    "peak_context",
    "rejected_not_smaller",
    "failed",
    "input_tokens",
    "summary_tokens",
    "cost",
    "latency",
)

for _module in BUILTIN:
    importlib.import_module(f"{__name__}.{_module}")
