"""Metrics of one compaction attempt: status and sizes, anchor retention with needed-later and
lost-but-needed anchors, refetches, gold probes in the next step's context, and superseded values.

Each function fills its columns of the attempt's row and appends its detail rows (anchors, probes,
updates) to the trace's :class:`AttemptRows`; :func:`measure_attempt` runs them in order.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ..load.anchors import ANCHOR_TYPES, loose
from ..load.conversation import CHECKPOINT_PREFIX, Probe
from ..records import is_missing
from ..replay.recorder import FAILURE_REASONS, NOT_SMALLER
from .columns import ANCHOR_COLUMNS, ANCHOR_COUNT_COLUMNS, ANCHOR_ROWS, RETENTION_COLUMNS, frame, int_or_none, ratio
from .lookup import TextIndex, contains_loose
from .message_index import ConversationIndex, SpanAnchors
from .probes import covers_probe
from .updates import GrowingSpanUpdates


@dataclass
class TraceView:
    """What every compaction attempt of one trace is measured against."""

    messages: Sequence[Any]
    probes: list[Probe]
    index: ConversationIndex
    base: dict[str, Any]
    max_tokens: Any
    keep_recent: Any
    counter: Callable[[Sequence[Any]], int]
    step_rows: dict[int, dict[Hashable, Any]]
    summaries: dict[int, str | None]
    #: The updates of the trace's spans, folded on from attempt to attempt.
    updates: GrowingSpanUpdates
    _text_indexes: dict[int, TextIndex] = field(default_factory=dict)

    def summary_index(self, compaction_id: int) -> TextIndex | None:
        """Lookup index of an attempt's summary (built once), None when it has no summary."""
        text = self.summaries.get(compaction_id)
        if text is None or is_missing(text):
            return None
        if compaction_id not in self._text_indexes:
            self._text_indexes[compaction_id] = TextIndex(text)
        return self._text_indexes[compaction_id]


@dataclass
class AttemptRows:
    """Rows collected over the attempts of one trace (anchors as arrays per attempt: there are millions)."""

    compactions: list[dict[str, Any]] = field(default_factory=list)
    #: Where each attempt's per-anchor rows go (None: nowhere, the ``anchors`` table stays empty).
    anchors: AnchorRows | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)


class Window(NamedTuple):
    """S_k = messages[span_start:span_end], T_k = messages[span_end:n_recorded], F_k = the rest."""

    span_start: int
    span_end: int
    n_recorded: int


class Attempt(NamedTuple):
    """What later attempts and the decay table need from a measured attempt."""

    compaction_id: int
    applied: bool
    window: Window | None
    #: The span's anchors (ids into the index's ``arrays.keys``) and which of them Σ_k holds; None without a summary.
    kept: SummaryHolds | None


class SummaryHolds(NamedTuple):
    """Which of a span's anchors a summary holds: ``span_ids`` (key ids) and ``in_summary`` (one flag each)."""

    span_ids: np.ndarray
    in_summary: np.ndarray


def measure_attempt(
    view: TraceView, row: dict[Hashable, Any], previous_checkpoint: tuple[int, int] | None, rows: AttemptRows
) -> Attempt:
    """Measure one row of ``trace.compactions``; appends its compaction row and detail rows to ``rows``.

    ``previous_checkpoint`` is (compaction_id, span_end) of the last applied attempt before it.
    """
    cid = int(row["compaction_id"])
    applied = bool(row.get("applied")) if not is_missing(row.get("applied")) else False
    out = _attempt_columns(view, row, cid, applied)
    window = _window(row, len(view.messages))
    if window is None:
        rows.compactions.append(out)
        return Attempt(cid, applied, None, None)
    out.update(_size_columns(view, row, window))
    text_index = view.summary_index(cid)
    kept = None
    if text_index is not None:
        where = {**view.base, "compaction_id": cid, "applied": applied}
        anchor_columns, kept = _anchor_columns(view, window, text_index, where, rows.anchors)
        out.update(anchor_columns)
        out.update(
            _superseded(
                view.updates, window.span_start, window.span_end, str(row.get("summary_text")), where, rows.updates
            )
        )
    else:
        out.update(span_anchors=len(view.index.span_anchors(window.span_start, window.span_end, window.n_recorded).ids))
    out.update(_probe_columns(view, row, cid, applied, window, text_index, previous_checkpoint, rows.probes))
    rows.compactions.append(out)
    return Attempt(cid, applied, window, kept)


