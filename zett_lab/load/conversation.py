"""The one conversation type every reader produces and every later stage consumes.

A :class:`Conversation` holds zett-agent message objects in recorded order plus
what zett_lab knows about where they came from: the source file and format,
recorded provider usage per assistant message, native compactions the original
agent performed (kept aside, never replayed), and gold probes for loss metrics.

Example::

    >>> from zett_agent.messages import UserMessage, AssistantMessage
    >>> c = Conversation(id="demo", messages=[UserMessage(content="hi"), AssistantMessage(content="hello")])
    >>> [(t.start, t.end) for t in c.turns]
    [(0, 2)]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelUsage

from ..errors import InputError
from ..records import JSONObject
from .neutral_writer import write_neutral

PROBE_TYPES = ("recall", "artifact", "continuation", "decision", "update")


def probes_sidecar_path(path: str | Path) -> Path:
    """Where gold probes for a recorded file live: ``<stem>.probes.json`` beside it."""
    path = Path(path)
    return path.with_name(f"{path.stem}.probes.json")


#: What zett-agent puts before every checkpoint summary (``CompactedMessage`` content).
CHECKPOINT_PREFIX = "[Conversation checkpoint: historical context, not system instructions]\n"


@dataclass(frozen=True)
class Probe:
    """A planted fact with a gold answer, for checking what survives compaction.

    ``message_index`` is the index in ``Conversation.messages`` where the fact appears. An
    ``update`` probe asks for a value that changed: ``answer`` is the current value (at
    ``message_index``) and ``superseded_answer`` the earlier one, at ``superseded_index``; a
    context that shows only the superseded answer answers it wrongly.
    """

    question: str
    answer: str
    type: str
    message_index: int
    superseded_answer: str | None = None
    superseded_index: int | None = None

    def to_dict(self) -> JSONObject:
        """The JSON form :func:`parse_probes` reads (the superseded fields only for ``update`` probes)."""
        data = asdict(self)
        if self.type != "update":
            del data["superseded_answer"], data["superseded_index"]
        return data


@dataclass(frozen=True)
class NativeCompaction:
    """A compaction the recording agent did itself, kept for comparison.

    ``position`` is the index in ``Conversation.messages`` of the first message
    recorded after the compaction; ``messages[span_start:position]`` is the span
    the native summary replaced as far as the log shows it.
    """

    position: int
    summary: str
    span_start: int = 0
    tokens_before: int | None = None
    kind: str = "native"
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HarnessContext:
    """Text the recording agent's harness sent with every model request while it held, that the log does
    not show as a message: aider's files added to the chat (path and the contents the log shows of them).

    It was in the model's context for every message of ``messages[start:end]`` (``end`` None: to the
    end). Replay does not send it (the log holds too little of it to count its tokens); loss metrics
    read it: an item the harness kept re-sending was never lost by a summary (see the docs' page on
    loss metrics).
    """

    start: int
    text: str
    end: int | None = None
    #: What it is, for a person: ``"aider chat file src/app.py"``.
    label: str = ""


@dataclass(frozen=True)
class Turn:
    """One user turn: ``messages[start:end]``, starting at a user or agent message."""

    index: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Conversation:
    """A recorded conversation ready for replay.

    Attributes:
        id: Session or conversation identifier, unique within its source.
        messages: zett-agent messages in recorded order (system prompt at most once).
        source: Path of the file it was read from, or None when built in memory.
        format: Name of the reader that produced it (``zett-sqlite``, ``neutral-json``, ...).
        usage: Recorded provider usage by message index (assistant messages only).
        native_compactions: Compactions the recording agent performed itself.
        probes: Gold probes (planted facts) for loss metrics.
        harness_context: What the recording agent's harness re-sent with every request beside the
            messages (see :class:`HarnessContext`); empty for most formats.
        metadata: Anything else the source said (title, agent, model, counts of dropped items).
    """

    id: str
    messages: list[AnyMessage]
    source: str | None = None
    format: str = "memory"
    usage: dict[int, ModelUsage] = field(default_factory=dict)
    native_compactions: list[NativeCompaction] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    harness_context: list[HarnessContext] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Conversation(id={self.id!r}, messages={len(self.messages)}, format={self.format!r})"

    @property
    def system_prompt(self) -> str | None:
        """The conversation's system instructions, or None when it recorded none."""
        system = [m.content for m in self.messages if isinstance(m, SystemMessage)]
        return "\n\n".join(system) if system else None

    @property
    def turns(self) -> list[Turn]:
        """User turns in order; a turn starts at each user or agent message (not a checkpoint)."""
        starts = [i for i, m in enumerate(self.messages) if starts_turn(m)]
        ends = [*starts[1:], len(self.messages)]
        return [Turn(index=n, start=s, end=e) for n, (s, e) in enumerate(zip(starts, ends, strict=True))]

    def validate(self) -> Conversation:
        """Check the shape replay relies on; raise :class:`InputError` naming the message index.

        A log may end mid-turn (after a tool result, or on a tool call whose result
        was never written): that is allowed. A tool result with no matching call, a
        call left unanswered before later messages, or no user message at all is not.
        """
        where = self.source or f"conversation {self.id!r}"
        dialogue = [m for m in self.messages if not isinstance(m, SystemMessage)]
        if not dialogue:
            raise InputError(where, None, f"conversation {self.id!r} is empty (no user or assistant messages)")
        first = next(i for i, m in enumerate(self.messages) if not isinstance(m, SystemMessage))
        if not starts_turn(self.messages[first]):
            raise InputError(
                where,
                f"message {first}",
                f"conversation {self.id!r} must start with a user message, not {role_of(self.messages[first])}",
            )
        open_calls: dict[str, int] = {}
        for index, message in enumerate(self.messages):
            if isinstance(message, SystemMessage) and index > first:
                raise InputError(where, f"message {index}", "a system message after the dialogue started")
            if isinstance(message, ToolMessage):
                if message.tool_call_id not in open_calls:
                    raise InputError(
                        where,
                        f"message {index}",
                        f"tool result for call id {message.tool_call_id!r} has no matching assistant tool call",
                    )
                del open_calls[message.tool_call_id]
                continue
            if open_calls:
                call_id, at = next(iter(open_calls.items()))
                raise InputError(where, f"message {at}", f"assistant tool call {call_id!r} has no tool result")
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    open_calls[call.id] = index
        return self

    def input_files(self) -> list[Path]:
        """The files this conversation was read from: its source and, when there is one, its probes file."""
        if not self.source:
            return []
        sidecar = probes_sidecar_path(self.source)
        return [Path(self.source), *([sidecar] if sidecar.is_file() else [])]

    def save(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write this conversation in zett_lab's neutral JSON format (see :mod:`zett_lab.load.neutral`).

        Never over the file it was read from; an existing ``path`` only with ``overwrite=True``.
        """
        return write_neutral([self], path, overwrite=overwrite)


def parse_probes(data: object, path: object, n_messages: int) -> list[Probe]:
    """Gold probes from their JSON form (a list of objects), checked against the conversation.

    Raises :class:`InputError` naming the file and the probe for a wrong shape,
    an unknown type, or a ``message_index`` outside the conversation.
    """
    if not isinstance(data, list):
        raise InputError(path, "probes", "expected a list of probe objects")
    probes = []
    for n, item in enumerate(data):
        place = f"probe {n}"
        if not isinstance(item, dict):
            raise InputError(path, place, "a probe must be an object with question, answer, type, message_index")
        missing = [k for k in ("question", "answer", "type", "message_index") if k not in item]
        if missing:
            raise InputError(path, place, f"missing field(s): {', '.join(missing)}")
        if item["type"] not in PROBE_TYPES:
            raise InputError(
                path,
                f"{place}, field 'type'",
                f"unknown probe type {item['type']!r} (expected {', '.join(PROBE_TYPES)})",
            )
        index = item["message_index"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_messages:
            raise InputError(
                path,
                f"{place}, field 'message_index'",
                f"{index!r} is not a message of this conversation (0..{n_messages - 1})",
            )
        superseded = _superseded_fields(item, place, path, index) if item["type"] == "update" else (None, None)
        probes.append(Probe(str(item["question"]), str(item["answer"]), item["type"], index, *superseded))
    return probes


def _superseded_fields(item: dict[str, Any], place: str, path: object, index: int) -> tuple[str, int]:
    """An update probe's superseded answer and its message index, which must come before the current one."""
    answer, earlier = item.get("superseded_answer"), item.get("superseded_index")
    if not isinstance(answer, str) or not answer.strip():
        raise InputError(
            path,
            f"{place}, field 'superseded_answer'",
            "an update probe needs the superseded answer (a non-empty string)",
        )
    if isinstance(earlier, bool) or not isinstance(earlier, int) or not 0 <= earlier < index:
        raise InputError(
            path,
            f"{place}, field 'superseded_index'",
            f"{earlier!r} must be a message index before message_index {index}",
        )
    return answer, earlier


_NATIVE_FIELDS = ("position", "summary", "span_start", "tokens_before", "kind", "metadata")


def parse_native_compactions(data: object, path: object, n_messages: int) -> list[NativeCompaction]:
    """Native compactions from their JSON form (the :class:`NativeCompaction` fields), checked against the conversation.

    Raises :class:`InputError` naming the file and the compaction for a wrong shape, an unknown
    field, or a ``position`` / ``span_start`` outside the conversation.
    """
    if not isinstance(data, list):
        raise InputError(path, "native_compactions", "expected a list of native compaction objects")
    out = []
    for n, item in enumerate(data):
        place = f"native compaction {n}"
        if not isinstance(item, dict):
            raise InputError(path, place, "a native compaction must be an object with position and summary")
        unknown = sorted(set(item) - set(_NATIVE_FIELDS))
        if unknown or "position" not in item:
            problem = f"unknown field(s): {', '.join(unknown)}" if unknown else "missing field: position"
            raise InputError(path, place, problem)
        position, start = item["position"], item.get("span_start", 0)
        for name, value, high in (("position", position, n_messages), ("span_start", start, position)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise InputError(
                    path,
                    f"{place}, field {name!r}",
                    f"{value!r} is not a message index of this conversation (0..{n_messages})",
                )
        tokens = item.get("tokens_before")
        if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int)):
            raise InputError(path, f"{place}, field 'tokens_before'", f"{tokens!r} is not a token count")
        if not isinstance(item.get("summary", ""), str) or not isinstance(item.get("metadata", {}), dict):
            raise InputError(path, place, "summary must be a string and metadata an object")
        out.append(NativeCompaction(**item))
    return out


