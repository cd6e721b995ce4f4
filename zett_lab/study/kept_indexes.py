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

import pickle
from dataclasses import dataclass

from ..load import Conversation
from .kept import KeptPickles

#: An index that took less CPU than this to build is not kept. Reading one back costs 5-8 % of building it, and
#: writing it 7-9 %, for conversations of 100 to 600 messages (0.1-0.6 s to build): a report over a folder of such
#: sessions built every index again each run while this was 1 s (36.6 s of CPU of a 150-session warm report).
KEEP_FROM_CPU_S = 0.05


@dataclass(frozen=True, slots=True)
class KeptIndexes(KeptPickles):
    """The kept indexes of one code version in one folder (:meth:`~zett_lab.study.kept.KeptFolder.beside` a summary
    cache)."""

    FOLDER = "anchor-indexes"
    SUFFIX = ".pkl"
    HEADER = b"zett-lab-anchor-index 1\n"
    WHAT = "anchor index"
    INSTEAD = "building it again"

    def read(self, conversation: Conversation, key: str) -> dict[str, object] | None:
        """The index kept for ``conversation`` (:meth:`~zett_lab.measure.message_index.ConversationIndex.built`),
        None when none is kept; a damaged one is removed (one warning) and None returned."""
        built = self.read_checked(key, lambda kept: _problem(kept, conversation))
        return built if isinstance(built, dict) else None

    def write(self, key: str, payload: bytes) -> None:
        """Keep a built index, :func:`pickled` (:meth:`~zett_lab.study.kept.KeptPickles.write_pickled`)."""
        self.write_pickled(key, payload)


def pickled(built: dict[str, object]) -> bytes:
    """A built index (:meth:`~zett_lab.measure.message_index.ConversationIndex.built`) as the bytes a kept file and a
    sweep's folder hold (:meth:`~zett_lab.study.sources.TableWriter.write_index`): pickled once for both, a long
    session's 41 MB index costs a few tenths of a second of CPU to pickle."""
    return pickle.dumps(built, protocol=pickle.HIGHEST_PROTOCOL)


def _problem(built: object, conversation: Conversation) -> str | None:
    """What is wrong with an index a kept file holds for ``conversation``, if anything."""
    if not isinstance(built, dict) or built.get("harness_context") != tuple(conversation.harness_context):
        return "not an index of this conversation"
    keys = built.get("keys_by_message")
    if not isinstance(keys, list) or len(keys) != len(conversation.messages):
        return "not an index of this conversation"
    return None
