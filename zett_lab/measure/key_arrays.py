"""A conversation's distinct anchors as arrays (:class:`KeyArrays`): what lets one compaction attempt ask about
tens of thousands of anchors at once, built by :class:`~zett_lab.measure.message_index.ConversationIndex`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..load.anchors import AnchorKey


@dataclass(frozen=True)
class KeyArrays:
    """The conversation's distinct anchors as arrays, for measuring tens of thousands of them per attempt at once.

    Key ``i`` is ``keys[i]`` (in order of first occurrence). ``occurrences`` and ``uses`` hold
    ``i * stride + message index`` sorted, so the first message of ``[start, end)`` holding
    each of many keys is one ``searchsorted`` (:meth:`first_in`); ``rank`` is the position of an
    occurrence among its message's anchors (what orders a span's anchors within a message).
    """

    keys: list[AnchorKey]
    stride: int
    occurrences: np.ndarray
    rank: np.ndarray
    #: The agent's uses (its text, tool-call arguments, commands), in any spelling: the agent writing
    #: ``pvlib/tools.py`` uses ``pvlib.tools`` (a deeper path shows a folder, it does not use it).
    uses: np.ndarray
    rarity: np.ndarray
    #: Per key: whether the system prompt shows it in any spelling.
    system: np.ndarray
    #: ``i * stride + message index`` of every message showing key ``i`` in any spelling
    #: (:func:`~zett_lab.load.anchor_forms.spellings`), or, a name, as words of its text (:class:`~zett_lab.measure.spellings.Words`; the
    #: agent's own messages but as anchors: what the agent writes is not shown to it), sorted.
    seen: np.ndarray
    #: The same for the words of the agent's own messages: in the kept tail they are in view like any other.
    written: np.ndarray
    #: ``i * stride + message index`` of every agent message whose tool calls introduce identifier ``i`` as a new
    #: local (:attr:`~zett_lab.load.definitions.Definitions.fresh`: a variable, parameter or alias), sorted.
    fresh: np.ndarray
    #: ... of every agent message whose code defines it in any way (:attr:`~zett_lab.load.definitions.Definitions.every`).
    defined: np.ndarray
    #: Per key: an identifier the agent wrote before any message, the system prompt or harness context showed it
    #: in any spelling: a name it knew (a library's API) or made up.
    agent_first: np.ndarray
    #: Per key: not vocabulary any agent could write unseen (:func:`~zett_lab.load.vocabulary.is_generic`).
    specific: np.ndarray
    #: A command made of parts: (command key id, id of one of its specific parts) for every command whose
    #: specific paths, identifiers, URLs, numbers and SHAs are all keys of the conversation. Such a command is
    #: in view where all its parts are (``python reproduce_bug.py`` where ``/repo/reproduce_bug.py`` is shown).
    part_owner: np.ndarray
    part_id: np.ndarray
    #: Per harness context entry (:class:`~zett_lab.load.conversation.HarnessContext`): the messages it held for,
    #: ``[start, end)``, and the ids of the keys it shows in any spelling.
    harness_start: np.ndarray
    harness_end: np.ndarray
    harness_ids: list[np.ndarray]
    sentence: np.ndarray
    artifact: np.ndarray
    #: Per key: the last message holding it.
    last: np.ndarray
    #: Index into :data:`~zett_lab.load.anchors.ANCHOR_TYPES`.
    type_code: np.ndarray
    #: Index into ``needles`` (-1: found by key or sentence only).
    needle_id: np.ndarray
    needles: list[str]
    #: Per key, as object arrays (taken by key id into ``losses.anchors``): its type, comparison form,
    #: and the anchor as first written.
    type_names: np.ndarray
    normalized: np.ndarray
    first_values: np.ndarray
    #: One entry per (tool call, artifact key of its arguments), in message order: the message holding the
    #: call, the call's number among the conversation's tool calls, and the key's id.
    call_message: np.ndarray
    call_number: np.ndarray
    call_key: np.ndarray

    def first_in(self, codes: np.ndarray, ids: np.ndarray, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """Per key of ``ids``: the first message in ``[start, end)`` in ``codes`` (-1: none), and where it is in ``codes``."""
        base = ids * self.stride
        at = np.searchsorted(codes, base + start)
        if not len(codes):
            return np.full(len(ids), -1, dtype=np.int64), at
        clipped = np.minimum(at, len(codes) - 1)
        value = codes[clipped]
        found = (at < len(codes)) & (value < base + min(max(start, end), self.stride))
        return np.where(found, value - base, -1), clipped

    def shown_between(
        self, ids: np.ndarray, start: int, ends: np.ndarray, codes: np.ndarray | None = None
    ) -> np.ndarray:
        """Per key of ``ids``: whether a message in ``[start, ends[i])`` shows it in any spelling (in ``codes``:
        ``seen`` unless given)."""
        codes = self.seen if codes is None else codes
        base = ids * self.stride
        at = np.searchsorted(codes, base + start)
        if not len(codes):
            return np.zeros(len(ids), dtype=bool)
        value = codes[np.minimum(at, len(codes) - 1)]
        return (at < len(codes)) & (value < base + np.clip(ends, start, self.stride))

    def shown_in(self, start: int, end: int, written: bool = False) -> np.ndarray:
        """Per key: whether a message in ``[start, end)`` shows it in any spelling (``written``: of
        :attr:`written`, else of :attr:`seen`): :meth:`shown_between` for every key at once, read from the
        messages' side (a span's tail is a few messages, the span's keys tens of thousands)."""
        messages, keys = self._written_by_message if written else self._seen_by_message
        low, high = np.searchsorted(messages, [start, max(start, end)])
        shown = np.zeros(len(self.keys), dtype=bool)
        shown[keys[low:high]] = True
        return shown

    @cached_property
    def _seen_by_message(self) -> tuple[np.ndarray, np.ndarray]:
        return _by_message(self.seen, self.stride)

    @cached_property
    def _written_by_message(self) -> tuple[np.ndarray, np.ndarray]:
        return _by_message(self.written, self.stride)

    def by_parts(self, ids: np.ndarray, shown: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """Per key of ``ids``: whether it is a command made of parts (:attr:`part_owner`) and ``shown(part ids,
        their commands' positions in ids)`` holds for every part."""
        position_of = np.full(len(self.keys), -1, dtype=np.int64)
        position_of[ids] = np.arange(len(ids))
        position = position_of[self.part_owner]
        mine = position >= 0
        position, parts = position[mine], self.part_id[mine]
        if not len(parts):
            return np.zeros(len(ids), dtype=bool)
        hidden = np.bincount(position, weights=~shown(parts, position), minlength=len(ids))
        return (np.bincount(position, minlength=len(ids)) > 0) & (hidden == 0)

    def harness_shown(self, ids: np.ndarray, start: int, ends: np.ndarray) -> np.ndarray:
        """Per key of ``ids``: whether harness context held for a message in ``[start, ends[i]]`` shows it."""
        shown = np.zeros(len(ids), dtype=bool)
        for entry_start, entry_end, entry_ids in zip(
            self.harness_start, self.harness_end, self.harness_ids, strict=True
        ):
            if entry_end > start:
                shown |= np.isin(ids, entry_ids) & (ends >= entry_start)
        return shown


def _by_message(codes: np.ndarray, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """``key id * stride + message index`` codes as (message indices sorted, their key ids)."""
    messages = codes % stride
    order = np.argsort(messages, kind="stable")
    return messages[order], codes[order] // stride
