"""SWE-agent trajectories (``*.traj``) and mini-swe-agent trajectories (``*.traj.json``).

**SWE-agent** writes ``{"environment", "trajectory", "history", "info", ...}``.
``history`` is the message list the model saw, per ``agent`` (``primary`` /
``main``; other agents become extra conversations ``"<id>/<agent>"``).
SWE-agent 1.x with function calling stores OpenAI ``tool_calls`` and ``tool``
messages with ``tool_call_ids``; older SWE-agent (and any text-action config)
stores the action inside the assistant text and the observation as the next
user message. Demonstrations (``is_demo``) are kept and marked
``attributes={"demonstration": True}``, their indices in
``metadata["demonstration_messages"]``.

**mini-swe-agent** writes ``{"info", "messages", "trajectory_format", ...}``:
OpenAI-style messages (``trajectory_format`` ``mini-swe-agent-1.1``: tool calls)
or text actions in fenced ```` ```bash ```` blocks (``mini-swe-agent-1``); the
final ``exit`` message is not model context (its status goes to metadata).

Text actions (``text_actions="tool_calls"``, the default) become tool calls so
that an autonomous run looks like what it is, one task followed by tool steps:
the assistant's text minus the action block stays its content, the action
becomes ``ToolCall(id=f"{source}-call-{n}", name=<command>, arguments={"command":
<action>})`` and the next user message (the observation) its ``ToolMessage``.
An assistant turn without exactly one action (a format error) stays plain text
and the next user message (the error feedback) stays a user message. Pass
``text_actions="messages"`` to keep the recorded user/assistant form instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
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
    object_field,
    openai_usage,
    parse_arguments,
    report_unknown,
    simplify,
)

SWE_FORMAT = "swe-agent-traj"
MINI_FORMAT = "mini-swe-agent-traj"
TEXT_ACTIONS = ("tool_calls", "messages")
_ROLES = {"system", "user", "assistant", "tool"}
_MINI_MARKERS = (key_pattern("trajectory_format", 'mini-swe-agent[^"]*'), key_pattern("mini_version"))
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)\n?```", re.DOTALL)
_COMMAND_DOC = re.compile(r"^([A-Za-z_][\w-]*):\n\s+docstring:", re.MULTILINE)


# --- sniffing ----------------------------------------------------------------------------------


def sniff_swe(path: Path, head: bytes) -> bool:
    """SWE-agent: an object with a ``trajectory`` of steps (action/observation/response/thought) or a ``history``."""
    stripped = head.lstrip()
    if not path.is_file() or not stripped.startswith(b"{") or any(p.search(stripped) for p in _MINI_MARKERS):
        return False
    steps = key_pattern("trajectory").search(stripped) and all(
        key_pattern(k).search(stripped) for k in ("action", "observation", "response", "thought")
    )
    history = (
        key_pattern("history").search(stripped)
        and key_pattern("role").search(stripped)
        and key_pattern("agent").search(stripped)
    )
    source = key_pattern("source", "(?:agent|user|environment)").search(stripped)
    return bool((steps or history) and not source)


def sniff_mini(path: Path, head: bytes) -> bool:
    """mini-swe-agent: ``trajectory_format: mini-swe-agent*`` or ``info.mini_version`` with a ``messages`` list."""
    stripped = head.lstrip()
    if not path.is_file() or not stripped.startswith(b"{"):
        return False
    if _MINI_MARKERS[0].search(stripped):
        return True
    return bool(_MINI_MARKERS[1].search(stripped) and key_pattern("messages").search(stripped))


# --- SWE-agent ---------------------------------------------------------------------------------


def read_swe_agent(path: Path, text_actions: str = "tool_calls") -> list[Conversation]:
    """Every agent's conversation in a SWE-agent ``.traj`` file."""
    _check_mode(text_actions)
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise InputError(path, None, "expected a SWE-agent trajectory object with a 'history' list")
    history = data["history"]
    unknown: Counter[str] = Counter()
    by_agent: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            raise InputError(path, f"history[{index}]", "a message must be a JSON object")
        by_agent.setdefault(str(message.get("agent") or "main"), []).append((index, message))
    info = object_field(data, "info")
    config = object_field(data, "replay_config")
    model = object_field(config, "agent").get("model")
    base_id = path.name.removesuffix(".json").removesuffix(".traj")
    conversations = []
    for n, (agent, messages) in enumerate(by_agent.items()):
        function_calling = any(m.get("tool_calls") or m.get("role") == "tool" for _, m in messages)
        commands = _commands(messages)
        b = Builder("swe-agent")
        pending_action = False
        for index, message in messages:
            place = f"history[{index}]"
            pending_action = _swe_message(
                b, message, place, path, unknown, function_calling, text_actions, commands, pending_action
            )
        if not b.has_dialogue():
            continue
        meta = {
            "agent": "swe-agent",
            "agent_name": agent,
            "model": (model or {}).get("name") if isinstance(model, dict) else None,
            "environment": data.get("environment"),
            "exit_status": info.get("exit_status"),
            "model_stats": info.get("model_stats"),
            "steps": len(data["trajectory"]) if isinstance(data.get("trajectory"), list) else 0,
            "actions": "tool_calls" if function_calling else f"text ({text_actions})",
        }
        conversation_id = base_id if n == 0 else f"{base_id}/{agent}"
        conversations.append(b.build(conversation_id, path, SWE_FORMAT, meta))
    reported = report_unknown(path, unknown, "message roles")
    for conversation in conversations:
        conversation.metadata["unknown_record_types"] = reported
    return finish_file(path, conversations, "this SWE-agent trajectory")


