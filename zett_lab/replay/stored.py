"""The stored view: a replay written through zett-agent's own SQLite session storage.

With ``replay(..., store=path)`` the replay runs with ``SQLiteSessionExtension``
as its history (exactly as an application would), so the file holds the raw
log, the snapshots and the raw tail the way the user's application stores them.
:func:`stored_view` reads that file back (from a private copy) as DataFrames.

Example::

    >>> trace = zett_lab.replay(  # doctest: +SKIP
    ...     conversation, max_tokens=100, keep_recent_tokens=10, store="replay.sqlite"
    ... )
    >>> view = stored_view("replay.sqlite", conversation.id)  # doctest: +SKIP
    >>> view.raw, view.snapshots, view.raw_tail  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from zett_agent.extensions.sqlite import SQLiteSessionExtension
from zett_agent.storage import decode_messages

from ..errors import InputError, SettingError
from ..load.conversation import role_of
from ..load.zett import private_copy


def storage_extension(path: str | Path, session_id: str) -> SQLiteSessionExtension:
    """zett-agent's SQLite session extension on a new file; refuses anything that could touch a user's data."""
    path = Path(path)
    if not path.parent.is_dir():
        raise SettingError(f"store={str(path)!r}: folder {str(path.parent)!r} does not exist")
    if path.exists():
        detail = ""
        if path.stat().st_size and path.read_bytes()[:16] == b"SQLite format 3\x00":
            with private_copy(path) as connection:
                try:
                    found = connection.execute("SELECT 1 FROM agent_sessions WHERE id = ?", (session_id,)).fetchone()
                except Exception:  # noqa: BLE001 - only adds detail to the error raised below
                    found = None
            if found:
                detail = f" and already holds a session with id {session_id!r}"
        raise SettingError(
            f"store={str(path)!r} already exists{detail}; zett_lab never appends to an existing database"
        )
    return SQLiteSessionExtension(path)


@dataclass(frozen=True, slots=True)
class StoredView:
    """What zett-agent's storage holds for one session.

    Attributes:
        raw: The append-only raw log, one row per message:
            ``sequence, request_id, kind, text, input_tokens, output_tokens``.
        snapshots: One row per checkpoint: ``version, compacted_through_sequence, summary``.
        raw_tail: The raw-log rows after the latest snapshot's boundary (what a restore replays verbatim).
    """

    raw: pd.DataFrame
    snapshots: pd.DataFrame
    raw_tail: pd.DataFrame


def stored_view(path: str | Path, session_id: str) -> StoredView:
    """Read one session's raw log and snapshots from a zett-agent database, without modifying it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, "no such file")
    with private_copy(path) as connection:
        rows = connection.execute(
            "SELECT sequence, request_id, message_json, input_tokens, output_tokens FROM raw_messages"
            " WHERE session_id = ? ORDER BY sequence",
            (session_id,),
        ).fetchall()
        if not rows:
            raise InputError(path, f"session {session_id!r}", "no such session in this database")
        snapshot_rows = connection.execute(
            "SELECT version, compacted_through_sequence, message_json FROM session_snapshots"
            " WHERE session_id = ? ORDER BY version",
            (session_id,),
        ).fetchall()
    raw = pd.DataFrame(
        [
            {
                "sequence": sequence,
                "request_id": request_id,
                "kind": role_of(message),
                "text": _text(message),
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
            for sequence, request_id, message_json, input_tokens, output_tokens in rows
            for message in decode_messages(message_json)
        ]
    )
    snapshots = pd.DataFrame(
        [
            {
                "version": version,
                "compacted_through_sequence": through,
                "summary": _text(decode_messages(message_json)[0]),
            }
            for version, through, message_json in snapshot_rows
        ],
        columns=["version", "compacted_through_sequence", "summary"],
    )
    boundary = int(snapshots["compacted_through_sequence"].iloc[-1]) if len(snapshots) else 0
    return StoredView(raw=raw, snapshots=snapshots, raw_tail=raw[raw["sequence"] > boundary].reset_index(drop=True))


def _text(message) -> str:
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else getattr(message, "text", str(content))


def link_snapshots(compactions: pd.DataFrame, view: StoredView) -> pd.DataFrame:
    """Add ``snapshot_version`` and ``compacted_through_sequence`` to each applied compaction.

    The storage writes one snapshot per applied compaction, in order, so the
    n-th applied compaction is snapshot version n.
    """
    linked = compactions.copy()
    linked["snapshot_version"] = pd.array([None] * len(linked), dtype="Int64")
    linked["compacted_through_sequence"] = pd.array([None] * len(linked), dtype="Int64")
    applied = linked.index[linked["applied"].fillna(False).astype(bool)]
    if len(applied) != len(view.snapshots):
        raise ValueError(f"{len(applied)} applied compactions but {len(view.snapshots)} stored snapshots")
    linked.loc[applied, "snapshot_version"] = view.snapshots["version"].to_numpy()
    linked.loc[applied, "compacted_through_sequence"] = view.snapshots["compacted_through_sequence"].to_numpy()
    return linked
