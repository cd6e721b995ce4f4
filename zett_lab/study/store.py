"""A sweep's storage: each distinct replay's tables in a folder, read back one cell at a time; a saved sweep.

A sweep writes each distinct replay's step and compaction tables (and its loss tables) to a
folder as it arrives (:class:`~zett_lab.study.sources.SourceFolder`), so the memory a sweep holds
is its results table, not its traces. :class:`SweepStore` knows which replay each cell uses and
reads a cell's tables back when asked, keeping the last few; :meth:`SweepStore.write` and
:meth:`SweepStore.read` are the saved folder's layout. The results table and what a cell is
(:class:`~zett_lab.study.results.Sweep`) are not its business.
"""

from __future__ import annotations

import json
import shutil
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InputError, OutputError
from ..load.conversation import Conversation
from ..replay.schema import FAILURE_COLUMNS, TraceRow
from ..replay.setting import Setting, TraceSettings
from ..replay.trace import Trace, conversation_document, conversation_from_document, failure_counts
from .grid import Cell
from .regions import Region, derive
from .sources import RUN_AGAIN, Source, SourceFolder, restore, storable, write_parquet

FORMAT = "zett-lab-sweep"
#: 2: one Parquet file per replay table under ``sources/`` (1: all replays in one steps/compactions file).
VERSION = 2
#: Traces a sweep keeps read back in memory: at most this many, and (beyond the last one read) at most
#: :data:`SUMMARY_CHARS_KEPT` characters of summary text in all (an observation mask's replay holds ~50 M).
TRACES_KEPT = 8
SUMMARY_CHARS_KEPT = 20_000_000
#: Kept tables (``losses-*`` and the like, small) a sweep holds read back, by replay and table.
KEPT_TABLES_KEPT = 64
#: The columns of ``cells.parquet``: a cell by its labels and limits, and the replay it uses.
CELL_COLUMNS = ["conversation_id", "summarizer", "engine", "max_tokens", "keep_recent_tokens", "source_id"]


@dataclass(frozen=True)
class SweepStore:
    """The replays of a sweep: its conversations, each distinct replay (tables in a folder) and the replay each
    complete cell uses (``cells``); ``path`` is the folder it was read from (None for a sweep run here)."""

    conversations: dict[str, Conversation] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)
    cells: dict[Cell, str] = field(default_factory=dict)
    path: Path | None = None
    #: Cells' traces, oldest first, each with its characters of summary text.
    read_back: OrderedDict[Cell, tuple[Trace, int]] = field(default_factory=OrderedDict, repr=False)
    #: Distinct replays' tables as read from the folder (by ``source_id``), oldest first: the cells that share a
    #: replay are derived from one reading of it, so a report reads each replay once, not once per cell.
    replays_read: OrderedDict[str, tuple[Trace, int]] = field(default_factory=OrderedDict, repr=False)
    #: Kept tables read back (by ``source_id`` and table), oldest first.
    kept_read: OrderedDict[tuple[str, str], pd.DataFrame | None] = field(default_factory=OrderedDict, repr=False)

    def source(self, cell: Cell) -> Source:
        """The replay a complete cell uses."""
        return self.sources[self.cells[cell]]

    def kept(self, cell: Cell, table: str) -> pd.DataFrame | None:
        """A table the sweep kept of a cell's replay (``losses-*``, ...; the caller's own copy); None when it kept
        none. Read once per replay while the last :data:`KEPT_TABLES_KEPT` tables are held."""
        source = self.source(cell)
        key = (source.source_id, table)
        if key not in self.kept_read:
            self.kept_read[key] = source.folder.read(source.source_id, table)
            while len(self.kept_read) > KEPT_TABLES_KEPT:
                self.kept_read.popitem(last=False)
        self.kept_read.move_to_end(key)
        held = self.kept_read[key]
        return None if held is None else held.copy()

    def settings(self, cell: Cell) -> TraceSettings:
        """A cell's trace settings (as :func:`~zett_lab.study.regions.derive` gives them for a shared replay)."""
        return self.source(cell).settings.derive(cell.setting)

    def tables(self, cell: Cell) -> Trace:
        """One cell's tables read from the folder (the last few are kept; shared, so never modified).

        Without the engine's events (:meth:`engine_events`): only cross-checks read them, and their
        summaries repeat the compaction rows'.
        """
        held = self.read_back.get(cell)
        trace = held[0] if held is not None else None
        if trace is None:
            source = self.source(cell)
            trace = self._replay_read(source)
            if trace.setting != cell.setting:
                trace = derive(trace, cell.setting.max_tokens, cell.setting.keep_recent_tokens, source.region)
            self.read_back[cell] = (trace, _summary_chars(trace))
        _keep_newest(self.read_back, cell)
        return trace

    def _replay_read(self, source: Source) -> Trace:
        """A distinct replay's tables read from the folder (the last few are kept)."""
        held = self.replays_read.get(source.source_id)
        if held is None:
            steps = source.folder.read(source.source_id, "steps")
            compactions = source.folder.read(source.source_id, "compactions")
            if steps is None or compactions is None:
                raise InputError(
                    source.folder.path, f"replay {source.source_id}", "its tables are missing from the sweep folder"
                )
            trace = Trace(
                conversation=self.conversations[source.conversation_id],
                steps=steps,
                compactions=compactions,
                settings=source.settings,
            )
            held = self.replays_read[source.source_id] = (trace, _summary_chars(trace))
        _keep_newest(self.replays_read, source.source_id)
        return held[0]

    def trace(self, cell: Cell) -> Trace:
        """A cell's trace the caller may change (its own copy of the tables)."""
        trace = self.tables(cell)
        return Trace(
            conversation=trace.conversation,
            steps=trace.steps.copy(),
            compactions=trace.compactions.copy(),
            settings=trace.settings,
            engine_events=self.engine_events(cell),
        )

    def engine_events(self, cell: Cell) -> list[TraceRow]:
        """The engine's events of a cell's replay (a cell derived from it has the same ones), read when asked."""
        return list(self.source(cell).engine_events)

    # --- a saved sweep ---------------------------------------------------------------------------------

    def write(
        self,
        folder: Path,
        results: pd.DataFrame,
        config: Mapping[str, object],
        labels: Callable[[Setting], tuple[str, str]],
    ) -> None:
        """Write a sweep into an empty ``folder``: ``results.parquet``, ``cells.parquet`` (each cell by its labels,
        from ``labels``), ``sources/`` (each replay's tables and engine events) and ``sweep.json``."""
        pq.write_table(pa.Table.from_pandas(storable(results), preserve_index=False), folder / "results.parquet")
        cells = pd.DataFrame(
            [
                (cid, *labels(setting), setting.max_tokens, setting.keep_recent_tokens, sid)
                for (cid, setting), sid in self.cells.items()
            ],
            columns=CELL_COLUMNS,
        )
        pq.write_table(pa.Table.from_pandas(cells, preserve_index=False), folder / "cells.parquet")
        saved = SourceFolder(folder)
        for source in self.sources.values():
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
            "config": config,
            "sources": {
                sid: {
                    "conversation_id": src.conversation_id,
                    "settings": src.settings.record(),
                    "region": _region_document(src.region),
                    "failures": source_failures(src).to_dict("records"),
                }
                for sid, src in self.sources.items()
            },
            "conversations": {cid: conversation_document(c) for cid, c in self.conversations.items()},
        }
        (folder / "sweep.json").write_text(json.dumps(document, default=_json_default), encoding="utf-8")

    @classmethod
    def read(cls, path: Path) -> tuple[pd.DataFrame, dict[str, Any], SweepStore, pd.DataFrame]:
        """A saved sweep: its results table, its config, its store (without cells) and its cells by label
        (:data:`CELL_COLUMNS`; the Sweep names them by Setting)."""
        try:
            document = json.loads((path / "sweep.json").read_text(encoding="utf-8"))
            results = restore(pq.read_table(path / "results.parquet").to_pandas())
            cells = pq.read_table(path / "cells.parquet").to_pandas()
        except (OSError, ValueError, KeyError) as error:
            raise InputError(path, None, f"not a saved zett_lab sweep ({type(error).__name__}: {error})") from error
        where = path / "sweep.json"
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            raise InputError(where, "field 'format'", f"expected {FORMAT!r}")
        _check_document(where, document)
        folder = SourceFolder(path) if document.get("version") == VERSION else _split_version_1(path)
        try:
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
            conversations = {cid: conversation_from_document(doc) for cid, doc in document["conversations"].items()}
        except InputError:
            raise
        except KeyError as error:
            raise InputError(where, f"field {error.args[0]!r}", f"missing; {RUN_AGAIN}") from None
        except (TypeError, ValueError, AttributeError) as error:
            raise InputError(where, None, f"a field has the wrong shape ({error}); {RUN_AGAIN}") from None
        return results, document["config"], cls(conversations, sources, path=path), cells


