"""Plots: Figures without pyplot, deterministic SVG, readable in black and white."""

from __future__ import annotations

import re
import types

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tests.helpers import BadSummarizer, CountingSummarizer, coding_conversation
from zett_lab.errors import SettingError
from zett_lab.replay import replay
from zett_lab.show import plots


def open_figures() -> int:
    return len(matplotlib._pylab_helpers.Gcf.figs)


@pytest.fixture(scope="module")
def trace():
    """Several applied compactions, a manual one, steps over budget."""
    conversation = coding_conversation(turns=8, cid="plots")
    return replay(
        conversation,
        max_tokens=700,
        keep_recent_tokens=300,
        summarizer=CountingSummarizer(),
        cache=False,
        compact_at=["step:2"],
    )


@pytest.fixture(scope="module")
def rejected_trace():
    """Every summary is discarded as not smaller."""
    return replay(
        coding_conversation(turns=5, cid="huge"),
        max_tokens=900,
        keep_recent_tokens=300,
        summarizer=BadSummarizer("huge"),
        cache=False,
    )


@pytest.fixture(scope="module")
def failed_trace():
    """Every summary call fails (recorded, not raised)."""
    return replay(
        coding_conversation(turns=5, cid="fails"),
        max_tokens=900,
        keep_recent_tokens=300,
        summarizer=BadSummarizer("raise"),
        cache=False,
    )


@pytest.fixture(scope="module")
def sweep_table() -> pd.DataFrame:
    rows = []
    for summarizer in ("anchors:0.1", "mask"):
        for conversation in ("a", "b"):
            for m in (4_000, 8_000, 16_000, 32_000):
                for k in (1_000, 2_000, 4_000):
                    if k >= m:
                        continue
                    rows.append(
                        {
                            "conversation_id": conversation,
                            "summarizer": summarizer,
                            "max_tokens": m,
                            "keep_recent_tokens": k,
                            "compactions_applied": 32_000 // m + (summarizer == "mask"),
                            "total_input_tokens": m * 40 + k * 7 + (1000 if summarizer == "mask" else 0),
                            "needed_anchor_recall": min(
                                1.0, m / 40_000 + k / 20_000 + (0.05 if summarizer == "mask" else 0)
                            ),
                            "over": m < 8_000,
                            "error": None,
                        }
                    )
    rows.append(
        {
            "conversation_id": "a",
            "summarizer": "anchors:0.1",
            "max_tokens": 1_000,
            "keep_recent_tokens": 4_000,
            "compactions_applied": np.nan,
            "total_input_tokens": np.nan,
            "needed_anchor_recall": np.nan,
            "over": False,
            "error": "failed",
        }
    )
    return pd.DataFrame(rows)


def markers(ax: Axes) -> set[str]:
    return {
        line.get_marker() for line in ax.lines if line.get_linestyle() in ("None", "none", "") and len(line.get_xdata())
    }


def hatches(ax: Axes) -> set[str]:
    found = {patch.get_hatch() for patch in ax.patches}
    found |= {collection.get_hatch() for collection in ax.collections}
    return {h for h in found if h}


# --- timeline ----------------------------------------------------------------------------------------


def test_timeline_returns_a_figure_without_pyplot(trace):
    before = open_figures()
    fig = plots.timeline(trace)
    assert isinstance(fig, Figure)
    assert open_figures() == before == 0
    assert fig.canvas.manager is None  # never registered with a GUI backend


def test_timeline_draws_into_given_axes(trace):
    fig, (left, right) = plots.figure(ncols=2)
    assert plots.timeline(trace, ax=right) is fig
    assert right.lines and not left.lines


def test_timeline_is_readable_in_black_and_white(trace):
    ax = plots.timeline(trace).axes[0]
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines}
    assert styles[f"max_tokens = {trace.setting.max_tokens:,}"] == "-."
    assert styles[f"keep_recent_tokens = {trace.setting.keep_recent_tokens:,}"] == ":"
    assert any(label.startswith("context") and style == "-" for label, style in styles.items())
    assert {"v", "o"} <= markers(ax)  # applied compactions, estimates (and the ring of the manual compaction)
    assert "///" in hatches(ax)  # steps sent over budget
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert any("compaction applied" in t for t in legend)
    assert any("manual compaction" in t for t in legend)
    assert any("sent over budget" in t for t in legend)


