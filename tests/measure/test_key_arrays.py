"""A conversation's anchors as arrays: what is shown in a range of messages, asked from either side."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import coding_conversation
from zett_lab.collector import collector_paused
from zett_lab.measure.message_index import ConversationIndex
from zett_lab.measure.spellings import _NUMBER, _WORD, KEY_LINES, Spellings, Words


def test_what_a_range_of_messages_shows_is_the_same_asked_per_key_or_per_message():
    """:meth:`KeyArrays.shown_in` (every key at once, from the messages' side) answers what
    :meth:`KeyArrays.shown_between` answers key by key, for the shown and the agent's written codes, over
    every range of a conversation's messages (empty and reversed ones included)."""
    conversation = coding_conversation(turns=6, output_lines=20, cid="shown-in")
    arrays = ConversationIndex(conversation.messages).arrays
    ids = np.arange(len(arrays.keys))
    n = len(conversation.messages)
    assert arrays.seen.size and arrays.written.size
    for start in range(n + 1):
        for end in range(start - 1, n + 2):
            ends = np.full(len(ids), end)
            assert np.array_equal(arrays.shown_in(start, end), arrays.shown_between(ids, start, ends)), (start, end)
            assert np.array_equal(
                arrays.shown_in(start, end, written=True), arrays.shown_between(ids, start, ends, arrays.written)
            ), (start, end)
    assert arrays.shown_in(0, n).any()


def test_building_an_index_pauses_the_garbage_collector_and_leaves_it_as_it_was():
    """:func:`collector_paused` stops cyclic collections while an index is built (its objects hold no cycle), and the
    collector runs again afterwards, also after an error; one that was off stays off; nested pauses (a thread
    building while another reads) leave it running."""
    conversation = coding_conversation(turns=2, output_lines=5, cid="paused")
    collections = gc.get_stats()[0]["collections"]
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        ConversationIndex(conversation.messages).built()
        assert gc.get_stats()[0]["collections"] == collections
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        ConversationIndex(conversation.messages).built()
        assert not gc.isenabled()
    finally:
        gc.enable()


def _keyed_line_by_line(words: Words, lowered: str) -> list[int]:
    """What :meth:`Words._keyed_in` found before it first asked whether the text holds a keyed value at all: every
    line's numbers looked up, the key searched near each."""
    lines = lowered.splitlines()
    found = []
    for at, line in enumerate(lines):
        for value in set(_NUMBER.findall(line)):
            for i, key in words._keyed.get(value, ()):
                near = "\n".join(lines[max(0, at - KEY_LINES) : at + KEY_LINES + 1])
                if key in _WORD.findall(near):
                    found.append(i)
    return found


_KEYED_KEYS = [("number", "port 6543"), ("number", "n_ar 1.29"), ("number", "retries 3"), ("path", "src/a.py")]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["port", "n_ar", "retries", "6543", "1.29", "3", "12", ".", "a", " ", "\n", "\r\n", "\r", "\x0c", "\u2028"]
        )
    )
)
def test_keyed_numbers_are_found_as_when_every_line_was_looked_up(pieces):
    """Only the lines holding a keyed value are read, and the words near each found once: the same ids, in the same
    order, as looking every line up (whatever breaks the lines)."""
    words = Words(Spellings(_KEYED_KEYS))
    lowered = "".join(pieces)
    assert words._keyed_in(lowered) == _keyed_line_by_line(words, lowered)
