"""The metric catalogue: one entry per metric, read by everything that shows, ranks or compares metrics.

Each :class:`Metric` says which column it is, at which levels it appears (a row per compaction
attempt, per conversation replay, per sweep cell), which direction is better, the label a person
reads, and its definition (DESIGN.md §4). Adding a metric is one computation plus one entry here:
sweeps, comparisons, plots, widgets and the report pick it up from this table.

Example::

    >>> from zett_lab.measure.catalogue import metric, higher_is_better
    >>> metric("needed_anchor_recall").label
    'Needed-anchor recall'
    >>> higher_is_better("lost_but_needed")
    False
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import SettingError
from ..load.anchors import ANCHOR_TYPES

Level = Literal["compaction", "conversation", "cell"]
Direction = Literal["higher", "lower"]


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric: its column name, where it appears, which way is better, and what it means."""

    name: str
    levels: tuple[Level, ...]
    direction: Direction
    label: str
    definition: str
    #: ``"loss"`` metrics say what a summary kept; ``"budget"`` and ``"cost"`` what a setting spent.
    kind: Literal["loss", "budget", "cost"] = "loss"

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"


_BOTH: tuple[Level, ...] = ("compaction", "conversation", "cell")
_RUN: tuple[Level, ...] = ("conversation", "cell")

METRICS: tuple[Metric, ...] = (
    Metric(
        "needed_anchor_recall",
        _BOTH,
        "higher",
        "Needed-anchor recall",
        "Of the span's anchors the user or the agent uses again later (in its text, tool-call arguments or "
        "commands, not merely a tool result) and that the kept tail no longer shows, the share the summary keeps, "
        "weighted by how rare each is in the conversation: NAR_k = Σ rarity(N_k ∩ Σ_k) / Σ rarity(N_k) "
        "(pooled over applied compactions per conversation).",
    ),
    Metric(
        "anchor_retention",
        _BOTH,
        "higher",
        "Anchor retention",
        "Share of the span's exact items (paths, identifiers, errors, commands, ...) present in the summary.",
    ),
    Metric(
        "instruction_survival",
        _BOTH,
        "higher",
        "Instruction survival",
        "Share of the span's user constraints (always/never/must/don't sentences) visible in summary or tail.",
    ),
    Metric(
        "probe_presence",
        _BOTH,
        "higher",
        "Probe presence",
        "Share of gold probes covered by the span whose answer is in the context the next step sees.",
    ),
    Metric(
        "compression_ratio",
        _BOTH,
        "higher",
        "Compression ratio",
        "CR_k = 1 - tok(summary)/tok(span), against the raw span (mean over applied compactions).",
    ),
    Metric(
        "context_reduction",
        _BOTH,
        "higher",
        "Context reduction",
        "1 - (tok(summary) + tok(tail)) / tok(before): how much smaller the context became.",
    ),
    Metric(
        "engine_compression_ratio",
        ("compaction",),
        "higher",
        "Engine compression ratio",
        "1 - summary_tokens/older_tokens: what the engine's not-smaller check compares.",
    ),
    *(
        Metric(
            f"retention_{anchor_type}",
            ("compaction",),
            "higher",
            f"Retention of {anchor_type} anchors",
            f"Anchor retention over {anchor_type} anchors only.",
        )
        for anchor_type in ANCHOR_TYPES
    ),
    Metric(
        "lost_but_needed",
        _BOTH,
        "lower",
        "Lost but needed",
        "Anchors used again later that the context no longer shows: |N_k \\ Σ_k| (summed per conversation).",
    ),
    Metric(
        "superseded_rate",
        _BOTH,
        "lower",
        "Superseded-only rate",
        "Of the span's items whose value changed within the span (a setting, port, version, moved path, renamed "
        "constant, reversed instruction, a test that failed then passed), the share whose summary carries only a "
        "superseded value: an error, worse than dropping it (pooled over applied compactions per conversation).",
    ),
    Metric(
        "superseded_only",
        _BOTH,
        "lower",
        "Superseded values kept",
        "Items of the span whose summary carries only a superseded value (summed per conversation).",
    ),
    Metric(
        "superseded_probe_rate",
        _RUN,
        "lower",
        "Update probes answered with the old value",
        "Share of gold update probes covered by an applied compaction whose next step's context shows only the "
        "superseded answer.",
    ),
    Metric(
        "refetch_calls",
        _BOTH,
        "lower",
        "Re-fetch calls",
        "Later tool calls whose arguments mention an anchor of the span that is in neither tail nor summary.",
    ),
    Metric(
        "decay_survival_1",
        _RUN,
        "higher",
        "Survival to the next summary",
        "Mean share of anchors kept at an applied compaction still present in the next applied summary.",
    ),
    Metric(
        "final_survival",
        _RUN,
        "higher",
        "Survival to the last summary",
        "Share of anchors kept at the first applied compaction still present in the last applied summary.",
    ),
    Metric(
        "steps_over_budget",
        _RUN,
        "lower",
        "Steps over budget",
        "Model steps whose context sent was still above max_tokens.",
        "budget",
    ),
    Metric(
        "steps_no_boundary",
        _RUN,
        "lower",
        "Steps with no whole-turn boundary",
        "Steps over the threshold where the engine found no whole-turn boundary to cut at.",
        "budget",
    ),
    Metric(
        "steps_only_checkpoints",
        _RUN,
        "lower",
        "Steps with only earlier checkpoints",
        "Steps over the threshold where only earlier checkpoints could be summarized.",
        "budget",
    ),
    Metric(
        "peak_context_tokens",
        ("conversation",),
        "lower",
        "Peak context (tokens)",
        "The largest context any model step was sent.",
        "budget",
    ),
    Metric(
        "peak_context",
        ("cell",),
        "lower",
        "Peak context (tokens)",
        "The largest context any model step was sent.",
        "budget",
    ),
    Metric(
        "rejected_not_smaller",
        _RUN,
        "lower",
        "Summaries not smaller",
        "Attempts the engine discarded because the checkpoint was not smaller than the span.",
        "budget",
    ),
    Metric(
        "failed",
        _RUN,
        "lower",
        "Failed summaries",
        "Summary attempts that produced no usable summary (never counted as a result).",
        "budget",
    ),
    Metric(
        "primary_input_tokens",
        ("conversation",),
        "lower",
        "Primary input tokens",
        "Sum over steps of the context each step sent to the primary model.",
        "cost",
    ),
    Metric(
        "total_input_tokens",
        ("cell",),
        "lower",
        "Total input tokens",
        "Primary input tokens plus summary-call input tokens: the tokens a setting costs.",
        "cost",
    ),
    Metric(
        "summary_input_tokens",
        ("compaction", *_RUN),
        "lower",
        "Summary input tokens",
        "Input tokens the summary model reported.",
        "cost",
    ),
    Metric(
        "summary_output_tokens",
        ("compaction", *_RUN),
        "lower",
        "Summary output tokens",
        "Output tokens the summary model reported.",
        "cost",
    ),
    Metric(
        "cache_breaks",
        _RUN,
        "lower",
        "Prompt-cache breaks",
        "Steps whose prompt cache was invalidated by a compaction.",
        "cost",
    ),
    Metric(
        "primary_cost_usd",
        _RUN,
        "lower",
        "Primary cost (USD)",
        "List-price cost of the primary model's input and output over all steps.",
        "cost",
    ),
    Metric("summary_cost_usd", _RUN, "lower", "Summary cost (USD)", "List-price cost of the summary calls.", "cost"),
    Metric("total_cost_usd", _RUN, "lower", "Total cost (USD)", "Primary plus summary cost.", "cost"),
    Metric("latency_s", ("compaction",), "lower", "Summary latency (s)", "Wall time of the summary call.", "cost"),
)

