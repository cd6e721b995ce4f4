"""A file at the cache path that is not SQLite at all (a JSON log, notes) is the user's: never moved, never changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zett_lab.summarizers import CacheError, SummaryCache
from zett_lab.summarizers.cache import SQLITE_HEADER

NOT_SQLITE = st.binary(min_size=1, max_size=4096).filter(lambda data: not data.startswith(SQLITE_HEADER[:1]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=NOT_SQLITE)
def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "mylog.json"
    path.write_bytes(content)
    with pytest.raises(CacheError) as error:
        SummaryCache(path)
    assert str(error.value) == (
        f"summary cache {path}: not an SQLite database, so not a summary cache; it was left untouched. "
        "Point the cache elsewhere (SummaryCache(path=...) or ZETT_LAB_CACHE)."
    )
    assert path.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["mylog.json"], "nothing moved aside, no -wal or -shm"


def test_a_json_log_named_in_zett_lab_cache_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mylog.json"
    path.write_text('{"messages": []}\n')
    monkeypatch.setenv("ZETT_LAB_CACHE", str(path))
    with pytest.raises(CacheError, match="not an SQLite database"):
        SummaryCache()
    assert path.read_text() == '{"messages": []}\n' and sorted(os.listdir(tmp_path)) == ["mylog.json"]


def test_a_fifo_at_the_cache_path_is_refused_without_being_opened(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    os.mkfifo(path)
    with pytest.raises(CacheError, match=r"is a FIFO \(named pipe\), not a file; it was left untouched"):
        SummaryCache(path)
    assert sorted(os.listdir(tmp_path)) == ["cache.sqlite"]


def _locks_on(path) -> int:
    """POSIX locks this process holds on ``path`` (from /proc/locks, by the file's inode)."""
    inode = os.stat(path).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if line.split()[4] == str(os.getpid()) and line.split()[5].endswith(f":{inode}"))


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="reads the kernel's lock table (Linux)")
def test_reading_a_cache_files_header_never_drops_the_locks_of_a_connection_open_on_it(tmp_path):
    """Closing any descriptor of a file drops every POSIX lock the process holds on it: a second cache on the same
    file (each replay opens one) must not read the header again while the first one's connection holds its locks
    (without them another process may reset the write-ahead log under it: "database disk image is malformed")."""
    path = tmp_path / "c.sqlite"
    first = SummaryCache(path)
    connection = first._conn()
    connection.execute("BEGIN")
    connection.execute("SELECT count(*) FROM summaries").fetchall()  # a read transaction: it holds its locks
    held = _locks_on(path)
    assert held > 0
    SummaryCache(path)
    assert _locks_on(path) == held
    connection.execute("COMMIT")