def _status(row: dict[Hashable, Any], applied: bool) -> str:
    """applied, no window, failed, or not smaller (a summary the engine discarded)."""
    summary_text = row.get("summary_text")
    has_summary = summary_text is not None and not is_missing(summary_text)
    if applied:
        return "applied"
    if int_or_none(row.get("span_start")) is None or int_or_none(row.get("span_end")) is None:
        return "no window"
    if not has_summary or not is_missing(row.get("error")) or row.get("skip_reason") in FAILURE_REASONS:
        return "failed"
    return NOT_SMALLER


def _attempt_columns(view: TraceView, row: dict[Hashable, Any], cid: int, applied: bool) -> dict[str, Any]:
    """The columns every attempt has, as the trace recorded them."""
    return {
        **view.base,
        "max_tokens": view.max_tokens,
        "keep_recent_tokens": view.keep_recent,
        "compaction_id": cid,
        "step": row.get("step"),
        "turn": row.get("turn"),
        "trigger": row.get("trigger"),
        "status": _status(row, applied),
        "applied": applied,
        "span_start": int_or_none(row.get("span_start")),
        "span_end": int_or_none(row.get("span_end")),
        "n_recorded": int_or_none(row.get("n_recorded")),
        "older_tokens": row.get("older_tokens"),
        "summary_tokens": row.get("summary_tokens"),
        "latency_s": row.get("latency_s"),
        "cache_hit": row.get("cache_hit"),
        "summary_input_tokens": row.get("summary_input_tokens"),
        "summary_output_tokens": row.get("summary_output_tokens"),
        "error_kind": row.get("error_kind"),
    }


def _window(row: dict[Hashable, Any], n_messages: int) -> Window | None:
    """The attempt's span, tail and future bounds clamped to the conversation, None without a window."""
    span_start, span_end = int_or_none(row.get("span_start")), int_or_none(row.get("span_end"))
    n_recorded = int_or_none(row.get("n_recorded"))
    if span_start is None or span_end is None or n_recorded is None:
        return None
    span_start = max(0, min(span_start, n_messages))
    span_end = max(span_start, min(span_end, n_messages))
    return Window(span_start, span_end, max(span_end, min(n_recorded, n_messages)))


def _size_columns(view: TraceView, row: dict[Hashable, Any], window: Window) -> dict[str, Any]:
    """Message counts, token sizes and compression ratios of the attempt."""
    span_start, span_end, n_recorded = window
    messages = view.messages
    span_tokens = view.counter(messages[span_start:span_end])
    tail_tokens = int_or_none(row.get("recent_tokens"))
    if tail_tokens is None:
        tail_tokens = view.counter(messages[span_end:n_recorded])
    older_tokens = int_or_none(row.get("older_tokens"))
    summary_tokens = int_or_none(row.get("summary_tokens"))
    before = (older_tokens if older_tokens is not None else span_tokens) + tail_tokens
    return {
        "span_messages": span_end - span_start,
        "tail_messages": n_recorded - span_end,
        "future_messages": len(messages) - n_recorded,
        "span_tokens": span_tokens,
        "tail_tokens": tail_tokens,
        "before_tokens": before,
        "after_tokens": summary_tokens + tail_tokens if summary_tokens is not None else None,
        "compression_ratio": (
            1 - summary_tokens / span_tokens if summary_tokens is not None and span_tokens else math.nan
        ),
        "engine_compression_ratio": (
            1 - summary_tokens / older_tokens if summary_tokens is not None and older_tokens else math.nan
        ),
        "context_reduction": (
            1 - (summary_tokens + tail_tokens) / before if summary_tokens is not None and before else math.nan
        ),
    }


