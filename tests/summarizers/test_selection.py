"""The anchors summarizer's choice made from the lines its segments remember is the greedy choice over its
candidate lines, one line object and one weighing per line per summary, as it was made before."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.summarizers.offline import selection
from zett_lab.summarizers.offline.base import budget_tokens
from zett_lab.summarizers.transcript import join_units, segments
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
