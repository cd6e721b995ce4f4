"""A replay-and-measure session: many replays of a few conversations, each setting computed once.

Interactive tools (the notebook widgets, a script that revisits settings) replay the same
conversations under settings that come and go. A :class:`Session` shares what they can share:
one memoizing token counter, the persistent summary cache, one summary model per summarizer,
and an LRU of finished results keyed by everything that decides a replay. Results are plain
values (:class:`SessionResult`: a :class:`~zett_lab.replay.trace.Trace` and its
:class:`~zett_lab.measure.losses.Losses`).

:class:`SweepWalks` does the same for the exact decision boundaries over a sweep's grid.

Example::

    >>> session = Session(zett_lab.load_all("fixtures/"), ["anchors:0.1", "mask"])   # doctest: +SKIP
    >>> result = session.run("billing-rounding", session.setting("mask", 12_000, 3_000))  # doctest: +SKIP
    >>> result.trace.summary(), result.losses.conversation, result.cached       # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from zett_agent.model import AgentModel

from ..errors import SettingError
from ..load.conversation import Conversation
from ..measure import Losses, measure
from ..replay.run import replay
from ..replay.setting import ReplayOptions, Setting, split_changes
from ..replay.trace import Trace
from ..summarizers import (
    DEFAULT_SUMMARIZER,
    OFFLINE_SUMMARIZERS,
    CacheSpec,
    resolve_cache,
    summarizer,
    summarizer_identity,
)
from ..tokens import MemoizingCounter, TokenCounter
from .boundaries import Boundaries, decision_boundaries
from .sweep import Sweep

#: Replay options of a sweep that a boundary walk must share (they change the engine's estimate).
WALK_OPTIONS = ("usage", "usage_overhead", "on_missing_usage", "reasoning_effort")
#: A summarizer as a session takes it: a spec string or a zett-agent model.
SummarizerSpec = str | AgentModel


@dataclass(frozen=True, slots=True)
class SessionResult:
    """One replay of a session: the trace, its loss metrics (None when not measured), and whether it was cached."""

    trace: Trace
    losses: Losses | None
    cached: bool


class ResultCache:
    """A small LRU of session results keyed by replay settings (``hits`` and ``misses`` count lookups)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[Any, ...], tuple[Trace, Losses | None]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[Hashable, ...]) -> tuple[Trace, Losses | None] | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            self.hits += 1
        return entry

    def put(self, key: tuple[Hashable, ...], value: tuple[Trace, Losses | None]) -> None:
        self.misses += 1
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


def conversation_map(
    conversations: Conversation | Iterable[Conversation] | Mapping[str, Conversation],
) -> dict[str, Conversation]:
    """Conversations by id, from one, a list, or a mapping; a :class:`SettingError` for anything else."""
    if isinstance(conversations, Conversation):
        items: list[Any] = [conversations]
    elif isinstance(conversations, Mapping):
        items = list(conversations.values())
    else:
        items = list(conversations)
    if not items:
        raise SettingError("no conversations given")
    out: dict[str, Conversation] = {}
    for item in items:
        if not isinstance(item, Conversation):
            raise SettingError(f"expected Conversation objects, got {type(item).__name__}")
        out[item.id] = item
    return out


def default_summarizers() -> list[str]:
    """The built-in offline summarizers, the default first, one spec per summarizer identity (the identity the
    summary cache keys on): the first spec of each."""
    specs: dict[str, str] = {}
    for spec in (DEFAULT_SUMMARIZER, *OFFLINE_SUMMARIZERS):
        specs.setdefault(summarizer_identity(summarizer(spec)), spec)
    return list(specs.values())


def summarizer_labels(summarizers: SummarizerSpec | Sequence[SummarizerSpec] | None) -> dict[str, SummarizerSpec]:
    """Label -> spec or model, in the given order; None: the built-in offline summarizers, default first, each
    summarizer once (``anchors`` is ``anchors:0.1``: the same identity, the same summaries)."""
    if summarizers is None:
        summarizers = default_summarizers()
    if isinstance(summarizers, str) or callable(getattr(summarizers, "stream", None)):
        summarizers = [summarizers]  # type: ignore[list-item]
    out: dict[str, SummarizerSpec] = {}
    for item in summarizers:  # type: ignore[union-attr]
        if isinstance(item, str):
            out[item] = item
            continue
        label, n = summarizer_identity(item), 2
        while label in out:
            label, n = f"{summarizer_identity(item)} ({n})", n + 1
        out[label] = item
    if not out:
        raise SettingError("no summarizers given")
    return out


