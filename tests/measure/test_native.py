"""Recorded production summaries as subjects: native compactions compared on their own spans, and kept by imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import zett_lab
from zett_lab import SettingError, compare
from zett_lab.load.conversation import probes_sidecar_path as sidecar_path
from zett_lab.load.zett import write_sqlite
from zett_lab.measure.native import native_subject, native_trace, native_traces
from zett_lab.study.production import span_traces

ROOT = Path(__file__).resolve().parents[2]
CLAUDE = "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl"
OPENHANDS = "openhands/issue_10730_complete_trajectory_297_events.json"


def billing(fixture_conversations):
    return next(c for c in fixture_conversations if c.id == "billing-rounding")


def test_subjects_are_named_by_kind(fixture_conversations):
    assert native_subject("claude-code-compact") == "native:claude-code"
    assert native_subject("zett-snapshot") == "native:zett-agent"
    assert native_subject("something-new") == "native:something-new"
    traces = native_traces(fixture_conversations)
    assert list(traces) == ["native:zett-agent"]
    [trace] = traces["native:zett-agent"]
    assert trace.conversation.id == "billing-rounding" and set(trace.compactions["summarizer"]) == {"native:zett-agent"}


def test_a_baseline_on_the_identical_span_reproduces_the_recorded_summary(fixture_conversations):
    """The first snapshot of billing-rounding was written live by FirstLineSummaryModel; summarizing the same
    raw span through the engine's summary step with the same model gives the same text."""
    sys.path.insert(0, str(ROOT / "fixtures"))
    try:
        from generate import SUMMARY_MODEL_ARGS, FirstLineSummaryModel
    finally:
        sys.path.remove(str(ROOT / "fixtures"))
    native = native_trace(billing(fixture_conversations))
    [same] = span_traces([native], FirstLineSummaryModel(**SUMMARY_MODEL_ARGS), cache=False)
    first_native, first_span = native.compactions.iloc[0], same.compactions.iloc[0]
    assert (first_span["span_start"], first_span["span_end"]) == (first_native["span_start"], first_native["span_end"])
    assert first_span["summary_text"] == first_native["summary_text"]
    assert first_span["summary_tokens"] == first_native["summary_tokens"]
    assert list(same.compactions["compaction_id"]) == list(native.compactions["compaction_id"])


def test_compare_accepts_a_native_subject_with_paired_cis_and_win_rates(fixture_conversations):
    result = compare({"native:zett-agent": fixture_conversations}, baselines=("anchors", "truncate"), resamples=300)
    snapshots = len(billing(fixture_conversations).native_compactions)
    assert result.matched.set_index("summarizer")["matched"].to_dict() == dict.fromkeys(
        ["native:zett-agent", "anchors", "truncate"], snapshots
    )
    pairs = result.pairwise[
        (result.pairwise["a"] == "native:zett-agent") & (result.pairwise["metric"] == "compression_ratio")
    ]
    assert set(pairs["b"]) == {"anchors", "truncate"} and (pairs["n"] == snapshots).all()
    assert pairs[["ci_low", "ci_high", "win_rate", "loss_rate"]].notna().all().all()
    units = result.units
    spans = units.groupby("summarizer")[["span_start", "span_end"]].apply(lambda f: sorted(map(tuple, f.to_numpy())))
    assert spans["native:zett-agent"] == spans["anchors"] == spans["truncate"]


def test_native_subjects_refuse_what_cannot_pair(fixture_conversations):
    trace = zett_lab.replay(
        billing(fixture_conversations), max_tokens=20_000, keep_recent_tokens=6_000, summarizer="mask"
    )
    with pytest.raises(SettingError, match="baselines=\\['mask'\\]"):
        compare({"native:zett-agent": fixture_conversations, "mask": [trace]})
    with pytest.raises(SettingError, match="no native compactions of 'native:claude-code'"):
        compare({"native:claude-code": fixture_conversations}, baselines=("mask",))
    with pytest.raises(SettingError, match="one native subject at a time"):
        compare({"native:zett-agent": fixture_conversations, "native:claude-code": fixture_conversations})


def test_shared_logs_with_native_compactions_compare_per_subject(agent_logs):
    conversations = zett_lab.load_all([agent_logs / CLAUDE, agent_logs / OPENHANDS])
    results = {
        subject: compare({subject: traces}, baselines=("mask",), resamples=200)
        for subject, traces in native_traces(conversations).items()
    }
    assert set(results) == {"native:claude-code", "native:openhands"}
    assert results["native:claude-code"].matched["matched"].tolist() == [1, 1]
    assert results["native:openhands"].matched["matched"].tolist() == [2, 2]


# --------------------------------------------------------------------------------------------- imports


def _natives(conversations):
    return {c.id: c.native_compactions for c in conversations}


