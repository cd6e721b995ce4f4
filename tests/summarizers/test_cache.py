"""The persistent summary cache: keys, persistence, concurrency, crashes and bad files."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelRequest, ReasoningEffort
from zett_agent.storage import encode_messages

import zett_lab
from tests.helpers import CountingSummarizer, coding_conversation
from tests.readonly import read_only_folder
from tests.replay.test_tokens import edge_case_messages
from zett_lab.errors import ZettLabWarning
from zett_lab.summarizers import (
    CachedSummary,
    CacheError,
    SummaryCache,
    default_cache_path,
)
from zett_lab.summarizers import cache as cache_module

ROOT = Path(__file__).resolve().parents[2]


def request(*texts: str, instructions: str = "Summarize.", effort=ReasoningEffort.LOW) -> ModelRequest:
    return ModelRequest(
        messages=[
            SystemMessage(content=instructions),
            *(UserMessage(content=t) for t in texts),
            UserMessage(content="Produce the checkpoint now."),
        ],
        reasoning_effort=effort,
    )


def entry(text: str = "summary", **kw) -> CachedSummary:
    return CachedSummary(
        text=text,
        latency_s=kw.pop("latency_s", 1.5),
        input_tokens=kw.pop("input_tokens", 100),
        output_tokens=kw.pop("output_tokens", 10),
        **kw,
    )


# -- keys ------------------------------------------------------------------------------------------------


def test_key_covers_identity_effort_and_exact_messages():
    base = SummaryCache.key("truncate(budget=0.1)", request("a", "b"))
    assert len(base) == 64 and int(base, 16) >= 0
    assert SummaryCache.key("truncate(budget=0.1)", request("a", "b")) == base  # equal content, new objects
    different = [
        SummaryCache.key("truncate(budget=0.2)", request("a", "b")),
        SummaryCache.key("truncate(budget=0.1)", request("a", "b", effort=ReasoningEffort.HIGH)),
        SummaryCache.key("truncate(budget=0.1)", request("a", "c")),
        SummaryCache.key("truncate(budget=0.1)", request("a", "b", instructions="Other instructions.")),
        SummaryCache.key("truncate(budget=0.1)", request("b", "a")),
    ]
    assert len({base, *different}) == 6
    # message kinds matter (a checkpoint is not a user message with the same text)
    plain = ModelRequest(messages=[UserMessage(content="x")])
    checkpoint = ModelRequest(messages=[CompactedMessage(content="x")])
    assert SummaryCache.key("m", plain) != SummaryCache.key("m", checkpoint)
    # every message type, tool calls included, can be keyed
    full = ModelRequest(
        messages=[
            SystemMessage(content="s"),
            UserMessage(content="u"),
            AssistantMessage(content="", tool_calls=(ToolCall("c", "bash", {"command": "ls"}),)),
            ToolMessage(tool_call_id="c", name="bash", content="out"),
        ]
    )
    assert SummaryCache.key("m", full) != SummaryCache.key("m", plain)
    odd = ModelRequest(messages=[UserMessage(content="x", attributes={"when": object()})])
    assert len(SummaryCache.key("m", odd)) == 64
    with pytest.raises(ValueError):
        SummaryCache.key("", plain)


def reference_key(identity: str, request: ModelRequest) -> str:
    """The key from the whole request encoded at once: how the keys of every existing cache were made."""
    effort = getattr(request.reasoning_effort, "value", request.reasoning_effort)
    digest = hashlib.sha256()
    header = [cache_module.FORMAT, cache_module.VERSION, identity, str(effort)]
    digest.update(json.dumps(header, ensure_ascii=False).encode())
    digest.update(b"\0")
    digest.update(encode_messages(request.messages).encode("utf-8"))
    return digest.hexdigest()


def test_keys_from_remembered_messages_equal_keys_of_the_whole_request(fixture_conversations):
    spans = [edge_case_messages(), []]
    for conversation in fixture_conversations:
        messages = conversation.messages
        spans += [messages[:1], messages[: len(messages) // 2], messages[len(messages) // 3 :], messages]
    for span in spans:
        summarize = ModelRequest(
            messages=[SystemMessage(content="Summarize."), *span], reasoning_effort=ReasoningEffort.LOW
        )
        expected = reference_key("truncate(budget=0.1)", summarize)
        assert SummaryCache.key("truncate(budget=0.1)", summarize) == expected  # encoded now
        assert SummaryCache.key("truncate(budget=0.1)", summarize) == expected  # from remembered parts


def test_a_message_changed_in_place_changes_the_key():
    user = UserMessage(content="fix the login bug")
    call = AssistantMessage(content="", tool_calls=(ToolCall("c", "bash", {"command": "ls"}),))
    summarize = ModelRequest(messages=[SystemMessage(content="Summarize."), user, call])
    keys = [SummaryCache.key("m", summarize)]
    user.content = "fix the logout bug"
    keys.append(SummaryCache.key("m", summarize))
    user.attributes["source"] = "imported"
    keys.append(SummaryCache.key("m", summarize))
    call.tool_calls[0].arguments["command"] = "ls -la"
    keys.append(SummaryCache.key("m", summarize))
    call.tool_calls = (ToolCall("c", "bash", {"command": "ls -la", "timeout": 5}),)
    keys.append(SummaryCache.key("m", summarize))
    assert len(set(keys)) == 5
    assert keys[-1] == reference_key("m", summarize)


def test_values_written_differently_never_share_a_remembered_encoding():
    """True, 1 and 1.0 are equal in Python but written as true, 1 and 1.0."""
    variants = [
        [UserMessage(content="x", persist=True), UserMessage(content="x", persist=1)],
        [UserMessage(content="x", attributes={"n": True}), UserMessage(content="x", attributes={"n": 1})],
        [UserMessage(content="x", attributes={"n": 1}), UserMessage(content="x", attributes={"n": 1.0})],
        [
            AssistantMessage(content="", tool_calls=(ToolCall("c", "f", {"a": [1, 2]}),)),
            AssistantMessage(content="", tool_calls=(ToolCall("c", "f", {"a": ["1", 2]}),)),
        ],
    ]
    for messages in variants:
        assert len({reference_key("m", ModelRequest(messages=[m])) for m in messages}) == 2
        for message in messages * 2:  # the second round is answered from remembered encodings
            summarize = ModelRequest(messages=[message])
            assert SummaryCache.key("m", summarize) == reference_key("m", summarize)


class _UnknownMessage(UserMessage):
    """A subclass zett-agent's storage codec does not know (it cannot write it)."""