def _in_summary(index: ConversationIndex, span: SpanAnchors, text_index: TextIndex) -> np.ndarray:
    """Per span anchor, whether Σ_k holds it: :meth:`TextIndex.contains` for all of them at once.

    A key the summary's own anchors have, or a needle found in the one scan of the summary;
    sentence types (constraints, decisions) are matched one by one, as ``contains`` does.
    """
    arrays, ids = index.arrays, span.ids
    present = np.zeros(len(arrays.keys), dtype=bool)
    id_of = index.key_ids
    present[[id_of[key] for key in text_index.keys if key in id_of]] = True
    found = np.zeros(len(arrays.needles) + 1, dtype=bool)  # the last slot answers needle_id -1
    needle_index = index.needle_ids
    found[[needle_index[n] for n in text_index.found_needles(index.needles)]] = True
    result = present[ids] | found[arrays.needle_id[ids]]
    for position in np.flatnonzero(arrays.sentence[ids]):
        result[position] = text_index.contains(arrays.keys[ids[position]])
    return result


def _sequential_sum(values: np.ndarray) -> float:
    """Left-to-right float sum (the order the per-anchor loop added them in, so the same float)."""
    return functools.reduce(operator.add, values.tolist(), 0.0)


def _refetches(index: ConversationIndex, lost: np.ndarray, n_recorded: int) -> tuple[int, np.ndarray]:
    """Tool calls of F_k mentioning an artifact anchor of S_k that is in neither T_k nor Σ_k, and those anchors' ids.

    ``lost`` holds the ids of those anchors. The calls are the (call, key) pairs of
    :class:`~zett_lab.measure.message_index.KeyArrays` from message ``n_recorded`` on.
    """
    arrays = index.arrays
    is_lost = np.zeros(len(arrays.keys), dtype=bool)
    is_lost[lost] = True
    later = slice(int(np.searchsorted(arrays.call_message, n_recorded)), None)
    hit = is_lost[arrays.call_key[later]]
    return len(np.unique(arrays.call_number[later][hit])), np.unique(arrays.call_key[later][hit])


def _anchor_columns(
    view: TraceView, window: Window, text_index: TextIndex, where: dict[str, Any], anchor_rows: AnchorRows | None
) -> tuple[dict[str, Any], SummaryHolds]:
    """Retention, needed-later recall, instruction survival and refetch columns of an attempt with a summary;
    appends one anchor row per span anchor. Also returns which span anchors Σ_k holds.

    Spans are cumulative, so a long conversation measures tens of thousands of anchors per attempt:
    they are handled as arrays (:class:`~zett_lab.measure.message_index.SpanAnchors`).
    """
    index = view.index
    arrays = index.arrays
    span = index.span_anchors(window.span_start, window.span_end, window.n_recorded)
    ids = span.ids
    in_summary = _in_summary(index, span, text_index)
    lost = arrays.artifact[ids] & ~span.in_tail & ~in_summary
    refetch_calls, refetched_ids = _refetches(index, ids[lost], window.n_recorded)
    needed_later = (span.next_use >= 0) & ~span.in_tail
    if anchor_rows is not None:
        anchor_rows.add(index, AnchorPart(where, span, in_summary, needed_later, np.isin(ids, refetched_ids)))
    types = arrays.type_code[ids]
    per_type_total = np.bincount(types, minlength=len(ANCHOR_TYPES))
    per_type_kept = np.bincount(types, weights=in_summary, minlength=len(ANCHOR_TYPES))
    rarity = arrays.rarity[ids]
    needed, needed_kept = int(needed_later.sum()), int((needed_later & in_summary).sum())
    needed_weight = _sequential_sum(rarity[needed_later])
    needed_kept_weight = _sequential_sum(rarity[needed_later & in_summary])
    constraint = types == ANCHOR_TYPES.index("constraint")
    constraints = int(constraint.sum())
    constraints_visible = int((constraint & (in_summary | span.in_tail)).sum())
    kept = int(in_summary.sum())
    columns = {
        "span_anchors": len(ids),
        "retained_anchors": kept,
        "anchor_retention": ratio(kept, len(ids)),
        "needed_anchors": needed,
        "needed_retained": needed_kept,
        "needed_weight": needed_weight,
        "needed_retained_weight": needed_kept_weight,
        "needed_anchor_recall": ratio(needed_kept_weight, needed_weight) if needed else math.nan,
        "lost_but_needed": needed - needed_kept,
        "constraints": constraints,
        "constraints_visible": constraints_visible,
        "instruction_survival": ratio(constraints_visible, constraints),
        "refetch_calls": refetch_calls,
        "refetched_anchors": len(refetched_ids),
        **{
            f"retention_{t}": ratio(int(per_type_kept[code]), int(per_type_total[code]))
            for code, t in enumerate(ANCHOR_TYPES)
        },
    }
    return columns, SummaryHolds(ids, in_summary)