def _swe_message(
    b: Builder,
    message: dict[str, Any],
    place: str,
    path: Path,
    unknown: Counter[str],
    function_calling: bool,
    text_actions: str,
    commands: set[str],
    pending_action: bool,
) -> bool:
    """Add one history message; returns whether an action (text mode) awaits its observation."""
    role = message.get("role")
    if not isinstance(role, str) or role not in _ROLES:
        unknown[str(role)] += 1
        return False
    content = _content(message.get("content"))
    demo = bool(message.get("is_demo"))
    if role == "system":
        b.system(
            content if isinstance(content, str) else join_text(p.text for p in content if isinstance(p, TextContent))
        )
        return False
    if role == "assistant":
        index, pending = _swe_assistant(
            b, message, content, place, path, function_calling or text_actions == "messages", commands
        )
        if demo:
            b.mark_demonstration(index)
        return pending
    if role == "tool":
        ids = message.get("tool_call_ids") or ([message["tool_call_id"]] if message.get("tool_call_id") else [])
        if not ids:
            raise InputError(path, f"{place}, field 'tool_call_ids'", "a tool message needs the id of its call")
        for call_id in ids:
            result_index = b.tool_result(str(call_id), content)
            if demo and result_index is not None:
                b.mark_demonstration(result_index)
        return False
    # user
    if pending_action and not demo and b.open_calls:
        user_index = b.tool_result(next(iter(b.open_calls)), content)
    else:
        user_index = b.user(content)
    if demo and user_index is not None:
        b.mark_demonstration(user_index)
    return False


def _swe_assistant(
    b: Builder,
    message: dict[str, Any],
    content: Any,
    place: str,
    path: Path,
    with_calls: bool,
    commands: set[str],
) -> tuple[int, bool]:
    """Add one SWE-agent assistant message: (its index, whether an action in text mode awaits its observation)."""
    reasoning = _thinking(message)
    if with_calls:
        calls = [
            _openai_call(b, call, f"{place}.tool_calls[{k}]", path)
            for k, call in enumerate(message.get("tool_calls") or [])
        ]
        return b.assistant(_text(content), reasoning, calls), False
    action = message.get("action")
    if not (isinstance(action, str) and action.strip()):
        return b.assistant(_text(content), reasoning), False
    thought = message.get("thought")
    text = thought if isinstance(thought, str) else _text(content)
    command = action.strip()
    name = command.split()[0] if command.split() and command.split()[0] in commands else "bash"
    call = ToolCall(id=b.new_call_id(), name=name, arguments={"command": command})
    return b.assistant(text.strip(), reasoning, [call]), True


def _commands(messages: list[tuple[int, dict[str, Any]]]) -> set[str]:
    """Command names documented in the system prompt (``name:\\n  docstring: ...``)."""
    for _, message in messages:
        if message.get("role") == "system" and isinstance(message.get("content"), str):
            return set(_COMMAND_DOC.findall(message["content"]))
    return set()


# --- mini-swe-agent ----------------------------------------------------------------------------


