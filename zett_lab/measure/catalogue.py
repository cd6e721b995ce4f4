"""The metric catalogue: every metric is one module, registered here, and everything that shows, ranks or compares
metrics finds it here.

A metric module (the built-in ones are :mod:`zett_lab.measure.metrics`; yours can be any module you import)
holds the metric's computation, how it pools over a conversation's compactions and over conversations, and its
catalogue entry (name, levels, direction, label, definition), like Inspect AI's ``@metric``:

* :func:`compaction_metric` decorates a function of one compaction attempt
  (:class:`~zett_lab.measure.attempt.Attempt`: its span's anchors as arrays, what the summary holds, its sizes)
  that returns the metric's value (or its value and helper columns); ``over_compactions`` says how a
  conversation's attempts pool into one value (:data:`MEAN`, :data:`SUM`, :func:`pooled`);
* :func:`conversation_metric` decorates a function of one trace's tables (:class:`TraceTables`);
* :func:`register` adds an entry computed elsewhere (the cost model's prices, a replay's own budget figures).

:func:`zett_lab.measure` computes every registered metric, a sweep's results table and the report carry each
one, and plots, widgets and comparisons read their labels and directions from :func:`metric`. The measured
precision and recall of a metric on the labelled validation set (:class:`~zett_lab.measure.validity.Validity`) are read from
``zett_lab/data/metric_validity.json``; see the documentation's "Add a metric" page.

Example::

    >>> from zett_lab.measure.catalogue import metric, higher_is_better
    >>> metric("needed_anchor_recall").label
    'Needed-anchor recall'
    >>> higher_is_better("lost_but_needed")
    False
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import pandas as pd

from ..errors import SettingError
from ..formatting import frame_html
from .validity import Validity, measured_validity

if TYPE_CHECKING:
    from .attempt import Attempt

Level = Literal["compaction", "conversation", "cell"]
Direction = Literal["higher", "lower"]
#: ``"loss"`` metrics say what a summary kept; ``"budget"`` and ``"cost"`` what a setting spent.
Kind = Literal["loss", "budget", "cost"]
#: How a column is typed: ``count`` nullable Int64, ``ratio`` / ``float`` float64 (NaN: undefined), ``flag``
#: nullable boolean, ``text`` object.
ColumnType = Literal["count", "ratio", "float", "flag", "text"]
#: How a metric pools over conversations (a sweep's cells, a report's replays): their mean or their sum.
AcrossConversations = Literal["mean", "sum"]

ALL_LEVELS: tuple[Level, ...] = ("compaction", "conversation", "cell")
RUN_LEVELS: tuple[Level, ...] = ("conversation", "cell")


@dataclass(frozen=True, slots=True)
class Column:
    """One documented column of a result table: its name, what it holds, and how it is typed."""

    name: str
    meaning: str
    type: ColumnType = "ratio"


@dataclass(frozen=True)
class TraceTables:
    """One trace's measured tables, what a conversation-level metric reads.

    ``compactions`` is the typed ``losses.compactions`` of the trace (every metric's per-attempt columns
    filled), ``probes`` and ``decay`` its ``losses.probes`` and ``losses.decay``; ``steps`` the trace's step table.
    """

    steps: pd.DataFrame
    compactions: pd.DataFrame
    probes: pd.DataFrame
    decay: pd.DataFrame
    #: Gold probes of the conversation.
    n_probes: int

    @cached_property
    def applied(self) -> pd.DataFrame:
        """The attempts whose checkpoint was applied."""
        table = self.compactions
        return table[table["status"] == "applied"] if len(table) else table

    @cached_property
    def applied_probes(self) -> pd.DataFrame:
        """Probe rows of applied attempts."""
        probes = self.probes
        return probes[probes["applied"].fillna(False).astype(bool)] if len(probes) else probes


@dataclass(frozen=True, slots=True)
class Pooling:
    """How a compaction-level column pools into one value per conversation.

    ``how``: ``"mean"`` of the column, ``"sum"`` of it, or ``"ratio"`` Σ ``numerator`` / Σ ``denominator``;
    ``over``: the applied attempts (what the agent went on with) or every attempt.
    """

    how: Literal["mean", "sum", "ratio"]
    numerator: str | None = None
    denominator: str | None = None
    over: Literal["applied", "attempts"] = "applied"

    def __call__(self, tables: TraceTables, column: str) -> float | int:
        rows = tables.applied if self.over == "applied" else tables.compactions
        if self.how == "sum":
            return _sum(rows[column]) if len(rows) else 0
        if not len(rows):
            return math.nan
        if self.how == "mean":
            values = pd.to_numeric(rows[column], errors="coerce").dropna()
            return float(values.mean()) if len(values) else math.nan
        assert self.numerator is not None and self.denominator is not None
        total = float(pd.to_numeric(rows[self.denominator], errors="coerce").fillna(0).sum())
        return (
            float(pd.to_numeric(rows[self.numerator], errors="coerce").fillna(0).sum()) / total if total else math.nan
        )

    def describe(self, column: str) -> str:
        """How the conversation's value is made, in words (its column's documentation)."""
        over = "applied compactions" if self.over == "applied" else "all summary attempts"
        if self.how == "mean":
            return f"mean {column} over {over} (NaN with none)"
        if self.how == "sum":
            return f"Σ {column} over {over}"
        return f"pooled over {over}: Σ {self.numerator} / Σ {self.denominator} (NaN when the denominator is 0)"


#: The mean of a compaction-level metric over a conversation's applied compactions.
MEAN = Pooling("mean")
#: The sum over a conversation's applied compactions.
SUM = Pooling("sum")


def pooled(numerator: str, denominator: str) -> Pooling:
    """Σ numerator / Σ denominator over a conversation's applied compactions (a ratio of totals, not of means)."""
    return Pooling("ratio", numerator, denominator)


