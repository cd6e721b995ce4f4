"""The HTML/Markdown/JSON report: contents, escaping, secrets, determinism, isolation in notebooks."""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import itertools
import json
import re
from pathlib import Path

import markupsafe
import pandas as pd
import pytest
import zett_agent
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)

from tests.helpers import coding_conversation
from zett_lab import Conversation, SettingError, replay
from zett_lab.errors import OutputError
from zett_lab.measure.catalogue import default_metrics, metric
from zett_lab.replay.schema import BELOW_THRESHOLD
from zett_lab.report.lost import lost_but_needed_items
from zett_lab.show.report import Report, content
from zett_lab.show.report.content import GLOSSARY
from zett_lab.show.report.render import script_json
from zett_lab.study.recommendation import DEFAULT_OBJECTIVES

DATE = "2025-02-03"
GRID = {"max_tokens": [900, 1800], "keep_recent_tokens": [250, 500]}
SUMMARIZERS = ["truncate", "mask"]

#: Payloads that must come out of the report as text, never as markup or script.
PAYLOADS = (
    "<script>window.__zl_pwned = 'script'</script>",
    "</textarea><img src=x onerror=\"window.__zl_pwned='img'\">",
    '" onload="window.__zl_pwned=\'attr\'" data-x="',
    "javascript:window.__zl_pwned='href'",
    "</script><script>window.__zl_pwned='close'</script>",
    "<svg onload=\"window.__zl_pwned='svg'\"></svg> \u2028 \u2029 <!-- --> ]]> <style>body{display:none}</style>",
)
#: A conversation id that is itself markup.
EVIL_ID = "evil-<b>id</b>\"'&"


def evil_conversation(turns: int = 6) -> Conversation:
    """A coding session whose every message carries HTML/JS payloads (user, tool results, calls, answers)."""
    messages = [SystemMessage(content="You are a coding agent. " + PAYLOADS[0])]
    for t in range(turns):
        payload = PAYLOADS[t % len(PAYLOADS)]
        messages.append(
            UserMessage(
                content=f"Turn {t}: {payload} please fix src/app_{t}.py and never touch migrations/. " + "detail " * 30
            )
        )
        call_id = f"call-{t}"
        messages.append(
            AssistantMessage(
                content="",
                tool_calls=(
                    ToolCall(id=call_id, name="read_file", arguments={"path": f"src/app_{t}.py", "note": payload}),
                ),
            )
        )
        body = "\n".join(f"def handler_{t}_{k}(): return 'https://evil.example/{k}?q={payload}'" for k in range(25))
        messages.append(ToolMessage(tool_call_id=call_id, name="read_file", content=body, success=True))
        earlier = f" Earlier: src/app_{t - 1}.py handler_{t - 1}_3" if t else ""
        messages.append(AssistantMessage(content=f"Fixed src/app_{t}.py. {payload}{earlier}"))
    return Conversation(id=EVIL_ID, messages=messages, metadata={"title": "title " + PAYLOADS[1]})


def build(conversations, **options) -> Report:
    options.setdefault("date", DATE)
    return Report.build(conversations, SUMMARIZERS, GRID, executor="serial", cache=False, **options)


@pytest.fixture(scope="module")
def report() -> Report:
    return build([coding_conversation(turns=6, cid="plain-session"), evil_conversation()], explore=EVIL_ID)


@pytest.fixture(scope="module")
def page(report: Report) -> str:
    return report.to_html()


# --- contents ---------------------------------------------------------------------------------------------


def test_every_section_is_there(report: Report, page: str) -> None:
    for section in ("summary", "study", "metrics", "explore", "timelines", "sweep", "lost", "costs", "glossary"):
        assert f'<section id="{section}">' in page, section
    assert page.startswith("<!DOCTYPE html>")
    assert f"zett-agent {zett_agent.__version__}" in page
    assert DATE in page
    assert "o200k" in page  # the counter, by its identity
    for name in SUMMARIZERS:
        assert html.escape(name) in page
    for value in (900, 1800, 250, 500):
        assert f"{value:,}" in page
    assert "plain-session" in page
    assert '<div class="callout" id="recommendation"><p class="verdict">Recommended: ' in page
    # comparison, anchors, 2 timelines, heatmaps, Pareto (a timeline's figure has an id: alerts link to it)
    assert page.count("<figure") >= 6


