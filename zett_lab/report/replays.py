"""The replays a report covers, and its per-replay results table.

:func:`report_replays` gathers the replays given directly and a sweep's cells (a failed cell is a
:class:`Failure`), names what the report compares (:class:`Arms`), measures what was not
measured, prices what was not priced for the report's model, and returns :class:`Replays`: one row
per attempted replay, and the rows of those measured (a failed replay or summary is never averaged
into a metric). It also holds the small facts every part of a report shares: how its replays are
indexed (:func:`trace_index`, :func:`cell_entries`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..errors import SettingError
from ..load import SkippedFile
from ..load.conversation import Conversation
from ..measure import Losses
from ..replay.setting import Setting
from ..replay.trace import Trace, combine_failure_counts
from ..study.choose import measured_cells
from ..study.grid import STOCK_ENGINE
from ..study.recommendation import Recommendation
from ..study.results import Sweep
from .measured import Measured
from .tables import costs_per_replay, price_names

#: The columns that make one replay of a report.
_REPLAY_KEYS = ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens"]


@dataclass(frozen=True)
class Failure:
    """A replay that could not run (the report lists it instead of stopping)."""

    conversation_id: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int
    error: str


@dataclass(frozen=True, eq=False)
class Replays:
    """The replays of a report and their results (:func:`report_replays`).

    Attributes:
        entries: ``(arm label, trace)`` of every complete replay; those given directly first.
        summarizers: Arm labels in report order (a sweep's first; :class:`Arms`).
        arms: What the report compares.
        failures: Replays that could not run.
        attempted: One row per attempted replay (a sweep's failed cells included, ``error`` set), with costs.
        results: The rows of ``attempted`` that are measurements (it ran and every summary succeeded).
        failure_counts: Failed summary calls and replays per distinct cause.
        unpriced: Summary models with no list price (their summaries are counted at $0).
        skipped_files: Files of the input folders that could not be read (the sweep's; their conversations are
            not in the report).
    """

    entries: list[tuple[str, Trace]]
    summarizers: list[str]
    arms: Arms
    failures: list[Failure]
    attempted: pd.DataFrame
    results: pd.DataFrame
    failure_counts: pd.DataFrame
    unpriced: list[str]
    skipped_files: list[SkippedFile]

    @property
    def conversations(self) -> list[Conversation]:
        """The conversations studied, once each, in the order first replayed."""
        seen: dict[str, Conversation] = {}
        for _, trace in self.entries:
            seen.setdefault(trace.conversation.id, trace.conversation)
        return list(seen.values())

    @property
    def identities(self) -> dict[str, str]:
        """Per summarizer label, the identity of the summarizer its first replay ran with."""
        return {
            name: next(t for label, t in self.entries if label == name).settings.summarizer for name in self.summarizers
        }

    @property
    def grid(self) -> dict[str, list[int]]:
        """The ``max_tokens`` and ``keep_recent_tokens`` values replayed, in increasing order."""
        return {
            "max_tokens": sorted({t.setting.max_tokens for _, t in self.entries}),
            "keep_recent_tokens": sorted({t.setting.keep_recent_tokens for _, t in self.entries}),
        }

    @property
    def unmeasured_settings(self) -> set[tuple[str, int, int]]:
        """``(summarizer, max_tokens, keep_recent_tokens)`` of every replay that failed or whose summary failed."""
        unmeasured = self.attempted[~measured_cells(self.attempted)]
        return {
            (str(r.summarizer), int(r.max_tokens), int(r.keep_recent_tokens))
            for r in unmeasured.itertuples(index=False)
        }


def report_replays(
    traces: Iterable[Trace],
    sweep: Sweep | None,
    losses: Losses | None,
    failures: Iterable[Failure],
    primary_model: str,
    measured: Measured,
) -> Replays:
    """The replays a report covers and their results: traces given directly (their loss metrics ``losses``' rows,
    else measured by ``measured``), a sweep's cells, priced with ``primary_model`` where not priced for it."""
    direct, entries, failed = _replays(traces, sweep, failures)
    priced, unpriced = price_names(entries)
    costs = replay_costs(entries, len(direct), sweep, primary_model, priced)
    measured.measure_all([trace for _, trace in direct if _given_row(losses, trace) is None])
    attempted = _results(sweep, [_direct_row(label, t, losses, measured) for label, t in direct], costs)
    counts = combine_failure_counts(
        ([sweep.failure_counts] if sweep is not None else [])
        + [trace.failure_counts.assign(summarizer=label) for label, trace in direct]
    )
    return Replays(
        entries=entries,
        summarizers=_summarizer_order(entries, sweep),
        arms=Arms.of(sweep, [label for label, _ in direct]),
        failures=failed,
        attempted=attempted,
        results=attempted[measured_cells(attempted)].reset_index(drop=True),
        failure_counts=counts,
        unpriced=unpriced,
        skipped_files=sweep.skipped_files if sweep is not None else [],
    )


def trace_index(entries: Sequence[tuple[str, Trace]]) -> dict[tuple[str, str, int, int], Trace]:
    """Each replay's trace by (conversation, summarizer label, max_tokens, keep_recent_tokens); the first given wins."""
    index: dict[tuple[str, str, int, int], Trace] = {}
    for label, trace in entries:
        key = (
            trace.conversation.id,
            label,
            trace.setting.max_tokens,
            trace.setting.keep_recent_tokens,
        )
        index.setdefault(key, trace)
    return index


def cell_entries(
    entries: Sequence[tuple[str, Trace]], max_tokens: int, keep_recent_tokens: int
) -> list[tuple[str, Trace]]:
    """The ``(summarizer label, trace)`` entries replayed at one setting."""
    return [
        (label, trace)
        for label, trace in entries
        if trace.setting.max_tokens == int(max_tokens) and trace.setting.keep_recent_tokens == int(keep_recent_tokens)
    ]


def _replays(
    traces: Iterable[Trace], sweep: Sweep | None, failures: Iterable[Failure]
) -> tuple[list[tuple[str, Trace]], list[tuple[str, Trace]], list[Failure]]:
    """The replays a report covers: ``(label, trace)`` of those given directly, of all, and the failed ones.

    A sweep adds its complete cells to the replays and its failed cells to the failures.
    """
    direct = [(t.settings.summarizer, t) for t in traces]
    entries, failed = list(direct), list(failures)
    if sweep is not None:
        entries.extend(_sweep_entries(sweep))
        failed.extend(_sweep_failures(sweep))
    if not entries:
        raise SettingError("a report needs at least one trace (pass traces=, sweep=, or use Report.build)")
    return direct, entries, failed


def _sweep_entries(sweep: Sweep) -> list[tuple[str, Trace]]:
    """``(label, trace)`` for every complete cell of a sweep (tables read from disk when used; label: :class:`Arms`)."""
    if not isinstance(sweep, Sweep):
        raise SettingError(f"sweep= must be a zett_lab.study.Sweep, got {type(sweep).__name__}")
    label = Arms.of(sweep).label
    entries: list[tuple[str, Trace]] = []
    for cell, trace in sweep.stored_traces():
        summarizer, engine = sweep.labels(cell.setting)
        entries.append((label(engine, summarizer), trace))
    return entries


@dataclass(frozen=True)
class Arms:
    """What a report compares, its arms: summarizers, engines, or engine · summarizer pairs when a sweep varies
    both. An arm's label (:meth:`label`) is what the report's tables name in their ``summarizer`` column; the
    study stages (the recommendation's verdict) read the engine and summarizer it stands for (:meth:`settings`).

    Attributes:
        engines: The engine labels studied, in the sweep's order.
        summarizers: The summarizer labels studied, in the sweep's order.
    """

    engines: tuple[str, ...] = (STOCK_ENGINE,)
    summarizers: tuple[str, ...] = ()

    @classmethod
    def of(cls, sweep: Sweep | None, direct: Iterable[str] = ()) -> Arms:
        """The arms of a report over ``sweep`` and replays given directly (summarizer labels ``direct``)."""
        engines = tuple(sweep.config.get("engines", [STOCK_ENGINE])) if sweep is not None else (STOCK_ENGINE,)
        named = list(sweep.config.get("summarizers", [])) if sweep is not None else []
        return cls(engines, tuple(dict.fromkeys([*named, *direct])))

    @property
    def by(self) -> str:
        """What one arm is: ``summarizer``, ``engine`` or ``engine · summarizer``."""
        if len(self.engines) <= 1:
            return "summarizer"
        return "engine" if len(self.summarizers) <= 1 else "engine · summarizer"

    @property
    def counted(self) -> str:
        """How many were compared, engines as engines: ``3 summarizer(s)``, ``2 engine(s) × 1 summarizer(s)``."""
        if self.by == "summarizer":
            return f"{len(self.summarizers):,} summarizer(s)"
        return f"{len(self.engines):,} engine(s) × {len(self.summarizers):,} summarizer(s)"

    def label(self, engine: str, summarizer: str) -> str:
        """The arm's label: the summarizer, the engine, or both (see :attr:`by`)."""
        if self.by == "summarizer":
            return str(summarizer)
        return str(engine) if self.by == "engine" else f"{engine} · {summarizer}"

    def settings(self, table: pd.DataFrame) -> pd.DataFrame:
        """``table`` (the report's, ``summarizer`` an arm label) with ``summarizer`` the summarizer each arm ran."""
        if self.by == "summarizer":
            return table
        runs = {self.label(e, s): s for e in self.engines for s in self.summarizers}
        return table.assign(summarizer=[runs.get(str(name), name) for name in table["summarizer"]])

    def recommended(self, chosen: Recommendation | None) -> Recommendation | None:
        """A recommendation made on :meth:`settings` named by its arm, as the report's tables name it."""
        if chosen is None or self.by == "summarizer":
            return chosen
        arm = self.label(chosen.engine, chosen.summarizer)
        return dataclasses.replace(chosen, setting=dataclasses.replace(chosen.setting, summarizer=arm))


def _sweep_failures(sweep: Sweep) -> list[Failure]:
    table = sweep.results
    if "error" not in table.columns:
        return []
    failed = table[table["error"].notna()]
    label = Arms.of(sweep).label
    return [
        Failure(
            str(r.conversation_id),
            label(getattr(r, "engine", STOCK_ENGINE), str(r.summarizer)),
            int(r.max_tokens),
            int(r.keep_recent_tokens),
            " ".join(str(r.error).split())[:400],
        )
        for r in failed.itertuples(index=False)
    ]


def _summarizer_order(entries: list[tuple[str, Trace]], sweep: Sweep | None) -> list[str]:
    """Summarizer labels: the sweep's order first, then the others as first replayed."""
    names = list(dict.fromkeys(label for label, _ in entries))
    if sweep is None:
        return names
    label = Arms.of(sweep).label
    engines = sweep.config.get("engines", [STOCK_ENGINE])
    labels = [label(e, s) for e in engines for s in sweep.config.get("summarizers", [])]
    return [n for n in labels if n in names] + [n for n in names if n not in labels]


def _conversations(entries: list[tuple[str, Trace]]) -> list[Conversation]:
    """The conversations studied, once each, in the order first replayed."""
    seen: dict[str, Conversation] = {}
    for _, trace in entries:
        seen.setdefault(trace.conversation.id, trace.conversation)
    return list(seen.values())


def _given_row(losses: Losses | None, trace: Trace) -> dict[Hashable, Any] | None:
    """The conversation row of ``trace`` in losses given to the report, None when they have none."""
    if losses is None or not len(losses.conversation):
        return None
    table = losses.conversation
    match = table[
        (table["conversation_id"] == trace.conversation.id)
        & (table["summarizer"] == trace.settings.summarizer)
        & (table["max_tokens"] == trace.setting.max_tokens)
        & (table["keep_recent_tokens"] == trace.setting.keep_recent_tokens)
    ]
    return match.iloc[0].to_dict() if len(match) else None


def _direct_row(label: str, trace: Trace, losses: Losses | None, measured: Measured) -> dict[str, Any]:
    """The results row of a trace given directly: budget figures and loss metrics (given, else measured)."""
    row: dict[str, Any] = dict(trace.summary())
    given = _given_row(losses, trace)
    found = given if given is not None else measured.by_id[id(trace)].conversation.iloc[0].to_dict()
    for key, value in found.items():
        row.setdefault(str(key), value)
    row["summarizer"] = label
    row.setdefault("summarizer_identity", str(trace.settings.summarizer))
    return row


def replay_costs(
    entries: list[tuple[str, Trace]], direct: int, sweep: Sweep | None, primary_model: str, priced: dict[str, str]
) -> pd.DataFrame:
    """Tokens and money of the replays the report prices (:func:`_to_price`), each summarizer priced as ``priced``
    names it: one row per replay, each distinct replay priced once and its row copied to the cells derived
    from it (:func:`~zett_lab.study.regions.derive`: the same steps and summaries, only the limits differ),
    so a sweep costs its distinct replays, not its cells."""
    groups = _to_price(entries, direct, sweep, primary_model)
    costs = costs_per_replay([group[0] for group in groups], primary_model, priced)
    if not len(costs) or all(len(group) == 1 for group in groups):
        return costs
    positions: dict[tuple[str, str, int, int], int] = {}
    for position, key in enumerate(costs[_REPLAY_KEYS].itertuples(index=False, name=None)):
        positions.setdefault((str(key[0]), str(key[1]), int(key[2]), int(key[3])), position)
    rows: list[int] = []
    limits: list[tuple[int, int]] = []
    for group in groups:
        row = positions.get(_replay_key(*group[0]))  # None: a replay without steps has no costs
        if row is not None:
            rows.extend([row] * (len(group) - 1))
            limits.extend((trace.setting.max_tokens, trace.setting.keep_recent_tokens) for _, trace in group[1:])
    copies = costs.iloc[rows].copy()
    copies["max_tokens"] = [m for m, _ in limits]
    copies["keep_recent_tokens"] = [k for _, k in limits]
    return pd.concat([costs, copies.astype(costs.dtypes.to_dict())], ignore_index=True)


def _to_price(
    entries: list[tuple[str, Trace]], direct: int, sweep: Sweep | None, primary_model: str
) -> list[list[tuple[str, Trace]]]:
    """The replays whose costs the report computes, in groups that cost the same: each of the ``direct`` first
    ``entries`` (given directly) alone, and a sweep's cells it did not price with ``primary_model`` (a summary
    model with no list price; a sweep priced for another model) by the distinct replay they hold
    (:func:`_distinct_replay`)."""
    cells = entries[direct:]
    if sweep is not None and sweep.config.get("primary_model") == primary_model:
        table = _compared(sweep)
        if "total_cost_usd" in table.columns:
            keys = set(table.loc[table["total_cost_usd"].isna(), _REPLAY_KEYS].itertuples(index=False, name=None))
            cells = [(label, trace) for label, trace in cells if _replay_key(label, trace) in keys]
    groups: dict[Hashable, list[tuple[str, Trace]]] = {
        ("given", n): [entry] for n, entry in enumerate(entries[:direct])
    }
    for label, trace in cells:
        groups.setdefault(_distinct_replay(label, trace), []).append((label, trace))
    return list(groups.values())


def _distinct_replay(label: str, trace: Trace) -> tuple[str, str, Setting | None]:
    """The replay whose steps and summaries a sweep's cell holds: its own Setting's, or the one it was derived
    from (one replay per Setting in a sweep)."""
    return (label, trace.conversation.id, trace.settings.derived_from or trace.setting)


def _replay_key(label: str, trace: Trace) -> tuple[str, str, int, int]:
    return (trace.conversation.id, label, trace.setting.max_tokens, trace.setting.keep_recent_tokens)


def _results(sweep: Sweep | None, direct_rows: list[dict[str, Any]], costs: pd.DataFrame) -> pd.DataFrame:
    """One row per attempted replay (a sweep's failed cells included, ``error`` set), with costs: a sweep's
    own, else the report's (:func:`_to_price`)."""
    parts = [_compared(sweep)] if sweep is not None else []
    if direct_rows:
        parts.append(pd.DataFrame(direct_rows))
    table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    if len(costs) and len(table):
        table = table.merge(costs, on=_REPLAY_KEYS, how="left", suffixes=("", "_priced"))
        for column in costs.columns:
            if f"{column}_priced" in table.columns:
                priced = table.pop(f"{column}_priced")
                table[column] = table[column].mask(priced.notna(), priced)
    for column in ("max_tokens", "keep_recent_tokens"):
        table[column] = table[column].astype("int64")
    return table.sort_values(
        ["summarizer", "max_tokens", "keep_recent_tokens", "conversation_id"], kind="stable"
    ).reset_index(drop=True)


def _compared(sweep: Sweep) -> pd.DataFrame:
    """A sweep's results with ``summarizer`` naming the arm each row belongs to (:meth:`Arms.label`)."""
    table = sweep.results.copy()
    if "engine" in table.columns:
        label = Arms.of(sweep).label
        table["summarizer"] = [label(e, s) for e, s in zip(table["engine"], table["summarizer"], strict=True)]
    return table
