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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import ModelUsage
from zett_agent.storage import decode_messages, encode_messages

from ..errors import InputError
from ..files import atomic_path, write_atomic
from ..load.conversation import CHECKPOINT_PREFIX, Conversation, NativeCompaction, Probe
from ..records import is_missing, records

TRACE_FORMAT = "zett-lab-trace"
TRACE_VERSION = 1
_PARQUET_KEY = b"zett_lab.trace"

STEP_COLUMNS = [
    "conversation_id", "turn", "step", "turn_step", "n_recorded", "n_messages", "estimate", "estimator_tokens",
    "estimate_source", "max_tokens", "keep_recent_tokens", "triggered", "trigger", "skip_reason", "older_messages",
    "older_tokens", "recent_messages", "recent_tokens", "cutoff_index", "compaction_id", "summary_tokens", "applied",
    "context_tokens_after", "over_budget_after", "checkpoint_id", "kept_from", "responded", "output_tokens",
    "zett_agent_version",
]
COMPACTION_COLUMNS = [
    "compaction_id", "conversation_id", "step", "turn", "trigger", "span_start", "span_end", "n_recorded",
    "older_messages", "older_tokens", "recent_messages", "recent_tokens", "summary_tokens", "compression_ratio",
    "applied", "skip_reason", "summary_text", "summarizer", "latency_s", "cache_hit", "summary_input_tokens",
    "summary_output_tokens", "error", "error_kind",
]
_INTEGER_COLUMNS = {
    "turn", "step", "turn_step", "n_recorded", "n_messages", "estimate", "estimator_tokens", "max_tokens",
    "keep_recent_tokens", "older_messages", "older_tokens", "recent_messages", "recent_tokens", "cutoff_index",
    "compaction_id", "summary_tokens", "context_tokens_after", "checkpoint_id", "kept_from", "output_tokens",
    "span_start", "span_end", "summary_input_tokens", "summary_output_tokens", "snapshot_version",
    "compacted_through_sequence",
}
_BOOLEAN_COLUMNS = {"triggered", "applied", "over_budget_after", "responded", "cache_hit"}


def frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """A DataFrame with fixed columns and nullable integer/boolean dtypes (built column by column: a sweep makes thousands)."""
    extra = [key for row in rows[:1] for key in row if key not in columns]
    columns = [*columns, *extra]
    data: dict[str, Any] = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        if column in _INTEGER_COLUMNS:
            data[column] = pd.array(values, dtype="Int64")
        elif column in _BOOLEAN_COLUMNS:
            data[column] = pd.array(values, dtype="boolean")
        elif column in ("compression_ratio", "latency_s"):
            data[column] = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64")
        else:
            data[column] = pd.Series([None if is_missing(v) else v for v in values], dtype=object)
    return pd.DataFrame(data, columns=columns)


@dataclass
class Trace:
    """One replay of one conversation under one setting.

    Attributes:
        conversation: The replayed conversation (needed to rebuild contexts and measure loss).
        steps: One row per model step (``docs/trace-schema.md``).
        compactions: One row per summary attempt or manual pass.
        settings: Limits, summarizer identity, counter, usage mode, engine version, cache stats.
        engine_events: The engine's own ``COMPACTION_COMPLETED`` events, for cross-checks.
    """

    conversation: Conversation
    steps: pd.DataFrame
    compactions: pd.DataFrame
    settings: dict[str, Any] = field(default_factory=dict)
    engine_events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_rows(cls, conversation, step_rows, compaction_rows, settings, engine_events) -> Trace:
        return cls(
            conversation=conversation,
            steps=frame(step_rows, STEP_COLUMNS),
            compactions=frame(compaction_rows, COMPACTION_COLUMNS),
            settings=settings,
            engine_events=engine_events,
        )

    def __repr__(self) -> str:
        return (
            f"Trace(conversation={self.conversation.id!r}, steps={len(self.steps)}, "
            f"compactions={int(self.compactions['applied'].sum()) if len(self.compactions) else 0} applied, "
            f"max_tokens={self.settings.get('max_tokens')}, "
            f"keep_recent_tokens={self.settings.get('keep_recent_tokens')})"
        )

    def summary(self) -> dict[str, Any]:
        """Headline figures: steps, compactions applied / not smaller / failed, peak context, steps over budget."""
        steps, compactions = self.steps, self.compactions
        reasons = compactions["skip_reason"] if len(compactions) else pd.Series(dtype=object)
        return {
            "conversation_id": self.conversation.id,
            "messages": len(self.conversation.messages),
            "steps": len(steps),
            "max_tokens": self.settings.get("max_tokens"),
            "keep_recent_tokens": self.settings.get("keep_recent_tokens"),
            "summarizer": self.settings.get("summarizer"),
            "compactions_applied": int(compactions["applied"].sum()) if len(compactions) else 0,
            "rejected_not_smaller": int((reasons == "summary not smaller").sum()),
            "failed": int((reasons == "summary failed").sum()),
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
            f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in summary.items()
        )
        columns = [
            "step",
            "turn",
            "estimate",
            "estimate_source",
            "triggered",
            "skip_reason",
            "applied",
            "context_tokens_after",
            "over_budget_after",
        ]
        steps = self.steps[columns].to_html(max_rows=30, index=False, na_rep="")
        compactions = (
            self.compactions[
                [
                    "compaction_id",
                    "step",
                    "trigger",
                    "span_start",
                    "span_end",
                    "older_tokens",
                    "summary_tokens",
                    "applied",
                    "skip_reason",
                    "error_kind",
                ]
            ].to_html(index=False, na_rep="")
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
            "settings": self.settings,
            "compactions": records(self.compactions),
            "engine_events": self.engine_events,
            "conversation": conversation_document(self.conversation),
        }
        if include_steps:
            document["steps"] = records(self.steps)
        return document

    def save(self, path: str | Path) -> Path:
        """Write to ``.json`` or ``.parquet`` (chosen by suffix), atomically."""
        path = Path(path)
        if path.suffix == ".json":
            return write_atomic(path, json.dumps(self._document(include_steps=True), ensure_ascii=False))
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(self.steps, preserve_index=False)
            metadata = {
                **(table.schema.metadata or {}),
                _PARQUET_KEY: json.dumps(self._document(include_steps=False)).encode(),
            }
            with atomic_path(path) as temporary:
                pq.write_table(table.replace_schema_metadata(metadata), temporary)
            return path
        raise InputError(path, None, "a trace is saved as .json or .parquet")

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        """Read a trace written by :meth:`save`."""
        path = Path(path)
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
        steps = [{k: (None if is_missing(v) else v) for k, v in row.items()} for row in steps]
        return cls.from_rows(
            conversation_from_document(document["conversation"]),
            steps,
            document["compactions"],
            document["settings"],
            document["engine_events"],
        )


def checkpoint_message(summary_text: str) -> CompactedMessage:
    """The checkpoint message the engine builds from a summary text."""
    return CompactedMessage(content=CHECKPOINT_PREFIX + summary_text)


def conversation_document(conversation: Conversation) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "id": conversation.id,
        "source": conversation.source,
        "format": conversation.format,
        "messages": encode_messages(conversation.messages),
        "usage": {str(i): asdict(u) for i, u in conversation.usage.items()},
        "native_compactions": [asdict(n) for n in conversation.native_compactions],
        "probes": [asdict(p) for p in conversation.probes],
        "metadata": conversation.metadata,
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
    )