def test_study_facts(report: Report) -> None:
    study = report.document()["study"]
    assert study["zett_agent_version"] == zett_agent.__version__
    assert study["summarizers"] == SUMMARIZERS
    assert study["grid"] == GRID
    assert study["replays"] == 2 * len(SUMMARIZERS) * 4
    sizes = {c["id"]: c for c in study["conversations"]}
    assert sizes["plain-session"]["messages"] == len(coding_conversation(turns=6).messages)
    assert sizes["plain-session"]["tokens"] > 1000
    assert study["date"] == DATE


def test_metrics_have_confidence_intervals(report: Report) -> None:
    metrics = report.document()["metrics"]
    rows = [r for r in metrics["rows"] if r["metric"] == "needed_anchor_recall"]
    assert {r["summarizer"] for r in rows} == set(SUMMARIZERS)
    for row in rows:
        assert row["n"] > 0
        assert row["ci_low"] <= row["mean"] <= row["ci_high"]
        assert row["ci_low"] >= 0 and row["ci_high"] <= 1
    assert metrics["pairwise"], "two summarizers give a paired comparison"
    assert {r["metric"] for r in metrics["rows"]} <= set(default_metrics())


def test_glossary_defines_every_metric_shown(page: str) -> None:
    terms = dict(GLOSSARY)
    metrics = [metric(name) for name in (*default_metrics(), "lost_but_needed")]
    for needed in [m.label for m in metrics] + [
        "confidence interval",
        "Pareto front",
        "max_tokens",
        "keep_recent_tokens",
    ]:
        assert needed in terms
        assert f"<dt>{html.escape(needed)}</dt>" in page
    for entry in metrics:  # one home for a metric's definition and direction: the catalogue
        assert terms[entry.label].startswith(entry.definition)
        assert terms[entry.label].endswith("Higher is better." if entry.higher_is_better else "Lower is better.")


def test_the_glossary_speaks_of_what_the_page_shows_in_the_pages_words(page: str) -> None:
    """Every glossary term appears on the page outside the glossary (a metric the page never shows needs no entry),
    every metric the recommendation ranks by has one, and no definition names a table's raw column (snake_case:
    only the engine's own parameters, max_tokens and keep_recent_tokens, are written so)."""
    body = page[: page.index('<section id="glossary">')]
    shown = [(t, text) for t, text in GLOSSARY if t != "production summaries" or 'id="production"' in body]
    for term, text in shown:
        words = [w.strip() for w in re.split(r" / |, ", term)] + [w for w, t in content._SAME_AS.items() if t == term]
        assert any(html.escape(w) in body or html.escape(w.lower()) in body.lower() for w in words), term
        raw = set(re.findall(r"\b[a-z]+(?:_[a-z0-9]+)+\b", text)) - {"max_tokens", "keep_recent_tokens"}
        assert not raw, (term, raw)
    terms = dict(GLOSSARY)
    assert all(metric(name).label in terms for name in DEFAULT_OBJECTIVES)


def test_headers_and_terms_explain_themselves(page: str) -> None:
    """Every metric's column header shows its catalogue definition on hover; the words a reader meets before the
    glossary (span, threshold crossed with no window, primary input tokens) carry theirs where they appear."""
    for name in default_metrics():
        entry = metric(name)
        assert f'title="{markupsafe.escape(entry.definition)}' in page, name
        assert f'<span class="term">{html.escape(entry.label)}</span>' in page
    # the summary's verdict table names the recommendation's figures, total input tokens among them (it named
    # primary input tokens before the recommendation ranked by total input tokens)
    for word in ("threshold crossed, no window", "span", "Total input tokens", "max_tokens"):
        assert re.search(rf'<abbr class="term" title="[^"]+">{re.escape(word)}</abbr>', page), word


