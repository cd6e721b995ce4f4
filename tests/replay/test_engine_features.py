"""On-demand compaction, provider usage, reasoning effort, and the stored raw-log view (issue 9)."""

from __future__ import annotations

import sqlite3

import pytest
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage
from zett_agent.model import ModelEvent, ModelResponse, ReasoningEffort, RetryOptions

import zett_lab
from tests.helpers import CountingSummarizer, coding_conversation
from zett_lab.replay import replay
from zett_lab.replay.stored import stored_view
from zett_lab.replay.trace import Trace


def demo_tokens(messages) -> int:
    """The word-counting estimate from zett-agent's "Compact without losing history" example."""
    return sum(len(str(message.content).split()) for message in messages)


class PreferenceSummary:
    retry = RetryOptions(max_retries=0)
    identity = "docs-example-summary"

    async def stream(self, request):
        yield ModelEvent.reasoning("Keep the durable preference.")
        yield ModelEvent.text("The user prefers Python.")
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content="The user prefers Python.")))


def test_docs_example_compact_without_losing_history(tmp_path):
    """Two requests, word counter, limits 100/10: 6 raw messages, checkpoint boundary 3, raw tail 3."""
    original = "I prefer Python. " * 100
    conversation = zett_lab.Conversation(
        id="compaction-demo",
        messages=[
            SystemMessage(content="You are a helpful assistant."),
            UserMessage(content=original),
            AssistantMessage(content="Noted."),
            UserMessage(content="Continue with Python and keep all the current request words in the recent context."),
            AssistantMessage(content="Noted."),
        ],
    )
    store = tmp_path / "sessions.sqlite"
    trace = replay(
        conversation,
        max_tokens=100,
        keep_recent_tokens=10,
        count_tokens=demo_tokens,
        summarizer=PreferenceSummary(),
        cache=False,
        store=store,
    )
    view = stored_view(store, "compaction-demo")
    assert len(view.raw) == 6 and view.raw.loc[1, "text"] == original
    assert view.snapshots["compacted_through_sequence"].tolist() == [3]
    assert len(view.raw_tail) == 3
    applied = trace.compactions[trace.compactions["applied"]]
    assert applied["snapshot_version"].tolist() == [1]
    assert applied["compacted_through_sequence"].tolist() == [3]
    assert applied["summary_text"].tolist() == ["The user prefers Python."]
    assert conversation.metadata == {}  # the user's conversation object is not changed


