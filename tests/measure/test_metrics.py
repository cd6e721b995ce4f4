"""Offline loss metrics (zett_lab.measure.measure) and the opt-in judged tier with fake models."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage, RetryOptions

from zett_lab import Conversation, InputError, Probe
from zett_lab.measure import Losses, measure
from zett_lab.measure.catalogue import metric
from zett_lab.measure.columns import (
    ANCHOR_COLUMNS,
    COMPACTION_COLUMNS,
    CONVERSATION_COLUMNS,
    DECAY_COLUMNS,
    PROBE_COLUMNS,
)
from zett_lab.replay.setting import TraceSettings
from zett_lab.replay.trace import Trace
from zett_lab.tokens import approx_count_tokens, count_tokens

# --------------------------------------------------------------------------------------------
# A hand-made trace whose every number can be worked out by hand


def hand_conversation(probes=None) -> Conversation:
    messages = [
        SystemMessage(content="You are a coding agent."),  # 0
        UserMessage(
            content="Fix the login bug in src/auth/session.py. Never edit config/prod.yaml. The port is 6543."
        ),  # 1
        AssistantMessage(content="", tool_calls=(ToolCall("r1", "read_file", {"path": "src/auth/session.py"}),)),  # 2
        ToolMessage(
            tool_call_id="r1",
            name="read_file",
            content="def load_user(user_id):\n    return USERS[user_id]\nKeyError: 'user_id'",
        ),  # 3
        AssistantMessage(content="We'll use a default in load_user. Done."),  # 4
        UserMessage(content="Now run the tests."),  # 5
        AssistantMessage(
            content="", tool_calls=(ToolCall("b1", "bash", {"command": "pytest tests/test_auth.py"}),)
        ),  # 6
        ToolMessage(
            tool_call_id="b1", name="bash", content="FAILED tests/test_auth.py::test_login - KeyError: 'user_id'"
        ),  # 7
        AssistantMessage(content="", tool_calls=(ToolCall("r2", "read_file", {"path": "src/auth/session.py"}),)),  # 8
        ToolMessage(
            tool_call_id="r2", name="read_file", content="def load_user(user_id):\n    return USERS.get(user_id)"
        ),  # 9
        AssistantMessage(content="Fixed; port 6543 is configured."),  # 10
        UserMessage(content="Thanks. Bump the version to v0.3.0."),  # 11
        AssistantMessage(content="Bumped to v0.3.0; port 6543 unchanged."),  # 12
    ]
    if probes is None:
        probes = [
            Probe("What port?", "6543", "recall", 1),
            Probe("Which file has the bug?", "src/auth/session.py", "artifact", 1),
        ]
    return Conversation(id="hand", messages=messages, probes=probes)


SUMMARY_0 = "The user wants the login bug fixed; never edit the prod config config/prod.yaml. Port 6543."
SUMMARY_1 = "Port 6543."


def step_row(
    step,
    n_recorded,
    kept_from,
    checkpoint_id=None,
    applied=False,
    compaction_id=None,
    tokens=500,
    reason="below threshold",
):
    return {
        "conversation_id": "hand",
        "turn": 0,
        "step": step,
        "turn_step": step,
        "n_recorded": n_recorded,
        "max_tokens": 1000,
        "keep_recent_tokens": 100,
        "skip_reason": reason,
        "applied": applied,
        "compaction_id": compaction_id,
        "context_tokens_after": tokens,
        "over_budget_after": tokens > 1000,
        "checkpoint_id": checkpoint_id,
        "kept_from": kept_from,
        "triggered": compaction_id is not None,
    }


def compaction_row(
    cid, step, span_end, n_recorded, summary, applied=True, skip_reason=None, summary_tokens=20, error=None
):
    return {
        "compaction_id": cid,
        "conversation_id": "hand",
        "step": step,
        "turn": 0,
        "trigger": "auto",
        "span_start": 1,
        "span_end": span_end,
        "n_recorded": n_recorded,
        "older_messages": span_end - 1,
        "older_tokens": 200,
        "recent_messages": n_recorded - span_end,
        "recent_tokens": 50,
        "summary_tokens": summary_tokens if summary is not None else None,
        "applied": applied,
        "skip_reason": skip_reason,
        "summary_text": summary,
        "summarizer": "hand-written",
        "latency_s": 0.5,
        "cache_hit": False,
        "summary_input_tokens": 300,
        "summary_output_tokens": 20,
        "error": error,
        "error_kind": "boom" if error else None,
    }


def hand_trace(conversation=None, compactions=None, steps=None) -> Trace:
    conversation = conversation or hand_conversation()
    if steps is None:
        steps = [
            step_row(0, 2, 1),
            step_row(1, 4, 1),
            step_row(2, 6, 1),
            step_row(3, 8, 5, checkpoint_id=0, applied=True, compaction_id=0, reason=None),
            step_row(4, 10, 5, checkpoint_id=0, tokens=1200),
            step_row(5, 12, 11, checkpoint_id=1, applied=True, compaction_id=1, reason=None),
        ]
    if compactions is None:
        compactions = [compaction_row(0, 3, 5, 8, SUMMARY_0), compaction_row(1, 5, 11, 12, SUMMARY_1)]
    settings = {"max_tokens": 1000, "keep_recent_tokens": 100, "summarizer": "hand-written", "counter": "count_tokens"}
    return Trace.from_rows(conversation, steps, compactions, TraceSettings.from_record(settings), [])


@pytest.fixture(scope="module")
def hand_losses() -> Losses:
    return measure(hand_trace())


def anchor(losses: Losses, compaction_id: int, type_: str, normalized: str) -> dict:
    rows = losses.anchors[
        (losses.anchors["compaction_id"] == compaction_id)
        & (losses.anchors["type"] == type_)
        & (losses.anchors["normalized"] == normalized)
    ]
    assert len(rows) == 1, (
        compaction_id,
        type_,
        normalized,
        losses.anchors[losses.anchors["compaction_id"] == compaction_id],
    )
    return rows.iloc[0].to_dict()


def test_frames_have_documented_columns(hand_losses):
    assert list(hand_losses.compactions.columns) == list(COMPACTION_COLUMNS)
    assert list(hand_losses.anchors.columns) == list(ANCHOR_COLUMNS)
    assert list(hand_losses.conversation.columns) == list(CONVERSATION_COLUMNS)
    assert list(hand_losses.probes.columns) == list(PROBE_COLUMNS)
    assert list(hand_losses.decay.columns) == list(DECAY_COLUMNS)
    for columns in (COMPACTION_COLUMNS, ANCHOR_COLUMNS, CONVERSATION_COLUMNS, PROBE_COLUMNS, DECAY_COLUMNS):
        for name in columns:
            assert f"``{name}``" in Losses.__doc__


def test_compression_and_context_reduction(hand_losses):
    messages = hand_conversation().messages
    row = hand_losses.compactions.iloc[0]
    span_tokens = count_tokens(messages[1:5])
    assert row["span_tokens"] == span_tokens
    assert row["compression_ratio"] == pytest.approx(1 - 20 / span_tokens)
    assert row["engine_compression_ratio"] == pytest.approx(1 - 20 / 200)
    # before = older_tokens + recent_tokens (recorded by the engine), after = summary + tail
    assert row["before_tokens"] == 250 and row["after_tokens"] == 70
    assert row["context_reduction"] == pytest.approx(1 - 70 / 250)
    assert (row["span_messages"], row["tail_messages"], row["future_messages"]) == (4, 3, 5)


def test_anchor_lookup_in_summary_tail_and_future(hand_losses):
    path = anchor(hand_losses, 0, "path", "src/auth/session.py")
    assert (path["in_summary"], path["in_tail"], path["in_future"]) == (False, False, True)
    assert path["needed_later"] and path["lost_but_needed"] and path["refetched"]
    assert path["next_use_index"] == 8 and path["message_index"] == 1
    port = anchor(hand_losses, 0, "number", "port 6543")
    assert port["in_summary"] and port["needed_later"] and not port["lost_but_needed"]
    user_id = anchor(hand_losses, 0, "identifier", "user_id")
    assert user_id["in_tail"] and not user_id["needed_later"]  # still visible verbatim in the tail
    error = anchor(hand_losses, 0, "error", "KeyError: user_id")
    assert error["in_tail"] and not error["needed_later"]
    load_user = anchor(hand_losses, 0, "identifier", "load_user")
    # it recurs only in a tool result (the file printed again): no one used it, so it is not needed
    assert load_user["in_future"] and not load_user["needed_later"] and not load_user["lost_but_needed"]
    assert path["rarity"] == pytest.approx(math.log(12 / 3) / math.log(12 / 2))  # in 3 of 12 dialogue messages
    prod = anchor(hand_losses, 0, "path", "config/prod.yaml")
    assert prod["in_summary"] and not prod["in_future"]
    constraint = anchor(hand_losses, 0, "constraint", "never edit config/prod.yaml")
    assert constraint["in_summary"]  # paraphrased, but every content word and the negation survive


def test_needed_anchor_recall_and_lists(hand_losses):
    row = hand_losses.compactions.iloc[0]
    anchors = hand_losses.anchors[hand_losses.anchors["compaction_id"] == 0]
    needed = anchors[anchors["needed_later"]]
    assert set(needed["normalized"]) == {
        "src/auth/session.py",
        "port 6543",
    }  # read again by the agent, said again by it
    assert row["needed_anchors"] == 2 and row["needed_retained"] == 1
    weights = dict(zip(needed["normalized"], needed["rarity"], strict=True))
    assert row["needed_weight"] == pytest.approx(sum(weights.values()))
    assert row["needed_anchor_recall"] == pytest.approx(weights["port 6543"] / sum(weights.values()))
    assert row["lost_but_needed"] == 1
    lost = hand_losses.lost_but_needed()
    assert set(lost[lost["compaction_id"] == 0]["normalized"]) == {"src/auth/session.py"}
    assert row["span_anchors"] == len(anchors)
    assert row["retained_anchors"] == int(anchors["in_summary"].sum())
    assert row["anchor_retention"] == pytest.approx(anchors["in_summary"].mean())
    assert row["retention_path"] == pytest.approx(0.5)  # config/prod.yaml kept, src/auth/session.py lost
    assert math.isnan(row["retention_url"])  # no URL in the span


def test_constraint_survival_and_refetch(hand_losses):
    first, second = hand_losses.compactions.iloc[0], hand_losses.compactions.iloc[1]
    assert (first["constraints"], first["constraints_kept"], first["constraint_survival"]) == (1, 1, 1.0)
    assert (second["constraints"], second["constraints_kept"], second["constraint_survival"]) == (1, 0, 0.0)
    assert first["refetch_calls"] == 1 and first["refetched_anchors"] == 1
    assert second["refetch_calls"] == 0  # nothing read after the second compaction
    dropped = hand_losses.dropped_constraints()
    assert list(zip(dropped["compaction_id"], dropped["normalized"], strict=True)) == [
        (1, "never edit config/prod.yaml")
    ]
    listed = hand_losses.listed()  # what a report keeps: lost but needed, and dropped constraints
    assert set(listed["normalized"]) == set(hand_losses.lost_but_needed()["normalized"]) | set(dropped["normalized"])


def test_a_report_lists_each_dropped_rule_once_with_the_summarizers_that_dropped_it(hand_losses):
    from zett_lab.report.lost import dropped_constraint_items

    trace = hand_trace()
    items = dropped_constraint_items([("a", trace), ("b", trace)], None, lambda _: hand_losses, limit=5)
    assert items == [
        {
            "conversation_id": "hand",
            "value": "Never edit config/prod.yaml.",
            "message_index": 1,
            "dropped_by": [{"summarizer": "a", "compaction_id": 1}, {"summarizer": "b", "compaction_id": 1}],
        }
    ]
    assert dropped_constraint_items([("a", trace)], None, lambda _: hand_losses, limit=0) == []


def _second_compaction_keeps_the_rule(messages: list, span_start: int = 1) -> bool:
    """Whether constraint survival calls "never edit config/prod.yaml" kept at the hand trace's second compaction
    (span ``span_start``..10, tail 11, summary "Port 6543."), and the dropped list agrees."""
    compactions = [
        compaction_row(0, 3, 5, 8, SUMMARY_0),
        {**compaction_row(1, 5, 11, 12, SUMMARY_1), "span_start": span_start},
    ]
    losses = measure(hand_trace(Conversation(id="hand", messages=messages), compactions))
    row = losses.compactions.iloc[1]
    assert row["constraints"] >= 1
    dropped = losses.dropped_constraints()
    listed = "never edit config/prod.yaml" in set(dropped[dropped["compaction_id"] == 1]["normalized"])
    kept = row["constraints_kept"] == row["constraints"]
    assert kept != listed
    return bool(kept)


@pytest.mark.parametrize(
    ("where", "text", "kept"),
    [
        ("nowhere", None, False),
        ("system prompt, in other words", "You are a coding agent. Do not ever edit config/prod.yaml.", True),
        ("system prompt, without the negation", "You are a coding agent. Edit config/prod.yaml as you like.", False),
        ("system prompt, too few of its words", "You are a coding agent. Never edit the README.", False),
        ("the tail, an agent message sharing its words", "I did not edit config/prod.yaml.", False),
        ("the tail, the user writing it again", "Never edit config/prod.yaml.", True),
    ],
)
def test_a_rule_is_kept_when_the_standing_context_states_it_in_any_words_and_the_tail_as_written(where, text, kept):
    messages = list(hand_conversation().messages)
    if where.startswith("system prompt"):
        messages[0] = SystemMessage(content=text)
    elif where == "the tail, an agent message sharing its words":
        messages[11] = AssistantMessage(content=text)
    elif where == "the tail, the user writing it again":
        messages[11] = UserMessage(content=text)
    assert _second_compaction_keeps_the_rule(messages) is kept


def test_a_message_kept_before_the_span_conveys_the_rules_it_states():
    messages = list(hand_conversation().messages)
    messages[5] = UserMessage(content="Now run the tests. Never edit config/prod.yaml!")  # the span states it again
    assert _second_compaction_keeps_the_rule(messages, span_start=1) is False
    # message 1 stays before the span, sent with every request: it still says the rule
    assert _second_compaction_keeps_the_rule(messages, span_start=2) is True


@given(
    st.sampled_from(
        [
            "Never touch migrations/ — the DBA team owns them.",
            "Python 3.9, no new dependencies.",
            "You MUST use this EXACT command to submit.",
            "Always make sure to look at the currently open file.",
        ]
    ),
    st.text(alphabet=st.characters(categories=["Ll", "Zs"]), max_size=40),
)
def test_an_in_context_demonstration_states_no_rules_of_the_task(rule, words):
    from zett_lab.load.anchors import message_anchors

    text = f"{words}\n\n{rule}"
    demonstration = UserMessage(content=text)
    demonstration.attributes["demonstration"] = True
    task = UserMessage(content=text)
    assert [a for a in message_anchors(demonstration) if a.type == "constraint"] == []
    assert (
        [a.normalized for a in message_anchors(task) if a.type == "constraint"]
        == [a.normalized for a in message_anchors(UserMessage(content=rule)) if a.type == "constraint"]
        != []
    )


@pytest.mark.parametrize(
    "rule",
    [
        "Never touch migrations/ — the DBA team owns them.",
        "Python 3.9, no new dependencies.",
        "The patch must only contain changes to the specific source files you modified.",
        "Only change the files under src/.",
        "Avoid global state in the handlers.",
    ],
)
def test_rules_of_the_user_and_the_task_are_constraints(rule):
    from zett_lab.load.anchors import anchors_in_text

    assert [a.type for a in anchors_in_text(rule, "user") if a.type == "constraint"] == ["constraint"]


def test_probes_are_checked_in_the_next_steps_context(hand_losses):
    probes = hand_losses.probes
    assert len(probes) == 4  # two probes x two compactions covering message 1
    port = probes[(probes["compaction_id"] == 0) & (probes["probe"] == 0)].iloc[0]
    assert port["in_summary"] and port["in_context"] and port["answer_in_source"]
    path = probes[(probes["compaction_id"] == 0) & (probes["probe"] == 1)].iloc[0]
    assert not path["in_summary"] and not path["in_tail"] and not path["in_context"]
    assert hand_losses.compactions.iloc[0]["probe_presence"] == pytest.approx(0.5)
    assert hand_losses.conversation.iloc[0]["probe_presence"] == pytest.approx(0.5)


def test_decay_is_measured_against_the_original_span(hand_losses):
    decay = hand_losses.decay
    assert len(decay) == 1
    row = decay.iloc[0]
    kept = hand_losses.anchors[(hand_losses.anchors["compaction_id"] == 0) & hand_losses.anchors["in_summary"]]
    assert row["kept"] == len(kept)
    assert row["still_in_summary"] == 1  # only the port survives the second summary
    assert row["survival"] == pytest.approx(1 / len(kept))
    assert hand_losses.conversation.iloc[0]["decay_survival_1"] == pytest.approx(1 / len(kept))
    assert hand_losses.conversation.iloc[0]["final_survival"] == pytest.approx(1 / len(kept))


def test_conversation_budget_figures(hand_losses):
    row = hand_losses.conversation.iloc[0]
    assert row["compactions"] == 2 and row["attempts"] == 2
    assert row["rejected_not_smaller"] == 0 and row["failed"] == 0
    assert row["peak_context_tokens"] == 1200
    assert row["primary_input_tokens"] == 500 * 5 + 1200
    assert row["steps_over_budget"] == 1 and row["steps"] == 6
    assert row["summary_input_tokens"] == 600 and row["summary_output_tokens"] == 40
    comps = hand_losses.compactions
    assert row["needed_anchor_recall"] == pytest.approx(comps["needed_retained"].sum() / comps["needed_anchors"].sum())
    assert row["compression_ratio"] == pytest.approx(comps["compression_ratio"].mean())


def test_rejected_and_failed_attempts():
    compactions = [
        compaction_row(0, 3, 5, 8, "x" * 400, applied=False, skip_reason="summary not smaller", summary_tokens=900),
        compaction_row(1, 4, 5, 10, None, applied=False, skip_reason="summary failed", error="RuntimeError: boom"),
    ]
    steps = [step_row(i, n, 1) for i, n in enumerate((2, 4, 6, 8, 10, 12))]
    steps[3].update(skip_reason="summary not smaller", compaction_id=0)
    steps[4].update(skip_reason="summary failed", compaction_id=1)
    losses = measure(hand_trace(compactions=compactions, steps=steps))
    assert list(losses.compactions["status"]) == ["summary not smaller", "failed"]
    failed = losses.compactions.iloc[1]
    assert math.isnan(failed["compression_ratio"]) and math.isnan(failed["anchor_retention"])
    assert pd.isna(failed["needed_anchors"])
    assert set(losses.anchors["compaction_id"]) == {0}  # no anchor rows without a summary
    row = losses.conversation.iloc[0]
    assert (row["compactions"], row["attempts"], row["rejected_not_smaller"], row["failed"]) == (0, 2, 1, 1)
    assert math.isnan(row["needed_anchor_recall"])
    # nothing applied: the next step still sees the original messages, so probes are present
    probes = losses.probes[losses.probes["compaction_id"] == 0]
    assert probes["in_context"].all() and not probes["applied"].any()


def test_trace_without_compactions_gives_empty_frames_and_nan_ratios():
    steps = [step_row(i, n, 1) for i, n in enumerate((2, 4))]
    losses = measure(hand_trace(compactions=[], steps=steps))
    assert len(losses.compactions) == len(losses.anchors) == len(losses.probes) == len(losses.decay) == 0
    assert list(losses.compactions.columns) == list(COMPACTION_COLUMNS)
    row = losses.conversation.iloc[0]
    assert row["compactions"] == 0 and row["attempts"] == 0 and row["steps"] == 2
    for column in (
        "compression_ratio",
        "context_reduction",
        "anchor_retention",
        "needed_anchor_recall",
        "constraint_survival",
        "probe_presence",
        "decay_survival_1",
        "final_survival",
    ):
        assert math.isnan(row[column]), column
    assert "<table" in losses._repr_html_()


def test_bad_probes_name_the_probe():
    conversation = hand_conversation(
        probes=[Probe("ok?", "6543", "recall", 1), Probe("Where is the secret?", "x", "recall", 99)]
    )
    with pytest.raises(InputError, match=r"probe 1 \('Where is the secret\?'\).*message_index 99"):
        measure(hand_trace(conversation=conversation))
    conversation = hand_conversation(probes=[Probe("Empty?", "  ", "recall", 1)])
    with pytest.raises(InputError, match="probe 0"):
        measure(hand_trace(conversation=conversation))


def test_parse_probes_reports_wrong_shapes():
    from zett_lab.measure.probes import parse_probes

    assert (
        parse_probes([{"question": "q", "answer": "a", "type": "recall", "message_index": 2}], "p.json", 3)[
            0
        ].message_index
        == 2
    )
    with pytest.raises(InputError, match="p.json: probes"):
        parse_probes({"question": "q"}, "p.json", 3)
    with pytest.raises(InputError, match="probe 1.*missing field"):
        parse_probes(
            [{"question": "q", "answer": "a", "type": "recall", "message_index": 0}, {"question": "q"}], "p.json", 3
        )
    with pytest.raises(InputError, match="probe 0, field 'message_index'"):
        parse_probes([{"question": "q", "answer": "a", "type": "recall", "message_index": 3}], "p.json", 3)


def test_binary_and_surrogate_content_does_not_crash():
    conversation = hand_conversation()
    messages = list(conversation.messages)
    messages[3] = ToolMessage(
        tool_call_id="r1", name="read_file", content=b"\xff\xfe\x00 src/auth/session.py load_user"
    )  # type: ignore[arg-type]
    messages[7] = ToolMessage(tool_call_id="b1", name="bash", content="bad \udcff bytes user_id")
    conversation = Conversation(id="hand", messages=messages, probes=conversation.probes)
    losses = measure(hand_trace(conversation=conversation), counter=approx_count_tokens)
    assert len(losses.anchors) > 0
    losses.anchors["value"].map(lambda v: v.encode("utf-8"))
    assert "<table" in losses._repr_html_()


def test_losses_concat_and_measure_of_a_list(hand_losses):
    both = measure([hand_trace(), hand_trace()])
    assert len(both.conversation) == 2
    assert len(both.compactions) == 2 * len(hand_losses.compactions)
    empty = Losses.concat([])
    assert list(empty.compactions.columns) == list(COMPACTION_COLUMNS)
    html = hand_losses._repr_html_()
    assert "Lost but needed later" in html and "src/auth/session.py" in html
    many = dataclasses.replace(empty, anchors=pd.concat([hand_losses.anchors] * (1 + 1000 // len(hand_losses.anchors))))
    assert f"anchor rows={len(many.anchors):,}" in repr(many), "notebook 04 read anchor rows=10274"
    # metric columns headed by their catalogue labels (notebook 04 read "needed anchor recall", "superseded rate")
    for name in ("needed_anchor_recall", "superseded_rate", "lost_but_needed"):
        assert f"<th>{metric(name).label}</th>" in html, name
    assert "<th>needed anchor recall</th>" not in html and "<th>conversation id</th>" in html
    table = hand_losses.retention_by_type()
    assert table.loc["hand-written", "number"] == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------
# Real replays through the engine


def linked_conversation(turns: int = 8, pad: int = 120) -> Conversation:
    """Turns that refer back to earlier turns' files, functions and ports (so anchors are needed later)."""
    messages = [SystemMessage(content="You are a coding agent.")]
    probes = []
    for t in range(turns):
        earlier = max(0, t - 2)
        if t == 1:
            probes.append(Probe("Which port?", f"{6500 + t}", "recall", len(messages)))
        messages.append(
            UserMessage(
                content=f"Turn {t}: fix src/pkg/module_{t}.py like module_{earlier}. "
                f"Never edit config/prod_{t}.yaml. Port {6500 + t}."
            )
        )
        messages.append(
            AssistantMessage(
                content="Reading.",
                tool_calls=(ToolCall(f"r{t}", "read_file", {"path": f"src/pkg/module_{earlier}.py"}),),
            )
        )
        messages.append(
            ToolMessage(
                tool_call_id=f"r{t}",
                name="read_file",
                content=f"def load_user_{earlier}(user_id):\n    return db.get(user_id)\n" + "x = 1\n" * pad,
            )
        )
        messages.append(
            AssistantMessage(
                content="Testing.",
                tool_calls=(ToolCall(f"b{t}", "bash", {"command": f"pytest tests/test_module_{t}.py -x"}),),
            )
        )
        messages.append(
            ToolMessage(
                tool_call_id=f"b{t}",
                name="bash",
                content=f"FAILED tests/test_module_{t}.py::test_load - KeyError: 'user_id'\nport {6500 + earlier}",
            )
        )
        messages.append(
            AssistantMessage(
                content=f"We'll use load_user_{earlier} with a default on port {6500 + earlier}. "
                f"Fixed src/pkg/module_{t}.py; tests/test_module_{earlier}.py still passes."
            )
        )
    return Conversation(id="linked", messages=messages, probes=probes)


