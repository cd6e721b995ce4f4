"""Alerts (issue 29): each kind fires on a case made for it, not on a clean one, and links to its evidence."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from zett_agent.messages import AssistantMessage, SystemMessage, UserMessage

import zett_lab
from tests.helpers import coding_conversation
from zett_lab.replay.schema import NO_TURN_BOUNDARY
from zett_lab.show.report import Report
from zett_lab.study import recommend
from zett_lab.study.alerts import study_alerts

FAILURES = ["what", "summarizer", "kind", "cause", "count"]


def _results(**columns: list) -> pd.DataFrame:
    """Two conversations × one clean setting per summarizer given; ``columns`` override per row."""
    rows = []
    for summarizer in ("truncate", "mask"):
        for conversation in ("c0", "c1"):
            rows.append(
                {
                    "conversation_id": conversation,
                    "engine": "stock",
                    "summarizer": summarizer,
                    "summarizer_identity": f"{summarizer}(budget=0.1)",
                    "max_tokens": 4000,
                    "keep_recent_tokens": 1000,
                    "error": None,
                    "failed": 0,
                    "steps": 20,
                    "steps_over_budget": 0,
                    "steps_no_boundary": 0,
                    "steps_only_checkpoints": 0,
                    "rejected_not_smaller": 0,
                    "thrash_compactions": 0,
                    "tail_over_budget": 0,
                    "lost_but_needed": 1 if summarizer == "truncate" else 2,
                    "total_input_tokens": 1000,
                    "superseded_rate": 0.0,
                }
            )
    table = pd.DataFrame(rows)
    for column, values in columns.items():
        table[column] = values
    return table


def _kinds(alerts) -> list[str]:
    return [a.kind for a in alerts]


def test_a_clean_study_has_no_alert():
    table = _results()
    assert study_alerts(table, recommend(table), pd.DataFrame(columns=FAILURES)) == []


def test_failed_summaries():
    table = _results(failed=[0, 0, 0, 3])
    counts = pd.DataFrame(
        [["summary call", "mask", "RuntimeError", "RuntimeError: provider exploded", 3]], columns=FAILURES
    )
    [alert] = study_alerts(table, recommend(table), counts)
    assert (alert.kind, alert.severity, alert.title) == ("failed_summaries", "error", "3 summary call(s) failed")
    assert (
        "provider exploded" in alert.detail and "the 1 setting(s) they belong to are never recommended" in alert.detail
    )
    assert [e.section for e in alert.evidence] == ["failures"]
    assert "no setting is recommended" not in alert.detail


def test_failed_summaries_in_every_setting_say_that_nothing_is_recommended():
    table = _results(failed=[0, 2, 1, 0])
    counts = pd.DataFrame([["summary call", "mask", "RuntimeError", "RuntimeError: down", 3]], columns=FAILURES)
    [alert] = study_alerts(table, None, counts)
    assert "the 2 setting(s) they belong to are never recommended" in alert.detail
    assert alert.detail.endswith("Every setting has one, so no setting is recommended.")


def test_steps_over_budget_with_their_cause_and_the_split_turn_suggestion():
    table = _results(steps_over_budget=[0, 12, 0, 12], steps_no_boundary=[0, 12, 0, 12])
    choice = recommend(table)
    [alert] = study_alerts(table, choice)
    assert (
        alert.kind == "over_budget"
        and alert.title == "12 of 40 model steps at the recommended setting were sent over max_tokens"
    )
    assert f"{NO_TURN_BOUNDARY} at 12 step(s)" in alert.detail and "SplitTurnCompaction" in alert.detail
    assert alert.figures["steps_over_budget"] == 12
    assert [(e.section, e.conversation_id) for e in alert.evidence] == [("timeline", "c1"), ("recommendation", None)]
    # a cause the split-turn engine does not address: no suggestion
    rejected = _results(steps_over_budget=[0, 5, 0, 5], rejected_not_smaller=[0, 5, 0, 5])
    [alert] = study_alerts(rejected, recommend(rejected))
    assert "summary not smaller at 5 step(s)" in alert.detail and "SplitTurnCompaction" not in alert.detail


def test_thrash_of_both_kinds():
    table = _results(thrash_compactions=[0, 0, 4, 0], tail_over_budget=[1, 0, 0, 0])
    [alert] = study_alerts(table, recommend(table))
    assert alert.kind == "thrash" and alert.figures == {"thrash_compactions": 4, "tail_over_budget": 1, "settings": 2}
    assert "4 back-to-back compaction(s) freed less than 10% of the context" in alert.detail
    assert "1 compaction(s) left the system prompt and the kept tail at or above max_tokens" in alert.detail
    assert [e.setting for e in alert.evidence] == [("mask", 4000, 1000), ("truncate", 4000, 1000)]


def test_thrash_names_a_last_setting_rather_than_one_more_and_says_most_only_when_they_have_more():
    def table_of(totals: list[int]) -> pd.DataFrame:
        rows = _results(tail_over_budget=[0, 0, 0, 0]).iloc[:1]
        frames = [rows.assign(max_tokens=4000 + i, tail_over_budget=total) for i, total in enumerate(totals)]
        return pd.concat(frames, ignore_index=True)

    [even] = study_alerts(table_of([1, 1, 1, 1]), None)  # four settings, one each: all named, none "most"
    assert "most at" not in even.detail and "more setting" not in even.detail and even.detail.count("(1)") == 4
    [uneven] = study_alerts(table_of([3, 1, 1, 1, 1]), None)
    assert "most at" not in uneven.detail and "; and 2 more setting(s)" in uneven.detail  # (1) named, (1) left out
    [ranked] = study_alerts(table_of([3, 3, 2, 1, 1]), None)
    assert "most at" in ranked.detail and "; and 2 more setting(s)" in ranked.detail


def test_superseded_values_above_the_tolerance():
    table = _results(superseded_rate=[0.0, 0.0, 0.5, 0.3])
    alerts = study_alerts(table, recommend(table))
    [alert] = alerts
    assert alert.kind == "superseded" and alert.figures == {"mask": pytest.approx(0.4)}
    assert "the summaries of mask carry only the superseded value for 0.400 of them" in alert.detail
    assert study_alerts(_results(superseded_rate=[0.0, 0.0, 0.05, 0.1]), None) == []


def test_a_summarizer_built_from_the_metrics_own_vocabulary():
    table = _results(summarizer_identity=["anchors(budget=0.1)"] * 2 + ["mask(budget=None)"] * 2)
    [alert] = study_alerts(table.assign(summarizer=["anchors"] * 2 + ["mask"] * 2), None)
    assert (alert.kind, alert.severity, alert.title) == (
        "own_vocabulary",
        "info",
        "anchors is built from the metric's own vocabulary",
    )
    assert "its needed-anchor recall, anchor retention" in alert.detail
    independent = alert.detail.split("does not depend on that vocabulary: ")[1]
    assert "probe presence" in independent and "superseded-only rate" in independent
    assert study_alerts(table, None, identities={"truncate": "truncate(budget=0.1)"}) == []


def _chatty() -> zett_lab.Conversation:
    messages = [SystemMessage(content="You are terse.")]
    for t in range(40):
        messages.append(UserMessage(content=f"Question {t}: what is item_{t}? " + "word " * 20))
        messages.append(AssistantMessage(content=f"Item_{t} is value {t}. " + "more " * 20))
    return zett_lab.Conversation(id="chatty", messages=messages)


def test_the_thrash_metrics_on_real_replays():
    def measured(conversation, max_tokens, keep):
        trace = zett_lab.replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="truncate")
        return zett_lab.measure(trace).conversation.iloc[0], trace

    # one short turn after another with a kept tail near max_tokens: every new turn compacts again, for little
    row, trace = measured(_chatty(), 1000, 900)
    assert row["thrash_compactions"] > 10 and row["tail_over_budget"] == 0
    steps = trace.steps[trace.steps["applied"].astype(bool)]
    assert ((steps["estimator_tokens"] - steps["context_tokens_after"]) < 0.1 * steps["estimator_tokens"]).any()
    row, _ = measured(_chatty(), 800, 200)
    assert row["thrash_compactions"] == 0
    # a kept tail as large as the budget: compactions that leave the context over max_tokens
    row, _ = measured(coding_conversation(turns=5), 600, 550)
    assert row["tail_over_budget"] > 0
    row, _ = measured(coding_conversation(turns=5), 600, 200)
    assert row["tail_over_budget"] == 0


def test_a_report_puts_alerts_first_and_links_each_to_its_evidence():
    report = Report.build(
        [coding_conversation(turns=5), _chatty()],
        ["anchors", "truncate"],
        {"max_tokens": [1000, 100_000], "keep_recent_tokens": [900]},
        executor="serial",
        cache=False,
        date="2025-01-01",
    )
    kinds = _kinds(report.alerts)
    assert {"thrash", "own_vocabulary"} <= set(kinds)
    assert [a["kind"] for a in report.document()["alerts"]] == kinds
    page = report.to_html()
    assert page.index('<section id="alerts">') < page.index('<section id="summary">')
    section = re.search(r'<section id="alerts">(.*?)</section>', page, re.S).group(1)
    links = re.findall(r'href="#([^"]+)"', section)
    assert links and all(f'id="{anchor}"' in page for anchor in links)
    assert "## Alerts" in report.to_markdown()
