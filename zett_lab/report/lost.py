"""The "lost but needed later" list of a report: ranked anchors with the span and summary that lost them.

One item per (conversation, anchor) at the recommended setting, listing every summarizer that
lost it there, each with every applied compaction that lost it (the needed-anchor losses metric counts
each) and the first of them in full (step, span, summary text, where it was needed again after it).
Ranked: re-fetched by a later tool call first, then lost by more summarizers, then by type
(constraints, errors, commands, paths, URLs, SHAs, decisions, identifiers, numbers), then by how
soon the conversation needed it again; conversations take turns, so one long conversation
cannot fill the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..load.conversation import Conversation
from ..load.text import message_text
from ..measure import Losses
from ..records import plain
from ..replay.trace import Trace
from ..study.recommendation import RecommendationRecord
from .replays import cell_entries, trace_index
from .tables import DIGITS

#: Anchor types in the order the list prefers them (most harmful first).
TYPE_PRIORITY = ("constraint", "error", "command", "path", "url", "sha", "decision", "identifier", "number")

#: Characters of a summary shown beside each lost-but-needed item (the start of the summary).
SUMMARY_CHARS = 800


def excerpt(text: str, needle: str | None = None, width: int = 90) -> str:
    """A short piece of ``text`` around ``needle`` (case-insensitive), whitespace collapsed."""
    text = str(text or "")
    flat = " ".join(text.split()) if needle else _flat_start(text, 2 * width + 1)
    if not flat:
        return ""
    if needle:
        where = flat.lower().find(" ".join(str(needle).split()).lower())
        if where >= 0:
            start = max(0, where - width)
            end = min(len(flat), where + len(needle) + width)
            return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
    return flat[: 2 * width] + ("…" if len(flat) > 2 * width else "")


def _flat_start(text: str, chars: int) -> str:
    """The first ``chars`` characters (or fewer, when that is all) of ``" ".join(text.split())``, collapsing only the
    start of ``text``: an excerpt of a summary of hundreds of thousands of characters needs its first line."""
    size = 2 * chars
    while size < len(text):
        words = text[:size].split()
        if len(words) > 1:
            known = " ".join(words[:-1])  # the last word may go on past the cut
            if len(known) >= chars:
                return known[:chars]
        size *= 2
    return " ".join(text.split())[:chars]


def lost_but_needed_items(
    entries: Sequence[tuple[str, Trace]],
    recommendation: RecommendationRecord | None,
    summarizers: Sequence[str],
    measured: Callable[[Trace], Losses],
    limit: int,
) -> list[dict[str, object]]:
    """At most ``limit`` ranked lost-but-needed anchors (see the module docstring).

    ``entries`` are ``(summarizer label, trace)``; only those at the recommended setting count
    (all of them when there is no recommendation). ``measured`` gives a trace's losses.
    """
    if limit <= 0:
        return []
    if recommendation is not None:
        entries = cell_entries(entries, recommendation["max_tokens"], recommendation["keep_recent_tokens"]) or list(
            entries
        )
    lost = _lost_rows(entries, measured)
    if lost is None:
        return []
    traces = trace_index(entries)
    parts = _ranked(lost, summarizers, limit)
    summaries = _summaries(parts, traces)
    return [_item(part, traces, summaries) for part in parts]


#: (conversation, summarizer label, max_tokens, keep_recent_tokens) of a replay, and a compaction_id of it.
_SummaryKey = tuple[tuple[str, str, int, int], int]


def _replay_of(row: Mapping[Any, Any]) -> tuple[str, str, int, int]:
    return (row["conversation_id"], row["summarizer"], int(row["max_tokens"]), int(row["keep_recent_tokens"]))


def _summaries(
    parts: Sequence[pd.DataFrame], traces: Mapping[tuple[str, str, int, int], Trace]
) -> dict[_SummaryKey, str | None]:
    """The summary of the first compaction each summarizer lost a listed item in, each replay's table read once (a sweep
    keeps few replays' tables in memory: asked row by row, the same tables were read again and again)."""
    wanted: dict[tuple[str, str, int, int], set[int]] = {}
    for part in parts:
        for row in _first_per_summarizer(part)[
            ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "compaction_id"]
        ].to_dict("records"):
            wanted.setdefault(_replay_of(row), set()).add(int(row["compaction_id"]))
    out: dict[_SummaryKey, str | None] = {}
    for replay, ids in wanted.items():
        trace = traces.get(replay)
        if trace is None:
            continue
        table = trace.compactions
        for cid, text in zip(table["compaction_id"], table["summary_text"], strict=True):
            if int(cid) in ids:
                out.setdefault((replay, int(cid)), text)
    return out


