"""Column documentation of the offline loss frames and the typing that gives every frame exactly those columns.

The tables are appended to the :class:`~zett_lab.measure.losses.Losses` docstring and rendered in the
reference docs; :func:`frame` builds a DataFrame with exactly the documented columns and dtypes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..load.anchors import ANCHOR_TYPES
from ..records import is_missing
from ..replay.recorder import NOT_SMALLER

COMPACTION_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity string of the trace",
    "max_tokens": "replay setting",
    "keep_recent_tokens": "replay setting",
    "compaction_id": "0-based attempt id (trace.compactions)",
    "step": "model step of the attempt",
    "turn": "user turn of the attempt",
    "trigger": '"auto" or "manual"',
    "status": (
        f'"applied", "{NOT_SMALLER}" (summary discarded by the engine), "failed" (no usable summary), or "no window"'
    ),
    "applied": "the checkpoint replaced the span in the context",
    "span_start": "first original message the summary stands for (S_k = messages[span_start:span_end])",
    "span_end": "first message kept verbatim (T_k = messages[span_end:n_recorded])",
    "n_recorded": "original messages seen so far (F_k = messages[n_recorded:])",
    "span_messages": "len(S_k)",
    "tail_messages": "len(T_k)",
    "future_messages": "len(F_k)",
    "span_tokens": "tok(S_k): the counter over the raw span messages",
    "older_tokens": "tokens of the window the engine summarized (earlier checkpoint included)",
    "summary_tokens": "tok(Σ_k): the checkpoint message as the engine counts it (prefix included); NA on failure",
    "tail_tokens": "tok(T_k)",
    "before_tokens": "dialogue tokens before the compaction (older_tokens + tail_tokens; system prompt excluded)",
    "after_tokens": "dialogue tokens after it, had it been applied (summary_tokens + tail_tokens)",
    "compression_ratio": "CR_k = 1 - tok(Σ_k)/tok(S_k), against the raw span (NaN without a summary)",
    "engine_compression_ratio": "1 - summary_tokens/older_tokens, what the engine's not-smaller check compares",
    "context_reduction": "1 - (tok(Σ_k)+tok(T_k))/tok(before)",
    "span_anchors": "|A(S_k)|: distinct anchors of the span (all types)",
    "retained_anchors": "|A(S_k) ∩ A(Σ_k)|",
    "anchor_retention": "retained_anchors / span_anchors (NaN when the span has none or there is no summary)",
    **{f"retention_{t}": f"anchor retention over {t} anchors only (NaN when the span has none)" for t in ANCHOR_TYPES},
    "needed_anchors": "|N_k|: span anchors the user or the agent uses again in F_k (text, tool-call arguments, "
    "commands; not a tool result) that are not in T_k (nor in the system prompt)",
    "needed_retained": "|N_k ∩ Σ_k|",
    "needed_weight": "Σ rarity over N_k (common names weigh little)",
    "needed_retained_weight": "Σ rarity over N_k ∩ Σ_k",
    "needed_anchor_recall": "NAR_k = needed_retained_weight / needed_weight: rarity-weighted (NaN when N_k is empty)",
    "lost_but_needed": "|N_k \\ Σ_k|: anchors needed later that the context no longer shows (listed in losses.anchors)",
    "constraints": "user constraints in the span",
    "constraints_visible": "constraints visible in Σ_k ∪ T_k",
    "instruction_survival": "constraints_visible / constraints (NaN when the span has none)",
    "refetch_calls": (
        "tool calls in F_k whose arguments mention a path/identifier/URL anchor of S_k that is in neither T_k nor Σ_k"
    ),
    "refetched_anchors": "distinct anchors those calls mention",
    "probes_covered": "gold probes whose message_index lies in the span",
    "probes_present": "of those, answers present (normalized substring) in the context the next step sees",
    "probe_presence": "probes_present / probes_covered (NaN when no probe is covered)",
    "superseded_updates": (
        "|U_k|: items of S_k whose value changed within S_k (zett_lab.measure.updates); NA without a summary"
    ),
    "superseded_latest": "of those, Σ_k carries the latest value",
    "superseded_only": "of those, Σ_k carries only a superseded value (an error: worse than dropping it)",
    "superseded_rate": "superseded_only / superseded_updates (lower is better; NaN when U_k is empty)",
    "latency_s": "summary call wall time (trace)",
    "cache_hit": "the summary came from the persistent cache (trace)",
    "summary_input_tokens": "usage the summary model reported (trace)",
    "summary_output_tokens": "usage the summary model reported (trace)",
    "error_kind": "why the attempt failed (trace), None otherwise",
}

ANCHOR_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity",
    "compaction_id": "the attempt (only attempts that produced a summary have rows)",
    "applied": "the attempt's checkpoint was applied",
    "type": "anchor type (zett_lab.load.anchors.ANCHOR_TYPES)",
    "value": "the anchor as first written in the conversation",
    "normalized": "its comparison form",
    "message_index": "first span message holding it",
    "in_summary": "present in Σ_k",
    "in_tail": "present in T_k or in the system prompt, which every step sends (exact)",
    "in_future": "present anywhere in F_k, tool results included (exact)",
    "next_use_index": "first message of F_k where the user or the agent uses it (NA when none)",
    "rarity": "how rare it is in the conversation, 0..1: log(N/df)/log(N/2) over N dialogue messages, df holding it",
    "needed_later": "used again in F_k (next_use_index) and not in_tail (member of N_k)",
    "lost_but_needed": "needed_later and not in_summary",
    "refetched": "a later tool call's arguments mention it while it was in neither T_k nor Σ_k",
}

#: Column of the counted per-anchor flags: how many rows of the per-anchor table have that row's values.
ANCHOR_ROWS = "anchor_rows"

#: The per-anchor table's flags counted (``compaction_metrics.retention_counts``): what the anchor-retention
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

CONVERSATION_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity",
    "max_tokens": "replay setting",
    "keep_recent_tokens": "replay setting",
    "messages": "messages in the conversation",
    "steps": "model steps replayed",
    "compactions": "compactions applied",
    "attempts": "summary attempts (rows of trace.compactions)",
    "rejected_not_smaller": "attempts discarded because the summary was not smaller",
    "failed": "attempts whose summary failed",
    "steps_over_budget": "steps that sent more than max_tokens (over_budget_after)",
    "steps_no_boundary": "steps over the threshold where the engine found no whole-turn boundary to cut at",
    "steps_only_checkpoints": "steps over the threshold where only earlier checkpoints could be summarized",
    "peak_context_tokens": "max context_tokens_after",
    "primary_input_tokens": "sum of context_tokens_after (what the primary model was sent, all steps)",
    "summary_input_tokens": "summed summary-call input usage (0 when none reported)",
    "summary_output_tokens": "summed summary-call output usage",
    "compression_ratio": "mean CR_k over applied compactions (NaN with none)",
    "context_reduction": "mean context reduction over applied compactions",
    "anchor_retention": "mean anchor retention over applied compactions",
    "needed_anchor_recall": "pooled NAR over applied compactions: Σ needed_retained_weight / Σ needed_weight",
    "instruction_survival": "pooled over applied compactions: Σ constraints_visible / Σ constraints",
    "lost_but_needed": "Σ lost_but_needed over applied compactions",
    "refetch_calls": "Σ refetch_calls over applied compactions",
    "probes": "gold probes of the conversation",
    "probe_presence": (
        "share of (probe, applied compaction covering it) pairs whose answer is in the next step's context"
    ),
    "superseded_updates": "Σ superseded_updates over applied compactions",
    "superseded_only": "Σ superseded_only over applied compactions",
    "superseded_rate": "pooled over applied compactions: Σ superseded_only / Σ superseded_updates (lower is better)",
    "superseded_probe_rate": (
        "share of (update probe, applied compaction covering it) pairs whose next step's context shows only the "
        "superseded answer (lower is better)"
    ),
    "decay_survival_1": "mean share of anchors kept at an applied compaction still in the next applied summary (j=1)",
    "final_survival": "share of anchors kept at the first applied compaction still in the last applied summary",
}

PROBE_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity",
    "compaction_id": "an attempt whose span covers the probe's message",
    "step": "its step",
    "applied": "its checkpoint was applied",
    "probe": "index of the probe in Conversation.probes",
    "type": "probe type (recall, artifact, continuation, decision, update)",
    "question": "probe question",
    "answer": "gold answer",
    "message_index": "message holding the fact",
    "answer_in_source": "the gold answer occurs in that message (when False the offline check cannot succeed verbatim)",
    "in_summary": "answer present in Σ_k",
    "in_tail": "answer present in T_k",
    "in_context": (
        "answer present in the context the next model step sees ([checkpoint] + messages[kept_from:n_recorded])"
    ),
    "superseded_answer": "update probes: the earlier answer (None for other types)",
    "superseded_in_context": "update probes: the superseded answer is in that context (NA for other types)",
}

UPDATE_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity",
    "compaction_id": "an attempt with a summary whose span holds the change",
    "applied": "the attempt's checkpoint was applied",
    "kind": "what changed (zett_lab.measure.updates.UPDATE_KINDS)",
    "key": "the item's identity",
    "name": "the item as written",
    "superseded": "earlier values, as written, joined by ' | '",
    "latest": "the value at the end of the span",
    "superseded_index": "first message holding a superseded value",
    "latest_index": "first message holding the latest value after the change",
    "status": "'latest', 'superseded' (only an earlier value: an error) or 'neither' in the summary",
}

DECAY_COLUMNS: dict[str, str] = {
    "conversation_id": "Conversation.id",
    "summarizer": "summarizer identity",
    "from_compaction": "applied compaction k where the anchors were kept",
    "to_compaction": "later applied compaction k+j",
    "j": "how many applied compactions later",
    "kept": "anchors of S_k present in Σ_k",
    "still_in_summary": "of those, present in Σ_{k+j}",
    "survival": "still_in_summary / kept",
    "still_in_context": "of those, present in Σ_{k+j} ∪ T_{k+j}",
    "context_survival": "still_in_context / kept",
}


def doc_table(title: str, columns: dict[str, str]) -> str:
    lines = [f"    ``{title}``:"]
    lines += [f"        - ``{name}``: {text}" for name, text in columns.items()]
    return "\n".join(lines)


_BOOLEANS: dict[int, set[str]] = {
    id(COMPACTION_COLUMNS): {"applied", "cache_hit"},
    id(ANCHOR_COLUMNS): {
        "applied",
        "in_summary",
        "in_tail",
        "in_future",
        "needed_later",
        "lost_but_needed",
        "refetched",
    },
    id(CONVERSATION_COLUMNS): set(),
    id(PROBE_COLUMNS): {"applied", "answer_in_source", "in_summary", "in_tail", "in_context", "superseded_in_context"},
    id(DECAY_COLUMNS): set(),
    id(UPDATE_COLUMNS): {"applied"},
}
_INT = {
    "max_tokens",
    "keep_recent_tokens",
    "compaction_id",
    "step",
    "turn",
    "span_start",
    "span_end",
    "n_recorded",
    "span_messages",
    "tail_messages",
    "future_messages",
    "span_tokens",
    "older_tokens",
    "summary_tokens",
    "tail_tokens",
    "before_tokens",
    "after_tokens",
    "span_anchors",
    "retained_anchors",
    "needed_anchors",
    "needed_retained",
    "lost_but_needed",
    "constraints",
    "constraints_visible",
    "refetch_calls",
    "refetched_anchors",
    "probes_covered",
    "probes_present",
    "summary_input_tokens",
    "summary_output_tokens",
    "message_index",
    "next_use_index",
    "messages",
    "steps",
    "compactions",
    "attempts",
    "rejected_not_smaller",
    "failed",
    "steps_over_budget",
    "steps_no_boundary",
    "steps_only_checkpoints",
    "peak_context_tokens",
    "primary_input_tokens",
    "probe",
    "probes",
    "from_compaction",
    "to_compaction",
    "j",
    "kept",
    "still_in_summary",
    "still_in_context",
    "superseded_updates",
    "superseded_latest",
    "superseded_only",
    "latest_index",
    "superseded_index",
}


def frame(rows: list[dict[str, Any]] | dict[str, list[Any]], columns: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly ``columns``: nullable Int64 counts, nullable booleans, float64 ratios.

    Every column is typed from the values pandas read (one object array for the whole table: a
    measure makes many small tables, where pandas' per-column operations were most of the time).
    """
    names = list(columns)
    data = pd.DataFrame(rows, columns=names)
    values = data.to_numpy(dtype=object)
    booleans = _BOOLEANS.get(id(columns), set())
    typed: dict[str, Any] = {}
    for n, column in enumerate(names):
        column_values = values[:, n]
        if column in booleans:
            typed[column] = _typed(column_values, "boolean", bool)
        elif column in _INT:
            typed[column] = _typed(column_values, "Int64", int)
        elif column in _FLOATS or _is_ratio(column):
            typed[column] = np.asarray(pd.to_numeric(column_values, errors="coerce"), dtype="float64")
        else:
            column_values = column_values.copy()
            column_values[pd.isna(column_values)] = None
            typed[column] = pd.Series(column_values, index=data.index, dtype=object)  # not inferred as text
    return pd.DataFrame(typed, index=data.index, columns=names)


_FLOATS = {"survival", "context_survival", "latency_s", "rarity", "needed_weight", "needed_retained_weight"}


def _typed(values: np.ndarray, dtype: Literal["boolean", "Int64"], cast: Callable[[Any], Any]) -> Any:
    try:
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError):
        return pd.array([None if is_missing(v) else cast(v) for v in values], dtype=dtype)


def _is_ratio(column: str) -> bool:
    return column.startswith("retention_") or column in {
        "compression_ratio",
        "engine_compression_ratio",
        "context_reduction",
        "anchor_retention",
        "needed_anchor_recall",
        "instruction_survival",
        "probe_presence",
        "decay_survival_1",
        "final_survival",
        "superseded_rate",
        "superseded_probe_rate",
    }


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0 (a ratio over nothing is undefined, not 0)."""
    return numerator / denominator if denominator else math.nan


def int_or_none(value: Any) -> int | None:
    """An int, or None for a missing value (None, NaN, NA)."""
    return None if is_missing(value) else int(value)
