"""Reading recorded conversations: neutral JSON, zett SQLite / JSONL / zettcode, and bad input."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest
from zett_agent.messages import (
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    UserMessage,
)
from zett_agent.model import ModelUsage
from zett_agent.storage import encode_messages

import zett_lab
from tests.helpers import coding_conversation
from zett_lab import InputError
from zett_lab.files import _umask
from zett_lab.load.zett import write_sqlite


def test_neutral_round_trip_keeps_every_field(tmp_path):
    conversation = coding_conversation(turns=2)
    conversation.messages[1] = UserMessage(
        content=[TextContent(text="see"), ImageContent(source=ImageUrlSource(url="https://x/y.png"))]
    )
    conversation.messages[-1] = AssistantMessage(
        content="done", reasoning="checked twice", provider="openai", model="gpt-5"
    )
    conversation = dataclasses.replace(
        conversation,
        usage={2: ModelUsage(input_tokens=120, output_tokens=9)},
        probes=[zett_lab.Probe(question="q?", answer="module_0", type="recall", message_index=1)],
    )
    path = conversation.save(tmp_path / "c.json")
    loaded = zett_lab.load(path)
    assert loaded.messages == conversation.messages
    assert loaded.usage == conversation.usage
    assert loaded.probes == conversation.probes
    assert loaded.format == "neutral-json"
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_neutral_accepts_openai_chat_lists_and_jsonl(tmp_path):
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "ls", "arguments": '{"dir": "."}'}}],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "a.py\nb.py"},
        {"role": "assistant", "content": "Two files."},
    ]
    (tmp_path / "bare.json").write_text(json.dumps(messages))
    (tmp_path / "many.jsonl").write_text(
        "\n".join(json.dumps({"id": f"c{i}", "messages": messages}) for i in range(3)) + "\n"
    )
    bare = zett_lab.load(tmp_path / "bare.json")
    assert isinstance(bare.messages[2], AssistantMessage) and bare.messages[2].tool_calls[0].arguments == {"dir": "."}
    assert bare.messages[3].name == "ls"
    assert [c.id for c in zett_lab.load_all(tmp_path / "many.jsonl")] == ["c0", "c1", "c2"]
    with pytest.raises(InputError, match="holds 3 conversations"):
        zett_lab.load(tmp_path / "many.jsonl")
    assert zett_lab.load(tmp_path / "many.jsonl", session="c1").id == "c1"


@pytest.mark.parametrize(
    ("messages", "where", "problem"),
    [
        (
            [{"role": "user", "content": "hi"}, {"role": "robot", "content": "x"}],
            "message 1, field 'role'",
            "unknown role 'robot'",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}],
            "message 1",
            "no matching assistant tool call",
        ),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "user", "content": "again"},
            ],
            "message 1",
            "'a' has no tool result",
        ),
        ([{"role": "system", "content": "only instructions"}], None, "is empty"),
        (
            [
                {"role": "user", "content": "x"},
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{oops"}}]},
            ],
            "tool_calls[0].function.arguments",
            "not valid JSON",
        ),
    ],
)
def test_bad_neutral_messages_name_file_and_place(tmp_path, messages, where, problem):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"id": "bad", "messages": messages}))
    with pytest.raises(InputError) as error:
        zett_lab.load(path)
    assert str(path) in str(error.value)
    assert problem in str(error.value)
    if where:
        assert where in str(error.value)


def test_a_dangling_tool_call_at_the_very_end_is_a_cut_off_log_not_an_error(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "go"},
                {"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
            ]
        )
    )
    assert len(zett_lab.load(path).messages) == 2


def test_malformed_jsonl_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    good = json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"}]})
    path.write_text(f"{good}\n{good}\n{{not json\n")
    with pytest.raises(InputError, match=r"broken.jsonl: line 3, column 2: not valid JSON"):
        zett_lab.load_all(path)


def test_unknown_format_lists_known_formats(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes")
    with pytest.raises(InputError, match="unknown format; zett_lab reads: ") as error:
        zett_lab.load(path)
    for name in ("zett-sqlite", "zett-jsonl", "zettcode", "neutral-json", "claude-code-jsonl", "aider-chat-history-md"):
        assert name in str(error.value)


def test_sqlite_reader_dedupes_system_prompts_and_keeps_usage(tmp_path):
    conversation = coding_conversation(turns=3)
    conversation = dataclasses.replace(conversation, usage={2: ModelUsage(input_tokens=300, output_tokens=20)})
    db = write_sqlite([conversation, coding_conversation(turns=1, cid="second")], tmp_path / "s.sqlite")
    loaded = zett_lab.load(db, session="hand-made")
    assert loaded.messages == conversation.messages
    assert sum(isinstance(m, SystemMessage) for m in loaded.messages) == 1
    assert loaded.metadata["repeated_system_prompts"] == 2
    assert loaded.usage == conversation.usage
    assert [c.id for c in zett_lab.load_all(db)] == ["hand-made", "second"]


def test_sqlite_errors(tmp_path):
    db = write_sqlite([coding_conversation(turns=1)], tmp_path / "s.sqlite")
    with pytest.raises(InputError, match="session 'missing': no such session; the file has: hand-made"):
        zett_lab.load(db, session="missing")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE things (x)").connection.commit()
    with pytest.raises(InputError, match="not a zett-agent session database"):
        zett_lab.load(other)
    with pytest.raises(InputError, match="already exists"):
        write_sqlite([coding_conversation(turns=1)], db)


def test_zett_jsonl_extension_files(tmp_path):
    conversation = coding_conversation(turns=2)
    lines = []
    for turn in conversation.turns:
        record = {
            "version": 1,
            "session_id": "s-jsonl",
            "status": "completed",
            "messages": json.loads(encode_messages(conversation.messages[turn.start : turn.end])),
        }
        lines.append(json.dumps(record))
    path = tmp_path / "czotanNA.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = zett_lab.load(path)
    assert loaded.format == "zett-jsonl"
    assert loaded.messages == conversation.messages[1:]


def test_zettcode_tree(tmp_path):
    conversation = coding_conversation(turns=2)
    session_dir = tmp_path / "workspace-a" / "0199-abc"
    session_dir.mkdir(parents=True)
    records = [{"kind": "session", "id": "0199-abc", "cwd": "/srv/app"}]
    records += [{"kind": "message", "message": json.loads(encode_messages([m]))[0]} for m in conversation.messages[:6]]
    records.append({"kind": "compaction", "summary": "Fixed module_0.", "tokens_before": 5000})
    records += [{"kind": "message", "message": json.loads(encode_messages([m]))[0]} for m in conversation.messages[6:]]
    (session_dir / "data.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    loaded = zett_lab.load(tmp_path)
    assert loaded.id == "0199-abc" and loaded.format == "zettcode"
    assert loaded.messages == conversation.messages
    assert loaded.native_compactions[0].position == 6 and loaded.native_compactions[0].summary == "Fixed module_0."
    assert loaded.metadata["cwd"] == "/srv/app"


def test_probe_sidecar_errors_name_the_probe(tmp_path):
    db = write_sqlite([coding_conversation(turns=1)], tmp_path / "s.sqlite")
    sidecar = tmp_path / "s.probes.json"
    sidecar.write_text(
        json.dumps({"hand-made": {"probes": [{"question": "q", "answer": "a", "type": "recall", "message_index": 99}]}})
    )
    with pytest.raises(
        InputError, match=r"s.probes.json: session 'hand-made', probe 0, field 'message_index': 99 is not a message"
    ):
        zett_lab.load(db)
    sidecar.write_text(json.dumps({"hand-made": {"probes": [{"question": "q", "type": "recall"}]}}))
    with pytest.raises(InputError, match=r"probe 0: missing field\(s\): answer, message_index"):
        zett_lab.load(db)


def test_fixture_directory_loads_with_probes(fixture_conversations):
    assert len(fixture_conversations) >= 6
    assert all(c.format == "zett-sqlite" for c in fixture_conversations)
    assert all(c.probes for c in fixture_conversations)
