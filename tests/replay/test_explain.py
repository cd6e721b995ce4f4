"""The skip-reason explanation agrees with the engine's own window selection on every case."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
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
    walk_cutoff,
    window_skip_reason,
)
from zett_lab.tokens import MemoizingCounter, approx_count_tokens, count_tokens, message_counter


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


@settings(
    max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_the_summed_walk_equals_the_recounting_walk_and_the_engine_on_every_fixture(fixture_conversations, data):
    """zett_lab's counters take the running-sum walk; any other counter the general one. Both agree, and with the engine."""
    conversation = data.draw(st.sampled_from(fixture_conversations), label="conversation")
    messages = list(conversation.messages[: data.draw(st.integers(1, len(conversation.messages)), label="prefix")])
    if data.draw(st.booleans(), label="checkpoint"):
        at = 1 if isinstance(messages[0], SystemMessage) else 0
        messages.insert(at, CompactedMessage(content="earlier work " * data.draw(st.integers(1, 300))))
    counter = data.draw(st.sampled_from([count_tokens, approx_count_tokens, MemoizingCounter()]), label="counter")
    total = counter(messages)
    keep = data.draw(st.one_of(st.integers(1, 50), st.integers(1, total + 10)), label="keep")
    recounting = lambda window: counter(window)  # noqa: E731 - a counter zett_lab does not know
    assert message_counter(counter) is not None and message_counter(recounting) is None

    dialogue = [m for m in messages if not isinstance(m, SystemMessage)]
    summed = walk_cutoff(dialogue, keep_recent_tokens=keep, count_tokens=counter)
    general = walk_cutoff(dialogue, keep_recent_tokens=keep, count_tokens=recounting)
    assert summed == general
    reason = window_skip_reason(messages, keep_recent_tokens=keep, count_tokens=counter)
    assert reason == window_skip_reason(messages, keep_recent_tokens=keep, count_tokens=recounting)
    window = CompactionExtension._select_compaction_window(messages, keep_recent_tokens=keep, count_tokens=counter)
    assert (window is None) == (reason is not None)
    event(f"reason: {reason}")
