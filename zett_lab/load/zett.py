"""Readers for zett-agent's own storage: SQLite session databases, JSONL turn files, zettcode trees.

A user's database is read as SQLite shows it to a reader at that moment (committed data only,
see :mod:`zett_lab.load.committed`); its bytes, modification time and sibling files stay exactly
as they were.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import ModelUsage
from zett_agent.storage import decode_messages

from ..asyncrun import signals_deferred
from ..errors import InputError
from ..files import atomic_path, check_output, release_output, write_failed
from ..records import JSONValue
from .committed import private_copy
from .conversation import (
    CHECKPOINT_PREFIX,
    Conversation,
    NativeCompaction,
    parse_native_compactions,
    parse_probes,
    probes_sidecar_path,
)
from .neutral import parse_json_document
from .registry import Reader, register
from .storable import loads, not_json

SQLITE_FORMAT = "zett-sqlite"
JSONL_FORMAT = "zett-jsonl"
ZETTCODE_FORMAT = "zettcode"


def probes_sidecar(path: Path) -> dict[str, JSONValue]:
    """The sidecar beside a recorded file (``<stem>.probes.json``: per session, probes and native compactions),
    or {} when there is none."""
    sidecar = probes_sidecar_path(path)
    if not sidecar.is_file():
        return {}
    data, _ = parse_json_document(sidecar)
    if not isinstance(data, dict):
        raise InputError(sidecar, None, "expected an object mapping session ids to their probes")
    return data


def _attach_probes(conversation: Conversation, sidecar: dict[str, JSONValue], path: Path) -> Conversation:
    """The conversation with the probes and native compactions its sidecar entry gives (itself without one)."""
    entry = sidecar.get(conversation.id)
    if entry is None:
        return conversation
    where = probes_sidecar_path(path)
    probes = entry.get("probes", []) if isinstance(entry, dict) else entry
    natives = entry.get("native_compactions", []) if isinstance(entry, dict) else []
    try:
        probes_found = parse_probes(probes, where, len(conversation.messages))
        kept = {(n.position, n.summary) for n in conversation.native_compactions}
        natives_found = [
            n
            for n in parse_native_compactions(natives, where, len(conversation.messages))
            if (n.position, n.summary) not in kept
        ]
    except InputError as error:
        raise InputError(where, f"session {conversation.id!r}, {error.where}", error.problem) from error
    if isinstance(entry, dict):
        conversation.metadata.update({k: v for k, v in entry.items() if k not in ("probes", "native_compactions")})
    return dataclasses.replace(
        conversation,
        probes=probes_found,
        native_compactions=[*conversation.native_compactions, *natives_found],
    )


def _decode(payload: str, path: Path, where: str) -> list[AnyMessage]:
    try:
        return decode_messages(payload)
    except Exception as error:  # pydantic ValidationError, KeyError, ValueError, JSON errors
        raise InputError(path, where, f"not a zett-agent message envelope ({type(error).__name__}: {error})") from error


def keep_first_system_prompt(
    messages: list[AnyMessage], sequences: list[int]
) -> tuple[list[AnyMessage], list[int], int]:
    """Keep the first system prompt; the raw log re-stores it at every request."""
    kept: list[AnyMessage] = []
    kept_sequences: list[int] = []
    dropped = 0
    seen_system = False
    for message, sequence in zip(messages, sequences, strict=True):
        if isinstance(message, SystemMessage):
            if seen_system:
                dropped += 1
                continue
            seen_system = True
            kept.insert(0, message)
            kept_sequences.insert(0, sequence)
            continue
        kept.append(message)
        kept_sequences.append(sequence)
    return kept, kept_sequences, dropped


# --- SQLite -----------------------------------------------------------------------------------


def _sniff_sqlite(path: Path, head: bytes) -> bool:
    return head.startswith(b"SQLite format 3\x00")


def read_sqlite(path: Path) -> list[Conversation]:
    """Every session in a zett-agent SQLite database: its committed state now (see :mod:`.committed`)."""
    with private_copy(path) as connection:
        return _read_sessions(connection, path)


def _read_sessions(connection: sqlite3.Connection, path: Path) -> list[Conversation]:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    missing = {"agent_sessions", "raw_messages"} - tables
    if missing:
        raise InputError(path, None, f"not a zett-agent session database (no table {', '.join(sorted(missing))})")
    sessions = connection.execute(
        "SELECT id, title, agent_name, parent_session_id FROM agent_sessions ORDER BY created_at, id"
    ).fetchall()
    rows = defaultdict(list)
    for row in connection.execute(
        "SELECT session_id, sequence, message_json, input_tokens, output_tokens, cache_read_tokens,"
        " cache_write_tokens, reasoning_tokens, request_id FROM raw_messages ORDER BY session_id, sequence"
    ):
        rows[row[0]].append(row)
    snapshots = defaultdict(list)
    if "session_snapshots" in tables:
        for session_id, version, through, message_json in connection.execute(
            "SELECT session_id, version, compacted_through_sequence, message_json FROM session_snapshots"
            " ORDER BY session_id, version"
        ):
            snapshots[session_id].append((version, through, message_json))
    sidecar = probes_sidecar(path)
    conversations = []
    for session_id, title, agent_name, parent in sessions:
        if not rows[session_id]:
            continue
        _column(session_id, str, path, f"session {session_id!r}", "agent_sessions.id")
        conversation = _session_conversation(path, session_id, rows[session_id], snapshots[session_id])
        conversation.metadata.update(title=title, agent_name=agent_name, parent_session_id=parent)
        conversations.append(_attach_probes(conversation, sidecar, path).validate())
    if not conversations:
        raise InputError(path, None, "the database holds no sessions with messages")
    return conversations


_USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens")


def _column(value: Any, kind: type, path: Path, where: str, column: str, *, nullable: bool = False) -> Any:
    """A database cell of the type zett-agent writes there; SQLite itself stores any type in any column."""
    if (value is None and nullable) or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    expected = "an integer" if kind is int else "text"
    raise InputError(path, f"{where}, column {column}", f"expected {expected}, found {value!r:.60}")


def _session_conversation(
    path: Path, session_id: str, rows: list[tuple[Any, ...]], snapshot_rows: list[tuple[Any, ...]]
) -> Conversation:
    messages: list[AnyMessage] = []
    sequences: list[int] = []
    usage_by_sequence: dict[int, ModelUsage] = {}
    requests: dict[int, str] = {}
    for _, sequence, message_json, inp, out, cache_read, cache_write, reasoning, request_id in rows:
        where = f"session {session_id!r}, raw message sequence {sequence!r}"
        _column(sequence, int, path, where, "sequence")
        decoded = _decode(message_json, path, where)
        messages.extend(decoded)
        sequences.extend([sequence] * len(decoded))
        requests[sequence] = request_id
        inp, out, cache_read, cache_write, reasoning = (
            _column(value, int, path, where, name, nullable=True)
            for value, name in zip((inp, out, cache_read, cache_write, reasoning), _USAGE_COLUMNS, strict=True)
        )
        if inp is not None:
            try:
                usage_by_sequence[sequence] = ModelUsage(
                    input_tokens=inp,
                    output_tokens=out or 0,
                    cache_read_tokens=cache_read or 0,
                    cache_write_tokens=cache_write or 0,
                    reasoning_tokens=reasoning or 0,
                )
            except ValueError as error:
                raise InputError(path, where, f"recorded usage is impossible ({error})") from error
    messages, sequences, dropped = keep_first_system_prompt(messages, sequences)
    usage = {i: usage_by_sequence[s] for i, s in enumerate(sequences) if s in usage_by_sequence}
    native = [_snapshot(path, session_id, row, messages, sequences) for row in snapshot_rows]
    return Conversation(
        id=session_id,
        messages=messages,
        source=str(path),
        format=SQLITE_FORMAT,
        usage=usage,
        native_compactions=native,
        metadata={
            "sequences": sequences,
            "request_ids": [requests[s] for s in sequences],
            "repeated_system_prompts": dropped,
        },
    )


def _snapshot(
    path: Path, session_id: str, row: tuple[Any, ...], messages: list[AnyMessage], sequences: list[int]
) -> NativeCompaction:
    """One context snapshot of the session storage, as the native compaction it records."""
    version, through, message_json = row
    where = f"session {session_id!r}, snapshot {version!r}"
    _column(version, int, path, where, "version")
    _column(through, int, path, where, "compacted_through_sequence")
    checkpoint = next((m for m in _decode(message_json, path, where) if isinstance(m, CompactedMessage)), None)
    position = next(
        (i for i, s in enumerate(sequences) if s > through and not isinstance(messages[i], SystemMessage)),
        len(messages),
    )
    return NativeCompaction(
        position=position,
        summary=checkpoint.text.removeprefix(CHECKPOINT_PREFIX) if checkpoint is not None else "",
        span_start=1 if messages and isinstance(messages[0], SystemMessage) else 0,
        kind="zett-snapshot",
        metadata={"version": version, "compacted_through_sequence": through},
    )


# --- zett-agent JSONL extension ---------------------------------------------------------------


def _is_envelope_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) and {"kind", "data"} <= set(v) for v in value)


def _first_json_line(head: bytes) -> Any:
    line = head.lstrip().split(b"\n", 1)[0]
    try:
        return loads(line)
    except json.JSONDecodeError:
        return None


def _sniff_jsonl(path: Path, head: bytes) -> bool:
    record = _first_json_line(head)
    return isinstance(record, dict) and "session_id" in record and _is_envelope_list(record.get("messages"))


def _json_lines(path: Path):
    """(line number, record) for every non-blank line; errors name the line."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, loads(line)
            except json.JSONDecodeError as error:
                raise not_json(path, error, number) from error