def test_messages_the_codec_cannot_write_have_stable_distinct_keys():
    """The cache key and a replay's span name read the same bytes; for messages zett-agent's codec refuses (a
    subclass it does not know, a value it cannot write) those are a JSON rendering of the same fields."""
    from zett_lab.replay.engine.summary_channel import _span_key

    unwritable = [
        _UnknownMessage(content="fix the login bug"),
        UserMessage(content="fix the login bug", attributes={"seen": {1, 2}}),
        UserMessage(content="fix the logout bug", attributes={"seen": {1, 2}}),
    ]
    for message in unwritable:
        with pytest.raises((TypeError, StopIteration)):
            encode_messages([message])
    requests = [ModelRequest(messages=[SystemMessage(content="Summarize."), message]) for message in unwritable]
    keys = [SummaryCache.key("m", request) for request in requests]
    spans = [_span_key(request) for request in requests]
    assert len(set(keys)) == len(set(spans)) == 3
    assert [SummaryCache.key("m", request) for request in requests] == keys
    assert [_span_key(request) for request in requests] == spans
    written = ModelRequest(messages=[SystemMessage(content="Summarize."), UserMessage(content="fix the login bug")])
    assert _span_key(written) == hashlib.sha256(encode_messages(written.messages[1:2]).encode("utf-8")).hexdigest()


# -- basic use ---------------------------------------------------------------------------------------------


