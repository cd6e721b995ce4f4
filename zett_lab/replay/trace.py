"""The result of one replay: a step table, a compaction table, and how they were produced.

Columns are documented in ``docs/trace-schema.md``. A trace saves to one JSON
file or one Parquet file (the step table, with everything else in the file's
metadata) and loads back without re-running the replay.

Example::

    >>> trace.save("trace.parquet")           # doctest: +SKIP
    >>> Trace.load("trace.parquet").steps     # doctest: +SKIP
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd
from pandas.arrays import BooleanArray, IntegerArray
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import ModelUsage
from zett_agent.storage import decode_messages, encode_messages

from ..errors import InputError, OutputError, SettingError
from ..files import atomic_path, check_output, write_atomic
from ..formatting import cell, count, frame_html
from ..load.conversation import CHECKPOINT_PREFIX, Conversation, HarnessContext, NativeCompaction, Probe
from ..records import is_missing, read_text, records
from .live_reader import is_live_trace, read_live_session
from .schema import (
    BOOLEAN_COLUMNS,
    COMPACTION_COLUMNS,
    COMPACTION_SUMMARY_COLUMNS,
    ENGINE_FAILED,
    FAILURE_COLUMNS,
    FAILURE_REASONS,
    FLOAT_COLUMNS,
    INTEGER_COLUMNS,
    LIVE_COMPACTION_COLUMNS,
    LIVE_STEP_COLUMNS,
    NOT_SMALLER,
    STEP_COLUMNS,
    STEP_SUMMARY_COLUMNS,
    SUMMARY_FAILED,
    TraceRow,
)
from .setting import Setting, TraceSettings

TRACE_FORMAT = "zett-lab-trace"
TRACE_VERSION = 1
_PARQUET_KEY = b"zett_lab.trace"


def one_line(text: object, limit: int = 400) -> str:
    """``text`` on one line (whitespace collapsed), cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def failure_counts(compactions: pd.DataFrame) -> pd.DataFrame:
    """Failed attempts per distinct cause (:data:`FAILURE_COLUMNS`), most frequent first.

    A failed summary call counts as ``"summary call"``, an engine that raised during its pass
    (outside the summary call) as ``"engine pass"``.
    """
    reasons = compactions["skip_reason"] if len(compactions) else None
    if reasons is None or not reasons.isin((SUMMARY_FAILED, ENGINE_FAILED)).any():
        return pd.DataFrame(columns=FAILURE_COLUMNS)  # the common case, without building and grouping empty tables
    parts = []
    for what, reason in (("summary call", SUMMARY_FAILED), ("engine pass", ENGINE_FAILED)):
        failed = compactions[reasons == reason]
        parts.append(count_causes(what, failed["summarizer"], failed["error_kind"], failed["error"]))
    return combine_failure_counts(parts)


def summary_calls(compactions: pd.DataFrame) -> tuple[int, int]:
    """(summary calls that reached the model, calls served by the summary cache)."""
    hits = compactions["cache_hit"] if len(compactions) else pd.Series(dtype="boolean")
    return int(hits.eq(False).sum()), int(hits.eq(True).sum())


def computed_summary_seconds(compactions: pd.DataFrame, shared: int = 0) -> float:
    """The seconds a replay spent computing summaries: ``latency_s`` of its compactions the summary cache did not
    serve, past the first ``shared`` (taken from the replay it was forked from). What a run of it with those
    summaries cached does not spend again."""
    own = compactions.iloc[shared:]
    if not len(own):
        return 0.0
    return float(own.loc[own["cache_hit"].eq(False), "latency_s"].fillna(0.0).sum())


