"""Offline summarizers that choose transcript lines within the budget: :class:`Extractive` and :class:`Anchors`."""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import repeat

import numpy as np
import pandas as pd
from zett_agent.messages import AnyMessage

from ...errors import SettingError
from ...load.anchors import anchors_in_text
from ...tokens import count_text_tokens
from ..transcript import Segment, TranscriptLine, join_units, segments, unit_cost
from .base import CLASS_DEFAULT, Budget, OfflineSummarizer


def _fit_selection(selected: list[tuple[float, TranscriptLine]], limit: int) -> str:
    """Join selected units; while the exact count is over ``limit``, drop the lowest-valued."""
    selected = sorted(selected, key=lambda pair: (-pair[0], pair[1].order))
    text = join_units([unit for _, unit in selected])
    while selected and count_text_tokens(text) > limit:
        selected.pop()
        text = join_units([unit for _, unit in selected])
    return text


# -- units for line selection ---------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\[(\"'`])")
_PROSE = {"user", "agent", "assistant", "reasoning", "checkpoint", "system"}


def _clip(text: str, max_chars: int, at: int = 0) -> str:
    """At most ``max_chars`` characters of ``text``, in a window starting a little before ``at``."""
    if len(text) <= max_chars:
        return text
    start = max(0, min(at - max_chars // 3, len(text) - max_chars))
    piece = text[start : start + max_chars]
    return ("…" if start else "") + piece + ("…" if start + max_chars < len(text) else "")


#: Segments whose lines are remembered (every setting of a grid summarizes the same messages again).
_SEGMENTS_KEPT = 1 << 13


@lru_cache(maxsize=_SEGMENTS_KEPT)
def _segment_pieces(text: str, split_sentences: bool) -> tuple[str, ...]:
    """The units :func:`line_units` makes of one segment's text: its lines, stripped (each split into sentences
    when ``split_sentences``). Remembered per segment: splitting every line of the span again was a fifth of a
    long session's extractive summaries."""
    pieces = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        for piece in _SENTENCE_END.split(line) if split_sentences else (line,):
            piece = piece.strip()
            if piece:
                pieces.append(piece)
    return tuple(pieces)


@lru_cache(maxsize=_SEGMENTS_KEPT)
def _clipped_pieces(text: str, split_sentences: bool, max_chars: int) -> tuple[str, ...]:
    """:func:`_segment_pieces`, each at most ``max_chars`` characters (:func:`_clip` from its start)."""
    return tuple(_clip(piece, max_chars) for piece in _segment_pieces(text, split_sentences))


def line_units(segs: Sequence[Segment], *, split_sentences: bool) -> list[TranscriptLine]:
    """Split segments into lines (and prose lines into sentences when asked)."""
    units: list[TranscriptLine] = []
    for number, segment in enumerate(segs):
        for piece in _segment_pieces(segment.text, split_sentences and segment.kind in _PROSE):
            units.append(TranscriptLine(len(units), number, segment.label, segment.kind, piece))
    return units


# -- extractive ---------------------------------------------------------------------------------------

_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]+|\d+")


#: Every term a line weighed so far (:func:`_line_terms`), by its number in this process.
_TERM_IDS: dict[str, int] = {}


@lru_cache(maxsize=1 << 17)
def _line_terms(text: str) -> tuple[np.ndarray, np.ndarray]:
    """A line's terms in order of first appearance (their numbers in :data:`_TERM_IDS`), each with its weight
    ``1 + log(count)``. Remembered: every summary of a trace (and every setting of a grid) weighs most of the
    same lines again."""
    counts: dict[str, int] = {}
    for term in _TERM.findall(text.lower()):
        counts[term] = counts.get(term, 0) + 1
    ids = np.fromiter((_TERM_IDS.setdefault(term, len(_TERM_IDS)) for term in counts), np.int64, len(counts))
    weights = np.fromiter((1.0 + math.log(count) for count in counts.values()), np.float64, len(counts))
    return ids, weights


def _tfidf(texts: Sequence[str]):
    """Row-normalized TF-IDF matrix (scipy CSR) of ``texts``; rows with no terms are zero.

    Columns are the terms in order of first appearance, a row's entries in its line's order of first appearance:
    the matrix a loop over every line's terms builds, array by array (a summary of a long span weighs tens of
    thousands of terms)."""
    from scipy import sparse

    n = len(texts)
    lines = [_line_terms(text) for text in texts]
    terms = np.concatenate([ids for ids, _ in lines]) if lines else np.zeros(0, np.int64)
    values = np.concatenate([weights for _, weights in lines]) if lines else np.zeros(0)
    rows = np.repeat(np.arange(n, dtype=np.int64), [len(ids) for ids, _ in lines])
    cols, columns = pd.factorize(terms)  # numbered in order of first appearance, by hashing (no sort)
    matrix = sparse.csr_matrix((values, (rows, cols)), shape=(n, max(1, len(columns))), dtype=np.float64)
    document_frequency = np.bincount(cols, minlength=matrix.shape[1])
    idf = np.log(n / np.maximum(document_frequency, 1))
    matrix = matrix @ sparse.diags(idf)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    inverse_norms = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sparse.csr_matrix(sparse.diags(inverse_norms) @ matrix), norms > 0


def lexrank(texts: Sequence[str], *, damping: float = 0.15, iterations: int = 100) -> np.ndarray:
    """Continuous LexRank scores (stationary distribution of the cosine-similarity walk).

    Computed without the n×n matrix: with X the row-normalized TF-IDF matrix, the
    similarity is ``S = X Xᵀ - I`` and every product ``S v = X (Xᵀ v) - v`` costs O(nnz).
    Units with no similar unit teleport uniformly. Deterministic.
    """
    if not texts:
        return np.zeros(0)
    return _lexrank(*_tfidf(texts), damping=damping, iterations=iterations)


def _lexrank(matrix, nonzero: np.ndarray, *, damping: float = 0.15, iterations: int = 100) -> np.ndarray:
    n = matrix.shape[0]
    transposed = matrix.T.tocsr()
    identity_part = nonzero.astype(np.float64)

    def similarity(vector: np.ndarray) -> np.ndarray:
        return matrix @ (transposed @ vector) - identity_part * vector

    degree = similarity(np.ones(n))
    degree[degree < 1e-12] = 0.0
    dangling = degree == 0
    inverse_degree = np.divide(1.0, degree, out=np.zeros_like(degree), where=~dangling)
    p = np.full(n, 1.0 / n)
    for _ in range(iterations):
        walk = similarity(p * inverse_degree) + p[dangling].sum() / n
        updated = damping / n + (1 - damping) * walk
        updated /= updated.sum()
        if np.abs(updated - p).sum() < 1e-10:
            p = updated
            break
        p = updated
    return p


class _Chosen:
    """The units an extractive summary has taken, as the rows of a sparse matrix grown one row at a time.

    :meth:`max_similarity` is each taken row's dot product with a candidate: the product of the taken rows (in
    CSR form) with the candidate as a dense vector, by scipy's own kernel for it (what ``matrix[taken] @
    matrix[i].T`` runs, so the same floats), on buffers that double when full, so taking a row costs that row,
    not every row taken before it (stacking a new matrix per row was most of a long span's summary), and no
    matrix object is made per candidate (making one was a third of a long session's extractive summaries).
    """

    def __init__(self, matrix) -> None:
        from scipy.sparse._sparsetools import csr_matvec  # the kernel of a CSR matrix @ a vector

        self._matvec = csr_matvec
        self._matrix = matrix
        self._dense = np.zeros(matrix.shape[1])
        self._data = np.empty(64, dtype=matrix.dtype)
        self._indices = np.empty(64, dtype=matrix.indices.dtype)
        self._indptr = np.zeros(65, dtype=matrix.indices.dtype)
        self.rows: list[int] = []

    def add(self, row: int) -> None:
        matrix = self._matrix
        start, end = matrix.indptr[row], matrix.indptr[row + 1]
        taken = len(self.rows)
        filled = int(self._indptr[taken])
        needed = filled + end - start
        if needed > len(self._data):
            capacity = max(needed, 2 * len(self._data))
            self._data = np.concatenate([self._data[:filled], np.empty(capacity - filled, self._data.dtype)])
            self._indices = np.concatenate([self._indices[:filled], np.empty(capacity - filled, self._indices.dtype)])
        if taken + 2 > len(self._indptr):
            self._indptr = np.concatenate([self._indptr, np.zeros(len(self._indptr), self._indptr.dtype)])
        self._data[filled:needed] = matrix.data[start:end]
        self._indices[filled:needed] = matrix.indices[start:end]
        self._indptr[taken + 1] = needed
        self.rows.append(row)

    def max_similarity(self, row: int) -> float:
        """The largest dot product of row ``row`` with a taken row (0 when none is taken)."""
        if not self.rows:
            return 0.0
        matrix, dense = self._matrix, self._dense
        start, end = matrix.indptr[row], matrix.indptr[row + 1]
        columns = matrix.indices[start:end]
        dense[columns] = matrix.data[start:end]
        taken = len(self.rows)
        similarity = np.zeros(taken)
        self._matvec(taken, matrix.shape[1], self._indptr[: taken + 1], self._indices, self._data, dense, similarity)
        dense[columns] = 0.0
        return float(similarity.max())


class Extractive(OfflineSummarizer):
    """Extractive summary: the most central lines and sentences, in original order.

    Keeps: transcript lines (prose lines split into sentences, every unit at most
    ``max_unit_chars`` characters), ranked by continuous LexRank over TF-IDF vectors;
    the best are taken while they fit the budget, skipping exact and near duplicates
    (cosine ≥ 0.9 to a unit already taken). Says nothing about what was left out.

    Sentence splitting is a regular expression, not Punkt: NLTK's Punkt data cannot be
    downloaded here, and transcripts of coding agents are mostly lines, not prose.
    """

    name = "extractive"

    def __init__(self, budget: Budget = CLASS_DEFAULT, *, max_unit_chars: int = 400) -> None:
        super().__init__(budget)
        if isinstance(max_unit_chars, bool) or not isinstance(max_unit_chars, int) or max_unit_chars < 20:
            raise SettingError(f"extractive: max_unit_chars must be an int >= 20, got {max_unit_chars!r}")
        self.max_unit_chars = max_unit_chars

    def _options(self) -> dict[str, object]:
        return {} if self.max_unit_chars == 400 else {"max_unit_chars": self.max_unit_chars}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        # The units as their segments remember them (line_units' texts, clipped): a line object only for those
        # costed or shown.
        segs = segments(messages)
        texts: list[str] = []
        numbers: list[int] = []
        for number, segment in enumerate(segs):
            pieces = _clipped_pieces(segment.text, segment.kind in _PROSE, self.max_unit_chars)
            texts.extend(pieces)
            numbers.extend(repeat(number, len(pieces)))

        def unit(i: int) -> TranscriptLine:
            segment = segs[numbers[i]]
            return TranscriptLine(i, numbers[i], segment.label, segment.kind, texts[i])

        if not texts:
            return ""
        if limit is None:
            return join_units([unit(i) for i in range(len(texts))])
        matrix, nonzero = _tfidf(texts)
        scores = _lexrank(matrix, nonzero)
        ranking = np.argsort(-scores, kind="stable").tolist()  # by score, then by place
        chosen = _Chosen(matrix)
        selected: list[tuple[float, TranscriptLine]] = []
        seen_texts: set[str] = set()
        remaining = limit
        for i in ranking:
            key = texts[i].lower()
            if key in seen_texts:
                continue
            line = unit(i)
            cost = unit_cost(line)
            if cost > remaining:
                continue
            if chosen.max_similarity(i) >= 0.9:
                continue
            chosen.add(i)
            selected.append((float(scores[i]), line))
            seen_texts.add(key)
            remaining -= cost
            if remaining <= 2:
                break
        return _fit_selection(selected, limit)


# -- anchors ----------------------------------------------------------------------------------------

#: The role whose sentence anchors (constraints from users, decisions from assistants) a line can carry.
_ANCHOR_ROLE = {
    "user": "user",
    "agent": "user",
    "checkpoint": "any",
    "assistant": "assistant",
    "reasoning": "assistant",
}

#: Weight of one newly covered item of each type.
ANCHOR_WEIGHTS: dict[str, float] = {
    "constraint": 6.0,
    "error": 4.0,
    "command": 4.0,
    "decision": 3.0,
    "checkpoint": 3.0,
    "task": 5.0,
    "url": 2.5,
    "path": 2.5,
    "sha": 2.5,
    "identifier": 1.0,
    "number": 1.0,
}


#: Multiplier for items found in tool output lines.
TOOL_OUTPUT_WEIGHT = 0.6


def anchor_items(
    unit: TranscriptLine, *, first_user_segment: int | None = None
) -> tuple[dict[tuple[str, str], float], int]:
    """Items a line carries, with their weights, and where the first one starts.

    Items are the anchors of :mod:`zett_lab.load.anchors` (the same definition the loss metrics
    measure), keyed by their normalized value, so a line repeating an item already kept gains
    nothing for it: paths, URLs, SHAs, identifiers, numbers, errors, user constraints and
    decisions. Whole-line items (tool-call commands, earlier summary lines, the task statement)
    are keyed by the line itself.
    """
    is_task = unit.kind in ("user", "agent") and unit.segment == first_user_segment
    items, first = _line_items(unit.text, unit.kind, is_task)
    return dict(items), first


#: Lines whose items are remembered: every setting of a grid summarizes the same lines again
#: (a 250-turn session has 87k distinct lines).
_LINE_ITEMS_KEPT = 1 << 17

#: A line's items and where the first starts (:func:`_line_items`).
LineItems = tuple[tuple[tuple[tuple[str, str], float], ...], int]
#: ``(text, kind, is_task)``: what a line's items depend on.
LineKey = tuple[str, str, bool]
_LINE_ITEMS: dict[LineKey, LineItems] = {}


def _line_items(text: str, kind: str, is_task: bool) -> LineItems:
    """A line's items (remembered: :data:`_LINE_ITEMS_KEPT` lines, then forgotten all at once)."""
    key = (text, kind, is_task)
    held = _LINE_ITEMS.get(key)
    if held is None:
        if len(_LINE_ITEMS) >= _LINE_ITEMS_KEPT:
            _LINE_ITEMS.clear()
        held = _LINE_ITEMS[key] = _extract_line_items(text, kind, is_task)
    return held


def remembered_lines() -> dict[LineKey, LineItems]:
    """Every line's items this process has extracted: what another process summarizing the same conversation
    takes (:func:`remember_lines`) instead of extracting them again (the first extraction of a long session's
    lines is about a third of its first anchors replays)."""
    return dict(_LINE_ITEMS)


def remember_lines(lines: dict[LineKey, LineItems]) -> None:
    """Take lines' items another process extracted (:func:`remembered_lines`): the same values it would find."""
    if len(_LINE_ITEMS) + len(lines) > _LINE_ITEMS_KEPT:
        _LINE_ITEMS.clear()
    _LINE_ITEMS.update(lines)


def forget_lines() -> None:
    """Forget every line's items and every segment's candidate lines (a fresh start: every line extracted again)."""
    _LINE_ITEMS.clear()
    _segment_candidates.cache_clear()


def _extract_line_items(text: str, kind: str, is_task: bool) -> LineItems:
    items: dict[tuple[str, str], float] = {}
    first = len(text)
    for anchor in anchors_in_text(text, _ANCHOR_ROLE.get(kind, "tool")):
        if len(anchor.value) < 3 or anchor.type not in ANCHOR_WEIGHTS:
            continue
        items.setdefault(anchor.key, ANCHOR_WEIGHTS[anchor.type])
        where = text.find(anchor.value)
        first = min(first, max(where, 0))
    if kind == "tool_call":
        items[("command", _line_key(text))] = ANCHOR_WEIGHTS["command"]
        first = 0
    if kind == "checkpoint":
        items[("checkpoint", _line_key(text))] = ANCHOR_WEIGHTS["checkpoint"]
        first = 0
    if is_task:
        items[("task", _line_key(text))] = ANCHOR_WEIGHTS["task"]
        first = 0
    if kind == "tool_result":
        if any(item_type == "error" for item_type, _ in items):
            items[("error", _line_key(text))] = ANCHOR_WEIGHTS["error"]
        # Tool output is mostly raw material (code, listings); the dialogue says what mattered.
        items = {item: weight * TOOL_OUTPUT_WEIGHT for item, weight in items.items()}
    return tuple(items.items()), (0 if first == len(text) else first)


def _line_key(text: str) -> str:
    """A whole-line item's value: the line in lower case, its white space runs one space."""
    return " ".join(text.lower().split())


#: A line :class:`Anchors` may take, as one segment remembers it: its place among the segment's lines, its text
#: clipped around its first item, its items, its cost and its first key in the choice (``-gain / cost`` with
#: nothing covered yet: its items' whole weight).
CandidateLine = tuple[int, str, dict[tuple[str, str], float], int, float]


@lru_cache(maxsize=_SEGMENTS_KEPT)
def _segment_candidates(
    text: str, kind: str, label: str, is_task: bool, max_line_chars: int
) -> tuple[int, tuple[CandidateLine, ...]]:
    """The lines of one segment as :class:`Anchors` takes them: how many lines it has (those :func:`line_units`
    gives), and each line carrying items (:func:`anchor_items`) as a :data:`CandidateLine` (cost: :func:`unit_cost`).
    Remembered per segment: a line at a time, looking up and copying each line's items was most of a long session's
    anchors summary (the items are shared, never changed), and so was weighing every line again for the first
    choice of every summary."""
    lines = 0
    kept = []
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            continue
        items, first = _line_items(line, kind, is_task)
        lines += 1
        if not items:
            continue
        clipped = _clip(line, max_line_chars, first)
        weights = dict(items)
        cost = unit_cost(TranscriptLine(0, 0, label, kind, clipped))
        kept.append((lines - 1, clipped, weights, cost, -sum(weights.values()) / cost))
    return lines, tuple(kept)


class Anchors(OfflineSummarizer):
    """Keep the lines that carry exact items a coding agent needs later, within the budget.

    Keeps, by weight per newly covered item (:data:`ANCHOR_WEIGHTS`): user constraints
    (always/never/must/don't sentences from the user), the task statement (the first user
    message), error lines, tool-call commands (name and JSON arguments), decisions and
    conclusions, lines of earlier summaries, then file paths, URLs, commit SHAs, identifiers,
    numbers with units and versions; items in tool output count :data:`TOOL_OUTPUT_WEIGHT`
    (0.6) of their weight, since the dialogue says what mattered. Lines are chosen greedily by
    newly covered weight per token (a line repeating items already kept gains nothing for them), clipped to
    ``max_line_chars`` around their first item, and shown in original order with their
    transcript labels. Lines carrying no item are dropped.
    """

    name = "anchors"
    selects_by_anchors = True

    def __init__(self, budget: Budget = CLASS_DEFAULT, *, max_line_chars: int = 300) -> None:
        super().__init__(budget)
        if isinstance(max_line_chars, bool) or not isinstance(max_line_chars, int) or max_line_chars < 20:
            raise SettingError(f"anchors: max_line_chars must be an int >= 20, got {max_line_chars!r}")
        self.max_line_chars = max_line_chars

    def _options(self) -> dict[str, object]:
        return {} if self.max_line_chars == 300 else {"max_line_chars": self.max_line_chars}

    def _segment_lines(self, segs: Sequence[Segment]) -> Iterator[tuple[int, int, tuple[CandidateLine, ...]]]:
        """Per segment, in order: its number, the order of its first line (as :func:`line_units` numbers lines)
        and its remembered candidate lines (:func:`_segment_candidates`)."""
        first_user = next((i for i, s in enumerate(segs) if s.kind in ("user", "agent") and s.text), None)
        order = 0
        for number, segment in enumerate(segs):
            is_task = segment.kind in ("user", "agent") and number == first_user
            lines, kept = _segment_candidates(segment.text, segment.kind, segment.label, is_task, self.max_line_chars)
            yield number, order, kept
            order += lines

    def candidates(self, segs: Sequence[Segment]) -> list[tuple[TranscriptLine, dict[tuple[str, str], float], int]]:
        """The lines of a transcript that carry items, in order: each line (clipped around its first item, numbered
        as :func:`line_units` numbers it), its items (:func:`anchor_items`) and its cost (:func:`unit_cost`)."""
        return [
            (TranscriptLine(order + position, number, segs[number].label, segs[number].kind, text), items, cost)
            for number, order, kept in self._segment_lines(segs)
            for position, text, items, cost, _ in kept
        ]

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        segs = segments(messages)
        if limit is None:
            return join_units([unit for unit, _, _ in self.candidates(segs)])
        # The choice handles lines as the segments remember them (a line object each only for those taken).
        heap: list[tuple[float, int, int]] = []
        lines: list[CandidateLine] = []
        numbers: list[int] = []
        for number, order, kept in self._segment_lines(segs):
            for line in kept:
                heap.append((line[4], order + line[0], len(lines)))
                lines.append(line)
                numbers.append(number)
        if not lines:
            return ""
        covered: set[tuple[str, str]] = set()

        def gain(items: dict[tuple[str, str], float]) -> float:
            return sum(weight for item, weight in items.items() if item not in covered)

        heapq.heapify(heap)
        selected: list[tuple[float, TranscriptLine]] = []
        remaining = limit
        while heap and remaining > 2:
            _, order, n = heapq.heappop(heap)
            _, text, items, cost, first_key = lines[n]
            # nothing of it covered: the gain is its first one (the same sum, in the same order)
            current = -first_key if covered.isdisjoint(items) else gain(items) / cost
            if current <= 0:
                continue
            if heap and current < -heap[0][0] - 1e-12:
                heapq.heappush(heap, (-current, order, n))
                continue
            if cost > remaining:
                continue
            segment = segs[numbers[n]]
            selected.append((current, TranscriptLine(order, numbers[n], segment.label, segment.kind, text)))
            covered.update(items)
            remaining -= cost
        return _fit_selection(selected, limit)
