"""One compaction attempt as its metrics read it: the :class:`Attempt` every compaction-level metric reads, and
what it is measured against (:class:`TraceView`).

What several metrics read (the span's anchors and which of them the summary holds, the sizes, the updated
items, the covered probes) is computed once per attempt, on first use. The catalogue names this type for a
metric's computation, so this module imports neither the catalogue nor the row tables
(:mod:`~zett_lab.measure.attempt_rows` measures an attempt into its rows).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from zett_agent.messages import SystemMessage

from ..load.anchors import ANCHOR_TYPES, HUGE_PARAGRAPH, loose
from ..load.conversation import CHECKPOINT_PREFIX, Probe
from ..records import int_or_none, is_missing
from ..tokens import message_counter
from .line_keys import line_keys
from .lookup import LooseLines, QuotedLines, TextIndex, clauses_of, contains_loose
from .message_index import ConversationIndex, SpanAnchors
from .probes import covers_probe
from .updates import GrowingSpanUpdates, Update

#: Per conversation index and token counter, the running totals of its messages' counts (``[0]`` is 0).
_RUNNING_TOKENS: weakref.WeakKeyDictionary[ConversationIndex, dict[Callable[..., int], np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


@dataclass(frozen=True)
class TraceView:
    """What every compaction attempt of one trace is measured against."""

    messages: Sequence[Any]
    probes: list[Probe]
    index: ConversationIndex
    base: dict[str, Any]
    max_tokens: Any
    keep_recent: Any
    counter: Callable[[Sequence[Any]], int]
    #: The trace's steps table (read only by probes: :attr:`step_rows`).
    steps: pd.DataFrame
    summaries: dict[int, str | None]
    #: The updates of the trace's spans, folded on from attempt to attempt.
    updates: GrowingSpanUpdates
    _text_indexes: dict[int, TextIndex] = field(default_factory=dict)

    @cached_property
    def step_rows(self) -> dict[int, dict[Hashable, Any]]:
        """The steps table's rows by step number, made on first use (only a trace with probes reads them: a long
        trace's thousands of rows as dicts took a tenth of measuring it)."""
        return {int(row["step"]): row for row in self.steps.to_dict("records")} if len(self.steps) else {}

    @cached_property
    def system_prompts(self) -> tuple[int, ...]:
        """The indices of the system messages (sent with every request)."""
        return tuple(i for i, message in enumerate(self.messages) if isinstance(message, SystemMessage))

    def summary_index(self, compaction_id: int) -> TextIndex | None:
        """Lookup index of an attempt's summary (built once), None when it has no summary."""
        text = self.summaries.get(compaction_id)
        if text is None or is_missing(text):
            return None
        if compaction_id not in self._text_indexes:
            self._text_indexes[compaction_id] = TextIndex(text, self.loose_lines)
        return self._text_indexes[compaction_id]

    def summary_keys(self, summary: TextIndex) -> np.ndarray:
        """Per key of the conversation (``index.arrays.keys``), whether the summary has an anchor with that key. A
        summary that is one paragraph longer than :data:`~zett_lab.load.anchors.HUGE_PARAGRAPH` (every summary of
        the offline summarizers: lines joined by single line breaks) has the keys of its lines: read through
        :attr:`quoted_lines`, so a mask summary costs only the lines its previous one does not hold."""
        text = summary.text
        if len(text) > HUGE_PARAGRAPH and "\n\n" not in text:
            return self.quoted_lines(text)
        present = np.zeros(len(self.index.arrays.keys), dtype=bool)
        id_of = self.index.key_ids
        present[[id_of[key] for key in summary.keys if key in id_of]] = True
        return present

    def tokens_between(self, start: int, end: int) -> int:
        """The counter over ``messages[start:end]``: a difference of running totals when the counter is a sum of
        per-message counts (:func:`~zett_lab.tokens.message_counter`: zett_lab's counters), made once per
        conversation and counter for every trace (each attempt summed its span's thousands of messages)."""
        per_message = message_counter(self.counter)
        if per_message is None:
            return self.counter(self.messages[start:end])
        totals = _RUNNING_TOKENS.setdefault(self.index, {})
        before = totals.get(self.counter)
        if before is None:
            before = totals[self.counter] = np.cumsum([0, *map(per_message, self.messages)], dtype=np.int64)
        return int(before[max(start, end)] - before[start])

    @cached_property
    def loose_lines(self) -> LooseLines:
        """The loose form of the trace's summaries, each read around the summary it quotes (:class:`LooseLines`)."""
        return LooseLines()

    @cached_property
    def quoted_lines(self) -> QuotedLines:
        """The conversation's keys a text's lines hold, read as :class:`QuotedLines` (one per trace: a mask summary
        quotes the trace's previous one) from the lines' keys read once per conversation (:func:`line_keys`)."""
        return QuotedLines(line_keys(self.index).ids, len(self.index.arrays.keys))


