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

from ..errors import InputError
from ..progress import Progress, ProgressEvent
from . import agents, neutral, zett  # noqa: F401  (reader modules register themselves, specific formats first)
from .conversation import Conversation
from .registry import HEAD_BYTES, Reader, detect, file_kind, read_file, read_with, readers, register

__all__ = ["HEAD_BYTES", "Conversation", "Reader", "detect", "load", "load_all", "read_file", "readers", "register"]


def load_all(
    path: str | Path | Iterable[str | Path], *, progress: bool | Callable[[ProgressEvent], None] = False
) -> list[Conversation]:
    """Every conversation under a path: a file, a directory (searched recursively), or several paths.

    In a directory, files no reader recognises are skipped; a file that is
    recognised but broken raises its :class:`InputError`. ``progress`` shows a bar with an
    ETA over the files (or calls a function after each), for imports of many files.
    """
    files = _files(path)
    tracker = Progress(total=len(files), label="load", show=progress, unit="file")
    conversations: list[Conversation] = []
    found: dict[Path, int] = {}
    try:
        for child, folder in files:
            if folder is None:
                conversations.extend(read_file(child))
            else:
                found.setdefault(folder, 0)
                try:
                    reader = detect(child)
                except InputError:
                    tracker.advance(1)
                    continue
                read = read_with(reader, child)
                found[folder] += len(read)
                conversations.extend(read)
            tracker.advance(1)
    finally:
        tracker.close()
    for folder, count in found.items():
        if not count:
            raise InputError(folder, None, "no recorded conversations found in this directory")
    return conversations


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
