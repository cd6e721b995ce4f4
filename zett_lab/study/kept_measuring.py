"""What measuring a conversation's replays reads the same in every report, kept across runs beside the summary
cache: the anchor keys of its summaries' lines (:class:`~zett_lab.measure.line_keys.LineTable`) and the keyed
values its messages state (:func:`~zett_lab.measure.keyed.observe`).

A report run again over the same conversation with its summaries cached (a warm report) measures the same
summaries of the same messages as the last one: the workers measuring a 5,001-message session's replays
extracted the keys of its summaries' 36 k distinct lines (~1.5 s of CPU between them) and each observed its
messages (~0.7 s). A worker reads what an earlier run kept instead (a twentieth of that), and keeps what it
read anew.

Where: ``measuring/<code>/<conversation>.pkl`` in the summary cache's folder, named as the kept anchor indexes
are (:mod:`~zett_lab.study.kept`): ``<code>`` digests zett_lab's files and the versions it runs on (a line's
keys and a message's observations depend on the code reading them, so another version's are never read; their
folders are removed when a file is kept); ``<conversation>`` is its content fingerprint with its harness
context. None when the summary cache is disabled or in memory.

When: a worker takes the file once per conversation, before measuring its first replays of it
(:func:`kept_measuring`); after measuring, when it read lines or messages the file did not hold, it keeps them
joined with the file as it is then (the other worker may have kept its own since). A warm report that reads
nothing new writes nothing.

Safety: each file is a header, the SHA-256 of its pickle, and the pickle, written whole and renamed into place.
A file that is not whole (its checksum differs, it does not unpickle, it is not of this conversation's
messages) is removed with one warning and everything is read afresh; a folder that cannot be written keeps
nothing, with one warning. Measuring goes on either way, with the same results.
"""

from __future__ import annotations

import pickle
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..load import Conversation
from ..measure.keyed import Observation, held_observations, observe
from ..measure.line_keys import LineTable, line_keys
from ..measure.losses import conversation_index
from ..measure.message_index import ConversationIndex
from .kept import KeptPickles, conversation_key
from .reuse import Proven

#: Per conversation index this process measures for: whether the kept file holds its observations (taken once).
_TAKEN: weakref.WeakKeyDictionary[ConversationIndex, bool] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class Measuring:
    """What a kept file holds: the conversation's number of ``messages``, what they state (``observed``, None when
    not observed yet) and its summary lines' keys."""

    messages: int
    observed: list[tuple[Observation, ...]] | None
    lines: LineTable


@dataclass(frozen=True, slots=True)
class KeptMeasuring(KeptPickles):
    """The kept measuring of one code version in one folder (:meth:`~zett_lab.study.kept.KeptFolder.beside` a
    summary cache)."""

    FOLDER = "measuring"
    SUFFIX = ".pkl"
    HEADER = b"zett-lab-measuring 1\n"
    WHAT = "measuring"
    INSTEAD = "measuring afresh"

    def read(self, conversation: Conversation, key: str) -> Measuring | None:
        """What is kept for ``conversation``, None when nothing is; a damaged file is removed (one warning) and None
        returned."""
        kept = self.read_checked(key, lambda kept: _problem(kept, len(conversation.messages)))
        return kept if isinstance(kept, Measuring) else None

    def write(self, key: str, kept: Measuring) -> None:
        """Keep ``kept`` for a conversation (:meth:`~zett_lab.study.kept.KeptPickles.write_pickled`)."""
        self.write_pickled(key, pickle.dumps(kept, protocol=pickle.HIGHEST_PROTOCOL))


def _problem(kept: object, messages: int) -> str | None:
    """What is wrong with what a kept file holds for a conversation of ``messages`` messages, if anything."""
    if not isinstance(kept, Measuring) or kept.messages != messages:
        return "not of this conversation's messages"
    observed, table = kept.observed, kept.lines
    if observed is not None and (not isinstance(observed, list) or len(observed) != messages):
        return "not of this conversation's messages"
    if not (isinstance(table, LineTable) and isinstance(table.keys, list) and isinstance(table.lines, dict)):
        return "its lines are not a table of lines"
    if max((max(at, default=-1) for at in table.lines.values()), default=-1) >= len(table.keys):
        return "a line names a key the table does not hold"
    return None


@contextmanager
def kept_measuring(cache_path: object, sources: Sequence[Proven], fingerprint: str, metrics: bool) -> Iterator[None]:
    """Measure the ``sources`` a worker has no rows for in this context (with ``metrics``, beside a summary cache
    file at ``cache_path``): what an earlier run kept for their conversation (named by its content ``fingerprint``)
    is taken first, once per process, and what was read anew is kept after."""
    traces = [p.trace for p in sources if p.row is None and p.trace is not None]
    kept = KeptMeasuring.beside(cache_path) if metrics and traces else None
    if kept is None:
        yield
        return
    conversation = traces[0].conversation
    key = conversation_key(conversation, fingerprint)
    index = conversation_index(conversation)
    if index not in _TAKEN:
        _TAKEN[index] = _take(kept.read(conversation, key), conversation, index)
    yield
    lines, observed = line_keys(index), None if _TAKEN[index] else held_observations(conversation.messages)
    if lines.extracted or observed is not None:
        on_file = kept.read(conversation, key)
        if on_file is not None:
            lines.take(on_file.lines)
            observed = observed if on_file.observed is None else on_file.observed
        kept.write(key, Measuring(len(conversation.messages), observed, lines.table()))
        _TAKEN[index] = observed is not None


def _take(kept: Measuring | None, conversation: Conversation, index: ConversationIndex) -> bool:
    """Read ``kept`` where measuring reads the lines' keys and the messages' observations; whether it holds the
    observations."""
    if kept is None:
        return False
    line_keys(index).take(kept.lines)
    if kept.observed is None:
        return False
    observe(conversation.messages, kept.observed)
    return True
