"""The two example policies, run directly in zett-agent's runtime and through replay."""

from __future__ import annotations

import asyncio
import functools

import pytest
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.compaction import CompactedMessage, CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.sqlite import SQLiteSessionExtension
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from zett_agent.storage import SQLiteSessionStorage

import zett_lab
from tests.helpers import CountingSummarizer, ScriptedAgentModel, coding_conversation, read_agent_tool
from tests.replay.test_replay import check_fidelity
from zett_lab.replay.policies import ObservationMaskingCompaction, SplitTurnCompaction, tool_group_starts
from zett_lab.replay.schema import NO_TURN_BOUNDARY
from zett_lab.tokens import engine_payload


class MaskedAndSplit(ObservationMaskingCompaction, SplitTurnCompaction):
    """Both example policies at once: they override different hooks, so they compose."""


def check_tool_pairing(context: list) -> None:
    """Every tool result follows its call in this context, and every call is answered before the next step."""
    open_calls: set[str] = set()
    seen_calls: set[str] = set()
    for message in context:
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"assistant message while calls {open_calls} have no result"
            open_calls = {call.id for call in message.tool_calls}
            seen_calls |= open_calls
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in seen_calls, f"tool result {message.tool_call_id} without its call"
            open_calls.discard(message.tool_call_id)
    assert not open_calls, f"the model is called while {open_calls} have no result"


async def _run(engine: CompactionExtension, *, turns: int, steps: int, history=None) -> tuple[ScriptedAgentModel, list]:
    model = ScriptedAgentModel(steps)
    config = AgentRunConfig(session_id="policy-session")
    agent = await Agent.create(
        model,
        config=config,
        system_prompt="You read files.",
        tools=[read_agent_tool()],
        extensions=[history or InMemoryMessageAccumulator(), engine],
        parallel_tool_call=False,
        max_iterations=1_000,
    )
    events = []
    try:
        for turn in range(turns):
            async for event in agent.stream(
                UserMessage(content=f"Turn {turn}: read every file and report."), config=config
            ):
                events.append(event)
    finally:
        if history is not None:
            await history.close()
    return model, events


def _completed(events: list) -> list:
    return [e for e in events if e.type is AgentEventType.COMPACTION_COMPLETED]


def test_tool_group_starts_never_cut_between_a_call_and_its_result():
    conversation = coding_conversation(turns=2, tools_per_turn=2, output_lines=3)
    dialogue = [m for m in conversation.messages if not isinstance(m, SystemMessage)]
    starts = tool_group_starts(dialogue)
    assert [type(m).__name__ for m, s in zip(dialogue, starts, strict=True) if s] == [
        "UserMessage",
        "AssistantMessage",
        "AssistantMessage",
        "AssistantMessage",
    ] * 2
    assert not any(isinstance(m, ToolMessage) and s for m, s in zip(dialogue, starts, strict=True))


def test_split_turn_compacts_inside_one_oversized_turn_where_the_stock_engine_cannot():
    limits = {"max_tokens": 4_000, "keep_recent_tokens": 1_000}
    stock_model, stock_events = asyncio.run(
        _run(CompactionExtension(CountingSummarizer(), **limits), turns=1, steps=30)
    )
    assert _completed(stock_events) == []
    assert max(CompactionExtension._count_tokens(c) for c in stock_model.contexts) > 4 * limits["max_tokens"]

    model, events = asyncio.run(_run(SplitTurnCompaction(CountingSummarizer(), **limits), turns=1, steps=30))
    applied = [e for e in _completed(events) if e.applied]
    assert len(applied) >= 3
    for context in model.contexts:
        check_tool_pairing(context)
        assert CompactionExtension._count_tokens(context) <= limits["max_tokens"] + 1_000  # one step's growth at most
    mid_turn = [c for c in model.contexts if isinstance(c[1], CompactedMessage)]
    assert mid_turn and all(isinstance(c[2], AssistantMessage) for c in mid_turn)


def test_a_split_turn_checkpoint_is_what_zett_agent_storage_restores(tmp_path):
    path = tmp_path / "sessions.sqlite"
    engine = SplitTurnCompaction(CountingSummarizer(), max_tokens=4_000, keep_recent_tokens=1_000)
    model, events = asyncio.run(_run(engine, turns=1, steps=30, history=SQLiteSessionExtension(path)))
    assert any(e.applied for e in _completed(events))

    async def restored() -> list:
        storage = SQLiteSessionStorage(path)
        try:
            return (await storage.load("policy-session")).messages
        finally:
            await storage.close()

    view = asyncio.run(restored())
    last_context = [m for m in model.contexts[-1] if not isinstance(m, SystemMessage)]
    assert isinstance(view[0], CompactedMessage)
    # The restored session is the last context sent plus the final answer: snapshot + raw tail.
    assert [engine_payload(m) for m in view[:-1]] == [engine_payload(m) for m in last_context]


