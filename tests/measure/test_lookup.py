"""Finding many needles in a text: the one scan answers what one search per needle answers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.measure import lookup
from zett_lab.measure.lookup import LooseLines, NeedleSet, QuotedLines, _find_bounded

_CHARS = "a ./1"


def _quoting_edits(chars: str) -> st.SearchStrategy[list[tuple[str, str, bool]]]:
    """Edits of a chain of texts (:func:`_quoting_chain`): new characters before and after, and whether the text
    quotes the one before."""
    piece = st.text(chars, max_size=6)
    return st.lists(st.tuples(piece, piece, st.booleans()), max_size=8)


def _quoting_chain(start: str, edits: list[tuple[str, str, bool]]) -> Iterator[str]:
    """``start``, then each text quoting the one before between new characters, or new (``start`` again)."""
    text = start
    for before, after, quoted in [("", "", False), *edits]:
        text = before + text + after if quoted else before + after + start
        yield text


@settings(max_examples=1500, deadline=None)
@given(
    needles=st.lists(st.text(_CHARS, min_size=1, max_size=4), min_size=1, max_size=12),
    start=st.text(_CHARS, max_size=24),
    edits=_quoting_edits(_CHARS),
)
def test_a_text_quoting_an_earlier_one_is_scanned_around_it_with_the_same_answer(needles, start, edits):
    """Each text quotes the one before between new characters (an observation mask quotes its previous summary),
    or is new: a set that remembers what it scanned finds what one search per needle finds, seams included."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lookup, "_EDGE", 3)
        patch.setattr(lookup, "_SHORTEST_KEPT", 6)
        remembering = NeedleSet(needles)
        for text in _quoting_chain(start, edits):
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


_LINE_CHARS = "ab\n"


@settings(max_examples=1500, deadline=None)
@given(start=st.text(_LINE_CHARS, max_size=24), edits=_quoting_edits(_LINE_CHARS))
def test_a_text_quoting_an_earlier_one_holds_the_union_over_its_lines_read_around_the_quote(start, edits):
    """Each text quotes the one before between new characters (line breaks at the seams included), or is new:
    what :class:`QuotedLines` answers is the union over every line of the text, read afresh."""
    import zlib

    size = 1 << 12

    def ids_of(line: str) -> list[int]:  # one id per distinct line: a line cut wrong answers another id
        return [zlib.crc32(line.encode()) % size]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lookup, "_SHORTEST_KEPT", 4)
        quoted_lines = QuotedLines(ids_of, size)
        for text in _quoting_chain(start, edits):
            wanted = np.zeros(size, dtype=bool)
            wanted[[i for line in text.split("\n") for i in ids_of(line)]] = True
            assert np.array_equal(quoted_lines(text), wanted), text


def test_mask_summaries_hold_the_keys_of_their_anchors_read_around_the_summary_they_quote():
    """A mask replay's summaries, in order: the conversation keys each holds, read line by line around the summary
    it quotes (:meth:`TraceView.summary_keys`), are those of its anchors (``anchor_keys`` of the whole text), and
    its loose form is the whole text's; all but the first read around an earlier one."""
    from tests.helpers import coding_conversation
    from zett_lab.load.anchors import anchor_keys, loose
    from zett_lab.measure.losses import _counter_for, _trace_view
    from zett_lab.replay import replay

    conversation = coding_conversation(turns=30, output_lines=40, cid="mask-keys")
    trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, summarizer="mask", cache=False)
    view = _trace_view(trace, _counter_for(trace.settings, None))
    size, id_of = len(view.index.arrays.keys), view.index.key_ids
    around = 0
    for cid, text in view.summaries.items():
        if not isinstance(text, str):
            continue
        summary = view.summary_index(cid)
        assert summary is not None
        around += any(summary.text.find(earlier.text) >= 0 for earlier in view.quoted_lines._texts)
        wanted = np.zeros(size, dtype=bool)
        wanted[[id_of[key] for key in anchor_keys(text) if key in id_of]] = True
        assert np.array_equal(view.summary_keys(summary), wanted)
        assert summary.loose_text == loose(text)
    summaries = len([text for text in view.summaries.values() if isinstance(text, str)])
    assert summaries >= 4 and around >= summaries - 1


_LOOSE_CHARS = "aB'./ \n\t\u2028Σ"


@settings(max_examples=1500, deadline=None)
@given(start=st.text(_LOOSE_CHARS, max_size=24), edits=_quoting_edits(_LOOSE_CHARS))
def test_the_loose_form_of_a_text_quoting_an_earlier_one_is_made_around_the_quote(start, edits):
    """Each text quotes the one before between new characters (quotes, ``./``, case, a final sigma and every kind
    of white space at the seams), or is new: :class:`LooseLines` gives the string :func:`loose` gives."""
    from zett_lab.load.anchors import loose

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lookup, "_SHORTEST_KEPT", 4)
        loose_lines = LooseLines()
        for text in _quoting_chain(start, edits):
            assert loose_lines(text) == loose(text), text


_CLAUSE_TOKENS = ["\n", "[", "[x] ", " ", "\t", "\u2028", ".", ";", "!", "- ", "* ", "1. ", "2) ", "# ", "> ", "•"]
_CLAUSE_TOKENS += ["never", "use", "tabs", "don't", "tests", "run", "it's"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_CLAUSE_TOKENS), max_size=40), st.lists(st.sampled_from(_CLAUSE_TOKENS), max_size=12))
def test_a_text_s_clauses_read_block_by_block_are_its_clauses_split_whole(tokens, sentence):
    """:class:`Clauses` reads a text block by block (cut at each line break before "["): the content-word sets
    of its clauses are those of both splits of the whole text, and a sentence is held as counting every one of
    them says."""
    import re

    from zett_lab.load.anchors import PARAGRAPH_SPLIT
    from zett_lab.measure.lookup import SENTENCE_MATCH, Clauses, _content_words, _negated, _sentence_words

    text = "".join(tokens)
    pieces = re.split(r"(?<=[.!?;])\s+|\n+|;\s*", text) + PARAGRAPH_SPLIT.split(text)
    whole = {words for words in map(_content_words, pieces) if words}
    clauses = Clauses(text)
    assert len(clauses.words) == len(whole) and set(clauses.words) == whole, text
    wanted, negated = _sentence_words("".join(sentence))
    expected = bool(wanted) and any(
        len(wanted & words) >= SENTENCE_MATCH * len(wanted) and _negated(words) == negated for words in whole
    )
    assert clauses.holds("".join(sentence)) == expected, (text, sentence)
