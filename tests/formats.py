"""One small dialogue written in every format zett_lab reads, for the input tests and the property suite.

A :class:`Dialogue` is a system prompt and turns (a user message, tool steps, an answer). Each
writer in :data:`WRITERS` puts it on disk in one format, the way that agent records it, and
returns the path to load (a file, or a folder for zettcode trees). Texts go into the files
exactly as given, also when they hold lone surrogates or NULs (JSON escapes them; plain-text
formats carry them as bytes that are not UTF-8). :func:`unstorable_strings` is the check every
loaded conversation must pass.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.storage import encode_messages

from zett_lab import Conversation


@dataclass
class Step:
    """One tool call and its result."""

    tool: str
    command: str
    result: str


@dataclass
class Turn:
    user: str
    steps: list[Step] = field(default_factory=list)
    answer: str = "done"


@dataclass
class Dialogue:
    id: str
    system: str
    turns: list[Turn]

    def texts(self) -> list[str]:
        """Every user, tool and answer text (what each format must carry)."""
        return [t for turn in self.turns for t in (turn.user, *(s.result for s in turn.steps), turn.answer)]


def _bytes(text: str) -> bytes:
    """Text as a file holds it: UTF-8, and lone surrogates as the bytes a careless writer leaves."""
    return text.encode("utf-8", "surrogatepass")


def _json(value: object, ensure_ascii: bool = True) -> bytes:
    return _bytes(json.dumps(value, ensure_ascii=ensure_ascii))


def _jsonl(records: list[object]) -> bytes:
    return b"".join(_json(record) + b"\n" for record in records)


def zett_messages(dialogue: Dialogue) -> list:
    messages: list = [SystemMessage(content=dialogue.system)]
    for t, turn in enumerate(dialogue.turns):
        messages.append(UserMessage(content=turn.user))
        for s, step in enumerate(turn.steps):
            call_id = f"call-{t}-{s}"
            messages.append(
                AssistantMessage(
                    content="", tool_calls=(ToolCall(id=call_id, name=step.tool, arguments={"command": step.command}),)
                )
            )
            messages.append(ToolMessage(tool_call_id=call_id, name=step.tool, content=step.result))
        messages.append(AssistantMessage(content=turn.answer))
    return messages


def openai_messages(dialogue: Dialogue) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": dialogue.system}]
    for t, turn in enumerate(dialogue.turns):
        messages.append({"role": "user", "content": turn.user})
        for s, step in enumerate(turn.steps):
            call_id = f"call-{t}-{s}"
            arguments = json.dumps({"command": step.command})
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": step.tool, "arguments": arguments}}
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id, "content": step.result})
        messages.append({"role": "assistant", "content": turn.answer})
    return messages


def write_neutral_json(dialogue: Dialogue, folder: Path) -> Path:
    path = folder / "conversation.json"
    path.write_bytes(_json({"id": dialogue.id, "messages": openai_messages(dialogue)}))
    return path


def write_neutral_jsonl(dialogue: Dialogue, folder: Path) -> Path:
    path = folder / "conversations.jsonl"
    path.write_bytes(_jsonl([{"id": f"{dialogue.id}-{n}", "messages": openai_messages(dialogue)} for n in (1, 2)]))
    return path


def _zett_schema() -> list[str]:
    """zett-agent's own schema (tables and indexes), as its storage created it in the bundled fixture."""
    if not _SCHEMA:
        with closing(sqlite3.connect(f"{FIXTURE_DATABASE.as_uri()}?mode=ro", uri=True)) as connection:
            _SCHEMA.extend(sql for (sql,) in connection.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"))
    return _SCHEMA


def _escaped(text: str) -> str:
    """Text SQLite can store: a lone surrogate becomes its JSON escape (as text, not the character)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


_SCHEMA: list[str] = []
FIXTURE_DATABASE = Path(__file__).resolve().parent.parent / "fixtures" / "sessions.sqlite"


def write_zett_sqlite(dialogue: Dialogue, folder: Path) -> Path:
    """The rows zett-agent's storage writes (the system prompt again at every request), in its schema.

    Inserted with SQL rather than through the storage, which syncs the disk after every message
    and would make a property suite of many files far too slow.
    """
    path = folder / "sessions.sqlite"
    now = "2026-01-01 00:00:00.000000"
    conversation = Conversation(id=dialogue.id, messages=zett_messages(dialogue))
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA synchronous = OFF")  # a test file: no need to wait for the disk
        for statement in _zett_schema():
            connection.execute(statement)
        connection.execute(
            "INSERT INTO agent_sessions (id, session_type, title, created_at, updated_at) VALUES (?, 0, ?, ?, ?)",
            (_escaped(dialogue.id), _escaped(dialogue.id), now, now),
        )
        sequence = 0
        for turn in conversation.turns:
            for message in [conversation.messages[0], *conversation.messages[turn.start : turn.end]]:
                sequence += 1
                envelope = json.dumps(
                    json.loads(encode_messages([message]))
                )  # escaped, as a JSON writer with ensure_ascii leaves it
                connection.execute(
                    "INSERT INTO raw_messages (id, session_id, request_id, sequence, role, content, message_json,"
                    " metadata_json, tags_json, started_at, completed_at, duration_ns, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, '{}', '{}', ?, ?, 0, ?, ?)",
                    (
                        f"m{sequence}",
                        _escaped(dialogue.id),
                        f"request-{turn.index}",
                        sequence,
                        json.loads(envelope)[0]["kind"],
                        _escaped(str(getattr(message, "content", ""))),
                        envelope,
                        now,
                        now,
                        now,
                        now,
                    ),
                )
        connection.commit()
    return path


def write_zett_jsonl(dialogue: Dialogue, folder: Path) -> Path:
    conversation = Conversation(id=dialogue.id, messages=zett_messages(dialogue))
    records = [
        {
            "version": 1,
            "session_id": dialogue.id,
            "status": "completed",
            "messages": json.loads(encode_messages(conversation.messages[turn.start : turn.end])),
        }
        for turn in conversation.turns
    ]
    path = folder / "turns.jsonl"
    path.write_bytes(_jsonl(records))
    return path


def write_zettcode(dialogue: Dialogue, folder: Path) -> Path:
    session = folder / "workspace" / "session-1"
    session.mkdir(parents=True)
    records: list[object] = [{"kind": "session", "id": dialogue.id, "cwd": "/srv/app"}]
    records += [{"kind": "message", "message": json.loads(encode_messages([m]))[0]} for m in zett_messages(dialogue)]
    (session / "data.jsonl").write_bytes(_jsonl(records))
    return folder / "workspace"


def write_claude_code(dialogue: Dialogue, folder: Path) -> Path:
    session = "11111111-1111-4111-8111-111111111111"
    records: list[dict] = []

    def add(kind: str, message: dict) -> None:
        parent = records[-1]["uuid"] if records else None
        records.append(
            {
                "type": kind,
                "sessionId": session,
                "uuid": f"u{len(records)}",
                "parentUuid": parent,
                "isSidechain": False,
                "cwd": "/srv/app",
                "timestamp": "2026-01-01T00:00:00Z",
                "message": message,
            }
        )

    for t, turn in enumerate(dialogue.turns):
        add("user", {"role": "user", "content": turn.user})
        for s, step in enumerate(turn.steps):
            call_id = f"toolu_{t}_{s}"
            add(
                "assistant",
                {
                    "id": f"msg_{t}_{s}",
                    "role": "assistant",
                    "model": "claude",
                    "content": [
                        {"type": "tool_use", "id": call_id, "name": step.tool, "input": {"command": step.command}}
                    ],
                },
            )
            add(
                "user",
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": step.result}]},
            )
        add(
            "assistant",
            {
                "id": f"msg_{t}",
                "role": "assistant",
                "model": "claude",
                "content": [{"type": "text", "text": turn.answer}],
            },
        )
    path = folder / f"{session}.jsonl"
    path.write_bytes(_jsonl(records))
    return path


def write_codex(dialogue: Dialogue, folder: Path) -> Path:
    def item(payload: dict) -> dict:
        return {"timestamp": "2026-05-01T10:00:00.000Z", "type": "response_item", "payload": payload}

    records: list[dict] = [
        {
            "timestamp": "2026-05-01T10:00:00.000Z",
            "type": "session_meta",
            "payload": {"id": dialogue.id, "cwd": "/srv/app", "base_instructions": {"text": dialogue.system}},
        }
    ]
    for t, turn in enumerate(dialogue.turns):
        records.append(
            item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": turn.user}]})
        )
        for s, step in enumerate(turn.steps):
            call_id = f"call_{t}_{s}"
            records.append(
                item(
                    {
                        "type": "function_call",
                        "name": step.tool,
                        "arguments": json.dumps({"command": step.command}),
                        "call_id": call_id,
                    }
                )
            )
            records.append(item({"type": "function_call_output", "call_id": call_id, "output": step.result}))
        records.append(
            item({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": turn.answer}]})
        )
    path = folder / "rollout.jsonl"
    path.write_bytes(_jsonl(records))
    return path


def write_gemini_cli(dialogue: Dialogue, folder: Path) -> Path:
    messages: list[dict] = []
    for t, turn in enumerate(dialogue.turns):
        messages.append({"id": f"u{t}", "timestamp": "2025-12-01T10:00:00Z", "type": "user", "content": turn.user})
        for s, step in enumerate(turn.steps):
            call_id = f"{step.tool}-{t}-{s}"
            messages.append(
                {
                    "id": f"g{t}-{s}",
                    "timestamp": "2025-12-01T10:00:01Z",
                    "type": "gemini",
                    "content": "",
                    "toolCalls": [
                        {
                            "id": call_id,
                            "name": step.tool,
                            "args": {"command": step.command},
                            "status": "success",
                            "result": [
                                {
                                    "functionResponse": {
                                        "id": call_id,
                                        "name": step.tool,
                                        "response": {"output": step.result},
                                    }
                                }
                            ],
                        }
                    ],
                }
            )
        messages.append(
            {
                "id": f"a{t}",
                "timestamp": "2025-12-01T10:00:02Z",
                "type": "gemini",
                "content": turn.answer,
                "tokens": {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0, "total": 110},
            }
        )
    path = folder / "session.json"
    path.write_bytes(
        _json(
            {
                "sessionId": dialogue.id,
                "projectHash": "abc123",
                "startTime": "2025-12-01T10:00:00Z",
                "messages": messages,
            }
        )
    )
    return path


def write_openhands(dialogue: Dialogue, folder: Path) -> Path:
    events: list[dict] = []

    def add(event: dict) -> None:
        events.append({"id": len(events), "timestamp": "2025-08-31T10:00:00", **event})

    add({"source": "agent", "message": dialogue.system, "action": "system", "args": {"content": dialogue.system}})
    for t, turn in enumerate(dialogue.turns):
        add({"source": "user", "message": turn.user, "action": "message", "args": {"content": turn.user}})
        for s, step in enumerate(turn.steps):
            call_id = f"c{t}-{s}"
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": step.tool, "arguments": json.dumps({"command": step.command})},
            }
            metadata = {
                "function_name": step.tool,
                "tool_call_id": call_id,
                "model_response": {
                    "id": f"r{t}-{s}",
                    "model": "m",
                    "choices": [{"message": {"content": "", "tool_calls": [call]}}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 5},
                },
            }
            add(
                {
                    "source": "agent",
                    "message": f"Running {step.command}",
                    "action": "run",
                    "args": {"command": step.command},
                    "tool_call_metadata": metadata,
                }
            )
            add(
                {
                    "source": "agent",
                    "message": "done",
                    "cause": len(events) - 1,
                    "observation": "run",
                    "content": step.result,
                    "tool_call_metadata": {"function_name": step.tool, "tool_call_id": call_id},
                    "extras": {},
                }
            )
        add({"source": "agent", "message": turn.answer, "action": "message", "args": {"content": turn.answer}})
    path = folder / "trajectory.json"
    path.write_bytes(_json(events))
    return path


def write_swe_agent(dialogue: Dialogue, folder: Path) -> Path:
    history: list[dict] = [
        {"role": "system", "content": dialogue.system, "agent": "main", "message_type": "system_prompt"}
    ]
    trajectory: list[dict] = []
    for t, turn in enumerate(dialogue.turns):
        history.append({"role": "user", "content": turn.user, "agent": "main", "message_type": "observation"})
        for s, step in enumerate(turn.steps):
            call_id = f"call_{t}_{s}"
            history.append(
                {
                    "role": "assistant",
                    "content": "",
                    "thought": "",
                    "action": step.command,
                    "agent": "main",
                    "message_type": "action",
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": step.tool, "arguments": json.dumps({"command": step.command})},
                        }
                    ],
                }
            )
            history.append(
                {
                    "role": "tool",
                    "content": step.result,
                    "agent": "main",
                    "message_type": "observation",
                    "tool_call_ids": [call_id],
                }
            )
            trajectory.append({"action": step.command, "observation": step.result, "response": "", "thought": ""})
        history.append(
            {
                "role": "assistant",
                "content": turn.answer,
                "thought": turn.answer,
                "action": "",
                "agent": "main",
                "message_type": "action",
            }
        )
    path = folder / "run.traj"
    path.write_bytes(
        _json(
            {
                "environment": "swe_main",
                "trajectory": trajectory,
                "history": history,
                "info": {"exit_status": "submitted"},
            }
        )
    )
    return path


def write_mini_swe_agent(dialogue: Dialogue, folder: Path) -> Path:
    messages: list[dict] = [{"role": "system", "content": dialogue.system}]
    for turn in dialogue.turns:
        messages.append({"role": "user", "content": turn.user})
        for step in turn.steps:
            messages.append({"role": "assistant", "content": f"THOUGHT: run it.\n\n```bash\n{step.command}\n```"})
            messages.append({"role": "user", "content": step.result})
        messages.append({"role": "assistant", "content": turn.answer})
    path = folder / "run.traj.json"
    path.write_bytes(
        _json(
            {
                "info": {"mini_version": "1.2.0", "exit_status": "Submitted"},
                "messages": messages,
                "trajectory_format": "mini-swe-agent-1",
            }
        )
    )
    return path


def write_aider(dialogue: Dialogue, folder: Path) -> Path:
    lines = ["# aider chat started at 2025-07-01 09:00:00", ""]
    for turn in dialogue.turns:
        lines += [f"#### {line}" for line in (turn.user.splitlines() or [""])] + [""]
        for step in turn.steps:
            lines += [f"> {line}" for line in (step.result.splitlines() or [""])] + [""]
        lines += [turn.answer, ""]
    path = folder / ".aider.chat.history.md"
    path.write_bytes(_bytes("\n".join(lines)))
    return path


def write_anthropic(dialogue: Dialogue, folder: Path) -> Path:
    messages: list[dict] = []
    for t, turn in enumerate(dialogue.turns):
        messages.append({"role": "user", "content": turn.user})
        for s, step in enumerate(turn.steps):
            call_id = f"toolu_{t}_{s}"
            messages.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": call_id, "name": step.tool, "input": {"command": step.command}}
                    ],
                }
            )
            messages.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": step.result}]}
            )
        messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.answer}]})
    path = folder / "request.json"
    path.write_bytes(_json({"model": "claude", "max_tokens": 1024, "system": dialogue.system, "messages": messages}))
    return path


#: format name (``Conversation.format``) -> writer
WRITERS: dict[str, Callable[[Dialogue, Path], Path]] = {
    "neutral-json": write_neutral_json,
    "neutral-jsonl": write_neutral_jsonl,
    "zett-sqlite": write_zett_sqlite,
    "zett-jsonl": write_zett_jsonl,
    "zettcode": write_zettcode,
    "claude-code-jsonl": write_claude_code,
    "codex-rollout-jsonl": write_codex,
    "gemini-cli-session-json": write_gemini_cli,
    "openhands-v0-trajectory-json": write_openhands,
    "swe-agent-traj": write_swe_agent,
    "mini-swe-agent-traj": write_mini_swe_agent,
    "aider-chat-history-md": write_aider,
    "anthropic-messages-json": write_anthropic,
}


_UNSTORABLE = {chr(0), *map(chr, range(0xD800, 0xE000))}


def unstorable_strings(value) -> list[str]:
    """Every string anywhere in a conversation that still holds a character that cannot be stored."""
    found = []
    if isinstance(value, str):
        return [value] if _UNSTORABLE & set(value) else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += unstorable_strings(key) + unstorable_strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            found += unstorable_strings(item)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            found += unstorable_strings(getattr(value, name))
    return found


def reader_name(format: str) -> str:
    """The reader that must recognise a writer's output (neutral JSONL is the neutral reader's too)."""
    return "neutral-json" if format == "neutral-jsonl" else format
