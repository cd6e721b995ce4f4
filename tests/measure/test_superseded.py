"""Superseded-value metrics in measure and compare, update probes, and the detector against the fixtures' gold probes."""

from __future__ import annotations

import re

import pytest
from zett_agent.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage, RetryOptions

from zett_lab import Conversation, InputError, Probe, compare
from zett_lab.load.conversation import parse_probes
from zett_lab.measure import measure
from zett_lab.measure.catalogue import default_metrics, metric, ratio
from zett_lab.measure.columns import UPDATE_COLUMNS
from zett_lab.measure.updates import find_updates, observe
from zett_lab.records import is_missing
from zett_lab.replay import replay
from zett_lab.replay.setting import TraceSettings
from zett_lab.replay.trace import Trace


def port_conversation() -> Conversation:
    messages = [
        SystemMessage(content="You are a coding agent."),  # 0
        UserMessage(content="The staging database listens on port 6543. Count the invoices."),  # 1
        AssistantMessage(
            content="", tool_calls=(ToolCall("q1", "bash", {"command": "psql -c 'select count(*)'"}),)
        ),  # 2
        ToolMessage(tool_call_id="q1", name="bash", content="1284"),  # 3
        UserMessage(content="Heads-up: staging moved to port 6544 last night. Count again."),  # 4
        AssistantMessage(content="1284 invoices; staging is on port 6544."),  # 5
        UserMessage(content="Thanks. Write the report."),  # 6
        AssistantMessage(content="Report written."),  # 7
    ]
    probes = [Probe("Which port does staging listen on?", "port 6544", "update", 4, "port 6543", 1)]
    return Conversation(id="ports", messages=messages, probes=probes)


def trace_with(summary: str, summarizer: str) -> Trace:
    """One applied compaction of messages[1:6] (both port values), keeping messages[6:8]."""
    conversation = port_conversation()
    row = {
        "compaction_id": 0,
        "conversation_id": conversation.id,
        "step": 3,
        "turn": 2,
        "trigger": "auto",
        "span_start": 1,
        "span_end": 6,
        "n_recorded": 8,
        "older_messages": 5,
        "older_tokens": 120,
        "recent_messages": 2,
        "recent_tokens": 20,
        "summary_tokens": 15,
        "applied": True,
        "skip_reason": None,
        "summary_text": summary,
        "summarizer": summarizer,
    }
    settings = {"summarizer": summarizer, "max_tokens": 100, "keep_recent_tokens": 20}
    return Trace.from_rows(conversation, [], [row], TraceSettings.from_record(settings), [])


STALE = "User: staging database on port 6543; 1284 invoices."
CURRENT = "Staging moved from port 6543 to port 6544; 1284 invoices."
SILENT = "1284 invoices counted."


@pytest.mark.parametrize(
    ("summary", "status", "rate"),
    [(STALE, "superseded", 1.0), (CURRENT, "latest", 0.0), (SILENT, "neither", 0.0)],
)
def test_superseded_columns_per_compaction_and_conversation(summary, status, rate):
    losses = measure(trace_with(summary, "hand"))
    row = losses.compactions.iloc[0]
    assert row["superseded_updates"] == 1
    assert row["superseded_rate"] == pytest.approx(rate)
    assert (row["superseded_latest"], row["superseded_only"]) == (int(status == "latest"), int(status == "superseded"))
    assert list(losses.updates.columns) == list(UPDATE_COLUMNS)
    [update] = losses.updates.to_dict("records")
    assert (update["kind"], update["superseded"], update["latest"], update["status"]) == (
        "port",
        "6543",
        "6544",
        status,
    )
    assert (update["superseded_index"], update["latest_index"]) == (1, 4)
    conversation = losses.conversation.iloc[0]
    assert conversation["superseded_rate"] == pytest.approx(rate)
    assert conversation["superseded_only"] == int(status == "superseded")


def test_update_probes_are_scored_in_the_next_steps_context():
    stale = measure(trace_with(STALE, "stale"))
    [probe] = stale.probes.to_dict("records")
    assert probe["type"] == "update" and probe["superseded_answer"] == "port 6543"
    # the kept tail (messages 6-7) no longer shows either port: the summary decides
    assert probe["superseded_in_context"] and not probe["in_context"]
    assert stale.conversation.iloc[0]["superseded_probe_rate"] == 1.0
    current = measure(trace_with(CURRENT, "current"))
    [probe] = current.probes.to_dict("records")
    assert probe["in_context"] and probe["superseded_in_context"]  # the summary names both, the current one counts
    assert current.conversation.iloc[0]["superseded_probe_rate"] == 0.0
    silent = measure(trace_with(SILENT, "silent"))
    assert (
        silent.conversation.iloc[0]["superseded_probe_rate"] == 0.0
        and silent.conversation.iloc[0]["probe_presence"] == 0.0
    )


