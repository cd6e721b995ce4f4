"""zett_lab's neutral JSON format: OpenAI chat-completions style messages.

A file holds one object ``{"id": ..., "messages": [...]}``, a list of such
objects, a bare list of messages, or JSONL with one object per line. Messages
use ``role`` system/user/assistant/tool, ``content`` (text, or a list of
``{"type": "text"}`` / ``{"type": "image_url"}`` parts), ``tool_calls`` with
``function.name`` / ``function.arguments`` (a JSON string), and ``tool_call_id``.
zett_lab adds optional fields so nothing is lost on a round trip: ``reasoning``
and ``usage`` on assistant messages, ``success`` on tool messages, role
``checkpoint`` for an earlier compaction summary, and top-level ``probes``,
``native_compactions``, ``harness_context`` and ``metadata``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelUsage

from ..errors import InputError
from ..records import JSONValue
from .conversation import Conversation, parse_harness_context, parse_native_compactions, parse_probes
from .registry import Reader, register
from .storable import decode, loads, loads_utf8, not_json

FORMAT = "neutral-json"
_ROLES = ("system", "user", "assistant", "tool", "checkpoint", "agent")
_FOREIGN_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def parse_json_document(path: Path) -> tuple[JSONValue, bool]:
    """Parse a JSON file, or JSONL when it holds several values; return (data, is_jsonl).

    Errors name the file, line and column.
    """
    raw = path.read_bytes()
    try:
        return loads_utf8(raw), False
    except json.JSONDecodeError:
        text = decode(raw)
    del raw  # not kept beside the text
    try:
        return loads(text), False
    except json.JSONDecodeError as whole_error:
        values = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                values.append(loads(line))
            except json.JSONDecodeError as error:
                if not values:  # not JSON lines either: the document's own error says where it breaks
                    raise not_json(path, whole_error) from whole_error
                raise not_json(path, error, number) from error
        if not values:
            raise not_json(path, whole_error) from whole_error
        return values, True


_OBJECT_KEYS = {"id", "messages", "probes", "native_compactions", "harness_context", "metadata"}


def _is_message_list(value: Any) -> bool:
    """A bare list of messages (objects with a role), not a list of conversations (objects with messages)."""
    return (
        isinstance(value, list)
        and any(isinstance(m, dict) and "role" in m for m in value)
        and not any(isinstance(m, dict) and "messages" in m for m in value)
    )


#: Keys a neutral message may start with (an object starting with one of them is taken as a message).
_MESSAGE_KEYS = {
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "success",
    "reasoning",
    "reasoning_content",
    "provider",
    "model",
    "usage",
}
_FIRST_KEY = re.compile(rb'\s*(\[\s*)?\{\s*("(?:[^"\\]|\\.){0,200}")\s*:')


def _sniff(path: Path, head: bytes) -> bool:
    """Recognise the format by the first key of the first object: the same at any file size.

    A document (or a JSONL file's first line) that opens an object with one of this format's keys
    (``{"id": ...``, ``{"messages": ...``), or a list whose first object does (``[{"id": ...``, or a
    message: ``[{"role": ...``). Nothing later in the file decides, so a large file is recognised
    exactly as a small one of the same shape; what does not fit (another format's keys or content
    blocks) is refused by the reader, naming the place.
    """
    if not path.is_file():
        return False
    match = _FIRST_KEY.match(head)
    if match is None:
        return False
    try:
        key = json.loads(match.group(2))
    except ValueError:
        return False
    return key in _OBJECT_KEYS or (match.group(1) is not None and key in _MESSAGE_KEYS)


def read_neutral(path: Path) -> list[Conversation]:
    """Read every conversation in a neutral JSON/JSONL file."""
    data, is_jsonl = parse_json_document(path)
    if _is_message_list(data):
        items: list[tuple[str, Any]] = [("", {"id": path.stem, "messages": data})]
    elif isinstance(data, list):
        label = "line" if is_jsonl else "item"
        items = [(f"{label} {n}", item) for n, item in enumerate(data, start=1 if is_jsonl else 0)]
    else:
        items = [("", data)]
    conversations = []
    for where, item in items:
        if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
            raise InputError(path, where or None, "expected an object with a 'messages' list")
        unexpected = sorted(set(item) - _OBJECT_KEYS)
        if unexpected:
            raise InputError(
                path,
                where or None,
                f"unexpected key(s) {unexpected}: not zett_lab's neutral JSON, whose objects hold only "
                f"{sorted(_OBJECT_KEYS)}",
            )
        if not item["messages"]:
            raise InputError(path, where or None, "'messages' is an empty list: there is no conversation to read")
        conversations.append(conversation_from_neutral(item, path, where))
    return conversations


def conversation_from_neutral(item: Mapping[str, JSONValue], path: Path, where: str = "") -> Conversation:
    """Build one Conversation from a neutral object; errors name the message index and field."""
    prefix = f"{where}, " if where else ""
    messages: list[AnyMessage] = []
    usage: dict[int, ModelUsage] = {}
    names: dict[str, str] = {}
    recorded, metadata = item.get("messages"), item.get("metadata", {})
    if not isinstance(recorded, list):
        raise InputError(path, where or None, "expected an object with a 'messages' list")
    if not isinstance(metadata, dict):
        raise InputError(path, f"{prefix}field 'metadata'", "expected an object")
    for index, raw in enumerate(recorded):
        place = f"{prefix}message {index}"
        if not isinstance(raw, dict):
            raise InputError(path, place, "a message must be a JSON object")
        message = _message_from_neutral(raw, path, place, names)
        recorded_usage = raw.get("usage")
        if isinstance(message, AssistantMessage) and isinstance(recorded_usage, dict):
            try:
                usage[index] = ModelUsage(**cast(dict[str, Any], recorded_usage))  # ModelUsage checks its fields
            except (TypeError, ValueError) as error:
                raise InputError(path, f"{place}, field 'usage'", str(error)) from error
        messages.append(message)
    conversation = Conversation(
        id=str(item.get("id") or path.stem),
        messages=messages,
        source=str(path),
        format=FORMAT,
        usage=usage,
        native_compactions=parse_native_compactions(item.get("native_compactions", []), path, len(messages)),
        probes=parse_probes(item.get("probes", []), path, len(messages)),
        metadata=dict(metadata),
        harness_context=parse_harness_context(item.get("harness_context", []), path, len(messages)),
    )
    return conversation.validate()


def _text_parts(content: Any, path: Path, place: str) -> str | list[TextContent | ImageContent]:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputError(path, f"{place}, field 'content'", "expected text or a list of content parts")
    parts: list[TextContent | ImageContent] = []
    for n, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise InputError(path, f"{place}, content part {n}", "a text part needs 'text' as a string")
            parts.append(TextContent(text=part["text"]))
        elif kind == "image_url":
            image_url = part.get("image_url", {})
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            if not isinstance(url, str):
                raise InputError(path, f"{place}, content part {n}", "an image_url part needs a URL string")
            parts.append(ImageContent(source=ImageUrlSource(url=url)))
        else:
            foreign = " (another agent's content block: not zett_lab's neutral JSON)" if kind in _FOREIGN_BLOCKS else ""
            raise InputError(path, f"{place}, content part {n}", f"unknown content part type {kind!r}{foreign}")
    return parts


def _message_from_neutral(raw: dict[str, Any], path: Path, place: str, names: dict[str, str]) -> AnyMessage:
    role = raw.get("role")
    content = raw.get("content")
    if role == "system":
        return SystemMessage(content=content if isinstance(content, str) else "")
    if role == "user":
        return UserMessage(content=_text_parts(content, path, place))
    if role == "checkpoint":
        return CompactedMessage(content=_text_parts(content, path, place))
    if role == "agent":
        return AgentMessage(content=content if isinstance(content, str) else "")
    if role == "assistant":
        calls = []
        recorded_calls = raw.get("tool_calls") or []
        if not isinstance(recorded_calls, list):
            raise InputError(path, f"{place}, field 'tool_calls'", "must be a list of tool calls")
        for n, call in enumerate(recorded_calls):
            field = f"{place}, tool_calls[{n}]"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not function.get("name") or not isinstance(function["name"], str):
                raise InputError(path, field, "a tool call needs function.name (a string)")
            arguments = function.get("arguments") or "{}"
            if isinstance(arguments, str):
                try:
                    arguments = loads(arguments)
                except json.JSONDecodeError as error:
                    raise InputError(path, f"{field}.function.arguments", f"not valid JSON ({error.msg})") from error
            if not isinstance(arguments, dict):
                raise InputError(path, f"{field}.function.arguments", "must be a JSON object")
            call_id = str(call.get("id") or f"call-{place}-{n}")
            names[call_id] = function["name"]
            calls.append(ToolCall(id=call_id, name=function["name"], arguments=arguments))
        reasoning = raw.get("reasoning", raw.get("reasoning_content"))
        return AssistantMessage(
            content=content if isinstance(content, str) else "",
            reasoning=reasoning if isinstance(reasoning, str) else None,
            tool_calls=tuple(calls),
            provider=raw.get("provider") if isinstance(raw.get("provider"), str) else None,
            model=raw.get("model") if isinstance(raw.get("model"), str) else None,
        )
    if role == "tool":
        tool_call_id = raw.get("tool_call_id")
        if not tool_call_id:
            raise InputError(path, f"{place}, field 'tool_call_id'", "a tool message needs tool_call_id")
        return ToolMessage(
            tool_call_id=str(tool_call_id),
            name=str(raw.get("name") or names.get(str(tool_call_id), "tool")),
            content=_text_parts(content, path, place),
            success=bool(raw.get("success", True)),
        )
    problem = f"unknown role {role!r}" if "role" in raw else "missing"
    raise InputError(path, f"{place}, field 'role'", f"{problem} (expected one of {', '.join(_ROLES)})")


register(
    Reader(
        name=FORMAT,
        description="neutral JSON/JSONL: OpenAI chat-completions style messages",
        sniff=_sniff,
        read=read_neutral,
    ),
    fallback=True,
)
