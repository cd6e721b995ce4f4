"""Widgets, headless: set control values, check the state they keep; no figure leaks; errors in place."""

from __future__ import annotations

import gc
import time
import weakref

import comm
import matplotlib
import pandas as pd
import pytest
from matplotlib.figure import Figure

from tests.helpers import BadSummarizer, CountingSummarizer, coding_conversation
from zett_lab.measure.catalogue import metric
from zett_lab.show.widgets import ComparisonExplorer, Explorer, SweepExplorer, steps_table_html


@pytest.fixture
def conversations():
    return [coding_conversation(turns=8, cid="first"), coding_conversation(turns=12, tools_per_turn=3, cid="second")]


@pytest.fixture
def explorer(conversations):
    return Explorer(conversations, summarizers=[CountingSummarizer(), "mask"], max_tokens=700, keep_recent_tokens=300)


def is_png(image) -> bool:
    return bytes(image.value).startswith(b"\x89PNG")


def live_figures() -> int:
    gc.collect()
    return sum(isinstance(o, Figure) for o in gc.get_objects())


# --- Explorer --------------------------------------------------------------------------------------


def test_explorer_initial_state(explorer):
    assert explorer.error is None
    assert explorer.trace is not None and explorer.trace.setting.max_tokens == 700
    assert explorer.trace.setting.keep_recent_tokens == 300
    assert explorer.losses is not None and "lost_but_needed" in explorer.losses.anchors.columns
    assert isinstance(explorer.figure, Figure) and explorer.figure.axes
    assert is_png(explorer.plot)
    assert "zl-steps" in explorer.steps_area.value
    assert explorer.renders == 1 and explorer.replays == 1
    for slider in (explorer.max_tokens, explorer.keep_recent_tokens):
        assert slider.continuous_update is False


def test_slider_ranges_follow_the_conversation(explorer):
    total = explorer.size("first")
    assert explorer.max_tokens.max >= total  # up to "never compacts"
    assert explorer.max_tokens.max <= total * 1.3
    explorer.conversation.value = "second"
    assert explorer.max_tokens.max >= explorer.size("second") > total
    assert explorer.trace.conversation.id == "second"
    assert explorer.renders == 2  # one render for the conversation change, despite the slider updates


def test_each_slider_move_is_one_render_and_new_state(explorer):
    explorer.max_tokens.value = 1_000
    assert (explorer.renders, explorer.trace.setting.max_tokens) == (2, 1_000)
    explorer.keep_recent_tokens.value = 200
    assert (explorer.renders, explorer.trace.setting.keep_recent_tokens) == (3, 200)
    steps = explorer.trace.steps
    assert f'data-steps="{len(steps)}"' in explorer.steps_area.value
    explorer.summarizer.value = "mask"
    assert explorer.trace.settings.summarizer.startswith("mask")


def test_revisiting_a_setting_uses_the_lru(explorer):
    first = explorer.trace
    explorer.max_tokens.value = 1_200
    explorer.max_tokens.value = 700
    assert explorer.trace is first
    assert explorer.replays == 2 and explorer.cache.hits >= 1


def test_set_changes_several_settings_with_one_render(explorer):
    explorer.set(conversation_id="second", max_tokens=900, keep_recent_tokens=250)
    assert explorer.renders == 2
    assert (
        explorer.trace.conversation.id,
        explorer.trace.setting.max_tokens,
        explorer.trace.setting.keep_recent_tokens,
    ) == ("second", 900, 250)


def test_usage_baseline_control(explorer):
    explorer.usage.value = "synthetic"
    assert explorer.trace.setting.usage == "synthetic"
    assert (explorer.trace.steps["estimate_source"] == "usage").any()
    explorer.usage.value = "recorded"  # no recorded usage here: falls back to the estimator, no exception
    assert explorer.error is None and explorer.trace.setting.usage == "recorded"


