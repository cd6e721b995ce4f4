"""Column documentation of the offline loss frames and the typing that gives every frame exactly those columns.

Each table is a :class:`Columns` mapping (column name -> meaning) that knows each column's type. The
per-compaction and per-conversation tables are the attempt's and the trace's own columns plus the columns of
every metric of the catalogue (:mod:`zett_lab.measure.catalogue`), read when asked, so a metric registered
later has its columns too. The tables are appended to the :class:`~zett_lab.measure.losses.Losses` docstring
and rendered in the reference docs; :func:`frame` builds a DataFrame with exactly the documented columns and
dtypes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..records import is_missing
from ..replay.schema import NOT_SMALLER
from . import catalogue
from .catalogue import Column, ColumnType


class Columns(Mapping[str, str]):
    """The documented columns of a result table: column name -> meaning, and :meth:`type` of each.

    Made from a list of :class:`~zett_lab.measure.catalogue.Column`, or from a function giving that list
    (read again whenever a metric is registered).
    """

    def __init__(self, columns: Iterable[Column] | Callable[[], list[Column]]) -> None:
        self._make = columns if callable(columns) else None
        self._columns: list[Column] = [] if callable(columns) else list(columns)
        self._version = -1
        self._index: dict[str, Column] = {c.name: c for c in self._columns}

    def _current(self) -> dict[str, Column]:
        if self._make is not None and self._version != catalogue.version():
            self._version = catalogue.version()
            self._index = {}
            for column in self._make():
                self._index.setdefault(column.name, column)
        return self._index

    def __getitem__(self, name: str) -> str:
        return self._current()[name].meaning

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def type(self, name: str) -> ColumnType:
        """How a column is typed (``count``, ``ratio``, ``float``, ``flag`` or ``text``)."""
        return self._current()[name].type

    def types(self) -> dict[str, ColumnType]:
        return {name: column.type for name, column in self._current().items()}


def _c(name: str, meaning: str, type: ColumnType = "text") -> Column:
    return Column(name, meaning, type)


_WHO = [
    _c("conversation_id", "Conversation.id"),
    _c("summarizer", "summarizer identity string of the trace"),
]
_SETTING = [
    _c("max_tokens", "replay setting", "count"),
    _c("keep_recent_tokens", "replay setting", "count"),
]

#: The columns of an attempt that are no metric: what the trace recorded and the attempt's window and sizes.
_ATTEMPT = [
    *_WHO,
    *_SETTING,
    _c("compaction_id", "0-based attempt id (trace.compactions)", "count"),
    _c("step", "model step of the attempt", "count"),
    _c("turn", "user turn of the attempt", "count"),
    _c("trigger", '"auto" or "manual"'),
    _c(
        "status",
        f'"applied", "{NOT_SMALLER}" (summary discarded by the engine), "failed" (no usable summary), or "no window"',
    ),
    _c("applied", "the checkpoint replaced the span in the context", "flag"),
    _c("span_start", "first original message the summary stands for (S_k = messages[span_start:span_end])", "count"),
    _c("span_end", "first message kept verbatim (T_k = messages[span_end:n_recorded])", "count"),
    _c("n_recorded", "original messages seen so far (F_k = messages[n_recorded:])", "count"),
    _c("span_messages", "len(S_k)", "count"),
    _c("tail_messages", "len(T_k)", "count"),
    _c("future_messages", "len(F_k)", "count"),
    _c("span_tokens", "tok(S_k): the counter over the raw span messages", "count"),
    _c("older_tokens", "tokens of the window the engine summarized (earlier checkpoint included)", "count"),
    _c(
        "summary_tokens",
        "tok(Σ_k): the checkpoint message as the engine counts it (prefix included); NA on failure",
        "count",
    ),
    _c("tail_tokens", "tok(T_k)", "count"),
    _c(
        "before_tokens",
        "dialogue tokens before the compaction (older_tokens + tail_tokens; system prompt excluded)",
        "count",
    ),
    _c("after_tokens", "dialogue tokens after it, had it been applied (summary_tokens + tail_tokens)", "count"),
    _c("span_anchors", "|A(S_k)|: distinct anchors of the span (all types)", "count"),
]
_ATTEMPT_LAST = [
    _c("cache_hit", "the summary came from the persistent cache (trace)", "flag"),
    _c("error_kind", "why the attempt failed (trace), None otherwise"),
]


def _compaction_columns() -> list[Column]:
    metrics = [column for entry in catalogue.computed("compaction") for column in entry.columns("compaction")]
    return [*_ATTEMPT, *metrics, *_ATTEMPT_LAST]


#: ``losses.compactions``: one row per compaction attempt.
COMPACTION_COLUMNS = Columns(_compaction_columns)

#: The columns of a trace's row that are no metric.
_TRACE = [
    *_WHO[:1],
    _c("summarizer", "summarizer identity"),
    *_SETTING,
    _c("messages", "messages in the conversation", "count"),
    _c("steps", "model steps replayed", "count"),
    _c("compactions", "compactions applied", "count"),
    _c("attempts", "summary attempts (rows of trace.compactions)", "count"),
    _c("probes", "gold probes of the conversation", "count"),
]


def _conversation_columns() -> list[Column]:
    metrics = [column for entry in catalogue.computed("conversation") for column in entry.columns("conversation")]
    return [*_TRACE, *metrics]


#: ``losses.conversation``: one row per trace.
CONVERSATION_COLUMNS = Columns(_conversation_columns)

ANCHOR_COLUMNS = Columns(
    [
        _c("conversation_id", "Conversation.id"),
        _c("summarizer", "summarizer identity"),
        _c("compaction_id", "the attempt (only attempts that produced a summary have rows)", "count"),
        _c("applied", "the attempt's checkpoint was applied", "flag"),
        _c("type", "anchor type (zett_lab.load.anchors.ANCHOR_TYPES)"),
        _c("value", "the anchor as first written in the conversation"),
        _c("normalized", "its comparison form"),
        _c("message_index", "first span message holding it", "count"),
        _c("in_summary", "present in Σ_k", "flag"),
        _c(
            "in_tail",
            "shown by T_k or by the system prompt, which every step sends, in any spelling (a path it ends with, a "
            "qualified or bare name, with or without its file extension); a constraint or decision also when the "
            "system prompt or a message kept before the span holds it as a summary would (most of its content "
            "words in one clause, and its negation)",
            "flag",
        ),
        _c("in_future", "present anywhere in F_k, tool results included (exact)", "flag"),
        _c(
            "next_use_index",
            "first message of F_k where the agent uses it: its text, tool-call arguments or commands (NA when none)",
            "count",
        ),
        _c(
            "rarity",
            "how rare it is in the conversation, 0..1: log(N/df)/log(N/2) over N dialogue messages, df holding it",
            "float",
        ),
        _c(
            "needed_later",
            "member of N_k: used again (next_use_index), specific (not vocabulary of a language, its standard library, "
            "a common framework or most projects; a number only with its key or unit), and until that use shown in no "
            "spelling by T_k, the system prompt, any message after T_k (a re-read, the user saying it) or harness "
            "context (aider's chat files)",
            "flag",
        ),
        _c("lost_but_needed", "needed_later and not in_summary", "flag"),
        _c("refetched", "a later tool call's arguments mention it while it was in neither T_k nor Σ_k", "flag"),
    ]
)

#: Column of the counted per-anchor flags: how many rows of the per-anchor table have that row's values.
ANCHOR_ROWS = "anchor_rows"

#: The per-anchor table's flags counted (``anchor_rows.retention_counts``): what the anchor-retention
#: figure draws, one row per distinct type and flags.
ANCHOR_COUNT_COLUMNS: dict[str, str] = {
    **{
        name: ANCHOR_COLUMNS[name]
        for name in ("type", "applied", "in_summary", "in_tail", "needed_later", "lost_but_needed")
    },
    ANCHOR_ROWS: "how many rows of the per-anchor table have these values",
}

#: The per-anchor columns the anchor-retention figure reads (its flags per anchor type).
RETENTION_COLUMNS = list(ANCHOR_COUNT_COLUMNS)[:-1]

PROBE_COLUMNS = Columns(
    [
        _c("conversation_id", "Conversation.id"),
        _c("summarizer", "summarizer identity"),
        _c("compaction_id", "an attempt whose span covers the probe's message", "count"),
        _c("step", "its step", "count"),
        _c("applied", "its checkpoint was applied", "flag"),
        _c("probe", "index of the probe in Conversation.probes", "count"),
        _c("type", "probe type (recall, artifact, continuation, decision, update)"),
        _c("question", "probe question"),
        _c("answer", "gold answer"),
        _c("message_index", "message holding the fact", "count"),
        _c(
            "answer_in_source",
            "the gold answer occurs in that message (when False the offline check cannot succeed verbatim)",
            "flag",
        ),
        _c("in_summary", "answer present in Σ_k", "flag"),
        _c("in_tail", "answer present in T_k", "flag"),
        _c(
            "in_context",
            "answer present in the context the next model step sees ([checkpoint] + messages[kept_from:n_recorded])",
            "flag",
        ),
        _c("superseded_answer", "update probes: the earlier answer (None for other types)"),
        _c(
            "superseded_in_context",
            "update probes: the superseded answer is in that context (NA for other types)",
            "flag",
        ),
    ]
)

UPDATE_COLUMNS = Columns(
    [
        _c("conversation_id", "Conversation.id"),
        _c("summarizer", "summarizer identity"),
        _c("compaction_id", "an attempt with a summary whose span holds the change", "count"),
        _c("applied", "the attempt's checkpoint was applied", "flag"),
        _c("kind", "what changed (zett_lab.measure.updates.UPDATE_KINDS)"),
        _c("key", "the item's identity"),
        _c("name", "the item as written"),
        _c("superseded", "earlier values, as written, joined by ' | '"),
        _c("latest", "the value at the end of the span"),
        _c("superseded_index", "first message holding a superseded value", "count"),
        _c("latest_index", "first message holding the latest value after the change", "count"),
        _c("status", "'latest', 'superseded' (only an earlier value: an error) or 'neither' in the summary"),
    ]
)

DECAY_COLUMNS = Columns(
    [
        _c("conversation_id", "Conversation.id"),
        _c("summarizer", "summarizer identity"),
        _c("from_compaction", "applied compaction k where the anchors were kept", "count"),
        _c("to_compaction", "later applied compaction k+j", "count"),
        _c("j", "how many applied compactions later", "count"),
        _c("kept", "anchors of S_k present in Σ_k", "count"),
        _c("still_in_summary", "of those, present in Σ_{k+j}", "count"),
        _c("survival", "still_in_summary / kept", "float"),
        _c("still_in_context", "of those, present in Σ_{k+j} ∪ T_{k+j}", "count"),
        _c("context_survival", "still_in_context / kept", "float"),
    ]
)


def doc_table(title: str, columns: Mapping[str, str]) -> str:
    lines = [f"    ``{title}``:"]
    lines += [f"        - ``{name}``: {text}" for name, text in columns.items()]
    return "\n".join(lines)


def frame(rows: Sequence[Mapping[str, object]] | Mapping[str, Sequence[object]], columns: Columns) -> pd.DataFrame:
    """A DataFrame with exactly ``columns``: nullable Int64 counts, nullable booleans, float64 ratios.

    Every column is typed from the values pandas read (one object array for the whole table: a
    measure makes many small tables, where pandas' per-column operations were most of the time).
    """
    types = columns.types()
    names = list(types)
    data = pd.DataFrame(rows, columns=names)
    values = data.to_numpy(dtype=object)
    typed: dict[str, Any] = {}
    for n, (column, kind) in enumerate(types.items()):
        column_values = values[:, n]
        if kind == "flag":
            typed[column] = _typed(column_values, "boolean", bool)
        elif kind == "count":
            typed[column] = _typed(column_values, "Int64", int)
        elif kind in ("ratio", "float"):
            typed[column] = np.asarray(pd.to_numeric(column_values, errors="coerce"), dtype="float64")
        else:
            column_values = column_values.copy()
            column_values[pd.isna(column_values)] = None
            typed[column] = pd.Series(column_values, index=data.index, dtype=object)  # not inferred as text
    return pd.DataFrame(typed, index=data.index, columns=names)


def _typed(values: np.ndarray, dtype: Literal["boolean", "Int64"], cast: Callable[[Any], Any]) -> Any:
    try:
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError):
        return pd.array([None if is_missing(v) else cast(v) for v in values], dtype=dtype)