@pytest.fixture(scope="module")
def replayed():
    from zett_lab.replay import replay

    conversation = linked_conversation()
    return {
        name: replay(conversation, max_tokens=2500, keep_recent_tokens=800, summarizer=name)
        for name in ("truncate", "mask", "anchors")
    }


def test_measure_agrees_with_the_trace(replayed):
    for name, trace in replayed.items():
        losses = measure(trace)
        summary = trace.summary()
        row = losses.conversation.iloc[0]
        assert len(losses.compactions) == len(trace.compactions), name
        assert row["compactions"] == summary["compactions_applied"] > 0, name
        assert row["peak_context_tokens"] == summary["peak_context"]
        assert row["primary_input_tokens"] == summary["total_input_tokens"]
        assert row["steps_over_budget"] == summary["steps_over_budget"]
        assert row["rejected_not_smaller"] == summary["rejected_not_smaller"]
        applied = losses.compactions[losses.compactions["applied"]]
        assert (applied["compression_ratio"].between(0, 1)).all(), name
        assert (
            applied["engine_compression_ratio"]
            - trace.compactions[trace.compactions["applied"]]["compression_ratio"].to_numpy()
        ).abs().max() < 1e-9
        # tail tokens are the engine's recent window
        assert (
            applied["tail_tokens"].to_numpy()
            == trace.compactions[trace.compactions["applied"]]["recent_tokens"].to_numpy()
        ).all()
        assert row["constraint_survival"] >= 0


