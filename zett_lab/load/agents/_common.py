"""Shared machinery for the agent-log importers.

Every importer turns another agent's log into :class:`~zett_lab.load.conversation.Conversation`
objects through a :class:`Builder`, which owns the rules all importers share:

* **Tool pairing.** A tool result is attached to the open call with its id. When
  the log moves on (a user or a new assistant message) while a call is still
  open, the log lost that result: the builder *synthesizes a failed*
  :class:`ToolMessage` (``success=False``, ``attributes={"synthesized": ...}``)
  and counts it in ``metadata["synthesized_results"]``. If the real result turns
  up later (some agents write it after an interruption notice), the synthesized
  one is replaced in place and counted in ``metadata["late_results"]``. A
  result with no call anywhere in the log is dropped and counted in
  ``metadata["orphan_results_dropped"]``. Calls still open at the very end of a
  log are left dangling (replay allows that). :func:`finish_file` warns once per file
  naming these repairs and their counts (:data:`REPAIRS`).
* **Turns without a final answer.** Real logs end some turns on a tool result
  (the agent was stopped before answering) and go on with the next user
  message; nothing is inserted, and the indices of such user messages are listed
  in ``metadata["turn_ends_after_tool_result"]``.
* **Conversation start.** A conversation must open with a user message. When a
  log opens with assistant output (a resumed or truncated log), a marked
  placeholder ``UserMessage`` is inserted and counted in
  ``metadata["synthesized_messages"]``.
* **Reasoning.** Readable reasoning goes to ``AssistantMessage.reasoning``;
  encrypted or redacted reasoning is dropped and counted in
  ``metadata["encrypted_reasoning_dropped"]``.
* **Native compactions** are recorded with :meth:`Builder.compaction` at the
  current position and never become replayed messages.
* **Unknown record types** (a newer schema) are counted in
  ``metadata["unknown_record_types"]`` and reported once per file with
  an :class:`AgentLogWarning`; the rest of the file is imported.

JSONL is read by :func:`iter_jsonl`, which streams line by line: a line that
is not JSON raises :class:`~zett_lab.errors.InputError` naming the file and
line, except the last line of the file (a log cut off while being written),
which is skipped, warned about and counted in ``metadata["skipped_lines"]``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from zett_agent.messages import (
    AnyMessage,
    AssistantMessage,
    ImageBytesSource,
    ImageContent,
    ImageUrlSource,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolMessage,
    UserContent,
    UserMessage,
)
from zett_agent.model import ModelUsage

from ...errors import InputError, ZettLabWarning
from ...errors import warn as zett_lab_warn
from ..conversation import Conversation, HarnessContext, NativeCompaction, starts_turn
from ..storable import loads, not_json

#: Content of a placeholder inserted when a log's dialogue opens with assistant output.
PLACEHOLDER_USER = "[the recorded log starts here; earlier messages are not in it]"


class AgentLogWarning(ZettLabWarning):
    """Something in an agent log was skipped or repaired; the message names the file and place."""


def warn(path: Path | str, where: str | None, problem: str) -> None:
    """Warn naming the file and the place (line, message index or field)."""
    location = f"{path}: {where}" if where else str(path)
    zett_lab_warn(f"{location}: {problem}", AgentLogWarning, stacklevel=3)


# --- reading -----------------------------------------------------------------------------------


def iter_jsonl(path: Path, stats: Counter[str]) -> Iterator[tuple[int, Any]]:
    """Yield ``(line number, value)`` for each non-blank line of a JSONL file, streaming.

    A line that is not JSON raises :class:`InputError` (file and line) unless it is
    the last non-blank line: a log cut off mid-write keeps everything before it;
    that line is counted in ``stats["skipped_lines"]`` and warned about.
    """
    pending: InputError | None = None
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if pending is not None:
                if raw.strip():
                    raise pending
                continue
            try:
                value = loads(raw)
            except json.JSONDecodeError as error:
                if not raw.strip():
                    continue
                pending = not_json(path, error, number)
                continue
            yield number, value
    if pending is not None:
        stats["skipped_lines"] += 1
        warn(path, pending.where, f"last line is {pending.problem}; skipped it (log cut off?)")


def load_json(path: Path) -> Any:
    """Parse a whole JSON file; errors name the file, line and column."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InputError(path, None, f"cannot read: {error.strerror or error}") from error
    try:
        return loads(raw)
    except json.JSONDecodeError as error:
        raise not_json(path, error) from error


