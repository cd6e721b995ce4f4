"""One setting of the engine, how a replay runs, and what a trace keeps of both.

- :class:`Setting`: everything that picks the engine's decision path (engine, summarizer, the two
  limits, counter, reasoning effort, usage baseline, manual compaction points). One Setting and one
  conversation are one replay, and one cell of a sweep.
- :class:`ReplayOptions`: how a replay runs (strict, engine timeout, summary cache, storage, warnings);
  never what the engine decides.
- :class:`TraceSettings`: what a trace keeps (``Trace.settings``): its Setting and the facts of the run.

These types are read by field everywhere; a record (a flat dict of plain values) is written and read
only where a trace, a sweep or a live trace is saved and loaded (:meth:`TraceSettings.record`,
:meth:`TraceSettings.from_record`).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zett_agent.model import AgentModel, ReasoningEffort

from ..errors import SettingError
from ..records import JSONObject, plain, read_bool, read_float, read_int, read_ints, read_list, read_mapping, read_text
from ..summarizers import DEFAULT_SUMMARIZER, spec_of, summarizer, summarizer_identity
from ..summarizers.cache import CacheSpec
from ..tokens import MAX_TOKEN_SETTING, TokenCounter, count_tokens, counter_identity, counter_named
from .deadline import DEFAULT_ENGINE_TIMEOUT, check_engine_timeout
from .engine import EngineError, EngineSpec, check_engine, engine_name

#: How the engine's usage baseline is fed: ``none`` (the estimator alone), ``recorded`` (the recording's
#: provider usage) or ``synthetic`` (counter + ``usage_overhead``).
USAGE_MODES = ("none", "recorded", "synthetic")
#: What a replay does with ``usage="recorded"`` on a conversation without usage: stop, or warn and estimate.
MISSING_USAGE = ("error", "estimate")

SummarizerSpec = str | AgentModel


class SavedName(str):
    """An engine's or summarizer's name read from a file (a saved trace, sweep or live trace).

    It names, and compares equal to the name it holds; it never decides what a replay calls: only
    an offline summarizer (:func:`~zett_lab.summarizers.spec_of`), the stock engine and zett_lab's own
    engines are rebuilt from it. Anything else is named on the run that uses it.
    """

    __slots__ = ()


def check_limits(max_tokens: object, keep_recent_tokens: object) -> None:
    """Raise :class:`SettingError` unless both limits are positive integers up to :data:`MAX_TOKEN_SETTING`."""
    for name, value in (("max_tokens", max_tokens), ("keep_recent_tokens", keep_recent_tokens)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise SettingError(f"{name} must be a positive integer, got {value!r}")
        if int(value) > MAX_TOKEN_SETTING:
            raise SettingError(
                f"{name}={value} is larger than zett_lab can use (at most {MAX_TOKEN_SETTING:,} tokens); "
                f"to never compact, give a value above the conversation's size"
            )


def keep_fills_budget(max_tokens: int, keep_recent_tokens: int) -> str | None:
    """What ``keep_recent_tokens >= max_tokens`` means for the engine, or None for any other setting."""
    if keep_recent_tokens < max_tokens:
        return None
    return (
        f"keep_recent_tokens={keep_recent_tokens} >= max_tokens={max_tokens}: the kept tail alone fills the budget, "
        "so once the context exceeds max_tokens the engine either finds no window (the recent budget covers "
        "everything) or keeps a tail that is still over max_tokens; expect steps over budget and few or no compactions"
    )


def _compact_point(item: object) -> int | str:
    """One manual compaction point: a turn index (int) or ``"step:N"`` (a digit string is a turn, as saved)."""
    if isinstance(item, numbers.Integral) and not isinstance(item, bool) and int(item) >= 0:
        return int(item)
    text = str(item).strip()
    if text.isdigit():
        return int(text)
    kind, colon, number = text.partition(":")
    if kind in ("turn", "step") and colon and number.isdigit():
        return int(number) if kind == "turn" else f"step:{int(number)}"
    raise SettingError(f"compact_at entry {item!r}: use a turn index (int) or 'step:N'")


def build_summarizer(spec: SummarizerSpec) -> AgentModel:
    """The summary model a Setting names: the one given, built from its spec, or (a :class:`SavedName`) the offline
    summarizer a saved identity names again; a provider read from a file is never called."""
    if isinstance(spec, SavedName):
        rebuilt = spec_of(spec)
        if rebuilt is None:
            raise SettingError(
                f"summarizer {str(spec)!r} was read from a file and is not an offline summarizer; name it on this run "
                "(replay with the model or its spec): a saved result never decides where a request goes"
            )
        return summarizer(rebuilt)
    if not isinstance(spec, str):
        if not callable(getattr(spec, "stream", None)):
            raise SettingError(
                f"summarizer must be a zett-agent AgentModel or a spec string, got {type(spec).__name__}"
            )
        return spec
    return summarizer(spec)


def _summarizer_name(text: str) -> str:
    """The identity of the summarizer a string names: a saved name's own; of the model a spec builds."""
    return str(text) if isinstance(text, SavedName) else _spec_identity(text.strip())