def _sum(values: pd.Series) -> int:
    return int(pd.to_numeric(values, errors="coerce").fillna(0).sum())


#: A metric's computation for one attempt: its value, or a mapping of its columns (its own and helper columns).
AttemptComputation: TypeAlias = "Callable[[Attempt], Any]"
ConversationComputation: TypeAlias = Callable[[TraceTables], Any]


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: its catalogue entry (column name, levels, direction, label, definition) and its computation.

    ``compaction`` computes it for one attempt (called for every attempt with a window, or with a summary
    when ``needs="summary"``, or for every attempt when ``needs="attempt"``); ``conversation`` pools a
    trace's attempts into one value (a :class:`Pooling` of its compaction column, or a function of
    :class:`TraceTables`); ``across`` how conversations pool (a sweep's cells, a report's replays). An entry
    with neither computation is computed where ``computed_by`` says.
    """

    name: str
    levels: tuple[Level, ...]
    direction: Direction
    label: str
    definition: str
    kind: Kind = "loss"
    type: ColumnType = "ratio"
    compaction: AttemptComputation | None = None
    needs: Literal["attempt", "window", "summary"] = "window"
    conversation: Pooling | ConversationComputation | None = None
    across: AcrossConversations = "mean"
    #: Helper columns the computations add (e.g. a ratio's numerator and denominator), per level.
    compaction_columns: tuple[Column, ...] = ()
    conversation_columns: tuple[Column, ...] = ()
    #: What the compaction and conversation columns hold (default: the definition; a pooling describes itself).
    compaction_meaning: str = ""
    conversation_meaning: str = ""
    #: In the default metric set (comparisons, the report) at the levels it has.
    headline: bool = False
    #: Computed from the anchor extractor's items (:mod:`zett_lab.load.anchors`): a summarizer that selects what
    #: to keep by the same extractor (the ``anchors`` baseline) partly scores the metric against itself on it.
    anchor_based: bool = False
    #: Arithmetic on the replay's own token counts (a loss metric such as compression ratio): no judgement of what a
    #: text holds, so nothing for labels to check (:attr:`exact`).
    arithmetic: bool = False
    #: Where an entry without a computation here is computed.
    computed_by: str = ""
    #: The module that registered it (worker processes import it before measuring).
    module: str = ""

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"

    @property
    def exact(self) -> bool:
        """Whether the metric is counted or computed from the replay itself (steps, tokens, calls, prices, token
        arithmetic) rather than from a judgement of what a text holds: exact for what its definition says, with
        no precision or recall to measure. Budget and cost metrics always are."""
        return self.arithmetic or self.kind != "loss"

    @property
    def validity(self) -> Validity | None:
        """Its measured precision and recall on the labelled validation set (None: not measured yet)."""
        return measured_validity().get(self.name)

    def columns(self, level: Literal["compaction", "conversation"]) -> list[Column]:
        """The columns it adds to ``losses.compactions`` or ``losses.conversation`` (its own first, then helpers)."""
        if level == "compaction":
            if self.compaction is None:
                return []
            own = Column(self.name, self.compaction_meaning or self.definition, self.type)
            return [own, *self.compaction_columns]
        if self.conversation is None:
            return []
        meaning = self.conversation_meaning or (
            self.conversation.describe(self.name) if isinstance(self.conversation, Pooling) else self.definition
        )
        return [Column(self.name, meaning, self.type), *self.conversation_columns]

    def at_compaction(self, attempt: Attempt) -> dict[str, object]:
        """Its columns for one attempt."""
        assert self.compaction is not None
        value = self.compaction(attempt)
        return dict(value) if isinstance(value, Mapping) else {self.name: value}

    def at_conversation(self, tables: TraceTables) -> dict[str, object]:
        """Its columns for one trace."""
        assert self.conversation is not None
        if isinstance(self.conversation, Pooling):
            return {self.name: self.conversation(tables, self.name)}
        value = self.conversation(tables)
        return dict(value) if isinstance(value, Mapping) else {self.name: value}


# --- the registry ---------------------------------------------------------------------------------------------

_REGISTRY: dict[str, Metric] = {}
#: Bumped on every registration: cached column tables are rebuilt when it moves.
_VERSION = [0]
_BUILTIN = "zett_lab.measure.metrics"


def register(entry: Metric) -> Metric:
    """Add a metric to the catalogue (its module is recorded so that worker processes load it too).

    Registering a name again from the module that registered it replaces the entry (a module imported
    again); from another module it is a :class:`~zett_lab.errors.SettingError`.
    """
    module = entry.module or str(sys._getframe(1).f_globals.get("__name__", ""))
    entry = _with_module(entry, module)
    held = _REGISTRY.get(entry.name)
    if held is not None and held.module != module:
        raise SettingError(f"metric {entry.name!r} is already registered by {held.module}; choose another name")
    levels = set(entry.levels)
    if ("compaction" in levels) != (entry.compaction is not None) and not entry.computed_by:
        raise SettingError(f"metric {entry.name!r}: a compaction-level metric needs a compaction computation")
    _REGISTRY[entry.name] = entry
    _VERSION[0] += 1
    return entry


def _with_module(entry: Metric, module: str) -> Metric:
    if entry.module == module:
        return entry
    import dataclasses

    return dataclasses.replace(entry, module=module)


def compaction_metric(
    *,
    label: str,
    direction: Direction,
    definition: str,
    over_compactions: Pooling | ConversationComputation | None = MEAN,
    levels: tuple[Level, ...] | None = None,
    name: str | None = None,
    **entry: Any,
) -> Callable[[AttemptComputation], AttemptComputation]:
    """Register the decorated function of one attempt as a metric named after it (or ``name``).

    ``over_compactions`` pools a conversation's attempts (None: the metric exists per compaction only);
    ``levels`` defaults to every level when it pools, else ``("compaction",)``. Other keywords are
    :class:`Metric` fields (``kind``, ``type``, ``needs``, ``compaction_columns``, ``headline``, ...).
    """

    def add(function: AttemptComputation) -> AttemptComputation:
        register(
            Metric(
                name=name or function.__name__,
                levels=levels or (ALL_LEVELS if over_compactions is not None else ("compaction",)),
                direction=direction,
                label=label,
                definition=definition,
                compaction=function,
                conversation=over_compactions,
                module=function.__module__,
                **entry,
            )
        )
        return function

    return add


def conversation_metric(
    *,
    label: str,
    direction: Direction,
    definition: str,
    levels: tuple[Level, ...] = RUN_LEVELS,
    name: str | None = None,
    **entry: Any,
) -> Callable[[ConversationComputation], ConversationComputation]:
    """Register the decorated function of one trace's tables (:class:`TraceTables`) as a metric named after it."""

    def add(function: ConversationComputation) -> ConversationComputation:
        register(
            Metric(
                name=name or function.__name__,
                levels=levels,
                direction=direction,
                label=label,
                definition=definition,
                conversation=function,
                module=function.__module__,
                **entry,
            )
        )
        return function

    return add


