"""A persistent, content-addressed cache of summaries (one SQLite file).

Summary calls are the slow and costly part of a replay; the same request (same summarizer
identity, same reasoning effort, same messages) always gets the cached answer, across runs
and across processes.

Where the file lives, first match wins: the ``path`` argument (``":memory:"`` for a private in-memory cache),
the environment variable ``ZETT_LAB_CACHE`` (``off``, ``none``, ``0`` or ``false`` disable caching), then
``platformdirs.user_cache_dir("zett-lab")/summaries.sqlite``. A directory given as path gets ``summaries.sqlite``.

Safety: WAL journal, a busy timeout, and single-statement ``INSERT OR IGNORE`` writes, so two
processes can share one file and a process killed mid-write leaves only finished entries. A
damaged SQLite file (its header intact, the rest unreadable), a zett_lab cache with a broken schema, or
one whose pages are damaged (``PRAGMA quick_check`` when it is opened) is moved aside
(``NAME.corrupt-TIMESTAMP``) with a warning and rebuilt; an SQLite database that is not a zett_lab cache,
and a file that is not SQLite at all (a JSON log, notes), is never touched: it is an error. The check
reads the whole file, so a file is checked once as long as it is unchanged (the same file, size and
modification time): not again at each open in a process (each ``zett_lab.replay`` call opens the cache),
nor in the pool workers a checked cache is sent to.
Every other problem (a read-only folder, a full disk, a lock held too long) raises one
:class:`CacheError` naming the cache file and what to do.

Example::

    cache = SummaryCache()
    key = SummaryCache.key(summarizer_identity(model), request)
    hit = cache.get(key)
    if hit is None:
        ...  # call the model
        cache.put(key, CachedSummary(text, latency_s, input_tokens, output_tokens))
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypedDict

from zett_agent.model import ModelRequest

from ..errors import ZettLabError, warn
from ..files import kind_of
from .key_bytes import message_bytes

FORMAT = "zett-lab-summary-cache"
VERSION = 1
DEFAULT_FILENAME = "summaries.sqlite"
#: Seconds a writer waits for another process's lock before giving up.
BUSY_TIMEOUT_S = 30.0
_DISABLED_VALUES = {"off", "none", "0", "false", "no", "disabled"}
#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\0"
#: What a command-line user can do about a cache path that holds some other file (Python's: :func:`_other_file`).
ELSEWHERE_CLI = "point ZETT_LAB_CACHE at a summary cache file elsewhere, or run without the cache (--no-cache)"
#: What a user can do about a cache that cannot be used.
_WHAT_TO_DO = (
    "point ZETT_LAB_CACHE at a file in a writable folder, or run without the cache (--no-cache, or ZETT_LAB_CACHE=off)"
)

#: The cache files whose pages :meth:`SummaryCache._check_pages` found whole, as ``(device, inode, size, modified)``,
#: here or in the process that sent a cache here: a check reads the whole file, and a report opens its cache per unit.
_CHECKED: set[tuple[int, int, int, int]] = set()
#: Cache files whose first bytes this process read (once: closing a descriptor drops its SQLite connections' locks).
_SQLITE_FILES: set[str] = set()
#: File states remembered at most (each check of a changed file adds one).
_CHECKED_KEPT = 64

_COLUMNS = ("key", "identity", "text", "latency_s", "input_tokens", "output_tokens", "reasoning", "created_at")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS summaries (
    key TEXT PRIMARY KEY,
    identity TEXT,
    text TEXT NOT NULL,
    latency_s REAL NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    reasoning TEXT,
    created_at REAL NOT NULL
);
INSERT OR IGNORE INTO meta (name, value) VALUES ('format', '{format}');
INSERT OR IGNORE INTO meta (name, value) VALUES ('version', '{version}');
"""


class CacheError(ZettLabError):
    """The summary cache file cannot be used; the message names the file and what is wrong."""


class _Corrupt(Exception):
    """Internal: the file is ours (or a damaged SQLite database) but unusable; rebuild it."""