def test_timeline_marks_every_outcome_with_its_own_shape(trace, rejected_trace, failed_trace):
    assert "X" in markers(plots.timeline(rejected_trace).axes[0])
    assert "s" in markers(plots.timeline(failed_trace).axes[0])
    # The manual pass at step 2 of a two-step turn has no whole-turn boundary.
    assert "|" in markers(plots.timeline(trace).axes[0])
    shapes = [style["marker"] for style in plots.OUTCOME_STYLES.values()]
    assert len(set(shapes)) == len(shapes)


def test_timeline_estimate_source_is_marker_fill(trace):
    usage = replay(
        trace.conversation,
        max_tokens=700,
        keep_recent_tokens=300,
        summarizer=CountingSummarizer(),
        cache=False,
        usage="synthetic",
    )
    ax = plots.timeline(usage).axes[0]
    faces = {line.get_label(): line.get_markerfacecolor() for line in ax.lines}
    open_face = next(v for k, v in faces.items() if "from counter" in k)
    filled_face = next(v for k, v in faces.items() if "usage baseline" in k)
    assert matplotlib.colors.to_hex(open_face) == "#ffffff"
    assert matplotlib.colors.to_hex(filled_face) != "#ffffff"


def test_one_turn_run_shows_over_budget_without_compaction():
    conversation = coding_conversation(turns=1, tools_per_turn=12, cid="one-turn")
    trace = replay(conversation, max_tokens=800, keep_recent_tokens=200, summarizer=CountingSummarizer(), cache=False)
    assert trace.summary()["compactions_applied"] == 0 and trace.summary()["steps_over_budget"] > 0
    ax = plots.timeline(trace).axes[0]
    assert "|" in markers(ax) and "///" in hatches(ax)
    assert "0 applied" in ax.get_title("left")


# --- determinism ---------------------------------------------------------------------------------------


def test_svg_is_byte_identical_and_dateless(trace, rejected_trace):
    first = plots.to_svg(plots.timeline(trace))
    second = plots.to_svg(plots.timeline(trace))
    assert first == second
    assert "<dc:date>" not in first
    assert plots.to_svg(plots.timeline(rejected_trace)) != first
    # text stays text (svg.fonttype none), so reports stay small and searchable
    assert "max_tokens" in first


def test_svg_ignores_the_callers_rc_params(trace):
    reference = plots.to_svg(plots.timeline(trace))
    with matplotlib.rc_context({"svg.hashsalt": None, "font.size": 20, "svg.fonttype": "path", "lines.linewidth": 5}):
        assert plots.to_svg(plots.timeline(trace)) == reference


@pytest.mark.parametrize("kind", ["strip", "heatmap", "pareto", "comparison", "anchors"])
def test_every_figure_is_deterministic(kind, trace, sweep_table):
    from zett_lab import compare
    from zett_lab.measure import measure

    def build() -> Figure:
        if kind == "strip":
            return plots.message_strip(trace)
        if kind == "heatmap":
            return plots.heatmap(sweep_table, "needed_anchor_recall", boundaries=[(6_000, 1_000), (9_000, 2_000)])
        if kind == "pareto":
            return plots.pareto(sweep_table)
        if kind == "comparison":
            return plots.summarizer_comparison(compare({"a": [trace], "b": [trace]}, seed=0))
        return plots.anchor_retention(measure(trace))

    assert plots.to_svg(build()) == plots.to_svg(build())
    assert plots.to_png(build()) == plots.to_png(build())


# --- message strip --------------------------------------------------------------------------------------


def test_message_strip_rows_kinds_and_regions(trace):
    fig = plots.message_strip(trace)
    ax = fig.axes[0]
    windows = trace.compactions[trace.compactions["span_start"].notna()]
    assert len(ax.get_yticks()) == len(windows)
    kinds = {h for h in hatches(ax)}
    assert {plots.KIND_STYLES["user"]["hatch"], plots.KIND_STYLES["tool"]["hatch"]} <= kinds
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert {"user", "assistant", "tool", "summarized (tall)", "kept verbatim (thin)"} <= set(legend)
    # summarized cells span messages[span_start:span_end]; kept cells messages[span_end:n_recorded]
    first = windows.iloc[0]
    xs = [vertices[:, 0] for collection in ax.collections for vertices in (p.vertices for p in collection.get_paths())]
    assert min(x.min() for x in xs) == first["span_start"]
    assert max(x.max() for x in xs) == windows["n_recorded"].max()


