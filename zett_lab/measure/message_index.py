"""Per-conversation anchor lookups shared by every compaction attempt of a trace.

Which anchors each message holds, where each anchor occurs and where the user or the agent
uses it again, the artifact anchors of tool calls, and how rare each anchor is. A sweep or a
comparison measures one conversation many times, so the last few indexes are kept.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage

from ..load.anchors import ARTIFACT_TYPES, AnchorKey, action_keys, loose, message_anchors, message_keys, tool_call_keys
from ..load.text import message_text
from .lookup import NeedleSet, needle_of


def _first_in(positions: Sequence[int], start: int, end: int) -> int | None:
    """First position in [start, end) of a sorted list, or None."""
    at = bisect_left(positions, start)
    return positions[at] if at < len(positions) and positions[at] < end else None


#: Share of a user message's lines seen in earlier user messages that makes it a re-injected copy.
REPEATED_USER_TEXT = 0.8


def _repeats_user_text(message: Any, seen_lines: set[str]) -> bool:
    """Whether a user message mostly repeats earlier user messages (instructions a harness re-injects);
    records its lines. A repeat is no new use of what it mentions."""
    if not isinstance(message, UserMessage) or isinstance(message, CompactedMessage):
        return False
    lines = {line.strip() for line in message_text(message).splitlines() if line.strip()}
    repeated = bool(lines) and len(lines & seen_lines) >= REPEATED_USER_TEXT * len(lines)
    seen_lines |= lines
    return repeated


class ConversationIndex:
    """Per-conversation lookups: anchors per message, occurrences and uses per key, tool calls, rarity."""

    def __init__(self, messages: Sequence[Any]) -> None:
        self.messages = messages
        self.first_value: dict[AnchorKey, str] = {}
        self.occurrences: dict[AnchorKey, list[int]] = {}
        self.uses: dict[AnchorKey, list[int]] = {}
        self.keys_by_message: list[tuple[AnchorKey, ...]] = []
        self.tool_calls: list[tuple[int, frozenset[AnchorKey]]] = []
        self.system_keys: set[AnchorKey] = set()
        user_lines: set[str] = set()
        for index, message in enumerate(messages):
            if isinstance(message, SystemMessage):
                # sent with every step: its anchors never need a summary
                self.system_keys.update(message_keys(message))
                self.keys_by_message.append(())
                continue
            keys = []
            for anchor in message_anchors(message):
                key = anchor.key
                keys.append(key)
                self.first_value.setdefault(key, anchor.value)
                self.occurrences.setdefault(key, []).append(index)
            self.keys_by_message.append(tuple(keys))
            if not _repeats_user_text(message, user_lines):
                for key in action_keys(message):
                    self.uses.setdefault(key, []).append(index)
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls or ():
                    call_keys = frozenset(k for k in tool_call_keys(call) if k[0] in ARTIFACT_TYPES)
                    if call_keys:
                        self.tool_calls.append((index, call_keys))
        self.dialogue_messages = sum(1 for m in messages if not isinstance(m, SystemMessage))
        self._texts: dict[int, str] = {}
        self._loose: dict[int, str] = {}
        self._last_span: tuple[int, int, dict[AnchorKey, int]] = (0, 0, {})
        self._needles: NeedleSet | None = None
        self._rarity: dict[AnchorKey, float] = {}

    @property
    def needles(self) -> NeedleSet:
        """Every anchor's needle, for finding all of them in a summary in one scan (built once)."""
        if self._needles is None:
            self._needles = NeedleSet(needle_of(key) for key in self.occurrences)
        return self._needles

    def rarity(self, key: AnchorKey) -> float:
        """How rare the item is in the conversation, 0..1: 1 in at most two messages, 0 in every message
        (``log(N/df) / log(N/2)`` over N dialogue messages), so common names weigh little in NAR."""
        value = self._rarity.get(key)
        if value is None:
            value = self._rarity[key] = self._rarity_of(key)
        return value

    def _rarity_of(self, key: AnchorKey) -> float:
        n = self.dialogue_messages
        df = len(self.occurrences.get(key, ()))
        if n <= 2 or df <= 2:
            return 1.0
        return max(0.0, min(1.0, math.log(n / df) / math.log(n / 2)))

    def span_keys(self, start: int, end: int) -> dict[AnchorKey, int]:
        """Distinct keys of messages[start:end] with the first message index holding each (do not modify).

        Spans are cumulative (each compaction's span extends the previous one's), so the last
        answer is extended rather than rebuilt: linear in the conversation, not quadratic.
        """
        last_start, last_end, last = self._last_span
        if last_start == start and last_end <= end:
            if last_end == end:
                return last
            found, begin = dict(last), last_end
        else:
            found, begin = {}, start
        for index in range(begin, end):
            for key in self.keys_by_message[index]:
                found.setdefault(key, index)
        self._last_span = (start, end, found)
        return found

    def occurs(self, key: AnchorKey, start: int, end: int) -> int | None:
        """First index in [start, end) holding the key, or None."""
        return _first_in(self.occurrences.get(key, ()), start, end)

    def used(self, key: AnchorKey, start: int, end: int) -> int | None:
        """First index in [start, end) where the user or the agent uses the key (not a tool result), or None."""
        return _first_in(self.uses.get(key, ()), start, end)

    def text(self, index: int) -> str:
        text = self._texts.get(index)
        if text is None:
            text = message_text(self.messages[index])
            self._texts[index] = text
        return text

    def loose(self, index: int) -> str:
        value = self._loose.get(index)
        if value is None:
            value = self._loose[index] = loose(self.text(index))
        return value

    def joined(self, start: int, end: int) -> str:
        return "\n".join(self.text(i) for i in range(start, end))


#: Indexes of the last few message lists: a sweep or a comparison measures one conversation many times.
_INDEXES: dict[int, tuple[Sequence[Any], int, ConversationIndex]] = {}


def index_of(messages: Sequence[Any]) -> ConversationIndex:
    held = _INDEXES.get(id(messages))
    if held is not None and held[0] is messages and held[1] == len(messages):
        return held[2]
    if len(_INDEXES) >= 4:
        _INDEXES.clear()
    index = ConversationIndex(messages)
    _INDEXES[id(messages)] = (messages, len(messages), index)
    return index
