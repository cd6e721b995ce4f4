"""What zett_lab keeps across runs beside the summary cache, per code version: the base of the anchor indexes
(:mod:`~zett_lab.study.kept_indexes`), measuring's kept work (:mod:`~zett_lab.study.kept_measuring`) and the units'
times (:mod:`~zett_lab.study.kept_times`).

Each kind has its folder in the summary cache's folder, and in it one folder per code version
(:func:`code_digest`: what a kept file was made by; other versions' folders are removed when a file is kept),
and in that one file per conversation (:func:`conversation_key`). A file is written whole beside its place and
renamed into it, so a reader finds all of it or none; a folder that cannot be written keeps nothing, with one
warning (:func:`warn_once`), and the run goes on.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import platform
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import ClassVar, TypeVar

import numpy as np

from ..collector import collector_paused
from ..errors import warn
from ..load import Conversation

#: The package whose files :func:`code_digest` reads by default.
PACKAGE = Path(__file__).resolve().parents[1]
#: Files and folders already warned about in this process (each is said once).
_WARNED: set[str] = set()

K = TypeVar("K", bound="KeptFolder")


@functools.cache
def code_digest(package: Path = PACKAGE) -> str:
    """A digest of every file of ``package`` (code and data, by path and content) and the versions of Python,
    NumPy and zett-agent: changes with anything that could change an index or how it pickles."""
    digest = hashlib.sha256()
    versions = [platform.python_version(), np.__version__, metadata.version("zett-agent")]
    digest.update(repr(versions).encode())
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        if path.suffix in (".pyc", ".pyo"):
            continue
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def conversation_key(conversation: Conversation, fingerprint: str) -> str:
    """The name of a conversation's kept index: its content ``fingerprint`` (:func:`~zett_lab.study.grid.
    fingerprint`) with its harness context (which the index reads and the fingerprint does not)."""
    digest = hashlib.sha256(fingerprint.encode())
    digest.update(repr(tuple(conversation.harness_context)).encode())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class KeptFolder:
    """One kind of kept file of one code version (:meth:`beside` a summary cache)."""

    #: The kind's folder name in the summary cache's folder.
    FOLDER: ClassVar[str]
    #: The kind's file suffix.
    SUFFIX: ClassVar[str]

    #: The kind's folder in the summary cache's folder.
    root: Path
    #: :func:`code_digest` of the code reading and writing the files.
    code: str

    @classmethod
    def beside(cls: type[K], cache_path: object, code: str | None = None) -> K | None:
        """The kept files beside a summary cache file (its ``path``); None for a disabled or in-memory cache."""
        if not isinstance(cache_path, Path):
            return None
        return cls(cache_path.parent / cls.FOLDER, code_digest() if code is None else code)

    @property
    def folder(self) -> Path:
        return self.root / self.code[:32]

    def file(self, key: str) -> Path:
        return self.folder / f"{key}{self.SUFFIX}"

    def replace(self, key: str, parts: Iterable[bytes], what: str, instead: str) -> None:
        """Keep ``parts`` as the file of ``key``: written whole beside it, then renamed into it (a reader finds all
        of it or none); other code versions' folders are removed. A folder that cannot be written keeps none, with
        one warning naming ``what`` was not kept and what happens ``instead``."""
        path = self.file(key)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as handle:
                handle.writelines(parts)
            os.replace(partial, path)
        except OSError as error:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            warn_once(self.root, f"cannot keep {what} in {self.root} ({error}); {instead}")
            return
        for other in self.root.iterdir():
            if other.is_dir() and other != self.folder:
                shutil.rmtree(other, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class KeptPickles(KeptFolder):
    """A kind whose files are a header, the SHA-256 of a pickle, and the pickle: a file not whole (its checksum
    differs, it does not unpickle, the kind's check refuses it) is removed with one warning and read as none."""

    #: The first line of every file of the kind (its format).
    HEADER: ClassVar[bytes]
    #: What a file holds, in warnings ("the kept {WHAT} ... is damaged").
    WHAT: ClassVar[str]
    #: What the run does when a file cannot be read or kept.
    INSTEAD: ClassVar[str]

    def read_checked(self, key: str, check: Callable[[object], str | None]) -> object | None:
        """The object kept as ``key`` when ``check`` finds nothing wrong with it (else what is wrong), None when
        none is kept or it is damaged (removed, one warning)."""
        path = self.file(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            warn_once(path, f"cannot read the kept {self.WHAT} {path} ({error}); {self.INSTEAD}")
            return None
        kept = self._unpickled(data)
        problem = kept if isinstance(kept, str) else check(kept)
        if problem is not None:
            warn_once(path, f"the kept {self.WHAT} {path} is damaged ({problem}); removed, {self.INSTEAD}")
            path.unlink(missing_ok=True)
            return None
        return kept

    def _unpickled(self, data: bytes) -> object:
        """What a file holds, or what is wrong with it (a string)."""
        if not data.startswith(self.HEADER):
            return f"not a kept {self.WHAT}"
        # read in place (a pickle of tens of megabytes: copying it costs as much as checking it)
        ends = data.find(b"\n", len(self.HEADER))
        checksum, payload = data[len(self.HEADER) : ends], memoryview(data)[ends + 1 :]
        if ends < 0 or hashlib.sha256(payload).hexdigest().encode() != checksum:
            return "checksum differs: written only in part or changed since"
        try:
            with collector_paused():  # (up to millions of objects in no cycle)
                return pickle.loads(payload)
        except Exception as error:  # noqa: BLE001 - any unpickling failure means the same: read afresh
            return f"does not unpickle: {type(error).__name__}"

    def write_pickled(self, key: str, payload: bytes) -> None:
        """Keep a pickle as ``key``'s file, with the kind's header and its checksum (:meth:`replace`)."""
        head = self.HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n"
        self.replace(key, (head, payload), f"the {self.WHAT}", self.INSTEAD)


def warn_once(path: Path, message: str) -> None:
    """Warn about a kept file or folder once per process (a sweep reads the same one for every unit)."""
    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        warn(message)