def test_an_update_probe_counts_only_when_the_span_holds_both_values():
    conversation = port_conversation()
    row = {
        "compaction_id": 0,
        "conversation_id": conversation.id,
        "step": 1,
        "turn": 0,
        "trigger": "auto",
        "span_start": 1,
        "span_end": 4,
        "n_recorded": 5,
        "older_messages": 3,
        "older_tokens": 60,
        "recent_messages": 1,
        "recent_tokens": 20,
        "summary_tokens": 10,
        "applied": True,
        "skip_reason": None,
        "summary_text": STALE,
        "summarizer": "early",
    }
    losses = measure(
        Trace.from_rows(
            conversation,
            [],
            [row],
            TraceSettings.from_record({"summarizer": "early", "max_tokens": 100, "keep_recent_tokens": 20}),
            [],
        )
    )
    assert len(losses.probes) == 0
    assert losses.compactions.iloc[0]["superseded_updates"] == 0  # the change comes after the span


def test_compare_pairs_superseded_rate_with_its_direction():
    result = compare(
        {"stale": trace_with(STALE, "stale"), "current": trace_with(CURRENT, "current")},
        metrics=["superseded_rate"],
        resamples=200,
    )
    [pair] = result.pairwise.to_dict("records")
    assert (pair["a"], pair["b"], pair["mean_a"], pair["mean_b"]) == ("stale", "current", 1.0, 0.0)
    assert pair["loss_rate"] == 1.0  # a higher superseded rate is worse: stale loses
    assert "superseded_rate" in default_metrics() and not metric("superseded_rate").higher_is_better


def test_update_probes_parse_and_round_trip(tmp_path):
    good = {
        "question": "Port?",
        "answer": "6544",
        "type": "update",
        "message_index": 4,
        "superseded_answer": "6543",
        "superseded_index": 1,
    }
    [probe] = parse_probes([good], "p.json", 8)
    assert (probe.superseded_answer, probe.superseded_index) == ("6543", 1)
    assert probe.to_dict() == good
    with pytest.raises(InputError, match=r"probe 0, field 'superseded_answer'"):
        parse_probes([{**good, "superseded_answer": ""}], "p.json", 8)
    with pytest.raises(InputError, match=r"probe 0, field 'superseded_index'.*before message_index 4"):
        parse_probes([{**good, "superseded_index": 5}], "p.json", 8)
    import zett_lab

    conversation = port_conversation()
    path = conversation.save(tmp_path / "ports.json")
    [loaded] = zett_lab.load_all(path)
    assert loaded.probes == conversation.probes


# --------------------------------------------------------------------------------------------- the fixtures' gold


def test_detector_finds_every_gold_update_probe_of_the_fixtures(fixture_conversations):
    """Recall against the planted update probes, and precision against them (every other detection is reported)."""
    gold = found = detections = matching = 0
    for conversation in fixture_conversations:
        probes = [p for p in conversation.probes if p.type == "update"]
        updates = find_updates(observe(conversation.messages))

        def matches(update, probe):
            return (
                update.status_in(probe.answer) == "latest" and update.status_in(probe.superseded_answer) == "superseded"
            )

        gold += len(probes)
        found += sum(any(matches(u, p) for u in updates) for p in probes)
        detections += len(updates)
        matching += sum(any(matches(u, p) for p in probes) for u in updates)
    print(
        f"\nupdate detector on the fixtures: recall {found}/{gold}, "
        f"precision against the gold probes {matching}/{detections}"
    )
    assert gold >= 15 and found == gold
    assert matching / detections >= 0.6


