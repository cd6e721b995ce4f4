"""Whether an anchor is present in a text (a summary, a context): exact keys, loose substrings, fuzzy sentences.

Example::

    >>> from zett_lab.load.anchors import anchors_in_text
    >>> TextIndex("we fixed src/auth.py").contains(anchors_in_text("see ./src/auth.py")[0])
    True
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable
from functools import cached_property, lru_cache
from typing import NamedTuple, TypeVar

import ahocorasick
import numpy as np

from ..load.anchors import (
    PARAGRAPH_SPLIT,
    SENTENCE_TYPES,
    TRAILING_PUNCTUATION,
    Anchor,
    AnchorKey,
    anchor_keys,
    loose,
    loose_needle,
)
from ..load.text import clean_text

_WORD = re.compile(r"[a-z0-9_']+")
_STOP = frozenset(
    "the a an and or of to in on at for with by from as is are was be been it this that these those we you i "
    "they he she our your their its can will would should could may might please also just then than so if "
    "into onto about there here what when where which who how all any some each such only very more most "
    "use using used".split()
)
_NEGATIONS = frozenset({"never", "not", "no", "avoid", "without", "nothing"})  # of content words ("don't" is "not")
#: Share of a sentence anchor's content words a summary sentence must contain.
SENTENCE_MATCH = 0.6


def _content_words(sentence: str) -> frozenset[str]:
    """A sentence's content words: three letters or more and not a function word; a contraction is its word
    ("it's" -> "it", "user's" -> "user"), a negated one "not" ("don't", "isn't", "won't")."""
    words = set()
    for word in _WORD.findall(sentence.lower().replace("’", "'")):
        word = word.strip("'")
        if word.endswith("n't") or word == "dont":
            word = "not"
        word = word.split("'", 1)[0]
        if len(word) >= 3 and word not in _STOP or word in ("not", "no"):
            words.add(word)
    return frozenset(words)


#: :func:`_content_words` remembered per clause: the summaries of one trace repeat most of each other's lines (a
#: mask re-quotes the whole conversation, later summaries keep earlier ones' items), and their clauses were a
#: fifth of measuring a long trace.
_clause_words = lru_cache(maxsize=1 << 16)(_content_words)


def _negated(words: frozenset[str]) -> bool:
    return bool(words & _NEGATIONS)


@lru_cache(maxsize=1 << 16)
def _sentence_words(normalized: str) -> tuple[frozenset[str], bool]:
    """A constraint's or decision's content words and whether it is negated (asked of every summary after it).

    Its negation words (never, not, avoid ...) decide only whether a clause agrees with it: counted as content,
    "do not modify the code" would be held by any negated clause naming the code."""
    words = _content_words(normalized)
    return words - _NEGATIONS, _negated(words)


_BOUNDARY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_/-")


def _find_bounded(haystack: str, needle: str) -> bool:
    if not needle:
        return False
    start = haystack.find(needle)
    while start != -1:
        if _bounded_at(haystack, needle, start):
            return True
        start = haystack.find(needle, start + 1)
    return False


def _bounded_at(haystack: str, needle: str, start: int) -> bool:
    """Whether the occurrence of ``needle`` at ``start`` stands on word boundaries."""
    n = len(haystack)
    end = start + len(needle)
    before = haystack[start - 1] if start > 0 else " "
    after = haystack[end] if end < n else " "
    # a needle that itself starts/ends with a non-word character needs no boundary there
    ok_before = not needle[0].isalnum() or (before not in _BOUNDARY_CHARS and before != ".")
    ok_after = not needle[-1].isalnum() or (
        after not in _BOUNDARY_CHARS and not (after == "." and end + 1 < n and haystack[end + 1] in _BOUNDARY_CHARS)
    )
    return ok_before and ok_after


#: Length of the substrings a :class:`TextIndex` remembers to rule needles out quickly.
_GRAM = 6

_needle = lru_cache(maxsize=1 << 18)(loose_needle)


@lru_cache(maxsize=1 << 18)
def _pieces(needle: str) -> tuple[tuple[int, str], ...]:
    """``(offset, piece)`` of a needle: ``_GRAM`` characters every ``_GRAM``, and the last ``_GRAM``."""
    last = len(needle) - _GRAM
    return tuple((i, needle[i : i + _GRAM]) for i in (*range(0, last, _GRAM), last))


def clear_needle_caches() -> None:
    """Forget the needles and pieces remembered per anchor, and the clauses remembered per message text and block."""
    _needle.cache_clear()
    _pieces.cache_clear()
    clauses_of.cache_clear()
    _block_clauses.cache_clear()
    _clause_words.cache_clear()


def needle_of(key: AnchorKey) -> str:
    """The loose needle an exact-type anchor is found by ("" for sentence types and numbers, found otherwise)."""
    type_, normalized = key
    return "" if type_ in SENTENCE_TYPES or type_ == "number" else _needle(normalized)


#: Characters either side of an occurrence that decide whether it stands on word boundaries (:func:`_bounded_at`).
_CONTEXT = 2
#: Characters left out at each end of a text a :class:`NeedleSet` remembers (where its loose form can differ
#: inside a longer text), and the shortest rest worth remembering.
_EDGE, _SHORTEST_KEPT = 64, 4096


class _Scanned(NamedTuple):
    """A text scanned before: ``core`` (most of it) and the needles found on word boundaries with ``_CONTEXT``
    characters of the core either side (so they are found wherever the core appears)."""

    core: str
    inside: frozenset[str]


class NeedleSet:
    """Many needles, all found in a text in one pass (an Aho-Corasick automaton), each on word boundaries.

    What measuring every anchor of a long conversation against each summary needs: one scan
    of the summary instead of one search per anchor. The answer for each needle is the one
    :func:`_find_bounded` gives.

    A text that holds most of one scanned just before (an observation mask re-quotes its previous summary:
    a long session's mask summaries are a hundred megabytes, nearly all quoted) is scanned only around it:
    what was found well inside the earlier text is found in the same characters here, and every occurrence
    that is not well inside lies within reach (the longest needle and its context) of the rest.
    """

    def __init__(self, needles: Iterable[str]) -> None:
        self._automaton = ahocorasick.Automaton()
        for needle in needles:
            if needle and needle not in self._automaton:
                self._automaton.add_word(needle, needle)
        self.size = len(self._automaton)
        self.longest = max(map(len, self._automaton.keys()), default=0)
        if self.size:
            self._automaton.make_automaton()
        self._scanned: deque[_Scanned] = deque(maxlen=4)

    def __contains__(self, needle: str) -> bool:
        return needle in self._automaton

    def found_in(self, text: str) -> frozenset[str]:
        """The needles that occur in ``text`` on word boundaries."""
        if not self.size:
            return frozenset()
        n = len(text)
        earlier, at = next(((s, at) for s in self._scanned if (at := text.find(s.core)) >= 0), (None, -1))
        found: set[str] = set()
        if earlier is None:  # scanned in full; what is found inside [_EDGE, n - _EDGE) is remembered
            low, high = _EDGE, n - _EDGE
            inside = self._scan(text, 0, n, found, low, high)
        else:  # around the earlier text only
            end, reach = at + len(earlier.core), self.longest + _CONTEXT
            low, high = min(_EDGE, at), max(n - _EDGE, end)
            found.update(earlier.inside)
            inside = set(earlier.inside)
            inside |= self._scan(text, 0, min(n, at + reach), found, low, high)
            inside |= self._scan(text, max(0, end - reach), n, found, low, high)
        if high - low >= _SHORTEST_KEPT:
            self._scanned.appendleft(_Scanned(text[low:high], frozenset(inside)))
        return frozenset(found)

    def _scan(self, text: str, start: int, stop: int, found: set[str], low: int, high: int) -> set[str]:
        """Add to ``found`` the needles on word boundaries that occur within ``text[start:stop]``; return those
        found with ``_CONTEXT`` characters of ``text[low:high]`` either side."""
        inner_low, inner_high = low + _CONTEXT, high - _CONTEXT
        inside: set[str] = set()
        for last, needle in self._automaton.iter(text, start, stop):
            if needle in inside:
                continue
            first = last - len(needle) + 1
            within = inner_low <= first and last < inner_high
            if (within or needle not in found) and _bounded_at(text, needle, first):
                found.add(needle)
                if within:
                    inside.add(needle)
        return inside


class _Lines(NamedTuple):
    """A text read line by line before: ``inner``, the ids its lines but the first and the last hold."""

    text: str
    inner: np.ndarray


class QuotedLines:
    """Which of ``size`` ids a text holds, the union of ``ids_of`` over its lines, reading only the lines a text
    asked just before does not hold.

    An observation mask re-quotes its previous summary whole, and what that summary's lines hold (but its first
    and its last, which the quote can extend) is what the same lines hold here: only the lines before and after
    the quote are read (a long session's mask summaries are a hundred megabytes, one or two thousand new lines
    each). Exact wherever the answer is a union over lines: the caller's word (:func:`anchor_keys` of a text
    that is one paragraph longer than :data:`~zett_lab.load.anchors.HUGE_PARAGRAPH`).
    """

    def __init__(self, ids_of: Callable[[str], Iterable[int]], size: int) -> None:
        self._ids_of = ids_of
        self._size = size
        self._texts: deque[_Lines] = deque(maxlen=4)

    def __call__(self, text: str) -> np.ndarray:
        """Per id, whether a line of ``text`` holds it."""
        quote = _around_quote(self._texts, text)
        if quote is None:
            lines = text.split("\n")
            inner = self._held(lines[1:-1])
        else:
            earlier, head, tail = quote
            inner = self._held(head[1:] + tail[:-1], earlier.inner)
            lines = [head[0], tail[-1]]
        if len(text) >= _SHORTEST_KEPT and "\n" in text:
            self._texts.appendleft(_Lines(text, inner))
        return self._held([lines[0], lines[-1]], inner)

    def _held(self, lines: Iterable[str], start: np.ndarray | None = None) -> np.ndarray:
        held = np.zeros(self._size, dtype=bool) if start is None else start.copy()
        held[[i for line in lines for i in self._ids_of(line)]] = True
        return held


class _LooseLines(NamedTuple):
    """A text put in loose form line by line before: ``inner``, the loose form of its lines but the first and
    the last."""

    text: str
    inner: str


class LooseLines:
    """:func:`loose` of a text, putting in loose form only the lines a text asked just before does not hold.

    The loose form is made line by line (quotes, case and ``./`` prefixes never reach past a line break) and
    joins the words of all lines by single spaces, so it is the non-empty loose lines joined by spaces: of a text
    quoting an earlier one, the lines before and after the quote and the earlier text's inner lines, as
    :class:`QuotedLines` reads them (a long session's mask summaries are a hundred megabytes).
    """

    def __init__(self) -> None:
        self._texts: deque[_LooseLines] = deque(maxlen=4)

    def __call__(self, text: str) -> str:
        quote = _around_quote(self._texts, text)
        if quote is None:
            lines = text.split("\n")
            if len(lines) == 1:
                return loose(text)
            inner = _spaced(map(loose, lines[1:-1]))
        else:
            earlier, head, tail = quote
            inner = _spaced([*map(loose, head[1:]), earlier.inner, *map(loose, tail[:-1])])
            lines = [head[0], tail[-1]]
        if len(text) >= _SHORTEST_KEPT:
            self._texts.appendleft(_LooseLines(text, inner))
        return _spaced([loose(lines[0]), inner, loose(lines[-1])])


#: A text read line by line before (:class:`_Lines` or :class:`_LooseLines`).
_T = TypeVar("_T", _Lines, _LooseLines)


def _around_quote(earlier_texts: Iterable[_T], text: str) -> tuple[_T, list[str], list[str]] | None:
    """The first earlier text ``text`` quotes whole, with the lines of ``text`` before its inner lines (``head``:
    the last one runs into the quote's first line) and after them (``tail``: the first one continues the quote's
    last line); None when it quotes none. Then ``text`` is ``head`` + the earlier text's inner lines + ``tail``,
    split at line breaks of the earlier text."""
    for earlier in earlier_texts:
        at = text.find(earlier.text)
        if at >= 0:
            head = text[: at + earlier.text.index("\n")].split("\n")
            tail = text[at + earlier.text.rindex("\n") + 1 :].split("\n")
            return earlier, head, tail
    return None


def _spaced(parts: Iterable[str]) -> str:
    return " ".join(part for part in parts if part)


#: Where both splits of :class:`Clauses` cut a text whatever surrounds the cut: a line break before "[" (every line
#: of an offline summary opens so: "[assistant] ...", "[tool result grep] ..."). Their separators are white space
#: (and ``;``) and never reach past the "[", and their lookarounds across it see only white space or the "[", which
#: hold no word: so a text's clauses are its blocks', each block read once however many summaries repeat it.
_BLOCK_BREAK = "\n["
#: The first split of :class:`Clauses`: lines, ``;``-clauses and sentences.
_CLAUSE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+|;\s*")


@lru_cache(maxsize=1 << 14)
def _block_clauses(block: str) -> frozenset[frozenset[str]]:
    """The content-word sets of a block's clauses (remembered: the summaries of one trace repeat most of each
    other's blocks: a long session's offline summaries 41 k blocks, 8.5 k of them distinct)."""
    pieces = _CLAUSE_SPLIT.split(block) + PARAGRAPH_SPLIT.split(block)
    return frozenset(words for words in map(_clause_words, dict.fromkeys(pieces)) if words)


class Clauses:
    """A text's clauses as content-word sets, for asking whether it holds a constraint or a decision.

    The clauses are its lines, its ``;``-clauses and the sentences of its hard-wrapped paragraphs, read block by
    block (:data:`_BLOCK_BREAK`). The text holds a sentence when one clause holds at least :data:`SENTENCE_MATCH`
    of the sentence's content words and agrees with it on negation ("never use tabs" is not held by "use tabs").
    A sentence with too few of its words anywhere in the text is ruled out at once; otherwise each clause is
    counted (one set intersection each: a summary is asked a few sentences, so indexing its words costs more).
    """

    def __init__(self, text: str) -> None:
        self.words = list(frozenset().union(*map(_block_clauses, text.split(_BLOCK_BREAK))))
        self.negated = [_negated(words) for words in self.words]
        self.vocabulary: frozenset[str] = frozenset().union(*self.words)

    def holds(self, normalized: str) -> bool:
        """Whether one clause holds :data:`SENTENCE_MATCH` of the sentence's content words, agreeing on negation."""
        wanted, negated = _sentence_words(normalized)
        need = SENTENCE_MATCH * len(wanted)
        if not wanted or len(wanted & self.vocabulary) < need:
            return False
        return any(
            len(wanted & words) >= need and agrees == negated
            for words, agrees in zip(self.words, self.negated, strict=True)
        )