def read_jsonl(path: Path) -> list[Conversation]:
    """Sessions in a file written by zett-agent's ``JSONLExtension`` (one turn per line).

    This format loses messages when a compaction happens mid-request, so it is
    not ground truth; prefer the SQLite raw log when both exist.
    """
    by_session: dict[str, list[AnyMessage]] = {}
    for number, record in _json_lines(path):
        if not isinstance(record, dict) or not _is_envelope_list(record.get("messages")):
            raise InputError(path, f"line {number}", "expected a zett-agent JSONL turn record with 'messages'")
        messages = _decode(json.dumps(record["messages"]), path, f"line {number}")
        by_session.setdefault(str(record.get("session_id")), []).extend(messages)
    sidecar = probes_sidecar(path)
    conversations = []
    for session_id, messages in by_session.items():
        conversation = Conversation(id=session_id, messages=messages, source=str(path), format=JSONL_FORMAT)
        conversations.append(_attach_probes(conversation, sidecar, path).validate())
    return conversations


# --- zettcode session trees -------------------------------------------------------------------


def _zettcode_files(path: Path) -> list[Path]:
    """The session files of a tree (regular files only: a FIFO named data.jsonl must not block a read)."""
    if path.is_file():
        return [path]
    return sorted(f for f in path.rglob("data.jsonl") if f.is_file())


