"""The skip-reason explanation agrees with the engine's own window selection on every case."""

from __future__ import annotations

import random

from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.messages import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from zett_lab.replay.explain import (
    NO_TURN_BOUNDARY,
    ONLY_CHECKPOINTS,
    RECENT_COVERS_ALL,
    window_skip_reason,
)
from zett_lab.tokens import MemoizingCounter


def random_context(rng: random.Random) -> list:
    messages = [SystemMessage(content="sys")] if rng.random() < 0.7 else []
    if rng.random() < 0.4:
        messages.append(CompactedMessage(content="checkpoint " * rng.randint(1, 40)))
    for turn in range(rng.randint(0, 4)):
        opener = (
            AgentMessage(content="internal " * rng.randint(1, 5))
            if rng.random() < 0.15
            else UserMessage(content="ask " * rng.randint(1, 60))
        )
        messages.append(opener)
        for call in range(rng.randint(0, 4)):
            call_id = f"c{turn}-{call}"
            messages.append(AssistantMessage(tool_calls=(ToolCall(id=call_id, name="bash", arguments={"n": call}),)))
            messages.append(ToolMessage(tool_call_id=call_id, name="bash", content="out " * rng.randint(1, 120)))
        if rng.random() < 0.8:
            messages.append(AssistantMessage(content="answer " * rng.randint(1, 30)))
    return messages


def test_explanation_matches_the_engine_on_random_contexts():
    rng = random.Random(7)
    counter = MemoizingCounter()
    seen = set()
    for _ in range(3000):
        messages = random_context(rng)
        keep = rng.choice([1, 5, 20, 60, 150, 400, 2000])
        window = CompactionExtension._select_compaction_window(messages, keep_recent_tokens=keep, count_tokens=counter)
        reason = window_skip_reason(messages, keep_recent_tokens=keep, count_tokens=counter)
        assert (window is None) == (reason is not None), (keep, messages)
        seen.add(reason)
    assert seen == {None, RECENT_COVERS_ALL, NO_TURN_BOUNDARY, ONLY_CHECKPOINTS}