def test_message_strip_labels_attempts_not_applied(rejected_trace):
    labels = [t.get_text() for t in plots.message_strip(rejected_trace).axes[0].get_yticklabels()]
    assert labels and all("not applied: summary not smaller" in label for label in labels)


def test_message_strip_without_compactions():
    trace = replay(
        coding_conversation(turns=2, cid="small"),
        max_tokens=100_000,
        keep_recent_tokens=300,
        cache=False,
        summarizer=CountingSummarizer(),
    )
    ax = plots.message_strip(trace).axes[0]
    assert any("no compaction attempt" in t.get_text() for t in ax.texts)


# --- heatmap ----------------------------------------------------------------------------------------------


def test_heatmap_values_boundaries_and_missing_cells(sweep_table):
    fig = plots.heatmap(
        sweep_table,
        "compactions_applied",
        where={"summarizer": "anchors:0.1"},
        boundaries=pd.DataFrame({"max_tokens": [6_100, 11_000], "keep_recent_tokens": [1_000, 2_000]}),
        highlight=(8_000, 2_000),
    )
    ax = fig.axes[0]
    texts = {t.get_text() for t in ax.texts}
    assert {"8", "4", "2", "1"} <= texts  # values printed in the cells
    assert "xx" in hatches(ax)  # missing / invalid cells are cross-hatched
    boundary = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert boundary
    xs = np.concatenate([np.asarray(line.get_xdata(), dtype=float) for line in boundary])
    assert {6_100.0, 11_000.0} <= set(xs[~np.isnan(xs)])  # drawn at the exact values, not snapped to the grid
    assert ax.get_xscale() == "log"  # 1k..32k spans more than 8x
    assert any(p.get_linewidth() >= 2 for p in ax.patches)  # highlighted cell


def test_heatmap_accepts_decision_boundaries_objects(sweep_table):
    walk = types.SimpleNamespace(
        parameter="max_tokens",
        fixed=2_000,
        values=[5_000, 9_000, 12_000],
        segments=pd.DataFrame({"start": [4_000, 5_000, 9_000, 12_000], "compactions_applied": [3, 2, 2, 1]}),
    )
    ax = plots.heatmap(sweep_table, "compactions_applied", boundaries=[walk]).axes[0]
    xs = np.concatenate(
        [np.asarray(line.get_xdata(), dtype=float) for line in ax.lines if line.get_linestyle() == "--"]
    )
    # only where compactions_applied changes (9,000 changes the schedule but not the count)
    assert set(xs[~np.isnan(xs)]) == {5_000.0, 12_000.0}
    assert {"→2", "→1"} <= {t.get_text() for t in ax.texts}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["compactions applied changes (exact)"]
    colourbar = next(a for a in ax.figure.axes if a.get_label() == "<colorbar>")
    assert (
        ax.get_title(loc="left").startswith("compactions applied") and colourbar.get_ylabel() == "compactions applied"
    )
    ax = plots.heatmap(sweep_table, "needed_anchor_recall", boundaries=[walk]).axes[0]
    xs = np.concatenate(
        [np.asarray(line.get_xdata(), dtype=float) for line in ax.lines if line.get_linestyle() == "--"]
    )
    assert set(xs[~np.isnan(xs)]) == {5_000.0, 9_000.0, 12_000.0}


def test_heatmap_real_decision_boundaries():
    from zett_lab.study import decision_boundaries

    conversation = coding_conversation(turns=6, cid="walk")
    walks = [
        decision_boundaries(
            conversation,
            CountingSummarizer(),
            keep_recent_tokens=k,
            max_tokens_range=(600, 3_000),
            cache=False,
            progress=False,
        )
        for k in (200, 400)
    ]
    table = pd.DataFrame(
        [{"max_tokens": m, "keep_recent_tokens": k, "steps": 1} for m in (600, 1_500, 3_000) for k in (200, 400)]
    )
    ax = plots.heatmap(table, "steps", boundaries=walks).axes[0]
    drawn = {float(x) for line in ax.lines for x in np.asarray(line.get_xdata(), dtype=float) if not np.isnan(x)}
    assert set(map(float, walks[0].values)) <= drawn


def test_heatmap_rejects_unknown_and_text_columns(sweep_table):
    with pytest.raises(SettingError, match="numeric columns"):
        plots.heatmap(sweep_table, "nope")
    with pytest.raises(SettingError, match="not numeric"):
        plots.heatmap(sweep_table, "summarizer")


