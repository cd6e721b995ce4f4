"""An agent's own (native) compactions as traces, and where they fall beside zett-agent's in a replay.

Imported logs keep the recording agent's compactions in
``Conversation.native_compactions`` (Claude Code compact boundaries, Codex
``compacted`` records, OpenHands condensations). :func:`native_trace` puts them in
the trace schema (``docs/trace-schema.md``, compactions table only) so the same
loss metrics apply; :func:`native_alignment` lines each native compaction up with
the nearest compaction zett-agent made when replaying the same conversation (where each cut, how large
each summary is, and optionally their loss metrics side by side). Summarizing native spans with other
summarizers, and comparing them with statistics, is :func:`zett_lab.study.compare`.

Example::

    >>> import zett_lab
    >>> from zett_lab.measure.native import native_alignment
    >>> conversation = zett_lab.load("session.jsonl")                                   # doctest: +SKIP
    >>> trace = zett_lab.replay(conversation, max_tokens=150_000, keep_recent_tokens=20_000)  # doctest: +SKIP
    >>> native_alignment(trace, metrics=["anchor_retention"])[["native_position", "zett_position",
    ...                                      "native_anchor_retention", "zett_anchor_retention"]]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import pandas as pd
from zett_agent.messages import AnyMessage, SystemMessage

from ..load.conversation import Conversation
from ..replay.setting import TraceSettings
from ..replay.trace import Trace, checkpoint_message
from ..tokens import counter_identity
from .losses import Losses, measure

#: Columns of :func:`native_alignment` (metric columns ``native_<m>`` / ``zett_<m>`` follow when measured).
COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "native_id": "0-based index in Conversation.native_compactions",
    "native_kind": "NativeCompaction.kind (claude-code-compact, codex-compact, openhands-condensation, ...)",
    "native_trigger": "what the log says triggered it (auto / manual), when it says",
    "native_position": "index of the first message recorded after the native compaction (when it happened)",
    "native_cut": (
        "first message the native summary does not stand for (= native_position unless the agent kept a tail)"
    ),
    "native_span_start": "first message the native summary stands for",
    "native_tokens_before": "context size before it as the log reports it (the agent's own tokenizer), NA when absent",
    "native_estimate_before": "zett's counter over messages[:native_position] (what zett-agent would have estimated)",
    "native_summary_chars": "characters of the native summary",
    "native_summary_tokens": (
        "the native summary as a zett checkpoint message (prefix included), NA when the log lost it"
    ),
    "native_span_tokens": "zett's counter over the raw span messages[native_span_start:native_cut]",
    "native_compression_ratio": "1 - native_summary_tokens / native_span_tokens",
    "zett_compaction_id": (
        "nearest zett-agent compaction attempt (applied ones preferred), NA without a trace or attempt"
    ),
    "zett_step": "model step of that attempt",
    "zett_applied": "whether the engine applied it",
    "zett_position": "its n_recorded (original messages seen when it happened)",
    "zett_cut": "its span_end (first message kept verbatim)",
    "zett_span_start": "its span_start",
    "zett_estimate": "the engine's estimate at that step (what crossed max_tokens)",
    "zett_summary_tokens": "its checkpoint tokens (prefix included)",
    "zett_span_tokens": "zett's counter over the raw span messages[zett_span_start:zett_cut]",
    "zett_compression_ratio": "1 - zett_summary_tokens / zett_span_tokens (same definition as the native one)",
    "position_offset": "zett_position - native_position (negative: zett-agent compacted earlier)",
    "cut_offset": "zett_cut - native_cut (negative: zett-agent kept a longer tail)",
    "summary_tokens_ratio": "zett_summary_tokens / native_summary_tokens",
}

_INT_COLUMNS = [
    "native_id", "native_position", "native_cut", "native_span_start", "native_tokens_before", "native_estimate_before",
    "native_summary_chars", "native_summary_tokens", "native_span_tokens", "zett_compaction_id", "zett_step",
    "zett_position", "zett_cut", "zett_span_start", "zett_estimate", "zett_summary_tokens", "zett_span_tokens",
    "position_offset", "cut_offset",
]  # fmt: skip

Counter = Callable[[Sequence[AnyMessage]], int]


def _counter(counter: Counter | None) -> Counter:
    if counter is not None:
        return counter
    from ..tokens import count_tokens

    return count_tokens


def _dialogue(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    return [m for m in messages if not isinstance(m, SystemMessage)]


#: The subject a native compaction is compared and reported as, by ``NativeCompaction.kind``.
NATIVE_SUBJECTS: dict[str, str] = {
    "claude-code-compact": "native:claude-code",
    "codex-compact": "native:codex",
    "openhands-condensation": "native:openhands",
    "gemini-cli-compression": "native:gemini-cli",
    "zett-snapshot": "native:zett-agent",
    "zettcode": "native:zettcode",
}
NATIVE_PREFIX = "native:"


def native_subject(kind: str) -> str:
    """``native:<agent>`` for a native compaction kind (``claude-code-compact`` -> ``native:claude-code``)."""
    return NATIVE_SUBJECTS.get(kind, NATIVE_PREFIX + kind)


def native_trace(conversation: Conversation, *, counter: Counter | None = None, subject: str | None = None) -> Trace:
    """The conversation's native compactions as a :class:`~zett_lab.replay.trace.Trace` with no steps.

    One ``compactions`` row per native compaction (``compaction_id`` = its index in
    ``Conversation.native_compactions``, ``trigger`` = the log's trigger or the kind,
    ``summarizer`` = its subject, :func:`native_subject`; ``applied`` = the log kept a
    summary), so :func:`zett_lab.measure.measure` scores native summaries exactly like
    zett-agent's. ``subject`` keeps only the compactions of one subject.
    """
    count = _counter(counter)
    messages = conversation.messages
    rows = []
    for k, native in enumerate(conversation.native_compactions):
        name = native_subject(native.kind)
        if subject is not None and name != subject:
            continue
        position = min(max(native.position, 0), len(messages))
        cut = native.metadata.get("span_end")
        cut = position if cut is None else min(max(int(cut), 0), position)
        start = min(max(native.span_start, 0), cut)
        summary = native.summary or None
        older = count(_dialogue(messages[start:cut]))
        recent = count(_dialogue(messages[cut:position]))
        summary_tokens = count([checkpoint_message(summary)]) if summary else None
        rows.append(
            {
                "compaction_id": k,
                "conversation_id": conversation.id,
                "step": None,
                "turn": _turn_at(conversation, position),
                "trigger": native.metadata.get("trigger") or native.kind,
                "span_start": start,
                "span_end": cut,
                "n_recorded": position,
                "older_messages": cut - start,
                "older_tokens": older,
                "recent_messages": position - cut,
                "recent_tokens": recent,
                "summary_tokens": summary_tokens,
                "compression_ratio": (1 - summary_tokens / older) if summary_tokens is not None and older else None,
                "applied": summary is not None,
                "skip_reason": None if summary else "summary missing from log",
                "summary_text": summary,
                "summarizer": name,
                "latency_s": None,
                "cache_hit": None,
                "summary_input_tokens": None,
                "summary_output_tokens": None,
                "error": None,
                "error_kind": None,
            }
        )
    names = {row["summarizer"] for row in rows}
    label = subject or (names.pop() if len(names) == 1 else "native")
    settings = TraceSettings(setting=None, summarizer=str(label), counter=counter_identity(count))
    return Trace.from_rows(conversation, [], rows, settings, [])


def native_traces(conversations: Iterable[Conversation], subject: str | None = None) -> dict[str, list[Trace]]:
    """Native traces of the conversations that have native compactions, grouped by subject."""
    out: dict[str, list[Trace]] = {}
    for conversation in conversations:
        names = {native_subject(n.kind) for n in conversation.native_compactions}
        for name in sorted(names):
            if subject is None or name == subject:
                out.setdefault(name, []).append(native_trace(conversation, subject=name))
    return out


def _turn_at(conversation: Conversation, index: int) -> int | None:
    turn = None
    for t in conversation.turns:
        if t.start <= max(index - 1, 0):
            turn = t.index
    return turn


def native_alignment(
    trace: Trace | None = None,
    *,
    conversation: Conversation | None = None,
    counter: Counter | None = None,
    metrics: Sequence[str] = (),
) -> pd.DataFrame:
    """One row per native compaction: where the agent cut and how big its summary was,
    next to the nearest compaction zett-agent made in ``trace`` (columns: :data:`COLUMNS`).

    Args:
        trace: A replay :class:`~zett_lab.replay.trace.Trace` of the imported conversation (or
            anything with ``conversation``, ``steps`` and ``compactions`` in the trace
            schema); None gives the native side only.
        conversation: The conversation, when no trace is given (default: ``trace.conversation``).
        counter: Token counter for spans and summaries (default: zett-agent's exact estimate,
            :func:`zett_lab.count_tokens`).
        metrics: Columns of ``measure(...).compactions`` to show side by side, as ``native_<m>`` and
            ``zett_<m>`` (both sides measured with :func:`zett_lab.measure.measure`; one the table has
            anyway is not added again); none by default.

    The nearest zett compaction is the applied attempt (or, when none was applied, any
    attempt with a window) whose ``n_recorded`` is closest to the native position.
    """
    if conversation is None:
        if trace is None:
            raise ValueError("pass a trace or a conversation")
        conversation = trace.conversation
    metrics = [m for m in metrics if f"native_{m}" not in COLUMNS]  # (compression_ratio is one of its own)
    count = _counter(counter)
    messages = conversation.messages
    native = native_trace(conversation, counter=count)
    zett = trace.compactions if trace is not None else pd.DataFrame()
    steps = trace.steps if trace is not None else pd.DataFrame()
    candidates = zett[zett["span_end"].notna()] if len(zett) else zett
    if len(candidates) and candidates["applied"].fillna(False).astype(bool).any():
        candidates = candidates[candidates["applied"].fillna(False).astype(bool)]

    native_metrics = _metric_table(measure(native), metrics) if metrics and len(native.compactions) else {}
    zett_metrics = _metric_table(measure(trace), metrics) if metrics and trace is not None and len(zett) else {}

    span_cache: dict[tuple[int, int], int] = {}

    def span_tokens(start: int, end: int) -> int:
        if (start, end) not in span_cache:
            span_cache[(start, end)] = count(_dialogue(messages[start:end]))
        return span_cache[(start, end)]

    rows = []
    for k, (nc, row) in enumerate(
        zip(conversation.native_compactions, native.compactions.to_dict("records"), strict=True)
    ):
        out = _native_columns(conversation, k, nc, row, count)
        position, summary_tokens = out["native_position"], out["native_summary_tokens"]
        nearest = _nearest(candidates, position)
        out.update(_zett_columns(nearest, position, out["native_cut"], summary_tokens, steps, span_tokens))
        for metric in metrics:
            out[f"native_{metric}"] = native_metrics.get(k, {}).get(metric)
            zid = out.get("zett_compaction_id")
            out[f"zett_{metric}"] = zett_metrics.get(zid, {}).get(metric) if zid is not None else None
        rows.append(out)
    columns = list(COLUMNS) + [f"{side}_{m}" for m in metrics for side in ("native", "zett")]
    return _typed_table(rows, columns)


def _native_columns(
    conversation: Conversation, k: int, nc: Any, row: dict[Hashable, Any], count: Counter
) -> dict[str, Any]:
    """The native side of one native compaction's row."""
    messages = conversation.messages
    position, cut, start = int(row["n_recorded"]), int(row["span_end"]), int(row["span_start"])
    summary_tokens = None if pd.isna(row["summary_tokens"]) else int(row["summary_tokens"])
    native_span = int(row["older_tokens"])
    return {
        "conversation_id": conversation.id,
        "native_id": k,
        "native_kind": nc.kind,
        "native_trigger": nc.metadata.get("trigger"),
        "native_position": position,
        "native_cut": cut,
        "native_span_start": start,
        "native_tokens_before": nc.tokens_before,
        "native_estimate_before": count(messages[:position]),
        "native_summary_chars": len(nc.summary or ""),
        "native_summary_tokens": summary_tokens,
        "native_span_tokens": native_span,
        "native_compression_ratio": _ratio(summary_tokens, native_span),
    }