def test_long_parts_are_folded_with_their_counts(report: Report, page: str) -> None:
    summaries = re.findall(r'<details class="more"[^>]*><summary>(.*?)</summary>', page, re.S)
    glossary = report.document()["glossary"]
    assert f"{len(glossary)} terms and metrics" in " ".join(summaries)
    assert any(re.search(r"\d+ more timeline", s) for s in summaries)
    assert any(s.startswith("Every configuration: ") for s in summaries)


def test_no_number_in_scientific_notation(page: str) -> None:
    text = re.sub(r"<svg.*?</svg>|<script.*?</script>|<style.*?</style>", "", page, flags=re.S)
    assert not re.findall(r"[\d.]e[+-]\d", text)


def test_lost_items_carry_span_and_summary(report: Report) -> None:
    items = report.document()["lost_but_needed"]
    assert items, "truncate and mask drop tool outputs that the session refers to later"
    for item in items:
        assert item["value"] and item["type"]
        assert item["next_use_index"] is not None
        assert item["lost_by"]
        for entry in item["lost_by"]:
            assert entry["summarizer"] in SUMMARIZERS
            assert entry["span_start"] is not None and entry["span_end"] > entry["span_start"]
            assert entry["summary_text"]


class CountingTrace:
    """A trace that counts how often its compaction table is read (everything else is the trace's own)."""

    def __init__(self, trace) -> None:
        self.trace = trace
        self.compaction_reads = 0

    @property
    def compactions(self) -> pd.DataFrame:
        self.compaction_reads += 1
        return self.trace.compactions

    def __getattr__(self, name: str):
        return getattr(self.trace, name)


def test_lost_items_read_each_replays_compaction_table_once(report: Report) -> None:
    """The summaries beside the listed items come from one read of each replay's table, however many items there are
    (a sweep's replays read their tables from disk)."""
    data = report.data
    counting = [(label, CountingTrace(trace)) for label, trace in data.entries]
    items = lost_but_needed_items(
        counting, data.recommendation, data.summarizers, lambda trace: data.losses_for(trace.trace), 30
    )
    assert len(items) > 1
    assert items == data.lost_items
    assert max(trace.compaction_reads for _, trace in counting) == 1


def test_dropped_constraints_are_listed_in_every_format(report: Report, page: str) -> None:
    items = report.document()["dropped_constraints"]
    assert isinstance(items, list)
    for item in items:
        assert item["value"] and item["dropped_by"]
        assert {entry["summarizer"] for entry in item["dropped_by"]} <= set(SUMMARIZERS)
    assert '<h3 id="dropped-constraints">Constraints dropped</h3>' in page
    assert "### Constraints dropped" in report.to_markdown()


def explorer_cells(page: str) -> dict[str, dict]:
    """The explorer's cells of a page, unpacked as its script unpacks them (base64, then gzip, then JSON)."""
    data = json.loads(
        re.search(r'<script type="application/json" id="zl-explore-data">(.*?)</script>', page, re.S).group(1)
    )
    return {key: json.loads(gzip.decompress(base64.b64decode(text))) for key, text in data["cells"].items()}


def test_explorer_has_one_cell_per_setting_and_summarizer(report: Report, page: str) -> None:
    cells = explorer_cells(page)
    data = {"cells": cells}
    assert len(data["cells"]) == len(SUMMARIZERS) * 4
    svgs = {cell["svg"] for cell in data["cells"].values()}
    assert len(svgs) > 1, "different settings draw different timelines"
    for cell in data["cells"].values():
        assert cell["svg"].startswith("<svg") and cell["steps"]
    rec = report.recommendation
    chosen = f"{SUMMARIZERS.index(rec['summarizer'])}|{rec['max_tokens']}|{rec['keep_recent_tokens']}"
    assert chosen in data["cells"]


def step_rows(cell: dict) -> list[list[str]]:
    """A cell's step table as the page's script writes it from its columns (differences summed, ``1,234``)."""
    columns = []
    for column in cell["steps"]:
        if "d" in column:
            totals = list(itertools.accumulate(column["d"]))
            columns.append([f"{total:,}" for total in totals])
        else:
            columns.append([column["v"][code] for code in column["c"]])
    assert all(len(texts) == cell["rows"] for texts in columns)
    return [list(row) for row in zip(*columns, strict=True)]


