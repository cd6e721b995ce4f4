"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON record per line. ``user`` / ``assistant`` records carry Anthropic
Messages API content (``text``, ``thinking``, ``redacted_thinking``,
``tool_use``, ``tool_result``, ``image``); Claude Code writes each content
block of one API response as its own record (same ``message.id``), and runs
parallel tool calls while the response is still being written, so results can
appear between the blocks of their own response. The importer merges the blocks
of one response back into one assistant message, with the results after it.

What becomes what:

* the main chain of a file is one conversation (id: its ``sessionId``); a resumed
  session that copied earlier records under an older ``sessionId`` stays one
  conversation; a record with a different ``sessionId`` that starts a new root
  (``parentUuid`` null) starts a new conversation.
* subagent transcripts become conversations of their own, id
  ``"<sessionId>/agent-<agentId>"``: sidechain records (``isSidechain``, e.g. an
  ``agent-*.jsonl`` file, including Claude Code's own compaction call
  ``agent-acompact-*``) and ``progress`` records of type ``agent_progress`` that
  embed a Task subagent's messages.
* ``system`` records with subtype ``compact_boundary`` plus the following user
  record flagged ``isCompactSummary`` are a native compaction
  (``compactMetadata.trigger`` / ``preTokens``); the summary is not replayed. A user
  record that starts with Claude Code's continuation text ("This session is being
  continued from a previous conversation...") counts as a compaction summary even
  without the flag or a boundary (older versions, resumed files).
* ``isMeta`` user records (caveats, hook context, skill bodies) are kept, with
  ``attributes={"meta": True}``: Claude Code sends them to the model.
* a user prompt whose ``parentUuid`` equals that of an earlier prompt is a rewind
  ("edit and resend"): the abandoned branch is dropped and counted in
  ``metadata["abandoned_branch_messages"]``.
* ``summary`` / ``ai-title`` / ``custom-title`` records are titles, kept in
  ``metadata["titles"]``; ``progress`` (other kinds), ``file-history-snapshot``,
  ``queue-operation`` and other ``system`` subtypes are UI records and skipped.
* assistant records flagged ``isApiErrorMessage`` were never model output: dropped
  and counted in ``metadata["api_error_messages_dropped"]``.

A field of another type than Claude Code writes (``text`` not a string, a tool call's ``input`` not
an object, ``uuid`` not a string) is an InputError naming the file, line and field.

Claude Code does not record its system prompt or tool schemas: conversations
have no system message, so token counts are lower than what the model saw.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from zett_agent.messages import TextContent, ToolCall

from ...errors import InputError
from ..conversation import Conversation
from ..registry import Reader, register
from ._common import (
    Builder,
    anthropic_usage,
    finish_file,
    first_line,
    image_from_source,
    iter_jsonl,
    key_pattern,
    parse_first_line,
    report_unknown,
    simplify,
    take_thinking,
    warn,
)

FORMAT = "claude-code-jsonl"

#: Top-level record types this importer knows (everything else is reported as unknown).
KNOWN_TYPES = {
    "user",
    "assistant",
    "system",
    "summary",
    "ai-title",
    "custom-title",
    "progress",
    "file-history-snapshot",
    "queue-operation",
}
_TITLE_TYPES = {"summary", "ai-title", "custom-title"}
#: How Claude Code opens the summary message after a compaction (older versions do not flag it).
CONTINUATION_PREFIX = "This session is being continued from a previous conversation"
_SNIFF_TYPES = ("user", "assistant", "system", "summary", "progress", "file-history-snapshot", "queue-operation")
_SESSION_KEY = key_pattern("sessionId")
_TYPE_KEY = key_pattern("type", "(?:" + "|".join(_SNIFF_TYPES) + ")")
_CC_KEYS = (key_pattern("parentUuid"), key_pattern("leafUuid"), key_pattern("messageId"), key_pattern("isSidechain"))


