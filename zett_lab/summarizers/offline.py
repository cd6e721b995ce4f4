"""Offline summarizers: deterministic, no network, no key.

Each one is a zett-agent :class:`~zett_agent.model.AgentModel`: give it to the engine as the
compaction model and it answers the engine's summary request with a text built from the span
(``request.messages[1:-1]``, rendered as in :mod:`zett_lab.summarizers.transcript`).

============  ==============================================================================
name          keeps
============  ==============================================================================
extractive    the most central lines/sentences of the transcript (continuous LexRank over
              TF-IDF vectors), as many as fit the budget, in original order
anchors       the lines carrying exact items a coding agent needs later: user constraints,
              errors, decisions, tool-call commands, earlier summaries, file paths, URLs,
              identifiers, commit SHAs, numbers with units; greedy weighted coverage per token
truncate      the head and the tail of the transcript, with a marker for what was cut
mask          the whole transcript with every tool output replaced by
              ``[tool output omitted: 1,234 tokens]`` (observation masking)
============  ==============================================================================

Budgets: an ``int`` is a number of tokens; a ``float`` in (0, 1] is a share of the span's
tokens (the engine's count of the span). The budget bounds the summary *text*; the engine
adds its own ~13-token checkpoint prefix. A summary is never empty: when nothing fits, the
first characters of the transcript that fit are returned.

Example::

    >>> from zett_lab.summarizers import summarizer
    >>> model = summarizer("truncate:0.1")
    >>> model.identity
    'truncate(budget=0.1)'
"""

from __future__ import annotations

import heapq
import math
import numbers
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

import numpy as np
from zett_agent.messages import AnyMessage, AssistantMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, RetryOptions

from ..errors import SettingError
from ..load.anchors import anchors_in_text
from ..tokens import count_tokens
from .transcript import (
    Segment,
    Unit,
    count_text,
    join_units,
    segments,
    span_of,
    unit_cost,
)

Budget = int | float | None

_UNSET: Any = object()


def parse_budget(value: object, *, allow_none: bool = False, owner: str = "summarizer") -> Budget:
    """Validate a budget: tokens (int > 0) or a share of the span (float in (0, 1]).

    Strings are accepted as written in a spec (``"2000"``, ``"0.1"``). Raises
    :class:`~zett_lab.errors.SettingError` for anything else.
    """
    if value is None:
        if allow_none:
            return None
        raise SettingError(f"{owner}: a budget is required (tokens as an int, or a share of the span in (0, 1])")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            value = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            raise SettingError(
                f"{owner}: budget {value!r} is not a number (tokens as an int, or a share of the span in (0, 1])"
            ) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SettingError(f"{owner}: budget must be an int (tokens) or a float in (0, 1], not {value!r}")
    # numpy scalars (budgets taken from a grid) count as the Python numbers they are.
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(value, float):
        if not math.isfinite(value) or value <= 0 or value > 1:
            raise SettingError(
                f"{owner}: budget {value!r} must be a share of the span in (0, 1] "
                "(use an int for a number of tokens)"
            )
        return float(value)
    if value <= 0:
        raise SettingError(f"{owner}: budget must be positive, got {value}")
    return int(value)


def budget_tokens(budget: Budget, span_tokens: int) -> int | None:
    """The budget in tokens for a span of ``span_tokens`` (None: no limit)."""
    if budget is None:
        return None
    if isinstance(budget, float):
        return max(1, math.floor(budget * span_tokens))
    return budget