class CacheKey(str):
    """A cache key (the hex digest) that remembers the summarizer identity it was made for."""

    identity: str

    def __new__(cls, digest: str, identity: str) -> CacheKey:
        key = super().__new__(cls, digest)
        key.identity = identity
        return key

    def __reduce__(self) -> tuple[Any, ...]:
        return CacheKey, (str(self), self.identity)


@dataclass(frozen=True)
class CachedSummary:
    """One cached summary call.

    Attributes:
        text: the summary text the model returned.
        latency_s: wall time of the original call, seconds.
        input_tokens, output_tokens: usage the model reported (None when it reported none).
        reasoning: the model's reasoning text, when it streamed any.
    """

    text: str
    latency_s: float
    input_tokens: int | None
    output_tokens: int | None
    reasoning: str | None = None


def default_cache_path() -> Path:
    """``user_cache_dir("zett-lab")/summaries.sqlite``."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("zett-lab")) / DEFAULT_FILENAME


def cache_file(path: str | os.PathLike[str] | None = None) -> Path | str | None:
    """The file a :class:`SummaryCache` made with ``path`` uses (see the module docstring), without opening it:
    ``":memory:"``, or None when ``ZETT_LAB_CACHE`` turns the cache off."""
    if path is None:
        configured = os.environ.get("ZETT_LAB_CACHE", "").strip()
        if configured.lower() in _DISABLED_VALUES:
            return None
        if not configured:
            return default_cache_path()
        path = configured
    if str(path) == ":memory:":
        return ":memory:"
    resolved = Path(path).expanduser()
    return resolved / DEFAULT_FILENAME if resolved.is_dir() else resolved


class CacheStats(TypedDict):
    """What a summary cache holds and how it served (:meth:`SummaryCache.stats`)."""

    path: str | None
    enabled: bool
    entries: int
    identities: int
    hits: int
    misses: int
    hit_rate: float | None
    size_bytes: int | None


class SummaryCache:
    """Persistent content-addressed summary cache (see the module docstring).

    Args:
        path: the cache file, a directory for it, ``":memory:"``, or None for
            ``ZETT_LAB_CACHE`` / the user cache directory.

    Attributes:
        hits, misses: lookups answered / not answered by this instance.
        path: the file (None when disabled, ``":memory:"`` in memory).
        enabled: False for :meth:`disabled` caches (every lookup misses, puts are dropped).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.hits = 0
        self.misses = 0
        self.enabled = True
        self._lock = threading.RLock()
        self._connection: sqlite3.Connection | None = None
        self._pid: int | None = None
        self.path: Path | str | None = cache_file(path)
        if self.path is None:
            self.enabled = False
            return
        # Open now so a bad file is reported where the cache is created.
        self._conn()

    @classmethod
    def disabled(cls) -> SummaryCache:
        """A cache that never stores anything: every lookup is a miss."""
        cache = cls.__new__(cls)
        cache.hits = 0
        cache.misses = 0
        cache.enabled = False
        cache.path = None
        cache._lock = threading.RLock()
        cache._connection = None
        cache._pid = None
        return cache

    @classmethod
    def memory(cls) -> SummaryCache:
        """A private in-memory cache (lost when the instance goes away)."""
        return cls(":memory:")

    # -- pickling (for process pools): reopen in the new process ------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = _file_state(self.path)
        checked = state if state in _CHECKED else None
        return {"path": self.path, "enabled": self.enabled, "checked": checked}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.hits = 0
        self.misses = 0
        self.enabled = state["enabled"]
        self.path = state["path"]
        if state.get("checked") is not None:
            _remember_checked(state["checked"])
        self._lock = threading.RLock()
        self._connection = None
        self._pid = None

    def __repr__(self) -> str:
        where = self.path if self.enabled else "disabled"
        return f"<SummaryCache {where} hits={self.hits} misses={self.misses}>"

    # -- keys -------------------------------------------------------------------------------------

    @staticmethod
    def key(identity: str, request: ModelRequest) -> CacheKey:
        """SHA-256 over the summarizer identity, the reasoning effort and the exact request messages.

        Messages are encoded with :func:`zett_agent.storage.encode_messages` (the instructions
        are the first message, so a changed prompt is a different key), one message at a time
        and remembered by value (``key_bytes.message_bytes``): the bytes hashed are those of
        encoding the whole list at once. The key carries the identity, so :meth:`put` records it in the
        ``identity`` column.
        """
        if not isinstance(identity, str) or not identity:
            raise ValueError("identity must be a non-empty string")
        messages = message_bytes(request.messages)
        effort = getattr(request.reasoning_effort, "value", request.reasoning_effort)
        digest = hashlib.sha256()
        digest.update(json.dumps([FORMAT, VERSION, identity, str(effort)], ensure_ascii=False).encode())
        digest.update(b"\0")
        digest.update(messages)
        return CacheKey(digest.hexdigest(), identity)

    # -- connection -------------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                return self._connection
            # A connection inherited through fork must not be used by the child.
            self._connection = None
            connection = self._open()
            self._connection, self._pid = connection, os.getpid()
            return connection

    @contextmanager
    def _reporting(self, action: str) -> Iterator[None]:
        """Turn any SQLite or file-system failure while doing ``action`` into one CacheError naming the file."""
        try:
            yield
        except (sqlite3.Error, OSError) as error:
            detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
            if isinstance(error, sqlite3.OperationalError) and "locked" in detail:
                detail = f"locked by another process for {BUSY_TIMEOUT_S:g} s"
            raise self._failure(action, detail) from error

    def _failure(self, action: str, detail: str) -> CacheError:
        return CacheError(f"summary cache {self.path}: cannot {action} ({detail}); {_WHAT_TO_DO}")

    def _connect(self) -> sqlite3.Connection:
        target = str(self.path)
        if isinstance(self.path, Path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        return connection

    def _open(self) -> sqlite3.Connection:
        with self._reporting("open it"):
            self._refuse_other_files()
            connection = self._connect()
            try:
                self._prepare(connection)
                return connection
            except _Corrupt as problem:
                connection.close()
                self._move_aside(str(problem))
            except sqlite3.DatabaseError as error:
                connection.close()
                if not _not_a_database(error):
                    raise
                self._move_aside(f"damaged SQLite database: {error}")
        with self._reporting("rebuild it"):
            connection = self._connect()
            try:
                self._prepare(connection)
            except _Corrupt as problem:
                connection.close()
                raise self._failure("rebuild it", str(problem)) from None
            return connection

    def _refuse_other_files(self) -> None:
        """Raise CacheError for a file that is not empty and does not begin as SQLite's do: a user's own (a JSON
        log, notes), never moved aside nor written (SQLite takes a short one for an empty database). Once per file
        in a process (:data:`_SQLITE_FILES`)."""
        if not isinstance(self.path, Path) or str(self.path) in _SQLITE_FILES:
            return
        try:
            kind = kind_of(self.path.stat().st_mode)
        except FileNotFoundError:
            _SQLITE_FILES.add(str(self.path))  # SQLite makes it
            return
        if kind != "file":  # a FIFO would block the read below
            raise _other_file(f"summary cache {self.path}: is a {kind}, not a file; it was left untouched")
        with self.path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
        if head and head != SQLITE_HEADER:
            raise _other_file(
                f"summary cache {self.path}: not an SQLite database, so not a summary cache; it was left untouched"
            )
        _SQLITE_FILES.add(str(self.path))

    def _prepare(self, connection: sqlite3.Connection) -> None:
        # Read before writing anything: a database that is not ours must stay untouched.
        tables = self._tables(connection)
        if tables:
            self._check(connection, tables)
            self._check_pages(connection)
        if self.path != ":memory:":
            _while_locked(lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone())
            connection.execute("PRAGMA synchronous = NORMAL")
        if not tables:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.format(format=FORMAT, version=VERSION).split(";"):
                    if statement.strip():
                        connection.execute(statement)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            self._check(connection, self._tables(connection))

    @staticmethod
    def _tables(connection: sqlite3.Connection) -> set[str]:
        return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _check(self, connection: sqlite3.Connection, tables: set[str]) -> None:
        """Raise CacheError for a foreign database, _Corrupt for a broken zett_lab cache."""
        foreign = f"{self.path}: this SQLite database is not a zett_lab summary cache ({{what}}); it was left untouched"
        if "meta" not in tables:
            raise _other_file(foreign.replace("{what}", "tables: " + ", ".join(sorted(tables))))
        try:
            meta = dict(connection.execute("SELECT name, value FROM meta").fetchall())
        except sqlite3.DatabaseError as error:
            raise _other_file(foreign.replace("{what}", f"its meta table is unreadable: {error}")) from error
        written_by = f"{self.path}: summary cache written by {{whom}} (format {meta.get('format')!r}, version "
        written_by += f"{meta.get('version')!r}; this one reads {FORMAT!r} version {VERSION}); it was left untouched "
        written_by += "(to use it, upgrade zett-lab to the version that wrote it)"
        if meta.get("format") != FORMAT:
            if "summaries" in tables and "version" in meta:  # zett_lab's layout under another format name
                raise _other_file(written_by.replace("{whom}", "another version of zett_lab"))
            raise _other_file(foreign.replace("{what}", f"format {meta.get('format')!r}"))
        try:
            version = int(meta.get("version", "0"))
        except ValueError:
            raise _Corrupt(f"unreadable cache version {meta.get('version')!r}") from None
        if version > VERSION:
            raise _other_file(written_by.replace("{whom}", "a newer zett_lab"))
        if version < VERSION:
            raise _Corrupt(f"old cache format version {version}")
        columns = tuple(row[1] for row in connection.execute("PRAGMA table_info(summaries)"))
        if columns != _COLUMNS:
            raise _Corrupt(f"summaries table has columns {columns}, expected {_COLUMNS}")

    def _check_pages(self, connection: sqlite3.Connection) -> None:
        """``PRAGMA quick_check``, unless this file is unchanged since it passed one (:data:`_CHECKED`)."""
        state = _file_state(self.path)
        if state is not None and state in _CHECKED:
            return
        damage = connection.execute("PRAGMA quick_check(1)").fetchone()[0]
        if damage != "ok":
            raise _Corrupt(f"damaged: {' '.join(damage.split())}")
        if state is not None:
            _remember_checked(state)

    def _move_aside(self, reason: str) -> None:
        if not isinstance(self.path, Path):  # pragma: no cover - memory databases cannot be corrupt
            raise CacheError(f"summary cache unusable: {reason}")
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            # Another process moved it first; it is rebuilding the cache too.
            return
        for suffix in ("-wal", "-shm"):
            sidecar = self.path.with_name(self.path.name + suffix)
            with contextlib.suppress(FileNotFoundError):
                os.replace(sidecar, aside.with_name(aside.name + suffix))
        warn(
            f"summary cache {self.path} was unusable ({reason}); moved it to {aside} and started an empty cache",
            stacklevel=5,
        )

    # -- API ----------------------------------------------------------------------------------------

    def get(self, key: str) -> CachedSummary | None:
        """The cached summary for ``key``, or None (counted in ``hits`` / ``misses``)."""
        if not self.enabled:
            with self._lock:
                self.misses += 1
            return None
        with self._lock, self._reporting("read it"):
            row = (
                self._conn()
                .execute(
                    "SELECT text, latency_s, input_tokens, output_tokens, reasoning FROM summaries WHERE key = ?",
                    (key,),
                )
                .fetchone()
            )
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return CachedSummary(
                text=row[0], latency_s=row[1], input_tokens=row[2], output_tokens=row[3], reasoning=row[4]
            )

    def put(self, key: str, summary: CachedSummary, *, identity: str | None = None) -> None:
        """Store ``summary`` under ``key`` (first writer wins; an existing entry is kept).

        ``identity`` (the summarizer's) defaults to the one a :meth:`key` carries.
        """
        if not isinstance(summary, CachedSummary):
            raise TypeError(f"put() takes a CachedSummary, not {type(summary).__name__}")
        if not summary.text or not summary.text.strip():
            raise ValueError("refusing to cache an empty summary")
        if not self.enabled:
            return
        with self._lock, self._reporting("write to it"):
            self._conn().execute(
                "INSERT OR IGNORE INTO summaries "
                "(key, identity, text, latency_s, input_tokens, output_tokens, reasoning, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    str(key),
                    identity or getattr(key, "identity", None),
                    summary.text,
                    float(summary.latency_s),
                    summary.input_tokens,
                    summary.output_tokens,
                    summary.reasoning,
                    time.time(),
                ),
            )

    def __contains__(self, key: object) -> bool:
        if not self.enabled or not isinstance(key, str):
            return False
        with self._lock, self._reporting("read it"):
            row = self._conn().execute("SELECT 1 FROM summaries WHERE key = ?", (key,)).fetchone()
        return row is not None

    def __len__(self) -> int:
        if not self.enabled:
            return 0
        with self._lock, self._reporting("read it"):
            return int(self._conn().execute("SELECT COUNT(*) FROM summaries").fetchone()[0])

    def stats(self) -> CacheStats:
        """``path``, ``enabled``, ``entries``, ``identities``, ``hits``, ``misses``, ``hit_rate``, ``size_bytes``."""
        lookups = self.hits + self.misses
        entries = identities = 0
        size = None
        if self.enabled:
            with self._lock, self._reporting("read it"):
                entries, identities = (
                    self._conn().execute("SELECT COUNT(*), COUNT(DISTINCT identity) FROM summaries").fetchone()
                )
            if isinstance(self.path, Path) and self.path.exists():
                size = sum(
                    p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal")) if p.exists()
                )
        return {
            "path": None if self.path is None else str(self.path),
            "enabled": self.enabled,
            "entries": int(entries),
            "identities": int(identities),
            "hits": self.hits,
            "misses": self.misses,
            "hit_rate": (self.hits / lookups) if lookups else None,
            "size_bytes": size,
        }

    def clear(self) -> None:
        """Delete every entry (the file stays)."""
        if not self.enabled:
            return
        with self._lock, self._reporting("clear it"):
            self._conn().execute("DELETE FROM summaries")

    def close(self) -> None:
        """Close the connection (the cache reopens on next use)."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None

    def __enter__(self) -> SummaryCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):  # the interpreter may be shutting down
            self.close()


def _file_state(path: Path | str | None) -> tuple[int, int, int, int] | None:
    """A cache file as :data:`_CHECKED` names it; None for a cache in memory, disabled, or not there."""
    if not isinstance(path, Path):
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _remember_checked(state: tuple[int, int, int, int]) -> None:
    if len(_CHECKED) >= _CHECKED_KEPT:
        _CHECKED.clear()
    _CHECKED.add(state)


def _while_locked(statement: Callable[[], object]) -> None:
    """Run ``statement`` again while SQLite says the database is locked, for up to :data:`BUSY_TIMEOUT_S`.

    A change to WAL needs the database alone; while another process holds its write lock (creating
    the tables of the same new cache) SQLite refuses at once instead of waiting the busy timeout, so
    of two processes opening one new cache together, one failed.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
        time.sleep(0.02)


#: What a ``cache=`` argument takes: a :class:`SummaryCache`, a path to one, None (or True) for the default
#: cache, False for none.
CacheSpec: TypeAlias = SummaryCache | str | os.PathLike[str] | bool | None


def resolve_cache(cache: CacheSpec) -> SummaryCache | None:
    """The SummaryCache a ``cache=`` argument names (:data:`CacheSpec`); None for none."""
    if cache is False:
        return None
    if cache is None or cache is True:
        return SummaryCache()
    if isinstance(cache, (str, os.PathLike)):
        return SummaryCache(cache)
    return cache


def _other_file(problem: str) -> CacheError:
    """The error for a cache path holding a file this zett_lab cannot use as its cache, with what to do in both forms."""
    return CacheError(
        f"{problem}. Point the cache elsewhere (SummaryCache(path=...) or ZETT_LAB_CACHE).",
        cli=f"{problem}; {ELSEWHERE_CLI}",
    )


def _not_a_database(error: sqlite3.DatabaseError) -> bool:
    message = str(error).lower()
    return "not a database" in message or "malformed" in message or "file is encrypted" in message
