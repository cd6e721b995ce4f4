"""What every ``zett-lab`` command shares: reading its inputs, refusing its output, the cluster and cache it
uses, and the final lines it prints (what was read and skipped, how long it took, what failed)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InputError, SettingError
from ...files import check_output, refuse_inputs
from ..arguments import EXIT_FAILURES, EXIT_OK, FORCE, PROG

if TYPE_CHECKING:
    import pandas as pd

    from ...load import SkippedFile
    from ...load.conversation import Conversation
    from ...study.results import Sweep
    from ...summarizers import SummaryCache


class Reading:
    """What a command's inputs gave: the files read, and the files of folders not read, each with why.

    Each file not read is named on stderr as it is passed over; the command's final line counts them;
    a run that skipped a file that looked like recorded data (JSON, JSON lines, SQLite) but could not
    be read exits 1 unless ``--skip-unreadable`` accepts it; those files (:attr:`skipped`) go into the
    command's outputs.
    """

    def __init__(self, accept_skipped: bool) -> None:
        self.read = 0
        self.skipped: list[SkippedFile] = []
        self.not_data: list[Path] = []
        self.accept_skipped = accept_skipped
        self._lines: list[str] = []

    def __call__(self, path: Path, reason: str | None, unreadable: bool) -> None:
        if reason is None:
            self.read += 1
        elif unreadable:
            self.skipped.append({"path": shown(path), "reason": one_line(reason)})
            self._lines.append(f"{PROG}: skipped {shown(path)}: {one_line(reason)}")
        else:
            self.not_data.append(path)
            self._lines.append(f"{PROG}: not read {shown(path)}: {one_line(reason)}")

    def name_passed_over(self) -> None:
        """Name every file not read, one line each, when the work starts (a run refused before says only why)."""
        for line in self._lines:
            print(line, file=sys.stderr)
        self._lines.clear()

    def counts(self) -> str:
        """``3 file(s) read, 1 skipped, 2 not recorded data (named above)``, as the final line says it."""
        parts = [f"{self.read} file(s) read"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.not_data:
            parts.append(f"{len(self.not_data)} not recorded data")
        return ", ".join(parts) + (" (named above)" if len(parts) > 1 else "")

    def exit_code(self, code: int) -> int:
        """``code``, or 1 when files were skipped and the run did not accept it (with one line saying so)."""
        if not self.skipped or self.accept_skipped or code != EXIT_OK:
            return code
        print(
            f"{PROG}: {len(self.skipped)} file(s) of the input folders could not be read (named above); "
            "pass --skip-unreadable to accept that",
            file=sys.stderr,
        )
        return EXIT_FAILURES


def shown(path: Path | str) -> str:
    """A path as printed: bytes that are not UTF-8 in a file name shown as escapes, never an encoding error."""
    return os.fsdecode(path).encode("utf-8", "backslashreplace").decode("utf-8")


def one_line(error: BaseException | str) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 600 else text[:597] + "..."


def load_conversations(
    paths: Sequence[str], sessions: Sequence[str] | None = None, progress: bool = False, reading: Reading | None = None
) -> list[Conversation]:
    from ...load import load_all

    conversations = load_all([Path(p) for p in paths], progress=progress, on_file=reading)
    if sessions:
        known = {c.id for c in conversations}
        missing = [s for s in sessions if s not in known]
        if missing:
            listing = ", ".join(sorted(known)[:20])
            raise InputError(paths[0], f"session {missing[0]!r}", f"no such session; found: {listing}")
        conversations = [c for c in conversations if c.id in set(sessions)]
    return conversations


def checked_output(
    path: str, inputs: Sequence[str | os.PathLike[str]], args: argparse.Namespace, *, folder: bool = False
) -> Path:
    """The output path (a folder when ``folder``), refused (before any work) when it is an input, exists without
    --force, or exists as anything else than a file (a folder) -- see :func:`~zett_lab.files.check_output`.

    Folders of recordings among ``inputs`` are left to the check after loading (their files that
    were read count, not the folder); a saved sweep is read as a whole. The probes sidecars of the
    input files and the summary cache the command will open count already, before anything is read.
    """
    from ...summarizers.cache import cache_file

    files = _known_inputs(inputs)
    if not getattr(args, "no_cache", True) and isinstance(cache := cache_file(), Path):
        files.append(cache)
    return check_output(path, files, overwrite=args.force, force_hint=FORCE, folder=folder)


def _known_inputs(inputs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """What of ``inputs`` is known before they are read: the files, their probes sidecars, and saved sweeps."""
    from ...load.conversation import probes_sidecar_path

    files = [p for p in map(Path, inputs) if not p.is_dir() or is_sweep(p)]
    return files + [s for p in files if p.is_file() and (s := probes_sidecar_path(p)).is_file()]


def input_files(conversations: Sequence[Conversation], cache: SummaryCache | bool) -> list[Path]:
    """Every file a command reads: the conversations' files and the summary cache file."""
    path = getattr(cache, "path", None)
    return [f for c in conversations for f in c.input_files()] + ([Path(path)] if isinstance(path, Path) else [])