def test_measuring_after_other_traces_equals_measuring_each_from_scratch(replayed):
    """What measuring remembers between traces of one conversation (the anchor index, each clause's words)
    changes nothing: every table equals the one measured after :func:`release_indexes` forgot it."""
    from zett_lab.measure.losses import measure_lost_and_counted
    from zett_lab.measure.message_index import release_indexes

    def tables(result):
        losses, counts = result
        return [
            *(getattr(losses, name) for name in ("compactions", "anchors", "conversation", "decay", "updates")),
            counts,
        ]

    warm = [tables(measure_lost_and_counted(trace)) for trace in replayed.values()]
    for trace, remembered in zip(replayed.values(), warm, strict=True):
        release_indexes()
        for fresh, kept in zip(tables(measure_lost_and_counted(trace)), remembered, strict=True):
            pd.testing.assert_frame_equal(fresh, kept)
        assert len(remembered[0]) == len(trace.compactions) > 0


def test_measuring_with_an_index_built_elsewhere_equals_measuring_with_its_own(replayed):
    """A worker that takes the driver's built index of the conversation (pickled, without its messages) measures
    every trace as with the index it would build itself."""
    import pickle

    from zett_lab.measure.losses import conversation_index, measure_lost_and_counted
    from zett_lab.measure.message_index import ConversationIndex, held_index, release_indexes

    traces = list(replayed.values())
    conversation = traces[0].conversation
    assert all(trace.conversation.messages is conversation.messages for trace in traces)
    release_indexes()
    own = [measure_lost_and_counted(trace) for trace in traces]
    shipped = pickle.dumps(ConversationIndex(list(conversation.messages), conversation.harness_context).built())
    release_indexes()
    adopted = conversation_index(conversation, pickle.loads(shipped))
    assert held_index(conversation.messages, conversation.harness_context) is adopted
    assert adopted.messages is conversation.messages and adopted._arrays is not None
    for trace, (losses, counts) in zip(traces, own, strict=True):
        again, again_counts = measure_lost_and_counted(trace)
        for name in ("compactions", "anchors", "conversation", "decay", "updates"):
            pd.testing.assert_frame_equal(getattr(again, name), getattr(losses, name))
        pd.testing.assert_frame_equal(again_counts, counts)
    assert held_index(conversation.messages, conversation.harness_context) is adopted


