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

import hashlib
import pickle
from dataclasses import dataclass

from ..collector import collector_paused
from ..load import Conversation
from .kept import KeptFolder, warn_once

#: The first line of every kept file (its format).
HEADER = b"zett-lab-anchor-index 1\n"
#: An index that took less CPU than this to build is not kept: reading it costs a good part of that.
KEEP_FROM_CPU_S = 1.0


@dataclass(frozen=True, slots=True)
class KeptIndexes(KeptFolder):
    """The kept indexes of one code version in one folder (:meth:`~zett_lab.study.kept.KeptFolder.beside` a summary
    cache)."""

    FOLDER = "anchor-indexes"
    SUFFIX = ".pkl"

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

    def write(self, key: str, payload: bytes) -> None:
        """Keep a built index, :func:`pickled`: written whole beside its place, then renamed into it (a reader finds
        all of it or none); other code versions' folders are removed. A folder that cannot be written keeps none."""
        head = HEADER + hashlib.sha256(payload).hexdigest().encode() + b"\n"
        self.replace(key, (head, payload), "the anchor index", "it is built again next time")


def pickled(built: dict[str, object]) -> bytes:
    """A built index (:meth:`~zett_lab.measure.message_index.ConversationIndex.built`) as the bytes a kept file and a
    sweep's folder hold (:meth:`~zett_lab.study.sources.TableWriter.write_index`): pickled once for both, a long
    session's 41 MB index costs a few tenths of a second of CPU to pickle."""
    return pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)


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
