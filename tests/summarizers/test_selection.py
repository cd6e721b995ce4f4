"""The anchors and extractive summarizers' choices made from the lines their segments remember are the choices made
before from one line object per line per summary (anchors: weighing every line for the first heap; extractive:
line_units clipped, ranked by a sort of every unit)."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.summarizers.offline import selection
from zett_lab.summarizers.offline.base import budget_tokens
from zett_lab.summarizers.transcript import TranscriptLine, join_units, segments, unit_cost
from zett_lab.tokens import count_tokens


def _greedy_choice(anchors: selection.Anchors, messages, limit: int | None) -> str:
    """The former Anchors._summarize: every candidate line weighed by gain() for the first heap, and again at
    every pop."""
    candidates = anchors.candidates(segments(messages))
    if not candidates:
        return ""
    if limit is None:
        return join_units([unit for unit, _, _ in candidates])
    covered: set[tuple[str, str]] = set()

    def gain(items):
        return sum(weight for item, weight in items.items() if item not in covered)

    heap = [(-gain(items) / cost, unit.order, n) for n, (unit, items, cost) in enumerate(candidates)]
    heapq.heapify(heap)
    selected = []
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
    return selection._fit_selection(selected, limit)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_anchors_choice_is_the_greedy_choice_over_its_candidate_lines(fixture_conversations, data):
    conversation = data.draw(st.sampled_from(fixture_conversations))
    n = len(conversation.messages)
    start = data.draw(st.integers(0, max(0, n - 1)))
    end = data.draw(st.integers(start + 1, n)) if n else 0
    span = conversation.messages[start:end]
    budget = data.draw(st.one_of(st.integers(5, 3000), st.floats(0.01, 1.0), st.just(None)))
    max_line_chars = data.draw(st.sampled_from([300, 40]))
    anchors = selection.Anchors(max_line_chars=max_line_chars)
    limit = budget_tokens(budget, count_tokens(span))
    assert anchors._summarize(list(span), limit) == _greedy_choice(anchors, span, limit)


def _extractive_choice(extractive: selection.Extractive, messages, limit: int | None) -> str:
    """The former Extractive._summarize: line_units clipped one line object at a time, ranked by sorted()."""
    units = selection.line_units(segments(messages), split_sentences=True)
    units = [
        TranscriptLine(u.order, u.segment, u.label, u.kind, selection._clip(u.text, extractive.max_unit_chars))
        for u in units
    ]
    if not units:
        return ""
    if limit is None:
        return join_units(units)
    matrix, nonzero = selection._tfidf([u.text for u in units])
    scores = selection._lexrank(matrix, nonzero)
    ranking = sorted(range(len(units)), key=lambda i: (-scores[i], i))
    chosen = selection._Chosen(matrix)
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
        if chosen.max_similarity(i) >= 0.9:
            continue
        chosen.add(i)
        seen_texts.add(key)
        remaining -= cost
        if remaining <= 2:
            break
    return selection._fit_selection([(float(scores[i]), units[i]) for i in chosen.rows], limit)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_extractive_choice_is_the_choice_over_line_units(fixture_conversations, data):
    conversation = data.draw(st.sampled_from(fixture_conversations))
    n = len(conversation.messages)
    start = data.draw(st.integers(0, max(0, n - 1)))
    end = data.draw(st.integers(start + 1, n)) if n else 0
    span = conversation.messages[start:end]
    budget = data.draw(st.one_of(st.integers(5, 3000), st.floats(0.01, 1.0), st.just(None)))
    extractive = selection.Extractive(max_unit_chars=data.draw(st.sampled_from([400, 20, 60])))
    limit = budget_tokens(budget, count_tokens(span))
    assert extractive._summarize(list(span), limit) == _extractive_choice(extractive, span, limit)
