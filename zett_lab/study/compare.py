"""One way to compare: summarizers, engines or production summaries, paired over the same units, one result type.

:func:`compare` takes what to compare and returns a :class:`Comparison` (means with bootstrap confidence
intervals, paired differences, win rates and Wilcoxon tests: :mod:`zett_lab.measure.statistics`):

* ``{name: traces or Losses}``: measured as given; ``baselines=("mask", ...)`` replays the same
  conversations at the same settings with those summarizers and adds them;
* ``{"native:<agent>": conversations}`` (``native:claude-code``, ``native:openhands``, ``native:zett-agent``
  for the snapshots of a zett-agent session recorded with compaction on; ``zett_lab.measure.native.NATIVE_SUBJECTS``):
  the recorded production summaries, and every baseline (offline, or a provider summarizer such as
  ``"openai:gpt-5-mini"`` when its key is set) summarizes each native compaction's identical span through the
  engine's summary step (:func:`zett_lab.study.production.span_traces`), so the units are native compactions;
* a ``Sweep`` or its results table: grouped by ``by`` and paired per conversation and setting;
* a :class:`~zett_lab.study.session.Session`: replayed in a paired design. Summarizers: the first one is
  replayed with the engine deciding at ``max_tokens`` / ``keep_recent_tokens`` on ``conversation``, then its
  applied compaction steps are forced (``compact_at``, automatic compaction out of reach) for every
  summarizer, so all summarize the same spans at the same steps. Engines (``by="engine"``, ``engines={...}``):
  every conversation of the session replayed with each engine and the first summarizer at the setting.

``level="compaction"`` (default for summarizers) pairs compaction attempts ``(conversation_id, max_tokens,
keep_recent_tokens, span_start, span_end, step)``: when two summarizers' schedules differ (a shorter summary
delays the next trigger, a rejected summary is retried a step later), later attempts no longer line up and
are left out of the pairs; ``Comparison.matched`` says how many matched. ``level="conversation"`` (default for
engines: two engines rarely cut the same spans) pairs per conversation and setting, whatever the schedules did.
The metrics compared by default are the catalogue's default set at the level
(:func:`~zett_lab.measure.catalogue.default_metrics`).

Example::

    >>> result = compare({"anchors": anchors_traces, "mask": mask_traces}, seed=0)  # doctest: +SKIP
    >>> result.summary      # one row per (summarizer, metric)  # doctest: +SKIP
    >>> result.pairwise     # one row per (a, b, metric)        # doctest: +SKIP
    >>> compare({"native:claude-code": conversations}, baselines=("anchors", "mask"))  # doctest: +SKIP
    >>> compare(sweep, by="engine")                                                      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeAlias

import pandas as pd

from ..errors import SettingError
from ..formatting import decimal
from ..measure import Losses, measure
from ..measure.catalogue import CATALOGUE, INDEPENDENT_METRICS, default_metrics, label, labelled_html, metric
from ..measure.native import NATIVE_PREFIX, native_trace
from ..measure.statistics import GROUPINGS, PairedTables, paired, sweep_tables, unit_tables
from ..records import flags
from ..replay.engine import EngineSpec
from ..replay.run import replay
from ..replay.schema import COMPACTION_SUMMARY_COLUMNS
from ..replay.setting import ReplayOptions
from ..replay.trace import Trace
from ..summarizers import scored_against_itself, selects_by_anchors
from .production import span_traces
from .session import Session

#: ``max_tokens`` of the paired design's forced replays: far above any context, so only the forced compactions happen.
UNREACHABLE = 10**12
#: Columns of :meth:`Comparison.summaries` (one row per compaction attempt and name, after the name).
SUMMARIES_COLUMNS = [*COMPACTION_SUMMARY_COLUMNS, "latency_s", "summary_text"]


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`. The name column of every table is ``by`` (``summarizer`` or ``engine``).

    Attributes:
        summary: per (name, metric): n, mean, bootstrap CI (``measure.statistics.SUMMARY_COLUMNS``).
        pairwise: per (a, b, metric): paired difference, CI, win/tie/loss rates, Wilcoxon
            (``measure.statistics.PAIRWISE_COLUMNS``).
        matched: per name: ``units`` it had, ``matched`` units common to all, ``duplicates`` rows sharing a
            unit key with an earlier row (dropped; e.g. the same trace passed twice).
        units: the matched units: key columns plus one column per metric, one row per (unit, name).
        level: ``"compaction"`` or ``"conversation"``.
        by: what the compared names are.
        losses: the Losses each name was measured to (empty for a sweep).
        traces: the traces each name was measured from (empty when given Losses or a sweep).
        settings: seed, confidence level, resamples, metrics.
        reference: the paired design's engine-decided replay, whose applied compaction steps every summarizer
            was made to compact at (``compact_at``); None otherwise.
        notes: what a reader must know to weigh the figures (:func:`vocabulary_notes`), shown with them.
    """

    summary: pd.DataFrame
    pairwise: pd.DataFrame
    matched: pd.DataFrame
    units: pd.DataFrame
    level: str
    by: str = "summarizer"
    losses: Mapping[str, Losses] = field(default_factory=dict)
    traces: Mapping[str, Sequence[Trace]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    reference: Trace | None = None
    compact_at: tuple[str, ...] = ()
    #: What a reader must know to weigh the figures: a compared summarizer built from the anchor metrics' own
    #: vocabulary, and which compared metrics do not depend on it (:func:`vocabulary_notes`).
    notes: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        """The compared names, in the order given."""
        return list(map(str, self.matched[self.by])) if len(self.matched) else list(self.traces)

    def __repr__(self) -> str:
        common = int(self.matched["matched"].min()) if len(self.matched) else 0
        head = f"Comparison(level={self.level!r}, {self.by}s=[{', '.join(self.names)}], matched units={common})"
        return "\n".join([head, *(f"Note: {note}" for note in self.notes)])

    def table(self, metric: str | None = None) -> pd.DataFrame:
        """Summary as a wide table: rows the compared names, columns ``metric`` means (or one metric's mean and CI)."""
        if metric is not None:
            return self.summary[self.summary["metric"] == metric].set_index(self.by)[["n", "mean", "ci_low", "ci_high"]]
        return self.summary.pivot(index=self.by, columns="metric", values="mean")

    def trace(self, name: str, conversation_id: str) -> Trace:
        """The trace of one name on one conversation."""
        for trace in self.traces.get(name, ()):
            if trace.conversation.id == conversation_id:
                return trace
        raise KeyError(f"no trace of {name!r} on {conversation_id!r}")

    def summaries(self) -> pd.DataFrame:
        """One row per compaction attempt and name: where, how large, applied or why not, and the summary text."""
        frames = [
            trace.compactions.assign(**{self.by: name}) for name, traces in self.traces.items() for trace in traces
        ]
        if not frames:
            return pd.DataFrame(columns=[self.by, *SUMMARIES_COLUMNS])
        return pd.concat(frames, ignore_index=True)[[self.by, *SUMMARIES_COLUMNS]]

    def figures(self) -> pd.DataFrame:
        """One row per name and conversation: attempts, applied, mean summary tokens, summary latency from its trace,
        and the compared metrics from its ``Losses.conversation``."""
        metrics = list(self.settings.get("metrics", ()))
        rows = []
        for name, traces in self.traces.items():
            measured_rows = self.losses[name].conversation if name in self.losses else None
            for trace in traces:
                compactions = trace.compactions
                row: dict[str, Any] = {
                    "conversation_id": trace.conversation.id,
                    self.by: name,
                    "compactions": len(compactions),
                    "applied": int(flags(compactions["applied"]).sum()) if len(compactions) else 0,
                    "mean_summary_tokens": float(compactions["summary_tokens"].astype("float64").mean())
                    if len(compactions)
                    else math.nan,
                    "total_latency_s": float(compactions["latency_s"].sum()) if len(compactions) else 0.0,
                }
                measured = (
                    measured_rows[measured_rows["conversation_id"] == trace.conversation.id]
                    if measured_rows is not None and len(measured_rows)
                    else pd.DataFrame()
                )
                if len(measured):
                    figures = measured.iloc[0]
                    row.update({m: figures[m] for m in metrics if m in figures.index})
                rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        head = repr(self).split("\n", 1)[0]
        notes = "".join(f"<p><strong>Note:</strong> {html.escape(note)}</p>" for note in self.notes)
        return (
            f"<div><h4>{html.escape(head)}</h4>{notes}<h5>Matched units</h5>{labelled_html(self.matched)}"
            f"<h5>Means with {self.settings.get('confidence', 0.95):.0%} bootstrap CI</h5>"
            f"{labelled_html(self.summary)}"
            f"<h5>Paired differences</h5>{labelled_html(self.pairwise, max_rows=60, formatters={'p_value': partial(decimal, digits=4)})}</div>"
        )


class SweepResults(Protocol):
    """A sweep as :func:`compare` reads it: its per-conversation results table (``Sweep``)."""

    @property
    def results(self) -> pd.DataFrame: ...


#: What :func:`compare` takes: name -> a trace, traces, losses, a list of losses, or (a native subject)
#: conversations; a sweep or its results table; or a session to replay in the paired design.
Compared: TypeAlias = Mapping[str, Any] | pd.DataFrame | SweepResults | Session


def compare(
    results: Compared,
    *,
    by: str = "summarizer",
    metrics: Sequence[str] | None = None,
    level: str | None = None,
    baselines: Iterable[str] = (),
    conversation: str | None = None,
    max_tokens: int | None = None,
    keep_recent_tokens: int | None = None,
    engines: Mapping[str, EngineSpec] | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    tie_tolerance: float = 1e-9,
) -> Comparison:
    """Compare summarizers, engines or production summaries, paired over the same units (see the module docstring).

    Args:
        results: name -> list of Traces, a Trace, Losses, a list of Losses, or conversations (a
            ``native:<agent>`` subject); a ``Sweep`` or its results table; or a ``Session``.
        by: what the names stand for: ``"summarizer"`` or ``"engine"``. Engines are paired on
            the same conversation, setting and summarizer.
        metrics: columns of ``losses.compactions`` (level "compaction") or ``losses.conversation``
            (level "conversation"); the catalogue says which way is better. None: the catalogue's
            default set at the level.
        level: ``"compaction"`` (matched spans) or ``"conversation"`` (per-conversation aggregates).
            None: compaction for summarizers, conversation for engines.
        baselines: summarizer specs (``"mask"``, ``"truncate"``, a provider spec...) to replay and add under
            their own names when not already present; with a ``native:<agent>`` subject, summarized on its
            spans instead (``by="summarizer"`` only).
        conversation, max_tokens, keep_recent_tokens: a session's paired design: the conversation (summarizers)
            and the setting (both).
        engines: a session's engines to compare (``by="engine"``): label -> engine.
        confidence, resamples, seed: bootstrap settings (deterministic for a seed).
        tie_tolerance: differences within it count as ties for win rates.
    """
    if by not in GROUPINGS:
        raise ValueError(f"by must be one of {', '.join(GROUPINGS)}, got {by!r}")
    level = level or ("conversation" if by == "engine" else "compaction")
    if level not in ("compaction", "conversation"):
        raise ValueError(f"level must be 'compaction' or 'conversation', got {level!r}")
    chosen = list(metrics if metrics is not None else default_metrics(level))  # type: ignore[arg-type]
    statistics: dict[str, Any] = {
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
        "tie_tolerance": tie_tolerance,
    }
    if isinstance(results, Session):
        if max_tokens is None or keep_recent_tokens is None:
            raise SettingError("comparing a session's replays needs max_tokens and keep_recent_tokens")
        return _session(results, by, level, chosen, conversation, (max_tokens, keep_recent_tokens), engines, statistics)
    table = results if isinstance(results, pd.DataFrame) else getattr(results, "results", None)
    if isinstance(table, pd.DataFrame):
        identities = (
            dict(zip(table[by].astype(str), table["summarizer_identity"].astype(str), strict=True))
            if by == "summarizer" and "summarizer_identity" in table.columns
            else {}
        )
        added = [m for m in with_independent(chosen, level, identities) if m not in chosen and m in table.columns]
        chosen = [*chosen, *added]
        tables, duplicates = sweep_tables(table, by, level, chosen)
        stats = paired(tables, duplicates, chosen, by, **statistics)
        return _comparison(stats, level, by, chosen, statistics, identities=identities)
    if not results:
        raise ValueError(f"compare needs at least one {by}")
    named = _with_baselines(dict(results), baselines if by == "summarizer" else ())  # type: ignore[arg-type]
    return _measured(named, by, level, chosen, statistics)


def _measured(
    named: Mapping[str, Any],
    by: str,
    level: str,
    metrics: list[str],
    statistics: dict[str, Any],
    *,
    traces: Mapping[str, Sequence[Trace]] | None = None,
    **extra: Any,
) -> Comparison:
    """Measure every name's traces (Losses are taken as given) and compare them."""
    traces = traces if traces is not None else {name: _traces_of(value) for name, value in named.items()}
    losses = {name: _as_losses(value) for name, value in named.items()}
    identities = {
        name: str(settings[0].summarizer)
        for name in losses
        if (settings := [t.settings for t in traces.get(name, ())] or list(losses[name].settings))
    }
    metrics = with_independent(metrics, level, identities) if by == "summarizer" else metrics
    tables, duplicates = unit_tables(losses, metrics, level, by)
    stats = paired(tables, duplicates, metrics, by, **statistics)
    return _comparison(
        stats, level, by, metrics, statistics, losses=losses, traces=traces, identities=identities, **extra
    )


def _comparison(
    stats: PairedTables,
    level: str,
    by: str,
    metrics: list[str],
    statistics: dict[str, Any],
    *,
    identities: Mapping[str, str] | None = None,
    **extra: Any,
) -> Comparison:
    settings = {key: statistics[key] for key in ("seed", "confidence", "resamples")}
    notes = vocabulary_notes(identities or {}, stats.summary, metrics, by) if by == "summarizer" else ()
    return Comparison(*stats, level=level, by=by, settings={**settings, "metrics": list(metrics)}, notes=notes, **extra)


def with_independent(metrics: Sequence[str], level: str, identities: Mapping[str, str]) -> list[str]:
    """``metrics``, and the catalogue's metrics that do not depend on the anchor vocabulary
    (:data:`~zett_lab.measure.catalogue.INDEPENDENT_METRICS`, those at ``level``) when a compared summarizer is
    built from that vocabulary (``identities``: name -> summarizer identity) and none is among them. The default
    set always holds them."""
    if any(name in INDEPENDENT_METRICS for name in metrics) or not scored_against_itself(identities):
        return list(metrics)
    return [*metrics, *(name for name in INDEPENDENT_METRICS if level in metric(name).levels)]


def vocabulary_notes(
    identities: Mapping[str, str], summary: pd.DataFrame, metrics: Sequence[str], by: str = "summarizer"
) -> tuple[str, ...]:
    """The note a comparison carries when a compared summarizer picks what to keep with the anchor extractor
    (:func:`~zett_lab.summarizers.scored_against_itself`, the ``anchors`` baseline): which compared metrics count
    that extractor's items (partly scoring the metric against itself) and which do not, with values here or not.
    When every compared name ran that one summarizer (engines compared with it), the note says the bias is shared."""
    own = scored_against_itself(identities)
    shared = set(identities.values())
    if not own and len(identities) > 1 and len(shared) == 1 and selects_by_anchors(next(iter(shared))):
        return (
            f"Every one of {', '.join(identities)} ran the same summarizer, built from the anchor metrics' own "
            "vocabulary: that bias is shared, so it favours none of them, and they are compared on every metric (the "
            "anchor metrics' levels still partly score that summarizer against itself).",
        )
    if not own:
        return ()
    based = [label(m) for m in metrics if m in CATALOGUE and metric(m).anchor_based]
    measured = summary[summary["mean"].notna()] if len(summary) else summary
    free = [label(m) for m in metrics if m in INDEPENDENT_METRICS and m in set(measured["metric"])]
    names = ", ".join(own)
    text = (
        f"{names} {'is' if len(own) == 1 else 'are'} built from the metric's own vocabulary: it keeps the lines "
        "holding the items the anchor extractor finds"
        + (
            f", the items {', '.join(based)} count, so on those it partly scores the metric against itself."
            if based
            else "."
        )
    )
    if free:
        text += (
            f" Weigh it on {', '.join(free)}, which do{'es' if len(free) == 1 else ''} not depend on that vocabulary."
        )
    else:
        text += (
            " No compared metric that does not depend on that vocabulary has values here (probe presence needs gold "
            "probes, the superseded-only rate values that changed; judged answers need a judge): weigh it with care."
        )
    return (text,)


def _as_losses(value: Any) -> Losses:
    if isinstance(value, Losses):
        return value
    if isinstance(value, Trace):
        return measure(value)
    if isinstance(value, Iterable):
        items = list(value)
        if all(isinstance(item, Losses) for item in items):
            return Losses.concat(items)
        return measure(items)
    raise TypeError(f"expected Traces or Losses, got {type(value).__name__}")


def _traces_of(value: Any) -> tuple[Trace, ...]:
    if isinstance(value, Trace):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, Losses):
        return tuple(item for item in value if isinstance(item, Trace))
    return ()


