"""The recorder: what each compaction pass saw and decided, written as rows of a trace.

Replays and live agents fill the rows of the trace schema (:mod:`zett_lab.replay.schema`) through the
same :class:`Recording`, so a live trace and a replay compare column for column.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict

import zett_agent
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage

from ..load.conversation import CHECKPOINT_PREFIX
from ..records import JSONValue
from ..tokens import TokenCounter
from .schema import (
    BELOW_THRESHOLD,
    ENGINE_FAILED,
    NO_TURN_BOUNDARY,
    NOT_APPLIED,
    NOT_SMALLER,
    SUMMARY_FAILED,
    TraceRow,
)

Window = tuple[list[SystemMessage], list[AnyMessage], list[AnyMessage]]


class RecordedSetting(Protocol):
    """What the recorder reads of the Setting it records (a :class:`~zett_lab.replay.setting.Setting`): its
    limits fill the step rows, its counter counts them. Stated here, so the recorder needs nothing of the
    module that builds engines (which record into this one)."""

    @property
    def max_tokens(self) -> int: ...
    @property
    def keep_recent_tokens(self) -> int: ...
    @property
    def summarizer_name(self) -> str: ...
    def token_counter(self) -> TokenCounter: ...


class SummaryCall(TypedDict, total=False):
    """What the summary channel recorded of one summary call (empty when the pass made none)."""

    identity: str
    cache_hit: bool
    text: str | None
    tool_calls: bool
    latency_s: float
    input_tokens: int | None
    output_tokens: int | None


@dataclass(slots=True)
class PassRecord:
    """What one compaction pass saw and decided, filled in as the engine runs.

    Not frozen: the probe fills it in as the engine's methods return, one pass at a time.
    """

    trigger: str | None
    n_recorded: int
    n_messages: int = 0
    estimate: int | None = None
    estimator_tokens: int | None = None
    estimate_source: str | None = None
    window: Window | None = None
    window_checked: bool = False
    window_skip: str | None = None
    summary_call: SummaryCall | None = None
    checkpoint: CompactedMessage | None = None
    applied: bool = False
    error: BaseException | None = None
    error_in_summary: bool = False

    @property
    def attempted(self) -> bool:
        """Whether this pass becomes a compaction row: a window, a manual request, or a failure."""
        return self.window is not None or self.trigger == "manual" or self.error is not None

    def skip_reason(self) -> str | None:
        """Why the pass applied nothing (None when it applied a checkpoint)."""
        if self.applied:
            return None
        if self.error is not None:
            return SUMMARY_FAILED if self.error_in_summary else ENGINE_FAILED
        if self.trigger is None and not self.window_checked:
            return BELOW_THRESHOLD
        if self.window is None:
            return self.window_skip or NO_TURN_BOUNDARY
        return NOT_SMALLER if self.checkpoint is not None else NOT_APPLIED


def checkpoint_text(checkpoint: CompactedMessage) -> str:
    """The summary a checkpoint carries (the engine's prefix removed)."""
    text = checkpoint.text
    return text[len(CHECKPOINT_PREFIX) :] if text.startswith(CHECKPOINT_PREFIX) else text


def error_kind(error: BaseException, call: SummaryCall) -> str:
    """A short, stable name for why a summary attempt failed (an error may name its own, as a timeout does)."""
    own = getattr(error, "error_kind", None)
    if isinstance(own, str):
        return own
    if call.get("tool_calls") or "cannot call tools" in str(error):
        return "tool_call"
    if call.get("text") == "" or "nonempty text summary" in str(error):
        return "empty_summary"
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    name = type(error).__name__
    return f"{name}:{status}" if isinstance(status, int) else name


def summary_call_columns(call: SummaryCall, error: BaseException | None) -> TraceRow:
    """The compaction columns a summary call fills: its cost, latency, cache use and failure."""
    return {
        "latency_s": call.get("latency_s"),
        "cache_hit": call.get("cache_hit"),
        "summary_input_tokens": call.get("input_tokens"),
        "summary_output_tokens": call.get("output_tokens"),
        "error": None
        if error is None
        else str(error)
        if getattr(error, "names_its_cause", False)
        else f"{type(error).__name__}: {error}",
        "error_kind": error_kind(error, call) if error is not None else None,
    }


@dataclass
class Recording:
    """The trace of one conversation (or live session) being filled in, row by row.

    Replays keep every row in memory; a live recording writes each row out as it is made
    (see :mod:`zett_lab.replay.live`) and keeps only the counters.

    Not frozen: the replay and the live recorder fill it in row by row as the engine runs.
    """

    conversation_id: str
    #: The Setting being recorded (its limits fill the step rows; its counter counts them).
    setting: RecordedSetting
    span_start: int = 0
    turn: int = 0
    turn_step: int = 0
    steps: int = 0
    compactions: int = 0
    checkpoint_id: int | None = None
    step_rows: list[TraceRow] = field(default_factory=list)
    compaction_rows: list[TraceRow] = field(default_factory=list)
    engine_events: list[TraceRow] = field(default_factory=list)
    #: Replays keep every row; a live recording only writes them out (``write(kind, row)``).
    keep_rows: bool = True
    write: Callable[[str, TraceRow], None] | None = None

    #: The Setting's counter, limits and summarizer identity, looked up once (every row reads them).
    counter: TokenCounter = field(init=False)
    max_tokens: int = field(init=False)
    keep_recent_tokens: int = field(init=False)
    summarizer_identity: str = field(init=False)

    def __post_init__(self) -> None:
        setting = self.setting
        self.counter, self.summarizer_identity = setting.token_counter(), setting.summarizer_name
        self.max_tokens, self.keep_recent_tokens = setting.max_tokens, setting.keep_recent_tokens

    def add_step(self, row: TraceRow) -> None:
        """Count a finished step row, then keep it and/or write it out."""
        self.steps += 1
        self.turn_step += 1
        if self.keep_rows:
            self.step_rows.append(row)
        if self.write is not None:
            self.write("step", row)

    def add_compaction(self, row: TraceRow) -> None:
        """Keep and/or write out a finished compaction row."""
        if self.keep_rows:
            self.compaction_rows.append(row)
        if self.write is not None:
            self.write("compaction", row)

    def finish_pass(self, state: PassRecord | None, step: int, **extra: JSONValue) -> TraceRow | None:
        """The compaction row of a pass that attempted (or was asked for) a summary; None otherwise."""
        if state is None or not state.attempted:
            return None
        compaction_id = self.compactions  # the row's id (compaction_row numbers it so)
        row = {**self.compaction_row(state, step), **extra}
        self.compactions += 1
        if state.applied:
            self.checkpoint_id = compaction_id
        self.add_compaction(row)
        return row

    def compaction_row(self, state: PassRecord, step: int) -> TraceRow:
        counter = self.counter
        window = state.window
        older, recent = (window[1], window[2]) if window else ([], [])
        older_tokens = counter(older) if window else None
        summary_tokens = counter([state.checkpoint]) if state.checkpoint is not None else None
        call: SummaryCall = state.summary_call or {}
        error = state.error
        text = checkpoint_text(state.checkpoint) if state.checkpoint is not None else call.get("text")
        return {
            "compaction_id": self.compactions,
            "conversation_id": self.conversation_id,
            "step": step,
            "turn": self.turn,
            "trigger": state.trigger or "auto",
            "span_start": self.span_start if window else None,
            "span_end": state.n_recorded - len(recent) if window else None,
            "n_recorded": state.n_recorded,
            "older_messages": len(older) if window else None,
            "older_tokens": older_tokens,
            "recent_messages": len(recent) if window else None,
            "recent_tokens": counter(recent) if window else None,
            "summary_tokens": summary_tokens,
            "compression_ratio": 1 - summary_tokens / older_tokens
            if summary_tokens is not None and older_tokens
            else None,
            "applied": state.applied,
            "skip_reason": state.skip_reason(),
            "summary_text": text,
            "summarizer": call.get("identity", self.summarizer_identity),
            **summary_call_columns(call, error),
        }

    def step_row(
        self,
        step: int,
        n_recorded: int,
        state: PassRecord | None,
        compaction: TraceRow | None,
        sent: Sequence[AnyMessage],
        reply: AssistantMessage | None,
    ) -> TraceRow:
        """The row of one model step: what the pass before it decided and what the step was sent."""
        counter = self.counter
        kinds = Counter(map(type, sent))  # counted in C: contexts run to thousands of messages
        checkpoints = sum(n for kind, n in kinds.items() if issubclass(kind, CompactedMessage))
        system = sum(n for kind, n in kinds.items() if issubclass(kind, SystemMessage))
        originals = len(sent) - checkpoints - system
        has_checkpoint = checkpoints > 0
        context_tokens = counter(sent)
        window = state.window if state is not None else None
        older, recent = (window[1], window[2]) if window else (None, None)
        return {
            "conversation_id": self.conversation_id,
            "turn": self.turn,
            "step": step,
            "turn_step": self.turn_step,
            "n_recorded": n_recorded,
            "n_messages": state.n_messages if state else len(sent),
            "estimate": state.estimate if state else None,
            "estimator_tokens": state.estimator_tokens if state else None,
            "estimate_source": state.estimate_source if state else None,
            "max_tokens": self.max_tokens,
            "keep_recent_tokens": self.keep_recent_tokens,
            "triggered": bool(state and (state.window_checked or state.applied)),
            "trigger": "auto" if state and (state.window_checked or state.applied) else None,
            "skip_reason": state.skip_reason() if state else BELOW_THRESHOLD,
            "older_messages": len(older) if older is not None else None,
            "older_tokens": counter(older) if older is not None else None,
            "recent_messages": len(recent) if recent is not None else None,
            "recent_tokens": counter(recent) if recent is not None else None,
            "cutoff_index": n_recorded - len(recent) if recent is not None else None,
            "compaction_id": compaction["compaction_id"] if compaction else None,
            "summary_tokens": compaction["summary_tokens"] if compaction else None,
            "applied": bool(state and state.applied),
            "context_tokens_after": context_tokens,
            "over_budget_after": context_tokens > self.max_tokens,
            "checkpoint_id": self.checkpoint_id if has_checkpoint else None,
            "kept_from": n_recorded - originals,
            "responded": reply is not None,
            "output_tokens": counter([reply]) if reply is not None else 0,
            "zett_agent_version": zett_agent.__version__,
        }