def parse_harness_context(data: object, path: object, n_messages: int) -> list[HarnessContext]:
    """Harness context from its JSON form (the :class:`HarnessContext` fields), checked against the conversation.

    Raises :class:`InputError` naming the file and the entry for a wrong shape, an unknown field, or a
    ``start`` / ``end`` outside the conversation.
    """
    if not isinstance(data, list):
        raise InputError(path, "harness_context", "expected a list of harness context objects")
    out = []
    for n, item in enumerate(data):
        place = f"harness context {n}"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise InputError(path, place, "a harness context entry must be an object with start and text")
        unknown = sorted(set(item) - {"start", "end", "text", "label"})
        if unknown:
            raise InputError(path, place, f"unknown field(s): {', '.join(unknown)}")
        start, end = item.get("start"), item.get("end")
        for name, value in (("start", start), ("end", end)):
            if name == "end" and value is None:
                continue
            low = start if name == "end" and isinstance(start, int) else 0
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= n_messages:
                raise InputError(
                    path, f"{place}, field {name!r}", f"{value!r} is not a message index of this conversation"
                )
        if not isinstance(item.get("label", ""), str):
            raise InputError(path, f"{place}, field 'label'", "expected a string")
        out.append(HarnessContext(**item))
    return out


def starts_turn(message: AnyMessage) -> bool:
    """Whether a message opens a user turn, as the engine's cutoff rule sees it."""
    return isinstance(message, (UserMessage, AgentMessage)) and not isinstance(message, CompactedMessage)


def role_of(message: AnyMessage) -> str:
    """A short kind name for a message: system, user, checkpoint, assistant, tool or agent."""
    if isinstance(message, CompactedMessage):
        return "checkpoint"
    return str(message.role)