def sniff(path: Path, head: bytes) -> bool:
    """A Claude Code log: JSONL whose first record has a Claude Code ``type`` and session markers."""
    if not path.is_file() or not head.lstrip().startswith(b"{"):
        return False
    record = parse_first_line(head)
    if isinstance(record, dict):
        if record.get("type") not in _SNIFF_TYPES:
            return False
        if record.get("type") == "file-history-snapshot":
            return "snapshot" in record and "messageId" in record
        if record.get("type") == "summary":
            return "leafUuid" in record
        return "sessionId" in record and ("uuid" in record or "message" in record or "operation" in record)
    line = first_line(head)
    return bool(_TYPE_KEY.search(line)) and (bool(_SESSION_KEY.search(line)) and any(p.search(line) for p in _CC_KEYS))


class _Thread:
    """One conversation being rebuilt (the main chain or one subagent)."""

    def __init__(self, id: str, session: str | None, agent_id: str | None = None) -> None:
        self.id = id
        self.session = session
        self.agent_id = agent_id
        self.builder = Builder("claude-code")
        self.prompt_parents: dict[str, int] = {}  # parentUuid of a user prompt -> its message index
        self.pending_boundary: dict[str, Any] | None = None
        self.models: Counter[str] = Counter()
        self.session_ids: list[str] = []
        self.first: dict[str, Any] = {}
        self.seen_uuids: set[str] = set()
        self.prompt: str | None = None


#: A thread's key: ("main", sessionId, first line) for a main chain, ("agent", owner session, agent id) for a subagent.
_ThreadKey = tuple[str, Any, Any]


class _Log:
    """One pass over a Claude Code log: its threads in order of appearance, its titles, and the main chain."""

    def __init__(self, path: Path, unknown: Counter[str]) -> None:
        self.path = path
        self.unknown = unknown
        self.threads: dict[_ThreadKey, _Thread] = {}  # in order of first appearance
        self.titles: list[str] = []
        self.main_key: _ThreadKey | None = None
        self.main_session: str | None = None
        self.sidechain_roots = 0
        self.current_sidechain: str | None = None

    def thread(self, key: _ThreadKey, id: str, session: str | None, agent_id: str | None = None) -> _Thread:
        if key not in self.threads:
            self.threads[key] = _Thread(id, session, agent_id)
        return self.threads[key]

    def take(self, number: int, record: Any) -> None:
        """Route one record to the thread it belongs to (or to the titles, or nowhere)."""
        if not isinstance(record, dict):
            self.unknown["<not an object>"] += 1
            return
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in KNOWN_TYPES:
            self.unknown[str(kind)] += 1
            return
        if kind in _TITLE_TYPES:
            self._title(record)
            return
        if kind in ("file-history-snapshot", "queue-operation"):
            return
        for key, expected in _RECORD_FIELDS.items():
            _field(record, key, expected, (self.path, number), "record", _NAMES[expected])
        session = record.get("sessionId")
        if self._starts_new_conversation(record, session):
            # a different session starting a new root: a new conversation (a resumed session
            # that copied earlier records links to them and stays one conversation)
            self.main_key = ("main", session, number)
            self.main_session = session
        if kind == "progress":
            self._progress(record, session, number)
        elif record.get("isSidechain"):
            self._sidechain(record, session, number)
        else:
            self._main(record, session, number)

    def _title(self, record: dict[str, Any]) -> None:
        title = record.get("summary") or record.get("aiTitle") or record.get("customTitle") or record.get("title")
        if isinstance(title, str) and title not in self.titles:
            self.titles.append(title)

    def _starts_new_conversation(self, record: dict[str, Any], session: Any) -> bool:
        return bool(
            self.main_key is not None
            and session
            and session != self.main_session
            and not record.get("isSidechain")
            and record.get("uuid")
            and record.get("parentUuid") is None
            and not record.get("logicalParentUuid")
            and self.threads[self.main_key].builder.has_dialogue()
        )

    def _progress(self, record: dict[str, Any], session: Any, number: int) -> None:
        """An ``agent_progress`` record embeds one message of a Task subagent; other progress is UI."""
        data = record.get("data")
        if not (
            isinstance(data, dict) and data.get("type") == "agent_progress" and isinstance(data.get("message"), dict)
        ):
            return
        agent = data.get("agentId") or record.get("parentToolUseID") or "subagent"
        owner = session or self.main_session or "session"
        t = self.thread(("agent", owner, agent), f"{owner}/agent-{agent}", owner, str(agent))
        if t.prompt is None and isinstance(data.get("prompt"), str):
            t.prompt = data["prompt"]
        _handle(t, data["message"], self.path, number, self.unknown, embedded=True)

    def _sidechain(self, record: dict[str, Any], session: Any, number: int) -> None:
        """A sidechain record; without an ``agentId`` each new root starts the next numbered sidechain."""
        agent = record.get("agentId")
        if agent is None:
            if record.get("parentUuid") is None or self.current_sidechain is None:
                self.sidechain_roots += 1
                self.current_sidechain = f"sidechain-{self.sidechain_roots}"
            agent = self.current_sidechain
        owner = session or "session"
        t = self.thread(("agent", owner, agent), f"{owner}/agent-{agent}", owner, str(agent))
        _handle(t, record, self.path, number, self.unknown)

    def _main(self, record: dict[str, Any], session: Any, number: int) -> None:
        if self.main_key is None:
            self.main_key = ("main", session, number)
        if session and self.main_session is None:
            self.main_session = session
        key = self.main_key
        t = self.thread(key, str(key[1] or self.path.stem), key[1])
        _handle(t, record, self.path, number, self.unknown)