#: Seconds ``--scheduler`` waits for the scheduler to answer.
SCHEDULER_TIMEOUT = 20


@contextlib.contextmanager
def scheduler(address: str | None) -> Iterator[Executor | None]:
    """The executor of the dask.distributed cluster at ``address`` while the command runs (None: no address, so
    the local process pool). An unreachable or malformed address stops the command before any work."""
    if not address:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise SettingError(
            f"--scheduler {address}: dask.distributed is not installed; pip install 'zett-lab[dask]'"
        ) from None
    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT, set_as_default=False)
    except (OSError, ValueError, TimeoutError) as error:
        raise SettingError(
            f"--scheduler {address}: no dask scheduler answered ({one_line(error)}); give the address the "
            "scheduler prints (tcp://HOST:PORT), or leave --scheduler out to run on this machine"
        ) from None
    try:
        yield client.get_executor()
    finally:
        with contextlib.suppress(Exception):  # the results are in; a scheduler gone by now changes nothing
            client.close()


def open_cache(args: argparse.Namespace, inputs: Sequence[str | os.PathLike[str]]) -> SummaryCache | bool:
    """The summary cache the command uses (opened now, so a bad cache stops it before any work), or False.

    A cache file that is one of ``inputs`` is refused before it is opened: the cache is written to.
    """
    if args.no_cache:
        return False
    from ...summarizers import SummaryCache
    from ...summarizers.cache import ELSEWHERE_CLI, cache_file

    if isinstance(path := cache_file(), Path):
        refuse_inputs(path, _known_inputs(inputs), choose=ELSEWHERE_CLI)
    return SummaryCache()


def report_failures(counts: pd.DataFrame) -> int:
    """One stderr line per distinct cause of failure; the exit code for them."""
    for row in counts.itertuples(index=False):
        print(f"{PROG}: {row.count} {row.what}(s) failed ({row.summarizer}): {row.cause}", file=sys.stderr)
    return EXIT_FAILURES if len(counts) else EXIT_OK


def took(started: float) -> str:
    """Wall time since ``started``, as the final line of a command says it."""
    seconds = time.perf_counter() - started
    return f"{seconds:.1f} s" if seconds < 120 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def work_done(result: Sweep) -> str:
    """What a sweep ran: cells, replays (forked), cells answered by another replay, summary calls."""
    c = result.config
    return (
        f"{len(result.results)} cells: {c.get('replays', 0)} replays ({c.get('forked', 0)} forked), "
        f"{c.get('reused', 0)} proven identical to one, {c.get('model_calls', 0)} summary calls"
    )


def check_summarizers(specs: Sequence[str]) -> None:
    """Fail fast (before any replay) on an unknown summarizer spec or a missing key."""
    from ...summarizers import summarizer

    for spec in specs:
        summarizer(spec)


def is_sweep(path: Path) -> bool:
    """A sweep saved by ``zett-lab sweep`` / ``Sweep.save``: a folder holding sweep.json."""
    return path.is_dir() and (path / "sweep.json").is_file()