def read_mini_swe_agent(path: Path, text_actions: str = "tool_calls") -> list[Conversation]:
    """The conversation in a mini-swe-agent ``.traj.json`` file."""
    _check_mode(text_actions)
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(path, None, "expected a mini-swe-agent trajectory object with a 'messages' list")
    unknown: Counter[str] = Counter()
    b = Builder("mini-swe-agent")
    messages = data["messages"]
    function_calling = any(isinstance(m, dict) and (m.get("tool_calls") or m.get("role") == "tool") for m in messages)
    exit_info: dict[str, Any] = {}
    pending = False
    for index, message in enumerate(messages):
        place = f"messages[{index}]"
        if not isinstance(message, dict):
            raise InputError(path, place, "a message must be a JSON object")
        role = message.get("role")
        content = _content(message.get("content"))
        extra = object_field(message, "extra")
        if role == "exit":
            exit_info = {k: v for k, v in extra.items() if k in ("exit_status",)}
            continue
        if not isinstance(role, str) or role not in _ROLES:
            unknown[str(role)] += 1
            continue
        if role == "system":
            b.system(_text(content))
        elif role == "assistant":
            pending = _mini_assistant(
                b, message, content, extra, place, path, function_calling or text_actions == "messages"
            )
        elif role == "tool":
            call_id = message.get("tool_call_id")
            if not call_id:
                raise InputError(path, f"{place}, field 'tool_call_id'", "a tool message needs tool_call_id")
            b.tool_result(str(call_id), content)
        else:  # user
            if pending and b.open_calls:
                b.tool_result(next(iter(b.open_calls)), content)
            else:
                b.user(content)
            pending = False
    reported = report_unknown(path, unknown, "message roles")
    meta = _mini_metadata(data, exit_info, "tool_calls" if function_calling else f"text ({text_actions})")
    conversation_id = str(data.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj"))
    conversations = [b.build(conversation_id, path, MINI_FORMAT, meta, reported)] if b.has_dialogue() else []
    return finish_file(path, conversations, "this mini-swe-agent trajectory")


def _mini_assistant(
    b: Builder,
    message: dict[str, Any],
    content: Any,
    extra: dict[str, Any],
    place: str,
    path: Path,
    with_calls: bool,
) -> bool:
    """Add one mini-swe-agent assistant message; returns whether an action (text mode) awaits its observation.

    ``with_calls``: the message's tool calls are its actions; else one fenced shell block in its text is.
    """
    response = object_field(extra, "response")
    usage = openai_usage(response.get("usage"))
    reasoning = message.get("reasoning_content") or _response_reasoning(response)
    model = response.get("model")
    if with_calls:
        calls = [
            _openai_call(b, call, f"{place}.tool_calls[{k}]", path)
            for k, call in enumerate(message.get("tool_calls") or [])
        ]
        b.assistant(_text(content), reasoning, calls, model=model, usage=usage)
        return False
    text = _text(content)
    actions = [m for m in _FENCE.finditer(text) if m.group(1) in ("bash", "sh", "")]
    if len(actions) != 1:
        b.assistant(text, reasoning, model=model, usage=usage)
        return False
    action = actions[0]
    rest = (text[: action.start()] + text[action.end() :]).strip()
    call = ToolCall(id=b.new_call_id(), name="bash", arguments={"command": action.group(2).strip()})
    b.assistant(rest, reasoning, [call], model=model, usage=usage)
    return True


def _mini_metadata(data: dict[str, Any], exit_info: dict[str, Any], actions: str) -> dict[str, Any]:
    """What a mini-swe-agent trajectory says of its run (model, version, instance, exit status)."""
    info = object_field(data, "info")
    model_config = object_field(object_field(info, "config"), "model")
    return {
        "agent": "mini-swe-agent",
        "model": model_config.get("model_name"),
        "mini_version": info.get("mini_version"),
        "trajectory_format": data.get("trajectory_format"),
        "instance_id": data.get("instance_id"),
        "exit_status": info.get("exit_status", exit_info.get("exit_status")),
        "model_stats": info.get("model_stats"),
        "actions": actions,
    }


# --- helpers -----------------------------------------------------------------------------------


def _check_mode(text_actions: str) -> None:
    if text_actions not in TEXT_ACTIONS:
        raise ValueError(f"text_actions must be one of {TEXT_ACTIONS}, not {text_actions!r}")


def _openai_call(b: Builder, call: Any, place: str, path: Path) -> ToolCall:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not function.get("name"):
        raise InputError(path, place, "a tool call needs function.name")
    return ToolCall(
        id=str(call.get("id") or b.new_call_id()),
        name=str(function["name"]),
        arguments=parse_arguments(function.get("arguments")),
    )


def _content(content: Any) -> Any:
    if isinstance(content, list):
        parts = [TextContent(text=p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return simplify(parts) if parts else ""
    return "" if content is None else str(content)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return join_text(p.text for p in content if isinstance(p, TextContent))


def _thinking(message: dict[str, Any]) -> str | None:
    blocks = message.get("thinking_blocks")
    if isinstance(blocks, list):
        text = join_text(b.get("thinking") for b in blocks if isinstance(b, dict))
        if text:
            return text
    reasoning = message.get("reasoning_content")
    return reasoning if isinstance(reasoning, str) and reasoning.strip() else None


def _response_reasoning(response: dict[str, Any]) -> str | None:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("reasoning_content"), str):
            return message["reasoning_content"] or None
    return None


def _reader(function: Callable[..., list[Conversation]]) -> Callable[[Path], list[Conversation]]:
    return lambda path: function(path)


register(Reader(MINI_FORMAT, "mini-swe-agent trajectory (*.traj.json)", sniff_mini, _reader(read_mini_swe_agent)))
register(
    Reader(
        SWE_FORMAT,
        "SWE-agent trajectory (*.traj; text actions or function calling)",
        sniff_swe,
        _reader(read_swe_agent),
    )
)