def test_mask_keeps_more_needed_anchors_than_truncate(replayed):
    nar = {name: measure(trace).conversation.iloc[0]["needed_anchor_recall"] for name, trace in replayed.items()}
    assert nar["mask"] >= nar["truncate"]


def test_measure_on_a_long_trace_counts_every_applied_compaction():
    from tests.helpers import coding_conversation
    from zett_lab.replay import replay

    trace = replay(
        coding_conversation(turns=40, output_lines=80, cid="long"),
        max_tokens=8000,
        keep_recent_tokens=2000,
        summarizer="anchors",
    )
    losses = measure(trace)
    assert losses.conversation.iloc[0]["compactions"] == int(trace.compactions["applied"].sum()) >= 3


# --------------------------------------------------------------------------------------------
# Judged tier with deterministic fake models


class FakeAnswerer:
    """Answers with the gold answer when it is in the transcript, else NOT IN CONTEXT."""

    retry = RetryOptions(max_retries=0)
    identity = "fake-answerer"

    def __init__(self, gold: dict[str, str]) -> None:
        self.gold = gold
        self.calls = 0

    async def stream(self, request):
        self.calls += 1
        prompt = request.messages[-1].content
        transcript, _, question = prompt.rpartition("Question: ")
        answer = self.gold.get(question.strip(), "")
        from zett_lab.measure.lookup import contains_normalized

        text = answer if answer and contains_normalized(transcript, answer) else "NOT IN CONTEXT"
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content=text), usage=ModelUsage(input_tokens=100, output_tokens=5))
        )


