"""Gemini CLI chat recordings (``~/.gemini/tmp/<project hash>/chats/session-*.json``).

One JSON object ``{"sessionId", "projectHash", "startTime", "lastUpdated",
"messages": [...]}`` (a list of such objects is read as several sessions).
Messages have ``type`` ``user`` or ``gemini``; ``info`` / ``error`` /
``warning`` messages are what the CLI showed the user and are skipped (counted
in ``metadata["ui_messages_skipped"]``). A ``gemini`` message carries its text,
``thoughts`` (readable ``subject`` / ``description`` pairs, kept as reasoning),
``toolCalls`` (each with its ``result`` function responses and a ``status``)
and ``tokens`` usage. A call whose result was not recorded (e.g. cancelled)
gets a synthesized failed result (see :mod:`._common`).

Gemini CLI's own chat compression is not written into these files with its
summary; an ``info`` message that reports a compression is recorded as a native
compaction with an empty summary and ``metadata["summary_missing"] = True``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from zett_agent.messages import TextContent, ToolCall

from ...errors import InputError
from ..conversation import Conversation
from ..registry import Reader, register
from ._common import (
    Builder,
    finish_file,
    join_text,
    key_pattern,
    load_json,
    parse_arguments,
    report_unknown,
    simplify,
    usage_from,
)

FORMAT = "gemini-cli-session-json"
_UI_TYPES = {"info", "error", "warning"}
_SESSION = key_pattern("sessionId")
_PROJECT = key_pattern("projectHash")
_MESSAGES = key_pattern("messages")
_COMPRESSION = re.compile(r"compress", re.IGNORECASE)


def sniff(path: Path, head: bytes) -> bool:
    """A Gemini CLI session: a JSON object (or list of them) with sessionId, projectHash and messages."""
    stripped = head.lstrip()
    if not path.is_file() or stripped[:1] not in (b"{", b"["):
        return False
    start = stripped[:4096]
    return bool(_SESSION.search(start) and _PROJECT.search(start) and _MESSAGES.search(stripped))


def read(path: Path) -> list[Conversation]:
    """Every session in a Gemini CLI chat recording."""
    data = load_json(path)
    sessions = data if isinstance(data, list) else [data]
    unknown: Counter[str] = Counter()
    conversations = []
    for n, session in enumerate(sessions):
        where = f"session {n}" if isinstance(data, list) else None
        if not isinstance(session, dict) or not isinstance(session.get("messages"), list):
            raise InputError(path, where, "expected a Gemini CLI session object with a 'messages' list")
        conversation = _session(session, path, where, unknown)
        if conversation is not None:
            conversations.append(conversation)
    reported = report_unknown(path, unknown, "message types")
    for conversation in conversations:
        conversation.metadata["unknown_record_types"] = reported
    return finish_file(path, conversations, "this Gemini CLI session")


def _session(session: dict[str, Any], path: Path, where: str | None, unknown: Counter[str]):
    b = Builder("gemini-cli")
    models: Counter[str] = Counter()
    prefix = f"{where}, " if where else ""
    for index, message in enumerate(session["messages"]):
        place = f"{prefix}message {index}"
        if not isinstance(message, dict):
            raise InputError(path, place, "a message must be a JSON object")
        mtype = message.get("type")
        if mtype == "user":
            b.user(_content(message.get("content")))
        elif mtype == "gemini":
            _gemini(b, message, place, path, models)
        elif isinstance(mtype, str) and mtype in _UI_TYPES:
            b.counts["ui_messages_skipped"] += 1
            text = message.get("content")
            if mtype == "info" and isinstance(text, str) and _COMPRESSION.search(text):
                b.compaction(
                    "",
                    kind="gemini-cli-compression",
                    metadata={"message_index": index, "info": text, "summary_missing": True, "span": "cumulative"},
                )
        else:
            unknown[str(mtype)] += 1
    if not b.has_dialogue():
        return None
    meta = {
        "agent": "gemini-cli",
        "model": models.most_common(1)[0][0] if models else None,
        "project_hash": session.get("projectHash"),
        "start_time": session.get("startTime"),
        "last_updated": session.get("lastUpdated"),
        "system_prompt_recorded": False,
    }
    return b.build(str(session.get("sessionId") or path.stem), path, FORMAT, meta)


def _gemini(b: Builder, message: dict[str, Any], place: str, path: Path, models: Counter[str]) -> None:
    model = message.get("model")
    if model:
        models[model] += 1
    thoughts = message.get("thoughts") or []
    reasoning = join_text(
        (f"**{t.get('subject')}**\n{t.get('description') or ''}" if t.get("subject") else t.get("description"))
        for t in thoughts
        if isinstance(t, dict)
    )
    calls = []
    results = []
    for n, call in enumerate(message.get("toolCalls") or []):
        if not isinstance(call, dict) or not call.get("name"):
            raise InputError(path, f"{place}, toolCalls[{n}]", "a tool call needs a name")
        call_id = str(call.get("id") or b.new_call_id())
        calls.append(ToolCall(id=call_id, name=str(call["name"]), arguments=parse_arguments(call.get("args"))))
        results.append((call_id, call))
    tokens = message.get("tokens") or {}
    usage = None
    if isinstance(tokens, dict):
        usage = usage_from(
            (tokens.get("input") or 0) + (tokens.get("tool") or 0),
            (tokens.get("output") or 0) + (tokens.get("thoughts") or 0),
            cache_read=tokens.get("cached"),
            reasoning=tokens.get("thoughts"),
        )
    content = message.get("content")
    b.assistant(
        content if isinstance(content, str) else _text(content),
        reasoning or None,
        calls,
        model=model,
        provider="google",
        usage=usage,
    )
    for call_id, call in results:
        output = _result(call.get("result"))
        if output is None:
            continue  # the builder synthesizes a failed result when the log moves on
        status = call.get("status")
        b.tool_result(call_id, output, success=status not in ("error", "cancelled"))


def _result(result: Any) -> Any:
    """The text the model got back for one call, or None when nothing was recorded."""
    if result is None:
        return None
    if isinstance(result, str):
        return result
    pieces: list[str] = []
    for part in result if isinstance(result, list) else [result]:
        if not isinstance(part, dict):
            continue
        response = (
            part.get("functionResponse", {}).get("response") if isinstance(part.get("functionResponse"), dict) else None
        )
        if isinstance(response, dict):
            value = response.get("output", response.get("error", response.get("content")))
            pieces.append(value if isinstance(value, str) else json.dumps(response, ensure_ascii=False))
        elif isinstance(part.get("text"), str):
            pieces.append(part["text"])
    return "\n\n".join(pieces) if pieces else None


def _text(content: Any) -> str:
    if isinstance(content, list):
        return join_text(p.get("text") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _content(content: Any) -> Any:
    if isinstance(content, list):
        parts = [TextContent(text=p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return simplify(parts) if parts else ""
    return "" if content is None else str(content)


register(Reader(FORMAT, "Gemini CLI chat recording (~/.gemini/tmp/*/chats/session-*.json)", sniff, read))