def combine_failure_counts(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Several failure counts as one: counts of the same (what, summarizer, kind) added, the first cause kept."""
    parts = [t for t in tables if len(t)]
    if not parts:
        return pd.DataFrame(columns=FAILURE_COLUMNS)
    grouped = (
        pd.concat(parts, ignore_index=True)
        .groupby(["what", "summarizer", "kind"], sort=False)
        .agg(cause=("cause", "first"), count=("count", "sum"))
        .reset_index()
    )
    return grouped.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)[FAILURE_COLUMNS]


def count_causes(what: str, summarizers: pd.Series, kinds: pd.Series, errors: pd.Series) -> pd.DataFrame:
    """Rows of :data:`FAILURE_COLUMNS` from one (summarizer, kind, error text) per failed ``what``."""
    table = pd.DataFrame(
        {
            "what": what,
            "summarizer": summarizers.astype(object).to_numpy(),
            "kind": kinds.astype(object).to_numpy(),
            "cause": [one_line(e) for e in errors.astype(object)],
            "count": 1,
        }
    )
    return combine_failure_counts([table.fillna({"summarizer": "", "kind": ""})])


def frame(rows: list[TraceRow], columns: list[str]) -> pd.DataFrame:
    """A DataFrame with fixed columns and nullable integer/boolean dtypes (built column by column: a sweep makes thousands).

    Columns are handed to pandas as arrays it keeps, with one index for all (nothing to align):
    building the tables was 6.6 % of a warm sweep.
    """
    extra = [key for row in rows[:1] for key in row if key not in columns]
    columns = [*columns, *extra]
    index = pd.RangeIndex(len(rows))
    data: dict[str, Any] = {}
    for column, values in zip(columns, _column_values(rows, columns), strict=True):
        if column in INTEGER_COLUMNS:
            data[column] = _nullable(values, int)
        elif column in BOOLEAN_COLUMNS:
            data[column] = _nullable(values, bool)
        elif column in FLOAT_COLUMNS:
            data[column] = _floats(values)
        else:
            # A Series, so pandas keeps the object dtype instead of inferring strings; one index for all.
            data[column] = pd.Series(_objects(values), index=index, dtype=object, copy=False)
    return pd.DataFrame(data, index=index, columns=columns, copy=False)


def _column_values(rows: list[TraceRow], columns: list[str]) -> list[Sequence[Any]]:
    """Each column's values in row order (None where a row lacks the key)."""
    names = tuple(columns)
    if rows and all(tuple(row) == names for row in rows):  # a recorder's rows: transposed in C
        return list(zip(*(row.values() for row in rows), strict=True))
    return [[row.get(column) for row in rows] for column in columns]


def _objects(values: Sequence[Any]) -> np.ndarray:
    """An object array of ``values``, missing ones (NaN, pd.NA) as None; a sequence stays one cell."""
    cells = (None if value is None or (type(value) is not str and is_missing(value)) else value for value in values)
    return np.fromiter(cells, dtype=object, count=len(values))


def _floats(values: Sequence[Any]) -> np.ndarray:
    """A float64 array of ``values`` (missing and non-numbers as NaN), as ``pd.to_numeric(..., errors="coerce")`` makes it."""
    if all(type(value) is float or type(value) is int or value is None for value in values):
        return np.array([np.nan if value is None else value for value in values], dtype="float64")
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64").to_numpy()


def _nullable(values: Sequence[Any], kind: type[int] | type[bool]) -> IntegerArray | BooleanArray:
    """A nullable Int64 (``kind`` int) or boolean array of ``values``, as ``pd.array`` makes it.

    When every value is exactly ``kind`` or None (a recorder's rows) the array is built from
    its data and mask directly: ``pd.array`` first infers each value's type, which was most
    of building a trace's tables. Anything else (numpy scalars, NaN, pd.NA) is left to it.
    """
    exact = all(type(value) is kind or value is None for value in values)
    try:
        data = (
            np.array([False if v is None else v for v in values], dtype=np.int64 if kind is int else bool)
            if exact
            else None
        )
    except OverflowError:  # an integer beyond int64: pandas raises its own error
        data = None
    if data is None:
        return pd.array(values, dtype="Int64") if kind is int else pd.array(values, dtype="boolean")
    missing = np.array([value is None for value in values], dtype=bool)
    return IntegerArray(data, missing) if kind is int else BooleanArray(data, missing)


class TraceSummary(TypedDict):
    """A trace's headline figures (:meth:`Trace.summary`)."""

    conversation_id: str
    messages: int
    steps: int
    max_tokens: int | None
    keep_recent_tokens: int | None
    summarizer: str
    engine: str
    compactions_applied: int
    rejected_not_smaller: int
    failed: int
    summary_error: str | None
    peak_context: int
    total_input_tokens: int
    steps_over_budget: int


@dataclass(frozen=True)  # no slots: a StoredTrace (study) reads its tables from its sweep
class Trace:
    """One replay of one conversation under one setting.

    Attributes:
        conversation: The replayed conversation (needed to rebuild contexts and measure loss).
        steps: One row per model step (``docs/trace-schema.md``).
        compactions: One row per summary attempt or manual pass.
        settings: The Setting replayed and the facts of the run (:class:`~zett_lab.replay.setting.TraceSettings`).
        engine_events: The engine's own ``COMPACTION_COMPLETED`` events, for cross-checks.
    """

    conversation: Conversation
    steps: pd.DataFrame
    compactions: pd.DataFrame
    settings: TraceSettings
    engine_events: list[TraceRow] = field(default_factory=list)

    @classmethod
    def from_rows(
        cls,
        conversation: Conversation,
        step_rows: list[TraceRow],
        compaction_rows: list[TraceRow],
        settings: TraceSettings,
        engine_events: list[TraceRow],
        *,
        live: bool = False,
    ) -> Trace:
        """A trace from recorder rows (``live``: with the columns a live recording adds)."""
        return cls(
            conversation=conversation,
            steps=frame(step_rows, STEP_COLUMNS + (LIVE_STEP_COLUMNS if live else [])),
            compactions=frame(compaction_rows, COMPACTION_COLUMNS + (LIVE_COMPACTION_COLUMNS if live else [])),
            settings=settings,
            engine_events=engine_events,
        )

    @property
    def setting(self) -> Setting:
        """The Setting this trace was replayed (or a live agent ran) with; a trace of given spans has none."""
        if self.settings.setting is None:
            raise SettingError(f"the trace of {self.conversation.id!r} summarizes given spans: it has no Setting")
        return self.settings.setting

    def __repr__(self) -> str:
        return (
            f"Trace(conversation={self.conversation.id!r}, steps={len(self.steps)}, "
            f"compactions={int(self.compactions['applied'].sum()) if len(self.compactions) else 0} applied, "
            f"max_tokens={count(self.settings.max_tokens)}, "
            f"keep_recent_tokens={count(self.settings.keep_recent_tokens)})"
        )

    @property
    def failure_counts(self) -> pd.DataFrame:
        """Failed summaries per distinct cause (:data:`FAILURE_COLUMNS`); empty when every summary succeeded."""
        return failure_counts(self.compactions)

    def summary(self) -> TraceSummary:
        """Headline figures: steps, compactions applied / not smaller / failed, peak context, steps over budget.

        ``summary_error`` is the first failed summary's error (None when every summary succeeded).
        """
        steps, compactions = self.steps, self.compactions
        reasons = compactions["skip_reason"] if len(compactions) else pd.Series(dtype=object)
        return {
            "conversation_id": self.conversation.id,
            "messages": len(self.conversation.messages),
            "steps": len(steps),
            "max_tokens": self.settings.max_tokens,
            "keep_recent_tokens": self.settings.keep_recent_tokens,
            "summarizer": self.settings.summarizer,
            "engine": self.settings.engine,
            "compactions_applied": int(compactions["applied"].sum()) if len(compactions) else 0,
            "rejected_not_smaller": int((reasons == NOT_SMALLER).sum()),
            "failed": int(reasons.isin(FAILURE_REASONS).sum()),
            "summary_error": one_line(compactions.loc[reasons.isin(FAILURE_REASONS), "error"].iloc[0])
            if reasons.isin(FAILURE_REASONS).any()
            else None,
            "peak_context": int(steps["context_tokens_after"].max()) if len(steps) else 0,
            "total_input_tokens": int(steps["context_tokens_after"].sum()) if len(steps) else 0,
            "steps_over_budget": int(steps["over_budget_after"].sum()) if len(steps) else 0,
        }

    def context_at(self, step: int) -> list[AnyMessage]:
        """The context model step ``step`` sent, rebuilt from the tables and the conversation."""
        row = self.steps.iloc[step]
        messages = self.conversation.messages
        system = next((m for m in messages[: row["n_recorded"]] if isinstance(m, SystemMessage)), None)
        context: list[AnyMessage] = [system] if system is not None else []
        if not pd.isna(row["checkpoint_id"]):
            text = self.compactions.loc[self.compactions["compaction_id"] == row["checkpoint_id"], "summary_text"].iloc[
                0
            ]
            context.append(checkpoint_message(text))
        context.extend(messages[row["kept_from"] : row["n_recorded"]])
        return context

    def _repr_html_(self) -> str:
        summary = self.summary()
        head = "".join(
            f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(cell(v))}</td></tr>" for k, v in summary.items()
        )
        steps = frame_html(self.steps, columns=STEP_SUMMARY_COLUMNS, max_rows=30)
        compactions = (
            frame_html(self.compactions, columns=COMPACTION_SUMMARY_COLUMNS)
            if len(self.compactions)
            else "<p>No compaction attempts.</p>"
        )
        return (
            f"<div><h4>{html.escape(repr(self))}</h4><table>{head}</table>"
            f"<h5>Steps</h5>{steps}<h5>Compactions</h5>{compactions}</div>"
        )

    # --- files -----------------------------------------------------------------------------

    def _document(self, include_steps: bool) -> dict[str, Any]:
        document = {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "settings": self.settings.record(),
            "compactions": records(self.compactions),
            "engine_events": self.engine_events,
            "conversation": conversation_document(self.conversation),
        }
        if include_steps:
            document["steps"] = records(self.steps)
        return document

    def input_files(self) -> list[Path]:
        """The files this trace was made from: the conversation's files and the summary cache file."""
        cache = read_text(self.settings.cache or {}, "path")
        files = self.conversation.input_files()
        return [*files, Path(cache)] if cache and cache != ":memory:" else files

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write to ``.json`` or ``.parquet`` (chosen by suffix), atomically.

        Never over one of :meth:`input_files`; an existing ``path`` only with ``overwrite=True``.
        """
        path = Path(path)
        if path.suffix not in (".json", ".parquet"):
            raise OutputError(path, None, "a trace is saved as .json or .parquet")
        check_output(path, self.input_files(), overwrite=overwrite)
        if path.suffix == ".json":
            return write_atomic(
                path, json.dumps(self._document(include_steps=True), ensure_ascii=False), overwrite=overwrite
            )
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.steps, preserve_index=False)
        metadata = {
            **(table.schema.metadata or {}),
            _PARQUET_KEY: json.dumps(self._document(include_steps=False)).encode(),
        }
        with atomic_path(path, overwrite=overwrite) as temporary:
            pq.write_table(table.replace_schema_metadata(metadata), temporary)
        return path

    @classmethod
    def load(cls, path: str | Path, session: str | None = None) -> Trace:
        """Read a trace written by :meth:`save`, or one session of a live trace (:func:`zett_lab.instrument`).

        A live trace may still be growing: what has been written so far is read, and a
        record not yet finished is left out (``settings.live.in_flight``). ``session`` names
        the session of a live trace that holds several.
        """
        path = Path(path)
        if is_live_trace(path):
            live = read_live_session(path, session)
            return cls.from_rows(
                live.conversation, live.step_rows, live.compaction_rows, live.settings, live.engine_events, live=True
            )
        try:
            if path.suffix == ".parquet":
                import pyarrow.parquet as pq

                table = pq.read_table(path)
                document = json.loads((table.schema.metadata or {})[_PARQUET_KEY])
                steps = table.to_pandas().to_dict("records")
            else:
                document = json.loads(path.read_text(encoding="utf-8"))
                steps = document["steps"]
        except (OSError, KeyError, ValueError) as error:
            raise InputError(path, None, f"not a zett_lab trace ({type(error).__name__}: {error})") from error
        if document.get("format") != TRACE_FORMAT:
            raise InputError(path, "field 'format'", f"expected {TRACE_FORMAT!r}")
        step_rows: list[dict[str, Any]] = [
            {str(k): (None if is_missing(v) else v) for k, v in row.items()} for row in steps
        ]
        return cls.from_rows(
            conversation_from_document(document["conversation"]),
            step_rows,
            document["compactions"],
            TraceSettings.from_record(document["settings"]),
            document["engine_events"],
        )


def checkpoint_message(summary_text: str) -> CompactedMessage:
    """The checkpoint message the engine builds from a summary text."""
    return CompactedMessage(content=CHECKPOINT_PREFIX + summary_text)


def conversation_document(conversation: Conversation) -> dict[str, object]:
    from dataclasses import asdict

    return {
        "id": conversation.id,
        "source": conversation.source,
        "format": conversation.format,
        "messages": encode_messages(conversation.messages),
        "usage": {str(i): asdict(u) for i, u in conversation.usage.items()},
        "native_compactions": [asdict(n) for n in conversation.native_compactions],
        "probes": [p.to_dict() for p in conversation.probes],
        "metadata": conversation.metadata,
        "harness_context": [asdict(h) for h in conversation.harness_context],
    }


def conversation_from_document(document: dict[str, Any]) -> Conversation:
    return Conversation(
        id=document["id"],
        messages=decode_messages(document["messages"]),
        source=document["source"],
        format=document["format"],
        usage={int(i): ModelUsage(**u) for i, u in document["usage"].items()},
        native_compactions=[NativeCompaction(**n) for n in document["native_compactions"]],
        probes=[Probe(**p) for p in document["probes"]],
        metadata=document["metadata"],
        harness_context=[HarnessContext(**h) for h in document.get("harness_context", [])],
    )