class FakeJudge:
    retry = RetryOptions(max_retries=0)
    identity = "fake-judge"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request):
        self.calls += 1
        prompt = request.messages[-1].content
        gold = prompt.split("Gold answer: ")[1].split("\n")[0]
        answer = prompt.split("Answer to grade: ")[1].split("\n")[0]
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content="1" if gold == answer else "0.0")))


def gold_map() -> dict[str, str]:
    return {p.question: p.answer for p in hand_conversation().probes}


def test_judged_probe_qa_between_floor_and_ceiling():
    from zett_lab.measure.judged import run_judged

    answerer, judge = FakeAnswerer(gold_map()), FakeJudge()
    result = run_judged(hand_trace(), answerer=answerer, judge=judge, cache=False)
    rows = result.rows.set_index(["compaction_id", "probe"])
    assert (rows["status"] == "ok").all()
    assert rows.loc[(0, 0), ["post", "ceiling", "floor", "nr"]].tolist() == [1.0, 1.0, 0.0, 1.0]
    assert rows.loc[(0, 1), ["post", "ceiling", "floor", "nr"]].tolist() == [0.0, 1.0, 0.0, 0.0]
    # the port is still in the tail after compaction 1? no: the tail is message 11 only
    assert rows.loc[(1, 0), "post"] == 1.0
    # ceilings/floors shared; abstentions need no judge call
    assert result.calls == answerer.calls + judge.calls
    assert judge.calls < answerer.calls
    by = result.by_summarizer()
    assert by.loc[0, "n"] == 4