def read(path: Path) -> list[Conversation]:
    """Every conversation in a Claude Code session log (main chain and subagents)."""
    stats: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    log = _Log(path, unknown)
    for number, record in iter_jsonl(path, stats):
        log.take(number, record)
    conversations = []
    reported = report_unknown(path, unknown)
    for t in log.threads.values():
        _finish_boundary(t)
        if not t.builder.has_dialogue():
            continue
        meta = _metadata(t, log.titles, stats.get("skipped_lines", 0))
        conversations.append(t.builder.build(t.id, path, FORMAT, meta, reported))
    return finish_file(path, conversations, "this Claude Code log")


def _metadata(t: _Thread, titles: list[str], skipped_lines: int) -> dict[str, Any]:
    """A thread's conversation metadata (subagent fields for a subagent, the log's titles for a main chain)."""
    meta: dict[str, Any] = {
        "agent": "claude-code",
        "model": t.models.most_common(1)[0][0] if t.models else None,
        "models": dict(t.models),
        "cwd": t.first.get("cwd"),
        "git_branch": t.first.get("gitBranch"),
        "version": t.first.get("version"),
        "session_ids": t.session_ids,
        "skipped_lines": skipped_lines,
        "system_prompt_recorded": False,
    }
    if t.agent_id is not None:
        meta["subagent"] = True
        meta["agent_id"] = t.agent_id
        meta["parent_session"] = t.session
        meta["compaction_call"] = str(t.agent_id).startswith("acompact")
    if titles and t.agent_id is None:
        meta["titles"] = titles
    if t.first.get("slug"):
        meta["slug"] = t.first.get("slug")
    return meta


