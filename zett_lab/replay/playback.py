"""Playing a recording back through zett-agent's runtime: the replay model, the replay tools, the cursor.

The recorded assistant messages are answered one per model step by :class:`ReplayModel`, the
recorded tool results by :class:`RecordedTools`, and :class:`ReplayCursor` says where in the
recording the replay is. Only zett-agent's public model and tool interfaces are used here; the
engine's own hooks are probed in :mod:`zett_lab.replay.engine`.
"""

from __future__ import annotations

import copy
import pickle
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from zett_agent.messages import AssistantMessage, ToolMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, ModelUsage, RetryOptions
from zett_agent.tools.base import AgentTool, current_tool_call_id

from ..load.conversation import Conversation
from .recorder import PassRecord, Recording
from .schema import TraceRow

T = TypeVar("T")


class TurnInterrupted(Exception):
    """Ends a request whose recorded turn stopped after a tool result, before a new user message.

    An ordinary exception (raised from ``before_model``, not from a tool) so the runtime
    fails that request cleanly and accepts the next one.
    """


class EndOfRecording(BaseException):
    """Raised inside the runtime when the recording has nothing more to play.

    A BaseException so the runtime's tool runner does not turn it into a failed tool
    result; replay catches it and ends cleanly on a log that was cut off.
    """


@dataclass
class ReplayCursor:
    """Where a replay is in its recording, shared by the replay model, tools and probe.

    Not frozen: it moves through the recording as the replay runs (the current pass, turn and cursor).
    """

    conversation: Conversation
    recording: Recording
    assistant_indices: list[int]
    manual_steps: set[int] = field(default_factory=set)
    cursor: int = 0
    turn_start: int = 0
    turn_end: int = 0
    interrupted_turns: list[int] = field(default_factory=list)
    current: PassRecord | None = None
    ended: bool = False
    #: The pass whose failure stopped a strict replay (its error says whether the summary or the engine failed).
    strict_failure: PassRecord | None = None

    @property
    def n_recorded(self) -> int:
        """Original messages seen so far: everything before the next recorded assistant message."""
        if self.cursor < len(self.assistant_indices):
            return self.assistant_indices[self.cursor]
        return len(self.conversation.messages)

    def turn_was_interrupted(self) -> bool:
        """The runtime wants another step, but the recorded turn ended on a tool result before a new user message."""
        indices = self.assistant_indices
        next_assistant = indices[self.cursor] if self.cursor < len(indices) else None
        return self.turn_end < len(self.conversation.messages) and (
            next_assistant is None or next_assistant >= self.turn_end
        )

    def begin_pass(self, trigger: str | None, n_recorded: int) -> PassRecord:
        self.current = PassRecord(trigger=trigger, n_recorded=n_recorded)
        return self.current

    def finish_pass(self, step: int) -> TraceRow | None:
        return self.recording.finish_pass(self.current, step)


#: Recorded values pickled once each, by identity (the value is held, so its id is not reused meanwhile).
_PICKLED: dict[int, tuple[object, bytes]] = {}
#: Entries kept before the memo is cleared (about one per recorded assistant message of the conversations replayed).
_PICKLED_KEPT = 100_000


def runtime_copy(value: T) -> T:
    """A deep copy of a recorded message or tool result for the runtime to own (it may change what it is given).

    The same as ``copy.deepcopy``: a pickle round trip, each value pickled once (a sweep plays the same
    recorded messages in every replay), so a copy is one ``pickle.loads``. Recordings are never changed
    in place while replayed (the token counter remembers counts by identity too).
    """
    if isinstance(value, str):
        return value
    held = _PICKLED.get(id(value))
    if held is None or held[0] is not value:
        try:
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - something pickle cannot copy: deepcopy can, or says why
            return copy.deepcopy(value)
        if len(_PICKLED) >= _PICKLED_KEPT:
            _PICKLED.clear()
        held = _PICKLED[id(value)] = (value, data)
    return cast(T, pickle.loads(held[1]))


class ReplayModel:
    """Plays back the recorded assistant messages, one per model step, and records each step."""

    retry = RetryOptions(max_retries=0)

    def __init__(
        self, replay: ReplayCursor, usage_for: Callable[[int, ModelRequest, AssistantMessage], ModelUsage]
    ) -> None:
        self._replay = replay
        self._usage_for = usage_for

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        replay, recording = self._replay, self._replay.recording
        step = recording.steps
        compaction = replay.finish_pass(step)
        state, replay.current = replay.current, None
        indices = replay.assistant_indices
        # assistant_indices holds the indices of AssistantMessage only (see replay()).
        message = (
            cast(AssistantMessage, replay.conversation.messages[indices[replay.cursor]])
            if replay.cursor < len(indices)
            else None
        )
        recording.add_step(recording.step_row(step, replay.n_recorded, state, compaction, request.messages, message))
        if message is None:
            replay.ended = True
            raise EndOfRecording
        index = indices[replay.cursor]
        replay.cursor += 1
        reply = runtime_copy(message)
        yield ModelEvent.completed(ModelResponse(reply, usage=self._usage_for(index, request, reply)))


class RecordedTools:
    """One replay tool per recorded tool name, answering each call id with its recorded result."""

    def __init__(self, replay: ReplayCursor, start: int = 0) -> None:
        self._replay = replay
        self._results: dict[str, deque[ToolMessage]] = defaultdict(deque)
        #: Recorded results answered so far (the queues hold those from message ``start`` on).
        self.used = 0
        names: set[str] = set()
        for index, message in enumerate(replay.conversation.messages):
            if isinstance(message, ToolMessage):
                if index >= start:
                    self._results[message.tool_call_id].append(message)
            elif isinstance(message, AssistantMessage):
                names.update(call.name for call in message.tool_calls)
        self.tools = [
            AgentTool(
                name=name,
                description=f"Replays the recorded results of {name}.",
                parameters={"type": "object"},
                handler=self._answer,
                guidelines=(),
            )
            for name in sorted(names)
        ]

    async def _answer(self, **_: Any) -> Any:
        queue = self._results.get(current_tool_call_id() or "")
        if not queue:
            self._replay.ended = True
            raise EndOfRecording
        result = queue.popleft()
        self.used += 1
        content = runtime_copy(result.content)
        if not result.success:
            raise RecordedFailure(result.text if not isinstance(content, str) else content)
        return content


class RecordedFailure(Exception):
    """Re-raises a recorded failed tool result so the runtime stores it with ``success=False``."""
