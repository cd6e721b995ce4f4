"""Where a sweep keeps each distinct replay's tables: one Parquet file per table, written as results arrive."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..collector import collector_paused
from ..errors import InputError
from ..records import is_missing
from ..replay.schema import TraceRow
from ..replay.setting import TraceSettings
from ..summarizers.offline.selection import remember_lines, remembered_lines
from .regions import Region

#: Loss tables kept per replay (the frames of :class:`~zett_lab.measure.Losses`). A sweep measures
#: with ``anchors=False``: that table (one row per span anchor per attempt, by far the largest)
#: is kept empty and measured again when asked for.
LOSS_TABLES = ("compactions", "anchors", "conversation", "probes", "decay", "updates")
#: What a report keeps of the per-anchor table, kept per replay beside the loss tables: the rows it lists
#: (:meth:`~zett_lab.measure.losses.Losses.listed`: lost but needed, dropped constraints), and every row's flags counted (:func:`~zett_lab.measure.losses.measure_lost_and_counted`).
LOST_ANCHORS_TABLE, ANCHOR_COUNTS_TABLE = "lost-anchors", "anchor-counts"
#: What to do when a file of a sweep folder cannot be read.
RUN_AGAIN = "the sweep folder is damaged or incomplete; run the sweep again to rebuild it"


@dataclass(frozen=True, slots=True)
class TableWriter:
    """Writes a replay's tables into a sweep's folder; small and picklable, so a worker process on the
    same machine writes its replays itself and sends the driver none of their rows."""

    path: Path
    suffix: str

    def file(self, source_id: str, table: str) -> Path:
        return self.path / "sources" / f"{source_id}.{table}.{self.suffix}"

    def write(self, source_id: str, tables: dict[str, pd.DataFrame]) -> None:
        for name, table in tables.items():
            if self.suffix == "pkl":
                table.to_pickle(self.file(source_id, name))
            else:
                write_parquet(table, self.file(source_id, name))

    def events_file(self, source_id: str) -> Path:
        """Where a replay's engine events are kept: JSON in a saved sweep's folder; in a sweep's own temporary one a
        pickle, like its tables (a long session's mask replays' events hold a hundred megabytes of summaries,
        which its workers spent a tenth of their measuring on writing as JSON)."""
        kind = "pickle" if self.suffix == "pkl" else "json"  # (not .pkl: the tables are every *.pkl of a replay)
        return self.path / "sources" / f"{source_id}.engine-events.{kind}"

    def write_events(self, source_id: str, events: list[TraceRow]) -> None:
        """The engine's own compaction events of a replay (their summaries can be large: kept on disk too)."""
        if self.suffix == "pkl":
            with open(self.events_file(source_id), "wb") as handle:
                pickle.dump(events, handle, protocol=pickle.HIGHEST_PROTOCOL)
        else:
            self.events_file(source_id).write_text(json.dumps(events), encoding="utf-8")

    def index_file(self, fingerprint: str, what: str = "index") -> Path:
        """Where a conversation's built anchor index (or other work its units share: ``what``, e.g. ``"lines"``)
        waits for the workers that need it (:meth:`write_index`)."""
        return self.path / "indexes" / f"{fingerprint}.{what}.pkl"

    def claim_index(self, fingerprint: str, what: str = "index") -> bool:
        """Whether this caller is the first to ask (and so builds the conversation's index for the others)."""
        path = self.index_file(fingerprint, what)
        path.parent.mkdir(exist_ok=True)
        try:
            os.close(os.open(path.with_suffix(".claimed"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def write_index(self, fingerprint: str, payload: bytes, what: str = "index") -> None:
        """Keep a conversation's built anchor index (:meth:`~zett_lab.measure.message_index.ConversationIndex.built`,
        pickled: :func:`~zett_lab.study.kept_indexes.pickled`, the bytes a kept index holds too) for the workers:
        each takes it instead of building its own. Written whole, then renamed: a worker reads all of it or finds
        none."""
        path = self.index_file(fingerprint, what)
        path.parent.mkdir(exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(payload)
        os.replace(partial, path)

    def read_index(self, fingerprint: str, what: str = "index") -> dict[Any, Any] | None:
        """The built index :meth:`write_index` kept for a conversation, None when there is none (yet)."""
        try:
            with open(self.index_file(fingerprint, what), "rb") as handle, collector_paused():
                built: dict[Any, Any] = pickle.load(handle)
        except FileNotFoundError:
            return None
        return built

    def take_lines(self, fingerprint: str) -> None:
        """Take the items of a conversation's lines another worker's anchors summarizer extracted, when it has left
        them (:meth:`give_lines`): the same values extracting them gives
        (:func:`~zett_lab.summarizers.offline.selection.remember_lines`)."""
        lines = self.read_index(fingerprint, "lines")
        if lines is not None:
            remember_lines(lines)

    def give_lines(self, fingerprint: str) -> None:
        """Leave the items of the lines this worker's anchors summarizer extracted for the conversation's later
        anchors units on other workers, when no other unit has (a long session's first extraction costs seconds)."""
        if self.claim_index(fingerprint, "lines"):
            self.write_index(fingerprint, pickle.dumps(remembered_lines(), protocol=pickle.HIGHEST_PROTOCOL), "lines")

    def release_index(self, fingerprint: str, what: str = "index") -> None:
        """Give up a claim (:meth:`claim_index`) whose index will not be written: nobody waits for it."""
        self.index_file(fingerprint, what).with_suffix(".claimed").unlink(missing_ok=True)

    def wait_index(self, fingerprint: str, timeout: float, what: str = "index") -> dict[Any, Any] | None:
        """:meth:`read_index`, waiting up to ``timeout`` seconds while another worker holds the claim to write it
        (building its own would spend the CPU again); None when nobody claimed it, or it did not come in time."""
        deadline = time.monotonic() + timeout
        claim = self.index_file(fingerprint, what).with_suffix(".claimed")
        while True:
            built = self.read_index(fingerprint, what)
            if built is not None or not claim.exists() or time.monotonic() > deadline:
                return built
            time.sleep(0.05)

    def remove_indexes(self) -> None:
        """Remove the kept indexes (the sweep is done; they are large, and a saved sweep keeps only tables)."""
        shutil.rmtree(self.path / "indexes", ignore_errors=True)


class SourceFolder:
    """A folder of per-replay tables: ``sources/<id>.<table>.<suffix>``.

    A sweep's own folder is temporary and holds pickles (exact and fast to write: a sweep writes
    one per replay as it arrives); it is removed when no sweep and no proven replay refers to it
    any more. A saved sweep's folder holds Parquet files and is never removed.
    """

    def __init__(self, path: Path | None = None) -> None:
        if path is None:
            self.path = Path(tempfile.mkdtemp(prefix="zett-lab-sweep-"))
            self._finalizer: weakref.finalize[..., Any] | None = weakref.finalize(self, shutil.rmtree, self.path, True)
            self.suffix = "pkl"
        else:
            self.path = Path(path)
            self._finalizer = None
            self.suffix = "parquet"
        (self.path / "sources").mkdir(parents=True, exist_ok=True)
        self.writer = TableWriter(self.path, self.suffix)

    def file(self, source_id: str, table: str) -> Path:
        return self.writer.file(source_id, table)

    def write(self, source_id: str, tables: dict[str, pd.DataFrame]) -> None:
        self.writer.write(source_id, tables)

    def write_events(self, source_id: str, events: list[TraceRow]) -> None:
        self.writer.write_events(source_id, events)

    def read_events(self, source_id: str) -> list[TraceRow]:
        path = self.writer.events_file(source_id)
        try:
            if self.suffix == "pkl":
                with open(path, "rb") as handle:
                    events = pickle.load(handle)
            else:
                events = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, EOFError, pickle.UnpicklingError) as error:
            raise InputError(
                path, None, f"cannot read this replay's engine events ({type(error).__name__}: {error}); {RUN_AGAIN}"
            ) from error
        if not isinstance(events, list):
            raise InputError(path, None, f"expected a list of engine events; {RUN_AGAIN}")
        return events

    def read(self, source_id: str, table: str) -> pd.DataFrame | None:
        path = self.file(source_id, table)
        if not path.exists():
            return None
        try:
            if self.suffix == "pkl":
                loaded = pd.read_pickle(path)
                assert isinstance(loaded, pd.DataFrame)
                return loaded
            return restore(pq.read_table(path).to_pandas())
        except (OSError, ValueError) as error:
            raise InputError(
                path, None, f"cannot read this sweep table ({type(error).__name__}: {error}); {RUN_AGAIN}"
            ) from error

    def tables(self, source_id: str) -> list[str]:
        """The tables held for one replay."""
        return sorted(path.name.split(".")[-2] for path in (self.path / "sources").glob(f"{source_id}.*.{self.suffix}"))


def write_parquet(table: pd.DataFrame, path: Path) -> None:
    """One table as Parquet (mixed-type text columns as strings; :func:`restore` reads it back)."""
    pq.write_table(pa.Table.from_pandas(storable(table), preserve_index=False), path)


@dataclass(slots=True)
class Source:
    """One distinct replay of a sweep: what it stands for and where its tables are.

    Not frozen: its ``failures`` are counted from its tables on first use and kept (:func:`~zett_lab.study.store.source_failures`).
    """

    source_id: str
    conversation_id: str
    region: Region
    settings: TraceSettings
    #: The engine's events when held in memory (a sweep saved before they were kept on disk); None: in ``folder``.
    held_events: list[TraceRow] | None
    folder: SourceFolder
    #: Failed summary calls and engine passes this replay made itself (rows a fork shares are its parent's);
    #: None until read (a sweep saved before it was kept: counted from the whole compactions table).
    failures: pd.DataFrame | None = None

    @property
    def engine_events(self) -> list[TraceRow]:
        """The engine's own ``COMPACTION_COMPLETED`` events of this replay (read from disk when used)."""
        return self.held_events if self.held_events is not None else self.folder.read_events(self.source_id)


def storable(table: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding mixed types become strings so Parquet can store them."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object:
            kinds = {type(v) for v in out[column] if not is_missing(v)}
            if len(kinds) > 1 or (kinds and not kinds <= {str}):
                if kinds <= {int, float, np.integer, np.floating, bool, np.bool_}:
                    continue
                out[column] = out[column].map(lambda v: None if is_missing(v) else str(v))
    return out


def restore(table: pd.DataFrame) -> pd.DataFrame:
    """Undo Parquet's string dtypes: text columns are plain objects with None, as they were written."""
    out = table.reset_index(drop=True)
    for column in out.columns:
        if isinstance(out[column].dtype, pd.StringDtype):
            out[column] = out[column].astype(object).where(out[column].notna(), None)
    return out
