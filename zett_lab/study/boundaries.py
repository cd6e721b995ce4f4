"""Where the engine's decisions change along one setting, each change confirmed by a replay on both sides.

:func:`decision_boundaries` walks the proven regions of :mod:`zett_lab.study.regions` along one axis: each
replay proves the whole interval it stands for, the next replay starts one token past it, so every value at
which the compaction schedule (:func:`schedule`) changes is found and each one is confirmed by a replay on
both sides.

Example::

    >>> b = decision_boundaries(conversation, "extractive", keep_recent_tokens=4_000,
    ...                         max_tokens_range=(10_000, 60_000))        # doctest: +SKIP
    >>> b.values                                                        # doctest: +SKIP
    [12_418, 20_077, 31_552]
    >>> b.segments                                                      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import html
import warnings
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from zett_agent.model import AgentModel

from ..errors import ResultFailure, SettingError, SettingWarning
from ..formatting import count
from ..load.conversation import Conversation
from ..measure.catalogue import labelled_html
from ..progress import Progress
from ..records import is_missing
from ..replay.engine import EngineSpec, check_engine, engine_name, engine_reuse
from ..replay.setting import ReplayOptions, Setting, check_limits, compose, keep_fills_budget
from ..replay.trace import Trace
from ..summarizers.cache import CacheSpec
from .regions import Region, region


def schedule(trace: Trace) -> tuple[tuple[int, int, bool], ...]:
    """The compaction schedule: ``(step, span_end, applied)`` for every summary attempt."""
    rows = trace.compactions
    if not len(rows):
        return ()
    return tuple(
        (int(step), -1 if is_missing(span_end) else int(span_end), bool(applied))
        for step, span_end, applied in zip(rows["step"], rows["span_end"], rows["applied"], strict=True)
    )


def _schedule_text(items: tuple[tuple[int, int, bool], ...]) -> str:
    return ", ".join(f"step {s}: <{e}{'' if a else ' (rejected)'}" for s, e, a in items) or "none"


@dataclass(frozen=True, eq=False)
class Boundaries:
    """Where the compaction schedule changes along one setting.

    Frozen, and compared by identity (its tables have no equality).

    Attributes:
        parameter: ``"max_tokens"`` or ``"keep_recent_tokens"`` (the axis walked).
        fixed: the other setting's value.
        values: the settings at which the schedule changes (each starts a new segment).
        segments: one row per maximal range with one schedule: ``start``, ``end`` (None:
            unbounded), ``compactions_applied``, ``attempts``, ``steps_over_budget`` (at
            ``start``), ``schedule`` (text), ``replays``.
        decisions: one row per decision interval (every replay of the walk): ``start``,
            ``end``, ``compactions_applied``, ``attempts``.
        replays: replays the walk ran (each proves one decision interval).
    """

    parameter: str
    fixed: int
    values: list[int]
    segments: pd.DataFrame
    decisions: pd.DataFrame
    replays: int
    traces: dict[int, Trace] = field(default_factory=dict, repr=False)

    def __repr__(self) -> str:
        at = ", ".join(map(count, self.values))
        return f"Boundaries({self.parameter}: {len(self.values)} changes at [{at}], {self.replays} replays)"

    def _repr_html_(self) -> str:
        title = html.escape(repr(self))
        unbounded = {column: (lambda v: count(v) or "∞") for column in ("start", "end")}
        return f"<div><h4>{title}</h4>{labelled_html(self.segments, formatters=unbounded)}</div>"


def decision_boundaries(
    conversation: Conversation,
    summarizer: str | AgentModel | None = None,
    *,
    keep_recent_tokens: int | None = None,
    max_tokens: int | None = None,
    max_tokens_range: tuple[int, int | None] | None = None,
    keep_recent_tokens_range: tuple[int, int | None] | None = None,
    engine: EngineSpec = None,
    cache: CacheSpec = None,
    progress: bool = True,
    max_replays: int = 5_000,
    **replay_options: object,
) -> Boundaries:
    """Walk one setting and report every value at which the compaction schedule changes.

    Give ``keep_recent_tokens=`` and ``max_tokens_range=(lo, hi)``, or ``max_tokens=`` and
    ``keep_recent_tokens_range=(lo, hi)``. ``hi=None`` walks until the last region, which
    is unbounded above. Each replay proves the whole interval of settings around it that
    takes the same decisions (:func:`region`); the next replay starts one past its end, so
    no change can be missed and each reported value has a replay on both sides.

    ``engine`` is walked only along a limit it declares proven reuse for (the stock engine:
    both); without that proof every value would need its own replay.

    Raises:
        SettingError: both or neither ranges, a bad range, an engine with no proven reuse
            along the walked limit, or more than ``max_replays`` replays (regions shrink to
            points with manual passes: ``compact_at``).
    """
    from ..summarizers import resolve_cache

    parameter, lo, hi, fixed = _axis(max_tokens, keep_recent_tokens, max_tokens_range, keep_recent_tokens_range)
    limits = _walkable(engine, parameter, lo, hi, fixed)
    first = (lo, fixed) if parameter == "max_tokens" else (fixed, lo)
    summary_cache = resolve_cache(cache)
    limits_at = {"max_tokens": first[0], "keep_recent_tokens": first[1]}
    setting, options = compose(
        None,
        ReplayOptions(cache=summary_cache if summary_cache is not None else False, warn=False),
        {**limits_at, "summarizer": summarizer, "engine": engine, **replay_options},
    )
    setting = dataclasses.replace(setting, summarizer=setting.summary_model())  # built once for every replay
    walk = _Walk(parameter, lo, hi, fixed, limits, max_replays)
    decisions, traces = walk.run(conversation, setting, options, progress)
    segment_frame, values = _segments(decisions)
    decision_frame = pd.DataFrame(decisions).drop(columns=["_schedule"]) if decisions else pd.DataFrame()
    if "end" in decision_frame:
        decision_frame["end"] = pd.array(decision_frame["end"].tolist(), dtype="Int64")
    return Boundaries(
        parameter=parameter,
        fixed=fixed,
        values=values,
        segments=segment_frame,
        decisions=decision_frame,
        replays=len(decisions),
        traces=traces,
    )


@dataclass(frozen=True)
class _Walk:
    """One walk along ``parameter`` from ``lo`` to ``hi`` (None: to the last, unbounded region), the other limit at
    ``fixed``; ``limits``: what the engine's proof may be used along."""

    parameter: str
    lo: int
    hi: int | None
    fixed: int
    limits: tuple[str, ...]
    max_replays: int

    def run(
        self, conversation: Conversation, setting: Setting, options: ReplayOptions, progress: bool
    ) -> tuple[list[dict[str, Any]], dict[int, Trace]]:
        """Replay at ``lo``, then one past the end of each proven interval: the decision intervals and their traces."""
        from ..replay.run import replay

        parameter, lo, hi, fixed = self.parameter, self.lo, self.hi, self.fixed
        counter = setting.token_counter()
        decisions: list[dict[str, Any]] = []
        traces: dict[int, Trace] = {}
        x = lo
        bar = Progress((hi - lo + 1) if hi is not None else None, f"boundaries ({parameter})", progress, unit="tok")
        try:
            while hi is None or x <= hi:
                if len(decisions) >= self.max_replays:
                    raise SettingError(
                        f"decision_boundaries stopped after {self.max_replays} replays at {parameter}={x}"
                    )
                max_tokens_x, keep_x = (x, fixed) if parameter == "max_tokens" else (fixed, x)
                trace = replay(conversation, setting.with_limits(max_tokens_x, keep_x), options)
                _refuse_failures(trace, parameter, x)
                where = region(trace, count_tokens=counter, limits=self.limits)
                end = where.m_hi if parameter == "max_tokens" else where.k_hi
                traces[x] = trace
                decisions.append(
                    _decision(trace, x, end if hi is None else (hi if end is None else min(end, hi)), where)
                )
                bar.advance(
                    ((min(end, hi) if hi is not None and end is not None else x) - x + 1) if hi is not None else 1
                )
                if end is None:
                    break
                x = end + 1
        finally:
            bar.close()
        return decisions, traces


