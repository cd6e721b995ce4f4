"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. ``response_item`` payloads are
the Responses API items the model saw (``message``, ``reasoning``,
``function_call`` / ``function_call_output``, ``custom_tool_call`` /
``custom_tool_call_output``, ``local_shell_call``, ``web_search_call``);
``event_msg`` payloads are UI events (only ``token_count`` usage and
``context_compacted`` are used); ``turn_context`` gives the model;
``session_meta`` starts a session (its ``base_instructions`` are the system
prompt); ``compacted`` is a native compaction (``payload.message`` is the
summary). Rollouts written before the ``type``/``payload`` envelope (a bare
session header, then bare items and ``{"record_type": "state"}`` lines) are read
too.

Mapping: consecutive model-side items (reasoning, assistant text, calls) become
one ``AssistantMessage``; ``developer`` messages before the dialogue become
system messages, later ones user messages with ``attributes["source_role"]``.
Reasoning ``summary`` / ``content`` text is kept as reasoning; every
``encrypted_content`` blob is dropped and counted in
``metadata["encrypted_reasoning_dropped"]``. ``web_search_call`` runs on
OpenAI's side and its results never reach the log: it becomes a tool call
(``codex-call-<n>``) with a synthesized result that says so, marked
``attributes={"synthesized": "server-side web search"}`` and counted in
``metadata["server_tool_calls"]``. Each ``session_meta`` with a new id starts a
new conversation.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from zett_agent.messages import ImageContent, ImageUrlSource, TextContent, ToolCall

from ..conversation import Conversation
from ..registry import Reader, register
from ._common import (
    Builder,
    finish_file,
    first_line,
    iter_jsonl,
    join_text,
    key_pattern,
    parse_arguments,
    parse_first_line,
    report_unknown,
    simplify,
    usage_from,
)

FORMAT = "codex-rollout-jsonl"

KNOWN_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
#: Response items that are part of the model context.
_ITEM_TYPES = {
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
}
#: Response items that carry no replayable content (kept aside, not reported as unknown).
_IGNORED_ITEMS = {"ghost_snapshot", "compaction", "compaction_summary", "other"}
_SESSION_META = key_pattern("type", "session_meta")
_PAYLOAD = key_pattern("payload")


def sniff(path: Path, head: bytes) -> bool:
    """A Codex rollout: first record is a ``session_meta`` envelope (or an old bare session header)."""
    if not path.is_file() or not head.lstrip().startswith(b"{"):
        return False
    record = parse_first_line(head)
    if isinstance(record, dict):
        if record.get("type") == "session_meta" and isinstance(record.get("payload"), dict):
            return True
        if record.get("type") in ("response_item", "event_msg", "turn_context") and isinstance(
            record.get("payload"), dict
        ):
            return True
        return (
            "type" not in record
            and "id" in record
            and "timestamp" in record
            and ("instructions" in record or "git" in record)
        )
    line = first_line(head)
    return bool(_SESSION_META.search(line[:400])) and bool(_PAYLOAD.search(line[:400]))


class _CodexSession:
    def __init__(self, id: str, meta: dict[str, Any]) -> None:
        self.id = id
        self.meta = meta
        self.builder = Builder("codex")
        self.models: Counter[str] = Counter()
        self.pending: dict[str, Any] | None = None  # model-side items not yet flushed
        self.last_tokens: int | None = None
        self.compacted_at: int | None = None


class _Rollout:
    """One pass over a rollout file: its sessions in order, and the one records go to now."""

    def __init__(self, path: Path, unknown: Counter[str]) -> None:
        self.path = path
        self.unknown = unknown
        self.sessions: list[_CodexSession] = []
        self.current: _CodexSession | None = None

    def session(self) -> _CodexSession:
        """The current session (one named after the file when no ``session_meta`` came first)."""
        if self.current is None:
            self.current = _CodexSession(self.path.stem, {})
            self.sessions.append(self.current)
        return self.current

    def take(self, number: int, record: Any) -> None:
        """Route one line to the session it belongs to."""
        if not isinstance(record, dict):
            self.unknown["<not an object>"] += 1
            return
        envelope = _envelope(record, number)
        if envelope is None:
            return
        kind, payload = envelope
        if not isinstance(kind, str) or kind not in KNOWN_TYPES:
            self.unknown[str(kind)] += 1
            return
        if not isinstance(payload, dict):
            self.unknown[f"{kind} without payload"] += 1
            return
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            _turn_context(self.session(), payload)
        elif kind == "event_msg":
            _event(self.session(), payload, number)
        elif kind == "compacted":
            _compacted(self.session(), payload, record, number)
        else:
            _item(self.session(), payload, number, self.unknown)

    def _session_meta(self, payload: dict[str, Any]) -> None:
        """A session header: more fields of the current session, or a new session with its system prompt."""
        meta_id = str(payload.get("id") or self.path.stem)
        if self.current is not None and self.current.id == meta_id:
            self.current.meta.update(payload)
            return
        if self.current is not None:
            _flush(self.current)
        self.current = _CodexSession(meta_id, dict(payload))
        self.sessions.append(self.current)
        instructions = payload.get("base_instructions") or payload.get("instructions")
        if isinstance(instructions, dict):
            instructions = instructions.get("text")
        if isinstance(instructions, str) and instructions.strip():
            self.current.builder.system(instructions)


