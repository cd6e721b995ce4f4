"""Per-conversation anchor lookups shared by every compaction attempt of a trace.

Which anchors each message holds, where each anchor occurs and where the agent uses it again, where it is
visible in any spelling (messages, the system prompt, what the harness re-sent), which names the agent
defines or wrote before seeing them, the artifact anchors of tool calls, and how rare and how specific
each anchor is. A sweep or a comparison measures one conversation many times, so the last few
indexes are kept.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage

from ..collector import collector_paused
from ..load.anchors import (
    ANCHOR_TYPES,
    ARTIFACT_TYPES,
    SENTENCE_TYPES,
    AnchorKey,
    action_keys,
    anchor_keys,
    clear_anchor_caches,
    loose,
    message_anchors,
    message_keys,
    tool_call_keys,
)
from ..load.api_fields import api_fields
from ..load.conversation import HarnessContext
from ..load.definitions import code_line, defined_names
from ..load.dependencies import dependencies
from ..load.file_formats import file_formats, names_format
from ..load.text import message_text
from ..load.vocabulary import is_generic
from .key_arrays import KeyArrays
from .lookup import NeedleSet, clear_needle_caches, needle_of
from .spellings import Spellings, Words

#: Each anchor type's code (its place in ANCHOR_TYPES).
_TYPE_CODES = {name: code for code, name in enumerate(ANCHOR_TYPES)}


def _sorted_codes(codes: Iterable[int]) -> np.ndarray:
    return np.unique(np.fromiter(codes, dtype=np.int64))


def _holds(codes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Per value of ``wanted``: whether the sorted array ``codes`` holds it."""
    if not len(codes):
        return np.zeros(len(wanted), dtype=bool)
    at = np.minimum(np.searchsorted(codes, wanted), len(codes) - 1)
    return codes[at] == wanted


def _first_in(positions: Sequence[int], start: int, end: int) -> int | None:
    """First position in [start, end) of a sorted list, or None."""
    at = bisect_left(positions, start)
    return positions[at] if at < len(positions) and positions[at] < end else None


#: Span starts whose first occurrences an index remembers (a trace's spans share one or two).
_STARTS_KEPT = 8


def _needle_ids(keys: Sequence[AnchorKey]) -> tuple[np.ndarray, list[str]]:
    """Per key, the id of its lookup needle (-1: none), and the distinct needles in id order."""
    index: dict[str, int] = {}
    ids = [index.setdefault(n, len(index)) if n else -1 for n in map(needle_of, keys)]
    return np.asarray(ids, dtype=np.int64), list(index)


def _objects(values: list[Any]) -> np.ndarray:
    """``values`` as a 1-d object array (each element kept as is, even a tuple)."""
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


@dataclass(frozen=True)
class SpanAnchors:
    """The distinct anchors of a span ``messages[start:end]``, in span order, and where each is after it.

    ``first_index``: the first span message holding it; ``in_tail``: shown, in any spelling, by
    the tail ``[end, n_recorded)`` or the system prompt; ``in_future``: anywhere from ``n_recorded``
    on; ``next_use``: the first message from ``n_recorded`` on where the agent uses it (its text,
    tool-call arguments or commands; -1: none); ``needed_later``: the agent could have had it from nowhere but the span at that
    use (see :meth:`ConversationIndex.span_anchors`). In order of the first span message holding
    each, then of its place among that message's anchors.
    """

    ids: np.ndarray
    first_index: np.ndarray
    in_tail: np.ndarray
    in_future: np.ndarray
    next_use: np.ndarray
    needed_later: np.ndarray


