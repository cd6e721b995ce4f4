"""A report over a sweep of engines with one summarizer names engines as engines and compares them fairly."""

from __future__ import annotations

import re

import pytest

import zett_lab
from zett_lab.replay.policies import SplitTurnCompaction
from zett_lab.report import build_report_data
from zett_lab.show.report import Report

ENGINES = {"stock": None, "split-turn": SplitTurnCompaction}


@pytest.fixture(scope="module")
def engine_report(fixture_conversations) -> Report:
    conversations = fixture_conversations[:3]
    grid = zett_lab.sweep(
        conversations,
        max_tokens=[6_300, 13_000],
        keep_recent_tokens=[1_600],
        summarizers=["anchors"],
        engines=ENGINES,
        executor="serial",
        cache=False,
    )
    return Report(sweep=grid, date="2025-01-01")


def _text(page: str) -> str:
    for block in ("script", "style", "svg"):
        page = re.sub(rf"<{block}.*?</{block}>", "", page, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def test_an_engine_comparison_names_engines_and_its_summarizer(engine_report: Report) -> None:
    data = engine_report.data
    assert data.arms.by == "engine" and data.arms.counted == "2 engine(s) × 1 summarizer(s)"
    assert data.studied["summarizers"] == ["anchors"] and data.studied["engines"] == ["stock", "split-turn"]
    page = _text(engine_report.to_html())
    assert "2 engine(s) × 1 summarizer(s)" in page and "Summarizers anchors Engines compared stock, split-turn" in page
    assert "Loss by engine" in page and "Loss by summarizer" not in page
    markdown = engine_report.to_markdown()
    assert "| Summarizers | anchors |" in markdown and "| Engines compared | stock, split-turn |" in markdown
    assert "## Loss by engine" in markdown


def test_an_engine_comparison_pairs_the_engines_on_every_metric(engine_report: Report) -> None:
    comparison = engine_report.data.comparison
    assert comparison is not None and set(comparison.names) == {"stock", "split-turn"}
    assert int(comparison.matched["matched"].min()) > 0
    measured = comparison.summary.dropna(subset=["mean"])
    assert {"probe_presence", "lost_but_needed", "needed_anchor_recall"} <= set(measured["metric"])
    (note,) = comparison.notes  # the summarizer every engine ran selects by anchors: the bias is shared
    assert "that bias is shared" in note and "built from the metric's own vocabulary: it keeps" not in note
    assert not [a for a in engine_report.data.alerts if a.kind == "own_vocabulary"]


def test_an_engine_comparisons_verdict_names_the_engine_and_the_summarizer(engine_report: Report) -> None:
    rec = engine_report.data.recommendation
    assert rec is not None and rec["summarizer"] in ("stock", "split-turn")  # the arm, as the tables name it
    assert re.match(r"Recommended: engine (stock|split-turn) with summarizer anchors at max_tokens=", rec["verdict"])


def test_a_summarizer_comparison_still_names_summarizers(fixture_conversations) -> None:
    grid = zett_lab.sweep(
        fixture_conversations[:2],
        max_tokens=[6_300],
        keep_recent_tokens=[1_600],
        summarizers=["anchors", "truncate"],
        executor="serial",
        cache=False,
    )
    data = build_report_data(sweep=grid)
    assert data.arms.by == "summarizer" and data.arms.counted == "2 summarizer(s)"
    assert data.studied["summarizers"] == ["anchors", "truncate"] and data.studied["engines"] == []
    assert (
        data.comparison is not None and "anchors is built from the metric's own vocabulary" in data.comparison.notes[0]
    )
