"""Render a summary request's span as a plain-text transcript, and count text tokens.

Every offline summarizer works on the same rendering of the messages the engine asks
it to summarize (``request.messages[1:-1]``: the instructions and the closing
"Produce the checkpoint now." are not part of the span):

==========================  ==============================================================
message                     rendered as
==========================  ==============================================================
``UserMessage``             ``[user] text`` (images as ``[image]``)
``AgentMessage``            ``[agent] text``
``AssistantMessage``        ``[assistant reasoning] ...``, ``[assistant] content`` and one
                            ``[tool call NAME] {"json": "arguments"}`` per tool call
``ToolMessage``             ``[tool result NAME] text`` (``[tool error NAME]`` when it failed)
``CompactedMessage``        ``[earlier summary] text`` (an earlier checkpoint, kept as such;
                            the engine's checkpoint prefix is removed)
``SystemMessage``           ``[system] text`` (the engine never puts one in a span)
==========================  ==============================================================

A segment's text may span several lines; continuation lines follow the labelled
first line unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelRequest

from ..load.conversation import CHECKPOINT_PREFIX
from ..load.text import content_text
from ..tokens import count_text_tokens, count_tokens

#: The closing user message of every summary request the engine sends.
CHECKPOINT_REQUEST = "Produce the checkpoint now."


@dataclass(frozen=True)
class Segment:
    """One rendered piece of a message.

    Attributes:
        index: position of the source message in the span.
        kind: ``user``, ``agent``, ``assistant``, ``reasoning``, ``tool_call``,
            ``tool_result``, ``checkpoint`` or ``system``.
        label: the transcript label without brackets, e.g. ``tool call bash``.
        text: the rendered text (may contain newlines).
        tool_name: the tool's name for ``tool_call`` and ``tool_result`` segments.
        tokens: for ``tool_result`` segments, the engine's count of the whole tool
            message (what masking reports); 0 otherwise.
    """

    index: int
    kind: str
    label: str
    text: str
    tool_name: str | None = None
    tokens: int = 0

    def render(self) -> str:
        """``[label] text`` (text on the same line as the label)."""
        return f"[{self.label}] {self.text}" if self.text else f"[{self.label}]"


def span_of(request: ModelRequest) -> list[AnyMessage]:
    """The messages a summary request asks to summarize.

    The engine sends ``[SystemMessage(instructions), *older, UserMessage("Produce the
    checkpoint now.")]``; the span is ``messages[1:-1]``. A request built some other way
    (no leading system message, or no closing request) keeps those messages in the span.
    """
    messages = list(request.messages)
    start = 1 if messages and isinstance(messages[0], SystemMessage) else 0
    end = len(messages)
    if end > start and _is_checkpoint_request(messages[-1]):
        end -= 1
    return messages[start:end]


def _is_checkpoint_request(message: AnyMessage) -> bool:
    return (
        type(message) is UserMessage
        and isinstance(message.content, str)
        and message.content.strip() == CHECKPOINT_REQUEST
    )


def _text(content: object) -> str:
    return content_text(content, image="[image]")


def _arguments(arguments: object) -> str:
    try:
        return json.dumps(arguments, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(arguments, ensure_ascii=False, default=repr)


def segments(messages: Sequence[AnyMessage]) -> list[Segment]:
    """Render ``messages`` into transcript segments, in order (see the module docstring)."""
    out: list[Segment] = []
    for index, message in enumerate(messages):
        if isinstance(message, CompactedMessage):
            text = _text(message.content)
            if text.startswith(CHECKPOINT_PREFIX):
                text = text[len(CHECKPOINT_PREFIX) :]
            out.append(Segment(index, "checkpoint", "earlier summary", text.strip()))
        elif isinstance(message, UserMessage):
            out.append(Segment(index, "user", "user", _text(message.content).strip()))
        elif isinstance(message, AgentMessage):
            out.append(Segment(index, "agent", "agent", message.content.strip()))
        elif isinstance(message, AssistantMessage):
            if message.reasoning and message.reasoning.strip():
                out.append(Segment(index, "reasoning", "assistant reasoning", message.reasoning.strip()))
            if message.content.strip() or not message.tool_calls:
                out.append(Segment(index, "assistant", "assistant", message.content.strip()))
            for call in message.tool_calls:
                out.append(Segment(index, "tool_call", f"tool call {call.name}", _arguments(call.arguments), call.name))
        elif isinstance(message, ToolMessage):
            label = f"tool result {message.name}" if message.success else f"tool error {message.name}"
            out.append(
                Segment(
                    index,
                    "tool_result",
                    label,
                    _text(message.content).strip(),
                    message.name,
                    count_tokens([message]),
                )
            )
        elif isinstance(message, SystemMessage):
            out.append(Segment(index, "system", "system", message.content.strip()))
        else:  # pragma: no cover - AnyMessage is closed, but be safe with subclasses
            out.append(Segment(index, "other", type(message).__name__, repr(message)))
    return out


def render(messages: Sequence[AnyMessage]) -> str:
    """The whole span as a transcript: one ``[label] text`` block per segment."""
    return "\n".join(segment.render() for segment in segments(messages))


@dataclass(frozen=True)
class TranscriptLine:
    """One selectable line of the transcript (used by the extractive and anchor summarizers).

    Attributes:
        order: position in the transcript (selection output keeps this order).
        segment: position of the segment the line came from.
        label: the segment's label; the line is shown as ``[label] text`` when it starts
            a new run of selected lines.
        kind: the segment's kind.
        text: the line (or sentence) text.
    """

    order: int
    segment: int
    label: str
    kind: str
    text: str


def join_units(units: Sequence[TranscriptLine]) -> str:
    """Render selected units in transcript order, labelling each run from one segment once."""
    lines: list[str] = []
    previous_segment = None
    for unit in sorted(units, key=lambda u: u.order):
        if unit.segment != previous_segment:
            lines.append(f"[{unit.label}] {unit.text}")
        else:
            lines.append(unit.text)
        previous_segment = unit.segment
    return "\n".join(lines)


def unit_cost(unit: TranscriptLine) -> int:
    """Estimated tokens the unit adds when rendered with its label (plus the newline)."""
    return count_text_tokens(f"[{unit.label}] {unit.text}\n")
