"""How a conversation's anchors show one another: the keys an occurrence shows in any spelling
(:class:`Spellings`) and the names a text shows as plain words (:class:`Words`), for the index of
:mod:`zett_lab.measure.message_index`."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import accumulate

import ahocorasick
import numpy as np

from ..load.anchor_forms import NAME_TYPES, file_stem, spellings
from ..load.anchors import AnchorKey
from ..load.vocabulary import is_generic


class Spellings:
    """Which keys an occurrence of a key shows in some spelling (:func:`~zett_lab.load.anchor_forms.shows`)."""

    def __init__(self, keys: Sequence[AnchorKey]) -> None:
        self.keys = keys
        self._spelled = [spellings(key) for key in keys]
        self._by_canonical: dict[str, list[int]] = defaultdict(list)
        self._by_form: dict[str, list[int]] = defaultdict(list)
        for i, spelling in enumerate(self._spelled):
            self._by_canonical[spelling.canonical].append(i)
            for form in spelling.forms:
                self._by_form[form].append(i)
        self._pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._by_head: dict[str, list[int]] | None = None

    def identifiers_named(self, name: str) -> list[int]:
        """Ids of the identifiers whose whole name is ``name`` (lower-cased components joined by ``/``)."""
        return [i for i in self._by_canonical.get("name:" + name, ()) if self.keys[i][0] == "identifier"]

    def identifiers_headed(self, name: str) -> list[int]:
        """Ids of the identifiers of two or more components whose first is ``name`` (``repos.extend``)."""
        if self._by_head is None:
            self._by_head = defaultdict(list)
            for i, spelling in enumerate(self._spelled):
                parts = spelling.canonical.removeprefix("name:").split("/")
                if self.keys[i][0] == "identifier" and len(parts) > 1:
                    self._by_head[parts[0]].append(i)
        return self._by_head.get(name, [])

    def shown(self, key: AnchorKey, folders: bool = True) -> set[int]:
        """Ids of the keys an occurrence of ``key`` shows (itself included when it is one of them); with
        ``folders``, also the leading parts it names on the way."""
        spelling = spellings(key)
        found = set(self._by_form.get(spelling.canonical, ()))
        for form in spelling.forms | spelling.prefixes if folders else spelling.forms:
            found.update(self._by_canonical.get(form, ()))
        return found

    def shown_by(self, keys: Iterable[AnchorKey]) -> np.ndarray:
        """Per key: whether any of ``keys`` shows it in some spelling."""
        shown = np.zeros(len(self.keys), dtype=bool)
        for key in keys:
            found = self.shown(key)
            if found:
                shown[list(found)] = True
        return shown

    def _members(self) -> np.ndarray:
        """Per key: an identifier qualified by ``self`` or ``this`` (a member of the object its code is in)."""
        return np.asarray(
            [
                key[0] == "identifier" and spelling.canonical.split("/")[0] in _OWN_OBJECT
                for key, spelling in zip(self.keys, self._spelled, strict=True)
            ],
            dtype=bool,
        )

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (key, other key it shows) once: sources, targets, and whether only as a folder (built once)."""
        if self._pairs is None:
            source, target, folder = [], [], []
            by_canonical, by_form = self._by_canonical, self._by_form
            for i, spelling in enumerate(self._spelled):
                same = set(by_form.get(spelling.canonical, ()))
                for form in spelling.forms:
                    same.update(by_canonical.get(form, ()))
                same.discard(i)
                folders: set[int] = set()
                for form in spelling.prefixes:
                    folders.update(by_canonical.get(form, ()))
                folders -= same
                folders.discard(i)
                for j, as_folder in [*((j, False) for j in same), *((j, True) for j in folders)]:
                    source.append(i)
                    target.append(j)
                    folder.append(as_folder)
            self._pairs = (
                np.asarray(source, dtype=np.int64),
                np.asarray(target, dtype=np.int64),
                np.asarray(folder, dtype=bool),
            )
        return self._pairs

    def rivals(self) -> list[tuple[int, list[int]]]:
        """Per member ``self.x`` (or ``this.x``; not ``self.a.x``): the ids of the other identifiers ending in ``x``
        (``handler.x``, ``self.handler.x``), another object's member of that name."""
        by_last: dict[str, list[int]] = defaultdict(list)
        for i, spelling in enumerate(self._spelled):
            parts = spelling.canonical.removeprefix("name:").split("/")
            if self.keys[i][0] == "identifier" and len(parts) > 1:
                by_last[parts[-1]].append(i)
        found = []
        for i in np.flatnonzero(self._members()).tolist():
            own = self._spelled[i].canonical.split("/")
            if len(own) == 2:
                found.append((i, [j for j in by_last[own[1]] if self._spelled[j].canonical.split("/") != own]))
        return found

    def widen(
        self, codes: np.ndarray, stride: int, folders: bool = True, members_until: np.ndarray | None = None
    ) -> np.ndarray:
        """``codes`` (``id * stride + message``, sorted): also every key each one shows (:meth:`shown`), sorted,
        unique. Without ``folders`` (what a use names), a spelling without ``self`` or ``this`` does not name a
        member ``self.x``: another object's ``handler.x`` may be another class's, and so may a bare ``x`` from the
        message ``members_until[member]`` on (where another object's ``x`` is shown: :meth:`rivals`); before it, a
        bare ``x`` names the only ``x`` there is."""
        source, target, folder = self.pairs()
        limit = None
        if not folders:
            source, target = source[~folder], target[~folder]
            member = self._members()
            bare = np.asarray(["/" not in s.canonical for s in self._spelled], dtype=bool)
            until = np.zeros(len(self.keys), dtype=np.int64) if members_until is None else members_until
            by_bare = member[target] & ~member[source] & bare[source]
            keep = ~member[target] | member[source] | by_bare
            source, target = source[keep], target[keep]
            limit = np.where(by_bare[keep], until[target], stride)
        if not len(source):
            return codes
        ids = np.arange(len(self.keys), dtype=np.int64)
        starts = np.searchsorted(codes, ids * stride)
        counts = np.searchsorted(codes, (ids + 1) * stride) - starts
        repeats = counts[source]
        offsets = np.repeat(starts[source] - np.cumsum(repeats) + repeats, repeats) + np.arange(repeats.sum())
        messages = codes[offsets] - np.repeat(source, repeats) * stride
        targets = np.repeat(target, repeats)
        if limit is not None:
            before = messages < np.repeat(limit, repeats)
            messages, targets = messages[before], targets[before]
        return np.unique(np.concatenate([codes, targets * stride + messages]))


