"""The registry of input formats: each :class:`Reader` recognises its files by content, never by name.

A reader module registers itself with :func:`register` when it is imported; :mod:`zett_lab.load`
imports every built-in reader, so the registry is complete once the package is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..files import kind_of
from .conversation import Conversation
from .storable import MAX_NESTING, normalise

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
    """The reader for a file or directory; an :class:`InputError` saying what is wrong if none fits.

    Anything but a regular file or a directory (a FIFO, a device, a socket) is refused without
    being opened, so a FIFO never blocks and ``/dev/zero`` is never read.
    """
    path = Path(path)
    kind = file_kind(path)
    if kind not in ("file", "directory"):
        raise InputError(path, None, f"is a {kind}, not a file or folder; zett_lab reads recorded files and folders")
    head = b""
    if kind == "file":
        try:
            with path.open("rb") as handle:
                head = handle.read(HEAD_BYTES)
        except OSError as error:
            raise InputError(path, None, f"cannot read: {error.strerror or error}") from error
        if not head.strip():
            raise InputError(path, None, "the file is empty" if not head else "the file holds only blank space")
    for reader in readers():
        if reader.sniff(path, head):
            return reader
    known = ", ".join(reader.name for reader in readers())
    what = not_recorded_data(path, head)
    if what is not None:
        raise NotRecordedData(path, None, f"unknown format; zett_lab reads: {known} ({what})")
    raise InputError(path, None, f"unknown format; zett_lab reads: {known}")


class NotRecordedData(InputError):
    """A file no reader takes that is not recorded data at all (notes, source code, a notebook, a web page).

    In a folder it is named and passed over without failing the run; a file that looks like recorded
    data (JSON, JSON lines, SQLite) but that no reader takes is an :class:`InputError` that does.
    """


_SQLITE_MAGIC = b"SQLite format 3\x00"


def not_recorded_data(path: Path, head: bytes) -> str | None:
    """What a file no reader takes is, when it is not recorded data (None: it looks like data; by content)."""
    if path.is_dir():
        return None
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(_SQLITE_MAGIC):
        return None
    if text[:1] in (b"{", b"["):
        if b'"nbformat"' in head and b'"cells"' in head:
            return "not recorded data: a Jupyter notebook"
        if b'"format":"zett-lab-live-trace"' in head.replace(b" ", b""):
            return "not recorded data: a zett_lab live trace of compactions (read it with zett_lab.Trace.load)"
        if any((parent / "sweep.json").is_file() for parent in path.parents):
            return "not recorded data: part of a saved zett_lab sweep (give its folder to zett-lab report)"
        return None
    scalar = _json_scalar(text)
    if scalar is not None:
        return f"not recorded data: the file holds only the JSON value {scalar}; recorded data is an object or a list"
    if head.startswith(b"PAR1"):
        return "not recorded data: a Parquet table"
    if text[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "not recorded data: a web page"
    return "not recorded data: not JSON, JSON lines or SQLite"


def _json_scalar(text: bytes) -> str | None:
    """The JSON text of a file that is one JSON value other than an object or list (``null``, ``5``), else None."""
    if len(text) > 200:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return None if isinstance(value, dict | list) else json.dumps(value)


def file_kind(path: Path) -> str:
    """``file``, ``directory``, or what else ``path`` is (after symlinks), without opening it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(path, None, "no such file or directory") from None
    except OSError as error:
        raise InputError(path, None, f"cannot read: {error.strerror or error}") from error
    return kind_of(mode)


def read_file(path: str | Path) -> list[Conversation]:
    """Every conversation in one file (or one format directory, such as a zettcode tree)."""
    path = Path(path)
    return read_with(detect(path), path)


def read_with(reader: Reader, path: Path) -> list[Conversation]:
    """``reader.read(path)``, with every text made storable (see :mod:`zett_lab.load.storable`).

    Data nested deeper than Python walks (parsed, since JSON is parsed without recursion up to 1,024
    levels, where a reader turns a value into text) is an :class:`InputError` too.
    """
    try:
        read = reader.read(path)
    except RecursionError:
        raise InputError(path, None, f"nested too deeply; zett_lab reads at most {MAX_NESTING} levels") from None
    conversations = [normalise(conversation) for conversation in read]
    if not conversations:
        raise InputError(path, None, f"holds no conversation (read as {reader.name})")
    return conversations
