"""A user's SQLite database is read as SQLite shows it to a reader: committed data, or "locked".

A second process writes the database for real: it holds a write transaction whose pages were
spilled to the file (or the WAL), or it is killed with SIGKILL half-way and leaves a hot journal.
zett_lab must return the committed state (exactly what the sqlite3 module shows), or say the
database is locked; never the uncommitted text, never "malformed". The user's files stay
byte-identical and nothing is left beside them, also in a read-only folder.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import zett_lab
from tests.conftest import FIXTURES
from tests.helpers import coding_conversation
from tests.readonly import read_only_folder
from zett_lab import InputError
from zett_lab.load import committed
from zett_lab.load.committed import private_copy
from zett_lab.load.zett import write_sqlite

#: A writer that changes every message and the title, with a page cache so small that the change
#: spills into the database file (rollback journal) or the WAL before it is committed. It commits
#: nothing unless told to commit a first, smaller change ("commit-first").
WRITER = """
import sqlite3, sys, time
path, journal_mode, lock, extra = sys.argv[1:5]
connection = sqlite3.connect(path, isolation_level=None)
connection.execute(f"PRAGMA journal_mode={journal_mode}")
connection.execute("PRAGMA wal_autocheckpoint=0")
connection.execute("PRAGMA cache_size=2")
if extra == "commit-first":
    connection.execute("UPDATE agent_sessions SET title = 'committed by the writer'")
connection.execute(f"BEGIN {lock}")
if extra == "small":
    connection.execute("UPDATE agent_sessions SET title = 'UNCOMMITTED'")
else:
    connection.execute("UPDATE raw_messages SET message_json = replace(message_json, 'Turn', 'UNCOMMITTED')")
    connection.execute("UPDATE agent_sessions SET title = 'UNCOMMITTED'")
