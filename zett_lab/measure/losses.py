"""Offline loss metrics: deterministic, no network, computed from a :class:`~zett_lab.replay.trace.Trace`.

For compaction attempt k (a row of ``trace.compactions``; notation of DESIGN.md §4):

* span ``S_k = messages[span_start:span_end]`` (raw messages; cumulative, so a summary
  of a summary is measured against everything it stands for),
* tail ``T_k = messages[span_end:n_recorded]`` (kept verbatim),
* future ``F_k = messages[n_recorded:]`` (what the recorded conversation did next),
* summary ``Σ_k`` (``summary_text``).

Anchors (:mod:`zett_lab.load.anchors`) of ``S_k`` are looked up in ``Σ_k``
(:class:`~zett_lab.measure.lookup.TextIndex`: exact key, word-bounded loose
substring, fuzzy sentence match for constraints/decisions) and in ``T_k`` / ``F_k``
(exact keys of the raw messages).

Example::

    >>> losses = measure(trace)                       # doctest: +SKIP
    >>> losses.conversation[["compactions", "needed_anchor_recall"]]  # doctest: +SKIP
"""

from __future__ import annotations

import html
import math
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage

from ..load.anchors import (
    ANCHOR_TYPES,
    ARTIFACT_TYPES,
    AnchorKey,
    action_keys,
    loose,
    message_anchors,
    message_keys,
    tool_call_keys,
)
from ..load.conversation import CHECKPOINT_PREFIX
from ..load.text import message_text
from ..records import is_missing
from .lookup import TextIndex, contains_loose
from .probes import check_probes, covers_probe
from .updates import find_updates, observe

# ---------------------------------------------------------------------------------------------
# Column documentation (also appended to the Losses docstring)

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
        '"applied", "not smaller" (summary discarded by the engine), "failed" (no usable summary), or "no window"'
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


def _doc_table(title: str, columns: dict[str, str]) -> str:
    lines = [f"    ``{title}``:"]
    lines += [f"        - ``{name}``: {text}" for name, text in columns.items()]
    return "\n".join(lines)


@dataclass
class Losses:
    """Offline loss metrics of one or more traces: plain DataFrames.

    Frames (columns below): ``compactions`` (one row per compaction attempt),
    ``anchors`` (one row per span anchor per attempt with a summary),
    ``conversation`` (one row per trace), ``probes`` (one row per gold probe per
    attempt whose span covers it), ``decay`` (one row per pair of applied
    compactions k < k+j of a trace), ``updates`` (one row per item whose value changed
    within the span of an attempt with a summary).

    Combine several with :meth:`concat`; ``measure([t1, t2])`` does it for you.
    """

    compactions: pd.DataFrame
    anchors: pd.DataFrame
    conversation: pd.DataFrame
    probes: pd.DataFrame
    decay: pd.DataFrame
    updates: pd.DataFrame = field(default_factory=lambda: _frame([], UPDATE_COLUMNS))
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def concat(cls, items: Iterable[Losses]) -> Losses:
        """One Losses holding the rows of all (e.g. several conversations or settings)."""
        items = list(items)
        if not items:
            return _empty_losses()

        def cat(name: str, columns: dict[str, str]) -> pd.DataFrame:
            frames = [getattr(item, name) for item in items if len(getattr(item, name))]
            if not frames:
                return getattr(items[0], name).iloc[0:0].copy()
            return pd.concat(frames, ignore_index=True)[list(columns)]

        return cls(
            compactions=cat("compactions", COMPACTION_COLUMNS),
            anchors=cat("anchors", ANCHOR_COLUMNS),
            conversation=cat("conversation", CONVERSATION_COLUMNS),
            probes=cat("probes", PROBE_COLUMNS),
            decay=cat("decay", DECAY_COLUMNS),
            updates=cat("updates", UPDATE_COLUMNS),
            settings={"parts": [item.settings for item in items]},
        )

    def lost_but_needed(self) -> pd.DataFrame:
        """The anchors that were needed later and not in the summary (rows of ``anchors``)."""
        if not len(self.anchors):
            return self.anchors
        return self.anchors[self.anchors["lost_but_needed"] & self.anchors["applied"]].reset_index(drop=True)

    def retention_by_type(self) -> pd.DataFrame:
        """Anchor retention per type, pooled over applied compactions (rows: summarizer, columns: type)."""
        anchors = self.anchors[self.anchors["applied"]] if len(self.anchors) else self.anchors
        if not len(anchors):
            return pd.DataFrame(columns=list(ANCHOR_TYPES))
        table = anchors.groupby(["summarizer", "type"])["in_summary"].mean().unstack("type")
        return table.reindex(columns=[t for t in ANCHOR_TYPES if t in table.columns])

    def needed_recall_by_type(self) -> pd.DataFrame:
        """Needed-anchor recall per type, pooled over applied compactions (rows: summarizer, columns: type)."""
        anchors = (
            self.anchors[self.anchors["applied"] & self.anchors["needed_later"]] if len(self.anchors) else self.anchors
        )
        if not len(anchors):
            return pd.DataFrame(columns=list(ANCHOR_TYPES))
        table = anchors.groupby(["summarizer", "type"])["in_summary"].mean().unstack("type")
        return table.reindex(columns=[t for t in ANCHOR_TYPES if t in table.columns])

    def __repr__(self) -> str:
        return (
            f"Losses(conversations={len(self.conversation)}, compaction attempts={len(self.compactions)}, "
            f"anchor rows={len(self.anchors)}, probe rows={len(self.probes)})"
        )

    def _repr_html_(self) -> str:
        conversation = self.conversation.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.3f}")
        columns = [
            "conversation_id", "compaction_id", "step", "status", "span_start", "span_end", "compression_ratio",
            "context_reduction", "anchor_retention", "needed_anchor_recall", "lost_but_needed",
            "instruction_survival", "probe_presence",
        ]
        compactions = (
            self.compactions[columns].to_html(index=False, na_rep="", max_rows=30, float_format=lambda v: f"{v:.3f}")
            if len(self.compactions)
            else "<p>No compaction attempts.</p>"
        )
        lost = self.lost_but_needed()
        lost_html = (
            lost[["conversation_id", "compaction_id", "type", "value", "next_use_index", "refetched"]].to_html(
                index=False, na_rep="", max_rows=20
            )
            if len(lost)
            else "<p>Nothing needed later was lost.</p>"
        )
        return (
            f"<div><h4>{html.escape(repr(self))}</h4><h5>Per conversation</h5>{conversation}"
            f"<h5>Per compaction attempt</h5>{compactions}<h5>Lost but needed later</h5>{lost_html}</div>"
        )