class OfflineSummarizer:
    """Base class: a deterministic summarizer usable as a zett-agent AgentModel.

    Subclasses implement :meth:`_summarize`. ``summarize(messages)`` is the synchronous entry
    point (handy in notebooks); ``stream(request)`` is what the engine calls.
    """

    #: Short name used in specs (``"truncate:0.1"``) and identities.
    name: ClassVar[str] = "offline"
    #: Budget used when none is given.
    default_budget: ClassVar[Budget] = 0.1
    #: Whether ``budget=None`` (no limit) is allowed.
    allows_unbounded: ClassVar[bool] = False
    #: Offline summarizers never fail transiently.
    retry = RetryOptions(max_retries=0)

    def __init__(self, budget: Budget = _UNSET) -> None:
        if budget is _UNSET:
            budget = self.default_budget
        self.budget = parse_budget(budget, allow_none=self.allows_unbounded, owner=self.name)

    # -- identity -------------------------------------------------------------------------------

    def _options(self) -> dict[str, object]:
        """Options besides the budget that change the output (shown in the identity)."""
        return {}

    @property
    def identity(self) -> str:
        """Stable description used as cache key and in traces, e.g. ``truncate(budget=0.1)``."""
        parts = [f"budget={self.budget!r}"]
        parts += [f"{key}={value!r}" for key, value in sorted(self._options().items())]
        return f"{self.name}({','.join(parts)})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity}>"

    # -- summarizing ------------------------------------------------------------------------------

    def summarize(self, messages: Sequence[AnyMessage]) -> str:
        """Summarize a span of messages (no instructions, no closing request); never empty."""
        messages = list(messages)
        limit = budget_tokens(self.budget, count_tokens(messages))
        text = self._summarize(messages, limit).strip()
        if not text:
            text = _fallback(messages, limit)
        return text

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:  # pragma: no cover
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer one engine summary request: one text delta, then the terminal response."""
        text = self.summarize(span_of(request))
        yield ModelEvent.text(text)
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content=text), finish_reason="stop"))


# -- shared helpers -----------------------------------------------------------------------------


def _fallback(messages: Sequence[AnyMessage], limit: int | None) -> str:
    """Something non-empty: the head of the transcript that fits, or a count of messages."""
    text = "\n".join(s.render() for s in segments(messages)).strip()
    if text and limit is not None:
        text = cut_prefix(text, limit)
    if not text.strip():
        text = f"[{len(messages)} messages with no text]"
    return text


def cut_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` with at most ``limit`` tokens (binary search on characters)."""
    if count_text(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_text(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def cut_suffix(text: str, limit: int) -> str:
    """The longest suffix of ``text`` with at most ``limit`` tokens."""
    if count_text(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_text(text[len(text) - middle :]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[len(text) - low :] if low else ""


def _fit_selection(selected: list[tuple[float, Unit]], limit: int) -> str:
    """Join selected units; while the exact count is over ``limit``, drop the lowest-valued."""
    selected = sorted(selected, key=lambda pair: (-pair[0], pair[1].order))
    text = join_units([unit for _, unit in selected])
    while selected and count_text(text) > limit:
        selected.pop()
        text = join_units([unit for _, unit in selected])
    return text


def head_tail(text: str, limit: int, head: float = 0.5) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` tokens, marking the cut.

    Whole lines are kept where possible; the line at each cut is shortened by characters
    to use the remaining budget. The marker says how many tokens were left out.
    """
    total = count_text(text)
    if total <= limit:
        return text
    lines = text.split("\n")
    costs = [count_text(line + "\n") for line in lines]
    marker_cost = count_text(f"\n[... {total:,} tokens omitted ...]\n")
    room = limit - marker_cost
    if room <= 0:
        return cut_prefix(text, limit)
    head_room = math.floor(room * head)
    for _ in range(8):
        tail_room = room - head_room
        head_lines, used = [], 0
        i = 0
        while i < len(lines) and used + costs[i] <= head_room:
            head_lines.append(lines[i])
            used += costs[i]
            i += 1
        if i < len(lines) and head_room - used > 8:
            partial = cut_prefix(lines[i], head_room - used - 1)
            if partial:
                head_lines.append(partial + "…")
        tail_lines: list[str] = []
        used_tail = 0
        j = len(lines) - 1
        while j > i and used_tail + costs[j] <= tail_room:
            tail_lines.insert(0, lines[j])
            used_tail += costs[j]
            j -= 1
        if j > i and tail_room - used_tail > 8:
            partial = cut_suffix(lines[j], tail_room - used_tail - 1)
            if partial:
                tail_lines.insert(0, "…" + partial)
        head_text = "\n".join(head_lines)
        tail_text = "\n".join(tail_lines)
        omitted = max(0, total - count_text(head_text) - count_text(tail_text))
        pieces = [p for p in (head_text, f"[... {omitted:,} tokens omitted ...]", tail_text) if p]
        result = "\n".join(pieces)
        excess = count_text(result) - limit
        if excess <= 0:
            return result
        room -= excess + 2
        head_room = math.floor(room * head)
        if room <= 0:
            break
    return cut_prefix(text, limit)


# -- truncate ---------------------------------------------------------------------------------------


class Truncate(OfflineSummarizer):
    """Keep the head and the tail of the span's transcript within the budget.

    Keeps: the first ``head`` share of the budget from the start of the transcript (usually the
    task statement), the rest from the end (the latest state), whole lines where possible,
    and a marker ``[... N tokens omitted ...]`` in between. Everything in the middle is lost.
    """

    name = "truncate"

    def __init__(self, budget: Budget = _UNSET, *, head: float = 0.5) -> None:
        super().__init__(budget)
        if isinstance(head, bool) or not isinstance(head, (int, float)) or not 0 <= head <= 1:
            raise SettingError(f"truncate: head must be a share in [0, 1], got {head!r}")
        self.head = float(head)

    def _options(self) -> dict[str, object]:
        return {} if self.head == 0.5 else {"head": self.head}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        text = "\n".join(s.render() for s in segments(messages))
        return text if limit is None else head_tail(text, limit, self.head)


# -- mask -------------------------------------------------------------------------------------------


def omitted_output(tokens: int) -> str:
    """The placeholder observation masking puts where a tool output of ``tokens`` tokens was."""
    return f"[tool output omitted: {tokens:,} {'token' if tokens == 1 else 'tokens'}]"


class Mask(OfflineSummarizer):
    """Observation masking (JetBrains, "The Complexity Trap", arXiv 2508.21433).

    Keeps: the whole transcript (user and agent messages, assistant text and reasoning, every
    tool call with its arguments, earlier summaries) with every tool output replaced by
    ``[tool output omitted: 1,234 tokens]`` (the engine's count of that tool message). Tool
    outputs of at most ``keep_output_tokens`` tokens are kept verbatim. With no budget
    (the default) nothing else is cut, so a span with few tool outputs gives a "summary" that
    is not smaller, which the engine discards; with a budget, the masked transcript is cut to
    its head and tail like :class:`Truncate`.
    """

    name = "mask"
    default_budget = None
    allows_unbounded = True

    def __init__(self, budget: Budget = _UNSET, *, keep_output_tokens: int = 0) -> None:
        super().__init__(budget)
        if isinstance(keep_output_tokens, bool) or not isinstance(keep_output_tokens, int) or keep_output_tokens < 0:
            raise SettingError(f"mask: keep_output_tokens must be a non-negative int, got {keep_output_tokens!r}")
        self.keep_output_tokens = keep_output_tokens

    def _options(self) -> dict[str, object]:
        return {"keep_output_tokens": self.keep_output_tokens} if self.keep_output_tokens else {}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        lines = []
        for segment in segments(messages):
            if segment.kind == "tool_result" and segment.tokens > self.keep_output_tokens:
                lines.append(f"[{segment.label}] {omitted_output(segment.tokens)}")
            else:
                lines.append(segment.render())
        text = "\n".join(lines)
        return text if limit is None else head_tail(text, limit)


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


def line_units(segs: Sequence[Segment], *, split_sentences: bool) -> list[Unit]:
    """Split segments into lines (and prose lines into sentences when asked)."""
    units: list[Unit] = []
    for number, segment in enumerate(segs):
        for line in segment.text.split("\n"):
            line = line.strip()
            if not line:
                continue
            pieces = _SENTENCE_END.split(line) if split_sentences and segment.kind in _PROSE else [line]
            for piece in pieces:
                piece = piece.strip()
                if piece:
                    units.append(Unit(len(units), number, segment.label, segment.kind, piece))
    return units


# -- extractive ---------------------------------------------------------------------------------------

_TERM = re.compile(r"[A-Za-z_][A-Za-z0-9_]+|\d+")


def _tfidf(texts: Sequence[str]):
    """Row-normalized TF-IDF matrix (scipy CSR) of ``texts``; rows with no terms are zero."""
    from scipy import sparse

    vocabulary: dict[str, int] = {}
    rows, cols, values = [], [], []
    for row, text in enumerate(texts):
        counts: dict[int, int] = {}
        for term in _TERM.findall(text.lower()):
            column = vocabulary.setdefault(term, len(vocabulary))
            counts[column] = counts.get(column, 0) + 1
        for column, count in counts.items():
            rows.append(row)
            cols.append(column)
            values.append(1.0 + math.log(count))
    n = len(texts)
    matrix = sparse.csr_matrix((values, (rows, cols)), shape=(n, max(1, len(vocabulary))), dtype=np.float64)
    document_frequency = np.bincount(np.asarray(cols, dtype=np.int64), minlength=matrix.shape[1])
    idf = np.log(n / np.maximum(document_frequency, 1))
    matrix = matrix @ sparse.diags(idf)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    inverse = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sparse.csr_matrix(sparse.diags(inverse) @ matrix), norms > 0


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

    def __init__(self, budget: Budget = _UNSET, *, max_unit_chars: int = 400) -> None:
        super().__init__(budget)
        if isinstance(max_unit_chars, bool) or not isinstance(max_unit_chars, int) or max_unit_chars < 20:
            raise SettingError(f"extractive: max_unit_chars must be an int >= 20, got {max_unit_chars!r}")
        self.max_unit_chars = max_unit_chars

    def _options(self) -> dict[str, object]:
        return {} if self.max_unit_chars == 400 else {"max_unit_chars": self.max_unit_chars}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        units = line_units(segments(messages), split_sentences=True)
        units = [
            Unit(u.order, u.segment, u.label, u.kind, _clip(u.text, self.max_unit_chars)) for u in units
        ]
        if not units:
            return ""
        if limit is None:
            return join_units(units)
        matrix, nonzero = _tfidf([u.text for u in units])
        scores = _lexrank(matrix, nonzero)
        ranking = sorted(range(len(units)), key=lambda i: (-scores[i], i))
        chosen: list[int] = []
        seen_texts: set[str] = set()
        remaining = limit
        for i in ranking:
            unit = units[i]
            key = unit.text.lower()
            if key in seen_texts:
                continue
            cost = unit_cost(unit)
            if cost > remaining:
                continue
            if chosen:
                similarity = matrix[chosen] @ matrix[i].T
                if similarity.nnz and similarity.max() >= 0.9:
                    continue
            chosen.append(i)
            seen_texts.add(key)
            remaining -= cost
            if remaining <= 2:
                break
        return _fit_selection([(float(scores[i]), units[i]) for i in chosen], limit)


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


def anchor_items(unit: Unit, *, first_user_segment: int | None = None) -> tuple[dict[tuple[str, str], float], int]:
    """Items a line carries, with their weights, and where the first one starts.

    Items are the anchors of :mod:`zett_lab.load.anchors` (the same definition the loss metrics
    measure), keyed by their normalized value, so a line repeating an item already kept gains
    nothing for it: paths, URLs, SHAs, identifiers, numbers, errors, user constraints and
    decisions. Whole-line items (tool-call commands, earlier summary lines, the task statement)
    are keyed by the line itself.
    """
    text = unit.text
    items: dict[tuple[str, str], float] = {}
    first = len(text)
    for anchor in anchors_in_text(text, _ANCHOR_ROLE.get(unit.kind, "tool")):
        if len(anchor.value) < 3 or anchor.type not in ANCHOR_WEIGHTS:
            continue
        items.setdefault(anchor.key, ANCHOR_WEIGHTS[anchor.type])
        where = text.find(anchor.value)
        first = min(first, max(where, 0))
    line_key = " ".join(text.lower().split())
    if unit.kind == "tool_call":
        items[("command", line_key)] = ANCHOR_WEIGHTS["command"]
        first = 0
    if unit.kind == "checkpoint":
        items[("checkpoint", line_key)] = ANCHOR_WEIGHTS["checkpoint"]
        first = 0
    if unit.kind in ("user", "agent") and unit.segment == first_user_segment:
        items[("task", line_key)] = ANCHOR_WEIGHTS["task"]
        first = 0
    if unit.kind == "tool_result":
        if any(kind == "error" for kind, _ in items):
            items[("error", line_key)] = ANCHOR_WEIGHTS["error"]
        # Tool output is mostly raw material (code, listings); the dialogue says what mattered.
        items = {item: weight * TOOL_OUTPUT_WEIGHT for item, weight in items.items()}
    return items, (0 if first == len(text) else first)


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

    def __init__(self, budget: Budget = _UNSET, *, max_line_chars: int = 300) -> None:
        super().__init__(budget)
        if isinstance(max_line_chars, bool) or not isinstance(max_line_chars, int) or max_line_chars < 20:
            raise SettingError(f"anchors: max_line_chars must be an int >= 20, got {max_line_chars!r}")
        self.max_line_chars = max_line_chars

    def _options(self) -> dict[str, object]:
        return {} if self.max_line_chars == 300 else {"max_line_chars": self.max_line_chars}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        segs = segments(messages)
        first_user = next((i for i, s in enumerate(segs) if s.kind in ("user", "agent") and s.text), None)
        raw_units = line_units(segs, split_sentences=False)
        candidates: list[tuple[Unit, dict[tuple[str, str], float], int]] = []
        for unit in raw_units:
            items, first = anchor_items(unit, first_user_segment=first_user)
            if not items:
                continue
            clipped = Unit(
                unit.order, unit.segment, unit.label, unit.kind, _clip(unit.text, self.max_line_chars, first)
            )
            candidates.append((clipped, items, unit_cost(clipped)))
        if not candidates:
            return ""
        if limit is None:
            return join_units([unit for unit, _, _ in candidates])
        covered: set[tuple[str, str]] = set()

        def gain(items: dict[tuple[str, str], float]) -> float:
            return sum(weight for item, weight in items.items() if item not in covered)

        heap = [(-gain(items) / cost, unit.order, n) for n, (unit, items, cost) in enumerate(candidates)]
        heapq.heapify(heap)
        selected: list[tuple[float, Unit]] = []
        remaining = limit
        while heap and remaining > 2:
            _, order, n = heapq.heappop(heap)
            unit, items, cost = candidates[n]
            current = gain(items) / cost
            if current <= 0:
                continue
            if heap and current < -heap[0][0] - 1e-12:
                heapq.heappush(heap, (-current, order, n))
                continue
            if cost > remaining:
                continue
            selected.append((current, unit))
            covered.update(items)
            remaining -= cost
        return _fit_selection(selected, limit)


#: Offline summarizers by spec name.
OFFLINE_SUMMARIZERS: dict[str, type[OfflineSummarizer]] = {
    "extractive": Extractive,
    "anchors": Anchors,
    "truncate": Truncate,
    "mask": Mask,
}