def _zett_columns(
    nearest: dict[Hashable, Any] | None,
    position: int,
    cut: int,
    summary_tokens: int | None,
    steps: pd.DataFrame,
    span_tokens: Callable[[int, int], int],
) -> dict[str, Any]:
    """The zett side of a row: the nearest zett compaction and its offsets from the native one (None without one)."""
    if nearest is None:
        out: dict[str, Any] = {name: None for name in COLUMNS if name.startswith("zett_") or name.endswith("_offset")}
        out["summary_tokens_ratio"] = None
        return out
    z_start, z_cut = int(nearest["span_start"]), int(nearest["span_end"])
    z_summary = None if pd.isna(nearest["summary_tokens"]) else int(nearest["summary_tokens"])
    z_span = span_tokens(z_start, z_cut)
    step = None if pd.isna(nearest["step"]) else int(nearest["step"])
    estimate = None
    if step is not None and len(steps) and "estimate" in steps:
        match = steps[steps["step"] == step]
        estimate = None if not len(match) or pd.isna(match["estimate"].iloc[0]) else int(match["estimate"].iloc[0])
    return {
        "zett_compaction_id": int(nearest["compaction_id"]),
        "zett_step": step,
        "zett_applied": bool(nearest["applied"]) if not pd.isna(nearest["applied"]) else None,
        "zett_position": int(nearest["n_recorded"]),
        "zett_cut": z_cut,
        "zett_span_start": z_start,
        "zett_estimate": estimate,
        "zett_summary_tokens": z_summary,
        "zett_span_tokens": z_span,
        "zett_compression_ratio": _ratio(z_summary, z_span),
        "position_offset": int(nearest["n_recorded"]) - position,
        "cut_offset": z_cut - cut,
        "summary_tokens_ratio": (z_summary / summary_tokens) if z_summary is not None and summary_tokens else None,
    }