def _walkable(engine: EngineSpec, parameter: str, lo: int, hi: int | None, fixed: int) -> tuple[str, ...]:
    """The limits ``engine`` declares proven reuse along, after checking the walk can use them and its range."""
    check_engine(engine)
    limits = engine_reuse(engine)
    if parameter not in limits:
        raise SettingError(
            f"engine {engine_name(engine)} declares no proven reuse along {parameter} (zett_lab_reuse = {limits}); "
            "its decision boundaries cannot be walked exactly: sweep a grid of values instead"
        )
    check_limits(lo, fixed)
    if hi is not None:
        check_limits(hi, fixed)
        if hi < lo:
            raise SettingError(f"{parameter} range ({lo}, {hi}) is empty")
    _warn_once_if_keep_fills_budget(parameter, lo, hi, fixed)
    return limits


def _decision(trace: Trace, start: int, end: int | None, where: Region) -> dict[str, Any]:
    """One row of a walk: the interval one replay proves, and what the engine did there."""
    summary = trace.summary()
    return {
        "start": start,
        "end": end,
        "compactions_applied": summary["compactions_applied"],
        "attempts": len(trace.compactions),
        "steps_over_budget": summary["steps_over_budget"],
        "_schedule": schedule(trace),
        "region_reason": where.reason,
    }