def test_put_get_counters_and_persistence(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = SummaryCache(path)
    key = SummaryCache.key("m", request("a"))
    assert cache.get(key) is None
    cache.put(key, entry(reasoning="why"), identity="m")
    assert cache.get(key) == entry(reasoning="why")
    assert (cache.hits, cache.misses) == (1, 1)
    stats = cache.stats()
    assert stats["entries"] == 1 and stats["identities"] == 1 and stats["hit_rate"] == 0.5
    assert stats["path"] == str(path) and stats["enabled"] and stats["size_bytes"] > 0
    cache.put(key, entry("second writer loses"))
    assert cache.get(key).text == "summary"
    cache.close()
    again = SummaryCache(path)
    assert again.get(key) == entry(reasoning="why") and len(again) == 1 and key in again
    none_usage = CachedSummary("t", 0.0, None, None)
    again.put("k2", none_usage)
    assert again.get("k2") == none_usage
    with pytest.raises(ValueError):
        again.put("k3", CachedSummary("  ", 0.1, None, None))
    with pytest.raises(TypeError):
        again.put("k3", {"text": "x"})
    again.clear()
    assert len(again) == 0


def test_locations(tmp_path, monkeypatch):
    monkeypatch.setenv("ZETT_LAB_CACHE", str(tmp_path / "env.sqlite"))
    assert SummaryCache().path == tmp_path / "env.sqlite"
    assert (tmp_path / "env.sqlite").exists()
    assert SummaryCache(tmp_path / "arg.sqlite").path == tmp_path / "arg.sqlite"  # argument wins
    folder = tmp_path / "folder"
    folder.mkdir()
    assert SummaryCache(folder).path == folder / "summaries.sqlite"
    monkeypatch.setenv("ZETT_LAB_CACHE", "off")
    assert not SummaryCache().enabled
    assert default_cache_path().parts[-2:] == ("zett-lab", "summaries.sqlite")


def test_memory_and_disabled():
    memory = SummaryCache(":memory:")
    memory.put("k", entry())
    assert memory.get("k") == entry() and memory.stats()["entries"] == 1
    assert SummaryCache.memory().get("k") is None  # private to the instance
    disabled = SummaryCache.disabled()
    disabled.put("k", entry())
    assert disabled.get("k") is None
    assert disabled.stats()["enabled"] is False and disabled.misses == 1 and len(disabled) == 0


def test_pickles_and_threads(tmp_path):
    cache = SummaryCache(tmp_path / "c.sqlite")
    cache.put("k", entry())
    clone = pickle.loads(pickle.dumps(cache))
    assert clone.get("k") == entry()

    def work(n: int) -> None:
        for i in range(25):
            cache.put(f"t{n}-{i}", entry(f"text {n} {i}"))
            assert cache.get(f"t{n}-{i}").text == f"text {n} {i}"

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 101


# -- bad files ------------------------------------------------------------------------------------------------


def test_a_damaged_sqlite_file_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "c.sqlite"
    garbage = b"SQLite format 3\0" + b"this is not a database at all\n" * 200  # only its header is left
    path.write_bytes(garbage)
    with pytest.warns(ZettLabWarning, match="moved it to"):
        cache = SummaryCache(path)
    cache.put("k", entry())
    assert cache.get("k") == entry()
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(aside) == 1 and aside[0].read_bytes() == garbage


def test_foreign_database_is_an_error_and_untouched(tmp_path):
    path = tmp_path / "theirs.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        connection.execute("INSERT INTO orders VALUES (1, 9.5)")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(CacheError) as error:
        SummaryCache(path)
    assert str(path) in str(error.value) and "not a zett_lab summary cache" in str(error.value)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theirs.sqlite"]


def test_broken_schema_is_rebuilt_and_newer_version_refused(tmp_path):
    path = tmp_path / "c.sqlite"
    SummaryCache(path).close()
    with sqlite3.connect(path) as connection:
        connection.execute("ALTER TABLE summaries RENAME TO old_summaries")
        connection.execute("CREATE TABLE summaries (key TEXT PRIMARY KEY, text TEXT)")
    connection.close()
    with pytest.warns(ZettLabWarning, match="columns"):
        cache = SummaryCache(path)
    cache.put("k", entry())
    assert cache.get("k") == entry()
    cache.close()
    newer = tmp_path / "newer.sqlite"
    SummaryCache(newer).close()
    with sqlite3.connect(newer) as connection:
        connection.execute("UPDATE meta SET value = '99' WHERE name = 'version'")
    connection.close()
    with pytest.raises(CacheError, match="newer zett_lab"):
        SummaryCache(newer)


# -- two processes, and a process killed mid-write ----------------------------------------------------------


def _writer(path: str, name: str, count: int, barrier, queue) -> None:
    cache = SummaryCache(path)
    for i in range(count):
        cache.put(f"{name}-{i}", CachedSummary(f"{name} {i}", 0.1, i, 1))
        cache.put(f"shared-{i}", CachedSummary(f"shared {i}", 0.1, None, None))
    barrier.wait(timeout=60)
    other = "b" if name == "a" else "a"
    found = sum(
        1 for i in range(count) if (hit := cache.get(f"{other}-{i}")) is not None and hit.text == f"{other} {i}"
    )
    queue.put((name, found))


def test_two_processes_write_and_read_each_other(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    queue = context.Queue()
    processes = [context.Process(target=_writer, args=(path, name, 60, barrier, queue)) for name in ("a", "b")]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0
    results = dict(queue.get(timeout=10) for _ in processes)
    assert results == {"a": 60, "b": 60}
    cache = SummaryCache(path)
    assert len(cache) == 60 * 3
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


KILLED_WRITER = """
import sys
from zett_lab.summarizers import CachedSummary, SummaryCache
cache = SummaryCache(sys.argv[1])
i = 0
while True:
    cache.put(f"key-{i}", CachedSummary("summary " * 200 + str(i), 0.5, i, 7))
    print(i, flush=True)
    i += 1
"""


def test_killed_writer_leaves_finished_entries(tmp_path):
    path = tmp_path / "killed.sqlite"
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    finished = -1
    try:
        for line in process.stdout:
            finished = int(line)
            if finished >= 40:
                break
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
        process.stdout.close()
    assert process.returncode == -signal.SIGKILL
    assert finished >= 40
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "moved aside": the file is intact
        cache = SummaryCache(path)
    for i in range(finished + 1):
        hit = cache.get(f"key-{i}")
        assert hit is not None and hit.text.endswith(str(i)) and hit.input_tokens == i
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# -- every other cache problem: one message naming the cache file and what to do ----------------------------

WHAT_TO_DO = (
    "point ZETT_LAB_CACHE at a file in a writable folder, or run without the cache (--no-cache, or ZETT_LAB_CACHE=off)"
)


@pytest.mark.parametrize("where", ["new file", "new subfolder", "existing cache"])
def test_a_cache_in_a_read_only_folder_is_one_clear_error(tmp_path, where):
    folder = tmp_path / "caches"
    folder.mkdir()
    path = folder / ("sub/c.sqlite" if where == "new subfolder" else "c.sqlite")
    if where == "existing cache":
        with SummaryCache(path) as cache:
            cache.put("k", entry())
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    with read_only_folder(folder), pytest.raises(CacheError) as error:
        SummaryCache(path)
    message = str(error.value)
    assert message.startswith(f"summary cache {path}: cannot open it (") and message.endswith(WHAT_TO_DO)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_cache_locked_too_long_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "c.sqlite"
    cache = SummaryCache(path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(CacheError) as error:
            cache.put("k", entry())
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()
    assert (
        str(error.value)
        == f"summary cache {path}: cannot write to it (locked by another process for 0.2 s); {WHAT_TO_DO}"
    )


@contextmanager
def _write_lock_held(path: Path, release_after: float | None = None) -> Iterator[None]:
    """Another connection holding ``path``'s write lock (as a process creating its tables does), released after
    ``release_after`` seconds or at the end."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(release_after or 0.0, lambda: holder.execute("COMMIT"))
    if release_after is not None:
        release.start()
    try:
        yield
    finally:
        if release_after is not None:
            release.join()
        holder.close()


def test_a_new_cache_opened_while_another_process_creates_it_waits_for_it(tmp_path):
    """Two processes opening one new cache together: the second waits for the first's tables (SQLite refuses the
    change to WAL at once while the first holds the write lock: test_two_processes_write_and_read_each_other failed so
    once)."""
    path = tmp_path / "new.sqlite"
    with _write_lock_held(path, release_after=0.5):
        cache = SummaryCache(path)
    assert cache._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.put("k", entry())
    assert cache.get("k") is not None


def test_a_new_cache_locked_too_long_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "new.sqlite"
    with _write_lock_held(path), pytest.raises(CacheError) as error:
        SummaryCache(path)
    assert (
        str(error.value) == f"summary cache {path}: cannot open it (locked by another process for 0.2 s); {WHAT_TO_DO}"
    )


def test_a_cache_locked_during_a_sweep_stops_it_with_one_clear_error(tmp_path, monkeypatch, fixture_conversations):
    """A summary that cannot be written to a locked cache is no failed summary to record and go on from (every
    later one would wait out the lock too): the sweep, the replay and the report stop with the cache's error."""
    from zett_lab.study import sweep

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "c.sqlite"
    SummaryCache(path).close()  # the file exists: reads go on while another process holds the write lock
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    try:
        assert holder.stdout.readline().strip() == "holding"
        for run in (
            lambda: sweep(
                conversation,
                max_tokens=[6_000, 12_000],
                keep_recent_tokens=[1_500],
                executor="serial",
                cache=path,
                progress=False,
            ),
            lambda: zett_lab.replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, cache=path),
        ):
            with pytest.raises(CacheError) as error:
                run()
            assert str(error.value) == (
                f"summary cache {path}: cannot write to it (locked by another process for 0.2 s); {WHAT_TO_DO}"
            )
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


HOLDER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN EXCLUSIVE")
print("holding", flush=True)
time.sleep(600)
"""


def test_garbage_in_the_middle_with_the_header_intact_is_detected_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "c.sqlite"
    with SummaryCache(path) as cache:
        for i in range(300):
            cache.put(f"k{i}", entry(f"summary number {i} " * 20))
        connection = cache._conn()
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096
    data[4 * 4096 : 6 * 4096] = bytes(range(256)) * 32  # pages 5 and 6: tree pages of the summaries table
    path.write_bytes(bytes(data))
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    with pytest.warns(
        ZettLabWarning, match=rf"summary cache {path} was unusable \(damaged: .*\); moved it to .*corrupt-"
    ):
        cache = SummaryCache(path)
    assert len(cache) == 0
    cache.put("k1", entry())
    assert cache.get("k1") == entry()
    aside = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == bytes(data)


def test_an_unchanged_file_is_checked_once_not_at_every_open_nor_in_the_workers_it_is_sent_to(tmp_path, monkeypatch):
    """The page check reads the whole file: a report opened its cache once per unit in every worker. A file is
    checked again when it changed (here: damaged in place, which is still found and moved aside)."""
    path = tmp_path / "c.sqlite"
    with SummaryCache(path) as cache:
        for i in range(300):
            cache.put(f"k{i}", entry(f"summary number {i} " * 20))
        cache._conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    checks: list[str] = []
    connect = SummaryCache._connect

    def traced(self):
        connection = connect(self)
        connection.set_trace_callback(
            lambda statement: checks.append(statement) if "quick_check" in statement else None
        )
        return connection

    monkeypatch.setattr(SummaryCache, "_connect", traced)
    monkeypatch.setattr(cache_module, "_CHECKED", set())
    opened = [SummaryCache(path) for _ in range(3)]
    assert len(checks) == 1 and all(cache.get("k7") == entry("summary number 7 " * 20) for cache in opened)
    sent = pickle.dumps(opened[0])
    cache_module._CHECKED.clear()  # a worker process: nothing checked there yet
    worker_cache = pickle.loads(sent)
    assert worker_cache.get("k8") == entry("summary number 8 " * 20) and len(checks) == 1
    for cache in opened + [worker_cache]:
        cache.close()

    data = bytearray(path.read_bytes())
    data[4 * 4096 : 6 * 4096] = bytes(range(256)) * 32
    time.sleep(0.05)  # a later write (file times advance by the kernel's tick, a few milliseconds)
    path.write_bytes(bytes(data))
    with pytest.warns(ZettLabWarning, match=r"was unusable \(damaged: .*\); moved it to .*corrupt-"):
        rebuilt = SummaryCache(path)
    assert len(checks) == 2 and len(rebuilt) == 0


def test_the_move_aside_warning_is_one_readable_line(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"SQLite format 3\0" + b"not a database at all\n" * 100)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from zett_lab.summarizers import SummaryCache; SummaryCache(sys.argv[1])",
            str(path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"zett_lab: summary cache {path} was unusable (damaged SQLite database: file is not a database)"
    )


def test_the_identity_column_is_filled_from_the_key(tmp_path):
    cache = SummaryCache(tmp_path / "c.sqlite")
    for n, identity in enumerate(("anchors(budget=0.1)", "mask", "anchors(budget=0.1)")):
        key = SummaryCache.key(identity, request(str(n)))
        assert key.identity == identity and pickle.loads(pickle.dumps(key)).identity == identity
        cache.put(key, entry(identity))
    cache.put(SummaryCache.key("mask", request("y")), entry(), identity="explicit")
    assert cache.stats()["identities"] == 3
    with closing(sqlite3.connect(cache.path)) as connection:
        stored = sorted(row[0] for row in connection.execute("SELECT identity FROM summaries"))
    assert stored == ["anchors(budget=0.1)", "anchors(budget=0.1)", "explicit", "mask"]


def test_a_replay_records_the_summarizers_identity(tmp_path):
    cache = SummaryCache(tmp_path / "c.sqlite")
    trace = zett_lab.replay(
        coding_conversation(turns=6),
        max_tokens=3000,
        keep_recent_tokens=800,
        summarizer=CountingSummarizer(),
        cache=cache,
    )
    assert len(trace.compactions) > 0
    with closing(sqlite3.connect(cache.path)) as connection:
        identities = {row[0] for row in connection.execute("SELECT identity FROM summaries")}
    assert identities == {"counting-summarizer|effort=low"}  # the summarizer's identity and the reasoning effort
    assert cache.stats()["identities"] == 1
