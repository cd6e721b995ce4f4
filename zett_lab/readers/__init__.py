"""Readers turn recorded sessions into :class:`~zett_lab.conversations.Conversation` objects.

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
from dataclasses import dataclass
from pathlib import Path

from ..conversations import Conversation
from ..errors import InputError

#: How many leading bytes a reader gets to recognise its format.
HEAD_BYTES = 64 * 1024


@dataclass(frozen=True)
class Reader:
    """One input format: a name, a content sniffer, and a reader.

    ``sniff(path, head)`` gets the first :data:`HEAD_BYTES` of a file (or ``b""``
    for a directory) and returns True when the file is this format. ``read(path)``
    returns every conversation in it, validated.
    """

    name: str
    description: str
    sniff: Callable[[Path, bytes], bool]
    read: Callable[[Path], list[Conversation]]


_READERS: list[Reader] = []
_FALLBACK_READERS: list[Reader] = []


def register(reader: Reader, *, fallback: bool = False) -> Reader:
    """Add a reader. Specific formats are asked in registration order; fallbacks
    (catch-all formats such as plain chat-message JSON) only after all of them."""
    (_FALLBACK_READERS if fallback else _READERS).append(reader)
    return reader


def readers() -> list[Reader]:
    """Every registered reader, in the order they are asked."""
    _load_builtin_readers()
    return [*_READERS, *_FALLBACK_READERS]


def _load_builtin_readers() -> None:
    from . import (  # noqa: F401  (modules register themselves on import)
        agents,  # noqa: F401
        neutral,
        zett,
    )


def detect(path: str | Path) -> Reader:
    """The reader for a file or directory; an :class:`InputError` listing known formats if none fits."""
    path = Path(path)
    if not path.exists():
        raise InputError(path, None, "no such file or directory")
    head = b""
    if path.is_file():
        try:
            with path.open("rb") as handle:
                head = handle.read(HEAD_BYTES)
        except OSError as error:
            raise InputError(path, None, f"cannot read: {error.strerror or error}") from error
    for reader in readers():
        if reader.sniff(path, head):
            return reader
    known = ", ".join(reader.name for reader in readers())
    raise InputError(path, None, f"unknown format; zett_lab reads: {known}")


def read_file(path: str | Path) -> list[Conversation]:
    """Every conversation in one file (or one format directory, such as a zettcode tree)."""
    path = Path(path)
    return detect(path).read(path)


def load_all(path: str | Path | Iterable[str | Path]) -> list[Conversation]:
    """Every conversation under a path: a file, a directory (searched recursively), or several paths.

    In a directory, files no reader recognises are skipped; a file that is
    recognised but broken raises its :class:`InputError`.
    """
    if not isinstance(path, (str, Path)):
        return [c for item in path for c in load_all(item)]
    path = Path(path)
    if path.is_file():
        return read_file(path)
    if not path.exists():
        raise InputError(path, None, "no such file or directory")
    try:
        return read_file(path)
    except InputError as error:
        if "unknown format" not in error.problem:
            raise
    conversations: list[Conversation] = []
    for child in sorted(path.rglob("*")):
        if not child.is_file() or any(part.startswith(".") for part in child.relative_to(path).parts):
            continue
        try:
            reader = detect(child)
        except InputError:
            continue
        conversations.extend(reader.read(child))
    if not conversations:
        raise InputError(path, None, "no recorded conversations found in this directory")
    return conversations


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
        raise InputError(path, None, f"holds {len(conversations)} conversations ({known}); pass session= or use load_all")
    return conversations[0]