def test_every_attempt_of_a_fixture_trace_is_measured_against_the_updates_of_its_span(fixture_conversations):
    """measure() folds the updates on from attempt to attempt: each attempt's rows and columns are
    exactly those of find_updates over its own span."""
    continued = updates = 0  # attempts measured after an earlier one of their trace; update rows
    for conversation in fixture_conversations:
        trace = replay(conversation, max_tokens=4_000, keep_recent_tokens=1_000, summarizer="extractive", cache=False)
        losses = measure(trace, anchors=False)
        observations = observe(conversation.messages)
        measured = {int(row["compaction_id"]): row for row in losses.compactions.to_dict("records")}
        expected_rows = []
        attempts = 0
        for row in trace.compactions.sort_values("compaction_id").to_dict("records"):
            cid, summary = int(row["compaction_id"]), row["summary_text"]
            if is_missing(summary) or is_missing(row["span_start"]):
                assert is_missing(measured[cid]["superseded_updates"])
                continue
            found = find_updates(observations, int(row["span_start"]), int(row["span_end"]))
            statuses = [u.status_in(summary) for u in found]
            expected_rows += [
                (cid, u.kind, u.key, u.name, " | ".join(u.superseded), u.latest, u.superseded_index, u.latest_index, s)
                for u, s in zip(found, statuses, strict=True)
            ]
            columns = measured[cid]
            assert columns["superseded_updates"] == len(found)
            assert columns["superseded_latest"] == statuses.count("latest")
            assert columns["superseded_only"] == statuses.count("superseded")
            assert columns["superseded_rate"] == pytest.approx(
                ratio(statuses.count("superseded"), len(found)), nan_ok=True
            )
            attempts += 1
        names = ["compaction_id", "kind", "key", "name", "superseded", "latest", "superseded_index", "latest_index"]
        measured_rows = list(losses.updates[[*names, "status"]].itertuples(index=False, name=None))
        assert measured_rows == expected_rows
        updates += len(expected_rows)
        continued += max(0, attempts - 1)
    assert continued >= 10 and updates >= 30  # the fold went on many times, over spans holding updates


# --------------------------------------------------------------------------------------------- judged QA (opt-in)


class LastPortAnswerer:
    """Answers with the last 'port NNNN' the transcript mentions (what a reader of a stale summary would say)."""

    retry = RetryOptions(max_retries=0)
    identity = "last-port-answerer"

    async def stream(self, request):
        transcript = request.messages[-1].content.rpartition("Question: ")[0]
        ports = re.findall(r"port \d+", transcript)
        text = ports[-1] if ports else "NOT IN CONTEXT"
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content=text), usage=ModelUsage(input_tokens=50, output_tokens=3))
        )


class StrictJudge:
    """1 for the gold answer, 0 otherwise; keeps the prompts it saw."""

    retry = RetryOptions(max_retries=0)
    identity = "strict-judge"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def stream(self, request):
        prompt = request.messages[-1].content
        self.prompts.append(prompt)
        gold = prompt.split("Gold answer: ")[1].split("\n")[0]
        answer = prompt.split("Answer to grade: ")[1].split("\n")[0]
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content="1" if answer == gold else "0")))


def test_judged_qa_scores_update_probes_and_names_the_superseded_answer():
    from zett_lab.measure.judged import run_judged

    judge = StrictJudge()
    stale = run_judged(trace_with(STALE, "stale"), answerer=LastPortAnswerer(), judge=judge, cache=False)
    [row] = stale.rows.to_dict("records")
    assert (row["type"], row["superseded_answer"], row["post_answer"]) == ("update", "port 6543", "port 6543")
    assert (row["post"], row["ceiling"], row["floor"], row["nr"]) == (0.0, 1.0, 0.0, 0.0)
    assert row["post_superseded"] is True
    assert all(
        "Superseded answer (an earlier value that is no longer true" in p and "port 6543" in p for p in judge.prompts
    )
    current = run_judged(trace_with(CURRENT, "current"), answerer=LastPortAnswerer(), judge=StrictJudge(), cache=False)
    [row] = current.rows.to_dict("records")
    assert (row["post"], row["nr"], row["post_superseded"]) == (1.0, 1.0, False)


def test_superseded_rate_in_sweeps_and_plots(fixture_conversations):
    from zett_lab.show import plots
    from zett_lab.study import recommend, sweep

    billing = [c for c in fixture_conversations if c.id == "billing-rounding"]
    result = sweep(
        billing, max_tokens=[20_000], keep_recent_tokens=[6_000], summarizers=["truncate", "mask"], executor="serial"
    )
    table = result.results
    assert {"superseded_rate", "superseded_updates", "superseded_only", "superseded_probe_rate"} <= set(table.columns)
    assert table["superseded_updates"].dtype == "Int64" and (table["superseded_updates"] > 0).all()
    assert recommend(result, "superseded_rate <= 1") is not None
    comparison = compare(
        {"truncate": trace_with(STALE, "t"), "mask": trace_with(CURRENT, "m")},
        metrics=["superseded_rate"],
        resamples=200,
    )
    figure = plots.summarizer_comparison(comparison)
    legend = figure.axes[0].get_legend() or figure.legends[0]  # a figure of its own keeps the legend below the axes
    assert [t.get_text() for t in legend.get_texts()] == ["Superseded-only rate (lower is better)"]