class Window(NamedTuple):
    """S_k = messages[span_start:span_end], T_k = messages[span_end:n_recorded], F_k = the rest."""

    span_start: int
    span_end: int
    n_recorded: int


class AttemptResult(NamedTuple):
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


class Attempt:
    """One compaction attempt k as its metrics read it (notation of the documentation's result tables).

    ``row`` is its row of ``trace.compactions``; ``window`` its span S_k, tail T_k and future F_k (None:
    the engine found no window); ``summary`` the lookup index of Σ_k (None: no summary). The arrays are
    per anchor of the span, in span order (``span.ids`` index the conversation's ``index.arrays``): a
    long conversation's cumulative spans hold tens of thousands, so metrics count over arrays. Each
    property is computed on first use and shared by every metric of the attempt.
    """

    def __init__(
        self,
        trace: TraceView,
        row: dict[Hashable, Any],
        compaction_id: int,
        applied: bool,
        window: Window | None,
        previous_checkpoint: tuple[int, int] | None = None,
    ) -> None:
        self.trace = trace
        #: (compaction_id, span_end) of the last applied attempt before it.
        self.previous_checkpoint = previous_checkpoint
        self.row = row
        self.compaction_id = compaction_id
        self.applied = applied
        self.window = window
        self.summary: TextIndex | None = trace.summary_index(compaction_id) if window is not None else None

    @property
    def index(self) -> ConversationIndex:
        return self.trace.index

    @property
    def the_window(self) -> Window:
        """The window, for metrics that are only asked with one."""
        assert self.window is not None, "asked of an attempt without a window"
        return self.window

    @cached_property
    def span(self) -> SpanAnchors:
        """The span's distinct anchors and where each is after it (tail, future, next use); a constraint or
        decision counts as in the tail also when the system prompt or a message before the span holds it, in any
        words (:func:`kept_sentences`)."""
        start, end, n_recorded = self.the_window
        span = self.index.span_anchors(start, end, n_recorded)
        standing = (*range(start), *(i for i in self.trace.system_prompts if i >= start))
        held = kept_sentences(self.index, span, standing)
        if not held.any():
            return span
        return dataclasses.replace(span, in_tail=span.in_tail | held, needed_later=span.needed_later & ~held)

    @cached_property
    def types(self) -> np.ndarray:
        """Per span anchor: its index into :data:`~zett_lab.load.anchors.ANCHOR_TYPES`."""
        return self.index.arrays.type_code[self.span.ids]

    @cached_property
    def per_type(self) -> tuple[np.ndarray, np.ndarray]:
        """Per anchor type: the span's anchors of that type, and how many of them Σ_k holds."""
        size = len(ANCHOR_TYPES)
        return np.bincount(self.types, minlength=size), np.bincount(self.types, weights=self.in_summary, minlength=size)

    @cached_property
    def in_summary(self) -> np.ndarray:
        """Per span anchor, whether Σ_k holds it: :meth:`TextIndex.contains` for all of them at once.

        A key the summary's own anchors have (:meth:`TraceView.summary_keys`), or a needle found in the one scan
        of the summary; sentence types (constraints, decisions) not held by key are matched one by one by the
        summary's clauses, as ``contains`` does.
        """
        assert self.summary is not None, "asked of an attempt without a summary"
        index, text_index = self.index, self.summary
        arrays, ids = index.arrays, self.span.ids
        present = self.trace.summary_keys(text_index)
        found = np.zeros(len(arrays.needles) + 1, dtype=bool)  # the last slot answers needle_id -1
        needle_index = index.needle_ids
        found[[needle_index[n] for n in text_index.found_needles(index.needles)]] = True
        result = present[ids] | found[arrays.needle_id[ids]]
        for position in np.flatnonzero(arrays.sentence[ids] & ~result):  # held by key, else by a clause
            result[position] = text_index.clauses.holds(arrays.normalized[ids[position]])
        return result

    @cached_property
    def needed_later(self) -> np.ndarray:
        """Per span anchor, member of N_k (``needed_later`` of :class:`~zett_lab.measure.message_index.SpanAnchors`)."""
        return self.span.needed_later

    @cached_property
    def refetches(self) -> tuple[int, np.ndarray]:
        """Tool calls of F_k mentioning an artifact anchor of S_k that is in neither T_k nor Σ_k, and those anchors'
        ids (the (call, key) pairs of :class:`~zett_lab.measure.key_arrays.KeyArrays` from ``n_recorded`` on)."""
        arrays, span = self.index.arrays, self.span
        lost = span.ids[arrays.artifact[span.ids] & ~span.in_tail & ~self.in_summary]
        is_lost = np.zeros(len(arrays.keys), dtype=bool)
        is_lost[lost] = True
        later = slice(int(np.searchsorted(arrays.call_message, self.the_window.n_recorded)), None)
        hit = is_lost[arrays.call_key[later]]
        return len(np.unique(arrays.call_number[later][hit])), np.unique(arrays.call_key[later][hit])

    @cached_property
    def span_tokens(self) -> int:
        """tok(S_k): the counter over the raw span messages."""
        start, end, _ = self.the_window
        return self.trace.tokens_between(start, end)

    @cached_property
    def tail_tokens(self) -> int:
        """tok(T_k): as the engine recorded it, else the counter over the tail."""
        recorded = int_or_none(self.row.get("recent_tokens"))
        if recorded is not None:
            return recorded
        _, end, n_recorded = self.the_window
        return self.trace.tokens_between(end, n_recorded)

    @property
    def older_tokens(self) -> int | None:
        """Tokens of the window the engine summarized (an earlier checkpoint included)."""
        return int_or_none(self.row.get("older_tokens"))

    @property
    def summary_tokens(self) -> int | None:
        """tok(Σ_k) as the engine counts the checkpoint message; None without a summary."""
        return int_or_none(self.row.get("summary_tokens"))

    @property
    def before_tokens(self) -> int:
        """Dialogue tokens before the compaction: older (else span) tokens plus the tail."""
        older = self.older_tokens
        return (older if older is not None else self.span_tokens) + self.tail_tokens

    @cached_property
    def updates(self) -> list[tuple[Update, str]]:
        """Items of S_k whose value changed within S_k, each with what Σ_k carries: 'latest', 'superseded' or
        'neither'."""
        start, end, _ = self.the_window
        summary = str(self.row.get("summary_text"))
        return [(update, update.status_in(summary)) for update in self.trace.updates.find(start, end)]

    @cached_property
    def probe_rows(self) -> list[dict[str, Any]]:
        """One row of ``losses.probes`` per gold probe the span covers."""
        return _probe_rows(self)