def test_store_refuses_existing_files_and_missing_folders(tmp_path):
    conversation = coding_conversation(turns=2)
    options = dict(max_tokens=600, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    with pytest.raises(zett_lab.SettingError, match="does not exist"):
        replay(conversation, store=tmp_path / "nope" / "s.sqlite", **options)
    store = tmp_path / "s.sqlite"
    replay(conversation, store=store, **options)
    before = store.read_bytes()
    with pytest.raises(zett_lab.SettingError, match="already holds a session with id 'hand-made'"):
        replay(conversation, store=store, **options)
    assert store.read_bytes() == before
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(zett_lab.SettingError, match="already exists"):
        replay(conversation, store=other, **options)


def test_stored_replay_equals_in_memory_replay(tmp_path):
    conversation = coding_conversation(turns=5)
    options = dict(max_tokens=600, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    memory = replay(conversation, **options)
    stored = replay(conversation, store=tmp_path / "s.sqlite", **options)
    assert stored.steps.equals(memory.steps)
    base = stored.compactions.drop(columns=["snapshot_version", "compacted_through_sequence", "latency_s"])
    assert base.equals(memory.compactions.drop(columns=["latency_s"]))
    reloaded = Trace.load(stored.save(tmp_path / "t.json"))
    assert reloaded.compactions["snapshot_version"].equals(stored.compactions["snapshot_version"])


def test_manual_passes_before_turns_and_steps():
    conversation = coding_conversation(turns=4)
    options = dict(max_tokens=100_000, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    trace = replay(conversation, compact_at=[2, "step:10"], **options)
    manual = trace.compactions
    assert manual["trigger"].tolist() == ["manual", "manual"]  # never over the threshold
    assert manual["applied"].all()
    # the turn-2 pass ran before turn 2's user message was appended; the last whole turn is kept
    first, second = manual.iloc[0], manual.iloc[1]
    assert first["n_recorded"] == conversation.turns[2].start and first["span_end"] == conversation.turns[1].start
    assert second["step"] == 10 and second["span_end"] == conversation.turns[3].start
    assert trace.steps.loc[6, "checkpoint_id"] == first["compaction_id"]
    assert trace.steps.loc[10, "checkpoint_id"] == second["compaction_id"]


def test_a_manual_pass_that_finds_nothing_is_recorded_with_its_reason():
    conversation = coding_conversation(turns=3)
    options = dict(max_tokens=100_000, summarizer=CountingSummarizer(), cache=False)
    inside_first_turn = replay(conversation, compact_at=["step:2", 1], keep_recent_tokens=1, **options).compactions
    assert inside_first_turn["trigger"].tolist() == ["manual", "manual"]
    assert not inside_first_turn["applied"].any()
    assert inside_first_turn["skip_reason"].tolist() == ["no whole-turn boundary", "no whole-turn boundary"]
    generous = replay(conversation, compact_at=[2], keep_recent_tokens=100_000, **options).compactions
    assert generous["skip_reason"].tolist() == ["recent budget covers everything"]
    assert generous["summary_text"].isna().all()


@pytest.mark.parametrize("bad", [99, "step:999", "turn:x", "later"])
def test_compact_at_past_the_end_names_the_index(bad):
    with pytest.raises(zett_lab.SettingError, match=repr(bad) if not isinstance(bad, int) else "99"):
        replay(
            coding_conversation(turns=2),
            compact_at=[bad],
            max_tokens=600,
            keep_recent_tokens=200,
            summarizer=CountingSummarizer(),
            cache=False,
        )


def test_recorded_usage_changes_the_schedule(fixture_conversations):
    """The fixtures carry provider usage with 1,200 tokens of tool-schema overhead: the trigger fires earlier."""
    conversation = next(c for c in fixture_conversations if c.id == "api-v2-deprecation")
    options = dict(max_tokens=12_000, keep_recent_tokens=3_000, summarizer="truncate:0.2")
    estimator = replay(conversation, usage="none", **options)
    recorded = replay(conversation, usage="recorded", **options)
    assert set(recorded.steps["estimate_source"]) == {"estimator", "usage"}
    from_usage = recorded.steps[recorded.steps["estimate_source"] == "usage"]
    assert (from_usage["estimate"] > from_usage["estimator_tokens"]).all()
    schedule = lambda t: t.compactions.loc[t.compactions["applied"], "step"].tolist()  # noqa: E731
    assert schedule(estimator) == [] and schedule(recorded) == [15]


def test_synthetic_usage_overhead_moves_the_trigger():
    conversation = coding_conversation(turns=5)
    options = dict(max_tokens=900, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    plain = replay(conversation, usage="synthetic", usage_overhead=0, **options)
    heavy = replay(conversation, usage="synthetic", usage_overhead=400, **options)
    first = lambda t: int(t.steps.loc[t.steps["triggered"], "step"].min())  # noqa: E731
    assert first(heavy) < first(plain)


def test_recorded_usage_missing_is_an_error_or_a_warning():
    conversation = coding_conversation(turns=2)
    options = dict(max_tokens=600, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    with pytest.raises(zett_lab.SettingError, match="has no recorded usage"):
        replay(conversation, usage="recorded", **options)
    with pytest.warns(UserWarning, match="has no recorded usage"):
        trace = replay(conversation, usage="recorded", on_missing_usage="estimate", **options)
    assert set(trace.steps["estimate_source"]) == {"estimator"}
    with pytest.raises(zett_lab.SettingError, match="usage must be one of"):
        replay(conversation, usage="magic", **options)


def test_reasoning_effort_reaches_the_summary_model_and_is_recorded():
    seen = []

    class Effortful(CountingSummarizer):
        async def stream(self, request):
            seen.append(request.reasoning_effort)
            async for event in super().stream(request):
                yield event

    trace = replay(
        coding_conversation(turns=4),
        max_tokens=600,
        keep_recent_tokens=200,
        summarizer=Effortful(),
        cache=False,
        reasoning_effort="high",
    )
    assert seen and set(seen) == {ReasoningEffort.HIGH}
    assert trace.setting.reasoning_effort == "high"


def test_reasoning_effort_is_part_of_the_summary_cache_key(tmp_path):
    conversation = coding_conversation(turns=4)
    cache = zett_lab.summarizers.SummaryCache(tmp_path / "c.sqlite")
    model = CountingSummarizer()
    options = dict(max_tokens=600, keep_recent_tokens=200, summarizer=model, cache=cache)
    replay(conversation, reasoning_effort="low", **options)
    calls = model.calls
    replay(conversation, reasoning_effort="low", **options)
    assert model.calls == calls  # all hits
    replay(conversation, reasoning_effort="high", **options)
    assert model.calls == 2 * calls  # a different effort is a different summary


def test_reasoning_effort_is_a_sweep_parameter(tmp_path):
    seen = []

    class Effortful(CountingSummarizer):
        async def stream(self, request):
            seen.append(request.reasoning_effort)
            async for event in super().stream(request):
                yield event

    result = zett_lab.sweep(
        [coding_conversation(turns=4)],
        max_tokens=[600],
        keep_recent_tokens=[200],
        summarizers=[Effortful()],
        executor="serial",
        progress=False,
        metrics=False,
        cache=tmp_path / "c.sqlite",
        reasoning_effort="high",
    )
    ((_, trace),) = list(result.traces())
    assert trace.setting.reasoning_effort == "high"
    assert seen and set(seen) == {ReasoningEffort.HIGH}
