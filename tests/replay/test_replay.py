"""Replay through the real engine: fidelity to the engine's own events and contexts, and hard cases."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.messages import AssistantMessage, ToolMessage

import zett_lab
import zett_lab.errors
from tests.helpers import BadSummarizer, CountingSummarizer, coding_conversation
from zett_lab.replay import ReplayError, SummaryError, replay
from zett_lab.replay.trace import Trace
from zett_lab.tokens import MemoizingCounter, engine_payload

SETTINGS = [(2_000, 500), (4_000, 1_000), (8_000, 2_000), (16_000, 4_000), (30_000, 12_000)]


def _same_messages(left, right) -> bool:
    return [type(m).__name__ for m in left] == [type(m).__name__ for m in right] and [
        engine_payload(m) for m in left
    ] == [engine_payload(m) for m in right]


def check_fidelity(trace: Trace, contexts: list[list]) -> None:
    """Recorded compactions equal the engine's own events; rebuilt contexts equal what was sent."""
    compactions = trace.compactions
    attempted = compactions[compactions["older_messages"].notna()]
    events = trace.engine_events
    assert len(events) == len(attempted), "one COMPACTION_COMPLETED per attempt that was not a failure"
    for event, (_, row) in zip(events, attempted.iterrows(), strict=True):
        assert event["applied"] == row["applied"]
        assert event["step"] == row["step"]
        if row["applied"]:
            assert event["compressed_to"] == row["older_messages"]
            assert event["kept_to"] == row["older_messages"] + row["recent_messages"]
            assert event["summary"].endswith(row["summary_text"])
        else:
            assert row["skip_reason"] == "summary not smaller"
    assert len(contexts) == len(trace.steps)
    for step, sent in enumerate(contexts):
        assert _same_messages(trace.context_at(step), sent), f"step {step}"
        assert trace.steps.loc[step, "context_tokens_after"] == CompactionExtension._count_tokens(sent)


