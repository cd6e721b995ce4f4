"""The bundled fixtures: fixtures/sessions.sqlite, its probes sidecar, and the generator beside them.

The database is read read-only (sqlite3 ``mode=ro`` + ``zett_agent.storage.decode_messages``);
opening it with zett-agent's storage class would write to it.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import sys
from contextlib import closing
from functools import lru_cache
from pathlib import Path

import pytest
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.storage import decode_messages

from zett_lab.load.conversation import CHECKPOINT_PREFIX

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
DB = FIXTURES / "sessions.sqlite"
SIDECAR = FIXTURES / "sessions.probes.json"
GENERATOR = FIXTURES / "generate.py"
PROBE_TYPES = {"recall", "artifact", "continuation", "decision"}
#: Sessions of at least this many tokens carry at least three ``update`` probes.
LONG_SESSION_TOKENS = 20_000


def load_generator():
    """fixtures/generate.py as a module (fixtures/ is not a package)."""
    name = "zett_lab_fixtures_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses need the module registered while it executes
    spec.loader.exec_module(module)
    return module


def connect() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{DB}?mode=ro", uri=True)


@lru_cache(maxsize=1)
def raw_log() -> dict[str, list[tuple[int, object]]]:
    """session id -> [(sequence, message)] for every raw-log row, in sequence order."""
    with closing(connect()) as connection:
        rows = connection.execute(
            "SELECT session_id, sequence, message_json FROM raw_messages ORDER BY session_id, sequence"
        ).fetchall()
    log: dict[str, list[tuple[int, object]]] = {}
    for session_id, sequence, payload in rows:
        (message,) = decode_messages(payload)
        log.setdefault(session_id, []).append((sequence, message))
    return log


@lru_cache(maxsize=1)
def conversations() -> dict[str, list[object]]:
    """Messages as zett_lab loads them: the system prompt once at index 0, then the dialogue in raw-log order."""
    result = {}
    for session_id, records in raw_log().items():
        system = [m for _, m in records if isinstance(m, SystemMessage)]
        dialogue = [m for _, m in records if not isinstance(m, SystemMessage)]
        result[session_id] = system[:1] + dialogue
    return result


@lru_cache(maxsize=1)
def sidecar() -> dict:
    return json.loads(SIDECAR.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def sizes() -> dict[str, int]:
    from zett_lab.tokens import provision_o200k

    provision_o200k()
    return {sid: CompactionExtension._count_tokens(messages) for sid, messages in conversations().items()}


def snapshots() -> dict[str, list[tuple[int, int, str]]]:
    with closing(connect()) as connection:
        rows = connection.execute(
            "SELECT session_id, version, compacted_through_sequence, message_json FROM session_snapshots ORDER BY "
            "session_id, version"
        ).fetchall()
    result: dict[str, list[tuple[int, int, str]]] = {}
    for session_id, version, through, payload in rows:
        (message,) = decode_messages(payload)
        assert isinstance(message, CompactedMessage)
        result.setdefault(session_id, []).append((version, through, message.content))
    return result


# --------------------------------------------------------------------------- the database


def test_database_is_self_contained_and_small():
    assert DB.is_file(), "run .venv/bin/python fixtures/generate.py"
    assert not Path(f"{DB}-wal").exists() and not Path(f"{DB}-shm").exists()
    with closing(connect()) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"agent_sessions", "raw_messages", "session_snapshots"} <= tables
    assert DB.stat().st_size < 8_000_000


def test_at_least_six_sessions_with_titles():
    with closing(connect()) as connection:
        sessions = dict(connection.execute("SELECT id, title FROM agent_sessions").fetchall())
    assert len(sessions) >= 6
    assert set(sessions) == set(raw_log())
    assert all(title for title in sessions.values())


def test_system_prompt_is_restored_at_every_request_but_loaded_once():
    for session_id, records in raw_log().items():
        first = records[0][1]
        assert isinstance(first, SystemMessage), session_id
        user_turns = sum(isinstance(m, UserMessage) for _, m in records)
        assert sum(isinstance(m, SystemMessage) for _, m in records) == user_turns, session_id
        loaded = conversations()[session_id]
        assert sum(isinstance(m, SystemMessage) for m in loaded) == 1


def test_sizes_span_small_to_very_large():
    counts = sizes()
    assert min(counts.values()) <= 6_000
    assert max(counts.values()) >= 150_000
    assert max(len(messages) for messages in conversations().values()) >= 400


def test_usage_is_recorded_on_every_assistant_message():
    with closing(connect()) as connection:
        rows = connection.execute("SELECT role, input_tokens, output_tokens FROM raw_messages").fetchall()
    assistant = [(i, o) for role, i, o in rows if role == 3]
    assert assistant and all(i and i > 1_200 and o and o > 0 for i, o in assistant)
    assert all(i is None for role, i, _ in rows if role != 3)


def test_a_session_ends_mid_turn_on_a_tool_result():
    endings = {sid: messages[-1] for sid, messages in conversations().items()}
    cut = [sid for sid, last in endings.items() if isinstance(last, ToolMessage)]
    assert cut, "no session ends on a tool result"
    assert all(isinstance(endings[sid], (AssistantMessage, ToolMessage)) for sid in endings)


def test_an_autonomous_single_turn_run():
    candidates = []
    for session_id, messages in conversations().items():
        users = [m for m in messages if isinstance(m, UserMessage)]
        steps = sum(1 for m in messages if isinstance(m, AssistantMessage) and m.tool_calls)
        if len(users) == 1 and steps >= 100:
            candidates.append(session_id)
    assert candidates
    assert any(sizes()[sid] >= 60_000 for sid in candidates)


def test_tool_calls_and_results_pair_up():
    for session_id, messages in conversations().items():
        open_calls: set[str] = set()
        for index, message in enumerate(messages):
            if isinstance(message, ToolMessage):
                assert message.tool_call_id in open_calls, (session_id, index)
                open_calls.discard(message.tool_call_id)
            else:
                assert not open_calls, (session_id, index)
                if isinstance(message, AssistantMessage):
                    assert len(message.tool_calls) <= 1  # recorded with parallel_tool_call=False
                    open_calls |= {call.id for call in message.tool_calls}


# --------------------------------------------------------------------------- probes


def test_sidecar_covers_every_session_with_all_probe_types():
    data = sidecar()
    assert set(data) == set(conversations())
    for session_id, entry in data.items():
        assert entry["description"]
        assert "recorded_with" in entry
        probes = entry["probes"]
        assert len(probes) >= 4, session_id
        assert {p["type"] for p in probes} - {"update"} == PROBE_TYPES, session_id
        for probe in probes:
            fields = {"question", "answer", "type", "message_index"}
            if probe["type"] == "update":
                fields |= {"superseded_answer", "superseded_index"}
                assert probe["superseded_index"] < probe["message_index"]
                assert probe["superseded_answer"].strip() and probe["superseded_answer"] != probe["answer"]
            assert set(probe) == fields
            assert probe["question"].endswith("?") and probe["answer"].strip()


def test_long_sessions_carry_at_least_three_update_probes():
    for session_id, entry in sidecar().items():
        updates = [p for p in entry["probes"] if p["type"] == "update"]
        if sizes()[session_id] >= LONG_SESSION_TOKENS:
            assert len(updates) >= 3, session_id
        for probe in updates:
            messages = conversations()[session_id]
            earlier = load_generator().message_text(messages[probe["superseded_index"]])
            assert probe["superseded_answer"] in earlier, probe


def test_probe_answers_appear_at_their_message_index():
    for session_id, entry in sidecar().items():
        messages = conversations()[session_id]
        for probe in entry["probes"]:
            index = probe["message_index"]
            assert 0 < index < len(messages), (session_id, probe)
            assert probe["answer"] in load_generator().message_text(messages[index]), (session_id, probe)


def test_probes_through_zett_lab_load_all():
    import zett_lab

    loaded = {c.id: c for c in zett_lab.load_all(FIXTURES)}
    assert set(loaded) == set(conversations())
    for session_id, conversation in loaded.items():
        assert len(conversation.messages) == len(conversations()[session_id])
        assert len(conversation.probes) == len(sidecar()[session_id]["probes"])
        for probe in conversation.probes:
            assert probe.answer in load_generator().message_text(conversation.messages[probe.message_index]), (
                session_id,
                probe,
            )


# --------------------------------------------------------------------------- the compacted session


def compacted_sessions() -> dict[str, dict]:
    return {sid: entry["recorded_with"] for sid, entry in sidecar().items() if entry["recorded_with"] is not None}


def test_exactly_the_compacted_session_has_snapshots():
    recorded = compacted_sessions()
    assert len(recorded) == 1
    ((session_id, settings),) = recorded.items()
    assert settings["max_tokens"] > settings["keep_recent_tokens"] > 0
    assert settings["summary_model"] == "fixtures/generate.py:FirstLineSummaryModel"
    stored = snapshots()
    assert set(stored) == {session_id}
    versions = [version for version, _, _ in stored[session_id]]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) >= 2
    boundaries = [through for _, through, _ in stored[session_id]]
    assert boundaries == sorted(set(boundaries))


def test_summary_model_reproduces_the_first_snapshot():
    generator = load_generator()
    ((session_id, settings),) = compacted_sessions().items()
    path, _, name = settings["summary_model"].partition(":")
    assert (ROOT / path) == GENERATOR
    model = getattr(generator, name)(**settings.get("summary_model_args", {}))
    _, through, content = snapshots()[session_id][0]
    older = [m for sequence, m in raw_log()[session_id] if sequence <= through and not isinstance(m, SystemMessage)]
    assert content == CHECKPOINT_PREFIX + model.summarize(older).strip()


def test_summary_model_streams_a_deterministic_text_answer():
    import asyncio

    from zett_agent.model import ModelRequest

    generator = load_generator()
    model = generator.FirstLineSummaryModel()
    messages = conversations()["auth-refresh-token"]
    request = ModelRequest(messages=(*messages, UserMessage(content="Produce the checkpoint now.")))

    async def answer():
        events = [event async for event in model.stream(request)]
        return events[-1].response

    first, second = asyncio.run(answer()), asyncio.run(answer())
    assert first.message.content == second.message.content
    assert first.message.content.startswith("user: tests/test_auth.py::test_refresh_token")
    assert not first.message.tool_calls
    assert "Produce the checkpoint now." not in first.message.content


# --------------------------------------------------------------------------- the generator


def test_generator_scripts_are_deterministic():
    generator = load_generator()
    first, second = generator.build_scripts(), generator.build_scripts()
    for a, b in zip(first, second, strict=True):
        assert a.session_id == b.session_id
        assert [t.user for t in a.turns] == [t.user for t in b.turns]
        assert [r for t in a.turns for r in t.replies] == [r for t in b.turns for r in t.replies]
        assert a.results == b.results


def test_database_matches_the_generator():
    """The committed database is what generate.py writes now (regenerate after changing it)."""
    generator = load_generator()
    for script in generator.build_scripts():
        stored = conversations()[script.session_id]
        assert stored[0].content == script.system_prompt
        users = [m.text for m in stored if isinstance(m, UserMessage)]
        assert users == [turn.user for turn in script.turns], script.session_id
        replies = [(m.content, m.reasoning, m.tool_calls) for m in stored if isinstance(m, AssistantMessage)]
        expected = [(r.content, r.reasoning, r.tool_calls) for t in script.turns for r in t.replies]
        assert replies == expected, script.session_id
        for message in stored:
            if isinstance(message, ToolMessage):
                assert (message.text, message.success) == script.results[message.tool_call_id]
        assert sidecar()[script.session_id]["probes"] == [p.to_dict() for p in script.probes]


@pytest.mark.slow
def test_generator_writes_identical_content(tmp_path):
    """Regenerating gives the same message content (ids and timestamps may differ)."""
    generator = load_generator()
    assert generator.main([str(tmp_path)]) == 0
    query = (
        "SELECT session_id, sequence, role, content, message_json, input_tokens, output_tokens FROM raw_messages "
        "ORDER BY session_id, sequence"
    )
    fresh = sqlite3.connect(f"file:{tmp_path / DB.name}?mode=ro", uri=True)
    try:
        with closing(connect()) as connection:
            assert fresh.execute(query).fetchall() == connection.execute(query).fetchall()
    finally:
        fresh.close()
    assert (tmp_path / SIDECAR.name).read_text() == SIDECAR.read_text()