def first_line(head: bytes) -> bytes:
    """The first non-blank line of a file head (possibly cut at the head's end)."""
    return head.lstrip().split(b"\n", 1)[0]


def parse_first_line(head: bytes) -> Any:
    """The first JSONL record when it fits in the head, else None."""
    try:
        return loads(first_line(head))
    except json.JSONDecodeError:
        return None


def key_pattern(key: str, value: str | None = None) -> re.Pattern[bytes]:
    """A bytes regex for ``"key": "value"`` (or just ``"key":``) with any JSON spacing."""
    if value is None:
        return re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:')
    return re.compile(rb'"' + re.escape(key.encode()) + rb'"\s*:\s*"' + value.encode() + rb'"')


# --- content helpers ----------------------------------------------------------------------------


def object_field(record: Mapping[str, Any], key: str) -> dict[str, Any]:
    """``record[key]`` when it is a JSON object, else an empty one (an optional field missing or malformed)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON text is decoded; anything else is kept under ``input``."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            value = loads(raw)
        except json.JSONDecodeError:
            return {"input": raw}
        return value if isinstance(value, dict) else {"input": value}
    return {"input": raw}


def image_from_source(source: Mapping[str, Any]) -> ImageContent | None:
    """An Anthropic-style image source (base64 or url) as zett ImageContent, or None."""
    kind = source.get("type")
    try:
        if kind == "base64":
            data = base64.b64decode(source.get("data") or "", validate=False)
            return ImageContent(
                source=ImageBytesSource(data=data, media_type=str(source.get("media_type") or "image/png"))
            )
        if kind == "url" or "url" in source:
            return ImageContent(source=ImageUrlSource(url=str(source.get("url"))))
    except (ValueError, binascii.Error):
        return None
    return None


def simplify(parts: Sequence[TextContent | ImageContent]) -> str | list[TextContent | ImageContent]:
    """Text-only part lists become one string; lists with images stay lists."""
    texts = [p.text for p in parts if isinstance(p, TextContent)]
    if len(texts) == len(parts):
        return "\n\n".join(texts)
    return list(parts)


def join_text(pieces: Iterable[str | None]) -> str:
    """Join non-blank pieces with blank lines."""
    return "\n\n".join(p for p in (x.strip() if isinstance(x, str) else "" for x in pieces) if p)


def usage_from(
    input_tokens: Any = 0,
    output_tokens: Any = 0,
    cache_read: Any = 0,
    cache_write: Any = 0,
    reasoning: Any = 0,
    cache_reported: bool = True,
) -> ModelUsage | None:
    """A ModelUsage from loosely typed counters (clamped to its invariants), or None when empty."""

    def n(value: Any) -> int:
        try:
            return max(0, int(value or 0))
        except (TypeError, ValueError):
            return 0

    inp, out = n(input_tokens), n(output_tokens)
    if inp == 0 and out == 0:
        return None
    return ModelUsage(
        input_tokens=inp,
        output_tokens=out,
        cache_read_tokens=min(n(cache_read), inp),
        cache_write_tokens=min(n(cache_write), inp),
        reasoning_tokens=min(n(reasoning), out),
        cache_reported=cache_reported,
    )


def anthropic_usage(usage: Any) -> ModelUsage | None:
    """An Anthropic ``usage`` block as ModelUsage: input counts uncached input, cache writes and cache reads."""
    if not isinstance(usage, dict):
        return None
    return usage_from(
        (usage.get("input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
        + (usage.get("cache_read_input_tokens") or 0),
        usage.get("output_tokens"),
        cache_read=usage.get("cache_read_input_tokens"),
        cache_write=usage.get("cache_creation_input_tokens"),
    )


def take_thinking(block: dict[str, Any], thoughts: list[str], b: Builder) -> bool:
    """Handle an Anthropic ``thinking`` / ``redacted_thinking`` block; False for any other block.

    Readable thinking goes to ``thoughts``; a signature-only or redacted block is encrypted
    reasoning, dropped and counted.
    """
    kind = block.get("type")
    if kind == "thinking":
        thought = block.get("thinking") or ""
        if thought.strip():
            thoughts.append(thought)
        elif block.get("signature"):
            b.counts["encrypted_reasoning_dropped"] += 1
        return True
    if kind == "redacted_thinking":
        b.counts["encrypted_reasoning_dropped"] += 1
        return True
    return False


def openai_usage(usage: Mapping[str, Any] | None) -> ModelUsage | None:
    """Chat-completions ``usage`` (prompt/completion tokens and their details) as ModelUsage."""
    if not isinstance(usage, Mapping):
        return None
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return usage_from(
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        cache_read=prompt_details.get("cached_tokens") if isinstance(prompt_details, Mapping) else 0,
        reasoning=completion_details.get("reasoning_tokens") if isinstance(completion_details, Mapping) else 0,
        cache_reported=isinstance(prompt_details, Mapping) and "cached_tokens" in prompt_details,
    )


# --- building conversations ---------------------------------------------------------------------


class Builder:
    """Accumulates one conversation's messages and enforces the shared pairing rules.

    ``source`` names the agent (``"codex"``); it prefixes ids the builder has to make
    up: ``f"{source}-call-{n}"``.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.messages: list[AnyMessage] = []
        self.usage: dict[int, ModelUsage] = {}
        self.native: list[NativeCompaction] = []
        self.harness: list[HarnessContext] = []
        self.counts: Counter[str] = Counter()
        self.demonstrations: list[int] = []
        self.extra: dict[str, Any] = {}
        self._open: dict[str, tuple[int, str]] = {}  # call id -> (assistant index, tool name)
        self._synthesized: dict[str, int] = {}  # call id -> index of its synthesized result
        self._seen_calls: set[str] = set()
        self._alias: dict[str, str] = {}
        self._merge_key: Any = None
        self._merge_index: int | None = None
        self._last_assistant: int | None = None
        self._made_ids = 0

    # ids ----------------------------------------------------------------------------------
    def new_call_id(self) -> str:
        """A fresh, consistent id for a call the log did not give one."""
        self._made_ids += 1
        return f"{self.source}-call-{self._made_ids}"

    @property
    def started(self) -> bool:
        """Whether the dialogue (anything but system messages) has begun."""
        return any(not isinstance(m, SystemMessage) for m in self.messages)

    @property
    def open_calls(self) -> dict[str, str]:
        """Open call ids and their tool names."""
        return {k: v[1] for k, v in self._open.items()}

    # messages -----------------------------------------------------------------------------
    def system(self, text: str, **attributes: Any) -> None:
        """System instructions; once the dialogue started they become a marked user message."""
        if not self.started:
            self.messages.append(SystemMessage(content=text, attributes=attributes))
            return
        self.counts["late_system_messages"] += 1
        self.user(text, source_role="system", **attributes)

    def user(self, content: UserContent, **attributes: Any) -> int:
        """A user message; closes open tool calls (their results are lost)."""
        self._close_open_calls()
        self.messages.append(UserMessage(content=content, attributes=dict(attributes)))
        self._merge_key = None
        self._merge_index = None
        return len(self.messages) - 1

    def assistant(
        self,
        content: str = "",
        reasoning: str | None = None,
        tool_calls: Iterable[ToolCall] = (),
        *,
        key: Any = None,
        model: str | None = None,
        provider: str | None = None,
        usage: ModelUsage | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> int:
        """Assistant output. Parts with the same non-None ``key`` (one API response written
        as several records) merge into one message while only tool results came between."""
        calls = list(tool_calls)
        if key is not None and key == self._merge_key and self._merge_index is not None:
            index = self._merge_index
            message = self.messages[index]
            assert isinstance(message, AssistantMessage)
            if content:
                message.content = join_text([message.content, content])
            if reasoning:
                message.reasoning = join_text([message.reasoning, reasoning])
            known = {c.id for c in message.tool_calls}
            fresh = [self._register_call(c, index) for c in calls if self._alias.get(c.id, c.id) not in known]
            message.tool_calls = (*message.tool_calls, *fresh)
            if attributes:
                message.attributes.update(attributes)
        else:
            self._close_open_calls()
            self._ensure_user_first()
            index = len(self.messages)
            registered = tuple(self._register_call(c, index) for c in calls)
            self.messages.append(
                AssistantMessage(
                    content=content or "",
                    reasoning=reasoning or None,
                    tool_calls=registered,
                    model=model,
                    provider=provider,
                    attributes=dict(attributes or {}),
                )
            )
            self._merge_key = key
            self._merge_index = index if key is not None else None
        self._last_assistant = index
        if usage is not None:
            self.usage[index] = usage
        return index

    def tool_result(
        self,
        call_id: str,
        content: UserContent,
        success: bool = True,
        name: str | None = None,
        **attributes: Any,
    ) -> int | None:
        """The result of an open call; returns its index, or None when it was dropped."""
        call_id = self._alias.get(call_id, call_id)
        if call_id in self._open:
            _, tool_name = self._open.pop(call_id)
            self.messages.append(
                ToolMessage(
                    tool_call_id=call_id,
                    name=name or tool_name,
                    content=content,
                    success=success,
                    attributes=dict(attributes),
                )
            )
            return len(self.messages) - 1
        if call_id in self._synthesized:
            index = self._synthesized.pop(call_id)
            old = self.messages[index]
            assert isinstance(old, ToolMessage)
            self.messages[index] = ToolMessage(
                tool_call_id=call_id,
                name=name or old.name,
                content=content,
                success=success,
                attributes=dict(attributes),
            )
            self.counts["synthesized_results"] -= 1
            self.counts["late_results"] += 1
            return index
        self.counts["orphan_results_dropped"] += 1
        return None

    def set_usage(self, usage: ModelUsage | None) -> None:
        """Attach provider usage to the latest assistant message."""
        if usage is not None and self._last_assistant is not None:
            self.usage[self._last_assistant] = usage

    def mark_demonstration(self, index: int) -> None:
        """Mark a message as an injected demonstration (not the real task)."""
        self.messages[index].attributes["demonstration"] = True
        self.demonstrations.append(index)

    def compaction(
        self,
        summary: str,
        *,
        tokens_before: int | None = None,
        kind: str = "native",
        span_start: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> NativeCompaction:
        """Record a native compaction at the current position (it is not a replayed message).

        ``span_start`` defaults to the first dialogue message: the agents we import
        summarize everything before the cut, earlier summaries included.
        """
        if span_start is None:
            span_start = next(
                (i for i, m in enumerate(self.messages) if not isinstance(m, SystemMessage)), len(self.messages)
            )
        compaction = NativeCompaction(
            position=len(self.messages),
            summary=summary or "",
            span_start=span_start,
            tokens_before=tokens_before,
            kind=kind,
            metadata=dict(metadata or {}),
        )
        self.native.append(compaction)
        self._merge_key = None
        self._merge_index = None
        return compaction

    def truncate(self, index: int) -> int:
        """Drop messages from ``index`` on (an abandoned branch); returns how many were dropped."""
        dropped = len(self.messages) - index
        if dropped <= 0:
            return 0
        del self.messages[index:]
        self.usage = {k: v for k, v in self.usage.items() if k < index}
        self.native = [n for n in self.native if n.position <= index]
        self._open = {k: v for k, v in self._open.items() if v[0] < index}
        self._synthesized = {k: v for k, v in self._synthesized.items() if v < index}
        self.demonstrations = [i for i in self.demonstrations if i < index]
        self._merge_key = None
        self._merge_index = None
        self._last_assistant = next(
            (i for i in range(len(self.messages) - 1, -1, -1) if isinstance(self.messages[i], AssistantMessage)), None
        )
        return dropped

    # internals ----------------------------------------------------------------------------
    def _register_call(self, call: ToolCall, index: int) -> ToolCall:
        call_id = call.id or self.new_call_id()
        if call_id in self._seen_calls:
            fresh = f"{call_id}#{self.source}-{self._made_ids + 1}"
            self._made_ids += 1
            self._alias[call_id] = fresh
            self.counts["renamed_call_ids"] += 1
            call_id = fresh
        self._seen_calls.add(call_id)
        self._open[call_id] = (index, call.name)
        if call_id != call.id:
            call = ToolCall(id=call_id, name=call.name, arguments=call.arguments, error=call.error)
        return call

    def _close_open_calls(self) -> None:
        for call_id, (_, name) in list(self._open.items()):
            self.messages.append(
                ToolMessage(
                    tool_call_id=call_id,
                    name=name,
                    content="[no result for this call was recorded in the log]",
                    success=False,
                    attributes={"synthesized": "result missing from log"},
                )
            )
            self._synthesized[call_id] = len(self.messages) - 1
            self.counts["synthesized_results"] += 1
        self._open.clear()

    def _ensure_user_first(self) -> None:
        if not self.started:
            self.messages.append(UserMessage(content=PLACEHOLDER_USER, attributes={"synthesized": "placeholder"}))
            self.counts["synthesized_messages"] += 1

    # result -------------------------------------------------------------------------------
    def has_dialogue(self) -> bool:
        """Whether anything but system messages was recorded."""
        return self.started

    def build(
        self,
        id: str,
        path: Path,
        format: str,
        metadata: Mapping[str, Any] | None = None,
        unknown: Mapping[str, int] | None = None,
    ) -> Conversation:
        """The validated Conversation, with counts merged into its metadata."""
        meta: dict[str, Any] = dict(metadata or {})
        tool_calls = sum(len(m.tool_calls) for m in self.messages if isinstance(m, AssistantMessage))
        meta.setdefault("messages", len(self.messages))
        meta["tool_calls"] = tool_calls
        for name in (
            "skipped_lines",
            "encrypted_reasoning_dropped",
            "synthesized_results",
            "synthesized_messages",
            "orphan_results_dropped",
        ):
            meta.setdefault(name, self.counts.get(name, 0))
        for name, value in self.counts.items():
            if value and name not in meta:
                meta[name] = value
        meta["unknown_record_types"] = dict(unknown or {})
        # turns the log ends on a tool result (no final answer recorded) before the next user message
        meta["turn_ends_after_tool_result"] = [
            i
            for i in range(1, len(self.messages))
            if starts_turn(self.messages[i]) and isinstance(self.messages[i - 1], ToolMessage)
        ]
        if self.demonstrations:
            meta["demonstration_messages"] = list(self.demonstrations)
        meta.update(self.extra)
        conversation = Conversation(
            id=id,
            messages=self.messages,
            source=str(path),
            format=format,
            usage=self.usage,
            native_compactions=self.native,
            metadata=meta,
            harness_context=self.harness,
        )
        return conversation.validate()


def report_unknown(path: Path, unknown: Counter[str], what: str = "record types") -> dict[str, int]:
    """Warn once naming every unknown record type (newer schema?) and return the counts."""
    if unknown:
        names = ", ".join(f"{name} ({count}x)" for name, count in sorted(unknown.items()))
        warn(path, None, f"unknown {what} skipped (newer schema?): {names}")
    return dict(unknown)


#: Repairs a Builder makes that change the recorded conversation: metadata count -> what was done.
REPAIRS = {
    "synthesized_results": "missing tool result(s) made up as failed results (call interrupted or result lost)",
    "orphan_results_dropped": "tool result(s) with no matching call dropped",
    "synthesized_messages": "placeholder user message(s) inserted (the log opens with assistant output)",
    "renamed_call_ids": "repeated tool-call id(s) renamed",
}


def finish_file(path: Path, conversations: list[Conversation], what: str) -> list[Conversation]:
    """A file's conversations after one warning naming its repairs and counts; InputError when there are none."""
    if not conversations:
        raise InputError(path, None, f"{what} holds no conversation (no user or assistant messages)")
    counts = {k: sum(int(c.metadata.get(k) or 0) for c in conversations) for k in REPAIRS}
    if any(counts.values()):
        done = "; ".join(f"{n} {REPAIRS[k]} ({k})" for k, n in counts.items() if n)
        warn(path, None, f"repaired what the log lost: {done}; counts are in each conversation's metadata")
    return conversations
