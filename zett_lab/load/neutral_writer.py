"""Conversations written as zett_lab's neutral JSON: the format :mod:`zett_lab.load.neutral` reads.

Example::

    >>> from zett_lab.load.neutral_writer import write_neutral
    >>> write_neutral(conversations, "sessions.json")   # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolMessage,
)
from zett_agent.model import ModelUsage

from ..files import check_output, write_atomic
from ..records import JSONObject, JSONValue

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class _WritableProbe(Protocol):
    def to_dict(self) -> JSONObject: ...


class Recorded(Protocol):
    """What the writer needs of a conversation (a :class:`~zett_lab.load.conversation.Conversation`)."""

    @property
    def id(self) -> str: ...
    @property
    def messages(self) -> Sequence[AnyMessage]: ...
    @property
    def usage(self) -> Mapping[int, ModelUsage]: ...
    # Probe, NativeCompaction and HarnessContext are defined next to Conversation, which imports this module:
    # naming them here would be an import cycle, so they are typed by what the writer uses of them.
    @property
    def probes(self) -> Sequence[_WritableProbe]: ...
    @property
    def native_compactions(self) -> Sequence[DataclassInstance]: ...
    @property
    def harness_context(self) -> Sequence[DataclassInstance]: ...
    @property
    def metadata(self) -> Mapping[str, JSONValue]: ...
    def input_files(self) -> list[Path]: ...


def message_to_neutral(message: AnyMessage, usage: ModelUsage | None = None) -> JSONObject:
    """One zett message as a neutral JSON object (lossless for text, tool calls and image URLs)."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, AssistantMessage):
        out: JSONObject = {"role": "assistant", "content": message.content}
        if message.reasoning is not None:
            out["reasoning"] = message.reasoning
        for field in ("provider", "model"):
            if getattr(message, field) is not None:
                out[field] = getattr(message, field)
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
                }
                for call in message.tool_calls
            ]
        if usage is not None:
            out["usage"] = asdict(usage)
        return out
    if isinstance(message, ToolMessage):
        out = {"role": "tool", "tool_call_id": message.tool_call_id, "name": message.name}
        out["content"] = _content_to_neutral(message.content)
        if not message.success:
            out["success"] = False
        return out
    if isinstance(message, AgentMessage):
        return {"role": "agent", "content": message.content}
    role = "checkpoint" if isinstance(message, CompactedMessage) else "user"
    return {"role": role, "content": _content_to_neutral(message.content)}


def _content_to_neutral(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextContent):
            parts.append({"type": "text", "text": part.text})
        elif isinstance(part, ImageContent) and isinstance(part.source, ImageUrlSource):
            parts.append({"type": "image_url", "image_url": {"url": part.source.url}})
        else:
            raise ValueError(
                "the neutral format holds text and image URLs only; embedded image bytes cannot be written"
            )
    return parts


def conversation_to_neutral(conversation: Recorded) -> JSONObject:
    """A Conversation as one neutral JSON object."""
    return {
        "id": conversation.id,
        "messages": [message_to_neutral(m, conversation.usage.get(i)) for i, m in enumerate(conversation.messages)],
        "probes": [p.to_dict() for p in conversation.probes],
        "native_compactions": [asdict(n) for n in conversation.native_compactions],
        "metadata": dict(conversation.metadata),
        **(
            {"harness_context": [asdict(h) for h in conversation.harness_context]}
            if conversation.harness_context
            else {}
        ),
    }


def write_neutral(conversations: Iterable[Recorded], path: str | Path, *, overwrite: bool = False) -> Path:
    """Write conversations as neutral JSON (one object, or a list when several), atomically.

    Never over a file they were read from; an existing ``path`` only with ``overwrite=True``.
    """
    conversations = list(conversations)
    path = check_output(path, [f for c in conversations for f in c.input_files()], overwrite=overwrite)
    items = [conversation_to_neutral(c) for c in conversations]
    payload = items[0] if len(items) == 1 else items
    text = json.JSONEncoder(ensure_ascii=False, indent=1, default=str).iterencode(payload)  # written as encoded
    return write_atomic(path, text, overwrite=overwrite)
