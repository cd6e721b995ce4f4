"""A user's SQLite database as SQLite shows it to a reader at this moment: committed data only.

Another process may be writing the database while zett_lab reads it, or may have been killed
half-way through a write. A byte copy of the file would then hold uncommitted pages (or pages
a hot rollback journal must still undo); zett_lab leaves that to SQLite's own machinery:

* Normally the file is opened read-only (``mode=ro``, and ``readonly_shm`` so a WAL index is
  never written either) and copied in one read transaction, through SQLite's online backup API,
  into a private in-memory database. SQLite's locks and WAL handling decide what is committed.
* A writer holding its lock makes the read wait, at most :data:`LOCK_WAIT_S` seconds; then
  :class:`~zett_lab.errors.InputError` says the database is locked by another process.
* Where SQLite cannot read in place without writing beside the user's file (a hot rollback
  journal left by a killed writer needs rolling back; a WAL database without its ``-wal``
  or ``-shm`` would get new ones), the file and its journal or WAL are copied into a private
  folder and SQLite rolls back or recovers *there*. The copy counts only if no byte of the
  originals changed while it was taken; otherwise it is taken again until the same deadline.

The user's files stay byte-identical and nothing is left beside them.

Example::

    with private_copy(Path("sessions.sqlite")) as connection:
        rows = connection.execute("SELECT id FROM agent_sessions").fetchall()
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from ..errors import InputError

#: Seconds to wait for another process's lock before reporting the database as locked.
LOCK_WAIT_S = 10.0
#: Files SQLite keeps beside a database that hold committed or to-be-undone pages (not the -shm index).
_JOURNALS = ("-journal", "-wal")
_BUSY, _READONLY, _CANTOPEN = 5, 8, 14  # SQLite primary result codes
#: Result codes by message, for Pythons whose sqlite3 errors carry no code (3.10).
_CODES_BY_MESSAGE = {
    "database is locked": _BUSY,
    "attempt to write a readonly database": _READONLY,
    "unable to open database file": _CANTOPEN,
}


class _Changed(Exception):
    """The database is locked, or changed while it was copied: try again until the deadline."""


@contextmanager
def private_copy(path: Path) -> Iterator[sqlite3.Connection]:
    """A private in-memory copy of what SQLite shows a reader of ``path`` now.

    Raises :class:`InputError` naming the file when it stays locked for :data:`LOCK_WAIT_S`
    seconds, and for SQL errors raised while the block reads the copy.
    """
    deadline = time.monotonic() + LOCK_WAIT_S
    real = path.resolve()  # SQLite keeps a symlinked database's journal and WAL beside the target
    while True:
        try:
            connection = _committed_state(real, deadline)
            break
        except _Changed:
            if time.monotonic() >= deadline:
                raise InputError(
                    path, None, f"locked by another process; close it or retry (waited {LOCK_WAIT_S:g} s)"
                ) from None
            time.sleep(0.05)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as error:
            raise InputError(path, None, f"cannot read as an SQLite database ({_reason(error)})") from error
        except OSError as error:
            raise InputError(path, None, f"cannot read: {error.strerror or error}") from error
    try:
        yield connection
    except (sqlite3.DatabaseError, UnicodeDecodeError) as error:
        raise InputError(path, None, f"cannot read as a zett-agent session database ({_reason(error)})") from error
    finally:
        connection.close()


def _reason(error: Exception) -> str:
    # SQLite quotes a damaged schema in its message, which Python then fails to decode.
    return "damaged: SQLite reports text that is not UTF-8" if isinstance(error, UnicodeDecodeError) else str(error)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _committed_state(path: Path, deadline: float) -> sqlite3.Connection:
    with path.open("rb") as handle:
        header = handle.read(100)
    if header[18:19] == b"\x02" and not _sidecar(path, "-wal").exists():
        # A WAL database with no -wal is fully checkpointed, but opening it would create -wal and -shm.
        return _recovered_copy(path)
    source = sqlite3.connect(
        f"{path.absolute().as_uri()}?mode=ro&readonly_shm=1",
        uri=True,
        isolation_level=None,
        timeout=max(0.0, deadline - time.monotonic()),
    )
    try:
        source.execute("BEGIN")
        source.execute("SELECT count(*) FROM sqlite_master").fetchone()  # takes the read lock, or waits for it
        return _in_memory(source)
    except sqlite3.OperationalError as error:
        code = _primary_code(error)
        if code == _BUSY:
            raise _Changed from error
        if code in (_READONLY, _CANTOPEN):  # hot journal, WAL needing recovery, no -shm, read-only folder
            return _recovered_copy(path)
        raise
    finally:
        source.close()


def _primary_code(error: sqlite3.Error) -> int | None:
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if code is not None else _CODES_BY_MESSAGE.get(str(error))


def _in_memory(source: sqlite3.Connection) -> sqlite3.Connection:
    """Every page of ``source`` in one read transaction (the caller's, if open) into a new in-memory database."""
    memory = sqlite3.connect(":memory:", isolation_level=None)
    # Text that is not UTF-8 is kept (as lone surrogates) for the readers' normalisation, not refused.
    memory.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    source.backup(memory)
    return memory


def _recovered_copy(path: Path) -> sqlite3.Connection:
    """Copy the database with its journal or WAL into a private folder and let SQLite roll back or recover there."""
    with tempfile.TemporaryDirectory(prefix="zett-lab-db-") as scratch:
        copy = Path(scratch) / "copy.sqlite"
        copied = {suffix: _digest(_sidecar(path, suffix), _sidecar(copy, suffix)) for suffix in ("", *_JOURNALS)}
        if copied[""] is None:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path))
        if copied != {suffix: _digest(_sidecar(path, suffix)) for suffix in copied}:
            raise _Changed
        connection = sqlite3.connect(copy, isolation_level=None)
        try:
            return _in_memory(connection)
        finally:
            connection.close()


def _digest(path: Path, copy_to: Path | None = None) -> str | None:
    """The SHA-256 of a file's bytes now (None when there is no such file), copied to ``copy_to`` on the way."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as reader, copy_to.open("wb") if copy_to else nullcontext() as writer:
            while chunk := reader.read(1 << 20):
                digest.update(chunk)
                if writer is not None:
                    writer.write(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()