def test_split_turn_replays_the_autonomous_fixture_with_no_step_over_budget(fixture_conversations, sent_contexts):
    conversation = next(c for c in fixture_conversations if c.id == "swe-httpq-4821")
    limits = {"max_tokens": 30_000, "keep_recent_tokens": 8_000}
    stock = zett_lab.replay(conversation, **limits, summarizer="anchors:0.1", cache=False)
    assert stock.summary()["steps_over_budget"] > 50
    assert set(stock.steps.loc[stock.steps["over_budget_after"], "skip_reason"]) == {NO_TURN_BOUNDARY}
    sent_contexts.clear()
    split = zett_lab.replay(conversation, **limits, summarizer="anchors:0.1", cache=False, engine=SplitTurnCompaction)
    check_fidelity(split, sent_contexts)
    assert split.setting.engine_name == "zett_lab.replay.policies.SplitTurnCompaction"
    assert split.summary()["steps_over_budget"] == 0 and split.summary()["compactions_applied"] >= 2
    turn_starts = {t.start for t in conversation.turns}
    assert not set(split.compactions["span_end"].dropna().astype(int)) & turn_starts  # cut inside the turn
    for step in range(len(split.steps)):
        check_tool_pairing(split.context_at(step))


def test_masking_policy_masks_old_tool_outputs_first_and_calls_no_model_when_that_is_enough(sent_contexts):
    conversation = coding_conversation(turns=6, output_lines=100)
    summarizer = CountingSummarizer()
    trace = zett_lab.replay(
        conversation,
        max_tokens=3_000,
        keep_recent_tokens=900,
        summarizer=summarizer,
        cache=False,
        engine=ObservationMaskingCompaction,
    )
    check_fidelity(trace, sent_contexts)
    applied = trace.compactions[trace.compactions["applied"]]
    assert len(applied) >= 2 and summarizer.calls == 0
    first = applied.iloc[0]
    assert "[tool output omitted:" in first["summary_text"] and "never touch migrations/" in first["summary_text"]
    assert "    pass" not in first["summary_text"]
    assert applied["latency_s"].isna().all() and applied["cache_hit"].isna().all()


def test_masking_policy_summarizes_the_masked_history_when_masking_is_not_enough():
    seen: list = []

    class Capturing(CountingSummarizer):
        async def stream(self, request):
            seen.append(list(request.messages))
            async for event in super().stream(request):
                yield event

    conversation = coding_conversation(turns=6, output_lines=100)
    engine = functools.partial(ObservationMaskingCompaction, masking_target=0.05)
    trace = zett_lab.replay(
        conversation, max_tokens=3_000, keep_recent_tokens=900, summarizer=Capturing(), cache=False, engine=engine
    )
    assert trace.setting.engine_name == "zett_lab.replay.policies.ObservationMaskingCompaction(masking_target=0.05)"
    applied = trace.compactions[trace.compactions["applied"]]
    assert len(seen) == len(trace.compactions) >= 2 and applied["summary_text"].str.startswith("Summary of").all()
    tool_results = [m for request in seen for m in request if isinstance(m, ToolMessage)]
    assert tool_results and all(str(m.content).startswith("[tool output omitted:") for m in tool_results)
    assert applied["latency_s"].notna().all()


def test_masking_rejects_a_bad_target():
    with pytest.raises(ValueError, match="masking_target"):
        ObservationMaskingCompaction(max_tokens=10, keep_recent_tokens=5, masking_target=0)


def test_the_policies_compose_and_both_hooks_run(fixture_conversations, sent_contexts):
    conversation = next(c for c in fixture_conversations if c.id == "swe-httpq-4821")
    trace = zett_lab.replay(
        conversation,
        max_tokens=30_000,
        keep_recent_tokens=8_000,
        summarizer="anchors:0.1",
        cache=False,
        engine=MaskedAndSplit,
    )
    check_fidelity(trace, sent_contexts)
    applied = trace.compactions[trace.compactions["applied"]]
    assert trace.summary()["steps_over_budget"] == 0
    assert len(applied) >= 2 and applied["summary_text"].str.contains(r"\[tool output omitted:").any()