def _axis(
    max_tokens: int | None,
    keep_recent_tokens: int | None,
    max_tokens_range: tuple[int, int | None] | None,
    keep_recent_tokens_range: tuple[int, int | None] | None,
) -> tuple[str, int, int | None, int]:
    """The setting walked, its range ``(lo, hi)``, and the other setting's fixed value."""
    if max_tokens_range is not None and keep_recent_tokens_range is None:
        parameter, (lo, hi), fixed, other = "max_tokens", max_tokens_range, keep_recent_tokens, "keep_recent_tokens"
    elif keep_recent_tokens_range is not None and max_tokens_range is None:
        parameter, (lo, hi), fixed, other = "keep_recent_tokens", keep_recent_tokens_range, max_tokens, "max_tokens"
    else:
        raise SettingError("give exactly one of max_tokens_range= or keep_recent_tokens_range=")
    if fixed is None:
        raise SettingError(f"walking {parameter} needs a fixed {other}=")
    return parameter, lo, hi, fixed


def _segments(decisions: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[int]]:
    """Decision intervals merged into segments with one schedule each, and where each segment after the first starts."""
    segments: list[dict[str, Any]] = []
    for item in decisions:
        if segments and segments[-1]["_schedule"] == item["_schedule"]:
            segments[-1]["end"] = item["end"]
            segments[-1]["replays"] += 1
            continue
        segments.append(
            {
                "start": item["start"],
                "end": item["end"],
                "compactions_applied": item["compactions_applied"],
                "attempts": item["attempts"],
                "steps_over_budget": item["steps_over_budget"],
                "schedule": _schedule_text(item["_schedule"]),
                "_schedule": item["_schedule"],
                "replays": 1,
            }
        )
    frame = pd.DataFrame(
        segments,
        columns=["start", "end", "compactions_applied", "attempts", "steps_over_budget", "schedule", "replays"],
    )
    frame["end"] = pd.array(frame["end"].tolist(), dtype="Int64")
    return frame, [int(segment["start"]) for segment in segments[1:]]


def _warn_once_if_keep_fills_budget(parameter: str, lo: int, hi: int | None, fixed: int) -> None:
    """One :class:`~zett_lab.errors.SettingWarning` for a walk that reaches ``keep_recent_tokens >= max_tokens``."""
    if parameter == "keep_recent_tokens":
        meaning = keep_fills_budget(fixed, lo if hi is None else max(lo, hi))
    else:
        meaning = keep_fills_budget(lo, fixed)
    if meaning:
        warnings.warn(f"decision_boundaries reaches {meaning}", SettingWarning, stacklevel=3)


def _refuse_failures(trace: Trace, parameter: str, value: int) -> None:
    """A replay with failed summaries or engine passes has no decisions to compare: stop the walk."""
    failures = trace.failure_counts
    if len(failures):
        first = failures.iloc[0]
        raise ResultFailure(
            f"decision_boundaries: the replay at {parameter}={value} of conversation {trace.conversation.id!r} had "
            f"{int(failures['count'].sum())} failed attempt(s) ({first['what']}: {first['cause']}); a failed "
            "summary would look like a changed decision, so no boundary is reported. Fix the summarizer or "
            "endpoint and walk again (summaries already made are cached)."
        )