#: The fields of sweep.json every reader of a saved sweep needs, with their types.
_DOCUMENT_FIELDS = {"config": dict, "sources": dict, "conversations": dict}
_CONFIG_FIELDS = {
    "conversations": list,
    "max_tokens": list,
    "keep_recent_tokens": list,
    "summarizers": list,
    "summarizer_identities": list,
}


def _check_document(where: Path, document: dict[str, Any]) -> None:
    """One :class:`InputError` naming the first field of sweep.json that is missing or of the wrong type."""
    for fields, holder, prefix in (
        (_DOCUMENT_FIELDS, document, ""),
        (_CONFIG_FIELDS, document.get("config"), "config."),
    ):
        for name, kind in fields.items():
            value = holder.get(name) if isinstance(holder, dict) else None
            if not isinstance(value, kind):
                found = "missing" if not isinstance(holder, dict) or name not in holder else f"a {type(value).__name__}"
                raise InputError(
                    where, f"field '{prefix}{name}'", f"expected a {kind.__name__}, found {found}; {RUN_AGAIN}"
                )
    config = document["config"]
    if len(config["summarizers"]) != len(config["summarizer_identities"]):
        raise InputError(where, "field 'config.summarizer_identities'", f"not one per summarizer; {RUN_AGAIN}")
    for sid, info in document["sources"].items():
        if not isinstance(info, dict):
            raise InputError(where, f"field 'sources.{sid}'", f"expected an object; {RUN_AGAIN}")
        for name in ("conversation_id", "region", "settings"):
            if name not in info:
                raise InputError(where, f"field 'sources.{sid}.{name}'", f"missing; {RUN_AGAIN}")


def _keep_newest(read: OrderedDict[Any, tuple[Trace, int]], newest: Any) -> None:
    """Mark ``newest`` as the last used; drop the oldest beyond :data:`TRACES_KEPT` traces or
    :data:`SUMMARY_CHARS_KEPT` characters of summary text (the newest always stays)."""
    read.move_to_end(newest)
    chars = 0
    for n, older in enumerate(reversed(list(read))):  # the newest first
        chars += read[older][1]
        if n and (n >= TRACES_KEPT or chars > SUMMARY_CHARS_KEPT):
            del read[older]


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


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return str(value)
