""" "Needed later" that means needed: precision of lost-but-needed against hand labels on real logs.

``tests/data/needed_labels.json`` holds lost-but-needed items sampled from replays of the shared
real agent logs under the old definition (the anchor recurs anywhere after the compaction), each
labelled by reading the conversation: did the user or the agent actually use it later? The new
definition counts a reuse only in the user's or the agent's own later actions (text, tool-call
arguments, commands; not a tool result, not re-injected harness text) and weights items by rarity.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import zett_lab
from zett_lab.measure import measure
from zett_lab.replay.setting import TraceSettings
from zett_lab.replay.trace import Trace

LABELS = Path(__file__).resolve().parent / "data" / "needed_labels.json"


def _span_trace(conversation, spans) -> Trace:
    """One applied compaction per span, each with a summary holding no anchor: every span anchor is lost."""
    rows = [
        {
            "compaction_id": k,
            "conversation_id": conversation.id,
            "step": k,
            "turn": 0,
            "trigger": "auto",
            "span_start": start,
            "span_end": end,
            "n_recorded": n_recorded,
            "older_messages": end - start,
            "older_tokens": None,
            "recent_messages": n_recorded - end,
            "recent_tokens": None,
            "summary_tokens": 10,
            "applied": True,
            "skip_reason": None,
            "summary_text": "(summary)",
            "summarizer": "labels",
        }
        for k, (start, end, n_recorded) in enumerate(spans)
    ]
    return Trace.from_rows(
        conversation, [], rows, TraceSettings(setting=None, summarizer="labels", counter="o200k"), []
    )


@pytest.fixture(scope="module")
def judged(agent_logs):
    """Each labelled item with the old and the new definition's verdict and its rarity."""
    items = json.loads(LABELS.read_text(encoding="utf-8"))["items"]
    by_conversation = defaultdict(list)
    for item in items:
        by_conversation[(item["log"], item["conversation_id"])].append(item)
    out = []
    for (log, conversation_id), group in by_conversation.items():
        conversation = next(c for c in zett_lab.load_all(agent_logs / log) if c.id == conversation_id)
        spans = sorted({(i["span_start"], i["span_end"], i["n_recorded"]) for i in group})
        anchors = measure(_span_trace(conversation, spans)).anchors
        for item in group:
            k = spans.index((item["span_start"], item["span_end"], item["n_recorded"]))
            row = anchors[
                (anchors["compaction_id"] == k)
                & (anchors["type"] == item["anchor"]["type"])
                & (anchors["normalized"] == item["anchor"]["normalized"])
            ]
            assert len(row) == 1, item
            row = row.iloc[0]
            out.append(
                {
                    "label": item["needed"],
                    "old": bool(row["in_future"] and not row["in_tail"]),
                    "new": bool(row["needed_later"]),
                    "rarity": float(row["rarity"]),
                }
            )
    return out


def test_labels_cover_at_least_100_items_with_reasons():
    data = json.loads(LABELS.read_text(encoding="utf-8"))
    assert len(data["items"]) >= 100
    for item in data["items"]:
        assert item["reason"] and isinstance(item["needed"], bool)
        assert item["span_start"] <= item["anchor"]["message_index"] < item["span_end"] <= item["n_recorded"]


def test_every_labelled_item_was_lost_but_needed_under_the_old_definition(judged):
    assert all(item["old"] for item in judged)


def test_needed_means_used_later_precision_before_and_after(judged):
    labels = [item["label"] for item in judged]
    flagged = [item for item in judged if item["new"]]
    before = sum(labels) / len(labels)
    after = sum(item["label"] for item in flagged) / len(flagged)
    weighted = sum(item["rarity"] * item["label"] for item in flagged) / sum(item["rarity"] for item in flagged)
    recall = sum(item["label"] for item in flagged) / sum(labels)
    print(
        f"\nneeded precision: before {before:.3f} (n={len(labels)}), after {after:.3f} (n={len(flagged)}), "
        f"rarity-weighted {weighted:.3f}; labelled-needed items still flagged: {recall:.3f}"
    )
    assert after >= before + 0.2
    assert weighted >= after
    assert recall >= 0.95  # dropping noise must not drop what was really needed