def read(path: Path) -> list[Conversation]:
    """Every session in a Codex rollout file."""
    stats: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    rollout = _Rollout(path, unknown)
    for number, record in iter_jsonl(path, stats):
        rollout.take(number, record)
    for s in rollout.sessions:
        _flush(s)
    reported = report_unknown(path, unknown)
    conversations = []
    for s in rollout.sessions:
        if not s.builder.has_dialogue():
            continue
        meta = {
            "agent": "codex",
            "model": s.models.most_common(1)[0][0] if s.models else s.meta.get("model"),
            "cwd": s.meta.get("cwd"),
            "cli_version": s.meta.get("cli_version"),
            "originator": s.meta.get("originator"),
            "model_provider": s.meta.get("model_provider"),
            "git": s.meta.get("git"),
            "skipped_lines": stats.get("skipped_lines", 0),
        }
        conversations.append(s.builder.build(s.id, path, FORMAT, meta, reported))
    return finish_file(path, conversations, "this Codex rollout")


def _envelope(record: dict[str, Any], number: int) -> tuple[Any, Any] | None:
    """A line's ``(type, payload)``; a pre-envelope line is read as its header or bare item (None: a state line)."""
    if "payload" in record:
        return record.get("type"), record.get("payload")
    if number == 1 or (record.get("type") is None and "instructions" in record and "id" in record):
        return "session_meta", record
    if "record_type" in record:
        return None
    return "response_item", record


def _turn_context(s: _CodexSession, payload: dict[str, Any]) -> None:
    model = payload.get("model")
    if model:
        s.models[model] += 1
    s.meta.setdefault("cwd", payload.get("cwd"))


def _event(s: _CodexSession, payload: dict[str, Any], number: int) -> None:
    """A UI event: ``token_count`` gives the last call's usage, ``context_compacted`` marks a compaction."""
    ptype = payload.get("type")
    if ptype == "token_count":
        info = payload.get("info") or {}
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if isinstance(last, dict):
            _flush(s)
            s.builder.set_usage(
                usage_from(
                    last.get("input_tokens"),
                    last.get("output_tokens"),
                    cache_read=last.get("cached_input_tokens"),
                    reasoning=last.get("reasoning_output_tokens"),
                )
            )
            total = (last.get("input_tokens") or 0) + (last.get("output_tokens") or 0)
            s.last_tokens = total or s.last_tokens
    elif ptype == "context_compacted":
        _flush(s)
        if s.compacted_at != len(s.builder.messages):
            s.builder.compaction(
                "",
                tokens_before=s.last_tokens,
                kind="codex-compact",
                metadata={"line": number, "summary_missing": True, "span": "cumulative"},
            )
            s.compacted_at = len(s.builder.messages)


def _compacted(s: _CodexSession, payload: dict[str, Any], record: dict[str, Any], number: int) -> None:
    """A native compaction with its summary (``payload.message``)."""
    _flush(s)
    history = payload.get("replacement_history")
    s.builder.compaction(
        str(payload.get("message") or ""),
        tokens_before=s.last_tokens,
        kind="codex-compact",
        metadata={
            "line": number,
            "timestamp": record.get("timestamp"),
            "replacement_history_items": len(history) if isinstance(history, list) else None,
            "span": "cumulative",
        },
    )
    s.compacted_at = len(s.builder.messages)


def _item(s: _CodexSession, item: dict[str, Any], number: int, unknown: Counter[str]) -> None:
    """One Responses API item: model-side items gather into the pending assistant message, inputs flush it."""
    itype = item.get("type")
    if not isinstance(itype, str):
        unknown[f"response_item:{itype}"] += 1
        return
    if itype in _IGNORED_ITEMS:
        if item.get("encrypted_content"):
            s.builder.counts["encrypted_compaction_items"] += 1
        return
    if itype not in _ITEM_TYPES:
        unknown[f"response_item:{itype}"] += 1
        return
    if itype == "message":
        _message(s, item)
    elif itype == "reasoning":
        _reasoning(s, item)
    elif itype in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        _call(s, item, itype)
    else:
        _output(s, item)