def test_judged_uses_the_cache_and_plan_counts_calls():
    from zett_lab.measure.judged import run_judged
    from zett_lab.measure.judged_plan import plan_judged
    from zett_lab.summarizers.cache import SummaryCache

    cache = SummaryCache.memory()
    answerer, judge = FakeAnswerer(gold_map()), FakeJudge()
    plan = plan_judged(hand_trace(), answerer=answerer, judge=judge, cache=cache, price=(1.0, 2.0))
    assert plan.compactions == 2 and plan.probes == 4
    answers = plan.table.set_index("kind").loc["answer"]
    assert answers["calls"] == answers["to_call"] == 2 * 2 * 3  # compactions x probes x (post, ceiling, floor)
    assert plan.cost_usd > 0 and "JudgedPlan" in repr(plan) and "<table" in plan._repr_html_()
    first = run_judged(hand_trace(), answerer=answerer, judge=judge, cache=cache)
    assert answerer.calls == answers["to_call"]
    second = run_judged(hand_trace(), answerer=answerer, judge=judge, cache=cache)
    assert second.calls == 0 and second.cached > 0
    pd.testing.assert_frame_equal(first.rows, second.rows)
    replan = plan_judged(hand_trace(), answerer=answerer, judge=judge, cache=cache, price=(1.0, 2.0))
    assert replan.calls == 0 and replan.cost_usd == 0