def _typed_table(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    """The comparison table with nullable Int64 counts, float ratios and a nullable boolean zett_applied."""
    table = pd.DataFrame(rows, columns=columns)
    for column in _INT_COLUMNS:
        table[column] = pd.array([None if v is None or pd.isna(v) else int(v) for v in table[column]], dtype="Int64")
    for column in ("native_compression_ratio", "zett_compression_ratio", "summary_tokens_ratio"):
        table[column] = pd.to_numeric(table[column], errors="coerce").astype("float64")
    table["zett_applied"] = pd.array(
        [None if v is None or pd.isna(v) else bool(v) for v in table["zett_applied"]], dtype="boolean"
    )
    return table


def _ratio(summary: int | None, span: int | None) -> float | None:
    if summary is None or not span:
        return None
    return 1 - summary / span


def _nearest(candidates: pd.DataFrame, position: int) -> dict[Hashable, Any] | None:
    if not len(candidates):
        return None
    records = candidates.to_dict("records")
    return min(records, key=lambda r: (abs(int(r["n_recorded"]) - position), int(r["compaction_id"])))


def _metric_table(losses: Losses, metrics: Sequence[str]) -> dict[int, dict[str, Any]]:
    table = losses.compactions
    if not len(table):
        return {}
    out: dict[int, dict[str, Any]] = {}
    for row in table.to_dict("records"):
        out[int(row["compaction_id"])] = {m: row.get(m) for m in metrics}
    return out