def _with_baselines(results: dict[str, Any], baselines: Iterable[str]) -> dict[str, Any]:
    """Native subjects resolved to their traces (baselines summarizing their spans), missing baselines replayed."""
    if any(name.startswith(NATIVE_PREFIX) for name in results):
        return _native_results(results, baselines)
    missing = [name for name in baselines if name not in results]
    if not missing:
        return results
    template = next((traces for traces in map(_traces_of, results.values()) if traces), ())
    if not template:
        raise ValueError("baselines need Traces (not only Losses) for at least one summarizer, to know what to replay")
    # The traces' own Settings with another summarizer; a recording without usage falls back to the estimator.
    options = ReplayOptions(on_missing_usage="estimate")
    for name in missing:
        results[name] = [
            replay(trace.conversation, dataclasses.replace(trace.setting, summarizer=name), options)
            for trace in template
        ]
    return results


def _native_results(results: Mapping[str, Any], baselines: Iterable[str]) -> dict[str, Any]:
    """Native subjects as traces of their compactions, and the baselines summarized on the same spans."""
    natives = [name for name in results if name.startswith(NATIVE_PREFIX)]
    if len(natives) > 1:
        raise SettingError(
            f"compare one native subject at a time ({', '.join(natives)} summarize different spans): "
            "one compare() per subject"
        )
    out: dict[str, Any] = {}
    spans: list[Trace] = []
    for name, value in results.items():
        if not name.startswith(NATIVE_PREFIX):
            if any(trace.settings.setting is not None for trace in _traces_of(value)):
                raise SettingError(
                    f"{name!r} holds replays at a setting, which never pair with native compactions; "
                    f"pass it as baselines=[{name!r}] to summarize the native spans with it"
                )
            out[name] = value
            continue
        items = [value] if hasattr(value, "messages") or isinstance(value, Trace) else list(value)
        traces = [native_trace(item, subject=name) if hasattr(item, "native_compactions") else item for item in items]
        traces = [trace for trace in traces if len(trace.compactions)]
        if not traces:
            raise SettingError(f"no native compactions of {name!r} in the conversations given")
        out[name] = traces
        spans.extend(traces)
    for spec in baselines:
        if spec not in out:
            out[spec] = span_traces(spans, spec)
    return out