def test_judged_stops_at_the_budget_and_keeps_what_it_finished():
    from zett_lab.errors import SettingError
    from zett_lab.measure.judged import run_judged

    answerer, judge = FakeAnswerer(gold_map()), FakeJudge()
    result = run_judged(hand_trace(), answerer=answerer, judge=judge, cache=False, max_calls=5)
    assert result.calls <= 5 and result.stopped == "max_calls=5 reached"
    assert (result.rows["status"] == "ok").sum() >= 1
    assert (result.rows["status"] == "budget").sum() >= 1
    with pytest.raises(SettingError, match="price"):
        run_judged(hand_trace(), answerer=answerer, judge=judge, cache=False, max_usd=1.0)
    cheap = run_judged(
        hand_trace(), answerer=FakeAnswerer(gold_map()), judge=FakeJudge(), cache=False, max_usd=0.0, price=(1.0, 1.0)
    )
    assert cheap.calls == 0 and (cheap.rows["status"] == "budget").all()


def test_generate_probes_keeps_only_verbatim_answers():
    from zett_lab.measure.judged_calls import generate_probes

    class ProbeWriter:
        retry = RetryOptions(max_retries=0)
        identity = "probe-writer"

        async def stream(self, request):
            text = (
                'Here you go: [{"question": "Which port?", "answer": "6543", "type": "recall"},'
                ' {"question": "Invented?", "answer": "redis://nowhere", "type": "recall"},'
                ' {"question": "Which file?", "answer": "src/auth/session.py", "type": "weird"}]'
            )
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content=text)))

    span = hand_conversation().messages[1:5]
    probes = generate_probes(ProbeWriter(), span, 5, start=1, cache=False)
    assert [(p.answer, p.message_index, p.type) for p in probes] == [
        ("6543", 1, "recall"),
        ("src/auth/session.py", 1, "recall"),
    ]


def test_agreement_between_offline_and_judged():
    from zett_lab.measure.judged import agreement, run_judged

    trace = hand_trace()
    result = run_judged(trace, answerer=FakeAnswerer(gold_map()), judge=FakeJudge(), cache=False)
    table = agreement(measure(trace), result)
    assert set(table["offline"]) == {"needed_anchor_recall", "anchor_retention", "probe_presence", "in_context"}
    probe_level = table[table["level"] == "probe"].iloc[0]
    assert probe_level["n"] == 4
    # the offline presence check and the fake answerer agree exactly on this trace
    assert probe_level["spearman"] == pytest.approx(1.0)


def test_judged_against_the_loopback_server():
    loopback = pytest.importorskip("tests.loopback")
    from zett_lab.measure.judged import run_judged
    from zett_lab.summarizers import summarizer

    def reply(messages):
        text = " ".join(str(m.get("content")) for m in messages)
        if "Gold answer:" in text:
            return "1"
        return "6543" if "6543" in text.split("Question:")[0] else "NOT IN CONTEXT"

    with loopback.LoopbackServer(summary=reply) as server:
        model = summarizer(f"openai-compatible:fake@{server.openai_url}")
        trace = hand_trace(conversation=hand_conversation(probes=[Probe("What port?", "6543", "recall", 1)]))
        result = run_judged(trace, answerer=model, judge=model, cache=False)
    assert (result.rows["status"] == "ok").all()
    assert result.rows["post"].tolist() == [1.0, 1.0]


# --------------------------------------------------------------------------------------------
# The bundled fixtures


def test_fixtures_measure_cleanly(fixture_conversations):
    from zett_lab.replay import replay

    traces = [
        replay(c, max_tokens=20_000, keep_recent_tokens=6_000, summarizer="anchors") for c in fixture_conversations
    ]
    losses = measure(traces)
    conversation = losses.conversation.set_index("conversation_id")
    assert len(conversation) == len(fixture_conversations)
    # every gold probe's answer is verbatim in the message it points at, so the offline check is meaningful
    assert losses.probes["answer_in_source"].all()
    for trace in traces:
        row = conversation.loc[trace.conversation.id]
        summary = trace.summary()
        assert row["compactions"] == summary["compactions_applied"]
        assert row["steps_over_budget"] == summary["steps_over_budget"]
        if row["compactions"] == 0:
            assert math.isnan(row["needed_anchor_recall"]) and math.isnan(row["compression_ratio"])
        else:
            assert 0 <= row["needed_anchor_recall"] <= 1 and 0 < row["compression_ratio"] < 1
    # a steps-over-budget figure always comes with its reason
    over = conversation[conversation["steps_over_budget"] > 0]
    assert ((over["steps_no_boundary"] + over["steps_only_checkpoints"]) > 0).all()


def test_anchors_of_the_system_prompt_are_never_lost():
    conversation = hand_conversation()
    messages = list(conversation.messages)
    messages[0] = SystemMessage(content="You are a coding agent. The app lives in src/auth/session.py.")
    losses = measure(hand_trace(conversation=Conversation(id="hand", messages=messages, probes=conversation.probes)))
    path = anchor(losses, 0, "path", "src/auth/session.py")
    assert path["in_tail"] and not path["needed_later"] and not path["lost_but_needed"]


def test_decay_counts_every_pair_by_its_definition(fixture_conversations):
    """Each (k, k+j) row counts the anchors Σ_k kept that Σ_{k+j} holds (TextIndex.contains), and those
    in Σ_{k+j} or its kept tail: worked out per anchor from the public tables, on traces with many compactions."""
    from zett_lab.load.anchors import message_keys
    from zett_lab.measure.lookup import TextIndex
    from zett_lab.replay import replay

    pairs = 0
    for conversation in fixture_conversations:
        trace = replay(conversation, max_tokens=3_000, keep_recent_tokens=500, summarizer="extractive")
        losses = measure(trace)
        summaries = dict(zip(trace.compactions["compaction_id"], trace.compactions["summary_text"], strict=True))
        attempts = losses.compactions.set_index("compaction_id")
        for row in losses.decay.itertuples():
            anchors = losses.anchors[(losses.anchors["compaction_id"] == row.from_compaction)]
            held_rows = anchors[anchors["in_summary"]]
            kept = list(zip(held_rows["type"], held_rows["normalized"], strict=True))
            later = TextIndex(summaries[row.to_compaction])
            tail = attempts.loc[row.to_compaction]
            tail_keys = set().union(
                *(
                    message_keys(m)
                    for m in conversation.messages[tail["span_end"] : tail["n_recorded"]]
                    if not isinstance(m, SystemMessage)
                )
            )
            held = [later.contains(key) for key in kept]
            assert row.kept == len(kept)
            assert row.still_in_summary == sum(held)
            assert row.still_in_context == sum(h or key in tail_keys for h, key in zip(held, kept, strict=True))
            pairs += 1
    assert pairs > 50