@dataclass(frozen=True, slots=True)
class AnchorPart:
    """One attempt's rows of ``losses.anchors``, one per span anchor, as arrays (:func:`anchor_table` joins them)."""

    #: The attempt's constant columns (conversation, summarizer, compaction_id, applied).
    where: dict[str, Any]
    span: SpanAnchors
    in_summary: np.ndarray
    needed_later: np.ndarray
    refetched: np.ndarray

    @property
    def lost_but_needed(self) -> np.ndarray:
        """Needed later and not in the summary."""
        return self.needed_later & ~self.in_summary


def anchor_table(index: ConversationIndex, parts: Sequence[AnchorPart]) -> pd.DataFrame:
    """``losses.anchors`` of a trace: every attempt's rows, with the dtypes :func:`~zett_lab.measure.columns.frame`
    gives ``ANCHOR_COLUMNS``.

    Built once from the joined arrays, the texts taken by key id: a long conversation has
    millions of these rows, so neither per-row Python objects nor a table per attempt.
    """
    if not parts:
        return frame([], ANCHOR_COLUMNS)
    sizes = [len(part.span.ids) for part in parts]

    def joined(values: Callable[[AnchorPart], np.ndarray]) -> np.ndarray:
        return np.concatenate([values(part) for part in parts])

    def flags(values: np.ndarray) -> Any:
        return pd.array(values.astype(bool), dtype="boolean")

    def repeated(name: str) -> Any:
        values = [part.where[name] for part in parts]
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            return flags(np.repeat(np.array(values, dtype=bool), sizes))
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values):
            return pd.array(np.repeat(np.array(values, dtype=np.int64), sizes), dtype="Int64")
        column = np.empty(len(values), dtype=object)
        column[:] = values
        return pd.Series(np.repeat(column, sizes), dtype=object, copy=False)

    arrays = index.arrays
    ids = joined(lambda part: part.span.ids)
    next_use = joined(lambda part: part.span.next_use)
    in_summary, needed_later = joined(lambda part: part.in_summary), joined(lambda part: part.needed_later)
    columns = {
        **{name: repeated(name) for name in parts[0].where},
        "type": pd.Series(arrays.type_names[ids], dtype=object, copy=False),
        "value": pd.Series(arrays.first_values[ids], dtype=object, copy=False),
        "normalized": pd.Series(arrays.normalized[ids], dtype=object, copy=False),
        "message_index": pd.array(joined(lambda part: part.span.first_index).astype(np.int64), dtype="Int64"),
        "in_summary": flags(in_summary),
        "in_tail": flags(joined(lambda part: part.span.in_tail)),
        "in_future": flags(joined(lambda part: part.span.in_future)),
        "next_use_index": pd.arrays.IntegerArray(np.maximum(next_use, 0).astype(np.int64), next_use < 0),
        "rarity": arrays.rarity[ids].astype(np.float64),
        "needed_later": flags(needed_later),
        "lost_but_needed": flags(joined(lambda part: part.lost_but_needed)),
        "refetched": flags(joined(lambda part: part.refetched)),
    }
    # copy=False: the arrays are new already, and consolidating them would copy millions of rows again.
    return pd.DataFrame(columns, columns=list(ANCHOR_COLUMNS), copy=False)


