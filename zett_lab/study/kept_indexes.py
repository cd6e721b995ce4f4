"""Conversations' anchor indexes kept across runs, beside the summary cache.

Measuring a long conversation's replays reads its anchor index (:class:`~zett_lab.measure.message_index.
ConversationIndex`), which takes seconds of CPU to build (~5.3 s for a 5,000-message session) and a
twentieth of that to read. A report run again over the same conversation (a warm summary cache) reads the
index the last run built instead of building it again.

Where: ``anchor-indexes/<code>/<conversation>.pkl`` in the summary cache's folder; none when the summary
cache is disabled or in memory. ``<code>`` is a digest of zett_lab's own files (its code and data, with the
Python, NumPy and zett-agent versions): what the index is built by, so a changed metric never reads an index
an earlier version built; folders of other versions are removed when an index is kept. ``<conversation>``
is the conversation's content fingerprint with its harness context.

Safety: each file is a header, the SHA-256 of its pickle, and the pickle, written whole and renamed into
place. A file that is not whole (its checksum differs, it does not unpickle, it is not an index of the
conversation) is removed with one warning and the index is built again. A folder that cannot be written
(read-only, a full disk) keeps nothing, with one warning; measuring goes on.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import platform
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from ..collector import collector_paused
from ..errors import warn
from ..load import Conversation

#: The folder beside the summary cache's file.
FOLDER = "anchor-indexes"
#: The first line of every kept file (its format).
HEADER = b"zett-lab-anchor-index 1\n"
#: An index that took less CPU than this to build is not kept: reading it costs a good part of that.
KEEP_FROM_CPU_S = 1.0
#: The package whose files :func:`code_digest` reads by default.
PACKAGE = Path(__file__).resolve().parents[1]
#: Files already warned about in this process (each is said once).
_WARNED: set[str] = set()


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
class KeptIndexes:
    """The kept indexes of one code version in one folder (:meth:`beside` a summary cache)."""

    #: ``anchor-indexes`` in the summary cache's folder.
    root: Path
    #: :func:`code_digest` of the code reading and writing them.
    code: str

    @classmethod
    def beside(cls, cache_path: object, code: str | None = None) -> KeptIndexes | None:
        """The kept indexes beside a summary cache file (its ``path``); None for a disabled or in-memory cache."""
        if not isinstance(cache_path, Path):
            return None
        return cls(cache_path.parent / FOLDER, code_digest() if code is None else code)

    @property
    def folder(self) -> Path:
        return self.root / self.code[:32]

    def file(self, key: str) -> Path:
        return self.folder / f"{key}.pkl"

    def read(self, conversation: Conversation, key: str) -> dict[str, object] | None:
        """The index kept for ``conversation`` (:meth:`~zett_lab.measure.message_index.ConversationIndex.built`),
        None when none is kept; a damaged one is removed (one warning) and None returned."""
        path = self.file(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            warn_once(path, f"cannot read the kept anchor index {path} ({error}); building it again")
            return None
        problem = _problem(data, conversation)
        if isinstance(problem, str):
            warn_once(path, f"the kept anchor index {path} is damaged ({problem}); removed, building it again")
            path.unlink(missing_ok=True)
            return None
        return problem

    def write(self, key: str, built: dict[str, object]) -> None:
        """Keep a built index: written whole beside its place, then renamed into it (a reader finds all of it
        or none); other code versions' folders are removed. A folder that cannot be written keeps none."""
        path = self.file(key)
        payload = pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)
        partial = path.with_suffix(f".{os.getpid()}.partial")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(partial, "wb") as handle:
                handle.write(HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n")
                handle.write(payload)
            os.replace(partial, path)
        except OSError as error:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            warn_once(self.root, f"cannot keep the anchor index in {self.root} ({error}); it is built again next time")
            return
        for other in self.root.iterdir():
            if other.is_dir() and other != self.folder:
                shutil.rmtree(other, ignore_errors=True)


def _problem(data: bytes, conversation: Conversation) -> dict[str, object] | str:
    """The index a kept file holds, or what is wrong with it."""
    if not data.startswith(HEADER):
        return "not a kept anchor index"
    # read in place (the pickle is tens of megabytes: copying it costs as much as checking it)
    ends = data.find(b"\n", len(HEADER))
    checksum, payload = data[len(HEADER) : ends], memoryview(data)[ends + 1 :]
    if ends < 0 or hashlib.sha256(payload).hexdigest().encode() != checksum:
        return "checksum differs: written only in part or changed since"
    try:
        with collector_paused():  # (millions of objects in no cycle)
            built = pickle.loads(payload)
    except Exception as error:  # noqa: BLE001 - any unpickling failure means the same: build it again
        return f"does not unpickle: {type(error).__name__}"
    if not isinstance(built, dict) or built.get("harness_context") != tuple(conversation.harness_context):
        return "not an index of this conversation"
    keys = built.get("keys_by_message")
    if not isinstance(keys, list) or len(keys) != len(conversation.messages):
        return "not an index of this conversation"
    return built


def warn_once(path: Path, message: str) -> None:
    """Warn about a kept file or folder once per process (a sweep reads the same one for every unit)."""
    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        warn(message)