def test_fidelity_on_hand_made_conversation(sent_contexts):
    conversation = coding_conversation(turns=6)
    trace = replay(conversation, max_tokens=600, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    assert trace.compactions["applied"].sum() >= 3
    check_fidelity(trace, sent_contexts)
    reasons = set(trace.steps["skip_reason"].dropna())
    assert {"below threshold", "only earlier checkpoints"} <= reasons


@pytest.mark.parametrize(("max_tokens", "keep_recent_tokens"), SETTINGS)
def test_fidelity_on_every_fixture(fixture_conversations, sent_contexts, max_tokens, keep_recent_tokens):
    applied = 0
    for conversation in fixture_conversations:
        sent_contexts.clear()
        trace = replay(
            conversation, max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens, summarizer="truncate:0.2"
        )
        check_fidelity(trace, sent_contexts)
        applied += int(trace.compactions["applied"].sum())
        steps = trace.steps
        assert (steps["estimate_source"] == "estimator").all()
        assert (steps["estimate"] == steps["estimator_tokens"]).all()
        triggered = steps["estimate"] > max_tokens
        assert (steps["triggered"] == triggered).all()
    assert applied > 0


def test_memoizing_counter_and_engine_counter_give_identical_traces():
    conversation = coding_conversation(turns=5)
    options = dict(max_tokens=700, keep_recent_tokens=250, summarizer=CountingSummarizer(), cache=False)
    fast = replay(conversation, count_tokens=MemoizingCounter(), **options)
    naive = replay(conversation, count_tokens=CompactionExtension._count_tokens, **options)
    assert fast.steps.drop(columns=[]).equals(naive.steps)
    assert fast.compactions.drop(columns=["latency_s"]).equals(naive.compactions.drop(columns=["latency_s"]))


def test_one_oversized_turn_never_compacts_and_says_why():
    """An autonomous run is one user turn: the cutoff snaps back to its user message, every step goes over budget."""
    conversation = coding_conversation(turns=1, tools_per_turn=12)
    trace = replay(conversation, max_tokens=500, keep_recent_tokens=100, summarizer=CountingSummarizer(), cache=False)
    over = trace.steps[trace.steps["over_budget_after"]]
    assert len(over) >= 8
    assert set(over["skip_reason"]) == {"no whole-turn boundary"}
    assert trace.compactions.empty and trace.engine_events == []


def test_log_cut_after_a_tool_result_ends_cleanly():
    conversation = coding_conversation(turns=2)
    conversation = dataclasses.replace(conversation, messages=conversation.messages[:-1])  # ends on a tool result
    trace = replay(
        conversation, max_tokens=10_000, keep_recent_tokens=1_000, summarizer=CountingSummarizer(), cache=False
    )
    last = trace.steps.iloc[-1]
    assert not last["responded"] and last["n_recorded"] == len(conversation.messages)
    assert trace.steps["responded"].sum() == sum(isinstance(m, AssistantMessage) for m in conversation.messages)


def test_log_cut_after_an_unanswered_tool_call_ends_cleanly():
    conversation = coding_conversation(turns=2)
    conversation = dataclasses.replace(conversation, messages=conversation.messages[:-2])  # ends on a tool call
    assert isinstance(conversation.messages[-1], AssistantMessage) and conversation.messages[-1].tool_calls
    trace = replay(
        conversation, max_tokens=10_000, keep_recent_tokens=1_000, summarizer=CountingSummarizer(), cache=False
    )
    assert trace.steps["responded"].all()
    assert len(trace.steps) == sum(isinstance(m, AssistantMessage) for m in conversation.messages)


def test_failed_tool_results_replay_as_failures(sent_contexts):
    conversation = coding_conversation(turns=1)
    replay(conversation, max_tokens=10_000, keep_recent_tokens=1_000, summarizer=CountingSummarizer(), cache=False)
    tools = [m for m in sent_contexts[-1] if isinstance(m, ToolMessage)]
    assert [t.success for t in tools] == [m.success for m in conversation.messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize(
    ("mode", "kind"), [("empty", "empty_summary"), ("tool_call", "tool_call"), ("raise", "RuntimeError")]
)
def test_failed_summaries_are_recorded_and_the_replay_goes_on(mode, kind):
    conversation = coding_conversation(turns=5)
    warning = r"conversation 'hand-made': \d+ summary call\(s\) failed"
    with pytest.warns(zett_lab.errors.SummaryFailureWarning, match=warning):
        trace = replay(
            conversation, max_tokens=600, keep_recent_tokens=200, summarizer=BadSummarizer(mode), cache=False
        )
    failed = trace.compactions[trace.compactions["skip_reason"] == "summary failed"]
    assert len(failed) >= 2
    assert set(failed["error_kind"]) == {kind}
    assert not trace.compactions["applied"].any()
    assert len(trace.steps) == sum(isinstance(m, AssistantMessage) for m in conversation.messages)
    with pytest.raises(SummaryError, match=r"turn \d+, step \d+: summary failed \(strict\)") as error:
        replay(
            conversation,
            max_tokens=600,
            keep_recent_tokens=200,
            summarizer=BadSummarizer(mode),
            cache=False,
            strict=True,
        )
    assert isinstance(error.value, ReplayError) and isinstance(error.value, zett_lab.errors.ResultFailure)


def test_a_summary_that_is_not_smaller_is_discarded_and_retried_next_step():
    conversation = coding_conversation(turns=4)
    trace = replay(conversation, max_tokens=600, keep_recent_tokens=200, summarizer=BadSummarizer("huge"), cache=False)
    rejected = trace.compactions[trace.compactions["skip_reason"] == "summary not smaller"]
    assert len(rejected) >= 3 and not rejected["applied"].any()
    assert (rejected["summary_tokens"] >= rejected["older_tokens"]).all()
    assert len(trace.engine_events) == len(rejected)


@pytest.mark.parametrize(("max_tokens", "keep"), [(0, 10), (-5, 10), (10, 0), (1.5, 10), ("100", 10), (True, 10)])
def test_limits_must_be_positive_integers(max_tokens, keep):
    with pytest.raises(zett_lab.SettingError, match="must be a positive integer"):
        replay(
            coding_conversation(turns=1),
            max_tokens=max_tokens,
            keep_recent_tokens=keep,
            summarizer=CountingSummarizer(),
            cache=False,
        )


def test_keep_recent_at_or_above_max_tokens_is_allowed():
    meaning = "keep_recent_tokens=5000 >= max_tokens=600: the kept tail alone fills the budget"
    with pytest.warns(zett_lab.errors.SettingWarning, match=meaning):
        trace = replay(
            coding_conversation(turns=4),
            max_tokens=600,
            keep_recent_tokens=5_000,
            summarizer=CountingSummarizer(),
            cache=False,
        )
    assert set(trace.steps.loc[trace.steps["triggered"], "skip_reason"]) == {"recent budget covers everything"}


def test_an_answer_followed_by_another_assistant_message_names_the_index():
    conversation = coding_conversation(turns=1)
    conversation.messages.append(AssistantMessage(content="and another thing"))
    with pytest.raises(zett_lab.InputError, match=f"message {len(conversation.messages) - 1}"):
        replay(conversation, max_tokens=600, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)


def test_trace_round_trips_through_json_and_parquet(tmp_path):
    trace = replay(
        coding_conversation(turns=5),
        max_tokens=600,
        keep_recent_tokens=200,
        summarizer=CountingSummarizer(),
        cache=False,
    )
    for name in ("t.json", "t.parquet"):
        loaded = Trace.load(trace.save(tmp_path / name))
        assert loaded.steps.equals(trace.steps), name
        assert loaded.compactions.equals(trace.compactions), name
        assert loaded.conversation.messages == trace.conversation.messages
        assert loaded.settings == trace.settings
        assert loaded.context_at(len(loaded.steps) - 1) == trace.context_at(len(trace.steps) - 1)
    assert "<table" in trace._repr_html_()
    with pytest.raises(zett_lab.InputError, match="not a zett_lab trace"):
        Trace.load(tmp_path / "missing.parquet")


def _recorded_summary_model(conversation):
    from tests.load.test_fixtures import load_generator

    recorded = conversation.metadata["recorded_with"]
    return recorded, load_generator().FirstLineSummaryModel(**recorded["summary_model_args"])


def test_replaying_a_compacted_recording_reproduces_its_snapshots(fixture_conversations):
    """billing-rounding was recorded live with compaction on.

    Replay with its settings and usage lands on the same snapshots.
    """
    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    recorded, model = _recorded_summary_model(conversation)
    trace = replay(
        conversation,
        max_tokens=recorded["max_tokens"],
        keep_recent_tokens=recorded["keep_recent_tokens"],
        summarizer=model,
        usage="recorded",
        cache=False,
    )
    applied = trace.compactions[trace.compactions["applied"]]
    sequences = conversation.metadata["sequences"]
    snapshots = [n for n in conversation.native_compactions if n.kind == "zett-snapshot"]
    assert len(snapshots) == 3
    assert [sequences[end - 1] for end in applied["span_end"]] == [
        n.metadata["compacted_through_sequence"] for n in snapshots
    ]
    assert list(applied["summary_text"]) == [n.summary for n in snapshots]  # the text the summary model wrote
    assert "usage" in set(trace.steps["estimate_source"])


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    content=st.text(max_size=20),
    calls=st.lists(st.tuples(st.text(max_size=6), st.dictionaries(st.text(max_size=5), _json, max_size=3)), max_size=3),
    attributes=st.dictionaries(st.text(max_size=5), _json, max_size=2),
)
def test_the_runtime_gets_a_deep_copy_of_each_recorded_message_every_time(content, calls, attributes):
    """What the runtime is handed equals ``copy.deepcopy`` of the recorded message, shares nothing mutable with
    it, and changing one copy changes neither the recording nor the next copy."""
    import copy

    from zett_agent.messages import ToolCall

    from zett_lab.replay.playback import runtime_copy

    recorded = AssistantMessage(
        content=content,
        tool_calls=tuple(ToolCall(id=f"call-{n}", name=name, arguments=args) for n, (name, args) in enumerate(calls)),
        attributes=attributes,
    )
    expected = copy.deepcopy(recorded)
    first = runtime_copy(recorded)
    assert first == expected and first is not recorded
    first.attributes["changed"] = True
    for call in first.tool_calls:
        call.arguments["changed"] = True
        call.name = "changed"
    second = runtime_copy(recorded)
    assert recorded == expected and second == expected and second is not first
    content_list = [{"type": "text", "text": content}]
    copied = runtime_copy(content_list)
    assert copied == content_list and copied is not content_list and copied[0] is not content_list[0]
