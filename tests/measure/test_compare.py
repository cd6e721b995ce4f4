"""Comparing summarizers: matching spans, bootstrap CIs, win rates, Wilcoxon, baselines."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from zett_lab import compare
from zett_lab.measure import Losses, measure
from zett_lab.measure.columns import (
    ANCHOR_COLUMNS,
    COMPACTION_COLUMNS,
    CONVERSATION_COLUMNS,
    DECAY_COLUMNS,
    PROBE_COLUMNS,
    frame,
)
from zett_lab.measure.statistics import (
    PAIRWISE_COLUMNS,
    SUMMARY_COLUMNS,
    bootstrap_mean_ci,
    wilcoxon_test,
)


def losses_with(
    values: dict[tuple[str, int], float], *, metric: str = "needed_anchor_recall", status: str = "applied"
) -> Losses:
    """Losses whose compaction rows have the given metric per (conversation, span_end)."""
    rows = [
        {
            "conversation_id": cid,
            "compaction_id": n,
            "step": span_end,
            "span_start": 1,
            "span_end": span_end,
            "status": status,
            "applied": status == "applied",
            metric: value,
            "max_tokens": 1000,
            "keep_recent_tokens": 100,
        }
        for n, ((cid, span_end), value) in enumerate(values.items())
    ]
    conversations = sorted({cid for cid, _ in values})
    conv_rows = [
        {
            "conversation_id": cid,
            "max_tokens": 1000,
            "keep_recent_tokens": 100,
            metric: float(np.mean([v for (c, _), v in values.items() if c == cid])),
        }
        for cid in conversations
    ]
    return Losses(
        compactions=frame(rows, COMPACTION_COLUMNS),
        anchors=frame([], ANCHOR_COLUMNS),
        conversation=frame(conv_rows, CONVERSATION_COLUMNS),
        probes=frame([], PROBE_COLUMNS),
        decay=frame([], DECAY_COLUMNS),
    )


SPANS = [(f"c{i}", 10 + j) for i in range(6) for j in range(3)]


def test_bootstrap_is_seeded_and_sane():
    x = np.linspace(0, 1, 30)
    first = bootstrap_mean_ci(x, seed=3)
    assert first == bootstrap_mean_ci(x, seed=3)
    assert first != bootstrap_mean_ci(x, seed=4)
    assert first[0] < x.mean() < first[1]
    assert all(math.isnan(v) for v in bootstrap_mean_ci([]))
    assert bootstrap_mean_ci([0.4]) == (0.4, 0.4)
    assert bootstrap_mean_ci([0.4, 0.4, 0.4]) == pytest.approx((0.4, 0.4))
    # close to scipy's percentile bootstrap
    reference = stats.bootstrap(
        (x,), np.mean, confidence_level=0.95, n_resamples=4000, method="percentile", random_state=0
    )
    assert first[0] == pytest.approx(reference.confidence_interval.low, abs=0.03)
    assert first[1] == pytest.approx(reference.confidence_interval.high, abs=0.03)


def test_wilcoxon_matches_scipy_and_handles_ties():
    d = np.array([0.1, 0.2, -0.05, 0.3, 0.15, 0.0, 0.25])
    stat, p = wilcoxon_test(d)
    reference = stats.wilcoxon(d, zero_method="wilcox")
    assert stat == pytest.approx(reference.statistic) and p == pytest.approx(reference.pvalue)
    assert all(math.isnan(v) for v in wilcoxon_test([0, 0, 0]))
    assert all(math.isnan(v) for v in wilcoxon_test([]))


def test_paired_comparison_on_matched_spans():
    rng = np.random.default_rng(1)
    base = {span: float(rng.uniform(0.2, 0.6)) for span in SPANS}
    better = {span: min(1.0, v + 0.3) for span, v in base.items()}
    worse = {span: v for span, v in base.items()}
    result = compare(
        {"good": losses_with(better), "bad": losses_with(worse)},
        metrics=["needed_anchor_recall"],
        seed=7,
        resamples=1000,
    )
    assert list(result.summary.columns) == list(SUMMARY_COLUMNS)
    assert list(result.pairwise.columns) == list(PAIRWISE_COLUMNS)
    assert result.matched["matched"].tolist() == [len(SPANS), len(SPANS)]
    summary = result.summary.set_index("summarizer")
    assert summary.loc["good", "mean"] == pytest.approx(np.mean(list(better.values())))
    assert summary.loc["good", "ci_low"] <= summary.loc["good", "mean"] <= summary.loc["good", "ci_high"]
    pair = result.pairwise.iloc[0]
    assert (pair["a"], pair["b"], pair["n"]) == ("good", "bad", len(SPANS))
    assert pair["win_rate"] == 1.0 and pair["loss_rate"] == 0.0
    assert pair["ci_low"] > 0 and pair["p_value"] < 0.001
    again = compare(
        {"good": losses_with(better), "bad": losses_with(worse)},
        metrics=["needed_anchor_recall"],
        seed=7,
        resamples=1000,
    )
    pd.testing.assert_frame_equal(result.summary, again.summary)
    pd.testing.assert_frame_equal(result.pairwise, again.pairwise)
    assert "Comparison" in repr(result) and "<table" in result._repr_html_()
    assert result.table().loc["good", "needed_anchor_recall"] == pytest.approx(summary.loc["good", "mean"])


def test_schedules_that_differ_leave_unmatched_spans_out_and_say_so():
    a = {span: 0.5 for span in SPANS}
    b = {(cid, end + (1 if end == 12 else 0)): 0.4 for cid, end in SPANS}  # third compaction fires one step later
    c = {span: 0.3 for span in SPANS[:9]}  # only half the conversations
    result = compare({"a": losses_with(a), "b": losses_with(b), "c": losses_with(c)}, metrics=["needed_anchor_recall"])
    matched = result.matched.set_index("summarizer")
    assert matched.loc["a", "units"] == len(SPANS) and matched.loc["c", "units"] == 9
    assert (matched["matched"] == 6).all()  # 3 conversations x 2 spans common to all three
    pairs = result.pairwise.set_index(["a", "b"])
    assert pairs.loc[("a", "b"), "n"] == 12  # the shifted third compactions do not pair
    assert pairs.loc[("a", "c"), "n"] == 9
    assert result.summary.set_index("summarizer").loc["a", "n"] == 6
    # per conversation: every conversation both have, whatever the schedules
    by_conversation = compare(
        {"a": losses_with(a), "b": losses_with(b)}, metrics=["needed_anchor_recall"], level="conversation"
    )
    assert by_conversation.matched["matched"].tolist() == [6, 6]
    assert by_conversation.pairwise.iloc[0]["mean_diff"] == pytest.approx(0.1)


def test_rejected_and_failed_attempts_are_not_units_and_nan_pairs_drop():
    a = losses_with({span: 0.5 for span in SPANS[:4]})
    failed = losses_with({span: math.nan for span in SPANS[:4]}, status="failed")
    result = compare({"a": a, "f": failed}, metrics=["needed_anchor_recall"])
    assert result.matched.set_index("summarizer").loc["f", "units"] == 0
    assert result.pairwise.iloc[0]["n"] == 0 and math.isnan(result.pairwise.iloc[0]["mean_diff"])
    nan_values = losses_with({**{span: 0.5 for span in SPANS[:2]}, **{span: math.nan for span in SPANS[2:4]}})
    result = compare({"a": a, "n": nan_values}, metrics=["needed_anchor_recall"])
    assert result.pairwise.iloc[0]["n"] == 2


def test_bad_arguments():
    a = losses_with({span: 0.5 for span in SPANS[:3]})
    with pytest.raises(ValueError, match="unknown metric"):
        compare({"a": a}, metrics=["nope"])
    with pytest.raises(ValueError, match="level"):
        compare({"a": a}, level="turn")
    with pytest.raises(ValueError, match="at least one"):
        compare({})
    with pytest.raises(ValueError, match="baselines need Traces"):
        compare({"a": a}, baselines=("mask",))


def test_real_traces_with_offline_baselines():
    from tests.measure.test_metrics import linked_conversation
    from zett_lab.replay import replay

    conversations = [linked_conversation(turns=6), dataclasses.replace(linked_conversation(turns=7), id="linked-7")]
    traces = [replay(c, max_tokens=2500, keep_recent_tokens=800, summarizer="anchors") for c in conversations]
    result = compare({"anchors": traces}, baselines=("mask", "truncate"), seed=0, resamples=500)
    assert set(result.losses) == {"anchors", "mask", "truncate"}
    matched = result.matched.set_index("summarizer")
    assert (matched["matched"] >= 2).all()  # at least the first compaction of each conversation
    assert (matched["matched"] <= matched["units"]).all()
    assert set(result.summary["metric"]) >= {"compression_ratio", "needed_anchor_recall"}
    # same input, same seed: same output
    again = compare(
        {"anchors": traces, "mask": result.losses["mask"], "truncate": result.losses["truncate"]}, seed=0, resamples=500
    )
    pd.testing.assert_frame_equal(result.summary, again.summary)
    assert measure(traces[0]).conversation.iloc[0]["conversation_id"] == "linked"


def test_settings_are_part_of_the_unit_and_duplicates_are_counted():
    a = losses_with({span: 0.5 for span in SPANS[:3]})
    b = losses_with({span: 0.4 for span in SPANS[:3]})
    other_setting = losses_with({span: 0.1 for span in SPANS[:3]})
    other_setting.compactions["max_tokens"] = pd.array([2000] * 3, dtype="Int64")
    result = compare(
        {"a": Losses.concat([a, a]), "b": Losses.concat([b, other_setting])}, metrics=["needed_anchor_recall"]
    )
    matched = result.matched.set_index("summarizer")
    assert matched.loc["a", "duplicates"] == 3 and matched.loc["b", "duplicates"] == 0
    assert matched.loc["b", "units"] == 6 and (matched["matched"] == 3).all()
    assert result.pairwise.iloc[0]["mean_diff"] == pytest.approx(0.1)