def test_heatmap_boolean_column_and_aggregation(sweep_table):
    ax = plots.heatmap(sweep_table, "over").axes[0]
    assert "rows per cell" in ax.get_title("left")


# --- pareto, comparison, anchors -------------------------------------------------------------------------------


def test_pareto_front_matches_the_sweep(sweep_table):
    from zett_lab.study import pareto_front

    ax = plots.pareto(sweep_table, cost="total_input_tokens", loss="needed_anchor_recall").axes[0]
    front = pareto_front(sweep_table, cost="total_input_tokens", loss="needed_anchor_recall")
    line = next(line for line in ax.lines if line.get_label() == "Pareto front")
    assert len(line.get_xdata()) == len(front)
    assert "higher is better" in ax.get_ylabel()
    assert {"o", "s"} <= {line.get_marker() for line in ax.lines}  # one shape per summarizer


def test_pareto_and_heatmap_mean_the_same_value_when_some_conversations_never_compact():
    """Needed-anchor recall is undefined where nothing was compacted: the heatmap, pareto_front and the Pareto plot
    average it over the conversations that have one (never counting the others as perfect recall), and the plot
    says how many had one."""
    from matplotlib.collections import QuadMesh

    from zett_lab.study import pareto_front

    recall = {("a", 8000): 0.5, ("b", 8000): 1.0, ("c", 8000): None, ("a", 16000): None, ("b", 16000): 0.25}
    table = pd.DataFrame(
        [
            {
                "conversation_id": conversation,
                "summarizer": "anchors:0.1",
                "max_tokens": max_tokens,
                "keep_recent_tokens": 2000,
                "total_input_tokens": 1000,
                "needed_anchor_recall": value,
                "error": None,
            }
            for conversation in "abc"
            for max_tokens in (8000, 16000)
            for value in [recall.get((conversation, max_tokens), float("nan"))]
        ]
    )
    mesh = next(c for c in plots.heatmap(table, "needed_anchor_recall").axes[0].collections if isinstance(c, QuadMesh))
    heat = dict(zip((8000, 16000), np.ravel(mesh.get_array()), strict=True))
    front = pareto_front(table, loss="needed_anchor_recall", by=("summarizer", "max_tokens", "keep_recent_tokens"))
    assert heat[8000] == pytest.approx(0.75) and heat[16000] == pytest.approx(0.25)
    [point] = front.to_dict("records")  # same cost: 16k (0.25) is beaten by 8k (0.75)
    assert point["max_tokens"] == 8000 and point["needed_anchor_recall"] == pytest.approx(heat[8000])
    assert (point["conversations"], point["conversations_with_loss"]) == (3, 2)
    ax = plots.pareto(table, loss="needed_anchor_recall").axes[0]
    drawn = {line.get_label(): line.get_ydata() for line in ax.lines}
    assert sorted(drawn["anchors:0.1"]) == pytest.approx([0.25, 0.75])
    assert "Needed-anchor recall: mean over the 3 of 6 conversation runs where it is defined" in ax.get_title("left")


def test_pareto_lower_is_better_metric(sweep_table):
    table = sweep_table.assign(lost_but_needed=sweep_table["compactions_applied"])
    ax = plots.pareto(table, loss="lost_but_needed").axes[0]
    assert "lower is better" in ax.get_ylabel()


def test_pareto_direction_of_a_column_outside_the_catalogue_is_never_guessed(sweep_table):
    with pytest.raises(SettingError, match="not a metric of the catalogue"):
        plots.pareto(sweep_table, loss="compactions_applied")
    ax = plots.pareto(sweep_table, loss="compactions_applied", maximize=False).axes[0]
    assert "lower is better" in ax.get_ylabel()


def test_summarizer_comparison_with_intervals():
    table = pd.DataFrame(
        {
            "summarizer": ["a", "a", "b", "b"],
            "metric": ["recall", "retention"] * 2,
            "mean": [0.5, 0.6, 0.7, 0.2],
            "ci_low": [0.4, 0.5, 0.6, 0.1],
            "ci_high": [0.6, 0.7, 0.8, 0.3],
        }
    )
    ax = plots.summarizer_comparison(table).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert len(ax.containers) == 2  # one errorbar container per metric, different marker shapes
    assert len({c.lines[0].get_marker() for c in ax.containers}) == 2