#: How code names the object it is in: ``self.x`` is a member of that object, not any ``x``.
_OWN_OBJECT = ("name:self", "name:this")
#: A word of a text, lower-cased: what a name of one component is found as.
_WORD = re.compile(r"[a-z0-9_]+")
#: What separates a name's components in a text: ``src/pkg/mod.py``, ``pkg.mod`` and ``pkg mod`` all hold
#: ``pkg``, ``mod``.
_SEPARATORS = str.maketrans({".": "/", "\\": "/", " ": "/"})
#: A keyed number's comparison form (``n_ar 1.29``), and a number standing alone in a text.
_KEYED = re.compile(r"([a-z_][a-z0-9_]*) (\d+(?:\.\d+)?)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w]|\.\d)")
#: How many lines from a number its key may stand and still give it.
KEY_LINES = 2


class Words:
    """Names found as whole words of any text, in any case, whatever separates their components (``.``, ``/``,
    ``\\``, a space) and whatever surrounds them: ``Testing IFNULL:`` shows ``ifnull``,
    ``lib/spotter_web/live/x.ex`` shows ``live``, ``SOURCES.txt:src/sqlfluff/rules/L060.py`` shows
    ``src/sqlfluff/rules``, and a search for ``igniter install`` shows ``igniter.install``, although none of
    these texts holds that name as an anchor of its own (a plain word, a folder inside a longer path).

    A number with its key is found the same way where the text gives the value beside its key in other words:
    the number on a line and the key as a word on that line or within :data:`KEY_LINES` lines of it (a
    docstring's ``n_ar : numeric`` ... ``If n_ar is None ... A typical value ... is 1.29.`` shows ``n_ar 1.29``)."""

    def __init__(self, spelled: Spellings) -> None:
        self._words: dict[str, list[int]] = {}
        #: A keyed number's value -> (its id, its key).
        self._keyed: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for i, (type_, normalized) in enumerate(spelled.keys):
            if type_ == "number" and (keyed := _KEYED.fullmatch(normalized.lower())):
                self._keyed[keyed.group(2)].append((i, keyed.group(1)))
        longer: dict[str, list[int]] = {}
        for i, spelling in enumerate(spelled._spelled):
            name = spelling.canonical.removeprefix("name:")
            if name == spelling.canonical or spelled.keys[i][0] not in NAME_TYPES:
                continue
            stem = file_stem(*spelled.keys[i])
            named = [name, stem.lower()] if stem and _distinctive(stem) else [name]
            for word in named:
                if _WORD.fullmatch(word):
                    self._words.setdefault(word, []).append(i)
                else:
                    longer.setdefault(word.translate(_SEPARATORS), []).append(i)
        self._longer = list(longer.values())
        self._automaton = ahocorasick.Automaton()
        for number, name in enumerate(longer):
            self._automaton.add_word(name, (number, len(name)))
        if self._longer:
            self._automaton.make_automaton()

    def ids_in(self, text: str) -> list[int]:
        """Ids of the names ``text`` holds as words."""
        lowered = text.lower()
        found = [self._words.get(word) for word in set(_WORD.findall(lowered))] if self._words else []
        if self._longer:
            mapped, names = lowered.translate(_SEPARATORS), set()
            for end, (number, length) in self._automaton.iter(mapped):
                if number not in names and _stands_alone(mapped, end - length + 1, end + 1):
                    names.add(number)
            found.extend(self._longer[number] for number in names)
        found.append(self._keyed_in(lowered))
        return [i for ids in found if ids for i in ids]

    def _keyed_in(self, lowered: str) -> list[int]:
        """Ids of the keyed numbers whose value a line of ``lowered`` holds and whose key is a word near it."""
        if not self._keyed:
            return []
        # A line's numbers are the text's numbers on it (none spans a line break, and a break is no digit, word or
        # dot to look behind or ahead at), so one scan of the text finds the lines holding a keyed value: only
        # those are read, in order, as every line was before.
        at_keyed = [m.start() for m in _NUMBER.finditer(lowered) if m.group() in self._keyed]
        if not at_keyed:
            return []
        starts = [0, *accumulate(len(line) for line in lowered.splitlines(keepends=True))]
        lines = lowered.splitlines()
        # each line's words, found once: no word spans a line break either
        words: dict[int, set[str]] = {}

        def near(at: int, key: str) -> bool:
            for j in range(max(0, at - KEY_LINES), min(len(lines), at + KEY_LINES + 1)):
                held = words.get(j)
                if held is None:
                    held = words[j] = set(_WORD.findall(lines[j]))
                if key in held:
                    return True
            return False

        found: list[int] = []
        for at in sorted({bisect_right(starts, position) - 1 for position in at_keyed}):
            for value in set(_NUMBER.findall(lines[at])):
                found.extend(i for i, key in self._keyed.get(value, ()) if near(at, key))
        return found


def _distinctive(stem: str) -> bool:
    """Whether a file name's stem names the file wherever it is written as words: it is no identifier (it has a
    ``.`` or ``-``: ``opencode.plugin``, as a TypeScript import or a search writes ``opencode.plugin.ts``; not
    ``feedback_summary``, which may as well be a variable or a type of that name) and not vocabulary."""
    return not stem.isidentifier() and not is_generic(("path", stem))


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is not part of a longer word."""
    return (start == 0 or not _WORD.match(text, start - 1)) and (end == len(text) or not _WORD.match(text, end))
