"""Anthropic Messages API message lists.

Accepted shapes: a list of messages ``[{"role": "user"|"assistant", "content":
...}]``; a request body ``{"system": ..., "messages": [...], "model": ...}``
(``system`` as text or a list of text blocks); or a list of request bodies (one
conversation each). Content is text or a list of blocks:

* ``text`` -> text; ``image`` (base64 or url source) -> image content;
  ``document`` with a text source -> text (other documents are replaced by a
  ``[document]`` marker and counted in ``metadata["documents_replaced"]``);
* ``thinking`` -> reasoning (a block with only a signature is encrypted: dropped
  and counted); ``redacted_thinking`` -> dropped and counted in
  ``metadata["encrypted_reasoning_dropped"]``;
* ``tool_use`` -> a tool call; ``tool_result`` (in a user message) -> its
  result (``is_error`` -> failure); text after the results in the same user
  message becomes a user message of its own;
* ``server_tool_use`` plus its ``*_tool_result`` block (web search, code
  execution: run by Anthropic and returned inside the assistant message) -> a
  tool call and its result, splitting the assistant message around them.

Unknown block types are skipped, warned about and counted in
``metadata["unknown_record_types"]``. Conversation ids are the object's ``id``
when it has one, else the file name (``#<n>`` for several).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, TypeGuard

from zett_agent.messages import TextContent, ToolCall

from ...errors import InputError
from ..conversation import Conversation
from ..registry import Reader, register
from ..storable import loads
from ._common import (
    Builder,
    anthropic_usage,
    finish_file,
    image_from_source,
    join_text,
    key_pattern,
    load_json,
    report_unknown,
    simplify,
    take_thinking,
)

FORMAT = "anthropic-messages-json"
_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use")
_BLOCK = key_pattern("type", "(?:" + "|".join(_ANTHROPIC_BLOCKS) + ")")
_ROLE = key_pattern("role", "(?:user|assistant)")
_OTHER_FORMATS = (
    key_pattern("sessionId"),
    key_pattern("parentUuid"),
    key_pattern("trajectory"),
    key_pattern("history"),
)


def sniff(path: Path, head: bytes) -> bool:
    """An Anthropic message list or request body (with Anthropic content blocks or a top-level ``system``)."""
    stripped = head.lstrip()
    if not path.is_file() or stripped[:1] not in (b"[", b"{"):
        return False
    if any(p.search(stripped[:4096]) for p in _OTHER_FORMATS):
        return False
    try:
        data = loads(head) if len(head) < 64 * 1024 else None
    except json.JSONDecodeError:
        data = None
    if data is not None:
        return any(
            _is_request(item)
            for item in (
                data
                if isinstance(data, list) and data and all(isinstance(i, dict) and "messages" in i for i in data)
                else [data]
            )
        )
    return bool(_ROLE.search(stripped) and _BLOCK.search(stripped))


def _is_request(data: Any) -> bool:
    if isinstance(data, dict):
        messages = data.get("messages")
        if not _is_message_list(messages):
            return False
        return "system" in data or _has_anthropic_blocks(messages) or "max_tokens" in data
    return _is_message_list(data) and _has_anthropic_blocks(data)


def _is_message_list(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in value)
    )


def _has_anthropic_blocks(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in m["content"])
        for m in messages
    )


def read(path: Path) -> list[Conversation]:
    """Every conversation in an Anthropic Messages API JSON file."""
    data = load_json(path)
    if isinstance(data, list) and data and all(isinstance(i, dict) and "messages" in i for i in data):
        items = [(f"item {n}", item) for n, item in enumerate(data)]
    elif isinstance(data, list):
        items = [("", {"messages": data})]
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        items = [("", data)]
    else:
        raise InputError(path, None, "expected an Anthropic message list or an object with a 'messages' list")
    unknown: Counter[str] = Counter()
    conversations = []
    for n, (where, item) in enumerate(items):
        b = Builder("anthropic")
        prefix = f"{where}, " if where else ""
        system = item.get("system")
        if isinstance(system, str) and system.strip():
            b.system(system)
        elif isinstance(system, list):
            text = join_text(block.get("text") for block in system if isinstance(block, dict))
            if text:
                b.system(text)
        elif system is not None and not isinstance(system, str):
            raise InputError(path, f"{prefix}field 'system'", "expected text or a list of text blocks")
        messages = item.get("messages")
        if not isinstance(messages, list):
            raise InputError(path, f"{prefix}field 'messages'", "expected a list of messages")
        for index, message in enumerate(messages):
            _message(b, message, path, f"{prefix}message {index}", unknown)
        if not b.has_dialogue():
            continue
        meta = {"agent": "anthropic-messages", "model": item.get("model")}
        if isinstance(item.get("tools"), list):
            meta["tools"] = [t.get("name") for t in item["tools"] if isinstance(t, dict)]
        default_id = path.stem if len(items) == 1 else f"{path.stem}#{n}"
        conversations.append(b.build(str(item.get("id") or default_id), path, FORMAT, meta))
    reported = report_unknown(path, unknown, "content block types")
    for conversation in conversations:
        conversation.metadata["unknown_record_types"] = reported
    return finish_file(path, conversations, "this Anthropic message list")


def _message(b: Builder, message: Any, path: Path, place: str, unknown: Counter[str]) -> None:
    if not isinstance(message, dict):
        raise InputError(path, place, "a message must be a JSON object")
    role = message.get("role")
    content = message.get("content")
    if role not in ("user", "assistant"):
        raise InputError(path, f"{place}, field 'role'", f"unknown role {role!r} (expected user or assistant)")
    if content is None:
        content = ""
    if not isinstance(content, (str, list)):
        raise InputError(path, f"{place}, field 'content'", "expected text or a list of content blocks")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if role == "user":
        _user_message(b, blocks, path, place, unknown)
        return
    _assistant_message(b, message, blocks, path, place, unknown)


def _assistant_message(
    b: Builder, message: dict[str, Any], blocks: list[Any], path: Path, place: str, unknown: Counter[str]
) -> None:
    """An assistant message's blocks: text, thinking and tool calls as assistant messages, split where a
    server tool's call and result stand between them; its usage on the last."""
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []

    def flush(extra_calls: list[ToolCall] | None = None) -> None:
        nonlocal texts, thoughts, calls
        if texts or thoughts or calls or extra_calls:
            b.assistant(
                join_text(texts),
                join_text(thoughts) or None,
                [*calls, *(extra_calls or [])],
                model=message.get("model"),
                provider="anthropic",
            )
        texts, thoughts, calls = [], [], []

    for n, block in enumerate(blocks):
        btype = block.get("type") if isinstance(block, dict) else None
        if btype == "text":
            texts.append(str(block.get("text") or ""))
        elif btype == "thinking" and not isinstance(block.get("thinking", ""), str):
            raise InputError(path, f"{place}, content[{n}].thinking", "must be text")
        elif btype and take_thinking(block, thoughts, b):
            continue
        elif btype == "tool_use":
            if not block.get("name"):
                raise InputError(path, f"{place}, content[{n}]", "a tool_use block needs a name")
            calls.append(
                ToolCall(
                    id=str(block.get("id") or b.new_call_id()),
                    name=str(block["name"]),
                    arguments=_dict(block.get("input")),
                )
            )
        elif btype == "server_tool_use":
            call = ToolCall(
                id=str(block.get("id") or b.new_call_id()),
                name=str(block.get("name") or "server_tool"),
                arguments=_dict(block.get("input")),
            )
            flush([call])
            b.counts["server_tool_calls"] += 1
        elif isinstance(btype, str) and btype.endswith("_tool_result") and block.get("tool_use_id"):
            flush()
            b.tool_result(str(block["tool_use_id"]), _server_result(block.get("content")))
        else:
            unknown[str(btype)] += 1
    flush()
    if usage:
        b.set_usage(anthropic_usage(usage))