def _message(s: _CodexSession, item: dict[str, Any]) -> None:
    """A message item: assistant text, a system/developer message, or user input (injected context marked)."""
    b = s.builder
    role = item.get("role")
    if role == "assistant":
        _pending(s)["content"].append(_text(item.get("content")))
        return
    _flush(s)
    content = _content(item.get("content"))
    if role in ("developer", "system"):
        text = content if isinstance(content, str) else _text(item.get("content"))
        if not b.started:
            b.system(text, source_role=role)
        else:
            b.user(content, source_role=role)
        return
    text = content if isinstance(content, str) else ""
    injected = text.lstrip().startswith(
        ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<turn_aborted>")
    )
    if injected:
        b.user(content, injected=True)
    else:
        b.user(content)


def _reasoning(s: _CodexSession, item: dict[str, Any]) -> None:
    """Reasoning summary and content text join the pending message; an encrypted blob is only counted."""
    pending = _pending(s)
    summary = item.get("summary") or []
    texts = [p.get("text") for p in summary if isinstance(p, dict)]
    content = item.get("content") or []
    if isinstance(content, list):
        texts += [p.get("text") for p in content if isinstance(p, dict)]
    pending["reasoning"].append(join_text(texts))
    if item.get("encrypted_content"):
        s.builder.counts["encrypted_reasoning_dropped"] += 1


def _call(s: _CodexSession, item: dict[str, Any], itype: str) -> None:
    """A tool call of the pending message; a server-side web search gets its synthesized result at the flush."""
    b = s.builder
    pending = _pending(s)
    call_id = item.get("call_id") or item.get("id")
    if itype == "function_call":
        call = ToolCall(
            id=str(call_id or b.new_call_id()),
            name=str(item.get("name") or "tool"),
            arguments=parse_arguments(item.get("arguments")),
        )
    elif itype == "custom_tool_call":
        call = ToolCall(
            id=str(call_id or b.new_call_id()),
            name=str(item.get("name") or "tool"),
            arguments={"input": item.get("input", "")},
        )
    elif itype == "local_shell_call":
        action = item.get("action")
        call = ToolCall(
            id=str(call_id or b.new_call_id()),
            name="local_shell",
            arguments=action if isinstance(action, dict) else {},
        )
    else:
        action = item.get("action")
        call = ToolCall(id=b.new_call_id(), name="web_search", arguments=action if isinstance(action, dict) else {})
        pending["server"].append(call.id)
    pending["calls"].append(call)


def _output(s: _CodexSession, item: dict[str, Any]) -> None:
    """A tool call's output (a dict output carries its own success flag)."""
    _flush(s)
    output = item.get("output")
    success = True
    if isinstance(output, dict):
        success = output.get("success") is not False
        output = output.get("content", output.get("output", json.dumps(output, ensure_ascii=False)))
    s.builder.tool_result(
        str(item.get("call_id")),
        _content(output) if isinstance(output, list) else ("" if output is None else str(output)),
        success=success,
    )


def _pending(s: _CodexSession) -> dict[str, Any]:
    if s.pending is None:
        s.pending = {"content": [], "reasoning": [], "calls": [], "server": []}
    return s.pending


def _flush(s: _CodexSession) -> None:
    """Emit the model-side items gathered since the last input as one assistant message."""
    pending, s.pending = s.pending, None
    if pending is None:
        return
    model = s.models.most_common(1)[0][0] if s.models else None
    s.builder.assistant(
        join_text(pending["content"]),
        join_text(pending["reasoning"]) or None,
        pending["calls"],
        model=model,
        provider="openai",
    )
    for call_id in pending["server"]:
        s.builder.tool_result(
            call_id,
            "[web search ran on the provider's side; its results are not recorded in the log]",
            synthesized="server-side web search",
        )
        s.builder.counts["server_tool_calls"] += 1


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return join_text(p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _content(content: Any) -> Any:
    """Responses API input content as zett user content (text, or parts when images are present)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[Any] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            parts.append(TextContent(text=part["text"]))
        elif part.get("type") in ("input_image", "image") and isinstance(part.get("image_url"), str):
            try:
                parts.append(ImageContent(source=ImageUrlSource(url=part["image_url"])))
            except ValueError:
                continue
    return simplify(parts) if parts else ""


register(Reader(FORMAT, "OpenAI Codex CLI rollout (~/.codex/sessions/**/rollout-*.jsonl)", sniff, read))