def test_compaction_viewer(explorer):
    options = explorer.compaction.options
    assert options and explorer.compaction.value == options[0][1]
    applied = explorer.trace.compactions[explorer.trace.compactions["applied"]].iloc[0]
    explorer.compaction.value = int(applied["compaction_id"])
    shown = explorer.compaction_area.value
    assert f'data-compaction="{int(applied["compaction_id"])}"' in shown
    assert "Summary of" in shown  # the summary text
    assert f"messages[{applied['span_start']}:{applied['span_end']}]" in shown
    assert "What was lost" in shown


def test_compaction_viewer_highlights_lost_but_needed(fixture_conversations):
    explorer = Explorer(fixture_conversations, summarizers=["truncate:0.05"])
    explorer.set(conversation_id="search-p95-regression", max_tokens=12_000, keep_recent_tokens=3_000)
    lost = explorer.losses.lost_but_needed()
    assert len(lost)
    explorer.compaction.value = int(lost["compaction_id"].iloc[0])
    shown = explorer.compaction_area.value
    assert "zl-lost" in shown and "lost but needed later" in shown
    value = str(lost["value"].iloc[0])
    assert value.split()[0][:20] in shown


def test_compact_here(explorer):
    applied = explorer.trace.compactions.loc[explorer.trace.compactions["applied"], "step"].tolist()
    step = applied[0] + 1
    manual = explorer.compact_here(step)
    assert manual is explorer.manual_trace and explorer.error is None
    rows = manual.compactions[manual.compactions["trigger"] == "manual"]
    assert rows["step"].tolist() == [step]
    assert manual.setting.compact_at == (f"step:{step}",)
    assert is_png(explorer.manual_plot)
    assert "Difference" in explorer.manual_area.value and "with manual compaction" in explorer.manual_area.value
    # the button does the same with the step in the text box
    explorer.manual_step.value = step + 1
    explorer.compact_button.click()
    assert explorer.manual_trace.setting.compact_at == (f"step:{step + 1}",)
    # moving a slider invalidates the comparison
    explorer.max_tokens.value = 1_100
    assert explorer.manual_trace is None and explorer.manual_area.value == ""


def test_errors_are_shown_in_place_not_raised(conversations):
    explorer = Explorer(
        conversations,
        summarizers=[BadSummarizer("raise")],
        max_tokens=700,
        keep_recent_tokens=300,
        replay_options={"strict": True},
    )
    assert explorer.error is not None and explorer.trace is None
    assert "zl-error" in explorer.error_area.value and "provider exploded" in explorer.error_area.value
    assert explorer.plot.value == b""
    explorer.max_tokens.value = 100_000  # no compaction: recovers
    assert explorer.error is None and explorer.trace is not None and explorer.error_area.value == ""


def test_compact_here_error_in_place(explorer):
    explorer.trace = None
    assert explorer.compact_here(3) is None
    assert "no baseline trace" in explorer.error_area.value


def test_no_figure_leak_after_100_slider_moves(explorer):
    figure = explorer.figure
    ref = weakref.ref(figure)
    before_live = live_figures()
    values = [explorer.max_tokens.min + explorer.max_tokens.step * (i % 12) * 3 for i in range(100)]
    for value in values:
        explorer.max_tokens.value = value
    assert explorer.error is None
    assert explorer.renders == 1 + sum(1 for a, b in zip([700, *values], values, strict=False) if a != b)
    assert explorer.figure is figure and ref() is not None  # one figure, reused
    assert len(figure.axes) == 1  # cleared, not stacked
    assert len(matplotlib._pylab_helpers.Gcf.figs) == 0
    assert live_figures() <= before_live
    assert len(explorer.cache.entries) <= explorer.cache.size


def test_slider_move_is_fast_when_warm(explorer):
    explorer.max_tokens.value = 1_000
    explorer.max_tokens.value = 700
    started = time.perf_counter()
    explorer.max_tokens.value = 1_000  # LRU hit: redraw only
    assert time.perf_counter() - started < 5
    assert explorer.last_render_seconds is not None