def dropped_constraint_items(
    entries: Sequence[tuple[str, Trace]],
    recommendation: RecommendationRecord | None,
    measured: Callable[[Trace], Losses],
    limit: int,
) -> list[dict[str, object]]:
    """At most ``limit`` rules a summary dropped (:meth:`~zett_lab.measure.losses.Losses.dropped_constraints`) at the
    recommended setting: one item per (conversation, rule) with the summarizers that dropped it, each with the
    first applied compaction that did; the rules dropped by more summarizers first, then in conversation order."""
    if limit <= 0:
        return []
    if recommendation is not None:
        entries = cell_entries(entries, recommendation["max_tokens"], recommendation["keep_recent_tokens"]) or list(
            entries
        )
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for label, trace in entries:
        dropped = measured(trace).dropped_constraints()
        for row in dropped.sort_values("compaction_id", kind="mergesort").to_dict("records"):
            item = items.setdefault(
                (row["conversation_id"], row["normalized"]),
                {
                    "conversation_id": row["conversation_id"],
                    "value": row["value"],
                    "message_index": plain(row["message_index"], DIGITS),
                    "dropped_by": [],
                },
            )
            if all(entry["summarizer"] != label for entry in item["dropped_by"]):
                item["dropped_by"].append({"summarizer": label, "compaction_id": plain(row["compaction_id"], DIGITS)})
    ranked = sorted(items.values(), key=lambda i: (-len(i["dropped_by"]), i["conversation_id"], i["message_index"]))
    return ranked[:limit]


def _lost_rows(entries: Sequence[tuple[str, Trace]], measured: Callable[[Trace], Losses]) -> pd.DataFrame | None:
    """Every lost-but-needed anchor of the entries, once per compaction that lost it, with that compaction."""
    frames = []
    for label, trace in entries:
        losses = measured(trace)
        lost = losses.lost_but_needed()
        if not len(lost):
            continue
        side = losses.compactions[["compaction_id", "step", "span_start", "span_end", "n_recorded"]]
        lost = lost.merge(side, on="compaction_id", how="left")
        lost["summarizer"] = label
        lost["max_tokens"] = trace.setting.max_tokens
        lost["keep_recent_tokens"] = trace.setting.keep_recent_tokens
        frames.append(lost)
    if not frames:
        return None
    return pd.concat(frames, ignore_index=True).sort_values(
        ["conversation_id", "type", "normalized", "summarizer", "step", "compaction_id"], kind="mergesort"
    )


def _ranked(lost: pd.DataFrame, summarizers: Sequence[str], limit: int) -> list[pd.DataFrame]:
    """The rows of each picked anchor (one frame per item), best first, conversations taking turns.

    Ranked per (conversation, type, anchor) with whole-table operations: on a long conversation
    there are thousands of lost anchors, and only ``limit`` of them are listed.
    """
    order = {name: i for i, name in enumerate(summarizers)}
    priority = {t: i for i, t in enumerate(TYPE_PRIORITY)}
    keys = ["conversation_id", "type", "normalized"]
    rows = lost.assign(
        _refetched=lost["refetched"].fillna(False).astype(bool),
        _distance=pd.to_numeric(lost["next_use_index"], errors="coerce")
        - pd.to_numeric(lost["n_recorded"], errors="coerce"),
    )
    groups = rows.groupby(keys, sort=True).agg(
        refetched=("_refetched", "any"), count=("summarizer", "nunique"), distance=("_distance", "min")
    )
    groups = groups.reset_index().assign(
        _not_refetched=lambda g: ~g["refetched"],
        _fewer=lambda g: -g["count"],
        _priority=lambda g: g["type"].map(lambda t: priority.get(str(t), len(priority))),
        _distance=lambda g: g["distance"].fillna(1e12),
    )
    groups = groups.sort_values(
        ["_not_refetched", "_fewer", "_priority", "_distance", "conversation_id", "normalized", "type"],
        kind="mergesort",
    )
    # Conversations take turns: the n-th best anchor of each conversation before any (n+1)-th,
    # conversations in the order their best anchor ranks.
    turn_of = {cid: n for n, cid in enumerate(dict.fromkeys(groups["conversation_id"]))}
    groups = groups.assign(
        _round=groups.groupby("conversation_id", sort=False).cumcount(),
        _turn=groups["conversation_id"].map(turn_of),
    ).sort_values(["_round", "_turn"], kind="mergesort")
    picked = groups.head(limit)
    chosen = list(picked[keys].itertuples(index=False, name=None))
    in_picked = pd.MultiIndex.from_frame(rows[keys]).isin(chosen)
    by_key = {key: part for key, part in rows[in_picked].groupby(keys, sort=False)}
    items = []
    for key in chosen:
        part = by_key[key].drop(columns=["_refetched", "_distance"])
        items.append(
            part.sort_values(
                ["step", "summarizer"], key=lambda c: c.map(order) if c.name == "summarizer" else c, kind="mergesort"
            )
        )
    return items