def _sniff_zettcode(path: Path, head: bytes) -> bool:
    if path.is_dir():
        files = _zettcode_files(path)
        return bool(files) and all(_sniff_zettcode(f, _head(f)) for f in files[:3])
    record = _first_json_line(head)
    return isinstance(record, dict) and record.get("kind") == "session"


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(4096)


def read_zettcode(path: Path) -> list[Conversation]:
    """zettcode sessions: ``<workspace>/<id>/data.jsonl`` files of session/message/compaction lines.

    Message lines carry zett ``encode_messages`` envelopes; compaction lines are
    zettcode's own compactions and become native compactions (not replayed).
    """
    conversations = []
    for file in _zettcode_files(path):
        session_id = file.parent.name
        messages: list[AnyMessage] = []
        native: list[NativeCompaction] = []
        metadata: dict[str, Any] = {}
        for number, record in _json_lines(file):
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind == "session":
                session_id = str(record.get("id", session_id))
                metadata.update({k: v for k, v in record.items() if k not in ("kind", "id")})
            elif kind == "message":
                envelope = record.get("message")
                envelopes = envelope if isinstance(envelope, list) else [envelope]
                if not _is_envelope_list(envelopes):
                    raise InputError(
                        file, f"line {number}", "a message line needs a zett message envelope under 'message'"
                    )
                messages.extend(_decode(json.dumps(envelopes), file, f"line {number}"))
            elif kind == "compaction":
                native.append(
                    NativeCompaction(
                        position=len(messages),
                        summary=str(record.get("summary", "")),
                        tokens_before=record.get("tokens_before"),
                        kind="zettcode",
                        metadata={k: v for k, v in record.items() if k not in ("kind", "summary")},
                    )
                )
            else:
                raise InputError(file, f"line {number}", f"unknown zettcode record kind {kind!r}")
        messages, _, _ = keep_first_system_prompt(messages, list(range(len(messages))))
        conversation = Conversation(
            id=session_id,
            messages=messages,
            source=str(file),
            format=ZETTCODE_FORMAT,
            native_compactions=native,
            metadata=metadata,
        )
        conversations.append(conversation.validate())
    return conversations


register(
    Reader(SQLITE_FORMAT, "zett-agent SQLite session database (SQLiteSessionExtension)", _sniff_sqlite, read_sqlite)
)
register(Reader(JSONL_FORMAT, "zett-agent JSONLExtension turn file", _sniff_jsonl, read_jsonl))
register(Reader(ZETTCODE_FORMAT, "zettcode session tree (<workspace>/<id>/data.jsonl)", _sniff_zettcode, read_zettcode))