def _loaded() -> dict[str, Metric]:
    """The registry, with the built-in metric modules imported (on first use: they import this module)."""
    if _BUILTIN not in sys.modules:
        importlib.import_module(_BUILTIN)
    return _REGISTRY


def version() -> int:
    """Changes whenever a metric is registered (what cached column tables are keyed on)."""
    _loaded()
    return _VERSION[0]


def plugin_modules() -> tuple[tuple[str, str | None], ...]:
    """(module name, file) of every module outside zett_lab that registered a metric, in registration order."""
    seen: dict[str, str | None] = {}
    for entry in _loaded().values():
        if entry.module.startswith("zett_lab.") or entry.module in seen:
            continue
        module = sys.modules.get(entry.module)
        seen[entry.module] = getattr(module, "__file__", None)
    return tuple(seen.items())


def load_plugins(modules: Iterable[tuple[str, str | None]]) -> None:
    """Import metric modules another process registered (by name, else from their file) so this one measures them."""
    for name, path in modules:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            if path is None:
                raise SettingError(f"cannot import the metric module {name!r} in this process") from None
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise SettingError(f"cannot load the metric module {name!r} from {path}") from None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)


# --- the catalogue's questions -----------------------------------------------------------------------------------


class _Catalogue(Mapping[str, Metric]):
    """Name -> :class:`Metric` of every registered metric, in registration order (a live view)."""

    def __getitem__(self, name: str) -> Metric:
        return _loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(_loaded()))

    def __len__(self) -> int:
        return len(_loaded())


