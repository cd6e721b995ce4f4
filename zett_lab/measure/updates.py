"""Facts that changed: values updated within a span, and whether a summary kept the current one.

A summary that drops a fact loses it; a summary that keeps the *old* value of a fact that
changed (a port, a version, a renamed file, a reversed instruction, a test that failed and then
passed) states something false, which is worse. :func:`observe` reads the keyed values every
message states, :func:`find_updates` groups those of a span by key and keeps the items whose
value changed, and :meth:`Update.status_in` says whether a summary carries the latest value
(``"latest"``), only a superseded one (``"superseded"``, an error) or neither (``"neither"``).
:class:`GrowingSpanUpdates` gives the same answers for the growing spans of a trace's compaction
attempts, folding each message once.

Kinds (:data:`UPDATE_KINDS`):

``setting``
    A named value: ``NAME = value`` at module level or in UPPER_CASE and ``"key": value`` in a
    file the agent read, edited or wrote (keyed by that file), ``KEY=value`` with a dotted or
    snake_case key in text, commands and logs, ``--flag=value``, and "set KEY to value" /
    "KEY is now value" in prose.
``port``
    ``host:6543`` and ``-h host -p 6543`` (keyed by host); ``port 6543`` in prose, told apart by
    the words before it, so the database's port is not Redis's port.
``quantity``
    A number with a unit before a noun in user or agent text: "7 GB RAM", "16 GB RAM".
``version``
    ``pkg==1.2.3``, ``pkg@1.2.3``, ``"pkg": "^1.2.3"``.
``path``
    A file renamed or moved: ``git mv a b``, ``mv a b``, "renamed a to b".
``name``
    A constant renamed by an edit (same value, new name).
``test``
    A test reported failing (pytest, unittest, go, cargo), later passing: by name, or by a later
    run without failures of a command that covers it.
``instruction``
    A user instruction later reversed or narrowed ("actually", "instead", "after all", "from now
    on", "no longer", "only ... except").

Prose keys (prose ports, quantities) join a key already seen only when they share a qualifying
word or the later statement says it is a change ("moved", "now", "upgraded"). Values are compared
by their literals (``timedelta(seconds=900)`` and ``900`` agree), so a value that is merely
repeated, or re-typed without changing (``0.01`` to ``Decimal("0.01")``), is not an update.

Example::

    >>> from zett_agent.messages import UserMessage
    >>> messages = [UserMessage(content="The staging DB listens on port 6543."),
    ...             UserMessage(content="Heads-up: staging moved to port 6544 last night.")]
    >>> [update] = find_updates(observe(messages))
    >>> update.kind, update.superseded, update.latest
    ('port', ('6543',), '6544')
    >>> update.status_in("Staging DB: port 6543."), update.status_in("staging is on port 6544 now")
    ('superseded', 'latest')
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from ..load.anchors import loose
from ..load.text import clean_text
from .keyed import NEGATIVE, Observation, clauses, content_words, observe, value_cores
from .lookup import contains_loose

__all__ = ["STATUSES", "UPDATE_KINDS", "GrowingSpanUpdates", "Observation", "Update", "find_updates", "observe"]

UPDATE_KINDS: tuple[str, ...] = ("setting", "port", "quantity", "version", "path", "name", "test", "instruction")
STATUSES: tuple[str, ...] = ("latest", "superseded", "neither")


@dataclass(frozen=True)
class Update:
    """An item whose value changed within a span.

    Attributes:
        kind: One of :data:`UPDATE_KINDS`.
        key: Its identity (``setting:src/a.py:TTL``, ``port``, ``test:tests/x.py::test_y``, ...).
        name: How it is written (what a summary names it by).
        superseded: Earlier values, as written, in order.
        latest: The value at the end of the span.
        superseded_index: First message holding a superseded value.
        latest_index: First message holding the latest value after the last superseded one.
    """

    kind: str
    key: str
    name: str
    superseded: tuple[str, ...]
    latest: str
    superseded_index: int
    latest_index: int
    names: tuple[str, ...] = field(default=(), repr=False)
    latest_evidence: frozenset[str] = field(default=frozenset(), repr=False)
    superseded_evidence: frozenset[str] = field(default=frozenset(), repr=False)

    def status_in(self, text: str | None) -> str:
        """``"latest"`` when ``text`` carries the latest value, ``"superseded"`` when it carries only an
        earlier one, ``"neither"`` otherwise (also for no text). Values count where the text names the
        item (same line or sentence); renamed paths and names count anywhere."""
        if not text:
            return "neither"
        if self.kind == "instruction":
            return _instruction_status(self, _clauses_of(text).worded)
        summary = _clauses_of(text)
        scope = summary.mentioning(self.names) if self.names else summary.joined
        if self.kind == "test":
            if _PASS.search(scope):
                return "latest"
            return "superseded" if _FAIL.search(scope) else "neither"
        if any(_holds(scope, token) for token in self.latest_evidence):
            return "latest"
        if any(_holds(scope, token) for token in self.superseded_evidence):
            return "superseded"
        return "neither"


class _Clauses:
    """A text's clauses, made once: every update of a compaction attempt asks about the same summary.

    ``joined`` holds the clauses in loose form, one per line. No pattern here matches across a line
    break (names and values in loose form hold no newline, and a newline is a non-word character like a
    clause's start and end), so one search of ``joined`` answers "does any clause match"."""

    def __init__(self, text: str) -> None:
        self._clean = clean_text(text)

    @cached_property
    def parts(self) -> list[str]:
        return [loose(c) for c in clauses(self._clean)]

    @cached_property
    def joined(self) -> str:
        return "\n".join(self.parts)

    @cached_property
    def _starts(self) -> list[int]:
        return list(itertools.accumulate((len(p) + 1 for p in self.parts[:-1]), initial=0))

    @cached_property
    def worded(self) -> list[tuple[str, frozenset[str]]]:
        """Each clause as written, with its content words (what instructions are compared by)."""
        return [(c, content_words(c)) for c in clauses(self._clean)]

    def mentioning(self, names: Sequence[str]) -> str:
        """The clauses naming any of ``names`` (see :func:`_mention_pattern`), one per line."""
        if not self.parts:
            return ""
        named: set[int] = set()
        for name in names:
            needle, pattern = _mention_pattern(name)
            if needle in self.joined:
                named.update(bisect_right(self._starts, m.start()) - 1 for m in pattern.finditer(self.joined))
        return "\n".join(self.parts[i] for i in sorted(named))


@lru_cache(maxsize=4)
def _clauses_of(text: str) -> _Clauses:
    return _Clauses(text)


@lru_cache(maxsize=1 << 14)
def _mention_pattern(name: str) -> tuple[str, re.Pattern[str]]:
    """How a clause names an item: its loose form between non-word characters (``//host:1`` names host)."""
    needle = loose(name)
    return needle, re.compile(rf"(?<!\w){re.escape(needle)}(?!\w)")


@lru_cache(maxsize=1 << 14)
def _number_pattern(token: str) -> re.Pattern[str] | None:
    """A number between non-digits (``:6381/2`` holds 6381); None for a token that is not a number."""
    if re.fullmatch(r"-?\d+(?:\.\d+)?", token):
        return re.compile(rf"(?<![\d.]){re.escape(token)}(?!\.?\d)")
    return None


def _holds(text: str, token: str) -> bool:
    """Whether clauses (loose form) hold a value: a number between non-digits, anything else word-bounded."""
    pattern = _number_pattern(token)
    if pattern is None:
        return contains_loose(text, token)
    return token in text and pattern.search(text) is not None


_PASS = re.compile(r"\b(?:pass|passes|passed|passing|green|fixed|succeeds|succeeded|ok)\b")
_FAIL = re.compile(r"\b(?:fail|fails|failed|failing|failure|errors?|red|broken)\b")


def _instruction_update(earlier: Sequence[Observation], obs: Observation) -> Update | None:
    """The update an ``instruction-change`` makes: the earlier instruction it reverses or narrows, if any."""
    best, overlap = None, 1
    for candidate in earlier:
        shared = len(candidate.qualifiers & obs.qualifiers)
        # a reversal cue ("actually", "after all") needs less overlap than a bare "only"
        enough = shared >= (
            0.4 * min(len(candidate.qualifiers), len(obs.qualifiers)) if obs.change else 0.6 * len(obs.qualifiers)
        )
        if candidate.index < obs.index and shared > overlap and enough:
            best, overlap = candidate, shared
    if best is None or best.qualifiers == obs.qualifiers:
        return None
    return Update(
        "instruction",
        f"instruction:{loose(best.value)}",
        best.value,
        (best.value,),
        obs.value,
        best.index,
        obs.index,
        latest_evidence=obs.qualifiers,
        superseded_evidence=best.qualifiers,
    )


def _instruction_status(update: Update, parts: list[tuple[str, frozenset[str]]]) -> str:
    """Latest when a clause shares most of the latest instruction's words, one word only it has, and its polarity."""
    new, old = update.latest_evidence, update.superseded_evidence
    new_only, old_only = new - old, old - new
    new_negative = bool(NEGATIVE.search(update.latest))
    old_negative = bool(NEGATIVE.search(update.superseded[0]))

    def carries(
        words: frozenset[str], only: frozenset[str], negative: bool, clause: str, clause_words: frozenset[str]
    ) -> bool:
        if len(words & clause_words) < 0.5 * len(words):
            return False
        if only and not clause_words & only:
            return False
        return new_negative == old_negative or bool(NEGATIVE.search(clause)) == negative

    if any(carries(new, new_only, new_negative, c, w) for c, w in parts):
        return "latest"
    if any(carries(old, old_only, old_negative, c, w) for c, w in parts):
        return "superseded"
    return "neither"


# --------------------------------------------------------------------------------------------
# Grouping


@dataclass(frozen=True)
class _Group:
    kind: str
    key: str
    name: str
    #: Its place in the order updates are listed in before sorting: (0, n) keyed, (1, n) prose.
    order: tuple[int, int]
    values: list[tuple[str, int]] = field(default_factory=list)
    qualifiers: set[str] = field(default_factory=set)


def _join(same: list[_Group], obs: Observation) -> _Group | None:
    """The group (of those with the observation's kind and key) a prose observation belongs to: shared
    qualifying words, or the only one when it states a change."""
    for group in same:
        if group.qualifiers & obs.qualifiers:
            return group
    if len(same) == 1 and (obs.change or not obs.qualifiers or not same[0].qualifiers):
        return same[0]
    return None


def _covers(paths: frozenset[str], node: str) -> bool:
    file = node.split("::")[0]
    return not paths or any(file == p or file.startswith(p + "/") or p == "." for p in paths)


def find_updates(observations: Sequence[Sequence[Observation]], start: int = 0, end: int | None = None) -> list[Update]:
    """Items whose value changed within ``messages[start:end]`` (``observations`` from :func:`observe`)."""
    start, end = _clamped(observations, start, end)
    fold = _Fold(observations, start)
    fold.fold_to(end)
    return _listed({order: update for order, update in fold.changed() if update is not None})


def _clamped(observations: Sequence[Sequence[Observation]], start: int, end: int | None) -> tuple[int, int]:
    start = max(0, start)
    return start, len(observations) if end is None else min(end, len(observations))


def _listed(updates: dict[tuple[int, int], Update]) -> list[Update]:
    """Keyed, prose and instruction updates (by their group's order), sorted by index and key, then that order."""
    return [
        update for _, update in sorted(updates.items(), key=lambda item: (item[1].latest_index, item[1].key, item[0]))
    ]


class GrowingSpanUpdates:
    """:func:`find_updates` for a series of spans with one start and growing ends, as a trace's
    compaction attempts have: each call applies only the updates made by the messages added since the
    previous one. A new start or a shorter end reads them from the start again. The updates are those of
    one fold of the conversation from that start (:class:`_Timeline`), shared by every trace of the
    same observations in the process: a sweep's replays of one conversation fold it once, not once each.
    Answers equal :func:`find_updates`, call by call; the :class:`Update` objects returned are immutable.
    """

    def __init__(self, observations: Sequence[Sequence[Observation]]) -> None:
        self._observations = observations
        self._restart(0)

    def _restart(self, start: int) -> None:
        self._start = self._end = start
        self._timeline = _timeline(self._observations, start)
        self._read = 0  # events of the timeline applied
        self._updates: dict[tuple[int, int], Update] = {}  # by group order

    def find(self, start: int = 0, end: int | None = None) -> list[Update]:
        """Items whose value changed within ``messages[start:end]``, as :func:`find_updates` gives them."""
        start, end = _clamped(self._observations, start, end)
        if start != self._start or end < self._end:
            self._restart(start)
        events = self._timeline.until(end)
        for _, order, update in events[self._read : bisect_left(events, end, key=lambda event: event[0])]:
            if update is None:
                self._updates.pop(order, None)
            else:
                self._updates[order] = update
            self._read += 1
        self._end = max(self._end, end)
        return _listed(self._updates)


class _Timeline:
    """One fold of a conversation's observations from one start: per message folded, the updates it changed
    (message index, group order, the update or None when it no longer is one), in message order."""

    def __init__(self, observations: Sequence[Sequence[Observation]], start: int) -> None:
        self._fold = _Fold(observations, start)
        self._events: list[tuple[int, tuple[int, int], Update | None]] = []

    def until(self, end: int) -> list[tuple[int, tuple[int, int], Update | None]]:
        """The events, folded at least up to message ``end`` (those of later messages may follow)."""
        for index in range(self._fold.end, end):
            self._fold.fold_to(index + 1)
            self._events.extend((index, order, update) for order, update in self._fold.changed())
        return self._events


#: The timelines of the last few observation lists and starts (a sweep measures one conversation many times).
_TIMELINES: dict[tuple[int, int], tuple[Sequence[Sequence[Observation]], int, _Timeline]] = {}


def _timeline(observations: Sequence[Sequence[Observation]], start: int) -> _Timeline:
    held = _TIMELINES.get((id(observations), start))
    if held is not None and held[0] is observations and held[1] == len(observations):
        return held[2]
    if len(_TIMELINES) >= 8:
        _TIMELINES.clear()
    timeline = _Timeline(observations, start)
    _TIMELINES[id(observations), start] = (observations, len(observations), timeline)
    return timeline


class _Fold:
    """The keyed, prose, test and instruction groups of a conversation's observations from ``start``, folded
    message by message up to ``end``; :meth:`changed` gives the updates of the groups changed since it last did."""

    def __init__(self, observations: Sequence[Sequence[Observation]], start: int) -> None:
        self._observations = observations
        self.end = start
        self._groups: dict[str, _Group] = {}
        self._failed_tests: dict[str, _Group] = {}  # keyed test groups whose latest value is "failed"
        self._prose: dict[tuple[str, str], list[_Group]] = {}  # by (kind, key), in creation order
        self._n_prose = 0
        self._changed: dict[tuple[int, int], _Group] = {}  # groups with values added since changed() last ran
        self._instructions: list[Observation] = []
        self._instruction_updates: list[Update] = []
        self._instructions_given = 0

    def fold_to(self, end: int) -> None:
        for i in range(self.end, end):
            for obs in self._observations[i]:
                self._fold(obs)
        self.end = max(self.end, end)

    def changed(self) -> list[tuple[tuple[int, int], Update | None]]:
        """The update of every group changed since the last call (None: it is none now), and the instruction
        updates made since (order ``(2, n)``)."""
        out = [(order, _update(group)) for order, group in self._changed.items()]
        self._changed.clear()
        new = range(self._instructions_given, len(self._instruction_updates))
        out.extend(((2, n), self._instruction_updates[n]) for n in new)
        self._instructions_given = len(self._instruction_updates)
        return out

    def _fold(self, obs: Observation) -> None:
        if obs.kind == "instruction":
            self._instructions.append(obs)
            return
        if obs.kind == "instruction-change":
            if (update := _instruction_update(self._instructions, obs)) is not None:
                self._instruction_updates.append(update)
            return
        if obs.kind.startswith("instruction"):
            return
        if obs.kind == "test-run":
            for group in list(self._failed_tests.values()):
                if _covers(obs.qualifiers, group.name):
                    self._add(group, "passed", obs.index)
            return
        prose = obs.key == "port" or obs.kind == "quantity"
        self._add(self._prose_group(obs) if prose else self._keyed_group(obs), obs.value, obs.index)

    def _keyed_group(self, obs: Observation) -> _Group:
        if obs.key not in self._groups:
            self._groups[obs.key] = _Group(obs.kind, obs.key, obs.name, (0, len(self._groups)))
        return self._groups[obs.key]

    def _prose_group(self, obs: Observation) -> _Group:
        same = self._prose.setdefault((obs.kind, obs.key), [])
        group = _join(same, obs)
        if group is None:
            group = _Group(obs.kind, obs.key, obs.name, (1, self._n_prose))
            self._n_prose += 1
            same.append(group)
        group.qualifiers.update(obs.qualifiers)
        return group

    def _add(self, group: _Group, value: str, index: int) -> None:
        group.values.append((value, index))
        self._changed[group.order] = group
        if group.kind == "test" and group.order[0] == 0:
            if value == "failed":
                self._failed_tests[group.key] = group
            else:
                self._failed_tests.pop(group.key, None)


def _update(group: _Group) -> Update | None:
    if len(group.values) < 2:
        return None
    latest, _ = group.values[-1]
    if group.kind == "test":
        latest_cores = frozenset({latest})
        cores = {value: frozenset({value}) for value, _ in group.values}
    else:
        cores = {value: value_cores(value) for value, _ in group.values}
        latest_cores = cores[latest]
    superseded = [(v, i) for v, i in group.values if cores[v] != latest_cores]
    if not superseded:
        return None
    old_cores = frozenset().union(*(cores[v] for v, _ in superseded))
    latest_evidence, superseded_evidence = latest_cores - old_cores, old_cores - latest_cores
    if not latest_evidence or not superseded_evidence:
        return None
    last_old = max(i for _, i in superseded)
    latest_index = next(i for v, i in group.values if i >= last_old and cores[v] == latest_cores)
    ordered = tuple(dict.fromkeys(v for v, _ in superseded))
    return Update(
        group.kind,
        group.key,
        group.name,
        ordered,
        latest,
        superseded[0][1],
        latest_index,
        names=_names(group),
        latest_evidence=latest_evidence,
        superseded_evidence=superseded_evidence,
    )


def _names(group: _Group) -> tuple[str, ...]:
    """The words a summary names the item by, so its values only count next to them."""
    if group.kind in ("path", "name"):
        return ()
    if group.kind == "test":
        node = group.name
        function = re.split(r"::|\.", node)[-1].split("[")[0]
        file = node.split("::")[0].rsplit("/", 1)[-1]
        return tuple(dict.fromkeys(n for n in (function, file) if n))
    if group.kind == "port":
        return ("port",) if group.key == "port" else (group.name, "port")
    return (group.name,)