@dataclass
class AnchorRows:
    """The per-anchor rows of a trace's attempts as :class:`AnchorPart` arrays, kept as the caller asks.

    Every row (``losses.anchors``), or (``lost_only``) only the rows :meth:`Losses.lost_but_needed`
    keeps, with every row's :data:`~zett_lab.measure.columns.RETENTION_COLUMNS` counted as the attempts
    come (:meth:`counts`): what a report keeps. A long conversation's cumulative spans make millions
    of rows, hundreds of MB even as arrays.
    """

    lost_only: bool = False
    parts: list[AnchorPart] = field(default_factory=list)
    _counted: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    _types: tuple[np.ndarray, Any] | None = None

    def add(self, index: ConversationIndex, part: AnchorPart) -> None:
        if not self.lost_only:
            self.parts.append(part)
            return
        if self._types is None:
            self._types = pd.factorize(index.arrays.type_names, sort=True)
        applied = bool(part.where["applied"])
        flags = {
            "applied": np.full(len(part.span.ids), applied),
            "in_summary": part.in_summary,
            "in_tail": part.span.in_tail,
            "needed_later": part.needed_later,
            "lost_but_needed": part.lost_but_needed,
        }
        self._counted.append(np.unique(_flag_codes(self._types[0][part.span.ids], flags), return_counts=True))
        lost = flags["lost_but_needed"]
        if applied and lost.any():
            self.parts.append(_rows(part, lost))

    def counts(self) -> pd.DataFrame:
        """The flags of every row added, counted (what :func:`retention_counts` gives of the whole table)."""
        if self._types is None:
            return _no_counts()
        codes = np.concatenate([codes for codes, _ in self._counted])
        distinct, where = np.unique(codes, return_inverse=True)
        counts = np.bincount(where, weights=np.concatenate([n for _, n in self._counted]), minlength=len(distinct))
        return _count_table(distinct, counts.astype(np.int64), self._types[1])


def _rows(part: AnchorPart, keep: np.ndarray) -> AnchorPart:
    span = part.span
    return AnchorPart(
        part.where,
        SpanAnchors(
            ids=span.ids[keep],
            first_index=span.first_index[keep],
            in_tail=span.in_tail[keep],
            in_future=span.in_future[keep],
            next_use=span.next_use[keep],
        ),
        part.in_summary[keep],
        part.needed_later[keep],
        part.refetched[keep],
    )


def retention_counts(anchors: pd.DataFrame) -> pd.DataFrame:
    """The :data:`~zett_lab.measure.columns.RETENTION_COLUMNS` of a per-anchor table (missing flags: False),
    counted per distinct row (:data:`~zett_lab.measure.columns.ANCHOR_COUNT_COLUMNS`).

    What the anchor-retention figure draws, in at most a few hundred rows instead of one per anchor
    (sorted by type, then by the flags, False first; rows without a type are not counted).
    """
    if not len(anchors):
        return _no_counts()
    types, type_names = pd.factorize(anchors["type"], sort=True)
    flags = {name: anchors[name].astype("boolean").fillna(False).to_numpy(dtype=bool) for name in RETENTION_COLUMNS[1:]}
    distinct, counts = np.unique(_flag_codes(types, flags), return_counts=True)
    return _count_table(distinct, counts, type_names)


def _flag_codes(types: np.ndarray, flags: dict[str, np.ndarray]) -> np.ndarray:
    """One integer per row: its type code, then one bit per flag (rows without a type, code -1, left out)."""
    names = RETENTION_COLUMNS[1:]
    code = types.astype(np.int64) << len(names)
    for bit, name in enumerate(reversed(names)):
        code |= flags[name].astype(np.int64) << bit
    return code[types >= 0]


def _no_counts() -> pd.DataFrame:
    return _count_table(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [])


