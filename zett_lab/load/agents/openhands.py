"""OpenHands (V0) trajectories: the JSON event list OpenHands exports.

The file is a list of events, or an object holding it under ``"trajectory"``
(or ``"events"``). Events are *actions* (``"action"``) and *observations*
(``"observation"``) from ``source`` agent / user / environment. Mapping, after
OpenHands' own ``ConversationMemory``:

* ``system`` action -> system message (its ``args.tools`` names go to metadata);
* user ``message`` -> user message; agent ``message`` / ``finish`` without a tool
  call -> assistant text;
* an agent action with ``tool_call_metadata`` -> the assistant message of its
  ``model_response`` (every tool call of that response, its text, any
  ``reasoning_content``, and its usage); actions from one response merge;
* an observation with ``tool_call_metadata`` -> the tool result (for commands,
  OpenHands' ``prefix`` + output + ``suffix``, as the agent sees it; ``error``
  observations and ``success: false`` are failures);
* ``recall`` observations (workspace context, microagent knowledge) -> a user
  message rebuilt from their fields, ``attributes={"injected": "recall",
  "approximate": True}`` (OpenHands renders them through prompt templates that
  the log does not hold, so the wording differs slightly);
* ``condensation`` actions -> native compactions: ``summary`` with the span of
  forgotten events (``span_start`` and ``metadata["span_end"]`` are message
  indices; a later condensation re-summarizes the earlier summary, so its
  ``span_start`` is the first condensation's and ``metadata["forgotten_span_start"]``
  is where its own newly forgotten events begin; ``tokens_before`` is the prompt
  size of the last model call before it).

State changes, ``null`` observations and other bookkeeping events are skipped.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from zett_agent.messages import ImageContent, ImageUrlSource, TextContent, ToolCall

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
)

FORMAT = "openhands-v0-trajectory-json"

KNOWN_ACTIONS = {
    "system", "message", "run", "run_ipython", "read", "write", "edit", "browse", "browse_interactive",
    "think", "finish", "reject", "delegate", "recall", "change_agent_state", "condensation",
    "condensation_request", "mcp", "task_tracking", "null", "pause", "resume", "start", "stop",
}  # fmt: skip
KNOWN_OBSERVATIONS = {
    "run", "run_ipython", "read", "write", "edit", "browse", "error", "success", "agent_state_changed",
    "recall", "null", "delegate", "think", "mcp", "user_rejected", "condense", "task_tracking",
    "download", "loop_detection", "file_download",
}  # fmt: skip
_SKIPPED_ACTIONS = {
    "recall",
    "change_agent_state",
    "condensation_request",
    "null",
    "pause",
    "resume",
    "start",
    "stop",
    "reject",
}
_SOURCE = key_pattern("source", "(?:agent|user|environment)")
_EVENT_KEY = (key_pattern("action"), key_pattern("observation"))


def sniff(path: Path, head: bytes) -> bool:
    """An OpenHands trajectory: a JSON list of events (or {"trajectory": [...]}) with source and action/observation."""
    stripped = head.lstrip()
    if not path.is_file() or stripped[:1] not in (b"[", b"{"):
        return False
    if (
        stripped[:1] == b"{"
        and not key_pattern("trajectory").search(stripped[:200])
        and not key_pattern("events").search(stripped[:200])
    ):
        return False
    start = stripped[:8192]
    return bool(_SOURCE.search(start)) and any(p.search(start) for p in _EVENT_KEY) and b'"timestamp"' in start


class _Trajectory:
    """One pass over a trajectory's events: the conversation being built and what later events refer back to."""

    def __init__(self) -> None:
        self.builder = Builder("openhands")
        self.unknown: Counter[str] = Counter()
        self.first_index: dict[int, int] = {}  # event id -> messages before it
        self.models: Counter[str] = Counter()
        self.meta: dict[str, Any] = {"agent": "openhands"}
        self.last_prompt_tokens: int | None = None
        self.state: dict[str, Any] = {}

    def take(self, event: dict[str, Any], position: int) -> None:
        event_id = event.get("id", position)
        if isinstance(event_id, int):
            self.first_index.setdefault(event_id, len(self.builder.messages))
        args = object_field(event, "args")
        metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else None
        if "action" in event:
            self._action(event, args, metadata)
        elif "observation" in event:
            self._observation(event, metadata)
        else:
            self.unknown["<neither action nor observation>"] += 1

    def _action(self, event: dict[str, Any], args: dict[str, Any], metadata: dict[str, Any] | None) -> None:
        b = self.builder
        action = event.get("action")
        if not isinstance(action, str) or action not in KNOWN_ACTIONS:
            self.unknown[f"action:{action}"] += 1
            return
        source = event.get("source")
        if action == "system":
            self._system(event, args)
        elif action == "condensation":
            _condensation(b, args, self.first_index, self.last_prompt_tokens, event)
        elif metadata is not None and source == "agent":
            usage = _tool_action(b, event, metadata, args, self.models, self.state)
            if usage is not None:
                self.last_prompt_tokens = usage.input_tokens
        elif action == "message":
            text = str(args.get("content") if args.get("content") is not None else event.get("message") or "")
            if source == "user":
                b.user(_with_images(text, args.get("image_urls")))
            else:
                b.assistant(text)
        elif action == "finish" and source == "agent":
            b.assistant(str(args.get("final_thought") or args.get("message") or event.get("message") or ""))
        elif action not in _SKIPPED_ACTIONS:
            b.counts["actions_without_tool_call_skipped"] += 1

    def _system(self, event: dict[str, Any], args: dict[str, Any]) -> None:
        """The system action: the system message, with its tool names and OpenHands version in the metadata."""
        self.builder.system(str(args.get("content") or event.get("message") or ""))
        tools = args.get("tools")
        if isinstance(tools, list):
            self.meta["tools"] = [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
        for key in ("openhands_version", "agent_class"):
            if args.get(key):
                self.meta[key] = args[key]

    def _observation(self, event: dict[str, Any], metadata: dict[str, Any] | None) -> None:
        b = self.builder
        observation = event.get("observation")
        if not isinstance(observation, str) or observation not in KNOWN_OBSERVATIONS:
            self.unknown[f"observation:{observation}"] += 1
            return
        if metadata is not None:
            call_id = str(metadata.get("tool_call_id"))
            success = observation != "error" and event.get("success") is not False
            b.tool_result(call_id, _observation_text(event), success=success, name=metadata.get("function_name"))
        elif observation == "recall":
            extras = event.get("extras") or {}
            if extras.get("working_dir") and "cwd" not in self.meta:
                self.meta["cwd"] = extras["working_dir"]
            text = _recall_text(extras)
            if text:
                b.user(text, injected="recall", approximate=True)
        elif observation == "error" and event.get("content"):
            # an error with no tool call is shown to the agent as a user-side message
            b.user(str(event.get("content")), injected="error")


def read(path: Path) -> list[Conversation]:
    """The conversation of one OpenHands trajectory."""
    data = load_json(path)
    events = data
    if isinstance(data, dict):
        events = data.get("trajectory", data.get("events"))
    if not isinstance(events, list):
        raise InputError(path, None, "expected a list of OpenHands events (or an object with a 'trajectory' list)")
    trajectory = _Trajectory()
    for position, event in enumerate(events):
        if not isinstance(event, dict):
            raise InputError(path, f"event {position}", "an event must be a JSON object")
        trajectory.take(event, position)
    b, meta, models = trajectory.builder, trajectory.meta, trajectory.models
    reported = report_unknown(path, trajectory.unknown, "event types")
    meta["model"] = models.most_common(1)[0][0] if models else None
    meta["events"] = len(events)
    meta["system_prompt_recorded"] = any(m for m in b.messages[:1] if type(m).__name__ == "SystemMessage")
    conversations = [b.build(path.stem, path, FORMAT, meta, reported)] if b.has_dialogue() else []
    return finish_file(path, conversations, "this OpenHands trajectory")


def _tool_action(
    b: Builder,
    event: dict[str, Any],
    metadata: dict[str, Any],
    args: dict[str, Any],
    models: Counter[str],
    state: dict[str, Any],
):
    response = object_field(metadata, "model_response")
    choices = response.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    message = message if isinstance(message, dict) else {}
    model = response.get("model")
    if model:
        models[model] += 1
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        calls.append(
            ToolCall(
                id=str(call.get("id") or b.new_call_id()),
                name=str(function.get("name") or "tool"),
                arguments=parse_arguments(function.get("arguments")),
            )
        )
    if not calls:
        calls.append(
            ToolCall(
                id=str(metadata.get("tool_call_id") or b.new_call_id()),
                name=str(metadata.get("function_name") or event.get("action")),
                arguments=dict(args),
            )
        )
    content = message.get("content")
    if not isinstance(content, str):
        thought = args.get("thought")
        content = thought if isinstance(thought, str) else ""
    reasoning = message.get("reasoning_content")
    usage = openai_usage(response.get("usage"))
    key = response.get("id") or metadata.get("tool_call_id")
    if key is not None and key == state.get("last_response"):
        # another action of the same model response: its calls are already in the message
        content, reasoning = "", None
    state["last_response"] = key
    b.assistant(
        content,
        reasoning if isinstance(reasoning, str) else None,
        calls,
        key=key,
        model=model,
        usage=usage,
    )
    return usage


def _observation_text(event: dict[str, Any]) -> str:
    content = str(event.get("content") or "")
    extras = object_field(event, "extras")
    meta = object_field(extras, "metadata")
    if event.get("observation") in ("run", "run_ipython") and meta:
        return f"{meta.get('prefix') or ''}{content}{meta.get('suffix') or ''}"
    return content


def _recall_text(extras: dict[str, Any]) -> str:
    """The information a recall observation adds to the prompt, as plain tagged text."""
    parts: list[str] = []
    if extras.get("recall_type") == "workspace_context":
        repo = [f"{k}: {extras[k]}" for k in ("repo_name", "repo_directory", "repo_branch") if extras.get(k)]
        if repo:
            parts.append("<REPOSITORY_INFO>\n" + "\n".join(repo) + "\n</REPOSITORY_INFO>")
        if extras.get("repo_instructions"):
            parts.append(f"<REPOSITORY_INSTRUCTIONS>\n{extras['repo_instructions']}\n</REPOSITORY_INSTRUCTIONS>")
        runtime = []
        if extras.get("runtime_hosts"):
            runtime.append(f"hosts: {json.dumps(extras['runtime_hosts'])}")
        for key in ("working_dir", "date", "additional_agent_instructions", "custom_secrets_descriptions"):
            if extras.get(key):
                value = extras[key]
                runtime.append(f"{key}: {value if isinstance(value, str) else json.dumps(value)}")
        if runtime:
            parts.append("<RUNTIME_INFORMATION>\n" + "\n".join(runtime) + "\n</RUNTIME_INFORMATION>")
        if extras.get("conversation_instructions"):
            parts.append(
                f"<CONVERSATION_INSTRUCTIONS>\n{extras['conversation_instructions']}\n</CONVERSATION_INSTRUCTIONS>"
            )
    for agent in extras.get("microagent_knowledge") or []:
        if isinstance(agent, dict) and agent.get("content"):
            parts.append(
                "<EXTRA_INFO>\nThe following information has been included based on a keyword match for "
                f'"{agent.get("trigger")}".\n{agent["content"]}\n</EXTRA_INFO>'
            )
    return join_text(parts)


def _condensation(
    b: Builder, args: dict[str, Any], first_index: dict[int, int], tokens_before: int | None, event: dict[str, Any]
) -> None:
    forgotten = args.get("forgotten_event_ids")
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if isinstance(forgotten, list) and forgotten and start is None:
        start, end = min(forgotten), max(forgotten)
    span_start = span_end = None
    if isinstance(start, int):
        span_start = min((i for e, i in first_index.items() if e >= start), default=None)
    if isinstance(end, int):
        span_end = min((i for e, i in first_index.items() if e > end), default=len(b.messages))
    forgotten_start = span_start
    if b.native and span_start is not None:
        # OpenHands summarizes its previous summary together with the newly forgotten events
        span_start = min([span_start, *(n.span_start for n in b.native)])
    summary = args.get("summary")
    metadata = {
        "forgotten_span_start": forgotten_start,
        "span": "cumulative",
        "event_id": event.get("id"),
        "forgotten_events_start_id": start,
        "forgotten_events_end_id": end,
        "forgotten_event_ids": forgotten,
        "summary_offset": args.get("summary_offset"),
        "span_end": span_end,
        "tokens_before_source": "prompt_tokens of the last model call before the condensation",
    }
    if not summary:
        metadata["summary_missing"] = True
    b.compaction(
        str(summary or ""),
        tokens_before=tokens_before,
        kind="openhands-condensation",
        span_start=span_start,
        metadata=metadata,
    )


def _with_images(text: str, urls: Any) -> Any:
    if not urls:
        return text
    parts: list[Any] = [TextContent(text=text)]
    for url in urls:
        try:
            parts.append(ImageContent(source=ImageUrlSource(url=str(url))))
        except ValueError:
            continue
    return parts


register(Reader(FORMAT, "OpenHands V0 trajectory (exported JSON event list)", sniff, read))