@lru_cache(maxsize=1 << 12)
def clauses_of(text: str) -> Clauses:
    """The :class:`Clauses` of a message's text (remembered: every compaction of a trace asks its kept context)."""
    return Clauses(text)


class TextIndex:
    """A text prepared for "is this anchor in it?" questions (built once per summary).

    An exact-type anchor is present when the text has an anchor with the same key,
    or when its normalized value occurs in :func:`loose` form with word boundaries
    (so ``src/a.py`` is found in "edited `./src/a.py`." but not in ``lib/src/a.py``).
    A constraint or decision is present when its key occurs exactly, or when the
    text's :class:`Clauses` hold it (one clause with most of its content words, and
    its negation).
    """

    def __init__(self, text: str, loose_of: Callable[[str], str] = loose) -> None:
        self.text = clean_text(text)
        self._loose_of = loose_of
        self._loose: str | None = None
        self._clauses: Clauses | None = None
        self._grams: dict[str, list[int]] | None = None
        self._found: tuple[NeedleSet, frozenset[str]] | None = None

    @cached_property
    def keys(self) -> frozenset[AnchorKey]:
        """The keys of the text's anchors (made on first use: measuring reads which of its conversation's keys a
        summary holds from :class:`QuotedLines` instead)."""
        return anchor_keys(self.text)

    @property
    def loose_text(self) -> str:
        if self._loose is None:
            self._loose = self._loose_of(self.text)
        return self._loose

    @property
    def clauses(self) -> Clauses:
        if self._clauses is None:
            self._clauses = Clauses(self.text)
        return self._clauses

    def contains(self, anchor: Anchor | AnchorKey, needles: NeedleSet | None = None) -> bool:
        """Whether the anchor is in the text; ``needles`` (holding this anchor's needle) answers from one scan."""
        type_, normalized = anchor.key if isinstance(anchor, Anchor) else anchor
        if (type_, normalized) in self.keys:
            return True
        if type_ in SENTENCE_TYPES:
            return self.clauses.holds(normalized)
        if type_ == "number":
            return False  # numbers match by key only (substring "250" would match "2500" contexts)
        needle = _needle(normalized)
        if needles is not None and needle in needles:
            return needle in self.found_needles(needles)
        if len(needle) < _GRAM:
            return _find_bounded(self.loose_text, needle)
        return self._find_long(needle)

    def found_needles(self, needles: NeedleSet) -> frozenset[str]:
        """The needles of ``needles`` in the loose text (one scan; the last set asked about is remembered)."""
        if self._found is None or self._found[0] is not needles:
            self._found = (needles, needles.found_in(self.loose_text))
        return self._found[1]

    def _find_long(self, needle: str) -> bool:
        """:func:`_find_bounded` for a needle of at least ``_GRAM`` characters, through an index of the text.

        The index maps every ``_GRAM``-character piece of the loose text to where it starts: a
        needle with a piece the text lacks is absent, and otherwise only the places of its
        rarest piece are tried.
        """
        grams = self._grams
        text = self.loose_text
        if grams is None:
            grams = self._grams = {}
            for i in range(len(text) - _GRAM + 1):
                grams.setdefault(text[i : i + _GRAM], []).append(i)
        offset, places = 0, None
        for i, piece in _pieces(needle):
            found = grams.get(piece)
            if found is None:
                return False
            if places is None or len(found) < len(places):
                offset, places = i, found
        for at in places or ():
            start = at - offset
            if start >= 0 and text.startswith(needle, start) and _bounded_at(text, needle, start):
                return True
        return False


def contains_normalized(text: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``text`` after :func:`loose` normalization of both (word-bounded).

    Used for gold probe answers: case, quotes, ``./`` prefixes, whitespace and
    trailing punctuation of the answer do not matter. For many needles in one text,
    :func:`loose` the text once and use :func:`contains_loose`.
    """
    return contains_loose(loose(text), needle)


def contains_loose(loose_text: str, needle: str) -> bool:
    """:func:`contains_normalized` for a text already in :func:`loose` form."""
    return _find_bounded(loose_text, loose_needle(needle).rstrip(TRAILING_PUNCTUATION))