def test_steps_table_marks_rows(explorer):
    html = steps_table_html(explorer.trace)
    assert 'class="zl-applied"' in html
    assert html.count("<tr") == len(explorer.trace.steps) + 1


# --- SweepExplorer -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_sweep():
    from zett_lab.study import sweep

    conversations = [coding_conversation(turns=6, cid="s1"), coding_conversation(turns=9, cid="s2")]
    return sweep(
        conversations,
        max_tokens=[700, 1_200, 2_400],
        keep_recent_tokens=[200, 400],
        summarizers=["mask", "truncate:0.1"],
        executor="serial",
        progress=False,
    )


def test_sweep_explorer_metric_and_cell(small_sweep):
    explorer = SweepExplorer(small_sweep)
    assert explorer.error is None
    # The picker lists catalogue metrics by label (never an internal column such as replayed or seconds); it opens
    # on steps over budget (compactions_applied, the old first choice, is a count outside the catalogue).
    assert explorer.metric.value == "steps_over_budget"
    offered = dict(explorer.metric.options)
    assert offered["Total input tokens"] == "total_input_tokens" and offered["Compression ratio"] == "compression_ratio"
    assert not {"conversation_id", "max_tokens", "replayed", "shared_steps", "model_calls", "seconds"} & set(
        offered.values()
    )
    assert set(offered) == {metric(name).label for name in offered.values()}
    assert SweepExplorer(small_sweep, metric="compactions_applied").metric.value == "compactions_applied"
    assert is_png(explorer.plot)
    explorer.conversation.value = "s2"
    explorer.summarizer.value = "truncate:0.1"
    explorer.select(1_200, 400)
    trace = explorer.trace
    assert (trace.conversation.id, trace.setting.max_tokens, trace.setting.keep_recent_tokens) == (
        "s2",
        1_200,
        400,
    )
    renders = explorer.renders
    explorer.metric.value = "compression_ratio"  # (steps over budget is now the first metric shown)
    assert explorer.renders == renders + 1
    assert is_png(explorer.trace_plot)
    explorer.cell_max_tokens.value = 2_400
    assert explorer.trace.setting.max_tokens == 2_400


def test_sweep_explorer_exact_boundaries(small_sweep):
    explorer = SweepExplorer(small_sweep)
    explorer.show_boundaries.value = True  # all conversations: explains instead of failing
    assert explorer.boundaries is None and "choose one of each" in explorer.error_area.value
    assert is_png(explorer.plot)
    explorer.conversation.value = "s1"
    explorer.summarizer.value = "mask"
    assert explorer.error is None
    assert len(explorer.boundaries) == 2 and explorer.boundaries[0].parameter == "max_tokens"
    explorer.metric.value = "total_input_tokens"
    assert explorer.error is None  # the walks are cached


def test_sweep_explorer_with_a_plain_table(small_sweep):
    explorer = SweepExplorer(small_sweep.results, boundaries=None)
    assert explorer.trace is None and "no trace source" in explorer.status.value
    with pytest.raises(Exception, match="numeric"):
        SweepExplorer(pd.DataFrame({"max_tokens": [1], "keep_recent_tokens": [1], "label": ["x"]}))


# --- Comparison -----------------------------------------------------------------------------------------