class ConversationIndex:
    """Per-conversation lookups: anchors per message, occurrences and uses per key, tool calls, rarity,
    where each key is shown in any spelling."""

    @collector_paused()
    def __init__(self, messages: Sequence[AnyMessage], harness_context: Sequence[HarnessContext] = ()) -> None:
        self.messages = messages
        self.harness_context = tuple(harness_context)
        self.first_value: dict[AnchorKey, str] = {}
        self.occurrences: dict[AnchorKey, list[int]] = {}
        self.uses: dict[AnchorKey, list[int]] = {}
        self.keys_by_message: list[tuple[AnchorKey, ...]] = []
        self.tool_calls: list[tuple[int, frozenset[AnchorKey]]] = []
        self.system_keys: set[AnchorKey] = set()
        self.system_messages: list[int] = []
        #: (agent message, name it defines, whether as a fresh local) in the form
        #: :func:`~zett_lab.load.definitions.defined_names` gives.
        self.definitions: list[tuple[int, str, bool]] = []
        #: (agent message, new local whose dotted names are chosen with it: ``Definitions.owners``).
        self.owners: list[tuple[int, str]] = []
        #: (agent message, anchor its new code holds as a literal map value: ``Definitions.data``).
        self.data: list[tuple[int, AnchorKey]] = []
        # the lines of code messages not the agent's showed so far: code the agent writes on one reproduces them
        shown_code: set[str] = set()
        for index, message in enumerate(messages):
            if not isinstance(message, AssistantMessage):
                shown_code.update(code_line(line) for line in message_text(message).splitlines())
            if isinstance(message, SystemMessage):
                # sent with every step: its anchors never need a summary
                self.system_keys.update(message_keys(message))
                self.system_messages.append(index)
                self.keys_by_message.append(())
                continue
            keys = []
            for anchor in message_anchors(message):
                key = anchor.key
                keys.append(key)
                self.first_value.setdefault(key, anchor.value)
                self.occurrences.setdefault(key, []).append(index)
            self.keys_by_message.append(tuple(keys))
            if isinstance(message, AssistantMessage):
                for key in action_keys(message):
                    self.uses.setdefault(key, []).append(index)
                defined = defined_names(message, shown_code)
                self.definitions.extend((index, name, name in defined.fresh) for name in defined.every | defined.fresh)
                self.owners.extend((index, name) for name in defined.owners)
                self.data.extend((index, key) for key in defined.data)
                # the tools' definitions go with every request: their names are never news
                self.system_keys.update(("identifier", call.name) for call in message.tool_calls or ())
                for call in message.tool_calls or ():
                    call_keys = frozenset(k for k in tool_call_keys(call) if k[0] in ARTIFACT_TYPES)
                    if call_keys:
                        self.tool_calls.append((index, call_keys))
        self.dialogue_messages = sum(1 for m in messages if not isinstance(m, SystemMessage))
        self._texts: dict[int, str] = {}
        self._loose: dict[int, str] = {}
        self._needles: NeedleSet | None = None
        self._rarity: dict[AnchorKey, float] = {}
        self._arrays: KeyArrays | None = None
        self._from_start: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        #: Key -> its index in ``arrays.keys``; needle -> its index in ``arrays.needles`` (set with ``arrays``).
        self.key_ids: dict[AnchorKey, int] = {}
        self.needle_ids: dict[str, int] = {}

    def built(self) -> dict[str, object]:
        """Everything the index holds but its messages, its arrays and needles built: what another process
        measuring the same conversation adopts (:func:`index_of` ``built=``) instead of building it again."""
        _ = self.needles
        return {name: value for name, value in vars(self).items() if name != "messages"}

    @property
    def needles(self) -> NeedleSet:
        """Every anchor's needle, for finding all of them in a summary in one scan (built once)."""
        if self._needles is None:
            with collector_paused():
                self._needles = NeedleSet(self.arrays.needles)
        return self._needles

    @property
    def arrays(self) -> KeyArrays:
        """The anchors as arrays (built once; see :class:`KeyArrays`)."""
        if self._arrays is None:
            with collector_paused():
                self._arrays = self._key_arrays()
                self.key_ids = {key: i for i, key in enumerate(self._arrays.keys)}
                self.needle_ids = {needle: i for i, needle in enumerate(self._arrays.needles)}
        return self._arrays

    def _key_arrays(self) -> KeyArrays:
        keys = list(self.occurrences)
        id_of = {key: i for i, key in enumerate(keys)}
        stride = len(self.messages) + 1
        occurrences, rank = self._occurrence_codes(id_of, stride)
        uses = [id_of[key] * stride + index for key, at in self.uses.items() if key in id_of for index in at]
        needle_id, needles = _needle_ids(keys)
        calls = self._call_codes(id_of)
        ids = np.arange(len(keys), dtype=np.int64)
        last = occurrences[np.searchsorted(occurrences, (ids + 1) * stride) - 1] - ids * stride
        spelled = Spellings(keys)
        words = Words(spelled)
        shown_words, written_words, system_words = self._word_codes(words, stride)
        harness = [entry for entry in self.harness_context if entry.start < (entry.end or stride)]
        harness_ids = [_shown_ids(entry.text, spelled, words) for entry in harness]
        system = spelled.shown_by(self.system_keys) | np.isin(ids, system_words)
        seen = np.union1d(spelled.widen(occurrences, stride), np.asarray(shown_words, dtype=np.int64))
        parts = _command_parts(keys, id_of)
        return KeyArrays(
            keys=keys,
            stride=stride,
            occurrences=occurrences,
            rank=rank,
            uses=spelled.widen(
                np.unique(np.asarray(uses, dtype=np.int64)),
                stride,
                folders=False,
                members_until=self._rivals_from(spelled, occurrences, stride),
            ),
            rarity=np.asarray([self.rarity(key) for key in keys], dtype=np.float64),
            system=system,
            seen=seen,
            written=np.unique(np.asarray(written_words, dtype=np.int64)),
            fresh=self._fresh_codes(spelled, stride),
            defined=_sorted_codes(
                i * stride + at for at, name, _ in self.definitions for i in spelled.identifiers_named(name)
            ),
            specific=self._specific(keys),
            part_owner=parts[:, 0],
            part_id=parts[:, 1],
            harness_start=np.asarray([entry.start for entry in harness], dtype=np.int64),
            harness_end=np.asarray([stride if entry.end is None else entry.end for entry in harness], dtype=np.int64),
            harness_ids=harness_ids,
            agent_first=self._agent_first(keys, seen, system, zip(harness, harness_ids, strict=True)),
            sentence=np.asarray([key[0] in SENTENCE_TYPES for key in keys], dtype=bool),
            artifact=np.asarray([key[0] in ARTIFACT_TYPES for key in keys], dtype=bool),
            last=last,
            type_code=np.asarray([_TYPE_CODES.get(key[0], -1) for key in keys], dtype=np.int64),
            needle_id=needle_id,
            needles=needles,
            type_names=_objects([key[0] for key in keys]),
            normalized=_objects([key[1] for key in keys]),
            first_values=_objects([self.first_value[key] for key in keys]),
            call_message=calls[:, 0],
            call_number=calls[:, 1],
            call_key=calls[:, 2],
        )

    @staticmethod
    def _rivals_from(spelled: Spellings, occurrences: np.ndarray, stride: int) -> np.ndarray:
        """Per key: for a member ``self.x``, the first message holding another object's ``x`` (:meth:`Spellings.rivals`;
        ``stride``: none), from which a bare ``x`` may be that one; 0 for any other key."""
        ids = np.arange(len(spelled.keys), dtype=np.int64)
        first = occurrences[np.minimum(np.searchsorted(occurrences, ids * stride), len(occurrences) - 1)] - ids * stride
        until = np.zeros(len(spelled.keys), dtype=np.int64)
        for member, rivals in spelled.rivals():
            until[member] = min((int(first[j]) for j in rivals), default=stride)
        return until

    def _specific(self, keys: Sequence[AnchorKey]) -> np.ndarray:
        """Per key: not vocabulary (:func:`~zett_lab.load.vocabulary.is_generic`), not the public API of a library the
        conversation shows the project depending on (:meth:`~zett_lab.load.dependencies.Dependencies.names`), and
        not a field of an external API its commands fetched (:func:`~zett_lab.load.api_fields.api_fields`), nor the name
        of a file format its paths carry (:func:`~zett_lab.load.file_formats.names_format`)."""
        texts = [self.text(index) for index in range(len(self.messages))]
        libraries = dependencies([*texts, *(entry.text for entry in self.harness_context)])
        fields = api_fields(self.messages)
        formats = file_formats(self.occurrences)
        return np.asarray(
            [
                not is_generic(key)
                and not libraries.names(*key)
                and not (key[0] == "identifier" and key[1] in fields)
                and not names_format(key, formats)
                for key in keys
            ],
            dtype=bool,
        )

    def _fresh_codes(self, spelled: Spellings, stride: int) -> np.ndarray:
        """Where a name is the agent's own choice: a fresh local its code defines, a dotted name headed by a new
        local (``Definitions.owners``), or data its new code holds as a map's value (``Definitions.data``)."""
        ids = {key: i for i, key in enumerate(spelled.keys)}
        return _sorted_codes(
            [
                *(
                    i * stride + at
                    for at, name, fresh in self.definitions
                    if fresh
                    for i in spelled.identifiers_named(name)
                ),
                *(i * stride + at for at, name in self.owners for i in spelled.identifiers_headed(name)),
                *(ids[key] * stride + at for at, key in self.data if key in ids),
            ]
        )

    def _occurrence_codes(self, id_of: dict[AnchorKey, int], stride: int) -> tuple[np.ndarray, np.ndarray]:
        """Every occurrence as ``key id * stride + message index``, sorted, and its rank within its message."""
        occurrences, rank = [], []
        for index, message_keys_ in enumerate(self.keys_by_message):
            for position, key in enumerate(message_keys_):
                occurrences.append(id_of[key] * stride + index)
                rank.append(position)
        order = np.argsort(np.asarray(occurrences, dtype=np.int64), kind="stable")
        return np.asarray(occurrences, dtype=np.int64)[order], np.asarray(rank, dtype=np.int64)[order]

    def _call_codes(self, id_of: dict[AnchorKey, int]) -> np.ndarray:
        """(message index, call number, key id) of every anchor of a tool call's arguments, one row each."""
        return np.asarray(
            [
                (index, number, id_of[key])
                for number, (index, call_keys) in enumerate(self.tool_calls)
                for key in call_keys
                if key in id_of
            ],
            dtype=np.int64,
        ).reshape(-1, 3)

    def _word_codes(self, words: Words, stride: int) -> tuple[list[int], list[int], list[int]]:
        """Where each key shows as a plain word: codes of the messages shown to the agent and of those it wrote,
        and the key ids the system prompts show."""
        shown_words: list[int] = []
        written_words: list[int] = []
        for index, message in enumerate(self.messages):
            if not isinstance(message, SystemMessage):
                codes = written_words if isinstance(message, AssistantMessage) else shown_words
                codes.extend(i * stride + index for i in words.ids_in(self.text(index)))
        system_words = [i for index in self.system_messages for i in words.ids_in(self.text(index))]
        return shown_words, written_words, system_words

    def _agent_first(
        self,
        keys: list[AnchorKey],
        seen: np.ndarray,
        system: np.ndarray,
        harness: Iterable[tuple[HarnessContext, np.ndarray]],
    ) -> np.ndarray:
        """Per key: an identifier the agent wrote before anything (a message, the system prompt, the harness)
        showed it."""
        stride = len(self.messages) + 1
        ids = np.arange(len(keys), dtype=np.int64)
        first_seen = seen[np.minimum(np.searchsorted(seen, ids * stride), len(seen) - 1)] - ids * stride
        harness_first = np.full(len(keys), stride, dtype=np.int64)
        for entry, shown_ids in harness:
            harness_first[shown_ids] = np.minimum(harness_first[shown_ids], entry.start)
        by_agent = np.asarray([isinstance(m, AssistantMessage) for m in self.messages] + [False])
        return (
            np.asarray([key[0] == "identifier" for key in keys], dtype=bool)
            & by_agent[np.clip(first_seen, 0, stride - 1)]
            & (harness_first > first_seen)
            & ~system
        )

    def span_anchors(self, start: int, end: int, n_recorded: int) -> SpanAnchors:
        """The anchors of ``messages[start:end]`` and where each is after the span (see :class:`SpanAnchors`).

        Needed later: used again by the agent (``next_use``), specific (not vocabulary
        of a language, its standard library, a common framework or most projects), and at that
        use shown in no spelling by anything the model saw since the compaction: not the tail,
        not any message between the tail and the use (a tool result that re-read it or printed it
        as a plain word, text the harness injected), not the system prompt, not harness context
        held on until the use. And not the agent's own choice: a name the use introduces as a new
        local of the code it writes (a variable, parameter or alias: any name would have done), or
        an identifier the agent wrote before anything in the conversation showed it and had not
        defined before the use (a library's API it knew, a label it made up).
        """
        arrays = self.arrays
        first, order, place = self._first_from(start)
        # computed in key id order (sorted searches are several times faster), then put in span order
        ids = np.flatnonzero(first < max(start, end))

        in_view = arrays.system | arrays.shown_in(end, n_recorded) | arrays.shown_in(end, n_recorded, written=True)

        def tail_shows(keys: np.ndarray, _: np.ndarray) -> np.ndarray:
            return in_view[keys]

        def later_shows(keys: np.ndarray, at: np.ndarray) -> np.ndarray:
            use = next_use[at]
            later = arrays.shown_between(keys, n_recorded, use)
            return tail_shows(keys, at) | later | arrays.harness_shown(keys, n_recorded, np.where(use >= 0, use, -1))

        in_tail = tail_shows(ids, ids) | arrays.by_parts(ids, tail_shows)
        next_use, _ = arrays.first_in(arrays.uses, ids, n_recorded, len(self.messages))
        needed = (next_use >= 0) & arrays.specific[ids] & ~in_tail
        # a command is at hand when all its specific parts are, wherever each was shown
        needed &= ~arrays.by_parts(ids, later_shows)
        # the rest asked only of the anchors still needed (a few of the span's)
        asked = np.flatnonzero(needed)
        keys, use = ids[asked], next_use[asked]
        # a name the use itself defines (a new script's variable, a parameter) is chosen there, not recalled
        kept = ~_holds(arrays.fresh, keys * arrays.stride + use)
        # a name the agent wrote before anything showed it, and never defined, is its own: known or made up
        defined_before, _ = arrays.first_in(arrays.defined, keys, 0, len(self.messages))
        kept &= ~(arrays.agent_first[keys] & ((defined_before < 0) | (defined_before >= use)))
        kept &= ~arrays.shown_between(keys, n_recorded, use)
        kept &= ~arrays.harness_shown(keys, n_recorded, use)
        needed[asked] = kept
        in_span_order = np.empty(len(ids), dtype=np.int64)
        in_span_order[place[ids]] = np.arange(len(ids))
        span_ids = order[: len(ids)]
        return SpanAnchors(
            ids=span_ids,
            first_index=first[span_ids],
            in_tail=in_tail[in_span_order],
            in_future=arrays.last[span_ids] >= n_recorded,
            next_use=next_use[in_span_order],
            needed_later=needed[in_span_order],
        )

    def _first_from(self, start: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per key: the first message from ``start`` on holding it (``stride``: none); the keys held from ``start``
        on in span order (by that first message, then by place among its anchors), and each key's place in that
        order (keys held from ``start`` on). A trace's spans share their start and grow, so every span from it is
        a prefix of one order, searched and sorted once per start."""
        found = self._from_start.get(start)
        if found is None:
            arrays = self.arrays
            first, at = arrays.first_in(arrays.occurrences, np.arange(len(arrays.keys)), start, arrays.stride)
            first = np.where(first >= 0, first, arrays.stride)
            held = np.flatnonzero(first < arrays.stride)
            order = held[np.lexsort((arrays.rank[at[held]], first[held]))]
            place = np.zeros(len(arrays.keys), dtype=np.int64)
            place[order] = np.arange(len(order))
            if len(self._from_start) >= _STARTS_KEPT:
                self._from_start.clear()
            found = self._from_start[start] = (first, order, place)
        return found

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

    def occurs(self, key: AnchorKey, start: int, end: int) -> int | None:
        """First index in [start, end) holding the key, or None."""
        return _first_in(self.occurrences.get(key, ()), start, end)

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


_PART_TYPES = ("path", "identifier", "url", "number", "sha")
#: A word of a command that carries no information of its own: an option, a shell operator.
_PLAIN_WORD = re.compile(r"-{1,2}[A-Za-z][\w-]*|&&|\|\||[|;&<>]|\d?>>?(?:&\d)?|2>&1")
_IDENTIFIER_WORD = re.compile(r"[A-Za-z_][\w.-]*")


def _parts_of(command: AnchorKey, id_of: dict[AnchorKey, int]) -> list[AnchorKey]:
    """The specific paths, identifiers, URLs, numbers and SHAs of a command made of them alone: every other word
    is vocabulary (a program, a subcommand), an option, a shell operator or a specific name the conversation
    holds as a key elsewhere (``physical`` in ``grep -n "def physical"``), and every part is a key of ``id_of``. Else none: ``sed -n '70,95p' ./pvlib/iam.py`` carries a line range besides its path, and a
    command with a part nothing could show is never shown by its parts."""
    parts = [k for k in anchor_keys(command[1]) if k[0] in _PART_TYPES and not is_generic(k)]
    if not parts or not all(k in id_of for k in parts):
        return []
    for word in command[1].split():
        word = word.strip("'\"")
        if not word or _PLAIN_WORD.fullmatch(word) or any(k in parts for k in anchor_keys(word)):
            continue
        if ("identifier", word) in id_of and not is_generic(("identifier", word)):
            parts.append(("identifier", word))  # a name the conversation holds, written plainly (grep's pattern)
            continue
        if not (_IDENTIFIER_WORD.fullmatch(word) and is_generic(("identifier", word))):
            return []
    return parts


def _shown_ids(text: str, spelled: Spellings, words: Words) -> np.ndarray:
    """The ids of the keys a text shows: in any spelling of its anchors, or as plain words."""
    return np.union1d(
        np.flatnonzero(spelled.shown_by(anchor_keys(text))), np.asarray(words.ids_in(text), dtype=np.int64)
    )


def _command_parts(keys: Sequence[AnchorKey], id_of: dict[AnchorKey, int]) -> np.ndarray:
    """(command key id, part key id) of every command made of parts (:func:`_parts_of`), one row each."""
    return np.asarray(
        [(id_of[key], id_of[part]) for key in keys if key[0] == "command" for part in _parts_of(key, id_of)],
        dtype=np.int64,
    ).reshape(-1, 2)


#: Indexes of the last few message lists: a sweep or a comparison measures one conversation many times.
_INDEXES: dict[int, tuple[Sequence[Any], int, tuple[HarnessContext, ...], ConversationIndex]] = {}


def held_index(
    messages: Sequence[AnyMessage], harness_context: Sequence[HarnessContext] = ()
) -> ConversationIndex | None:
    """The index :func:`index_of` keeps for these messages, None when it keeps none."""
    held = _INDEXES.get(id(messages))
    if held is not None and held[0] is messages and held[1] == len(messages) and held[2] == tuple(harness_context):
        return held[3]
    return None


def index_of(
    messages: Sequence[AnyMessage],
    harness_context: Sequence[HarnessContext] = (),
    built: dict[str, object] | None = None,
) -> ConversationIndex:
    """The index of a conversation's messages and harness context (kept for the last few conversations);
    ``built``: :meth:`ConversationIndex.built` of an index of the same messages, taken when none is kept yet."""
    harness = tuple(harness_context)
    held = held_index(messages, harness)
    if held is not None:
        return held
    if len(_INDEXES) >= 4:
        _INDEXES.clear()
    if built is not None and built["harness_context"] == harness:  # (of the same messages: the caller's word)
        index = ConversationIndex.__new__(ConversationIndex)
        vars(index).update(built, messages=messages)
    else:
        index = ConversationIndex(messages, harness)
    _INDEXES[id(messages)] = (messages, len(messages), harness, index)
    return index


def release_indexes() -> None:
    """Forget the kept indexes and the anchors remembered per message, text and needle.

    For a process done measuring: on a long conversation they hold hundreds of thousands of
    anchors (well over 100 MB); measuring again rebuilds them.
    """
    _INDEXES.clear()
    clear_needle_caches()
    clear_anchor_caches()
