"""The text of a message: one definition, used for anchors, summaries' transcripts and displays.

Robust to bytes, lone surrogates and odd content parts; images carry no text (a caller that
shows where an image was passes a marker).

Example::

    >>> from zett_agent.messages import UserMessage
    >>> message_text(UserMessage(content="Fix ./src/auth.py"))
    'Fix ./src/auth.py'
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserMessage,
)


def clean_text(value: object) -> str:
    """Any content as a str that encodes to UTF-8: bytes decoded with replacement, lone surrogates replaced."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if not isinstance(value, str):
        value = "" if value is None else str(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
    return value


def content_text(content: object, image: str = "") -> str:
    """Text parts of message content joined by newlines; an image becomes ``image`` (left out when empty)."""
    if isinstance(content, (str, bytes, bytearray, memoryview)) or content is None:
        return clean_text(content)
    if isinstance(content, Sequence):
        pieces = []
        for part in content:
            if isinstance(part, TextContent):
                pieces.append(clean_text(part.text))
            elif isinstance(part, (str, bytes, bytearray)):
                pieces.append(clean_text(part))
            elif isinstance(getattr(part, "text", None), (str, bytes)):
                pieces.append(clean_text(part.text))
            elif isinstance(part, ImageContent) and image:
                pieces.append(image)
            # other parts carry no text
        return "\n".join(pieces)
    return clean_text(content)


def argument_strings(value: object) -> Iterator[str]:
    """Every string and number in tool-call arguments (nested dicts and lists walked, keys left out), as text."""
    if isinstance(value, (str, bytes, bytearray)):
        yield clean_text(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from argument_strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from argument_strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def tool_call_text(call: ToolCall) -> str:
    """The string values of a tool call's arguments, one per line (keys left out)."""
    arguments = call.arguments
    if isinstance(arguments, str):
        return clean_text(arguments)
    return "\n".join(argument_strings(arguments))


def message_text(message: object) -> str:
    """The text of a message that anchors are extracted from.

    User/agent/tool/system content (text parts only), assistant content plus the
    string values of its tool-call arguments. Assistant ``reasoning`` is not
    included (providers do not send it back as context).
    """
    if isinstance(message, AssistantMessage):
        pieces = [clean_text(message.content)]
        pieces.extend(tool_call_text(call) for call in message.tool_calls or ())
        return "\n".join(piece for piece in pieces if piece)
    if isinstance(message, (UserMessage, ToolMessage, AgentMessage, SystemMessage)):
        return content_text(message.content)
    return content_text(getattr(message, "content", ""))