def _handle(
    t: _Thread, record: dict[str, Any], path: Path, number: int, unknown: Counter[str], embedded: bool = False
) -> None:
    """One user, assistant or system record of a thread (a record seen before, by its uuid, is skipped)."""
    kind = record.get("type")
    uuid = record.get("uuid")
    if uuid:
        if uuid in t.seen_uuids:
            return
        t.seen_uuids.add(uuid)
    session = record.get("sessionId")
    if session and session not in t.session_ids:
        t.session_ids.append(session)
    if not t.first and (record.get("cwd") or record.get("version")):
        t.first = {k: record.get(k) for k in ("cwd", "gitBranch", "version", "slug")}
    b = t.builder
    if kind == "system":
        if record.get("subtype") == "compact_boundary":
            _finish_boundary(t)
            meta = record.get("compactMetadata") or {}
            t.pending_boundary = {
                "trigger": meta.get("trigger"),
                "tokens_before": meta.get("preTokens"),
                "line": number,
                "timestamp": record.get("timestamp"),
            }
        return
    message = record.get("message")
    if not isinstance(message, dict):
        warn(path, f"line {number}", f"{kind} record without a 'message' object; skipped")
        b.counts["malformed_records"] += 1
        return
    content = message.get("content")
    if kind == "user":
        if record.get("isCompactSummary") or (isinstance(content, str) and content.startswith(CONTINUATION_PREFIX)):
            text = content if isinstance(content, str) else _text_of(content)
            _finish_boundary(t, summary=text, line=number)
            return
        if embedded and t.prompt is not None and not b.has_dialogue() and not _is_prompt(content):
            b.user(t.prompt, from_field="agent_progress.prompt")
        _user(t, record, content, path, number, unknown)
        return
    _assistant(t, record, message, content, (path, number), unknown, embedded)


def _assistant(
    t: _Thread,
    record: dict[str, Any],
    message: dict[str, Any],
    content: Any,
    line: _Line,
    unknown: Counter[str],
    embedded: bool,
) -> None:
    """One assistant record: its text, thinking and tool calls join the message of its API response."""
    _field(message, "content", (str, list), line, "message", "text or a list of content blocks")
    b = t.builder
    if record.get("isApiErrorMessage"):
        b.counts["api_error_messages_dropped"] += 1
        return
    if embedded and t.prompt is not None and not b.has_dialogue():
        b.user(t.prompt, from_field="agent_progress.prompt")
    model = message.get("model")
    if model and model != "<synthetic>":
        t.models[model] += 1
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
    for n, block in enumerate(blocks):
        btype = block.get("type") if isinstance(block, dict) else None
        where = f"message.content[{n}]"
        if btype == "text":
            texts.append(_field(block, "text", str, line, where, "text", required=True))
        elif btype in ("thinking", "redacted_thinking"):
            _field(block, "thinking", str, line, where, "text")
            take_thinking(block, thoughts, b)
        elif btype in ("tool_use", "server_tool_use"):
            call_id = _field(block, "id", str, line, where, "text") or b.new_call_id()
            name = _field(block, "name", str, line, where, "text (the tool's name)", required=True)
            arguments = _field(block, "input", dict, line, where, "an object (the tool's arguments)") or {}
            calls.append(ToolCall(id=call_id, name=name or "tool", arguments=arguments))
        else:
            unknown[f"assistant content block {btype}"] += 1
    usage = message.get("usage") or {}
    attributes = {"synthetic": True} if model == "<synthetic>" else None
    key = message.get("id") or record.get("requestId")
    b.assistant(
        "\n\n".join(x.strip() for x in texts if x.strip()),
        "\n\n".join(thoughts) or None,
        calls,
        key=key,
        model=model if model != "<synthetic>" else None,
        provider="anthropic",
        usage=anthropic_usage(usage),
        attributes=attributes,
    )


def _user(t: _Thread, record: dict[str, Any], content: Any, path: Path, number: int, unknown: Counter[str]) -> None:
    b = t.builder
    attributes: dict[str, Any] = {}
    if record.get("isMeta"):
        attributes["meta"] = True
    if isinstance(content, str):
        _prompt(t, record, content, attributes)
        return
    if not isinstance(content, list):
        warn(path, f"line {number}", "user record content is neither text nor a list of blocks; skipped")
        b.counts["malformed_records"] += 1
        return
    parts: list[Any] = []
    for n, block in enumerate(content):
        btype = block.get("type") if isinstance(block, dict) else None
        where = f"message.content[{n}]"
        if btype == "tool_result":
            call_id = _field(block, "tool_use_id", str, (path, number), where, "text (the call's id)", required=True)
            result = _field(block, "content", (str, list), (path, number), where, "text or a list")
            failed = _field(block, "is_error", _FLAG, (path, number), where, _NAMES[_FLAG])
            b.tool_result(call_id, _result_content(result, (path, number), where), success=not failed)
        elif btype == "text":
            parts.append(TextContent(text=_field(block, "text", str, (path, number), where, "text", required=True)))
        elif btype == "image":
            image = image_from_source(block.get("source") or {})
            if image is not None:
                parts.append(image)
        else:
            unknown[f"user content block {btype}"] += 1
    if parts:
        _prompt(t, record, simplify(parts), attributes)