@functools.lru_cache(maxsize=256)
def _spec_identity(spec: str) -> str:
    """The identity of the model a spec builds (the spec itself when it builds none here, e.g. without its key)."""
    try:
        return summarizer_identity(summarizer(spec))
    except SettingError:
        return spec


def _engine_of(text: str) -> EngineSpec:
    """The engine a string names: a saved name (:func:`~zett_lab.replay.engine_names.engine_named`) or a spec."""
    from .engine_names import engine_from_spec, engine_named

    return engine_named(text) if isinstance(text, SavedName) else engine_from_spec(text)


def _engine_name(text: str) -> str:
    """The name of the engine a string gives: a saved name's own; a spec's engine's (the spec when it names none)."""
    return str(text) if isinstance(text, SavedName) else _spec_engine_name(text.strip())


@functools.lru_cache(maxsize=256)
def _spec_engine_name(spec: str) -> str:
    from .engine_names import engine_from_spec

    try:
        return engine_name(engine_from_spec(spec))
    except EngineError:
        return spec


@dataclass(frozen=True, slots=True, eq=False)
class Setting:
    """Everything that picks the engine's decision path on a conversation.

    Engine, summarizer and counter are each given as an object or by name, and a Setting is
    named by their identities: it is compared, hashed and saved by :meth:`names`, so a Setting
    read back from a file equals the one that was replayed, and still replays wherever its
    names can be rebuilt.

    - ``summarizer``: a model, or a spec for :func:`zett_lab.summarizer`; its name is the model's
      identity (``"anchors:0.1"`` is named ``"anchors(budget=0.1)"``). Default: the default offline
      summarizer.
    - ``engine``: None (the stock ``CompactionExtension``), a subclass of it, a factory, or a spec
      string (``"split-turn"``, ``"module:Class"``, ``"file.py:Class"``); its name is what
      :func:`~zett_lab.replay.engine.engine_name` gives (``"CompactionExtension"`` for the stock engine).
    - ``counter``: None (the exact o200k counter, shared), a counter, or a counter identity; named by
      :func:`~zett_lab.tokens.counter_identity`.

    A Setting read from a file holds its names (:class:`SavedName`); it replays again where they name
    an offline summarizer and the stock engine or one of zett_lab's own (pass anything else anew:
    ``dataclasses.replace(setting, summarizer=model)``), since a saved result never decides which
    provider is called or which code runs.

    Example::

        >>> setting = Setting(max_tokens=20_000, keep_recent_tokens=4_000, summarizer="truncate:0.1")
        >>> setting.names()["summarizer"], setting.names()["engine"]
        ('truncate(budget=0.1)', 'CompactionExtension')
        >>> Setting.from_record(setting.names()) == setting
        True
        >>> setting.with_limits(30_000, 4_000).max_tokens
        30000
    """

    max_tokens: int
    keep_recent_tokens: int
    summarizer: SummarizerSpec = DEFAULT_SUMMARIZER
    engine: EngineSpec | str = None
    counter: TokenCounter | str | None = None
    reasoning_effort: str = ReasoningEffort.LOW.value
    #: One of :data:`USAGE_MODES`.
    usage: str = "none"
    #: Tokens added to synthetic usage (tool schemas, provider framing).
    usage_overhead: int = 0
    #: Manual compaction points: turn indices (``Agent.compact`` before that turn) and ``"step:N"``
    #: (``compact(force=True)`` before model step N).
    compact_at: tuple[int | str, ...] = ()

    def __post_init__(self) -> None:
        check_limits(self.max_tokens, self.keep_recent_tokens)
        summary = DEFAULT_SUMMARIZER if self.summarizer is None else self.summarizer
        if not isinstance(summary, str) and not callable(getattr(summary, "stream", None)):
            raise SettingError(
                f"summarizer must be a zett-agent AgentModel or a spec string, got {type(summary).__name__}"
            )
        if not isinstance(self.engine, str):
            check_engine(self.engine)
        if self.counter is not None and not isinstance(self.counter, str) and not callable(self.counter):
            raise SettingError(
                f"counter must be a token counter or a counter's name, got {type(self.counter).__name__}"
            )
        try:
            effort = ReasoningEffort(getattr(self.reasoning_effort, "value", self.reasoning_effort)).value
        except ValueError:
            raise SettingError(
                f"reasoning_effort must be one of {', '.join(e.value for e in ReasoningEffort)}, "
                f"got {self.reasoning_effort!r}"
            ) from None
        if self.usage not in USAGE_MODES:
            raise SettingError(f"usage must be one of {', '.join(USAGE_MODES)}, got {self.usage!r}")
        overhead = self.usage_overhead
        if isinstance(overhead, bool) or not isinstance(overhead, numbers.Integral) or overhead < 0:
            raise SettingError(f"usage_overhead must be a non-negative integer, got {overhead!r}")
        points = (self.compact_at,) if isinstance(self.compact_at, (str, int)) else tuple(self.compact_at or ())
        for name, value in (
            ("max_tokens", int(self.max_tokens)),
            ("keep_recent_tokens", int(self.keep_recent_tokens)),
            ("summarizer", summary),
            ("reasoning_effort", effort),
            ("usage_overhead", int(overhead)),
            ("compact_at", tuple(_compact_point(p) for p in points)),
        ):
            object.__setattr__(self, name, value)

    # --- names: what a Setting is compared, hashed and saved by ------------------------------------

    @property
    def summarizer_name(self) -> str:
        """The summarizer's identity (the cache and the compaction rows name it so)."""
        if isinstance(self.summarizer, str):
            return _summarizer_name(self.summarizer)
        return summarizer_identity(self.summarizer)

    @property
    def engine_name(self) -> str:
        """The engine's name (:func:`~zett_lab.replay.engine.engine_name`)."""
        return _engine_name(self.engine) if isinstance(self.engine, str) else engine_name(self.engine)

    @property
    def counter_name(self) -> str:
        """The counter's identity (:func:`~zett_lab.tokens.counter_identity`)."""
        if self.counter is None:
            return counter_identity(count_tokens)
        if isinstance(self.counter, str):
            known = counter_named(self.counter)
            return counter_identity(known) if known is not None else self.counter.strip()
        return counter_identity(self.counter)

    def names(self) -> JSONObject:
        """The Setting as plain values, engine, summarizer and counter by name (what a file keeps)."""
        return {
            "max_tokens": self.max_tokens,
            "keep_recent_tokens": self.keep_recent_tokens,
            "summarizer": self.summarizer_name,
            "engine": self.engine_name,
            "counter": self.counter_name,
            "reasoning_effort": self.reasoning_effort,
            "usage": self.usage,
            "usage_overhead": self.usage_overhead,
            "compact_at": [str(point) for point in self.compact_at],
        }

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> Setting:
        """The Setting a file's record names (:meth:`names`; older records' keys and spellings too)."""
        usage = read_text(record, "usage") or "none"
        summary, engine = read_text(record, "summarizer"), read_text(record, "engine")
        max_tokens, keep_recent_tokens = read_int(record, "max_tokens"), read_int(record, "keep_recent_tokens")
        if max_tokens is None or keep_recent_tokens is None:
            raise SettingError(f"a saved setting names no max_tokens or keep_recent_tokens: {dict(record)!r}")
        return cls(
            max_tokens=max_tokens,
            keep_recent_tokens=keep_recent_tokens,
            summarizer=SavedName(summary) if summary else DEFAULT_SUMMARIZER,
            engine=SavedName(engine) if engine else None,
            counter=read_text(record, "counter") or None,
            reasoning_effort=read_text(record, "reasoning_effort") or ReasoningEffort.LOW.value,
            # A live agent's usage was the provider's own: replaying it with the recorded usage decides alike.
            usage="recorded" if usage == "live" else usage,
            usage_overhead=read_int(record, "usage_overhead") or 0,
            compact_at=tuple(str(point) for point in read_list(record, "compact_at")),
        )

    def named(self) -> Setting:
        """This Setting with engine, summarizer and counter by name (:class:`SavedName`): plain data that pickles,
        equal to this one."""
        return dataclasses.replace(
            self,
            summarizer=SavedName(self.summarizer_name),
            engine=SavedName(self.engine_name),
            counter=self.counter_name,
        )

    def _key(self) -> tuple[object, ...]:
        return tuple(tuple(value) if isinstance(value, list) else value for value in self.names().values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Setting):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    # --- what a replay builds from it --------------------------------------------------------------

    def summary_model(self) -> AgentModel:
        """The summary model (:func:`build_summarizer`)."""
        return build_summarizer(self.summarizer)

    def engine_spec(self) -> EngineSpec:
        """The engine: the one given, or the one its spec or saved name resolves to."""
        return _engine_of(self.engine) if isinstance(self.engine, str) else self.engine

    def token_counter(self) -> TokenCounter:
        """The counter: the one given, the shared exact one (None), or the shared one of a known identity."""
        if self.counter is None:
            return count_tokens
        if not isinstance(self.counter, str):
            return self.counter
        known = counter_named(self.counter)
        if known is None:
            raise SettingError(f"counter {self.counter!r} cannot be rebuilt here; pass the counter itself")
        return known

    def with_limits(self, max_tokens: int, keep_recent_tokens: int) -> Setting:
        """This Setting at other limits (a grid's neighbour)."""
        return dataclasses.replace(self, max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens)

    def describe(self) -> str:
        """The Setting in one line, as messages name it."""
        engine = self.engine_name
        named = "" if engine == engine_name(None) else f", engine {engine}"
        return (
            f"max_tokens={self.max_tokens:,}, keep_recent_tokens={self.keep_recent_tokens:,}, "
            f"summarizer {self.summarizer_name}{named}"
        )


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How a replay runs; nothing here changes what the engine decides.

    Attributes:
        cache: A :class:`~zett_lab.summarizers.SummaryCache`, a path to one, None for the
            default cache, or False for none.
        strict: Stop at the first failed summary with a :class:`~zett_lab.replay.run.SummaryError`
            (an engine failing outside its summary call stops with a ``ReplayError``) instead of
            recording it as a failed attempt and going on.
        engine_timeout: Seconds each compaction pass (the summary call included) may take; a pass
            over it is a failed attempt (``error_kind`` ``"timeout"``) or, with ``strict``, an error.
            None: unbounded (:mod:`zett_lab.replay.deadline`).
        on_missing_usage: With ``usage="recorded"`` on a conversation without usage: ``"error"`` or
            ``"estimate"`` (warn and use the estimator).
        store: Also write the replay through zett-agent's SQLite session storage to this new file
            (:mod:`zett_lab.replay.stored`).
        warn: Give a :class:`~zett_lab.errors.SettingWarning` for ``keep_recent_tokens >= max_tokens``
            and one :class:`~zett_lab.errors.SummaryFailureWarning` per distinct cause of failed
            attempts (a sweep turns this off and warns once for all cells).
    """

    cache: CacheSpec = None
    strict: bool = False
    engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT
    on_missing_usage: str = "error"
    store: str | Path | None = None
    warn: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine_timeout", check_engine_timeout(self.engine_timeout))
        if self.on_missing_usage not in MISSING_USAGE:
            raise SettingError(
                f"on_missing_usage must be one of {', '.join(MISSING_USAGE)}, got {self.on_missing_usage!r}"
            )


#: Field names of a Setting and of ReplayOptions (what :func:`compose` sorts keywords by).
SETTING_FIELDS = tuple(f.name for f in dataclasses.fields(Setting))
OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(ReplayOptions))


def split_changes(changes: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keywords as (Setting fields, ReplayOptions fields); ``count_tokens`` is the counter's old keyword."""
    changes = dict(changes)
    if "count_tokens" in changes:
        changes["counter"] = changes.pop("count_tokens")
    unknown = sorted(set(changes) - set(SETTING_FIELDS) - set(OPTION_FIELDS))
    if unknown:
        raise SettingError(
            f"unknown replay keyword(s) {unknown}; a Setting takes {', '.join(SETTING_FIELDS)}; "
            f"ReplayOptions take {', '.join(OPTION_FIELDS)}"
        )
    return (
        {k: v for k, v in changes.items() if k in SETTING_FIELDS},
        {k: v for k, v in changes.items() if k in OPTION_FIELDS},
    )


