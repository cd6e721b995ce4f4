"""The result of a sweep: a results table, and its cells, each a conversation under a Setting.

:class:`Sweep` is the results table (one row per cell; its columns: :mod:`~zett_lab.study.result_columns`) and what names a cell (a
:class:`~zett_lab.study.grid.Cell`: a conversation and a Setting; the table's labels of its
summarizer and engine). Every distinct replay's tables are in its storage
(:class:`~zett_lab.study.store.SweepStore`, on disk): :meth:`Sweep.trace` and :meth:`Sweep.losses`
read one cell back when asked. :meth:`Sweep.save` writes the same layout to a folder of your
choice; :meth:`Sweep.load` reads it back (no replay is run).
"""

from __future__ import annotations

import dataclasses
import html
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
from zett_agent.model import AgentModel

from ..errors import InputError, SettingError, ZettLabError
from ..files import atomic_folder, check_output
from ..formatting import count
from ..load import SkippedFile
from ..load.conversation import Conversation
from ..measure import Losses, measure
from ..measure.catalogue import labelled_html
from ..records import is_missing
from ..replay.engine import engine_name
from ..replay.schema import TraceRow
from ..replay.setting import SETTING_FIELDS, Setting
from ..replay.trace import (
    Trace,
    combine_failure_counts,
    count_causes,
)
from .grid import STOCK_ENGINE, Cell, resolve_values, summarizer_label
from .sources import (
    ANCHOR_COUNTS_TABLE,
    LOSS_TABLES,
    LOST_ANCHORS_TABLE,
    RUN_AGAIN,
)
from .store import SweepStore, check_sweep_target, source_failures


class SweepConfig(TypedDict, total=False):
    """A sweep's grid, options and run statistics (``Sweep.config``; saved as JSON)."""

    conversations: list[str]
    max_tokens: list[int]
    keep_recent_tokens: list[int]
    summarizers: list[str]
    summarizer_identities: list[str]
    engines: list[str]
    engine_identities: list[str]
    engine_reuse: dict[str, list[str]]
    context_window: int | None
    context_window_name: str | None
    primary_model: str | None
    metrics: bool
    reuse: bool
    replay_options: dict[str, Any]
    #: The Setting fields every cell shares, by name (:meth:`Setting.names` without limits, summarizer and engine).
    setting: dict[str, Any]
    cache: str | None
    executor: str
    units: int
    workers: list[str]
    replays: int
    forked: int
    shared_steps: int
    reused: int
    errors: int
    cells_with_failed_summaries: int
    model_calls: int
    cache_hits: int
    summaries_merged: int
    elapsed_s: float
    worker_cpu_s: float
    worker_busy_s: float
    driver_cpu_s: float
    #: Per unit that ran (submission order): ``unit``, ``conversation_id``, ``engine``, ``summarizer``, ``cells``,
    #: ``worker``, ``seconds``, ``cpu_s``, ``setup_cpu_s`` (of ``cpu_s``: the conversation's anchor index,
    #: built once per worker) and ``summary_s`` (the summaries it computed, not served by the cache): what a
    #: schedule of the same work on more workers is simulated from.
    unit_times: list[dict[str, Any]]
    #: Files of the input folders that could not be read (their conversations are not in the sweep).
    skipped_files: list[SkippedFile]


