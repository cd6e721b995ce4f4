"""The trace schema: the columns of a trace's tables and the reasons a step applied no compaction.

The one home of what every stage after replay reads about a trace (documented in
``docs/trace-schema.md``): replays and live agents fill these columns through
:class:`~zett_lab.replay.recorder.Recording`; measure and show read them from here.
"""

from __future__ import annotations

from typing import TypeAlias

from ..records import JSONValue

# --- skip reasons: why a step went on without an applied compaction ----------------------------

#: One row of a trace table (``Trace.steps``, ``Trace.compactions``) or one engine event as the recorder
#: fills it: column -> plain JSON value, so a live trace writes it as it is.
TraceRow: TypeAlias = "dict[str, JSONValue]"

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

#: Columns of a failure count (``failure_counts`` of a Trace, Sweep or Report): one row per distinct
#: cause, i.e. per failed thing (``what``: "summary call" or "sweep cell"), summarizer and kind of
#: error, with the first error's text (``cause``) and how often it happened (``count``).
FAILURE_COLUMNS = ["what", "summarizer", "kind", "cause", "count"]