Losses.__doc__ = (Losses.__doc__ or "") + "\n    Columns:\n\n" + "\n\n".join(
    _doc_table(name, columns)
    for name, columns in (
        ("compactions", COMPACTION_COLUMNS),
        ("anchors", ANCHOR_COLUMNS),
        ("conversation", CONVERSATION_COLUMNS),
        ("probes", PROBE_COLUMNS),
        ("decay", DECAY_COLUMNS),
        ("updates", UPDATE_COLUMNS),
    )
)

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
    "max_tokens", "keep_recent_tokens", "compaction_id", "step", "turn", "span_start", "span_end", "n_recorded",
    "span_messages", "tail_messages", "future_messages", "span_tokens", "older_tokens", "summary_tokens",
    "tail_tokens", "before_tokens", "after_tokens", "span_anchors", "retained_anchors", "needed_anchors",
    "needed_retained", "lost_but_needed", "constraints", "constraints_visible", "refetch_calls", "refetched_anchors",
    "probes_covered", "probes_present", "summary_input_tokens", "summary_output_tokens", "message_index",
    "next_use_index", "messages", "steps", "compactions", "attempts", "rejected_not_smaller", "failed",
    "steps_over_budget", "steps_no_boundary", "steps_only_checkpoints", "peak_context_tokens",
    "primary_input_tokens", "probe", "probes", "from_compaction", "to_compaction", "j", "kept",
    "still_in_summary", "still_in_context", "superseded_updates", "superseded_latest", "superseded_only",
    "latest_index", "superseded_index",
}