# --- writing ----------------------------------------------------------------------------------


def _disk_full(error: BaseException) -> bool:
    """Whether SQLite (raw, or wrapped by SQLAlchemy) failed because the disk or the quota is full."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, sqlite3.Error) and (
            "disk is full" in str(cause) or getattr(cause, "sqlite_errorcode", None) == 13  # SQLITE_FULL
        ):
            return True
        cause = cause.__cause__ or getattr(cause, "orig", None)
    return False


def write_sqlite(conversations: list[Conversation], path: str | Path, *, overwrite: bool = False) -> Path:
    """Write conversations to a new zett-agent SQLite database through zett-agent's storage API.

    Each user turn becomes one request (the system prompt is stored at the start
    of every request, as the runtime does); recorded usage goes with its assistant
    message. Probes and native compactions (a zett-agent database has no place for
    them) go to the sidecar beside it (``<stem>.probes.json``), which the reader attaches
    again. Never writes into an existing database: the database is built beside
    ``path`` and moved into place only when complete, replacing an existing file
    only with ``overwrite=True`` and never a file it was read from.

    The sidecar is part of the output: an existing one is replaced only with ``overwrite=True``,
    and then by this import's (or removed, when it has no probes nor native compactions), never
    left to be attached to the new database. Both are built first; the sidecar is put in place
    only after the database, so a failure before leaves the old database and the old sidecar.
    """
    inputs = [f for c in conversations for f in c.input_files()]
    path = check_output(path, inputs, overwrite=overwrite)
    sidecar = {
        c.id: {
            "probes": [p.to_dict() for p in c.probes],
            "native_compactions": [asdict(n) for n in c.native_compactions],
        }
        for c in conversations
        if c.probes or c.native_compactions
    }
    sidecar_path = check_output(probes_sidecar_path(path), inputs, overwrite=overwrite)
    if not path.parent.is_dir():
        raise InputError(path, None, f"folder {path.parent} does not exist")
    published = False
    try:
        with contextlib.ExitStack() as sidecar_written:
            if sidecar:  # built now, put in place when this block ends: after the database
                staged = sidecar_written.enter_context(atomic_path(sidecar_path, overwrite=overwrite))
                staged.write_text(json.dumps(sidecar, indent=1, ensure_ascii=False, default=str) + "\n", "utf-8")
            _write_database(conversations, path, overwrite)
            published = True
    except BaseException:
        if published and overwrite:  # the new sidecar failed: the old one must not describe the new database
            sidecar_path.unlink(missing_ok=True)
        raise
    if not sidecar:
        try:
            sidecar_path.unlink(missing_ok=True)  # the replaced database's
        except OSError as error:
            raise write_failed(sidecar_path, error) from error
        finally:
            release_output(sidecar_path)
    return path


def _write_database(conversations: list[Conversation], path: Path, overwrite: bool) -> None:
    """Build the zett-agent database of ``conversations`` aside and put it in place at ``path``."""
    import asyncio

    from zett_agent.storage import SQLiteSessionStorage

    async def write(temporary: Path, check: Callable[[], None]) -> None:
        storage = SQLiteSessionStorage(temporary)
        try:
            for conversation in conversations:
                check()  # Ctrl-C acts between two writes, never inside one (nor inside the close)
                await storage.create_session(session_id=conversation.id, title=conversation.metadata.get("title"))
                system = [m for m in conversation.messages if isinstance(m, SystemMessage)]
                for turn in conversation.turns:
                    request_id = f"{conversation.id}-turn-{turn.index}"
                    for message in system:
                        await storage.append(conversation.id, request_id, message)
                    for index in range(turn.start, turn.end):
                        check()
                        await storage.append(
                            conversation.id,
                            request_id,
                            conversation.messages[index],
                            usage=conversation.usage.get(index),
                        )
        finally:
            await storage.close()

    with atomic_path(path, overwrite=overwrite) as temporary:
        try:
            with signals_deferred() as check:
                asyncio.run(write(temporary, check))
            connection = sqlite3.connect(temporary)
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("PRAGMA journal_mode=DELETE")
            connection.close()
        except Exception as error:
            if _disk_full(error):  # SQLite says so in its own words, through zett-agent's storage
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(temporary)) from error
            raise
        finally:
            for suffix in ("-wal", "-shm", "-journal"):
                temporary.with_name(temporary.name + suffix).unlink(missing_ok=True)
