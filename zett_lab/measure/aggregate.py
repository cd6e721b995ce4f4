"""Conversation-level results of one trace: decay of kept anchors across applied compactions, and the
one-row conversation summary aggregated from the per-compaction, probe and decay frames."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from ..replay.recorder import NO_TURN_BOUNDARY, NOT_SMALLER, ONLY_CHECKPOINTS
from .columns import ratio
from .compaction_metrics import SummaryHolds
from .lookup import TextIndex
from .message_index import ConversationIndex


def decay_rows(
    chain: list[tuple[int, SummaryHolds, tuple[int, int]]],
    index: ConversationIndex,
    summary_index: Callable[[int], TextIndex | None],
    base: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per pair of applied compactions k < k+j: how many anchors kept at k are still in Σ_{k+j}
    (and in Σ_{k+j} ∪ T_{k+j}). ``chain`` holds (compaction_id, what its summary holds, tail range) per
    applied one.

    What Σ_{k+j} holds is read from its own measurement where its span has the anchor (spans are
    cumulative, so nearly always), else asked of the summary; a trace with hundreds of compactions
    has tens of thousands of pairs, so each pair is counted over arrays of key ids.
    """
    arrays = index.arrays
    kept = [holds.span_ids[holds.in_summary] for _, holds, _ in chain]
    # per key id, what the later summary holds: -1 not in its span (ask the summary), 0 no, 1 yes
    state = np.full(len(arrays.keys), -1, dtype=np.int8)
    counts: dict[tuple[int, int], tuple[int, int]] = {}
    for j, (later, holds, (tail_start, tail_end)) in enumerate(chain):
        if j == 0:
            continue
        state[holds.span_ids] = holds.in_summary
        later_index = summary_index(later)
        for i in range(j):
            ids = kept[i]
            known = state[ids]
            present = known == 1
            for position in np.flatnonzero(known < 0).tolist():
                key = arrays.keys[ids[position]]
                present[position] = later_index.contains(key, index.needles) if later_index is not None else False
            in_tail, _ = arrays.first_in(arrays.occurrences, ids[~present], tail_start, tail_end)
            counts[i, j] = int(present.sum()), int(present.sum()) + int((in_tail >= 0).sum())
        state[holds.span_ids] = -1
    rows = []
    for i, (origin, _, _) in enumerate(chain):
        for j in range(i + 1, len(chain)):
            in_summary, in_context = counts[i, j]
            rows.append(
                {
                    **base,
                    "from_compaction": origin,
                    "to_compaction": chain[j][0],
                    "j": j - i,
                    "kept": len(kept[i]),
                    "still_in_summary": in_summary,
                    "survival": ratio(in_summary, len(kept[i])),
                    "still_in_context": in_context,
                    "context_survival": ratio(in_context, len(kept[i])),
                }
            )
    return rows


def _superseded_probe_rate(probes: pd.DataFrame) -> float:
    """Share of update-probe rows whose context shows the superseded answer and not the current one."""
    updates = probes[probes["type"] == "update"] if len(probes) else probes
    if not len(updates):
        return math.nan
    stale = updates["superseded_in_context"].fillna(False).astype(bool)
    wrong = stale & ~updates["in_context"].fillna(False).astype(bool)
    return float(wrong.mean())


def _pooled_float(rows: pd.DataFrame, numerator: str, denominator: str) -> float:
    """Σ numerator / Σ denominator over rows (NaN with no rows or a zero denominator)."""
    if not len(rows):
        return math.nan
    total = float(pd.to_numeric(rows[denominator], errors="coerce").fillna(0).sum())
    return float(pd.to_numeric(rows[numerator], errors="coerce").fillna(0).sum()) / total if total else math.nan


def _sum_int(series: pd.Series) -> int:
    return int(pd.to_numeric(series, errors="coerce").fillna(0).sum()) if len(series) else 0


def conversation_row(
    base: dict[str, Any],
    max_tokens: Any,
    keep_recent: Any,
    n_messages: int,
    steps: pd.DataFrame,
    compactions: pd.DataFrame,
    probes: pd.DataFrame,
    decay: pd.DataFrame,
    n_probes: int,
) -> dict[str, Any]:
    applied = compactions[compactions["status"] == "applied"] if len(compactions) else compactions
    reasons = steps["skip_reason"] if len(steps) and "skip_reason" in steps else pd.Series(dtype=object)

    def mean(column: str) -> float:
        if not len(applied):
            return math.nan
        values = pd.to_numeric(applied[column], errors="coerce").dropna()
        return float(values.mean()) if len(values) else math.nan

    def pooled(numerator: str, denominator: str) -> float:
        if not len(applied):
            return math.nan
        return ratio(_sum_int(applied[numerator]), _sum_int(applied[denominator]))

    applied_probes = probes[probes["applied"].fillna(False).astype(bool)] if len(probes) else probes
    first_decay = decay[decay["j"] == 1] if len(decay) else decay
    final_survival = math.nan
    if len(decay):
        first = decay["from_compaction"].min()
        last = decay["to_compaction"].max()
        pick = decay[(decay["from_compaction"] == first) & (decay["to_compaction"] == last)]
        if len(pick):
            final_survival = float(pick["survival"].iloc[0])
    over_budget = steps["over_budget_after"] if len(steps) and "over_budget_after" in steps else pd.Series(dtype=bool)
    return {
        **base,
        "max_tokens": max_tokens,
        "keep_recent_tokens": keep_recent,
        "messages": n_messages,
        "steps": len(steps),
        "compactions": len(applied),
        "attempts": int((compactions["status"] != "no window").sum()) if len(compactions) else 0,
        "rejected_not_smaller": int((compactions["status"] == NOT_SMALLER).sum()) if len(compactions) else 0,
        "failed": int((compactions["status"] == "failed").sum()) if len(compactions) else 0,
        "steps_over_budget": int(over_budget.fillna(False).astype(bool).sum()),
        "steps_no_boundary": int((reasons == NO_TURN_BOUNDARY).sum()),
        "steps_only_checkpoints": int((reasons == ONLY_CHECKPOINTS).sum()),
        "peak_context_tokens": int(steps["context_tokens_after"].max()) if len(steps) else 0,
        "primary_input_tokens": _sum_int(steps["context_tokens_after"]) if len(steps) else 0,
        "summary_input_tokens": _sum_int(compactions["summary_input_tokens"]) if len(compactions) else 0,
        "summary_output_tokens": _sum_int(compactions["summary_output_tokens"]) if len(compactions) else 0,
        "compression_ratio": mean("compression_ratio"),
        "context_reduction": mean("context_reduction"),
        "anchor_retention": mean("anchor_retention"),
        "needed_anchor_recall": _pooled_float(applied, "needed_retained_weight", "needed_weight"),
        "instruction_survival": pooled("constraints_visible", "constraints"),
        "lost_but_needed": _sum_int(applied["lost_but_needed"]) if len(applied) else 0,
        "refetch_calls": _sum_int(applied["refetch_calls"]) if len(applied) else 0,
        "probes": n_probes,
        "probe_presence": float(applied_probes["in_context"].astype(float).mean()) if len(applied_probes) else math.nan,
        "superseded_updates": _sum_int(applied["superseded_updates"]) if len(applied) else 0,
        "superseded_only": _sum_int(applied["superseded_only"]) if len(applied) else 0,
        "superseded_rate": pooled("superseded_only", "superseded_updates"),
        "superseded_probe_rate": _superseded_probe_rate(applied_probes),
        "decay_survival_1": float(first_decay["survival"].mean()) if len(first_decay) else math.nan,
        "final_survival": final_survival,
    }