print("ready", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A zett-agent database big enough that a small page cache spills (written once: storage syncs every message)."""
    return write_sqlite(
        [coding_conversation(turns=10, output_lines=80)], tmp_path_factory.mktemp("template") / "sessions.sqlite"
    )


@pytest.fixture
def make_database(template):
    def make(folder: Path, journal_mode: str) -> Path:
        folder.mkdir(exist_ok=True)
        path = folder / "sessions.sqlite"
        shutil.copyfile(template, path)
        with closing(sqlite3.connect(path)) as connection:
            connection.execute(f"PRAGMA journal_mode={journal_mode}")
        return path

    return make


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.iterdir())}


class Writer:
    """The second process: start it, wait until its transaction is open, kill it."""

    def __init__(self, path: Path, journal_mode: str, lock: str = "EXCLUSIVE", extra: str = "") -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), journal_mode, lock, extra], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout.readline().strip() == "ready", "the writer did not start its transaction"

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture
def writer_process():
    started: list[Writer] = []

    def start(*args, **kwargs) -> Writer:
        started.append(Writer(*args, **kwargs))
        return started[-1]

    yield start
    for writer in started:
        if writer.process.poll() is None:
            writer.kill()


def what_sqlite3_shows(path: Path, scratch: Path) -> list[tuple]:
    """The rows the sqlite3 module returns for a copy of the database with its journal (SQLite rolls back the copy)."""
    scratch.mkdir()
    for suffix in ("", "-journal", "-wal"):
        source = path.with_name(path.name + suffix)
        if source.exists():
            shutil.copyfile(source, scratch / (path.name + suffix))
    with closing(sqlite3.connect(scratch / path.name)) as connection:
        return rows(connection)


def rows(connection: sqlite3.Connection) -> list[tuple]:
    titles = connection.execute("SELECT id, title FROM agent_sessions ORDER BY id").fetchall()
    return titles + connection.execute("SELECT sequence, message_json FROM raw_messages ORDER BY sequence").fetchall()


# -- (a) a live writer with uncommitted pages spilled ---------------------------------------------------------


def test_a_writer_holding_spilled_uncommitted_pages_makes_the_database_locked_never_wrong(
    tmp_path, make_database, writer_process, monkeypatch
):
    monkeypatch.setattr(committed, "LOCK_WAIT_S", 0.5)
    path = make_database(tmp_path / "user", "DELETE")
    writer_process(path, "DELETE")
    assert b"UNCOMMITTED" in path.read_bytes(), (
        "the writer's pages did not reach the file; the test would prove nothing"
    )
    during = files(path.parent)
    assert sorted(during) == ["sessions.sqlite", "sessions.sqlite-journal"]
    with pytest.raises(InputError) as error:
        zett_lab.load(path)
    assert str(error.value) == f"{path}: locked by another process; close it or retry (waited 0.5 s)"
    assert files(path.parent) == during


def test_a_writer_holding_only_its_reserved_lock_does_not_stop_a_committed_read(
    tmp_path, make_database, writer_process
):
    path = make_database(tmp_path / "user", "DELETE")
    original = zett_lab.load(path)
    writer_process(path, "DELETE", lock="IMMEDIATE", extra="small")
    before = files(path.parent)
    loaded = zett_lab.load(path)
    assert loaded.messages == original.messages and loaded.metadata["title"] == original.metadata["title"]
    assert files(path.parent) == before


def test_a_wal_writer_with_spilled_uncommitted_frames_is_read_as_committed(tmp_path, make_database, writer_process):
    path = make_database(tmp_path / "user", "WAL")
    original = zett_lab.load(path)
    writer_process(path, "WAL", lock="IMMEDIATE", extra="commit-first")
    wal = path.with_name(path.name + "-wal")
    assert b"UNCOMMITTED" in wal.read_bytes(), "the writer's frames did not reach the WAL; the test would prove nothing"
    before = files(path.parent)
    loaded = zett_lab.load(path)
    assert loaded.metadata["title"] == "committed by the writer"
    assert loaded.messages == original.messages
    assert not any("UNCOMMITTED" in str(m.content) for m in loaded.messages)
    after = files(path.parent)
    # The -shm is the live writer's shared memory (it changes it itself); the data files are untouched.
    assert sorted(after) == sorted(before)
    assert {n: b for n, b in after.items() if not n.endswith("-shm")} == {
        n: b for n, b in before.items() if not n.endswith("-shm")
    }


# -- (b) a writer killed half-way -----------------------------------------------------------------------------


def test_a_killed_writers_hot_journal_is_rolled_back_privately_as_sqlite_does(tmp_path, make_database, writer_process):
    path = make_database(tmp_path / "user", "DELETE")
    original = zett_lab.load(path)
    writer_process(path, "DELETE").kill()
    journal = path.with_name(path.name + "-journal")
    assert journal.exists() and b"UNCOMMITTED" in path.read_bytes(), "no hot journal; the test would prove nothing"
    before, before_mtimes = files(path.parent), mtimes(path.parent)

    loaded = zett_lab.load(path)
    with private_copy(path) as connection:
        ours = rows(connection)

    assert files(path.parent) == before and mtimes(path.parent) == before_mtimes  # the user's journal stays hot
    assert ours == what_sqlite3_shows(path, tmp_path / "sqlite3-view")
    assert loaded.messages == original.messages and loaded.metadata["title"] == original.metadata["title"]


def test_a_hot_journal_is_found_beside_the_target_of_a_symlink(tmp_path, make_database, writer_process):
    path = make_database(tmp_path / "user", "DELETE")
    original = zett_lab.load(path)
    writer_process(path, "DELETE").kill()
    link = tmp_path / "elsewhere" / "link.sqlite"
    link.parent.mkdir()
    link.symlink_to(path)
    before = files(path.parent)
    loaded = zett_lab.load(link)
    assert loaded.messages == original.messages
    assert files(path.parent) == before and sorted(p.name for p in link.parent.iterdir()) == ["link.sqlite"]


@pytest.mark.parametrize("shm", ["kept", "removed"])
def test_a_killed_wal_writer_leaves_the_committed_frames_readable(tmp_path, make_database, writer_process, shm):
    path = make_database(tmp_path / "user", "WAL")
    writer_process(path, "WAL", lock="IMMEDIATE", extra="commit-first").kill()
    if shm == "removed":
        path.with_name(path.name + "-shm").unlink()
    before = files(path.parent)
    loaded = zett_lab.load(path)
    assert loaded.metadata["title"] == "committed by the writer"
    assert not any("UNCOMMITTED" in str(m.content) for m in loaded.messages)
    assert files(path.parent) == before  # also the -shm: no process has it open, and it is never written


# -- the user's files, in every journal state, also in a read-only folder -------------------------------------


def _state(path: Path, state: str, writer_process) -> None:
    """Leave the database as a user might: cleanly closed, or with a killed writer's journal or WAL beside it."""
    if state == "killed writer":
        mode = "WAL" if path.read_bytes()[18:19] == b"\x02" else "DELETE"
        writer_process(path, mode, lock="IMMEDIATE" if mode == "WAL" else "EXCLUSIVE", extra="commit-first").kill()


@pytest.mark.parametrize("journal_mode", ["DELETE", "WAL", "TRUNCATE", "PERSIST"])
@pytest.mark.parametrize("state", ["closed", "killed writer"])
@pytest.mark.parametrize("folder", ["writable", "read-only"])
def test_the_users_files_stay_byte_identical_and_nothing_is_left_beside_them(
    tmp_path, make_database, writer_process, journal_mode, state, folder
):
    path = make_database(tmp_path / "user", journal_mode)
    _state(path, state, writer_process)
    before, before_mtimes = files(path.parent), mtimes(path.parent)
    if folder == "read-only":
        with read_only_folder(path.parent):
            loaded = zett_lab.load_all(path)
    else:
        loaded = zett_lab.load_all(path)
    assert files(path.parent) == before and mtimes(path.parent) == before_mtimes
    assert [c.id for c in loaded] == ["hand-made"]
    if state == "killed writer":
        assert loaded[0].metadata["title"] == "committed by the writer"
        assert not any("UNCOMMITTED" in str(m.content) for m in loaded[0].messages)


def test_a_live_writer_in_the_same_process_is_read_as_committed(tmp_path, make_database):
    """The notebook case: the user's own connection is open in this process with committed WAL frames."""
    path = make_database(tmp_path / "user", "WAL")
    writer = sqlite3.connect(path)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("UPDATE agent_sessions SET title='live'")
        writer.commit()
        writer.execute("UPDATE agent_sessions SET title='not yet'")  # an open, uncommitted transaction
        before = files(path.parent)
        assert zett_lab.load(path).metadata["title"] == "live"
        after = files(path.parent)
        assert sorted(after) == sorted(before)
        assert after["sessions.sqlite"] == before["sessions.sqlite"]
        assert after["sessions.sqlite-wal"] == before["sessions.sqlite-wal"]
    finally:
        writer.close()


def test_the_bundled_fixture_database_is_never_modified(tmp_path):
    folder = tmp_path / "user"
    folder.mkdir()
    path = folder / "sessions.sqlite"
    shutil.copy2(FIXTURES / "sessions.sqlite", path)
    before, before_mtimes = files(folder), mtimes(folder)
    conversations = zett_lab.load_all(path)
    zett_lab.load(path, session=conversations[0].id)
    with pytest.raises(InputError):
        zett_lab.load(path, session="does-not-exist")
    assert files(folder) == before and mtimes(folder) == before_mtimes


def test_a_damaged_database_is_one_input_error_naming_it(tmp_path, make_database):
    path = make_database(tmp_path / "user", "DELETE")
    data = bytearray(path.read_bytes())
    data[4096 : 4096 * 3] = b"\xff" * (4096 * 2)  # wreck pages 2 and 3, keep the header
    path.write_bytes(bytes(data))
    with pytest.raises(InputError) as error:
        zett_lab.load(path)
    assert str(error.value).startswith(f"{path}: ")
