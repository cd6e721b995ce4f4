"""The report's "lost but needed later" list (:func:`zett_lab.report.lost.lost_but_needed_items`)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
from zett_agent.messages import AssistantMessage, UserMessage

from zett_lab import Conversation
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
