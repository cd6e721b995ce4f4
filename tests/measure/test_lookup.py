"""Finding many needles in a text: the one scan answers what one search per needle answers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.measure import lookup
from zett_lab.measure.lookup import NeedleSet, _find_bounded

_CHARS = "a ./1"


@settings(max_examples=1500, deadline=None)
@given(
    needles=st.lists(st.text(_CHARS, min_size=1, max_size=4), min_size=1, max_size=12),
    start=st.text(_CHARS, max_size=24),
    edits=st.lists(st.tuples(st.text(_CHARS, max_size=6), st.text(_CHARS, max_size=6), st.booleans()), max_size=8),
)
def test_a_text_quoting_an_earlier_one_is_scanned_around_it_with_the_same_answer(needles, start, edits):
    """Each text quotes the one before between new characters (an observation mask quotes its previous summary),
    or is new: a set that remembers what it scanned finds what one search per needle finds, seams included."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lookup, "_EDGE", 3)
        patch.setattr(lookup, "_SHORTEST_KEPT", 6)
        remembering = NeedleSet(needles)
        text = start
        for before, after, quoted in [("", "", False), *edits]:
            text = before + text + after if quoted else before + after + start
            wanted = frozenset(n for n in needles if _find_bounded(text, n))
            assert remembering.found_in(text) == wanted, (text, needles)


def test_mask_summaries_are_scanned_around_the_summary_they_quote_with_the_same_answer(monkeypatch):
    """A mask replay's summaries, in order, through the conversation's needles: the same needles as a fresh
    scan of each, and all but the first scanned around an earlier one."""
    from tests.helpers import coding_conversation
    from zett_lab.load.anchors import loose
    from zett_lab.measure.message_index import ConversationIndex
    from zett_lab.replay import replay

    monkeypatch.setattr(lookup, "_SHORTEST_KEPT", 256)
    conversation = coding_conversation(turns=30, output_lines=40, cid="mask")
    trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, summarizer="mask", cache=False)
    texts = [loose(t) for t in trace.compactions["summary_text"] if isinstance(t, str)]
    needles = ConversationIndex(conversation.messages).needles
    around = 0
    for text in texts:
        quoted = any(text.find(s.core) >= 0 for s in needles._scanned)
        fresh = NeedleSet(ConversationIndex(conversation.messages).arrays.needles).found_in(text)
        assert needles.found_in(text) == fresh
        around += quoted
    assert len(texts) >= 4 and around >= len(texts) - 1 and any(needles.found_in(t) for t in texts)