def test_comparison_pairs_summarizers_on_the_same_spans(conversations):
    comparison = ComparisonExplorer(
        conversations, [CountingSummarizer(), "mask", "truncate:0.1"], max_tokens=700, keep_recent_tokens=300
    )
    assert comparison.error is None
    reference_steps = comparison.reference.compactions.loc[comparison.reference.compactions["applied"], "step"].tolist()
    assert reference_steps
    spans = {
        label: trace.compactions[["step", "span_start", "span_end"]].astype(int).values.tolist()
        for label, trace in comparison.traces.items()
    }
    first = next(iter(spans.values()))
    assert [row[0] for row in first] == reference_steps
    assert all(value == first for value in spans.values())  # same compactions for everyone
    assert set(comparison.table["summarizer"]) == set(comparison.summarizers)
    assert len(comparison.table) == len(reference_steps) * 3
    assert f"{len(reference_steps)} compaction points from " in comparison.status.value
    assert "3 summarizers in" in comparison.status.value
    assert list(comparison.metrics["summarizer"]) == comparison.summarizers
    assert {"anchor_retention", "needed_anchor_recall"} <= set(comparison.metrics.columns)
    summary = comparison.comparison.summary
    assert {"ci_low", "ci_high"} <= set(summary.columns)
    assert is_png(comparison.plot)
    assert "zl-comparison-table" in comparison.table_area.value
    comparison.conversation.value = "second"
    assert comparison.reference.conversation.id == "second"


def test_comparison_status_agrees_with_its_counts(conversations):
    """What read "1 compaction points from anchors:0.1"."""
    comparison = ComparisonExplorer(conversations[:1], ["mask"], max_tokens=4_000, keep_recent_tokens=300)
    assert "1 compaction point from mask" in comparison.status.value and "1 summarizer in" in comparison.status.value


def test_comparison_nothing_to_compare(conversations):
    comparison = ComparisonExplorer(conversations, ["mask"], max_tokens=10**9, keep_recent_tokens=300)
    assert comparison.error is None and comparison.traces == {}
    assert "nothing to compare" in comparison.table_area.value


def test_comparison_error_in_place(conversations):
    comparison = ComparisonExplorer(
        conversations, [BadSummarizer("raise")], max_tokens=700, keep_recent_tokens=300, replay_options={"strict": True}
    )
    assert comparison.error is not None and "zl-error" in comparison.error_area.value


# --- clickable plots ------------------------------------------------------------------------------------


def test_timeline_has_one_clickable_band_per_step(explorer):
    regions = explorer.plot.regions
    steps = explorer.trace.steps["step"].tolist()
    assert [r[0] for r in regions] == [f"step:{s}" for s in steps]
    lefts = [r[2] for r in regions]
    assert lefts == sorted(lefts) and len(set(lefts)) == len(lefts)  # left to right, one band each
    for _, _, left, top, width, height in regions:
        assert left >= 0 and top >= 0 and width > 0 and height > 0.5
        assert left + width <= 1.0001 and top + height <= 1.0001


