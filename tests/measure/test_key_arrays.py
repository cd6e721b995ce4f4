"""A conversation's anchors as arrays: what is shown in a range of messages, asked from either side."""

from __future__ import annotations

import numpy as np

from tests.helpers import coding_conversation
from zett_lab.measure.message_index import ConversationIndex


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