# --- typed tables --------------------------------------------------------------------------------------------


def _column_kind(name: str) -> str:
    return {"flag": "boolean", "count": "Int64", "ratio": "float64", "float": "float64", "text": "object"}[
        COMPACTION_COLUMNS.type(name)
    ]


_MISSING = st.sampled_from([None, math.nan, pd.NA])
_CELL = {
    "boolean": st.one_of(st.booleans(), _MISSING),
    "Int64": st.one_of(st.integers(-(2**40), 2**40), _MISSING),
    "float64": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-1000, 1000), _MISSING),
    "object": st.one_of(st.text(max_size=5), _MISSING),  # ids, names, statuses: text
}


@st.composite
def _compaction_rows(draw):
    names = draw(st.lists(st.sampled_from(list(COMPACTION_COLUMNS)), unique=True, max_size=8))
    return draw(st.lists(st.fixed_dictionaries({}, optional={n: _CELL[_column_kind(n)] for n in names}), max_size=5))


@given(rows=_compaction_rows())
@settings(max_examples=150, deadline=None)
def test_a_measure_table_types_every_column_and_keeps_every_value(rows):
    """Counts are nullable Int64, flags nullable booleans, ratios float64 (NaN when missing), the rest plain
    objects with None for missing; every value given comes back as such, a column not given is all missing."""
    from zett_lab.measure.columns import frame
    from zett_lab.records import is_missing

    table = frame(rows, COMPACTION_COLUMNS)
    assert list(table.columns) == list(COMPACTION_COLUMNS) and len(table) == len(rows)
    for name in COMPACTION_COLUMNS:
        kind, column = _column_kind(name), table[name]
        assert str(column.dtype) == kind, name
        for row, value in zip(rows, column.tolist() if kind == "object" else column.to_numpy(object), strict=True):
            given_value = row.get(name)
            if is_missing(given_value):
                assert value is None if kind == "object" else is_missing(value), (name, value)
            elif kind == "float64":
                assert value == float(given_value)
            else:
                assert value == given_value and type(value) is type(given_value), (name, value, given_value)


def test_the_explorer_lists_the_rules_a_compaction_dropped(hand_losses):
    from zett_lab.show.widgets.html import compaction_html

    page = compaction_html(hand_trace(), 1, hand_losses)
    assert "Constraints dropped (1):" in page and "<li>Never edit config/prod.yaml.</li>" in page
    assert "Constraints dropped" not in compaction_html(hand_trace(), 0, hand_losses)  # the summary kept it


def test_the_tokens_of_any_window_are_what_the_counter_counts_over_its_messages():
    """A trace view counts ``messages[start:end]`` from running totals for zett_lab's counters (sums of per-message
    counts) and with the counter itself for any other: the counter's own answer over every window, each way."""
    from tests.helpers import coding_conversation
    from zett_lab.measure.attempt import _RUNNING_TOKENS
    from zett_lab.measure.losses import _trace_view
    from zett_lab.replay import replay

    conversation = coding_conversation(turns=4, output_lines=30, cid="window-tokens")
    trace = replay(conversation, max_tokens=4_000, keep_recent_tokens=800, summarizer="truncate", cache=False)
    messages = conversation.messages

    def own(window):  # a counter of unknown make: counted window by window
        return 7 * len(window)

    for counter in (count_tokens, approx_count_tokens, own):
        view = _trace_view(trace, counter)
        for start in range(len(messages) + 1):
            for end in range(max(start - 1, 0), len(messages) + 1):
                assert view.tokens_between(start, end) == counter(messages[start:end]), (counter, start, end)
        assert (counter in _RUNNING_TOKENS.get(view.index, {})) == (counter is not own)


def test_measuring_pauses_the_garbage_collector_and_leaves_no_garbage_in_cycles():
    """Measuring a trace runs no cyclic collection, and the collector runs again afterwards; what makes pausing it
    safe is that measuring (every summarizer's trace, the per-anchor rows and the report's lost-and-counted form)
    leaves no garbage in cycles, which only a collection would free (several traces concatenated included)."""
    import gc

    from tests.helpers import coding_conversation
    from zett_lab.measure.losses import measure_lost_and_counted
    from zett_lab.replay import replay

    conversation = coding_conversation(turns=30, output_lines=40, cid="cycles")
    for summarizer in ("truncate", "mask", "anchors", "extractive"):
        trace = replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500, summarizer=summarizer, cache=False)
        assert len(trace.compactions) >= 2
        for once, argument in ((measure, trace), (measure, [trace, trace]), (measure_lost_and_counted, trace)):
            once(argument)  # (what a first measuring remembers is not garbage)
            gc.collect()
            collections = sum(stats["collections"] for stats in gc.get_stats())
            once(argument)
            # at most the one the objects made meanwhile set off once the collector runs again
            assert sum(stats["collections"] for stats in gc.get_stats()) - collections <= 1 and gc.isenabled()
            gc.disable()
            try:
                once(argument)
                assert gc.collect() == 0, summarizer
            finally:
                gc.enable()
