"""Readers turn recorded sessions into :class:`~zett_lab.load.conversation.Conversation` objects.

Formats are recognised by content, never by file name: each :class:`Reader`
looks at the first bytes of a file and says whether it is its format. A reader
module registers itself with :func:`register`; :func:`load` and :func:`load_all`
dispatch to the first reader that recognises a file.

Example::

    >>> conversations = load_all("fixtures/")          # doctest: +SKIP
    >>> one = load("fixtures/sessions.sqlite", session="refactor-auth")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypedDict

from ..errors import InputError, SkippedFileWarning, warn
from ..progress import Progress, ProgressEvent
from . import agents, neutral, zett  # noqa: F401  (reader modules register themselves, specific formats first)
from .conversation import Conversation
from .registry import (
    HEAD_BYTES,
    NotRecordedData,
    Reader,
    detect,
    file_kind,
    read_file,
    read_with,
    readers,
    register,
)

__all__ = [
    "HEAD_BYTES",
    "Conversation",
    "FileOutcome",
    "Reader",
    "SkippedFile",
    "detect",
    "load",
    "load_all",
    "read_file",
    "readers",
    "register",
]


class SkippedFile(TypedDict):
    """A file of an input folder that looked like recorded data but could not be read, and why: a fact of the
    study made from that folder (a sweep keeps it, a report lists it), as plain data."""

    path: str
    reason: str


#: Called once per file of a folder with the file, why it was not read (None: it was), and whether that
#: failure counts (True: it looked like recorded data but could not be read; False: not recorded data).
FileOutcome = Callable[[Path, "str | None", bool], None]


def load_all(
    path: str | Path | Iterable[str | Path],
    *,
    progress: bool | Callable[[ProgressEvent], None] = False,
    on_file: FileOutcome | None = None,
) -> list[Conversation]:
    """Every conversation under a path: a file, a directory (searched recursively), or several paths.

    A file named directly must be readable (else its :class:`InputError`). A folder's files are each
    read or passed over with the reason, given to ``on_file(file, reason, unreadable)``
    (:data:`FileOutcome`): a file that looks like recorded data (JSON, JSON lines, SQLite) but that no
    reader takes, or that is broken, is *unreadable*; notes, source code, notebooks and web pages are
    *not recorded data*; a database's probes sidecar counts as read. Without ``on_file``, one
    :class:`~zett_lab.errors.SkippedFileWarning` per unreadable file. A folder with nothing readable
    is an :class:`InputError`. ``progress`` shows a bar with an ETA over the files (or calls a function
    after each), for imports of many files.
    """
    files = _files(path)
    tracker = Progress(total=len(files), label="load", show=progress, unit="file")
    conversations: list[Conversation] = []
    found: dict[Path, int] = {}
    passed_over: dict[Path, list[str]] = {}
    told = on_file or _warn_unreadable
    try:
        for child, folder in files:
            if folder is None:
                conversations.extend(read_file(child))
                told(child, None, False)
            elif _is_sidecar(child):
                told(child, None, False)  # read with its database
            else:
                found.setdefault(folder, 0)
                try:
                    read = read_with(detect(child), child)
                except InputError as error:
                    reason = error.problem if error.path == str(child) and error.where is None else str(error)
                    if error.path == str(child) and error.where is not None:
                        reason = f"{error.where}: {error.problem}"
                    passed_over.setdefault(folder, []).append(f"{child.relative_to(folder)}: {reason}")
                    told(child, reason, not isinstance(error, NotRecordedData))
                    tracker.advance(1)
                    continue
                found[folder] += len(read)
                conversations.extend(read)
                told(child, None, False)
            tracker.advance(1)
    finally:
        tracker.close()
    for folder, count in found.items():
        if not count:
            reasons = passed_over.get(folder, [])
            listed = "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
            why = f" ({len(reasons)} file(s) not read: {listed})" if reasons else ""
            raise InputError(folder, None, f"no recorded conversations found in this directory{why}")
    return conversations


def _warn_unreadable(path: Path, reason: str | None, unreadable: bool) -> None:
    if reason is not None and unreadable:
        warn(f"skipped {path}: {reason}", SkippedFileWarning)


def _is_sidecar(path: Path) -> bool:
    """A probes sidecar beside the recording it belongs to (``<stem>.probes.json``, read with that file)."""
    if not path.name.endswith(".probes.json"):
        return False
    stem = path.name[: -len(".probes.json")]
    return any(sibling != path and sibling.stem == stem for sibling in path.parent.iterdir())


def _files(path: str | Path | Iterable[str | Path]) -> list[tuple[Path, Path | None]]:
    """The files to read: ``(file, None)`` when named as such, ``(file, folder)`` for a folder's files."""
    if not isinstance(path, (str, Path)):
        return [item for part in path for item in _files(part)]
    path = Path(path)
    if file_kind(path) != "directory":
        return [(path, None)]
    try:
        detect(path)
    except InputError as error:
        if "unknown format" not in error.problem:
            raise
    else:
        return [(path, None)]  # a folder some reader takes as a whole (a zettcode tree)
    children: list[tuple[Path, Path | None]] = [
        (child, path)
        for child in sorted(path.rglob("*"))
        if child.is_file() and not any(part.startswith(".") for part in child.relative_to(path).parts)
    ]
    if not children:
        raise InputError(path, None, "no recorded conversations found in this directory")
    return children


def load(path: str | Path, session: str | None = None) -> Conversation:
    """One conversation: the given session, or the only one in the file.

    Raises :class:`InputError` naming the file when the session does not exist,
    or when the file holds several and none was chosen (the message lists them).
    """
    conversations = load_all(path)
    if session is not None:
        for conversation in conversations:
            if conversation.id == session:
                return conversation
        known = ", ".join(c.id for c in conversations[:20])
        raise InputError(path, f"session {session!r}", f"no such session; the file has: {known}")
    if len(conversations) > 1:
        known = ", ".join(c.id for c in conversations[:20])
        raise InputError(
            path, None, f"holds {len(conversations)} conversations ({known}); pass session= or use load_all"
        )
    return conversations[0]