def test_the_explorers_step_tables_are_the_steps_of_each_replay_as_written_elsewhere(report: Report, page: str) -> None:
    """Sent by column (numbers as differences), each cell's step table reads back as the trace's steps, written
    by formatting.count and the decision words."""
    from zett_lab.formatting import count

    cells = explorer_cells(page)
    for index, name in enumerate(report.summarizers):
        for max_tokens in GRID["max_tokens"]:
            for keep in GRID["keep_recent_tokens"]:
                trace = report.data.trace_for(report.explore_id, name, max_tokens, keep)
                steps = trace.steps
                expected = [
                    [
                        count(row.step),
                        count(row.turn),
                        count(row.estimate),
                        str(row.estimate_source),
                        "applied"
                        if row.applied
                        else ("" if row.skip_reason == BELOW_THRESHOLD else row.skip_reason or ""),
                        count(row.context_tokens_after),
                        "yes" if row.over_budget_after else "",
                    ]
                    for row in steps.itertuples(index=False)
                ]
                assert step_rows(cells[f"{index}|{max_tokens}|{keep}"]) == expected
                assert any(row[4] == "applied" for row in expected), "the explorer shows compactions"


def test_recommendation_is_on_the_grid(report: Report) -> None:
    rec = report.recommendation
    assert rec["summarizer"] in SUMMARIZERS
    assert rec["max_tokens"] in GRID["max_tokens"] and rec["keep_recent_tokens"] in GRID["keep_recent_tokens"]
    assert "ranked by steps over budget, then needed-anchor losses, then total input tokens" in rec["rule"]
    assert rec["verdict"].startswith(f"Recommended: {rec['summarizer']} at max_tokens={rec['max_tokens']:,}")


def test_budget_and_cost_maps_show_the_recommended_summarizer(report: Report, page: str) -> None:
    """The outlined cell of each map is the recommended setting's own figure, not a mean over other summarizers."""
    chosen = report.recommendation["summarizer"]
    assert f"Steps over budget — {chosen}" in page and "all summarizers</" not in page
    assert f"Model steps sent over max_tokens per conversation (lower is better), {chosen}." in page


def test_recommendation_from_constraints() -> None:
    report = build([coding_conversation(turns=5)], constraints="steps_over_budget <= 1000")
    [yours, superseded] = report.recommendation["constraints"]
    assert (yours["constraint"], yours["default"], yours["applied"]) == ("steps_over_budget <= 1000", False, True)
    assert superseded["default"] and superseded["constraint"] == "superseded_rate <= 0.1"
    # a constraint no setting meets rules nothing out (it used to fall back to another rule with a note)
    impossible = build([coding_conversation(turns=5)], constraints="needed_anchor_recall >= 2")
    assert not impossible.recommendation["constraints"][0]["applied"]
    assert "No setting meets needed-anchor recall ≥ 2 in every conversation" in impossible.recommendation["verdict"]


# --- self-contained, escaped, secret-free ---------------------------------------------------------------


def test_page_loads_nothing(page: str) -> None:
    assert not re.search(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"<(?:link|img|iframe|object|embed|audio|video|source)\b", page, re.I)
    assert "@import" not in page and not re.search(r"url\(\s*['\"]?(?:https?:)?//", page)
    csp = html.unescape(re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page).group(1))
    assert csp.startswith("default-src 'none';")
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    assert f"script-src 'sha256-{digest}';" in csp, "the policy allows exactly the page's own script"
    assert page.count("<script") == 2  # the data block and the page's own script


def test_conversation_content_is_escaped(page: str, report: Report) -> None:
    for raw in (
        "<script>window.__zl_pwned",
        "<img src=x",
        "</textarea>",
        "<svg onload",
        "<style>body{display:none}",
        '" onload="window',
        "<b>id</b>",
        "</script><script>window",
        "<!-- -->",
    ):
        assert raw not in page, raw
    assert page.count("</script>") == 2 and page.count("<style>") == 1
    assert "window.__zl_pwned" in page  # it is there, as text
    assert not re.search(r"""<[^>]+\s(?:on\w+)\s*=""", page.replace("<script>", ""), re.I), "no event handler attribute"
    assert not re.search(r"""(?:href|src)\s*=\s*["']?\s*javascript:""", page, re.I)
    assert markupsafe.escape(EVIL_ID) in page and EVIL_ID not in page
    assert "\u2028" not in re.search(r'id="zl-explore-data">(.*?)</script>', page, re.S).group(1)
    for other in (report.to_markdown(), report.to_json()):
        assert "<script>" not in other and "<img" not in other
    assert "<script>window.__zl_pwned" in report.to_json().encode().decode("unicode_escape")  # data kept, escaped