def _user_message(b: Builder, blocks: list[Any], path: Path, place: str, unknown: Counter[str]) -> None:
    """A user message's blocks: its tool results, then its text, images and documents as one user message."""
    parts: list[Any] = []
    for n, block in enumerate(blocks):
        btype = block.get("type") if isinstance(block, dict) else None
        if btype == "tool_result":
            if not block.get("tool_use_id"):
                raise InputError(path, f"{place}, content[{n}]", "a tool_result block needs tool_use_id")
            b.tool_result(
                str(block["tool_use_id"]), _result(block.get("content"), b), success=not block.get("is_error")
            )
        elif btype in ("text", "image", "document"):
            part = _part(block, b)
            if part is not None:
                parts.append(part)
        else:
            unknown[str(btype)] += 1
    if parts:
        b.user(simplify(parts))


def _part(block: dict[str, Any], b: Builder) -> Any:
    btype = block.get("type")
    if btype == "text":
        return TextContent(text=str(block.get("text") or ""))
    if btype == "image":
        return image_from_source(block.get("source") or {})
    source = block.get("source") or {}
    if isinstance(source, dict) and source.get("type") == "text":
        return TextContent(text=str(source.get("data") or ""))
    b.counts["documents_replaced"] += 1
    return TextContent(text=f"[document{': ' + block['title'] if block.get('title') else ''}]")


def _result(content: Any, b: Builder) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p for p in (_part(block, b) for block in content if isinstance(block, dict)) if p is not None]
        return simplify(parts) if parts else ""
    return json.dumps(content, ensure_ascii=False)


def _server_result(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else ({} if value is None else {"input": value})


register(Reader(FORMAT, "Anthropic Messages API message list or request body", sniff, read))
