"""Which of a conversation's anchor keys each summary line holds, read once per line and conversation
(:class:`LineKeys`), and given back by an earlier run as a :class:`LineTable`.

The offline summarizers' summaries are lines joined by single line breaks, and a summary's anchor keys are its
lines' (:func:`~zett_lab.load.anchors.anchor_keys`): the summaries of a sweep's replays of one conversation
repeat each other's lines (a long session's 642 summaries have 1.9 M lines, 36 k distinct), so each distinct
line is read once. A line's keys depend only on its text and the code reading it, so a report run again over
the same conversation can start from the lines an earlier run read (:mod:`~zett_lab.study.kept_measuring`
keeps them beside the summary cache): extracting a long session's summary lines costs its workers ~1.5 s of
CPU per report, reading them back a hundredth of that.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import NamedTuple

from ..load.anchors import AnchorKey, anchor_keys
from .message_index import ConversationIndex


class LineTable(NamedTuple):
    """Lines and their anchor keys in a form quick to pickle and to read back (each key once, not a set per line):
    ``keys``, and per line the positions in ``keys`` of its keys."""

    keys: list[AnchorKey]
    lines: dict[str, tuple[int, ...]]


class LineKeys:
    """The key ids (into ``index.arrays.keys``) each summary line holds, for one conversation's index: a line is
    read once (:meth:`ids`), from a table an earlier run gave (:meth:`take`) or else by extracting it."""

    def __init__(self, index: ConversationIndex) -> None:
        index.arrays  # noqa: B018 - builds key_ids
        self._id_of = index.key_ids
        self._ids: dict[str, list[int]] = {}
        #: Lines extracted here and in no table yet (:meth:`table`), with their keys.
        self._extracted: dict[str, frozenset[AnchorKey]] = {}
        self._given = LineTable([], {})
        #: Per key of the given table, its id in the index (-1: not a key of this conversation).
        self._given_ids: list[int] = []

    def ids(self, line: str) -> list[int]:
        """The ids of the conversation's keys ``line`` holds."""
        ids = self._ids.get(line)
        if ids is None:
            given = self._given.lines.get(line)
            if given is None:
                keys = self._extracted[line] = anchor_keys(line)
                ids = [self._id_of[key] for key in keys if key in self._id_of]
            else:
                ids = [self._given_ids[at] for at in given if self._given_ids[at] >= 0]
            self._ids[line] = ids
        return ids

    @property
    def extracted(self) -> int:
        """Lines extracted here that no :meth:`table` holds yet."""
        return len(self._extracted)

    def take(self, table: LineTable) -> None:
        """Read the lines of ``table`` from it from now on, those not known here yet (an earlier run's: the same
        keys extracting them gives, for the same code)."""
        if not self._given.lines and not self._extracted:
            self._given, self._given_ids = table, self._key_ids(table.keys)
            return
        known = self._given.lines.keys() | self._extracted.keys()
        self._join(
            (line, [table.keys[at] for at in at_keys]) for line, at_keys in table.lines.items() if line not in known
        )

    def table(self) -> LineTable:
        """Every line known here as one table (what :meth:`take` reads back); the lines extracted here join the
        given ones (:attr:`extracted` is 0 after)."""
        self._join(self._extracted.items())
        self._extracted = {}
        return self._given

    def _join(self, lines: Iterable[tuple[str, Iterable[AnchorKey]]]) -> None:
        """Add ``lines`` (each with its keys) to the given table, each key held once."""
        keys = self._given.keys
        position = {key: at for at, key in enumerate(keys)}
        for line, found in lines:
            self._given.lines[line] = tuple(_positions(found, position, keys))
        self._given_ids.extend(self._key_ids(keys[len(self._given_ids) :]))

    def _key_ids(self, keys: Iterable[AnchorKey]) -> list[int]:
        return [self._id_of.get(key, -1) for key in keys]


def _positions(found: Iterable[AnchorKey], position: dict[AnchorKey, int], keys: list[AnchorKey]) -> Iterable[int]:
    """The positions of ``found`` in ``keys``, each key not in it yet appended."""
    for key in found:
        at = position.get(key)
        if at is None:
            at = position[key] = len(keys)
            keys.append(key)
        yield at


#: Per conversation index, its :class:`LineKeys`.
_LINE_KEYS: weakref.WeakKeyDictionary[ConversationIndex, LineKeys] = weakref.WeakKeyDictionary()


def line_keys(index: ConversationIndex) -> LineKeys:
    """The :class:`LineKeys` of a conversation's index (one per index and process: every trace of the conversation
    reads its lines through it)."""
    held = _LINE_KEYS.get(index)
    if held is None:
        held = _LINE_KEYS[index] = LineKeys(index)
    return held