CATALOGUE: dict[str, Metric] = {m.name: m for m in METRICS}

#: The loss metrics a comparison or a report shows by default, most telling first.
HEADLINE_METRICS: tuple[str, ...] = (
    "needed_anchor_recall",
    "anchor_retention",
    "instruction_survival",
    "probe_presence",
    "compression_ratio",
    "context_reduction",
    "superseded_rate",
)


def metric(name: str) -> Metric:
    """The catalogue entry of a metric; a :class:`SettingError` naming the known ones otherwise."""
    try:
        return CATALOGUE[name]
    except KeyError:
        known = ", ".join(sorted(CATALOGUE))
        raise SettingError(f"{name!r} is not a metric of the catalogue; known metrics: {known}") from None


def higher_is_better(name: str) -> bool:
    """Whether a larger value of the metric is better (from its catalogue entry)."""
    return metric(name).higher_is_better


def label(name: str) -> str:
    """The label a person reads for a metric column; the column name itself for anything not in the catalogue."""
    entry = CATALOGUE.get(name)
    return entry.label if entry else name


def label_with_direction(name: str) -> str:
    """A metric's label and which way is better, e.g. ``Lost but needed (lower is better)``; a column outside the
    catalogue: its name."""
    entry = CATALOGUE.get(name)
    if entry is None:
        return name
    return f"{entry.label} ({'higher' if entry.higher_is_better else 'lower'} is better)"


def metrics(level: Level | None = None, kind: str | None = None) -> list[Metric]:
    """Catalogue entries, optionally those at one level or of one kind, in catalogue order."""
    return [m for m in METRICS if (level is None or level in m.levels) and (kind is None or m.kind == kind)]