def test_script_json_is_inert_inside_a_script_element() -> None:
    text = script_json({"a": "</script><script>alert(1)</script> & \u2028\u2029 <!--", "b": [1, 2.5, None]})
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == {"a": "</script><script>alert(1)</script> & \u2028\u2029 <!--", "b": [1, 2.5, None]}


def test_no_api_key_or_environment_value_in_any_output(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.loopback import LoopbackServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test-secret-compatible")
    monkeypatch.setenv("ZETT_LAB_TEST_PRIVATE", "private-value-7c1e")
    cache_dir = tmp_path / "private-cache-dir-5d2a"
    cache_dir.mkdir()
    monkeypatch.setenv("ZETT_LAB_CACHE", str(cache_dir / "summaries.sqlite"))
    conversation = coding_conversation(turns=4, cid="secret-check")
    with LoopbackServer() as server:
        report = Report.build(
            [conversation],
            ["mask", f"openai-compatible:fake-model@{server.openai_url}"],
            GRID,
            executor="serial",
            date=DATE,
        )
        outputs = [report.to_html(), report.to_markdown(), report.to_json(), report._repr_html_()]
        assert any(
            r.headers.get("Authorization", r.headers.get("authorization", "")).endswith("sk-test-secret-compatible")
            for r in server.requests
        )
    for text in outputs:
        for secret in ("sk-test-secret", "private-value-7c1e", "private-cache-dir-5d2a", str(tmp_path)):
            assert secret not in text, secret
        assert "OPENAI_API_KEY" not in text and "ZETT_LAB_TEST_PRIVATE" not in text
    assert "fake-model" in outputs[0]  # the provider summarizer is in the report, by name


# --- determinism, files, notebooks --------------------------------------------------------------------


def test_same_inputs_give_the_same_bytes() -> None:
    conversations = [coding_conversation(turns=6, cid="plain-session"), evil_conversation()]
    first, second = build(conversations), build(conversations)
    assert first.to_html() == second.to_html()
    assert first.to_markdown() == second.to_markdown()
    assert first.to_json() == second.to_json()
    other_day = Report(traces=first.traces, date="2031-12-31", explore=first.explore_id)
    assert "2031-12-31" in other_day.to_html()


def test_date_never_enters_a_figure(report: Report, page: str) -> None:
    for figure in re.findall(r"<figure>(.*?)</figure>", page, re.S):
        assert DATE not in figure
    assert DATE not in json.dumps(explorer_cells(page))


def test_save_html_is_atomic_and_readable(report: Report, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    with pytest.raises(OutputError, match="already exists"):
        report.save_html(target)
    assert target.read_text(encoding="utf-8") == "old"
    report.save_html(target, overwrite=True)
    assert target.read_text(encoding="utf-8") == report.to_html()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
    assert target.stat().st_mode & 0o044, "readable by others, like any file the user writes"
    with pytest.raises(SettingError):
        report.save_html(tmp_path / "missing-folder" / "report.html")
    report.save(tmp_path / "report.md")
    report.save(tmp_path / "report.json")
    assert json.loads((tmp_path / "report.json").read_text())["format"] == "zett-lab-report"
    assert (tmp_path / "report.md").read_text().startswith("# ")


def test_repr_html_is_an_isolated_frame(report: Report) -> None:
    frame = report._repr_html_()
    assert frame.startswith("<iframe") and frame.endswith("</iframe>")
    assert 'sandbox="allow-scripts"' in frame
    source = re.search(r'srcdoc="([^"]*)"', frame).group(1)
    assert "<" not in source and '"' not in source
    assert html.unescape(source) == report.to_html()


def test_markdown_and_json_carry_the_findings(report: Report) -> None:
    markdown = report.to_markdown()
    for heading in (
        "## What was studied",
        "## Loss by summarizer",
        "## Lost but needed later",
        "## Costs",
        "## Glossary",
    ):
        assert heading in markdown
    document = json.loads(report.to_json())
    assert document["date"] == DATE and document["recommendation"]["summarizer"] in SUMMARIZERS
    assert len(document["results"]) == 2 * len(SUMMARIZERS) * 4


def test_report_from_traces_alone() -> None:
    conversation = coding_conversation(turns=6)
    traces = [
        replay(conversation, max_tokens=m, keep_recent_tokens=400, summarizer="truncate", cache=False)
        for m in (900, 1800)
    ]
    report = Report(traces=traces, date=DATE, title="Two thresholds")
    page = report.to_html()
    assert "Two thresholds" in page
    assert report.summarizers == ["truncate(budget=0.1)"]
    rows = [r for r in report.document()["metrics"]["rows"] if r["metric"] == "anchor_retention"]
    assert rows and rows[0]["n"] == 2 and rows[0]["ci_low"] <= rows[0]["mean"] <= rows[0]["ci_high"]


def test_bad_arguments() -> None:
    with pytest.raises(SettingError, match="at least one trace"):
        Report(traces=[])
    trace = replay(coding_conversation(turns=3), max_tokens=900, keep_recent_tokens=300, summarizer="mask", cache=False)
    with pytest.raises(SettingError, match="YYYY-MM-DD"):
        Report(traces=[trace], date="yesterday")
    with pytest.raises(SettingError, match="not a conversation"):
        Report(traces=[trace], explore="nope").to_html()


def test_replays_shown_in_full_keep_what_the_report_uses_read_from_the_sweep_or_measured_here_or_on_the_pool(
    monkeypatch, tmp_path
) -> None:
    """A report over a sweep reads the shown replays' lost anchors and counted flags the sweep kept (it measures
    nothing), also when an earlier sweep of this process ran some of its replays; over a sweep saved before they
    were kept it measures them, on the pool's workers when a pool runs."""
    from zett_lab import measure
    from zett_lab.measure.anchor_rows import retention_counts
    from zett_lab.measure.columns import ANCHOR_ROWS
    from zett_lab.report import measured as report_measured
    from zett_lab.report import report_sweep
    from zett_lab.study import executors
    from zett_lab.study.results import Sweep
    from zett_lab.study.sources import ANCHOR_COUNTS_TABLE, LOST_ANCHORS_TABLE

    conversations = [coding_conversation(turns=8, cid="first-session"), evil_conversation(turns=8)]
    report_sweep(conversations[:1], ["mask"], GRID, executor="serial", cache=False)  # its replays answer cells below
    result = report_sweep(conversations, SUMMARIZERS, GRID, executor="serial", cache=False)
    assert not result.results.query("summarizer == 'mask' and conversation_id == 'first-session'")["replayed"].any()

    def not_here(trace):
        raise AssertionError("measured in the report's process")

    with monkeypatch.context() as patched:
        patched.setattr(report_measured, "measure", not_here)
        patched.setattr(report_measured, "measure_lost_and_counted", not_here)
        kept = Report(sweep=result, date=DATE)
    saved = result.save(tmp_path / "earlier")
    removed = [
        path for table in (LOST_ANCHORS_TABLE, ANCHOR_COUNTS_TABLE) for path in saved.glob(f"sources/*.{table}.*")
    ]
    for path in removed:
        path.unlink()
    earlier = Sweep.load(saved)
    assert len(removed) == 2 * len(list(saved.glob("sources/*.steps.parquet"))) > 0
    here = Report(sweep=earlier, date=DATE)
    executors.shutdown_default_executor()
    executors.default_executor()
    try:
        # Measured in full only in the pool's workers: this process must not measure them.
        monkeypatch.setattr(report_measured, "measure", not_here)
        monkeypatch.setattr(report_measured, "measure_lost_and_counted", not_here)
        pooled = Report(sweep=earlier, date=DATE)
    finally:
        executors.shutdown_default_executor()
    assert kept.to_json() == here.to_json() == pooled.to_json()
    assert pooled.to_html() == here.to_html()
    rec = here.recommendation
    reports = (kept, here, pooled)
    cells = [report.data.cell_traces(rec["max_tokens"], rec["keep_recent_tokens"]) for report in reports]
    assert len(cells[0]) == len(cells[1]) == len(cells[2]) == len(SUMMARIZERS) * len(conversations)
    lost_rows = 0
    for (_, mine), *others in zip(*cells, strict=True):
        full = measure(mine)
        assert len(full.anchors)
        for report, trace in zip(reports, (mine, *(theirs for _, theirs in others)), strict=True):
            pd.testing.assert_frame_equal(report.data.anchor_flags_for(trace), retention_counts(full.anchors))
            pd.testing.assert_frame_equal(report.data.losses_for(trace).anchors, full.listed())
            pd.testing.assert_frame_equal(report.data.losses_for(trace).compactions, full.compactions)
        counts = retention_counts(full.anchors)
        assert counts[ANCHOR_ROWS].sum() == len(full.anchors) and len(counts) < len(full.anchors)
        lost_rows += len(full.listed())
    assert lost_rows  # the lists (lost but needed, dropped constraints) had rows to keep


def test_with_more_conversations_than_it_draws_a_report_draws_the_busiest_timelines(monkeypatch) -> None:
    """Past TIMELINES_SHOWN conversations the page draws those whose replay at the recommended setting
    applied the most compactions, in report order, and says how many it left out and how to draw them."""
    from zett_lab.report import choices

    conversations = [
        coding_conversation(turns=3, cid="short"),
        coding_conversation(turns=9, cid="long"),
        coding_conversation(turns=6, cid="middle"),
    ]
    monkeypatch.setattr(choices, "TIMELINES_SHOWN", 2)
    report = build(conversations)
    rec = report.recommendation
    at = report.data.results.set_index("conversation_id")
    at = at[(at["summarizer"] == rec["summarizer"]) & (at["max_tokens"] == rec["max_tokens"])]
    at = at[at["keep_recent_tokens"] == rec["keep_recent_tokens"]]
    applied = at["compactions_applied"]
    assert applied["long"] > applied["short"] and applied["middle"] > applied["short"]
    assert report.data.timeline_ids == ["long", "middle"]
    section = report.to_html().split('<section id="timelines">')[1].split("</section>")[0]
    assert section.count("<figure") == 2 and "short:" not in section and "long:" in section
    assert "The 2 of 3 conversations whose replay at the recommended setting applied the most compactions" in section
    monkeypatch.setattr(choices, "TIMELINES_SHOWN", 3)
    assert build(conversations).data.timeline_ids == ["short", "long", "middle"]


def test_an_undefined_figure_shows_its_mark_and_the_glossary_says_what_it_means() -> None:
    """A recorded production summary whose span superseded nothing has no Superseded-only rate: its cell reads
    n/a (as a metric without a mean does), never blank, in the HTML and the Markdown."""
    import zett_lab
    from tests.conftest import FIXTURES
    from zett_lab.show.report.formats import UNDEFINED

    conversation = next(c for c in zett_lab.load_all(FIXTURES) if c.id == "billing-rounding")
    report = build([conversation], explore=None)
    native = json.loads(report.to_json())["native"]
    assert any(v["superseded_rate"] is None for e in native for v in e["summarizers"].values())
    page = report.to_html()
    production = page[page.index('<section id="production">') : page.index("</section>", page.index('id="production"'))]
    assert '<td class="num"></td>' not in production and f'<td class="num">{UNDEFINED}</td>' in production
    assert f"<dt>{UNDEFINED}</dt><dd>An undefined figure" in page
    markdown = report.to_markdown()
    production_md = markdown[markdown.index("## Production summaries") :].split("\n## ")[0]
    assert "|  |" not in production_md and f"| {UNDEFINED} |" in production_md


def test_prices_are_written_as_money(page: str) -> None:
    prices = re.search(r"at (\S+) / (\S+) / (\S+) per million input / cached input / output tokens", page)
    assert prices and all(re.fullmatch(r"\$\d[\d,]*\.\d{2,4}", p) for p in prices.groups()), prices
