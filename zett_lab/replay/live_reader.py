"""A live trace file read back: its sessions (:func:`live_sessions`), one session as a trace's parts
(:func:`read_live_session`), and where each session stopped, so a restarted agent continues it.

The file's records are described in :mod:`zett_lab.replay.live`, which writes them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import ModelUsage
from zett_agent.storage import decode_messages

from ..errors import InputError, warn
from ..load.conversation import Conversation, starts_turn
from ..records import JSONValue
from .schema import TraceRow
from .setting import LiveFacts, TraceSettings

LIVE_FORMAT = "zett-lab-live-trace"
LIVE_VERSION = 1


def first_line(path: Path) -> JSONValue:
    """The first line of a file as JSON (None when it is not JSON): a live trace starts with its format."""
    with path.open("rb") as handle:
        line = handle.readline()
    try:
        return json.loads(line)
    except ValueError:
        return None


@dataclass
class _Parsed:
    """The records of one live trace file, grouped by session.

    Not frozen: the reader fills it in record by record.
    """

    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    torn: list[int] = field(default_factory=list)
    in_flight: bool = False


#: The fields each record kind needs, and their types (a line of another shape is one clear error).
_RECORD_FIELDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "start": {"run": str, "settings": dict},
    "message": {"run": str, "session_id": str, "index": int, "message": str},
    "step": {"run": str, "session_id": str, "row": dict},
    "compaction": {"run": str, "session_id": str, "row": dict},
    "event": {"run": str, "session_id": str, "event": dict},
    "sequences": {"run": str, "session_id": str, "sequences": dict},
    "gap": {"run": str, "session_id": str, "at": int, "text": str},
}


def _check_record(path: Path, number: int, record: Any) -> str:
    """The kind of a parsed line, or an :class:`InputError` naming the line and what its shape lacks."""
    if not isinstance(record, dict):
        raise InputError(path, f"line {number}", f"a live trace record is a JSON object, not {type(record).__name__}")
    kind = record.get("record")
    fields = _RECORD_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        known = ", ".join(_RECORD_FIELDS)
        raise InputError(path, f"line {number}", f"unknown record kind {kind!r} (a live trace holds: {known})")
    for name, expected in fields.items():
        value = record.get(name)
        if not isinstance(value, expected) or isinstance(value, bool):
            wanted = expected.__name__ if isinstance(expected, type) else "/".join(t.__name__ for t in expected)
            found = "missing" if name not in record else f"{type(value).__name__} {value!r:.40}"
            raise InputError(path, f"line {number}", f"a {kind!r} record needs {name!r} ({wanted}), found {found}")
    return str(kind)


def _parse(path: Path) -> _Parsed:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(path, None, f"cannot read the trace ({error.strerror or error})") from error
    parsed = _Parsed()
    lines = data.split(b"\n")
    parsed.in_flight = bool(lines[-1])  # the last line has no newline yet: a record being written
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            parsed.torn.append(number)  # a record cut off when a process was killed mid-write
            continue
        if number == 1 and (not isinstance(record, dict) or record.get("format") != LIVE_FORMAT):
            raise InputError(path, "line 1", f"not a zett_lab live trace (expected format {LIVE_FORMAT!r})")
        kind = _check_record(path, number, record)
        if kind == "start":
            parsed.runs[record["run"]] = record
            continue
        parsed.sessions.setdefault(record["session_id"], {}).setdefault(kind, []).append(record)
    return parsed


def message_digest(encoded: str) -> str:
    """A digest of one message as ``encode_messages`` writes it (to compare a trace with a session storage)."""
    return hashlib.sha256(encoded.encode("utf-8", "surrogatepass")).hexdigest()


def live_sessions(path: str | Path) -> list[str]:
    """The session ids a live trace file holds, in the order they first appear."""
    return list(_parse(Path(path)).sessions)


@dataclass(frozen=True, slots=True)
class LiveSession:
    """One session of a live trace file, read back: what :meth:`Trace.load` builds a trace from."""

    conversation: Conversation
    step_rows: list[TraceRow]
    compaction_rows: list[TraceRow]
    settings: TraceSettings
    engine_events: list[TraceRow]


def is_live_trace(path: str | Path) -> bool:
    """Whether ``path`` is a live trace file (its first line is a ``start`` record of this format)."""
    path = Path(path)
    if not path.is_file() or not path.stat().st_size:
        return False
    head = first_line(path)
    return isinstance(head, dict) and head.get("format") == LIVE_FORMAT


def read_live_session(path: str | Path, session: str | None = None) -> LiveSession:
    """One session of a live trace file (``session`` may be left out when the file holds one).

    The conversation is rebuilt from the file's message records (usage included), so it can
    be measured and replayed without the agent's database.
    """
    path = Path(path)
    parsed = _parse(path)
    if not parsed.sessions:
        raise InputError(path, None, "the live trace holds no session yet")
    if session is None:
        if len(parsed.sessions) > 1:
            raise InputError(
                path,
                None,
                f"the live trace holds {len(parsed.sessions)} sessions; pass session= one of {sorted(parsed.sessions)}",
            )
        session = next(iter(parsed.sessions))
    if session not in parsed.sessions:
        raise InputError(path, f"session {session!r}", f"not in this trace (sessions: {sorted(parsed.sessions)})")
    records = parsed.sessions[session]
    runs = list(dict.fromkeys(r["run"] for kind in records.values() for r in kind))
    record = dict(parsed.runs[runs[-1]]["settings"]) if runs and runs[-1] in parsed.runs else {}
    recovered = tuple(r["index"] for r in records.get("message", []) if r.get("recovered"))
    if parsed.torn:
        lines = ", ".join(map(str, parsed.torn[:10])) + (", ..." if len(parsed.torn) > 10 else "")
        warn(
            f"{path}: line(s) {lines} cut off (a process was killed while writing them): the records they held "
            "are missing from the trace (a restarted agent writes again the messages its session storage kept)"
        )
    for gap in records.get("gap", []):
        warn(f"{path}: session {session!r}: at message {gap['at']}, {gap['text']}")
    settings = dataclasses.replace(
        TraceSettings.from_record(record),
        live=LiveFacts(
            source=str(path),
            runs=tuple(runs),
            in_flight=parsed.in_flight,
            torn_records=tuple(parsed.torn),
            recovered_messages=recovered,
            gaps=tuple(g["text"] for g in records.get("gap", [])),
        ),
    )
    return LiveSession(
        conversation=_conversation(path, session, records),
        step_rows=[r["row"] for r in records.get("step", [])],
        compaction_rows=[r["row"] for r in records.get("compaction", [])],
        settings=settings,
        engine_events=[r["event"] for r in records.get("event", [])],
    )


def _conversation(path: Path, session: str, records: dict[str, list[dict[str, Any]]]) -> Conversation:
    messages: list[AnyMessage] = []
    usage: dict[int, ModelUsage] = {}
    for n, record in enumerate(records.get("message", [])):
        if record["index"] != n:
            raise InputError(
                path, f"session {session!r}, message {n}", f"the trace skips to message index {record['index']}"
            )
        messages.extend(decode_messages(record["message"]))
        if record.get("usage"):
            usage[n] = ModelUsage(**record["usage"])
    sequences: dict[int, int] = {}
    for record in records.get("sequences", []):
        sequences.update({int(k): v for k, v in record["sequences"].items()})
    return Conversation(
        id=session,
        messages=messages,
        source=str(path),
        format="zett-lab-live",
        usage=usage,
        metadata={"sequences": [sequences.get(i) for i in range(len(messages))], "live": True},
    )


class SessionState(TypedDict):
    """Where one session of a live trace stopped: what a restarted agent continues from."""

    digests: list[str]
    n_messages: int
    turns: int
    has_system: bool
    steps: int
    compactions: int
    checkpoint_id: int | None


def session_states(path: Path) -> dict[str, SessionState]:
    """Where each session of an existing trace stopped, so a restarted agent continues its trace."""
    states: dict[str, SessionState] = {}
    for session_id, records in _parse(path).sessions.items():
        messages = records.get("message", [])
        compactions = [r["row"] for r in records.get("compaction", [])]
        applied = [row["compaction_id"] for row in compactions if row.get("applied")]
        kinds = [decode_messages(r["message"])[0] for r in messages]
        states[session_id] = {
            "digests": [message_digest(r["message"]) for r in messages],
            "n_messages": len(messages),
            "turns": sum(1 for m in kinds if starts_turn(m)),
            "has_system": bool(kinds) and isinstance(kinds[0], SystemMessage),
            "steps": len(records.get("step", [])),
            "compactions": len(compactions),
            "checkpoint_id": applied[-1] if applied else None,
        }
    return states