def test_summarizer_comparison_from_compare(trace):
    from zett_lab import compare

    other = replay(
        trace.conversation,
        max_tokens=10**12,
        keep_recent_tokens=300,
        summarizer="mask",
        cache=False,
        compact_at=[f"step:{s}" for s in trace.compactions.loc[trace.compactions["applied"], "step"]],
    )
    same = replay(
        trace.conversation,
        max_tokens=10**12,
        keep_recent_tokens=300,
        summarizer=CountingSummarizer(),
        cache=False,
        compact_at=[f"step:{s}" for s in trace.compactions.loc[trace.compactions["applied"], "step"]],
    )
    result = compare({"counting": [same], "mask": [other]}, metrics=["compression_ratio", "anchor_retention"], seed=0)
    ax = plots.summarizer_comparison(result).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["counting", "mask"]


def test_anchor_retention_by_type(fixture_conversations):
    from zett_lab.measure import measure

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    losses = measure(replay(conversation, max_tokens=12_000, keep_recent_tokens=3_000))
    ax = plots.anchor_retention(losses).axes[0]
    applied = losses.anchors[losses.anchors["applied"]]
    assert {t.get_text() for t in ax.get_yticklabels()} == set(applied["type"])
    assert {"///", "..."} <= hatches(ax)
    assert f"{int(applied['lost_but_needed'].sum())} lost but needed" in ax.get_title("left")
    plots.anchor_retention([losses, losses])  # pooled across conversations


def test_anchor_retention_of_counted_flags_draws_the_same_figure(fixture_conversations):
    """A report keeps the flags counted per distinct row: the figure must not change by a byte."""
    from zett_lab.measure import measure
    from zett_lab.measure.anchor_rows import retention_counts
    from zett_lab.measure.columns import ANCHOR_ROWS

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    anchors = measure(replay(conversation, max_tokens=12_000, keep_recent_tokens=3_000)).anchors
    counted = retention_counts(anchors)
    assert counted[ANCHOR_ROWS].sum() == len(anchors) > len(counted)
    assert plots.to_svg(plots.anchor_retention(counted, count_column=ANCHOR_ROWS)) == plots.to_svg(
        plots.anchor_retention(anchors)
    )


def test_anchor_retention_empty():
    empty = pd.DataFrame(columns=["type", "in_summary", "in_tail", "needed_later", "lost_but_needed"])
    assert "no anchors" in plots.anchor_retention(empty).axes[0].texts[0].get_text()


def test_no_figure_is_registered_anywhere(trace, sweep_table):
    for _ in range(3):
        plots.timeline(trace)
        plots.message_strip(trace)
        plots.heatmap(sweep_table, "compactions_applied")
        plots.pareto(sweep_table)
    assert open_figures() == 0