@dataclass(frozen=True, eq=False)
class Sweep:
    """The result of :func:`zett_lab.study.sweep`: a tidy results table and the trace of every cell.

    Frozen (its fields are what it ran); compared by identity, as its results table has no equality.

    Attributes:
        results: one row per conversation × engine × summarizer × max_tokens × keep_recent_tokens.
            Setting columns (``conversation_id``, ``engine`` and ``summarizer`` (the labels given),
            ``max_tokens``, ``keep_recent_tokens`` (tokens), and with ``context_window``:
            ``context_window``, ``max_tokens_share``, ``keep_recent_share``); budget figures
            of :meth:`Trace.summary`; cost columns of :func:`zett_lab.measure.cost.cost_summary`
            (``*_usd`` only with ``primary_model``); loss metrics of :func:`zett_lab.measure`;
            then ``engine_identity``, ``summarizer_identity``, ``replayed`` (False: the cell is
            proven identical to another replay and shares it), ``shared_steps`` (steps its
            replay took from an earlier one it was forked from), ``model_calls`` /
            ``cache_hits`` (summary calls this cell made / got from the cache), ``seconds``,
            ``worker`` (host:pid that ran it) and ``error`` (None when the cell is complete).
            A cell whose replay had failed summaries is marked: ``failed`` (how many) and
            ``summary_error`` (the first one's error); it is no measurement
            (:func:`~zett_lab.study.choose.measured_cells`).
        config: the grid, options and run statistics (:class:`SweepConfig`).
        store: where every cell's replay is (:class:`~zett_lab.study.store.SweepStore`).
    """

    results: pd.DataFrame
    config: SweepConfig
    store: SweepStore = field(default_factory=SweepStore, repr=False)

    @property
    def source(self) -> Path | None:
        """The folder the sweep was loaded from (None for a sweep run in this process)."""
        return self.store.path

    # --- cells --------------------------------------------------------------------

    def setting(
        self,
        max_tokens: float,
        keep_recent_tokens: float,
        summarizer: str | AgentModel | None = None,
        engine: str | None = None,
    ) -> Setting:
        """The Setting of a cell of this grid: limits (fractions resolved against the context window), the
        summarizer's label (or identity, or the model) and the engine's label; either may be left out when the
        sweep has only one."""
        engines = self.config.get("engines", [STOCK_ENGINE])
        if engine is None:
            if len(engines) != 1:
                raise SettingError(f"this sweep has several engines; name one of {engines}")
            engine = engines[0]
        labels = self.config["summarizers"]
        if summarizer is None:
            if len(labels) != 1:
                raise SettingError(f"this sweep has several summarizers; name one of {labels}")
            label = labels[0]
        else:
            label = summarizer if isinstance(summarizer, str) else summarizer_label(summarizer)
            identities = dict(zip(self.config["summarizer_identities"], labels, strict=True))
            label = label if label in labels else identities.get(label, label)
        window = self.config.get("context_window")
        ((m, _),) = resolve_values([max_tokens], "max_tokens", window)
        ((k, _),) = resolve_values([keep_recent_tokens], "keep_recent_tokens", window)
        named = dict(zip(labels, self.config["summarizer_identities"], strict=True))
        engine_names = dict(zip(engines, self.config.get("engine_identities", [engine_name(None)]), strict=True))
        record = {
            **self.config.get("setting", _old_setting_record(self.config)),
            "max_tokens": m,
            "keep_recent_tokens": k,
            "summarizer": named.get(label, label),
            "engine": engine_names.get(engine, engine),
        }
        return Setting.from_record(record)

    def labels(self, setting: Setting) -> tuple[str, str]:
        """The summarizer's and the engine's labels of a Setting of this grid (its results table names them so)."""
        summarizers = dict(zip(self.config["summarizer_identities"], self.config["summarizers"], strict=True))
        engines = self.config.get("engines", [STOCK_ENGINE])
        engine_labels = dict(zip(self.config.get("engine_identities", [engine_name(None)]), engines, strict=True))
        summary, engine = setting.summarizer_name, setting.engine_name
        return summarizers.get(summary, summary), engine_labels.get(engine, engine)

    def cell(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: str | AgentModel | None = None,
        engine: str | None = None,
    ) -> Cell:
        """The cell of a conversation under a Setting, given as one or as :meth:`setting`'s arguments."""
        if isinstance(max_tokens, Setting):
            return Cell(conversation_id, max_tokens)
        if keep_recent_tokens is None:
            raise SettingError("name a cell by its Setting, or by max_tokens and keep_recent_tokens")
        return Cell(conversation_id, self.setting(max_tokens, keep_recent_tokens, summarizer, engine))

    def trace(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: str | AgentModel | None = None,
        engine: str | None = None,
    ) -> Trace:
        """The trace of one cell: ``sweep.trace(conversation_id, setting)``, or with :meth:`setting`'s arguments
        (``sweep.trace(conversation_id, 12_000, 3_000, "mask")``), which build the Setting.

        Raises ``KeyError`` for a cell not in the grid and :class:`~zett_lab.errors.ZettLabError`
        for a cell that failed.
        """
        return self.store.trace(
            self._known(self.cell(conversation_id, max_tokens, keep_recent_tokens, summarizer, engine))
        )

    def losses(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: str | AgentModel | None = None,
        engine: str | None = None,
        *,
        anchors: bool = True,
    ) -> Losses | None:
        """The loss tables of one cell (named as for :meth:`trace`), as :func:`zett_lab.measure` gives them.

        ``anchors=True`` measures the cell's trace now (every table). ``anchors=False`` reads
        what the sweep measured (the same tables, with ``anchors`` left empty; None when the
        sweep ran with ``metrics=False``).
        """
        key = self._known(self.cell(conversation_id, max_tokens, keep_recent_tokens, summarizer, engine))
        return measure(self.store.trace(key)) if anchors else self._kept_losses(key)

    def _kept_losses(self, key: Cell) -> Losses | None:
        """The loss tables the sweep measured for a known cell, its own settings filled in (None: none kept)."""
        tables = {name: self.store.kept(key, f"losses-{name}") for name in LOSS_TABLES}
        if any(table is None for table in tables.values()):
            return None
        for name in ("compactions", "conversation"):
            table = tables[name]
            if table is not None and len(table):
                table["max_tokens"] = pd.array([key.setting.max_tokens] * len(table), dtype="Int64")
                table["keep_recent_tokens"] = pd.array([key.setting.keep_recent_tokens] * len(table), dtype="Int64")
        conversation = tables["conversation"]
        if conversation is not None and len(conversation) and "steps_over_budget" in conversation:
            conversation["steps_over_budget"] = pd.array([self._steps_over(key)] * len(conversation), dtype="Int64")
        return Losses(**tables, settings=(self.store.settings(key),))  # type: ignore[arg-type]

    def lost_and_counted(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: str | AgentModel | None = None,
        engine: str | None = None,
    ) -> tuple[Losses, pd.DataFrame] | None:
        """One cell's losses as a report shows them, read from what the sweep measured: every table, with
        ``anchors`` holding only the rows a report lists (lost but needed, dropped constraints), and the per-anchor flags counted (what
        :func:`~zett_lab.measure.losses.measure_lost_and_counted` gives for its trace). None when the
        sweep did not keep them (``metrics=False``, or a sweep saved before they were kept)."""
        return self._kept_lost_and_counted(
            self._known(self.cell(conversation_id, max_tokens, keep_recent_tokens, summarizer, engine))
        )

    def _kept_lost_and_counted(self, key: Cell) -> tuple[Losses, pd.DataFrame] | None:
        losses = self._kept_losses(key)
        if losses is None:
            return None
        lost, counts = (self.store.kept(key, table) for table in (LOST_ANCHORS_TABLE, ANCHOR_COUNTS_TABLE))
        if lost is None or counts is None:
            return None
        return dataclasses.replace(losses, anchors=lost), counts

    def traces(self) -> Iterator[tuple[Cell, Trace]]:
        """``(Cell, Trace)`` for every complete cell, read one at a time."""
        for key in self.store.cells:
            yield key, self.store.trace(key)

    def cells(self) -> list[Cell]:
        """Every complete cell."""
        return list(self.store.cells)

    def _known(self, key: Cell) -> Cell:
        if key not in self.store.cells:
            named = f"conversation {key.conversation_id!r} at {key.setting.describe()}"
            row = self._row(key)
            if row is not None and isinstance(row.get("error"), str):
                raise ZettLabError(f"cell of {named} failed: {row['error']}")
            raise KeyError(f"no cell of {named} in this sweep")
        return key

    def _row(self, key: Cell) -> dict[str, Any] | None:
        summarizer, engine = self.labels(key.setting)
        limits = (int(key.setting.max_tokens), int(key.setting.keep_recent_tokens))
        position = self._row_positions.get((key.conversation_id, summarizer, engine, *limits))
        return None if position is None else {str(k): v for k, v in self.results.iloc[position].items()}

    @cached_property
    def _row_positions(self) -> dict[tuple[str, str, str, int, int], int]:
        """Each results row's position by its cell (conversation, summarizer and engine labels, limits; the first
        row wins), found once: a report asks for one row per cell it shows, and a scan each time grew with the
        square of the cells."""
        r = self.results
        engines = r["engine"] if "engine" in r else [STOCK_ENGINE] * len(r)
        positions: dict[tuple[str, str, str, int, int], int] = {}
        for position, (conversation, summarizer, engine, max_tokens, keep) in enumerate(
            zip(r["conversation_id"], r["summarizer"], engines, r["max_tokens"], r["keep_recent_tokens"], strict=True)
        ):
            positions.setdefault(
                (str(conversation), str(summarizer), str(engine), int(max_tokens), int(keep)), position
            )
        return positions

    def _steps_over(self, key: Cell) -> int:
        row = self._row(key)
        value = row.get("steps_over_budget") if row is not None else None
        return 0 if value is None or is_missing(value) else int(value)

    def stored_traces(self) -> list[tuple[Cell, StoredTrace]]:
        """``(Cell, trace)`` of every complete cell, each reading its tables only when used.

        What a report over a large sweep holds: settings and conversation in memory, the
        tables of the last few cells used.
        """
        return [(key, StoredTrace(self, key)) for key in self.store.cells]

    @property
    def conversations(self) -> dict[str, Conversation]:
        """The swept conversations by id (what :func:`decision_boundaries` needs for a cell)."""
        return dict(self.store.conversations)

    @property
    def errors(self) -> pd.DataFrame:
        """The cells that failed, with their error."""
        return self.results[self.results["error"].notna()]

    @property
    def failure_counts(self) -> pd.DataFrame:
        """Failures per distinct cause (:data:`~zett_lab.replay.schema.FAILURE_COLUMNS`): summary calls
        that failed (each distinct replay counted once, however many cells share it) and cells
        that failed; empty when everything succeeded."""
        identities = self.config.get("summarizer_identities", [])
        labels = dict(zip(identities, self.config.get("summarizers", []), strict=True))
        calls = combine_failure_counts([source_failures(source) for source in self.store.sources.values()])
        calls["summarizer"] = [labels.get(name, name) for name in calls["summarizer"]]
        cells = self.errors
        kinds = cells["error"].map(lambda text: str(text).split(":", 1)[0])
        failed_cells = count_causes("sweep cell", cells["summarizer"], kinds, cells["error"])
        return combine_failure_counts([calls, failed_cells])

    @property
    def skipped_files(self) -> list[SkippedFile]:
        """Files of the input folders that could not be read, each with why (empty when every file was read)."""
        return list(self.config.get("skipped_files", []))

    def input_files(self) -> list[Path]:
        """What the sweep was made from: the conversations' files, the summary cache, the folder it was loaded from."""
        files = [f for c in self.store.conversations.values() for f in c.input_files()]
        cache = self.config.get("cache")
        if cache and cache != ":memory:":
            files.append(Path(cache))
        return files + ([self.source] if self.source else [])

    # --- display ------------------------------------------------------------------

    def __repr__(self) -> str:
        c = self.config
        return (
            f"Sweep({len(c['conversations'])} conversations × {len(c['max_tokens'])} max_tokens × "
            f"{len(c['keep_recent_tokens'])} keep_recent_tokens × {len(c['summarizers'])} summarizers × "
            f"{len(c.get('engines', [STOCK_ENGINE]))} engines = "
            f"{len(self.results)} cells; {c.get('replays', 0)} replays ({c.get('forked', 0)} forked), "
            f"{c.get('reused', 0)} reused, {c.get('errors', 0)} errors, "
            f"{c.get('cells_with_failed_summaries', 0)} with failed summaries; {c.get('elapsed_s', 0):.1f}s)"
        )

    def _repr_html_(self) -> str:
        c = self.config
        facts = {
            "conversations": ", ".join(c["conversations"]),
            "max_tokens": ", ".join(map(count, c["max_tokens"])),
            "keep_recent_tokens": ", ".join(map(count, c["keep_recent_tokens"])),
            "summarizers": ", ".join(c["summarizers"]),
            "engines": ", ".join(c.get("engines", [STOCK_ENGINE])),
            "context_window": count(c.get("context_window")),
            "cells": count(len(self.results)),
            "replays (forked) / reused / errors": (
                f"{c.get('replays', 0)} ({c.get('forked', 0)}) / {c.get('reused', 0)} / {c.get('errors', 0)}"
            ),
            "cells with failed summaries": c.get("cells_with_failed_summaries", 0),
            "summary calls / cache hits": f"{c.get('model_calls', 0)} / {c.get('cache_hits', 0)}",
            "executor": c.get("executor"),
            "elapsed": f"{c.get('elapsed_s', 0):.2f} s",
        }
        head = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in facts.items()
        )
        preferred = [
            "conversation_id",
            "engine",
            "summarizer",
            "max_tokens",
            "keep_recent_tokens",
            "compactions_applied",
            "steps_over_budget",
            "peak_context",
            "total_input_tokens",
            "total_cost_usd",
            "needed_anchor_recall",
            "constraint_survival",
            "failed",
            "summary_error",
            "error",
        ]
        results = self.results
        columns = [
            col
            for col in preferred
            if col in results.columns
            and results[col].notna().any()
            and (col != "engine" or results[col].nunique() > 1)  # one engine: said above, not in every row
        ]
        table = labelled_html(results, columns=columns, max_rows=40)
        return f"<div><h4>{html.escape(repr(self))}</h4><table>{head}</table>{table}</div>"

    # --- files --------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the sweep to a folder (built aside, then moved in place).

        ``results.parquet`` (the results table), ``cells.parquet`` (which replay each cell
        uses), ``sources/<id>.<table>.parquet`` (each distinct replay's ``steps`` and
        ``compactions``, its loss tables ``losses-*``, and what a report shows of its anchors, ``lost-anchors``
        and ``anchor-counts``; ``<id>.engine-events.json``, the engine's
        own events), ``sweep.json`` (config, per-replay settings and proven regions, and each
        conversation once).
        Never over one of :meth:`input_files`; an existing folder is replaced only with
        ``overwrite=True`` and only when it holds a saved sweep.
        """
        target = check_output(path, self.input_files(), overwrite=overwrite, folder=True)
        check_sweep_target(target)
        with atomic_folder(target, overwrite=overwrite) as staging:
            self.store.write(staging, self.results, self.config, self.labels)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Sweep:
        """Read a sweep written by :meth:`save` (no replay is run)."""
        results, config, store, cells = SweepStore.read(Path(path))
        try:
            swept = cls(results=results, config=config, store=store)  # type: ignore[arg-type]
            # Sweeps saved before engines were a dimension ran the stock engine.
            engines = cells["engine"] if "engine" in cells else [STOCK_ENGINE] * len(cells)
            store.cells.update(
                {
                    swept.cell(str(cid), int(m), int(k), str(label), str(engine)): str(sid)
                    for cid, label, m, k, engine, sid in zip(
                        cells["conversation_id"],
                        cells["summarizer"],
                        cells["max_tokens"],
                        cells["keep_recent_tokens"],
                        engines,
                        cells["source_id"],
                        strict=True,
                    )
                }
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, InputError):
                raise
            raise InputError(
                Path(path),
                None,
                f"its cells do not match its sweep.json ({type(error).__name__}: {error}); {RUN_AGAIN}",
            ) from None
        return swept


def _old_setting_record(config: SweepConfig) -> dict[str, Any]:
    """The Setting fields a sweep saved before its config held them: the replay options it was given."""
    options = config.get("replay_options") or {}
    return {
        name: options[name]
        for name in SETTING_FIELDS
        if name in options and isinstance(options[name], (str, int, list))
    }


class StoredTrace(Trace):
    """The trace of one sweep cell whose tables are read from the sweep's folder when used.

    ``conversation`` and ``settings`` are in memory; ``steps`` and ``compactions`` come from the
    sweep, which keeps the tables of the last few cells read; ``engine_events`` are read from the
    sweep's folder each time they are asked for.
    Equal to ``sweep.trace(...)`` of its cell; the tables are shared, so never modify them.
    """

    def __init__(self, sweep: Sweep, cell: Cell) -> None:
        self.sweep, self.cell = sweep, cell
        # A Trace is frozen: its two fields held in memory are set once, here.
        object.__setattr__(self, "conversation", sweep.store.conversations[cell.conversation_id])
        object.__setattr__(self, "settings", sweep.store.settings(cell))

    @property
    def steps(self) -> pd.DataFrame:
        return self.sweep.store.tables(self.cell).steps

    @property
    def compactions(self) -> pd.DataFrame:
        return self.sweep.store.tables(self.cell).compactions

    @property
    def engine_events(self) -> list[TraceRow]:
        return self.sweep.store.engine_events(self.cell)

    def losses(self, *, anchors: bool = True) -> Losses | None:
        """:meth:`Sweep.losses` of this cell."""
        return self.sweep.losses(self.cell.conversation_id, self.cell.setting, anchors=anchors)

    def lost_and_counted(self) -> tuple[Losses, pd.DataFrame] | None:
        """:meth:`Sweep.lost_and_counted` of this cell."""
        return self.sweep._kept_lost_and_counted(self.cell)