def kept_sentences(index: ConversationIndex, span: SpanAnchors, standing: Sequence[int]) -> np.ndarray:
    """Per span anchor, whether it is a constraint or a decision that the standing context (the messages
    ``standing``: the system prompt and the messages before the span, kept verbatim and sent with every request
    after the compaction) holds by the summary's rule (:class:`~zett_lab.measure.lookup.Clauses`: most of its
    content words in one clause, and its negation). A rule the system prompt or the task's first messages state
    in their own words stays conveyed. The tail holds a sentence only as written (``span.in_tail``): its tool
    results and the agent's messages share words with a rule without stating it."""
    arrays = index.arrays
    held = np.zeros(len(span.ids), dtype=bool)
    asked = np.flatnonzero(arrays.sentence[span.ids] & ~span.in_tail)
    if not len(asked):
        return held
    context = [clauses_of(index.text(i)) for i in standing]
    for position in asked:
        normalized = arrays.normalized[span.ids[position]]
        held[position] = any(clauses.holds(normalized) for clauses in context)
    return held


def sequential_sum(values: np.ndarray) -> float:
    """Left-to-right float sum (the order the per-anchor loop added them in: the same float whatever numpy does)."""
    return functools.reduce(operator.add, values.tolist(), 0.0)


def _probe_rows(attempt: Attempt) -> list[dict[str, Any]]:
    """One probe row per gold probe the span covers (an update probe: both of its values)."""
    view, window, row = attempt.trace, attempt.the_window, attempt.row
    covered = [(n, p) for n, p in enumerate(view.probes) if covers_probe(p, window.span_start, window.span_end)]
    if not covered:
        return []
    step = int_or_none(row.get("step"))
    step_row = view.step_rows.get(step) if step is not None else None
    context = loose(
        _next_context_text(
            step_row,
            view.index,
            view.summaries,
            attempt.previous_checkpoint,
            (attempt.compaction_id, attempt.applied, window.span_end, window.n_recorded),
        )
    )
    tail = loose(view.index.joined(window.span_end, window.n_recorded))
    summary_loose = attempt.summary.loose_text if attempt.summary is not None else ""
    rows = []
    for n, probe in covered:
        superseded = probe.superseded_answer if probe.type == "update" else None
        rows.append(
            {
                **view.base,
                "compaction_id": attempt.compaction_id,
                "step": row.get("step"),
                "applied": attempt.applied,
                "probe": n,
                "type": probe.type,
                "question": probe.question,
                "answer": probe.answer,
                "message_index": probe.message_index,
                "answer_in_source": contains_loose(view.index.loose(probe.message_index), probe.answer),
                "in_summary": contains_loose(summary_loose, probe.answer) if summary_loose else False,
                "in_tail": contains_loose(tail, probe.answer),
                "in_context": contains_loose(context, probe.answer),
                "superseded_answer": superseded,
                "superseded_in_context": contains_loose(context, superseded) if superseded else None,
            }
        )
    return rows


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