def test_native_compactions_survive_neutral_json_and_sqlite(agent_logs, tmp_path):
    original = zett_lab.load_all([agent_logs / CLAUDE, agent_logs / OPENHANDS])
    assert sum(len(c.native_compactions) for c in original) == 3
    from zett_lab.load.neutral_writer import write_neutral

    write_neutral(original, tmp_path / "all.json")
    assert _natives(zett_lab.load_all(tmp_path / "all.json")) == _natives(original)
    write_sqlite(original, tmp_path / "all.sqlite")
    assert sidecar_path(tmp_path / "all.sqlite").is_file()
    again = zett_lab.load_all(tmp_path / "all.sqlite")
    assert _natives(again) == _natives(original)
    assert [c.messages for c in again] == [c.messages for c in original]


def test_zett_import_command_keeps_native_compactions_and_probes(fixture_conversations, agent_logs, tmp_path):
    out = tmp_path / "imported.sqlite"
    command = [
        sys.executable,
        "-m",
        "zett_lab.show.cli",
        "import",
        str(agent_logs / CLAUDE),
        str(ROOT / "fixtures" / "sessions.sqlite"),
        "-o",
        str(out),
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "native compaction(s)" in done.stdout and str(sidecar_path(out)) in done.stdout
    imported = {c.id: c for c in zett_lab.load_all(out)}
    claude = zett_lab.load_all(agent_logs / CLAUDE)
    for conversation in [*claude, *fixture_conversations]:
        assert imported[conversation.id].native_compactions == conversation.native_compactions, conversation.id
        assert imported[conversation.id].probes == conversation.probes, conversation.id
    again = subprocess.run(
        command, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=600
    )
    assert again.returncode != 0 and "already exists" in again.stderr


def test_bad_native_compactions_are_named(tmp_path):
    import json

    document = {
        "id": "x",
        "messages": [{"role": "user", "content": "hi"}],
        "native_compactions": [{"position": 5, "summary": "s"}],
    }
    (tmp_path / "bad.json").write_text(json.dumps(document))
    with pytest.raises(zett_lab.InputError, match="native compaction 0, field 'position'"):
        zett_lab.load_all(tmp_path / "bad.json")


# --------------------------------------------------------------------------------------------- the report


def test_report_section_production_summaries(fixture_conversations):
    import dataclasses
    import json

    conversation = billing(fixture_conversations)
    natives = list(conversation.native_compactions)
    lost_text = dataclasses.replace(natives[1], summary="")  # a log that lost the summary text
    edited = dataclasses.replace(conversation, native_compactions=[natives[0], lost_text, natives[2]])
    report = zett_lab.Report.build(
        [edited],
        summarizers=["anchors", "mask"],
        grid={"max_tokens": [20_000], "keep_recent_tokens": [6_000]},
        executor="serial",
        date="2025-01-01",
    )
    native = json.loads(report.to_json())["native"]
    assert [(e["subject"], e["native_id"], e["summary_missing"]) for e in native] == [
        ("native:zett-agent", 0, False),
        ("native:zett-agent", 1, True),
        ("native:zett-agent", 2, False),
    ]
    first = native[0]
    assert set(first["summarizers"]) == {"native:zett-agent", "anchors", "mask"}
    assert first["span_start"] == 1 and first["estimate_before"] > first["span_tokens"] > 0
    assert first["summarizers"]["native:zett-agent"]["status"] == "applied"
    assert native[1]["summarizers"]["native:zett-agent"]["status"] == "summary missing from log"
    assert native[1]["summarizers"]["native:zett-agent"]["compression_ratio"] is None
    assert native[1]["summarizers"]["anchors"]["compression_ratio"] > 0  # the baselines still summarize the span
    html = report.to_html()
    assert '<section id="production"><h2>Production summaries</h2>' in html and 'href="#production"' in html
    assert "The log lost this summary&#x27;s text" in html or "The log lost this summary's text" in html
    assert "## Production summaries" in report.to_markdown()


def test_report_without_native_compactions_has_no_production_section(fixture_conversations):
    import json

    small = [c for c in fixture_conversations if c.id == "auth-refresh-token"]
    report = zett_lab.Report.build(
        small,
        summarizers=["truncate"],
        grid={"max_tokens": [3_000], "keep_recent_tokens": [1_000]},
        executor="serial",
        date="2025-01-01",
    )
    assert json.loads(report.to_json())["native"] == []
    assert 'id="production"' not in report.to_html() and "Production summaries" not in report.to_markdown()


def test_report_from_traces_says_which_summarizers_could_not_summarize_the_spans(fixture_conversations):
    from tests.helpers import CountingSummarizer

    conversation = billing(fixture_conversations)
    traces = [
        zett_lab.replay(conversation, max_tokens=20_000, keep_recent_tokens=6_000, summarizer=model, cache=False)
        for model in ("mask", CountingSummarizer())
    ]
    report = zett_lab.Report(traces=traces, date="2025-01-01")
    assert report.data.native_skipped == ["counting-summarizer"]
    [first, *_] = report.data.native
    assert set(first["summarizers"]) == {"native:zett-agent", "mask(budget=None)"}  # rebuilt as "mask"
    assert "Not summarized on these spans: counting-summarizer" in report.to_html()
    assert "Not summarized on these spans: counting-summarizer" in report.to_markdown()