def _count_table(distinct: np.ndarray, counts: np.ndarray, type_names: Sequence[Any] | pd.Index) -> pd.DataFrame:
    """Distinct :func:`_flag_codes` and how many rows had each, as :data:`ANCHOR_COUNT_COLUMNS`."""
    names = RETENTION_COLUMNS[1:]
    table = {"type": pd.Series(np.asarray(type_names, dtype=object)[distinct >> len(names)], dtype=object)}
    for bit, name in enumerate(reversed(names)):
        table[name] = pd.Series((distinct >> bit) & 1 == 1, dtype=bool)
    table[ANCHOR_ROWS] = pd.Series(counts, dtype=np.int64)
    return pd.DataFrame(table, columns=list(ANCHOR_COUNT_COLUMNS))


def _probe_columns(
    view: TraceView,
    row: dict[Hashable, Any],
    cid: int,
    applied: bool,
    window: Window,
    text_index: TextIndex | None,
    previous_checkpoint: tuple[int, int] | None,
    probe_rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Probe presence of the gold probes the span covers (an update probe: both of its values);
    appends one probe row per covered probe."""
    covered = [(n, p) for n, p in enumerate(view.probes) if covers_probe(p, window.span_start, window.span_end)]
    if not covered:
        return {"probes_covered": 0, "probes_present": 0, "probe_presence": math.nan}
    step = int_or_none(row.get("step"))
    step_row = view.step_rows.get(step) if step is not None else None
    context = loose(
        _next_context_text(
            step_row,
            view.index,
            view.summaries,
            previous_checkpoint,
            (cid, applied, window.span_end, window.n_recorded),
        )
    )
    tail = loose(view.index.joined(window.span_end, window.n_recorded))
    summary_loose = text_index.loose_text if text_index is not None else ""
    present = 0
    for n, probe in covered:
        in_context = contains_loose(context, probe.answer)
        present += in_context
        superseded = probe.superseded_answer if probe.type == "update" else None
        probe_rows.append(
            {
                **view.base,
                "compaction_id": cid,
                "step": row.get("step"),
                "applied": applied,
                "probe": n,
                "type": probe.type,
                "question": probe.question,
                "answer": probe.answer,
                "message_index": probe.message_index,
                "answer_in_source": contains_loose(view.index.loose(probe.message_index), probe.answer),
                "in_summary": contains_loose(summary_loose, probe.answer) if summary_loose else False,
                "in_tail": contains_loose(tail, probe.answer),
                "in_context": in_context,
                "superseded_answer": superseded,
                "superseded_in_context": contains_loose(context, superseded) if superseded else None,
            }
        )
    return {"probes_covered": len(covered), "probes_present": present, "probe_presence": ratio(present, len(covered))}


def _superseded(
    updates: GrowingSpanUpdates,
    span_start: int,
    span_end: int,
    summary: str,
    base: dict[str, Any],
    rows: list[dict[str, Any]],
) -> dict[str, Any]:
    """Superseded-value columns of one attempt; appends one row per updated item to ``rows``."""
    counts = {"latest": 0, "superseded": 0, "neither": 0}
    found = updates.find(span_start, span_end)
    for update in found:
        status = update.status_in(summary)
        counts[status] += 1
        rows.append(
            {
                **base,
                "kind": update.kind,
                "key": update.key,
                "name": update.name,
                "superseded": " | ".join(update.superseded),
                "latest": update.latest,
                "superseded_index": update.superseded_index,
                "latest_index": update.latest_index,
                "status": status,
            }
        )
    return {
        "superseded_updates": len(found),
        "superseded_latest": counts["latest"],
        "superseded_only": counts["superseded"],
        "superseded_rate": ratio(counts["superseded"], len(found)),
    }


def _next_context_text(
    step_row: dict[Hashable, Any] | None,
    index: ConversationIndex,
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
        checkpoint = int_or_none(step_row.get("checkpoint_id"))
        kept_from = int(step_row["kept_from"])
        end = int_or_none(step_row.get("n_recorded")) or n_recorded
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