def test_notebook_display_formatter_is_png():
    """In IPython, a returned Figure renders as PNG without pyplot."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        plots._register_notebook_display()
        fig, ax = plots.figure()
        ax.plot([1, 2])
        data, _ = shell.display_formatter.format(fig)
        assert "image/png" in data and re.match(
            rb"\x89PNG", data["image/png"] if isinstance(data["image/png"], bytes) else b"\x89PNG"
        )
    finally:
        InteractiveShell.clear_instance()


# --- presentation: one colour scale, labels from the catalogue, legends that fit ------------------------------


def test_heatmap_panels_share_one_colour_scale(sweep_table):
    """A summarizer whose values stay low is not painted as bright as one whose values are high."""
    low = sweep_table.assign(
        needed_anchor_recall=np.where(
            sweep_table["summarizer"] == "mask",
            sweep_table["needed_anchor_recall"] * 0.05,
            sweep_table["needed_anchor_recall"],
        )
    )
    fig = plots.heatmaps(low, "needed_anchor_recall", by="summarizer", highlight={"mask": (8_000, 2_000)})
    meshes = [c for ax in fig.axes for c in ax.collections if c.get_gid() == plots.HEATMAP_GID]
    assert len(meshes) == 2
    assert {(m.norm.vmin, m.norm.vmax) for m in meshes} == {(low["needed_anchor_recall"].min(), 1.0)}
    assert len([ax for ax in fig.axes if ax.get_label() == "<colorbar>"]) == 1, "one colour bar for every panel"
    assert [ax.get_title("left") for ax in fig.axes[:2]] == ["anchors:0.1", "mask"]
    outlined = [
        len([p for p in ax.patches if p.get_edgecolor()[:3] == (0, 0, 0) and p.get_linewidth() == 2.4])
        for ax in fig.axes[:2]
    ]
    assert outlined == [0, 1], "the highlighted cell is outlined in its own panel only"
    colourbar = next(ax for ax in fig.axes if ax.get_label() == "<colorbar>")
    assert colourbar.get_ylabel() == "Needed-anchor recall (higher is better)"


def test_heatmap_cells_and_scale_never_use_scientific_notation(sweep_table):
    table = sweep_table.assign(total_input_tokens=sweep_table["total_input_tokens"] * 1_000 + 0.5)
    fig = plots.heatmap(table, "total_input_tokens", where={"summarizer": "mask"})
    plots.to_png(fig)
    texts = [t.get_text() for ax in fig.axes for t in [*ax.texts, *ax.get_yticklabels(), *ax.get_xticklabels()]]
    assert texts and not [t for t in texts if re.search(r"\de[+-]?\d", t)], texts
    assert any(t.endswith("M") for t in texts)
    assert fig.axes[0].get_title("left") == "Total input tokens (mean of up to 2 rows per cell)\nsummarizer=mask"


def test_pareto_reads_from_the_catalogue_and_marks_the_recommended_setting(sweep_table):
    chosen = {"summarizer": "mask", "max_tokens": 8_000, "keep_recent_tokens": 2_000}
    ax = plots.pareto(sweep_table, cost="total_input_tokens", loss="needed_anchor_recall", highlight=chosen).axes[0]
    assert ax.get_xlabel() == "Total input tokens, summed over conversations (lower is better)"
    assert ax.get_ylabel() == "Needed-anchor recall, mean per conversation (higher is better)"
    star = next(line for line in ax.lines if line.get_marker() == "*")
    assert star.get_label() == "recommended: mask 8k/2k"
    few = sweep_table[sweep_table["keep_recent_tokens"] == 1_000]  # a front short enough to be labelled
    ax = plots.pareto(few, cost="total_input_tokens", loss="needed_anchor_recall").axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert labels and all(t.split()[0] in ("anchors:0.1", "mask") for t in labels), (
        "each front label names its summarizer"
    )


def test_pareto_front_labels_never_overlap_on_a_crowded_front():
    """Front points close together (as a real report's cheapest settings are): every label readable, none on another,
    none on the legend, each inside the axes."""
    rows = [
        ("anchors", 6_300, 1_600, 8.95e6, 6.7),
        ("anchors", 13_000, 1_600, 9.1e6, 5.6),
        ("truncate", 6_300, 1_600, 9.25e6, 5.15),
        ("truncate", 13_000, 1_600, 9.5e6, 4.9),
        ("mask", 13_000, 1_600, 10.35e6, 4.8),
        ("truncate", 25_000, 1_600, 10.6e6, 1.9),
        ("anchors", 25_000, 1_600, 10.62e6, 0.4),
        ("extractive", 6_300, 1_600, 8.99e6, 16.9),
    ]
    columns = ["summarizer", "max_tokens", "keep_recent_tokens", "total_input_tokens", "lost_but_needed"]
    table = pd.DataFrame(rows, columns=columns).assign(conversation_id="one")
    figure = plots.pareto(table, loss="lost_but_needed", highlight=dict(zip(columns[:3], rows[3][:3], strict=True)))
    figure.draw_without_rendering()
    ax = figure.axes[0]
    boxes = {t.get_text(): t.get_window_extent() for t in ax.texts}
    assert len(boxes) == 7 and "truncate 6.3k/1.6k" in boxes
    frame, legend = ax.get_window_extent(), ax.get_legend().get_window_extent()
    for name, box in boxes.items():
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1), f"{name} leaves the axes"
        assert not box.overlaps(legend), f"{name} is on the legend"
        assert not [other for other, b in boxes.items() if other != name and box.overlaps(b)], f"{name} overlaps"


def test_comparison_legend_fits_with_many_long_metric_labels():
    """Seven headline metrics used to collapse the axes ("constrained_layout not applied") and cut the legend."""
    import warnings

    from zett_lab.measure.catalogue import default_metrics

    table = pd.DataFrame(
        [
            {"summarizer": s, "metric": m, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
            for s in ("anchors", "extractive", "truncate", "mask")
            for m in default_metrics()
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.summarizer_comparison(table)
        plots.to_png(fig)
    legend = fig.legends[0]
    box, frame = legend.get_window_extent(), fig.bbox
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0, "the legend is inside the figure"
    assert fig.axes[0].get_window_extent().width > 0.5 * frame.width