def _session(
    session: Session,
    by: str,
    level: str,
    metrics: list[str],
    conversation: str | None,
    setting: tuple[int, int],
    engines: Mapping[str, EngineSpec] | None,
    statistics: dict[str, Any],
) -> Comparison:
    """A session's replays in a paired design: the same spans for every summarizer, or every engine on every
    conversation (one summarizer)."""
    max_tokens, keep_recent_tokens = setting
    if by == "engine":
        if not engines:
            raise SettingError("comparing engines of a session needs engines={label: engine}")
        first = next(iter(session.summarizers))
        named: dict[str, list[Trace]] = {label: [] for label in engines}
        losses: dict[str, list[Losses]] = {label: [] for label in engines}
        for conversation_id in session.conversations:
            for label, engine in engines.items():
                result = session.run(
                    conversation_id,
                    dataclasses.replace(session.setting(first, max_tokens, keep_recent_tokens), engine=engine),
                )
                named[label].append(result.trace)
                losses[label].append(result.losses if result.losses is not None else measure(result.trace))
        return _measured(losses, by, level, metrics, statistics, traces=named)
    if conversation is None:
        raise SettingError(
            f"comparing a session's summarizers needs conversation= (one of {', '.join(session.conversations)})"
        )
    labels = list(session.summarizers)
    reference = session.run(
        conversation, session.setting(labels[0], max_tokens, keep_recent_tokens), measure_losses=False
    ).trace
    compactions = reference.compactions
    steps = sorted({int(s) for s in compactions.loc[flags(compactions["applied"]), "step"]}) if len(compactions) else []
    compact_at = tuple(f"step:{step}" for step in steps)
    if not compact_at:
        return _measured({}, by, level, metrics, statistics, reference=reference)
    forced = {
        label: session.run(
            conversation,
            dataclasses.replace(session.setting(label, UNREACHABLE, keep_recent_tokens), compact_at=compact_at),
        )
        for label in labels
    }
    return _measured(
        {label: result.losses for label, result in forced.items()},
        by,
        level,
        metrics,
        statistics,
        traces={label: (result.trace,) for label, result in forced.items()},
        reference=reference,
        compact_at=compact_at,
    )