def _first_per_summarizer(part: pd.DataFrame) -> pd.DataFrame:
    """The first row (in step order, as :func:`_ranked` sorts them) of each summarizer in one item's rows."""
    return part.drop_duplicates(subset=["summarizer"], keep="first")


def _item(
    part: pd.DataFrame,
    traces: Mapping[tuple[str, str, int, int], Trace],
    summaries: Mapping[_SummaryKey, str | None],
) -> dict[str, Any]:
    """One listed anchor: where it was, each summarizer that lost it (every compaction that did; the first with
    its summary and where the anchor was needed again after it), the soonest of those uses, and how many
    compactions lost it in all (``losses``)."""
    first = part.iloc[0]
    conversation: Conversation | None = None
    lost_by = []
    losses = part.groupby("summarizer", sort=False)["compaction_id"].agg(list)
    for row in _first_per_summarizer(part).to_dict("records"):
        replay = _replay_of(row)
        trace = traces.get(replay)
        summary = None
        if trace is not None:
            conversation = trace.conversation
            summary = summaries.get((replay, int(row["compaction_id"])))
        lost_by.append(
            {
                "summarizer": row["summarizer"],
                "compaction_id": plain(row["compaction_id"], DIGITS),
                "compaction_ids": [plain(cid, DIGITS) for cid in losses[row["summarizer"]]],
                "step": plain(row.get("step"), DIGITS),
                "span_start": plain(row.get("span_start"), DIGITS),
                "span_end": plain(row.get("span_end"), DIGITS),
                "refetched": bool(row["refetched"]) if row["refetched"] is not None else False,
                "next_use_index": plain(row["next_use_index"], DIGITS),
                "summary_text": (summary or "")[:SUMMARY_CHARS],
                "summary_truncated": bool(summary and len(summary) > SUMMARY_CHARS),
            }
        )

    def text_at(index: Any) -> str:
        try:
            return message_text(conversation.messages[int(index)]) if conversation is not None else ""
        except (TypeError, ValueError, IndexError):
            return ""

    value = str(first["value"])
    # needed again: the soonest use after a compaction that lost it (each entry keeps its own: a use inside a
    # later compaction's span was not a use after that compaction); a lost-but-needed anchor always has one
    soonest = min(lost_by, key=lambda entry: int(entry["next_use_index"]))
    return {
        "conversation_id": str(first["conversation_id"]),
        "type": str(first["type"]),
        "value": value,
        "max_tokens": plain(first["max_tokens"], DIGITS),
        "keep_recent_tokens": plain(first["keep_recent_tokens"], DIGITS),
        "message_index": plain(first["message_index"], DIGITS),
        "source_excerpt": excerpt(text_at(first["message_index"]), value),
        "next_use_index": soonest["next_use_index"],
        "next_use_after": {"summarizer": soonest["summarizer"], "compaction_id": soonest["compaction_id"]},
        "next_use_excerpt": excerpt(text_at(soonest["next_use_index"]), value),
        "refetched": bool(part["refetched"].fillna(False).astype(bool).any()),
        "losses": len(part),
        "lost_by": lost_by,
    }