def _prompt(t: _Thread, record: dict[str, Any], content: Any, attributes: dict[str, Any]) -> None:
    """A user prompt; a second prompt on the same parent is a rewind that abandons the first branch."""
    b = t.builder
    parent = record.get("parentUuid")
    if parent and not attributes.get("meta") and parent in t.prompt_parents:
        dropped = b.truncate(t.prompt_parents[parent])
        b.counts["abandoned_branch_messages"] += dropped
        t.prompt_parents = {k: v for k, v in t.prompt_parents.items() if v < len(b.messages)}
    index = b.user(content, **attributes)
    if parent and not attributes.get("meta"):
        t.prompt_parents[parent] = index


def _finish_boundary(t: _Thread, summary: str | None = None, line: int | None = None) -> None:
    """Record the pending compact boundary (or a summary with no boundary) as a native compaction."""
    boundary = t.pending_boundary
    t.pending_boundary = None
    if boundary is None and summary is None:
        return
    boundary = boundary or {}
    metadata = {
        "trigger": boundary.get("trigger"),
        "boundary_line": boundary.get("line"),
        "summary_line": line,
        "timestamp": boundary.get("timestamp"),
        "span": "cumulative",
    }
    if summary is None:
        metadata["summary_missing"] = True
    t.builder.compaction(
        summary or "",
        tokens_before=boundary.get("tokens_before"),
        kind="claude-code-compact",
        metadata=metadata,
    )


def _is_prompt(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _result_content(content: str | list[Any] | None, line: _Line, where: str) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[Any] = []
        for n, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                text = _field(block, "text", str, line, f"{where}.content[{n}]", "text", required=True)
                parts.append(TextContent(text=text))
            elif block.get("type") == "image":
                image = image_from_source(block.get("source") or {})
                if image is not None:
                    parts.append(image)
        return simplify(parts) if parts else ""
    return str(content)


#: A record's place: the file and its line.
_Line = tuple[Path, int]
_ID, _FLAG = (str, type(None)), (bool, type(None))
_NAMES = {_ID: "text or null", _FLAG: "true, false or null"}
#: Fields of every user, assistant, system and progress record that decide where it goes and what it is.
_RECORD_FIELDS = {
    **dict.fromkeys(("uuid", "parentUuid", "logicalParentUuid", "sessionId", "agentId", "requestId"), _ID),
    **dict.fromkeys(("isSidechain", "isMeta", "isCompactSummary", "isApiErrorMessage"), _FLAG),
}
_JSON_TYPES = {type(None): "null", bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list"}


def _field(
    block: dict[str, Any],
    key: str,
    kind: type | tuple[type, ...],
    line: _Line,
    where: str,
    expected: str,
    required: bool = False,
) -> Any:
    """``block[key]`` when it has the type Claude Code writes (None when absent and optional).

    A field of another type is an InputError naming the file, line and field: the loader does not
    guess what a malformed record meant.
    """
    if key not in block and not required:
        return None
    value = block.get(key)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
        return value
    got = "missing" if key not in block else _JSON_TYPES.get(type(value), "an object")
    raise InputError(line[0], f"line {line[1]}, {where}.{key}", f"must be {expected}, not {got}")


register(
    Reader(FORMAT, "Claude Code session log (~/.claude/projects/*/<session>.jsonl, subagents included)", sniff, read)
)
