"""The columns of a sweep's results table: their order, which are counts, and which describe how a cell ran.

:func:`results_frame` makes the table from the cells' rows (setting columns first, run columns last,
nullable types); :class:`~zett_lab.study.results.Sweep` holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ..measure.catalogue import metrics
from ..measure.columns import CONVERSATION_COLUMNS
from ..measure.cost import COST_SUMMARY_COLUMNS
from ..records import is_missing

#: The setting columns, first in the table.
_LEADING = [
    "conversation_id",
    "engine",
    "summarizer",
    "max_tokens",
    "keep_recent_tokens",
    "context_window",
    "max_tokens_share",
    "keep_recent_share",
]
#: The columns of how a cell ran, last in the table.
_TRAILING = [
    "engine_identity",
    "summarizer_identity",
    "replayed",
    "shared_steps",
    "model_calls",
    "cache_hits",
    "seconds",
    "worker",
    "error",
]
#: Columns that describe how a cell was computed, not what the engine did (they differ between executors).
RUN_COLUMNS = ("replayed", "shared_steps", "model_calls", "cache_hits", "seconds", "worker")
#: Count columns of the results table besides the catalogue's counts (:func:`_int_result_columns`).
_INT_RESULT_COLUMNS = {
    "max_tokens",
    "keep_recent_tokens",
    "context_window",
    "messages",
    "steps",
    "compactions_applied",
    "model_calls",
    "cache_hits",
    "primary_cached_input_tokens",
    "primary_uncached_input_tokens",
    "primary_output_tokens",
    "summary_calls",
    "compactions",
    "attempts",
    "probes",
    "shared_steps",
}


def _int_result_columns() -> set[str]:
    """The results table's count columns: its own, and every count the metric catalogue registers."""
    counts = {column.name for entry in metrics() for column in entry.columns("conversation") if column.type == "count"}
    return _INT_RESULT_COLUMNS | counts | {entry.name for entry in metrics() if entry.type == "count"}


def result_column_names() -> set[str]:
    """Every column a sweep's results table may have: its setting, run and text columns, the cost totals, and each
    metric of the catalogue with its conversation-level columns (what a constraint may name before any replay)."""
    catalogued = {column.name for entry in metrics() for column in entry.columns("conversation")}
    catalogued |= {entry.name for entry in metrics()}
    return (
        set(_LEADING)
        | set(_TRAILING)
        | set(_TEXT_RESULT_COLUMNS)
        | _int_result_columns()
        | set(CONVERSATION_COLUMNS)
        | set(COST_SUMMARY_COLUMNS)
        | catalogued
    )


_TEXT_RESULT_COLUMNS = (
    "error",
    "summary_error",
    "engine",
    "engine_identity",
    "summarizer",
    "summarizer_identity",
    "conversation_id",
    "worker",
)


def results_frame(rows: Sequence[Mapping[str, object]], relative: bool) -> pd.DataFrame:
    """The results table from cell rows: setting columns first, run columns last, nullable types."""
    columns: list[str] = [
        c for c in _LEADING if relative or c not in ("context_window", "max_tokens_share", "keep_recent_share")
    ]
    seen = set(columns) | set(_TRAILING)
    for row in rows:
        for key in row:
            if key not in seen:
                columns.append(key)
                seen.add(key)
    columns += _TRAILING
    table = pd.DataFrame(list(rows), columns=columns)
    counts = _int_result_columns()
    for column in table.columns:
        if column in counts:
            table[column] = pd.array([None if is_missing(v) else int(v) for v in table[column]], dtype="Int64")
        elif column == "replayed":
            table[column] = pd.array([None if is_missing(v) else bool(v) for v in table[column]], dtype="boolean")
        elif column in _TEXT_RESULT_COLUMNS:
            table[column] = table[column].astype(object).where(table[column].notna(), None)
        elif table[column].dtype == object:
            converted = pd.to_numeric(table[column], errors="coerce")
            if converted.notna().sum() == table[column].notna().sum():
                table[column] = converted.astype("float64")
    return table
