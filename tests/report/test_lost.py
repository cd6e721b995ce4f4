"""The report's "lost but needed later" list (:func:`zett_lab.report.lost.lost_but_needed_items`)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from zett_agent.messages import AssistantMessage, UserMessage

from zett_lab import Conversation
from zett_lab.formatting import numbered
from zett_lab.report.lost import lost_but_needed_items

ANCHOR = "src/orderflow/cache"


def replay_losing(label: str, conversation: Conversation, compactions: list[tuple[int, int, int]]):
    """A (label, trace) entry and its measured losses: ``ANCHOR`` (in message 1) lost by each compaction
    ``(compaction_id, span_end, next_use_index)``, every span from message 1, the tail ending two messages on."""
    trace = SimpleNamespace(
        conversation=conversation,
        setting=SimpleNamespace(max_tokens=1000, keep_recent_tokens=100),
        compactions=pd.DataFrame(
            {
                "compaction_id": [c for c, _, _ in compactions],
                "summary_text": [f"summary #{c}" for c, _, _ in compactions],
            }
        ),
    )
    lost = pd.DataFrame(
        {
            "conversation_id": conversation.id,
            "type": "path",
            "normalized": ANCHOR,
            "value": ANCHOR,
            "compaction_id": [c for c, _, _ in compactions],
            "message_index": 1,
            "next_use_index": pd.array([use for _, _, use in compactions], dtype="Int64"),
            "refetched": False,
        }
    )
    side = pd.DataFrame(
        {
            "compaction_id": [c for c, _, _ in compactions],
            "step": [10 * (c + 1) for c, _, _ in compactions],
            "span_start": 1,
            "span_end": [end for _, end, _ in compactions],
            "n_recorded": [end + 2 for _, end, _ in compactions],
        }
    )
    losses = SimpleNamespace(lost_but_needed=lambda: lost, compactions=side)
    return (label, trace), losses


def test_needed_again_is_the_first_use_after_the_compaction_that_lost_it() -> None:
    """One summarizer lost the path early (used again at 12), another only at a later compaction whose span
    covers message 12 (used again at 32): each lost-by entry says its own next use, never one inside its span."""
    conversation = Conversation(
        id="c",
        messages=[
            UserMessage(content=f"message {i}: {ANCHOR}") if i in (1, 12, 32) else AssistantMessage(content=f"m{i}")
            for i in range(40)
        ],
    )
    early, early_losses = replay_losing("extractive", conversation, [(1, 10, 12)])
    late, late_losses = replay_losing("truncate", conversation, [(5, 30, 32)])
    measured = {id(early[1]): early_losses, id(late[1]): late_losses}
    [item] = lost_but_needed_items([early, late], None, ["extractive", "truncate"], lambda t: measured[id(t)], 10)
    uses = {entry["summarizer"]: entry["next_use_index"] for entry in item["lost_by"]}
    assert uses == {"extractive": 12, "truncate": 32}
    for entry in item["lost_by"]:
        assert entry["next_use_index"] > entry["span_end"]
    assert item["next_use_index"] == 12
    assert item["next_use_after"] == {"summarizer": "extractive", "compaction_id": 1}
    assert item["next_use_excerpt"].startswith("message 12:")


def test_an_anchor_lost_at_every_compaction_is_one_item_naming_every_compaction() -> None:
    """The metric counts a loss at each compaction (truncate drops the same path at #0-#3: four losses); the list
    shows the anchor once, with all four compactions, and ranks by how many summarizers lost it, not how often."""
    conversation = Conversation(
        id="c",
        messages=[
            UserMessage(content=f"message {i}: {ANCHOR}") if i in (1, 45) else AssistantMessage(content=f"m{i}")
            for i in range(50)
        ],
    )
    often, often_losses = replay_losing("truncate", conversation, [(c, 10 * c + 5, 45) for c in range(4)])
    [item] = lost_but_needed_items([often], None, ["truncate"], lambda _: often_losses, 10)
    [entry] = item["lost_by"]
    assert entry["compaction_ids"] == [0, 1, 2, 3] and entry["compaction_id"] == 0 and entry["span_end"] == 5
    assert entry["summary_text"] == "summary #0"
    assert item["losses"] == 4 == int(often_losses.lost_but_needed()["compaction_id"].size)


def test_compaction_runs_are_written_as_ranges() -> None:
    assert numbered([0, 1, 2, 3, 4, 5, 6, 7]) == "#0–#7"
    assert numbered([6, 1, 3, 4, 5]) == "#1, #3–#6"
    assert numbered([2]) == "#2"