def _frame(rows: list[dict[str, Any]] | dict[str, list[Any]], columns: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly ``columns``: nullable Int64 counts, nullable booleans, float64 ratios."""
    data = pd.DataFrame(rows, columns=list(columns))
    booleans = _BOOLEANS.get(id(columns), set())
    for column in columns:
        values = data[column]
        if column in booleans:
            data[column] = _typed(values, "boolean", bool)
        elif column in _INT:
            data[column] = _typed(values, "Int64", int)
        elif column in _FLOATS or _is_ratio(column):
            data[column] = pd.to_numeric(values, errors="coerce").astype("float64")
        else:
            data[column] = values.astype("object").where(values.notna(), None)
    return data


_FLOATS = {"survival", "context_survival", "latency_s", "rarity", "needed_weight", "needed_retained_weight"}


def _typed(values: pd.Series, dtype: Literal["boolean", "Int64"], cast: Callable[[Any], Any]) -> Any:
    try:
        return pd.array(values.to_numpy(dtype=object), dtype=dtype)
    except (TypeError, ValueError):
        return pd.array([None if is_missing(v) else cast(v) for v in values], dtype=dtype)


def _is_ratio(column: str) -> bool:
    return column.startswith("retention_") or column in {
        "compression_ratio", "engine_compression_ratio", "context_reduction", "anchor_retention",
        "needed_anchor_recall", "instruction_survival", "probe_presence", "decay_survival_1", "final_survival",
        "superseded_rate", "superseded_probe_rate",
    }


def _empty_losses(settings: dict[str, Any] | None = None) -> Losses:
    return Losses(
        compactions=_frame([], COMPACTION_COLUMNS),
        anchors=_frame([], ANCHOR_COLUMNS),
        conversation=_frame([], CONVERSATION_COLUMNS),
        probes=_frame([], PROBE_COLUMNS),
        decay=_frame([], DECAY_COLUMNS),
        updates=_frame([], UPDATE_COLUMNS),
        settings=settings or {},
    )


# ---------------------------------------------------------------------------------------------
# Measuring


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def _int_or_none(value: Any) -> int | None:
    return None if is_missing(value) else int(value)


def _counter_for(trace: Any, counter: Callable[[Sequence[Any]], int] | None) -> Callable[[Sequence[Any]], int]:
    if counter is not None:
        return counter
    from ..tokens import approx_count_tokens, count_tokens

    name = str((getattr(trace, "settings", None) or {}).get("counter") or "")
    return approx_count_tokens if "Approx" in name or "approx" in name else count_tokens


def _first_in(positions: Sequence[int], start: int, end: int) -> int | None:
    at = bisect_left(positions, start)
    return positions[at] if at < len(positions) and positions[at] < end else None


#: Share of a user message's lines seen in earlier user messages that makes it a re-injected copy.
REPEATED_USER_TEXT = 0.8


def _repeats_user_text(message: Any, seen_lines: set[str]) -> bool:
    """Whether a user message mostly repeats earlier user messages (instructions a harness re-injects);
    records its lines. A repeat is no new use of what it mentions."""
    if not isinstance(message, UserMessage) or isinstance(message, CompactedMessage):
        return False
    lines = {line.strip() for line in message_text(message).splitlines() if line.strip()}
    repeated = bool(lines) and len(lines & seen_lines) >= REPEATED_USER_TEXT * len(lines)
    seen_lines |= lines
    return repeated


class _ConversationIndex:
    """Per-conversation lookups: anchors per message, occurrences and uses per key, tool calls, rarity."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self.messages = messages
        self.first_value: dict[AnchorKey, str] = {}
        self.occurrences: dict[AnchorKey, list[int]] = {}
        self.uses: dict[AnchorKey, list[int]] = {}
        self.keys_by_message: list[tuple[AnchorKey, ...]] = []
        self.tool_calls: list[tuple[int, frozenset[AnchorKey]]] = []
        self.system_keys: set[AnchorKey] = set()
        user_lines: set[str] = set()
        for index, message in enumerate(messages):
            if isinstance(message, SystemMessage):
                # sent with every step: its anchors never need a summary
                self.system_keys.update(message_keys(message))
                self.keys_by_message.append(())
                continue
            keys = []
            for anchor in message_anchors(message):
                key = anchor.key
                keys.append(key)
                self.first_value.setdefault(key, anchor.value)
                self.occurrences.setdefault(key, []).append(index)
            self.keys_by_message.append(tuple(keys))
            if not _repeats_user_text(message, user_lines):
                for key in action_keys(message):
                    self.uses.setdefault(key, []).append(index)
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls or ():
                    call_keys = frozenset(k for k in tool_call_keys(call) if k[0] in ARTIFACT_TYPES)
                    if call_keys:
                        self.tool_calls.append((index, call_keys))
        self.dialogue_messages = sum(1 for m in messages if not isinstance(m, SystemMessage))
        self._texts: dict[int, str] = {}
        self._loose: dict[int, str] = {}

    def rarity(self, key: AnchorKey) -> float:
        """How rare the item is in the conversation, 0..1: 1 in at most two messages, 0 in every message
        (``log(N/df) / log(N/2)`` over N dialogue messages), so common names weigh little in NAR."""
        n = self.dialogue_messages
        df = len(self.occurrences.get(key, ()))
        if n <= 2 or df <= 2:
            return 1.0
        return max(0.0, min(1.0, math.log(n / df) / math.log(n / 2)))

    def span_keys(self, start: int, end: int) -> dict[AnchorKey, int]:
        """Distinct keys of messages[start:end] with the first message index holding each."""
        found: dict[AnchorKey, int] = {}
        for index in range(start, end):
            for key in self.keys_by_message[index]:
                found.setdefault(key, index)
        return found

    def occurs(self, key: AnchorKey, start: int, end: int) -> int | None:
        """First index in [start, end) holding the key, or None."""
        return _first_in(self.occurrences.get(key, ()), start, end)

    def used(self, key: AnchorKey, start: int, end: int) -> int | None:
        """First index in [start, end) where the user or the agent uses the key (not a tool result), or None."""
        return _first_in(self.uses.get(key, ()), start, end)

    def text(self, index: int) -> str:
        text = self._texts.get(index)
        if text is None:
            text = message_text(self.messages[index])
            self._texts[index] = text
        return text

    def loose(self, index: int) -> str:
        value = self._loose.get(index)
        if value is None:
            value = self._loose[index] = loose(self.text(index))
        return value

    def joined(self, start: int, end: int) -> str:
        return "\n".join(self.text(i) for i in range(start, end))


#: Indexes of the last few message lists: a sweep or a comparison measures one conversation many times.
_INDEXES: dict[int, tuple[Sequence[Any], int, _ConversationIndex]] = {}


def _index_of(messages: Sequence[Any]) -> _ConversationIndex:
    held = _INDEXES.get(id(messages))
    if held is not None and held[0] is messages and held[1] == len(messages):
        return held[2]
    if len(_INDEXES) >= 4:
        _INDEXES.clear()
    index = _ConversationIndex(messages)
    _INDEXES[id(messages)] = (messages, len(messages), index)
    return index


def measure(trace: Any | Iterable[Any], *, counter: Callable[[Sequence[Any]], int] | None = None) -> Losses:
    """Offline loss metrics of a trace (or of several traces, concatenated).

    ``counter`` is the token counter for span/tail sizes; by default the counter
    the replay used (``trace.settings["counter"]``: the exact o200k counter, or the
    approximate one when the replay used it).

    Probes attached to the conversation are checked first: one pointing at a
    message that does not exist raises :class:`~zett_lab.errors.InputError`
    naming the probe. A trace with no compaction attempts gives empty per-compaction
    frames and a conversation row with 0 compactions and NaN ratios.
    """
    if not hasattr(trace, "compactions") and not hasattr(trace, "steps"):
        return Losses.concat(measure(item, counter=counter) for item in trace)
    return _measure_one(trace, _counter_for(trace, counter))


def _measure_one(trace: Any, counter: Callable[[Sequence[Any]], int]) -> Losses:
    conversation = trace.conversation
    messages = conversation.messages
    probes = check_probes(conversation)
    steps: pd.DataFrame = trace.steps
    compactions: pd.DataFrame = trace.compactions
    settings = dict(getattr(trace, "settings", None) or {})
    summarizer = settings.get("summarizer")
    if summarizer is None and len(compactions) and "summarizer" in compactions:
        summarizer = compactions["summarizer"].iloc[0]
    max_tokens = settings.get("max_tokens", steps["max_tokens"].iloc[0] if len(steps) else None)
    keep_recent = settings.get("keep_recent_tokens", steps["keep_recent_tokens"].iloc[0] if len(steps) else None)
    base = {
        "conversation_id": conversation.id,
        "summarizer": summarizer,
    }
    index = _index_of(messages)
    n_messages = len(messages)

    step_rows = {int(row["step"]): row for row in steps.to_dict("records")} if len(steps) else {}
    summaries: dict[int, str | None] = {
        int(row["compaction_id"]): row.get("summary_text") for row in compactions.to_dict("records")
    }
    text_indexes: dict[int, TextIndex] = {}

    def summary_index(compaction_id: int) -> TextIndex | None:
        text = summaries.get(compaction_id)
        if text is None or is_missing(text):
            return None
        if compaction_id not in text_indexes:
            text_indexes[compaction_id] = TextIndex(text)
        return text_indexes[compaction_id]

    compaction_rows: list[dict[str, Any]] = []
    anchor_columns: dict[str, list[Any]] = {name: [] for name in ANCHOR_COLUMNS}
    probe_rows: list[dict[str, Any]] = []
    update_rows: list[dict[str, Any]] = []
    observations = observe(messages) if len(compactions) else []
    # per applied compaction: (compaction_id, span keys kept, in_summary map, tail range)
    applied_chain: list[tuple[int, dict[AnchorKey, bool], tuple[int, int]]] = []
    previous_checkpoint: tuple[int, int] | None = None

    ordered = compactions.sort_values("compaction_id", kind="stable") if len(compactions) else compactions
    for row in ordered.to_dict("records"):
        cid = int(row["compaction_id"])
        applied = bool(row.get("applied")) if not is_missing(row.get("applied")) else False
        span_start, span_end = _int_or_none(row.get("span_start")), _int_or_none(row.get("span_end"))
        n_recorded = _int_or_none(row.get("n_recorded"))
        summary_text = row.get("summary_text")
        has_summary = summary_text is not None and not is_missing(summary_text)
        if applied:
            status = "applied"
        elif span_start is None or span_end is None:
            status = "no window"
        elif not has_summary or not is_missing(row.get("error")) or row.get("skip_reason") == "summary failed":
            status = "failed"
        else:
            status = "not smaller"
        out: dict[str, Any] = {
            **base,
            "max_tokens": max_tokens,
            "keep_recent_tokens": keep_recent,
            "compaction_id": cid,
            "step": row.get("step"),
            "turn": row.get("turn"),
            "trigger": row.get("trigger"),
            "status": status,
            "applied": applied,
            "span_start": span_start,
            "span_end": span_end,
            "n_recorded": n_recorded,
            "older_tokens": row.get("older_tokens"),
            "summary_tokens": row.get("summary_tokens"),
            "latency_s": row.get("latency_s"),
            "cache_hit": row.get("cache_hit"),
            "summary_input_tokens": row.get("summary_input_tokens"),
            "summary_output_tokens": row.get("summary_output_tokens"),
            "error_kind": row.get("error_kind"),
        }
        if span_start is None or span_end is None or n_recorded is None:
            compaction_rows.append(out)
            continue
        span_start = max(0, min(span_start, n_messages))
        span_end = max(span_start, min(span_end, n_messages))
        n_recorded = max(span_end, min(n_recorded, n_messages))
        span_tokens = counter(messages[span_start:span_end])
        tail_tokens = _int_or_none(row.get("recent_tokens"))
        if tail_tokens is None:
            tail_tokens = counter(messages[span_end:n_recorded])
        older_tokens = _int_or_none(row.get("older_tokens"))
        summary_tokens = _int_or_none(row.get("summary_tokens"))
        before = (older_tokens if older_tokens is not None else span_tokens) + tail_tokens
        out.update(
            span_messages=span_end - span_start,
            tail_messages=n_recorded - span_end,
            future_messages=n_messages - n_recorded,
            span_tokens=span_tokens,
            tail_tokens=tail_tokens,
            before_tokens=before,
            after_tokens=summary_tokens + tail_tokens if summary_tokens is not None else None,
            compression_ratio=1 - summary_tokens / span_tokens
            if summary_tokens is not None and span_tokens
            else math.nan,
            engine_compression_ratio=(
                1 - summary_tokens / older_tokens if summary_tokens is not None and older_tokens else math.nan
            ),
            context_reduction=1 - (summary_tokens + tail_tokens) / before
            if summary_tokens is not None and before
            else math.nan,
        )

        text_index = summary_index(cid)
        span = index.span_keys(span_start, span_end)
        in_summary_map: dict[AnchorKey, bool] = {}
        if text_index is not None:
            per_type_total = dict.fromkeys(ANCHOR_TYPES, 0)
            per_type_kept = dict.fromkeys(ANCHOR_TYPES, 0)
            needed = needed_kept = constraints = constraints_visible = 0
            needed_weight = needed_kept_weight = 0.0
            lost_artifacts: set[AnchorKey] = set()
            rows_start = len(anchor_columns["type"])
            for key, first_index in span.items():
                type_, normalized = key
                in_summary = text_index.contains(key)
                in_summary_map[key] = in_summary
                in_tail = key in index.system_keys or index.occurs(key, span_end, n_recorded) is not None
                in_future = index.occurs(key, n_recorded, n_messages) is not None
                next_use = index.used(key, n_recorded, n_messages)
                needed_later = next_use is not None and not in_tail
                rarity = index.rarity(key)
                per_type_total[type_] += 1
                per_type_kept[type_] += in_summary
                if needed_later:
                    needed += 1
                    needed_kept += in_summary
                    needed_weight += rarity
                    needed_kept_weight += rarity * in_summary
                if type_ == "constraint":
                    constraints += 1
                    constraints_visible += in_summary or in_tail
                if type_ in ARTIFACT_TYPES and not in_tail and not in_summary:
                    lost_artifacts.add(key)
                anchor_columns["type"].append(type_)
                anchor_columns["value"].append(index.first_value.get(key, normalized))
                anchor_columns["normalized"].append(normalized)
                anchor_columns["message_index"].append(first_index)
                anchor_columns["in_summary"].append(in_summary)
                anchor_columns["in_tail"].append(in_tail)
                anchor_columns["in_future"].append(in_future)
                anchor_columns["next_use_index"].append(next_use)
                anchor_columns["rarity"].append(rarity)
                anchor_columns["needed_later"].append(needed_later)
                anchor_columns["lost_but_needed"].append(needed_later and not in_summary)
            refetch_calls = 0
            refetched: set[AnchorKey] = set()
            if lost_artifacts:
                for call_index, call_keys in index.tool_calls:
                    if call_index < n_recorded:
                        continue
                    hit = call_keys & lost_artifacts
                    if hit:
                        refetch_calls += 1
                        refetched |= hit
            n_rows = len(anchor_columns["type"]) - rows_start
            anchor_columns["refetched"].extend(
                (t, n) in refetched
                for t, n in zip(
                    anchor_columns["type"][rows_start:], anchor_columns["normalized"][rows_start:], strict=True
                )
            )
            for name, value in (
                ("conversation_id", conversation.id),
                ("summarizer", summarizer),
                ("compaction_id", cid),
                ("applied", applied),
            ):
                anchor_columns[name].extend([value] * n_rows)
            total = len(span)
            kept = sum(per_type_kept.values())
            out.update(
                span_anchors=total,
                retained_anchors=kept,
                anchor_retention=_ratio(kept, total),
                needed_anchors=needed,
                needed_retained=needed_kept,
                needed_weight=needed_weight,
                needed_retained_weight=needed_kept_weight,
                needed_anchor_recall=_ratio(needed_kept_weight, needed_weight) if needed else math.nan,
                lost_but_needed=needed - needed_kept,
                constraints=constraints,
                constraints_visible=constraints_visible,
                instruction_survival=_ratio(constraints_visible, constraints),
                refetch_calls=refetch_calls,
                refetched_anchors=len(refetched),
                **{f"retention_{t}": _ratio(per_type_kept[t], per_type_total[t]) for t in ANCHOR_TYPES},
            )
            where = {**base, "compaction_id": cid, "applied": applied}
            out.update(_superseded(observations, span_start, span_end, str(summary_text), where, update_rows))
        else:
            out.update(span_anchors=len(span))

        # probes covered by the span (an update probe: both of its values)
        covered = [(n, p) for n, p in enumerate(probes) if covers_probe(p, span_start, span_end)]
        if covered:
            step = _int_or_none(row.get("step"))
            step_row = step_rows.get(step) if step is not None else None
            context = loose(
                _next_context_text(
                    step_row, index, summaries, previous_checkpoint, (cid, applied, span_end, n_recorded)
                )
            )
            tail = loose(index.joined(span_end, n_recorded))
            summary_loose = text_index.loose_text if text_index is not None else ""
            present = 0
            for n, probe in covered:
                in_context = contains_loose(context, probe.answer)
                present += in_context
                superseded = probe.superseded_answer if probe.type == "update" else None
                probe_rows.append(
                    {
                        **base,
                        "compaction_id": cid,
                        "step": row.get("step"),
                        "applied": applied,
                        "probe": n,
                        "type": probe.type,
                        "question": probe.question,
                        "answer": probe.answer,
                        "message_index": probe.message_index,
                        "answer_in_source": contains_loose(index.loose(probe.message_index), probe.answer),
                        "in_summary": contains_loose(summary_loose, probe.answer) if summary_loose else False,
                        "in_tail": contains_loose(tail, probe.answer),
                        "in_context": in_context,
                        "superseded_answer": superseded,
                        "superseded_in_context": contains_loose(context, superseded) if superseded else None,
                    }
                )
            out.update(
                probes_covered=len(covered), probes_present=present, probe_presence=_ratio(present, len(covered))
            )
        else:
            out.update(probes_covered=0, probes_present=0, probe_presence=math.nan)
        compaction_rows.append(out)
        if applied and text_index is not None:
            applied_chain.append((cid, in_summary_map, (span_end, n_recorded)))
        if applied:
            previous_checkpoint = (cid, span_end)

    decay_rows = _decay(applied_chain, index, summary_index, base)
    compactions_frame = _frame(compaction_rows, COMPACTION_COLUMNS)
    probes_frame = _frame(probe_rows, PROBE_COLUMNS)
    decay_frame = _frame(decay_rows, DECAY_COLUMNS)
    updates_frame = _frame(update_rows, UPDATE_COLUMNS)
    conversation_row = _conversation_row(
        base, max_tokens, keep_recent, n_messages, steps, compactions_frame, probes_frame, decay_frame, len(probes)
    )
    return Losses(
        compactions=compactions_frame,
        anchors=_frame(anchor_columns, ANCHOR_COLUMNS),
        conversation=_frame([conversation_row], CONVERSATION_COLUMNS),
        probes=probes_frame,
        decay=decay_frame,
        updates=updates_frame,
        settings={**settings, "conversation_id": conversation.id},
    )


def _superseded(
    observations: Sequence[Sequence[Any]],
    span_start: int,
    span_end: int,
    summary: str,
    base: dict[str, Any],
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Superseded-value columns of one attempt; appends one row per updated item to ``rows``."""
    counts = {"latest": 0, "superseded": 0, "neither": 0}
    found = find_updates(observations, span_start, span_end)
    for update in found:
        status = update.status_in(summary)
        counts[status] += 1
        rows.append({
            **base,
            "kind": update.kind,
            "key": update.key,
            "name": update.name,
            "superseded": " | ".join(update.superseded),
            "latest": update.latest,
            "superseded_index": update.superseded_index,
            "latest_index": update.latest_index,
            "status": status,
        })
    return {
        "superseded_updates": len(found),
        "superseded_latest": counts["latest"],
        "superseded_only": counts["superseded"],
        "superseded_rate": _ratio(counts["superseded"], len(found)),
    }


def _next_context_text(
    step_row: dict[Hashable, Any] | None,
    index: _ConversationIndex,
    summaries: dict[int, str | None],
    previous_checkpoint: tuple[int, int] | None,
    compaction: tuple[int, bool, int, int],
) -> str:
    """Text of the context the next model step sees: [checkpoint] + messages[kept_from:n_recorded].

    Taken from the step row (``checkpoint_id``, ``kept_from``) when the trace has
    one; otherwise rebuilt from the compaction table: this attempt's summary and
    tail when it was applied, else the last applied checkpoint before it.
    """
    cid, applied, span_end, n_recorded = compaction
    if step_row is not None and not is_missing(step_row.get("kept_from")):
        checkpoint = _int_or_none(step_row.get("checkpoint_id"))
        kept_from = int(step_row["kept_from"])
        end = _int_or_none(step_row.get("n_recorded")) or n_recorded
    elif applied:
        checkpoint, kept_from, end = cid, span_end, n_recorded
    elif previous_checkpoint is not None:
        checkpoint, kept_from = previous_checkpoint
        end = n_recorded
    else:
        checkpoint, kept_from, end = None, 0, n_recorded
    pieces = []
    if checkpoint is not None and summaries.get(checkpoint):
        pieces.append(CHECKPOINT_PREFIX + str(summaries[checkpoint]))
    pieces.append(index.joined(max(0, kept_from), end))
    return "\n".join(pieces)


def _decay(
    chain: list[tuple[int, dict[AnchorKey, bool], tuple[int, int]]],
    index: _ConversationIndex,
    summary_index: Callable[[int], TextIndex | None],
    base: dict[str, Any],
) -> list[dict[str, Any]]:
    rows = []
    for i, (origin, origin_map, _) in enumerate(chain):
        kept = [key for key, present in origin_map.items() if present]
        for j, (later, later_map, (tail_start, tail_end)) in enumerate(chain[i + 1 :], 1):
            later_index = summary_index(later)
            in_summary = in_context = 0
            for key in kept:
                present = later_map.get(key)
                if present is None:
                    present = later_index.contains(key) if later_index is not None else False
                in_summary += present
                in_context += present or index.occurs(key, tail_start, tail_end) is not None
            rows.append(
                {
                    **base,
                    "from_compaction": origin,
                    "to_compaction": later,
                    "j": j,
                    "kept": len(kept),
                    "still_in_summary": in_summary,
                    "survival": _ratio(in_summary, len(kept)),
                    "still_in_context": in_context,
                    "context_survival": _ratio(in_context, len(kept)),
                }
            )
    return rows


def _superseded_probe_rate(probes: pd.DataFrame) -> float:
    """Share of update-probe rows whose context shows the superseded answer and not the current one."""
    updates = probes[probes["type"] == "update"] if len(probes) else probes
    if not len(updates):
        return math.nan
    stale = updates["superseded_in_context"].fillna(False).astype(bool)
    wrong = stale & ~updates["in_context"].fillna(False).astype(bool)
    return float(wrong.mean())


def _pooled_float(rows: pd.DataFrame, numerator: str, denominator: str) -> float:
    """Σ numerator / Σ denominator over rows (NaN with no rows or a zero denominator)."""
    if not len(rows):
        return math.nan
    total = float(pd.to_numeric(rows[denominator], errors="coerce").fillna(0).sum())
    return float(pd.to_numeric(rows[numerator], errors="coerce").fillna(0).sum()) / total if total else math.nan


def _sum_int(series: pd.Series) -> int:
    return int(pd.to_numeric(series, errors="coerce").fillna(0).sum()) if len(series) else 0


def _conversation_row(
    base: dict[str, Any],
    max_tokens: Any,
    keep_recent: Any,
    n_messages: int,
    steps: pd.DataFrame,
    compactions: pd.DataFrame,
    probes: pd.DataFrame,
    decay: pd.DataFrame,
    n_probes: int,
) -> dict[str, Any]:
    applied = compactions[compactions["status"] == "applied"] if len(compactions) else compactions
    reasons = steps["skip_reason"] if len(steps) and "skip_reason" in steps else pd.Series(dtype=object)

    def mean(column: str) -> float:
        if not len(applied):
            return math.nan
        values = pd.to_numeric(applied[column], errors="coerce").dropna()
        return float(values.mean()) if len(values) else math.nan

    def pooled(numerator: str, denominator: str) -> float:
        if not len(applied):
            return math.nan
        return _ratio(_sum_int(applied[numerator]), _sum_int(applied[denominator]))

    applied_probes = probes[probes["applied"].fillna(False).astype(bool)] if len(probes) else probes
    first_decay = decay[decay["j"] == 1] if len(decay) else decay
    final_survival = math.nan
    if len(decay):
        first = decay["from_compaction"].min()
        last = decay["to_compaction"].max()
        pick = decay[(decay["from_compaction"] == first) & (decay["to_compaction"] == last)]
        if len(pick):
            final_survival = float(pick["survival"].iloc[0])
    over_budget = steps["over_budget_after"] if len(steps) and "over_budget_after" in steps else pd.Series(dtype=bool)
    return {
        **base,
        "max_tokens": max_tokens,
        "keep_recent_tokens": keep_recent,
        "messages": n_messages,
        "steps": len(steps),
        "compactions": len(applied),
        "attempts": int((compactions["status"] != "no window").sum()) if len(compactions) else 0,
        "rejected_not_smaller": int((compactions["status"] == "not smaller").sum()) if len(compactions) else 0,
        "failed": int((compactions["status"] == "failed").sum()) if len(compactions) else 0,
        "steps_over_budget": int(over_budget.fillna(False).astype(bool).sum()),
        "steps_no_boundary": int((reasons == "no whole-turn boundary").sum()),
        "steps_only_checkpoints": int((reasons == "only earlier checkpoints").sum()),
        "peak_context_tokens": int(steps["context_tokens_after"].max()) if len(steps) else 0,
        "primary_input_tokens": _sum_int(steps["context_tokens_after"]) if len(steps) else 0,
        "summary_input_tokens": _sum_int(compactions["summary_input_tokens"]) if len(compactions) else 0,
        "summary_output_tokens": _sum_int(compactions["summary_output_tokens"]) if len(compactions) else 0,
        "compression_ratio": mean("compression_ratio"),
        "context_reduction": mean("context_reduction"),
        "anchor_retention": mean("anchor_retention"),
        "needed_anchor_recall": _pooled_float(applied, "needed_retained_weight", "needed_weight"),
        "instruction_survival": pooled("constraints_visible", "constraints"),
        "lost_but_needed": _sum_int(applied["lost_but_needed"]) if len(applied) else 0,
        "refetch_calls": _sum_int(applied["refetch_calls"]) if len(applied) else 0,
        "probes": n_probes,
        "probe_presence": float(applied_probes["in_context"].astype(float).mean()) if len(applied_probes) else math.nan,
        "superseded_updates": _sum_int(applied["superseded_updates"]) if len(applied) else 0,
        "superseded_only": _sum_int(applied["superseded_only"]) if len(applied) else 0,
        "superseded_rate": pooled("superseded_only", "superseded_updates"),
        "superseded_probe_rate": _superseded_probe_rate(applied_probes),
        "decay_survival_1": float(first_decay["survival"].mean()) if len(first_decay) else math.nan,
        "final_survival": final_survival,
    }


__all__ = [
    "ANCHOR_COLUMNS",
    "COMPACTION_COLUMNS",
    "CONVERSATION_COLUMNS",
    "DECAY_COLUMNS",
    "PROBE_COLUMNS",
    "Losses",
    "measure",
]
