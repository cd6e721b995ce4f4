"""Conversation-level results of one trace: decay of kept anchors across applied compactions, and the
one-row conversation summary the catalogue's metrics pool from the per-compaction, probe and decay frames."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from . import catalogue
from .attempt import SummaryHolds
from .catalogue import TraceTables, ratio
from .lookup import TextIndex
from .message_index import ConversationIndex


def decay_rows(
    chain: list[tuple[int, SummaryHolds, tuple[int, int]]],
    index: ConversationIndex,
    summary_index: Callable[[int], TextIndex | None],
    base: Mapping[str, object],
) -> list[dict[str, object]]:
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
    earlier = np.zeros(0, dtype=np.int64)  # kept[0] ... kept[j - 1] one after another
    for j, (later, holds, (tail_start, tail_end)) in enumerate(chain):
        if j == 0:
            continue
        # every earlier compaction i against this one at once: its kept anchors are a segment of ``earlier``
        earlier = np.concatenate([earlier, kept[j - 1]])
        segment = np.repeat(np.arange(j), [len(ids) for ids in kept[:j]])
        state[holds.span_ids] = holds.in_summary
        later_index = summary_index(later)
        known = state[earlier]
        present = known == 1
        for position in np.flatnonzero(known < 0).tolist():
            key = arrays.keys[earlier[position]]
            present[position] = later_index.contains(key, index.needles) if later_index is not None else False
        in_tail, _ = arrays.first_in(arrays.occurrences, earlier[~present], tail_start, tail_end)
        held = np.bincount(segment[present], minlength=j)
        in_view = held + np.bincount(segment[~present][in_tail >= 0], minlength=j)
        for i in range(j):
            counts[i, j] = int(held[i]), int(in_view[i])
        state[holds.span_ids] = -1
    rows: list[dict[str, object]] = []
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


def conversation_row(
    base: Mapping[str, object],
    max_tokens: int | None,
    keep_recent: int | None,
    n_messages: int,
    tables: TraceTables,
) -> dict[str, object]:
    """The trace's row of ``losses.conversation``: its settings and counts, then every conversation-level metric of
    the catalogue, each pooling the trace's measured tables as its module says."""
    compactions = tables.compactions
    row: dict[str, object] = {
        **base,
        "max_tokens": max_tokens,
        "keep_recent_tokens": keep_recent,
        "messages": n_messages,
        "steps": len(tables.steps),
        "compactions": len(tables.applied),
        "attempts": int((compactions["status"] != "no window").sum()) if len(compactions) else 0,
        "probes": tables.n_probes,
    }
    for entry in catalogue.computed("conversation"):
        row.update(entry.at_conversation(tables))
    return row
