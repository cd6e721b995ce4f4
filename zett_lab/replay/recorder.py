"""The recorder: what each compaction pass saw and decided, written as rows of a trace.

This module is the one home of the facts every stage reads about a trace: the skip
reasons and the column lists of the step and compaction tables (documented in
``docs/trace-schema.md``). Replays and live agents fill the same rows through the same
:class:`Recording`, so a live trace and a replay compare column for column.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import zett_agent
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, AssistantMessage, SystemMessage

from ..load.conversation import CHECKPOINT_PREFIX
from ..tokens import TokenCounter

# --- skip reasons: why a step went on without an applied compaction ----------------------------

#: The engine did not look for a window (its estimate was at most ``max_tokens``).
BELOW_THRESHOLD = "below threshold"
#: The whole dialogue is under ``keep_recent_tokens``: nothing is old enough to compact.
RECENT_COVERS_ALL = "recent budget covers everything"
#: The cutoff snapped back to the first message: one oversized turn the stock engine never splits.
NO_TURN_BOUNDARY = "no whole-turn boundary"
#: Everything older than the kept turns is earlier checkpoints.
ONLY_CHECKPOINTS = "only earlier checkpoints"
#: A turn-splitting policy found no boundary between complete tool groups.
NO_GROUP_BOUNDARY = "no tool-group boundary"
#: A user engine with its own window selection found no window and gave no reason.
NO_WINDOW = "engine found no window"
#: The summary was at least as long as what it replaced; the engine discarded it (retried next step).
NOT_SMALLER = "summary not smaller"
#: A user engine found a window but applied nothing and produced no checkpoint.
NOT_APPLIED = "engine applied nothing"
#: The summary model failed (or answered with nothing usable); recorded, not fatal unless strict.
SUMMARY_FAILED = "summary failed"
#: The engine itself raised during the pass (outside the summary call).
ENGINE_FAILED = "engine failed"

#: Every skip reason zett_lab records (a user engine's ``explain_no_window`` may add its own).
SKIP_REASONS = (
    BELOW_THRESHOLD,
    RECENT_COVERS_ALL,
    NO_TURN_BOUNDARY,
    ONLY_CHECKPOINTS,
    NO_GROUP_BOUNDARY,
    NO_WINDOW,
    NOT_SMALLER,
    NOT_APPLIED,
    SUMMARY_FAILED,
    ENGINE_FAILED,
)
#: Each skip reason in words (what a person reading a step table is told).
SKIP_REASON_MEANINGS = {
    BELOW_THRESHOLD: "the estimate was not above max_tokens, so the engine did not try",
    RECENT_COVERS_ALL: "the threshold was crossed, but the whole dialogue fits in keep_recent_tokens: nothing is old "
    "enough to summarize",
    NO_TURN_BOUNDARY: "the threshold was crossed, but the cut walked back to the start of the current user turn "
    "and found nothing older to summarize: the step was sent as it was",
    ONLY_CHECKPOINTS: "the threshold was crossed, but everything older than the cut was already a checkpoint",
    NO_GROUP_BOUNDARY: "the threshold was crossed, but no cut between complete tool groups was found",
    NO_WINDOW: "the threshold was crossed, but the engine's own window rule found nothing to summarize",
    NOT_SMALLER: "a summary was made but was not smaller than what it would replace, so the engine discarded it "
    "(it tries again at the next step)",
    NOT_APPLIED: "the engine found a window but made no checkpoint and changed nothing",
    SUMMARY_FAILED: "the summary model failed; the step was sent without a compaction",
    ENGINE_FAILED: "the engine raised during its pass; the step was sent without a compaction",
}
#: Reasons that mean the engine found no window at all (no summary was asked for).
NO_WINDOW_REASONS = (RECENT_COVERS_ALL, NO_TURN_BOUNDARY, ONLY_CHECKPOINTS, NO_GROUP_BOUNDARY, NO_WINDOW)
#: Reasons that mean something failed: never a result, never averaged into a metric.
FAILURE_REASONS = (SUMMARY_FAILED, ENGINE_FAILED)

# --- columns ------------------------------------------------------------------------------------

STEP_COLUMNS = [
    "conversation_id",
    "turn",
    "step",
    "turn_step",
    "n_recorded",
    "n_messages",
    "estimate",
    "estimator_tokens",
    "estimate_source",
    "max_tokens",
    "keep_recent_tokens",
    "triggered",
    "trigger",
    "skip_reason",
    "older_messages",
    "older_tokens",
    "recent_messages",
    "recent_tokens",
    "cutoff_index",
    "compaction_id",
    "summary_tokens",
    "applied",
    "context_tokens_after",
    "over_budget_after",
    "checkpoint_id",
    "kept_from",
    "responded",
    "output_tokens",
    "zett_agent_version",
]
COMPACTION_COLUMNS = [
    "compaction_id",
    "conversation_id",
    "step",
    "turn",
    "trigger",
    "span_start",
    "span_end",
    "n_recorded",
    "older_messages",
    "older_tokens",
    "recent_messages",
    "recent_tokens",
    "summary_tokens",
    "compression_ratio",
    "applied",
    "skip_reason",
    "summary_text",
    "summarizer",
    "latency_s",
    "cache_hit",
    "summary_input_tokens",
    "summary_output_tokens",
    "error",
    "error_kind",
]
#: The short view of a trace (what ``Trace._repr_html_`` and ``zett-lab replay`` print).
STEP_SUMMARY_COLUMNS = [
    "step",
    "turn",
    "n_recorded",
    "estimate",
    "estimate_source",
    "triggered",
    "skip_reason",
    "applied",
    "context_tokens_after",
    "over_budget_after",
]
#: The step table with the decision detail (what the Explorer widget shows): the short view plus where the window
#: was cut, the compaction attempt and the checkpoint it made.
STEP_DETAIL_COLUMNS = [
    "step",
    "turn",
    "n_recorded",
    "estimate",
    "estimate_source",
    "triggered",
    "skip_reason",
    "cutoff_index",
    "compaction_id",
    "summary_tokens",
    "applied",
    "context_tokens_after",
    "over_budget_after",
    "checkpoint_id",
    "kept_from",
]
COMPACTION_SUMMARY_COLUMNS = [
    "compaction_id",
    "step",
    "turn",
    "trigger",
    "span_start",
    "span_end",
    "older_tokens",
    "summary_tokens",
    "compression_ratio",
    "applied",
    "skip_reason",
    "error_kind",
]
#: Added to the step table of a live trace: the request, the provider's real usage of the step, the model
#: call's latency and the raw-log sequence of the reply when a session storage gave it one.
LIVE_STEP_COLUMNS = [
    "session_id",
    "request_id",
    "usage_input_tokens",
    "usage_output_tokens",
    "model_latency_s",
    "sequence",
]
#: Added to the compaction table of a live trace (``compacted_through_sequence``: the storage's snapshot boundary).
LIVE_COMPACTION_COLUMNS = ["session_id", "request_id", "compacted_through_sequence"]
#: Added to the compaction table of a replay written through zett-agent's storage (``store=``).
STORED_COLUMNS = ["snapshot_version", "compacted_through_sequence"]

INTEGER_COLUMNS = {
    "turn",
    "step",
    "turn_step",
    "n_recorded",
    "n_messages",
    "estimate",
    "estimator_tokens",
    "max_tokens",
    "keep_recent_tokens",
    "older_messages",
    "older_tokens",
    "recent_messages",
    "recent_tokens",
    "cutoff_index",
    "compaction_id",
    "summary_tokens",
    "context_tokens_after",
    "checkpoint_id",
    "kept_from",
    "output_tokens",
    "span_start",
    "span_end",
    "summary_input_tokens",
    "summary_output_tokens",
    "snapshot_version",
    "compacted_through_sequence",
    "usage_input_tokens",
    "usage_output_tokens",
    "sequence",
}
BOOLEAN_COLUMNS = {"triggered", "applied", "over_budget_after", "responded", "cache_hit"}
FLOAT_COLUMNS = {"compression_ratio", "latency_s", "model_latency_s"}

Window = tuple[list[SystemMessage], list[AnyMessage], list[AnyMessage]]


@dataclass(slots=True)
class PassRecord:
    """What one compaction pass saw and decided, filled in as the engine runs."""

    trigger: str | None
    n_recorded: int
    n_messages: int = 0
    estimate: int | None = None
    estimator_tokens: int | None = None
    estimate_source: str | None = None
    window: Window | None = None
    window_checked: bool = False
    window_skip: str | None = None
    summary_call: dict[str, Any] | None = None
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


def error_kind(error: BaseException, call: dict[str, Any]) -> str:
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


def summary_call_columns(call: dict[str, Any], error: BaseException | None) -> dict[str, Any]:
    """The compaction columns a summary call fills: its cost, latency, cache use and failure."""
    return {
        "latency_s": call.get("latency_s"),
        "cache_hit": call.get("cache_hit"),
        "summary_input_tokens": call.get("input_tokens"),
        "summary_output_tokens": call.get("output_tokens"),
        "error": f"{type(error).__name__}: {error}" if error is not None else None,
        "error_kind": error_kind(error, call) if error is not None else None,
    }


@dataclass
class Recording:
    """The trace of one conversation (or live session) being filled in, row by row.

    Replays keep every row in memory; a live recording writes each row out as it is made
    (see :mod:`zett_lab.replay.live`) and keeps only the counters.
    """

    conversation_id: str
    counter: TokenCounter
    max_tokens: int
    keep_recent_tokens: int
    summarizer_identity: str
    span_start: int = 0
    turn: int = 0
    turn_step: int = 0
    steps: int = 0
    compactions: int = 0
    checkpoint_id: int | None = None
    step_rows: list[dict[str, Any]] = field(default_factory=list)
    compaction_rows: list[dict[str, Any]] = field(default_factory=list)
    engine_events: list[dict[str, Any]] = field(default_factory=list)
    #: Replays keep every row; a live recording only writes them out (``write(kind, row)``).
    keep_rows: bool = True
    write: Callable[[str, dict[str, Any]], None] | None = None

    def add_step(self, row: dict[str, Any]) -> None:
        """Count a finished step row, then keep it and/or write it out."""
        self.steps += 1
        self.turn_step += 1
        if self.keep_rows:
            self.step_rows.append(row)
        if self.write is not None:
            self.write("step", row)

    def add_compaction(self, row: dict[str, Any]) -> None:
        """Keep and/or write out a finished compaction row."""
        if self.keep_rows:
            self.compaction_rows.append(row)
        if self.write is not None:
            self.write("compaction", row)

    def finish_pass(self, state: PassRecord | None, step: int, **extra: Any) -> dict[str, Any] | None:
        """The compaction row of a pass that attempted (or was asked for) a summary; None otherwise."""
        if state is None or not state.attempted:
            return None
        row = {**self.compaction_row(state, step), **extra}
        self.compactions += 1
        if state.applied:
            self.checkpoint_id = row["compaction_id"]
        self.add_compaction(row)
        return row

    def compaction_row(self, state: PassRecord, step: int) -> dict[str, Any]:
        counter = self.counter
        window = state.window
        older, recent = (window[1], window[2]) if window else ([], [])
        older_tokens = counter(older) if window else None
        summary_tokens = counter([state.checkpoint]) if state.checkpoint is not None else None
        call = state.summary_call or {}
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
        compaction: dict[str, Any] | None,
        sent: Sequence[AnyMessage],
        reply: AssistantMessage | None,
    ) -> dict[str, Any]:
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
