"""The registry of input formats: each :class:`Reader` recognises its files by content, never by name.

A reader module registers itself with :func:`register` when it is imported; :mod:`zett_lab.load`
imports every built-in reader, so the registry is complete once the package is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .conversation import Conversation

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
    return [*_READERS, *_FALLBACK_READERS]


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