class _Metrics(Sequence[Metric]):
    """Every registered metric, in registration order (a live view)."""

    def __len__(self) -> int:
        return len(_loaded())

    def __getitem__(self, index: Any) -> Any:
        return list(_loaded().values())[index]


CATALOGUE: Mapping[str, Metric] = _Catalogue()
METRICS: Sequence[Metric] = _Metrics()


def metric(name: str) -> Metric:
    """The catalogue entry of a metric; a :class:`SettingError` naming the known ones otherwise."""
    try:
        return _loaded()[name]
    except KeyError:
        known = ", ".join(sorted(_loaded()))
        raise SettingError(f"{name!r} is not a metric of the catalogue; known metrics: {known}") from None


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the metric is better (from its catalogue entry)."""
    return metric(name).higher_is_better


def label(name: str) -> str:
    """The label a person reads for a column: a metric's catalogue label, any other column's name in words
    (``compactions_applied`` -> ``compactions applied``). The one home of the words a table, plot or text uses
    for a column."""
    entry = _loaded().get(name)
    return entry.label if entry else name.replace("_", " ")


def labelled_html(frame: pd.DataFrame, **options: Any) -> str:
    """A result table as HTML (:func:`~zett_lab.formatting.frame_html` with its ``options``), each column headed by
    its :func:`label`."""
    return frame_html(frame, headers=label, **options)


def label_with_direction(name: str) -> str:
    """A metric's label and which way is better, e.g. ``Lost but needed (lower is better)``; a column outside the
    catalogue: its :func:`label`."""
    entry = _loaded().get(name)
    if entry is None:
        return label(name)
    return f"{entry.label} ({'higher' if entry.higher_is_better else 'lower'} is better)"


def metrics(level: Level | None = None, kind: str | None = None) -> list[Metric]:
    """Catalogue entries, optionally those at one level or of one kind, in catalogue order."""
    return [m for m in _loaded().values() if (level is None or level in m.levels) and (kind is None or m.kind == kind)]


def across_conversations(name: str, default: AcrossConversations) -> AcrossConversations:
    """How a metric column pools over conversations (its entry's ``across``); ``default`` for a column outside the
    catalogue."""
    entry = _loaded().get(name)
    return entry.across if entry is not None else default


#: Loss metrics that do not depend on the anchor vocabulary (gold probes; values that changed, found by their own
#: reading): a summarizer built from that vocabulary (``anchors``) partly scores the anchor-based metrics
#: (``Metric.anchor_based``) against themselves, so every comparison of summarizers shows these too.
INDEPENDENT_METRICS = ("probe_presence", "superseded_rate")


def default_metrics(level: Level = "conversation") -> tuple[str, ...]:
    """The metric set comparisons and the report show by default, most telling first: the catalogue's headline
    metrics that exist at ``level``."""
    return tuple(m.name for m in metrics(level) if m.headline)


def computed(level: Literal["compaction", "conversation"]) -> list[Metric]:
    """The metrics :func:`zett_lab.measure` computes at a level, in catalogue order."""
    attribute = "compaction" if level == "compaction" else "conversation"
    return [m for m in _loaded().values() if getattr(m, attribute) is not None]


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0 (a ratio over nothing is undefined, not 0)."""
    return numerator / denominator if denominator else math.nan


#: What the report, the documentation and ``measure()``'s docstring say of a metric with no measured validity.
NOT_VALIDATED = "not validated"
#: What they say of an :attr:`~Metric.exact` metric (nothing to validate).
EXACT = "exact (counted from the replay: no judgement to validate)"


def trust(name: str) -> str:
    """How far to trust a metric, in words: its measured precision and recall with what they were measured on,
    :data:`EXACT` for an exact metric, or :data:`NOT_VALIDATED`."""
    entry = metric(name)
    if entry.validity is not None:
        return entry.validity.text()
    return EXACT if entry.exact else NOT_VALIDATED


def trusted_metrics() -> list[Metric]:
    """The metrics whose validity a reader is told: the headline metrics, then any other with a measurement."""
    return [m for m in metrics() if m.headline] + [m for m in metrics() if not m.headline and m.validity is not None]


def trust_list(indent: str = "") -> str:
    """One bullet per :func:`trusted_metrics` entry, ``* Label (`name`): <trust>`` (Markdown and reST alike)."""
    return "\n".join(f"{indent}* {m.label} (``{m.name}``): {trust(m.name)}" for m in trusted_metrics())


__all__ = [
    "CATALOGUE",
    "INDEPENDENT_METRICS",
    "MEAN",
    "METRICS",
    "NOT_VALIDATED",
    "SUM",
    "Column",
    "Metric",
    "Pooling",
    "TraceTables",
    "compaction_metric",
    "conversation_metric",
    "default_metrics",
    "higher_is_better",
    "label",
    "label_with_direction",
    "metric",
    "metrics",
    "pooled",
    "ratio",
    "register",
    "trust",
    "trust_list",
    "trusted_metrics",
]