class Session:
    """Replays and loss metrics of some conversations under changing settings, each setting computed once.

    Args:
        conversations: A Conversation, a list of them, or a mapping id -> Conversation.
        summarizers: Specs (``"extractive"``, ``"truncate:0.1"``) or models; default: the built-in
            offline summarizers (default summarizer first). Results are keyed by their labels.
        cache: Summary cache (see :func:`zett_lab.replay`); False for none.
        count_tokens: Counter shared by every replay (default: one MemoizingCounter).
        lru_size: Results kept in memory.
        replay_options: Fields of every Setting and of the ReplayOptions (``usage=...``, ``engine=...``,
            ``strict=...``), composed once (:func:`~zett_lab.replay.setting.compose`).

    ``replays`` counts the replays actually run; ``cache`` holds the finished results.
    """

    def __init__(
        self,
        conversations: Conversation | Iterable[Conversation] | Mapping[str, Conversation],
        summarizers: SummarizerSpec | Sequence[SummarizerSpec] | None = None,
        *,
        cache: CacheSpec = None,
        count_tokens: TokenCounter | None = None,
        lru_size: int = 48,
        replay_options: Mapping[str, object] | None = None,
    ) -> None:
        self.conversations = conversation_map(conversations)
        self.summarizers = summarizer_labels(summarizers)
        self.counter = count_tokens if count_tokens is not None else MemoizingCounter()
        self.summary_cache = resolve_cache(cache)
        #: Setting fields every replay of the session shares (``engine``, ``usage``, ...), and how it replays.
        self.setting_fields, option_fields = split_changes(replay_options or {})
        self.options = ReplayOptions(
            **{"cache": self.summary_cache if self.summary_cache is not None else False, **option_fields}
        )
        self.cache = ResultCache(lru_size)
        self.replays = 0
        self._models: dict[str, AgentModel] = {}
        self._sizes: dict[str, int] = {}

    def size(self, conversation_id: str) -> int:
        """Tokens of a whole conversation (the engine's counter), computed once."""
        if conversation_id not in self._sizes:
            self._sizes[conversation_id] = int(self.counter(self.conversation(conversation_id).messages))
        return self._sizes[conversation_id]

    def conversation(self, conversation_id: str) -> Conversation:
        try:
            return self.conversations[conversation_id]
        except KeyError:
            raise SettingError(f"no conversation {conversation_id!r}; known: {', '.join(self.conversations)}") from None

    def summary_model(self, label: str) -> AgentModel:
        """The summary model of a label, built once (a spec goes through :func:`zett_lab.summarizer`)."""
        if label not in self.summarizers:
            raise SettingError(f"no summarizer {label!r}; known: {', '.join(self.summarizers)}")
        if label not in self._models:
            spec = self.summarizers[label]
            self._models[label] = summarizer(spec) if isinstance(spec, str) else spec
        return self._models[label]

    def setting(self, summarizer_label: str, max_tokens: int, keep_recent_tokens: int) -> Setting:
        """The Setting of a summarizer's label at these limits, with the session's summary model, counter and
        shared fields (change others with ``dataclasses.replace``, e.g. ``usage=`` or ``compact_at=``)."""
        given = {"counter": self.counter, **self.setting_fields}
        return Setting(
            max_tokens=int(max_tokens),
            keep_recent_tokens=int(keep_recent_tokens),
            summarizer=self.summary_model(summarizer_label),
            **given,
        )

    def run(self, conversation_id: str, setting: Setting, *, measure_losses: bool = True) -> SessionResult:
        """Replay (and measure) one Setting, or return it from the LRU when it was computed before."""
        conversation = self.conversation(conversation_id)
        key = (conversation.id, id(conversation), setting, measure_losses)
        hit = self.cache.get(key)
        if hit is not None:
            return SessionResult(hit[0], hit[1], True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "no recorded usage": the trace's estimate_source says what decided
            trace = replay(conversation, setting, self.options)
        self.replays += 1
        losses = measure(trace) if measure_losses else None
        self.cache.put(key, (trace, losses))
        return SessionResult(trace, losses, False)


def live_map(live: Trace | Sequence[Trace] | None) -> dict[str, Trace]:
    """Traces a live agent recorded, by conversation id (one per session); a :class:`SettingError` for others."""
    items = [] if live is None else [live] if isinstance(live, Trace) else list(live)
    out: dict[str, Trace] = {}
    for trace in items:
        if not isinstance(trace, Trace) or trace.settings.live is None:
            raise SettingError("live= takes traces a live agent recorded (zett_lab.Trace.load(path, session=...))")
        out[trace.conversation.id] = trace
    return out


def with_live_conversations(
    conversations: Conversation | Iterable[Conversation] | Mapping[str, Conversation] | None, live: Mapping[str, Trace]
) -> list[Conversation]:
    """The conversations given, then those of the live traces (a live trace's own conversation wins)."""
    given = [] if conversations is None else list(conversation_map(conversations).values())
    if not given and not live:
        raise SettingError("no conversations given (pass conversations, or live= traces)")
    return [*given, *(trace.conversation for trace in live.values())]


def live_setting(trace: Trace | None) -> tuple[int | None, int | None]:
    """The limits a live trace was recorded with ((None, None) without one)."""
    if trace is None:
        return None, None
    return trace.setting.max_tokens, trace.setting.keep_recent_tokens


def live_description(trace: Trace) -> str:
    """A live trace's engine, limits and summarizer, in one line."""
    setting = trace.setting
    return (
        f"{setting.engine_name}, max_tokens={setting.max_tokens:,}, "
        f"keep={setting.keep_recent_tokens:,}, summarizer {setting.summarizer_name}"
    )


class SweepWalks:
    """Exact decision boundaries over a sweep's grid: one cached walk along max_tokens per keep_recent_tokens row."""

    def __init__(
        self, sweep: Sweep | None, conversations: Iterable[Conversation] | Mapping[str, Conversation] | None = None
    ) -> None:
        known = conversations if conversations is not None else (sweep.conversations if sweep is not None else None)
        self.conversations = conversation_map(known) if known else {}
        config = sweep.config if sweep is not None else {}
        options = dict(config.get("replay_options") or {})
        self.options = {k: v for k, v in options.items() if k in WALK_OPTIONS}
        self._walks: dict[tuple[Any, ...], list[Boundaries]] = {}

    def walks(
        self, conversation_id: str, summarizer_spec: str, max_tokens: Sequence[int], keep_recent_tokens: Sequence[int]
    ) -> list[Boundaries]:
        """The boundaries for one conversation and summarizer over the grid's range (replays the first time only)."""
        if conversation_id not in self.conversations:
            raise SettingError("this sweep does not hold its conversations; pass conversations= to draw boundaries")
        xs, ys = sorted(int(v) for v in max_tokens), sorted(int(v) for v in keep_recent_tokens)
        key = (conversation_id, summarizer_spec, xs[0], xs[-1], tuple(ys))
        if key not in self._walks:
            self._walks[key] = [
                decision_boundaries(
                    self.conversations[conversation_id],
                    summarizer_spec,
                    keep_recent_tokens=k,
                    max_tokens_range=(xs[0], xs[-1]),
                    progress=False,
                    **self.options,
                )
                for k in ys
            ]
        return self._walks[key]

    def cached(
        self, conversation_id: str, summarizer_spec: str, max_tokens: Sequence[int], keep_recent_tokens: Sequence[int]
    ) -> bool:
        xs, ys = sorted(int(v) for v in max_tokens), sorted(int(v) for v in keep_recent_tokens)
        return (conversation_id, summarizer_spec, xs[0], xs[-1], tuple(ys)) in self._walks