def compose(
    setting: Setting | None, options: ReplayOptions | None, changes: Mapping[str, Any]
) -> tuple[Setting, ReplayOptions]:
    """The Setting and options a call names: those given, with keyword ``changes`` to their fields applied.

    ``replay(conversation, max_tokens=..., keep_recent_tokens=..., strict=True)`` builds the one
    Setting and options this way; there is no second path.
    """
    setting_changes, option_changes = split_changes(changes)
    if setting is None:
        missing = [name for name in ("max_tokens", "keep_recent_tokens") if name not in setting_changes]
        if missing:
            raise SettingError(f"replay needs a Setting (or {' and '.join(missing)}=)")
        setting = Setting(**setting_changes)
    elif setting_changes:
        setting = dataclasses.replace(setting, **setting_changes)
    options = options or ReplayOptions()
    if option_changes:
        options = dataclasses.replace(options, **option_changes)
    return setting, options


@dataclass(frozen=True, slots=True)
class LiveFacts:
    """Where a live trace was read from: its file, the runs that wrote the session, what was not yet whole.

    Attributes:
        torn_records: Line numbers of records cut off by a process killed while writing them.
        recovered_messages: Message indices a restarted agent wrote from its session storage: the
            session had stored them, but the process that appended them was killed first.
        gaps: Where the trace and the session storage disagree (each a sentence): its messages may
            not follow the storage's numbering from there on.
    """

    source: str
    runs: tuple[str, ...] = ()
    in_flight: bool = False
    torn_records: tuple[int, ...] = ()
    recovered_messages: tuple[int, ...] = ()
    gaps: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TraceSettings:
    """What a trace keeps of how it was made: its Setting and the facts of the run (``Trace.settings``).

    Attributes:
        setting: The Setting replayed (or the one a live agent ran with); None for a trace of given
            spans (:func:`~zett_lab.replay.run.summarize_spans`), which has no limits.
        summarizer: The identity of the summary model that wrote the summaries (a replay's: its
            Setting's summarizer).
        counter: The identity of the counter the tables were counted with (a replay's: its Setting's).
        zett_agent_version: The engine's version (None for a log's own compactions, which no engine here made).
        strict, engine_timeout: The replay's options that bound its passes (None where unknown).
        replay_seconds: Wall time of the replay (0 for a trace derived from another replay).
        cache: The summary cache's statistics after the replay (``SummaryCache.stats()``), or None.
        store: The session-storage file the replay was also written to, or None.
        interrupted_turns: Turns the user interrupted before any model step.
        derived_from: For a trace that stands for another Setting proven to decide alike: the one replayed.
        live: For a trace a live agent recorded: where it was read from.
    """

    setting: Setting | None
    summarizer: str
    counter: str
    zett_agent_version: str | None = None
    strict: bool | None = None
    engine_timeout: float | None = None
    replay_seconds: float | None = None
    cache: Mapping[str, object] | None = None
    store: str | None = None
    interrupted_turns: tuple[int, ...] = ()
    derived_from: Setting | None = None
    live: LiveFacts | None = field(default=None)

    @property
    def max_tokens(self) -> int | None:
        """The Setting's ``max_tokens`` (None for a trace of given spans)."""
        return self.setting.max_tokens if self.setting is not None else None

    @property
    def keep_recent_tokens(self) -> int | None:
        """The Setting's ``keep_recent_tokens`` (None for a trace of given spans)."""
        return self.setting.keep_recent_tokens if self.setting is not None else None

    @property
    def engine(self) -> str:
        """The engine's name (the stock engine's for a trace of given spans, which uses its summary step)."""
        return self.setting.engine_name if self.setting is not None else engine_name(None)

    def named(self) -> TraceSettings:
        """These settings with every Setting by name (:meth:`Setting.named`): what crosses a process boundary."""
        return dataclasses.replace(
            self,
            setting=self.setting.named() if self.setting is not None else None,
            derived_from=self.derived_from.named() if self.derived_from is not None else None,
        )

    def derive(self, setting: Setting) -> TraceSettings:
        """These settings for a Setting proven to decide as this trace's did (no time spent replaying it)."""
        if self.setting is None or setting == self.setting:
            return self
        return dataclasses.replace(
            self, setting=setting, replay_seconds=0.0, derived_from=self.derived_from or self.setting
        )

    # --- files ---------------------------------------------------------------------------------------

    def record(self) -> JSONObject:
        """A flat record of plain values (what a saved trace, sweep or live trace holds)."""
        record: JSONObject = (
            self.setting.names()
            if self.setting is not None
            else {"max_tokens": None, "keep_recent_tokens": None, "spans": "given"}
        )
        record.update(
            summarizer=self.summarizer,
            counter=self.counter,
            zett_agent_version=self.zett_agent_version,
            strict=self.strict,
            engine_timeout=self.engine_timeout,
            replay_seconds=self.replay_seconds,
            cache=plain(self.cache),
            store=self.store,
            interrupted_turns=list(self.interrupted_turns),
        )
        if self.setting is None:
            record.setdefault("reasoning_effort", None)
        if self.derived_from is not None:
            record["derived_from"] = self.derived_from.names()
        if self.live is not None:
            record.update(
                live=True,
                source=self.live.source,
                runs=list(self.live.runs),
                in_flight=self.live.in_flight,
                torn_records=list(self.live.torn_records),
                recovered_messages=list(self.live.recovered_messages),
                gaps=list(self.live.gaps),
            )
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, object]) -> TraceSettings:
        """Settings from a record (:meth:`record`, or what older versions saved)."""
        setting = Setting.from_record(record) if record.get("max_tokens") is not None else None
        derived = read_mapping(record, "derived_from")
        live = (
            LiveFacts(
                source=read_text(record, "source") or "",
                runs=tuple(str(run) for run in read_list(record, "runs")),
                in_flight=bool(record.get("in_flight")),
                torn_records=read_ints(record, "torn_records"),
                recovered_messages=read_ints(record, "recovered_messages"),
                gaps=tuple(str(gap) for gap in read_list(record, "gaps")),
            )
            if record.get("live")
            else None
        )
        summarizer = read_text(record, "summarizer") or (setting.summarizer_name if setting else "")
        counter = read_text(record, "counter") or (setting.counter_name if setting else counter_identity(count_tokens))
        return cls(
            setting=setting,
            summarizer=summarizer,
            counter=counter,
            zett_agent_version=read_text(record, "zett_agent_version"),
            strict=read_bool(record, "strict"),
            engine_timeout=read_float(record, "engine_timeout"),
            replay_seconds=read_float(record, "replay_seconds"),
            cache=read_mapping(record, "cache"),
            store=read_text(record, "store"),
            interrupted_turns=read_ints(record, "interrupted_turns"),
            derived_from=(
                Setting.from_record({**(setting.names() if setting else {}), **derived})
                if derived is not None
                else None
            ),
            live=live,
        )