def test_a_clickable_plot_sends_each_picture_in_a_new_view_never_as_an_update(conversations, monkeypatch):
    """Each picture and selection of the timeline reaches the front end only in the opening message of a new
    view (the old one closed), never as an update to an open one: anywidget's front end drops every update to a
    model whose code took over 2 s to load, and a busy browser left the explorer without its timeline for good."""
    sent: list[tuple[str, str, dict]] = []

    class Recorded(comm.DummyComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            sent.append((self.comm_id, msg_type, data or {}))

    monkeypatch.setattr(comm, "create_comm", Recorded)
    explorer = Explorer(conversations, summarizers=["mask"], max_tokens=700, keep_recent_tokens=300)
    explorer.max_tokens.value = 1_000
    explorer.plot.click(explorer.plot.regions[2][0])
    explorer.plot.click(explorer.plot.regions[2][0])  # the same selection again: the view stays

    views = {
        cid
        for cid, kind, data in sent
        if kind == "comm_open" and data.get("state", {}).get("_model_name") == "AnyModel"
    }
    assert len(views) == 4  # made empty, the first picture, the second, the click
    assert not [(cid, data) for cid, kind, data in sent if cid in views and kind == "comm_msg"]
    closed = {cid for cid, kind, _ in sent if kind == "comm_close"}
    assert views - closed == {explorer.plot.view.model_id} and explorer.plot.children == (explorer.plot.view,)
    opened = next(data["state"] for cid, kind, data in sent if cid == explorer.plot.view.model_id)
    assert opened["selected"] == explorer.plot.selected == explorer.plot.regions[2][0]
    assert opened["regions"] == explorer.plot.regions and opened["alt"] == "timeline: click a step"
    assert is_png(explorer.plot)


def test_clicking_a_step_shows_its_decision(explorer):
    steps = explorer.trace.steps
    quiet = int(steps.loc[steps["skip_reason"] == "below threshold", "step"].iloc[0])
    explorer.plot.click(f"step:{quiet}")
    assert explorer.selected_step == quiet and explorer.step.value == quiet
    assert f'data-step="{quiet}"' in explorer.step_area.value and "did not try" in explorer.step_area.value
    assert explorer.plot.selected == f"step:{quiet}"
    applied = explorer.trace.compactions.loc[explorer.trace.compactions["applied"]].iloc[0]
    explorer.plot.click(f"step:{int(applied['step'])}")
    shown = explorer.step_area.value
    assert "a compaction was applied" in shown and f'data-compaction="{int(applied["compaction_id"])}"' in shown
    assert "Summary of" in shown and "What was lost" in shown
    assert explorer.compaction.value == int(applied["compaction_id"])  # the compaction tab follows
    renders = explorer.renders
    explorer.step.value = quiet  # the keyboard route: same panel, no replay
    assert explorer.selected_step == quiet and explorer.renders == renders
    with pytest.raises(Exception, match="no clickable region"):
        explorer.plot.click("step:100000")


def test_clicking_a_compaction_step_lists_lost_but_needed(fixture_conversations):
    explorer = Explorer(fixture_conversations, summarizers=["truncate:0.05"])
    explorer.set(conversation_id="search-p95-regression", max_tokens=12_000, keep_recent_tokens=3_000)
    lost = explorer.losses.lost_but_needed()
    compaction = int(lost["compaction_id"].iloc[0])
    compactions = explorer.trace.compactions
    step = int(compactions.loc[compactions["compaction_id"] == compaction, "step"].iloc[0])
    explorer.plot.click(f"step:{step}")
    assert "Lost but needed:" in explorer.step_area.value
    assert str(lost["value"].iloc[0]).split()[0][:20] in explorer.step_area.value


def test_clicking_a_heatmap_cell_selects_it(small_sweep):
    explorer = SweepExplorer(small_sweep)
    explorer.conversation.value = "s2"
    explorer.summarizer.value = "truncate:0.1"
    keys = [r[0] for r in explorer.plot.regions]
    assert sorted(keys) == sorted(f"{m}:{k}" for m in (700, 1_200, 2_400) for k in (200, 400))
    boxes = {r[0]: r[2:] for r in explorer.plot.regions}
    assert boxes["700:200"][0] < boxes["1200:200"][0] < boxes["2400:200"][0]  # max_tokens grows to the right
    assert boxes["700:400"][1] < boxes["700:200"][1]  # keep_recent_tokens grows upwards
    explorer.plot.click("2400:400")
    assert (explorer.cell_max_tokens.value, explorer.cell_keep_recent_tokens.value) == (2_400, 400)
    trace = explorer.trace
    shown = (trace.conversation.id, trace.setting.max_tokens, trace.setting.keep_recent_tokens)
    assert shown == ("s2", 2_400, 400)
    assert explorer.plot.selected == "2400:400" and is_png(explorer.trace_plot)


def test_widgets_have_a_static_snapshot(explorer):
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    snapshot = bundle["text/html"]
    assert snapshot.count('src="data:image/png;base64,') >= 1 and "zl-steps" in snapshot
    assert "max_tokens: 700" in snapshot


def test_thresholds_are_shown_with_thousands_separators(conversations):
    """What notebooks 01 and 03 showed as ``max_tokens: 1500`` and ``max_tokens: 12000 keep_recent_tokens: 3000``."""
    explorer = Explorer(conversations, summarizers=["mask"], max_tokens=1_500, keep_recent_tokens=300)
    assert explorer.max_tokens.readout_format == ",d" == explorer.keep_recent_tokens.readout_format
    assert "max_tokens: 1,500" in explorer.snapshot_html()
    comparison = ComparisonExplorer(
        conversations, ["mask", "truncate:0.1"], max_tokens=12_000, keep_recent_tokens=3_000
    )
    snapshot = comparison.snapshot_html()
    assert "max_tokens: 12,000" in snapshot and "keep_recent_tokens: 3,000" in snapshot


def test_comparison_shows_production_summaries_of_a_recorded_log(fixture_conversations, agent_logs):
    import zett_lab

    claude = zett_lab.load_all(agent_logs / "claude-code/4d5611e5-241a-462a-8d15-5122611a9569.jsonl")
    billing = [c for c in fixture_conversations if c.id == "billing-rounding"]
    comparison = ComparisonExplorer(
        billing + claude, ["mask", "truncate:0.1"], max_tokens=20_000, keep_recent_tokens=6_000
    )
    assert comparison.error is None
    production = comparison.production
    assert set(production["summarizer"]) == {"native:zett-agent", "mask", "truncate:0.1"}
    assert len(production) == 3 * len(billing[0].native_compactions)
    shown = comparison.production_area.value
    assert '<section id="production">' in shown and "native:zett-agent" in shown
    comparison.conversation.value = claude[0].id
    assert comparison.error is None
    assert set(comparison.production["subject"]) == {"native:claude-code"}
    native = comparison.production[comparison.production["summarizer"] == "native:claude-code"]
    assert native["tokens_before"].tolist() == [170251]
    assert "170,251 tokens by the agent's count" in comparison.production_area.value
    comparison.conversation.value = claude[1].id  # a sub-agent transcript: no native compaction
    assert comparison.production is None and comparison.production_area.value == ""


def test_compaction_viewer_shows_a_failed_summary():
    """A failed attempt has missing facts (no summary size, no cache hit): the viewer says what failed."""
    import warnings

    from zett_lab.replay import replay
    from zett_lab.show.widgets.html import compaction_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = replay(
            coding_conversation(turns=6),
            max_tokens=900,
            keep_recent_tokens=400,
            summarizer=BadSummarizer("raise"),
            cache=False,
        )
    failed = trace.compactions[trace.compactions["error"].notna()]
    assert len(failed), "the bad summarizer makes every attempt fail"
    page = compaction_html(trace, int(failed["compaction_id"].iloc[0]))
    assert "provider exploded" in page
    assert 'data-compaction="' in page


def test_headers_and_chips_are_words_with_their_definitions_on_hover(explorer):
    """A metric column or headline figure is named by its catalogue label and defined on hover; any other is its
    name in words (never a raw snake_case column name)."""
    import html as markup
    import re

    from zett_lab.show.report.content import definition
    from zett_lab.show.widgets.html import frame_html

    table = frame_html(pd.DataFrame({"needed_anchor_recall": [0.5], "mean_summary_tokens": [1077.0]}))
    heads = re.findall(r'<th title="([^"]*)">([^<]*)</th>', table)
    assert heads[0] == (markup.escape(definition("needed_anchor_recall")), "Needed-anchor recall")
    assert heads[1][1] == "mean summary tokens"
    chips = dict(
        (text.rsplit(": ", 1)[0], title)
        for title, text in re.findall(
            r'<span class="zl-chip"(?: title="([^"]*)")?>([^<]*)</span>', explorer.summary_area.value
        )
    )
    assert "Steps" in chips and "Compactions applied" in chips and not [c for c in chips if "_" in c]
    assert chips[metric("steps_over_budget").label] == markup.escape(definition("steps_over_budget"))
    assert chips[metric("lost_but_needed").label] == markup.escape(definition("lost_but_needed"))
