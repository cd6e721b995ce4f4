"""The result of a sweep: a results table in memory, every distinct replay's tables on disk.

A sweep writes each distinct replay's step and compaction tables (and its loss tables) to a
folder as it arrives (:class:`SourceFolder`), so the memory a sweep holds is its results
table, not its traces. :meth:`Sweep.trace` and :meth:`Sweep.losses` read one cell back
when asked. :meth:`Sweep.save` writes the same layout to a folder of your choice;
:meth:`Sweep.load` reads it back (no replay is run).

(Over 600 lines on purpose: it is one public type, whose accessors, save and load share its
private cell index; split, the reader of a folder would live apart from its writer.)
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import shutil
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError, OutputError, SettingError, ZettLabError
from ..files import atomic_folder, check_output
from ..formatting import count, frame_html
from ..load.conversation import Conversation
from ..measure import Losses, measure
from ..measure.catalogue import metrics
from ..records import is_missing
from ..replay.engine import engine_name
from ..replay.schema import FAILURE_COLUMNS
from ..replay.setting import SETTING_FIELDS, Setting, TraceSettings
from ..replay.trace import (
    Trace,
    combine_failure_counts,
    conversation_document,
    conversation_from_document,
    count_causes,
    failure_counts,
)
from .boundaries import Region, derive
from .grid import STOCK_ENGINE, Cell, resolve_values, summarizer_label
from .sources import (
    ANCHOR_COUNTS_TABLE,
    LOSS_TABLES,
    LOST_ANCHORS_TABLE,
    Source,
    SourceFolder,
    restore,
    storable,
    write_parquet,
)

FORMAT = "zett-lab-sweep"
#: 2: one Parquet file per replay table under ``sources/`` (1: all replays in one steps/compactions file).
VERSION = 2
#: Traces a sweep keeps read back in memory: at most this many, and (beyond the last one read) at most
#: :data:`SUMMARY_CHARS_KEPT` characters of summary text in all (an observation mask's replay holds ~50 M).
TRACES_KEPT = 8
SUMMARY_CHARS_KEPT = 20_000_000


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
    #: ``worker``, ``seconds``, ``cpu_s`` and ``setup_cpu_s`` (of ``cpu_s``: the conversation's anchor index,
    #: built once per worker): what a schedule of the same work on more workers is simulated from.
    unit_times: list[dict[str, Any]]


@dataclass
class Sweep:
    """The result of :func:`zett_lab.study.sweep`: a tidy results table and the trace of every cell.

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
        source: the folder the sweep was loaded from (None for a sweep run in this process).
    """

    results: pd.DataFrame
    config: SweepConfig
    _conversations: dict[str, Conversation] = field(default_factory=dict, repr=False)
    _sources: dict[str, Source] = field(default_factory=dict, repr=False)
    _cells: dict[Cell, str] = field(default_factory=dict, repr=False)
    #: Traces read back, oldest first, each with its characters of summary text.
    _read: OrderedDict[Cell, tuple[Trace, int]] = field(default_factory=OrderedDict, repr=False)
    source: Path | None = field(default=None, repr=False)

    # --- cells --------------------------------------------------------------------

    def setting(
        self,
        max_tokens: float,
        keep_recent_tokens: float,
        summarizer: Any = None,
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
        summarizer: Any = None,
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
        summarizer: Any = None,
        engine: str | None = None,
    ) -> Trace:
        """The trace of one cell: ``sweep.trace(conversation_id, setting)``, or with :meth:`setting`'s arguments
        (``sweep.trace(conversation_id, 12_000, 3_000, "mask")``), which build the Setting.

        Raises ``KeyError`` for a cell not in the grid and :class:`~zett_lab.errors.ZettLabError`
        for a cell that failed.
        """
        return self._trace(self._known(self.cell(conversation_id, max_tokens, keep_recent_tokens, summarizer, engine)))

    def losses(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: Any = None,
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
        return measure(self._trace(key)) if anchors else self._kept_losses(key)

    def _kept_losses(self, key: Cell) -> Losses | None:
        """The loss tables the sweep measured for a known cell, its own settings filled in (None: none kept)."""
        source = self._sources[self._cells[key]]
        tables = {name: source.folder.read(source.source_id, f"losses-{name}") for name in LOSS_TABLES}
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
        return Losses(**tables, settings=(self._settings_of(source, key),))  # type: ignore[arg-type]

    def lost_and_counted(
        self,
        conversation_id: str,
        max_tokens: float | Setting,
        keep_recent_tokens: float | None = None,
        summarizer: Any = None,
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
        source = self._sources[self._cells[key]]
        lost, counts = (source.folder.read(source.source_id, t) for t in (LOST_ANCHORS_TABLE, ANCHOR_COUNTS_TABLE))
        if lost is None or counts is None:
            return None
        return dataclasses.replace(losses, anchors=lost), counts

    def traces(self) -> Iterator[tuple[Cell, Trace]]:
        """``(Cell, Trace)`` for every complete cell, read one at a time."""
        for key in self._cells:
            yield key, self._trace(key)

    def cells(self) -> list[Cell]:
        """Every complete cell."""
        return list(self._cells)

    def _known(self, key: Cell) -> Cell:
        if key not in self._cells:
            named = f"conversation {key.conversation_id!r} at {key.setting.describe()}"
            row = self._row(key)
            if row is not None and isinstance(row.get("error"), str):
                raise ZettLabError(f"cell of {named} failed: {row['error']}")
            raise KeyError(f"no cell of {named} in this sweep")
        return key

    def _row(self, key: Cell) -> dict[str, Any] | None:
        r, setting = self.results, key.setting
        summarizer, engine = self.labels(setting)
        chosen = (r["conversation_id"] == key.conversation_id) & (r["summarizer"] == summarizer)
        chosen &= r["engine"] == engine if "engine" in r else engine == STOCK_ENGINE
        limits = (r["max_tokens"] == setting.max_tokens) & (r["keep_recent_tokens"] == setting.keep_recent_tokens)
        match = r[chosen & limits]
        return match.iloc[0].to_dict() if len(match) else None

    def _steps_over(self, key: Cell) -> int:
        row = self._row(key)
        value = row.get("steps_over_budget") if row is not None else None
        return 0 if value is None or is_missing(value) else int(value)

    def _settings_of(self, source: Source, key: Cell) -> TraceSettings:
        """A cell's trace settings (as :func:`~zett_lab.study.boundaries.derive` gives them for a shared replay)."""
        return source.settings.derive(key.setting)

    def _cell_trace(self, key: Cell) -> Trace:
        """One cell's tables read from the folder (the last few are kept; shared, so never modified).

        Without the engine's events (:meth:`_engine_events`): only cross-checks read them, and their
        summaries repeat the compaction rows'.
        """
        held = self._read.get(key)
        trace = held[0] if held is not None else None
        if trace is None:
            source = self._sources[self._cells[key]]
            steps = source.folder.read(source.source_id, "steps")
            compactions = source.folder.read(source.source_id, "compactions")
            if steps is None or compactions is None:
                raise InputError(
                    source.folder.path, f"replay {source.source_id}", "its tables are missing from the sweep folder"
                )
            trace = Trace(
                conversation=self._conversations[source.conversation_id],
                steps=steps,
                compactions=compactions,
                settings=source.settings,
            )
            if trace.setting != key.setting:
                trace = derive(trace, key.setting.max_tokens, key.setting.keep_recent_tokens, source.region)
            self._read[key] = (trace, _summary_chars(trace))
        self._read.move_to_end(key)
        chars = 0
        for n, older in enumerate(reversed(list(self._read))):  # the newest first; it always stays
            chars += self._read[older][1]
            if n and (n >= TRACES_KEPT or chars > SUMMARY_CHARS_KEPT):
                del self._read[older]
        return trace

    def _trace(self, key: Cell) -> Trace:
        """A cell's trace the caller may change (its own copy of the tables)."""
        trace = self._cell_trace(key)
        return Trace(
            conversation=trace.conversation,
            steps=trace.steps.copy(),
            compactions=trace.compactions.copy(),
            settings=trace.settings,
            engine_events=self._engine_events(key),
        )

    def _engine_events(self, key: Cell) -> list[dict[str, Any]]:
        """The engine's events of a cell's replay (a cell derived from it has the same ones), read when asked."""
        return list(self._sources[self._cells[key]].engine_events)

    def stored_traces(self) -> list[tuple[Cell, StoredTrace]]:
        """``(Cell, trace)`` of every complete cell, each reading its tables only when used.

        What a report over a large sweep holds: settings and conversation in memory, the
        tables of the last few cells used.
        """
        return [(key, StoredTrace(self, key)) for key in self._cells]

    @property
    def conversations(self) -> dict[str, Conversation]:
        """The swept conversations by id (what :func:`decision_boundaries` needs for a cell)."""
        return dict(self._conversations)

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
        calls = combine_failure_counts([source_failures(source) for source in self._sources.values()])
        calls["summarizer"] = [labels.get(name, name) for name in calls["summarizer"]]
        cells = self.errors
        kinds = cells["error"].map(lambda text: str(text).split(":", 1)[0])
        failed_cells = count_causes("sweep cell", cells["summarizer"], kinds, cells["error"])
        return combine_failure_counts([calls, failed_cells])

    def input_files(self) -> list[Path]:
        """What the sweep was made from: the conversations' files, the summary cache, the folder it was loaded from."""
        files = [f for c in self._conversations.values() for f in c.input_files()]
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
            "replayed",
            "failed",
            "summary_error",
            "error",
        ]
        columns = [col for col in preferred if col in self.results.columns]
        table = frame_html(self.results, columns=columns, max_rows=40)
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
        target = check_output(path, self.input_files(), overwrite=overwrite)
        check_sweep_target(target)
        with atomic_folder(target, overwrite=overwrite) as staging:
            self._write(staging)
        return target

    def _write(self, folder: Path) -> None:
        pq.write_table(pa.Table.from_pandas(storable(self.results), preserve_index=False), folder / "results.parquet")
        cells = pd.DataFrame(
            [
                (cid, *self.labels(setting), setting.max_tokens, setting.keep_recent_tokens, sid)
                for (cid, setting), sid in self._cells.items()
            ],
            columns=["conversation_id", "summarizer", "engine", "max_tokens", "keep_recent_tokens", "source_id"],
        )
        pq.write_table(pa.Table.from_pandas(cells, preserve_index=False), folder / "cells.parquet")
        saved = SourceFolder(folder)
        for source in self._sources.values():
            for table in source.folder.tables(source.source_id):
                if source.folder.suffix == saved.suffix:
                    shutil.copyfile(source.folder.file(source.source_id, table), saved.file(source.source_id, table))
                else:
                    loaded = source.folder.read(source.source_id, table)
                    assert loaded is not None
                    write_parquet(loaded, saved.file(source.source_id, table))
            saved.write_events(source.source_id, source.engine_events)
        document = {
            "format": FORMAT,
            "version": VERSION,
            "config": self.config,
            "sources": {
                sid: {
                    "conversation_id": src.conversation_id,
                    "settings": src.settings.record(),
                    "region": _region_document(src.region),
                    "failures": source_failures(src).to_dict("records"),
                }
                for sid, src in self._sources.items()
            },
            "conversations": {cid: conversation_document(c) for cid, c in self._conversations.items()},
        }
        (folder / "sweep.json").write_text(json.dumps(document, default=_json_default), encoding="utf-8")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Sweep:
        """Read a sweep written by :meth:`save` (no replay is run)."""
        source = Path(path)
        try:
            document = json.loads((source / "sweep.json").read_text(encoding="utf-8"))
            results = restore(pq.read_table(source / "results.parquet").to_pandas())
            cells = pq.read_table(source / "cells.parquet").to_pandas()
        except (OSError, ValueError, KeyError) as error:
            raise InputError(source, None, f"not a saved zett_lab sweep ({type(error).__name__}: {error})") from error
        if document.get("format") != FORMAT:
            raise InputError(source / "sweep.json", "field 'format'", f"expected {FORMAT!r}")
        folder = SourceFolder(source) if document.get("version") == VERSION else _split_version_1(source)
        conversations = {cid: conversation_from_document(doc) for cid, doc in document["conversations"].items()}
        sources = {
            sid: Source(
                sid,
                info["conversation_id"],
                Region(**info["region"]),
                TraceSettings.from_record(info["settings"]),
                info.get("engine_events"),  # sweeps saved before the events were kept beside the tables
                folder,
                pd.DataFrame(info["failures"], columns=FAILURE_COLUMNS) if "failures" in info else None,
            )
            for sid, info in document["sources"].items()
        }
        swept = cls(
            results=results, config=document["config"], _conversations=conversations, _sources=sources, source=source
        )
        # Sweeps saved before engines were a dimension ran the stock engine.
        engines = cells["engine"] if "engine" in cells else [STOCK_ENGINE] * len(cells)
        swept._cells = {
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
        return swept


def _old_setting_record(config: SweepConfig) -> dict[str, Any]:
    """The Setting fields a sweep saved before its config held them: the replay options it was given."""
    options = config.get("replay_options") or {}
    return {
        name: options[name]
        for name in SETTING_FIELDS
        if name in options and isinstance(options[name], (str, int, list))
    }


def _summary_chars(trace: Trace) -> int:
    """Characters of summary text a trace's compaction rows hold."""
    texts = trace.compactions["summary_text"] if "summary_text" in trace.compactions else pd.Series(dtype=object)
    return int(texts.map(lambda text: len(text) if isinstance(text, str) else 0).sum())


def source_failures(source: Source) -> pd.DataFrame:
    """The failures a replay of a sweep made itself (counted from its compactions table when not kept)."""
    if source.failures is None:
        compactions = source.folder.read(source.source_id, "compactions")
        source.failures = failure_counts(compactions if compactions is not None else pd.DataFrame())
    return source.failures


def check_sweep_target(target: Path) -> None:
    """Refuse to replace anything but a saved sweep (a folder holding ``sweep.json``) with a sweep."""
    if target.exists() and not (target / "sweep.json").is_file():
        raise OutputError(target, None, "exists and is not a saved sweep; refusing to replace it")


#: Why a stored trace's tables cannot be set.
_READ_FROM_SWEEP = "a stored trace's tables are read from its sweep; copy it with sweep.trace(...) to change them"


class StoredTrace(Trace):
    """The trace of one sweep cell whose tables are read from the sweep's folder when used.

    ``conversation`` and ``settings`` are in memory; ``steps`` and ``compactions`` come from the
    sweep, which keeps the tables of the last few cells read; ``engine_events`` are read from the
    sweep's folder each time they are asked for.
    Equal to ``sweep.trace(...)`` of its cell; the tables are shared, so never modify them.
    """

    def __init__(self, sweep: Sweep, cell: Cell) -> None:
        source = sweep._sources[sweep._cells[cell]]
        self.sweep, self.cell = sweep, cell
        self.conversation = sweep._conversations[cell.conversation_id]
        self.settings = sweep._settings_of(source, cell)

    @property
    def steps(self) -> pd.DataFrame:
        return self.sweep._cell_trace(self.cell).steps

    @steps.setter
    def steps(self, value: pd.DataFrame) -> None:
        raise AttributeError(_READ_FROM_SWEEP)

    @property
    def compactions(self) -> pd.DataFrame:
        return self.sweep._cell_trace(self.cell).compactions

    @compactions.setter
    def compactions(self, value: pd.DataFrame) -> None:
        raise AttributeError(_READ_FROM_SWEEP)

    @property
    def engine_events(self) -> list[dict[str, Any]]:
        return self.sweep._engine_events(self.cell)

    @engine_events.setter
    def engine_events(self, value: list[dict[str, Any]]) -> None:
        raise AttributeError(_READ_FROM_SWEEP)

    def losses(self, *, anchors: bool = True) -> Losses | None:
        """:meth:`Sweep.losses` of this cell."""
        return self.sweep.losses(self.cell.conversation_id, self.cell.setting, anchors=anchors)

    def lost_and_counted(self) -> tuple[Losses, pd.DataFrame] | None:
        """:meth:`Sweep.lost_and_counted` of this cell."""
        return self.sweep._kept_lost_and_counted(self.cell)


def _split_version_1(path: Path) -> SourceFolder:
    """A version-1 sweep's concatenated tables, split into a temporary folder of per-replay files."""
    folder = SourceFolder()
    for name in ("steps", "compactions"):
        try:
            table = restore(pq.read_table(path / f"{name}.parquet").to_pandas())
        except (OSError, ValueError) as error:
            raise InputError(path / f"{name}.parquet", None, f"not a saved zett_lab sweep table ({error})") from error
        for sid, part in table.groupby("source_id", sort=False):
            folder.write(str(sid), {name: part.drop(columns="source_id").reset_index(drop=True)})
    return folder


def _region_document(where: Region) -> dict[str, Any]:
    return {
        name: getattr(where, name)
        for name in ("max_tokens", "keep_recent_tokens", "m_lo", "m_hi", "k_lo", "k_hi", "reason")
    }


_LEADING = [
    "conversation_id",
    "engine",
    "summarizer",
    "max_tokens",
    "keep_recent_tokens",
    "context_window",
    "max_tokens_share",
    "keep_recent_share",
]
_TRAILING = [
    "engine_identity",
    "summarizer_identity",
    "replayed",
    "shared_steps",
    "model_calls",
    "cache_hits",
    "seconds",
    "worker",
    "error",
]
#: Columns that describe how a cell was computed, not what the engine did (they differ between executors).
RUN_COLUMNS = ("replayed", "shared_steps", "model_calls", "cache_hits", "seconds", "worker")
#: Count columns of the results table besides the catalogue's counts (:func:`_int_result_columns`).
_INT_RESULT_COLUMNS = {
    "max_tokens",
    "keep_recent_tokens",
    "context_window",
    "messages",
    "steps",
    "compactions_applied",
    "model_calls",
    "cache_hits",
    "primary_cached_input_tokens",
    "primary_uncached_input_tokens",
    "primary_output_tokens",
    "summary_calls",
    "compactions",
    "attempts",
    "probes",
    "shared_steps",
}


def _int_result_columns() -> set[str]:
    """The results table's count columns: its own, and every count the metric catalogue registers."""
    counts = {column.name for entry in metrics() for column in entry.columns("conversation") if column.type == "count"}
    return _INT_RESULT_COLUMNS | counts | {entry.name for entry in metrics() if entry.type == "count"}


_TEXT_RESULT_COLUMNS = (
    "error",
    "summary_error",
    "engine",
    "engine_identity",
    "summarizer",
    "summarizer_identity",
    "conversation_id",
    "worker",
)


def results_frame(rows: Sequence[dict[str, Any]], relative: bool) -> pd.DataFrame:
    """The results table from cell rows: setting columns first, run columns last, nullable types."""
    columns: list[str] = [
        c for c in _LEADING if relative or c not in ("context_window", "max_tokens_share", "keep_recent_share")
    ]
    seen = set(columns) | set(_TRAILING)
    for row in rows:
        for key in row:
            if key not in seen:
                columns.append(key)
                seen.add(key)
    columns += _TRAILING
    table = pd.DataFrame(list(rows), columns=columns)
    counts = _int_result_columns()
    for column in table.columns:
        if column in counts:
            table[column] = pd.array([None if is_missing(v) else int(v) for v in table[column]], dtype="Int64")
        elif column == "replayed":
            table[column] = pd.array([None if is_missing(v) else bool(v) for v in table[column]], dtype="boolean")
        elif column in _TEXT_RESULT_COLUMNS:
            table[column] = table[column].astype(object).where(table[column].notna(), None)
        elif table[column].dtype == object:
            converted = pd.to_numeric(table[column], errors="coerce")
            if converted.notna().sum() == table[column].notna().sum():
                table[column] = converted.astype("float64")
    return table


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)
