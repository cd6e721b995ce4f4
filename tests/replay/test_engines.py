"""The engine as a parameter of replay: any CompactionExtension, instrumented the same way; bad engines fail clearly."""

from __future__ import annotations

import asyncio
import signal
import time

import pandas as pd
import pytest
from zett_agent.extensions.compaction import CompactionExtension

import zett_lab
from tests.helpers import BadSummarizer, CountingSummarizer, coding_conversation
from zett_lab.replay import ReplayError, SummaryError
from zett_lab.replay.deadline import TIMEOUT_KIND
from zett_lab.replay.engine import EngineError, engine_name, engine_reuse
from zett_lab.replay.policies import ObservationMaskingCompaction, SplitTurnCompaction
from zett_lab.replay.schema import ENGINE_FAILED, NO_WINDOW, SKIP_REASONS, SUMMARY_FAILED
from zett_lab.study.regions import same_replay

LIMITS = {"max_tokens": 600, "keep_recent_tokens": 200}


class NotAnEngine:
    pass


class BrokenWindow(CompactionExtension):
    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        raise RuntimeError("window bug")


class BrokenAfterModel(CompactionExtension):
    async def after_model(self, context, response):
        raise RuntimeError("after_model bug")


class NeverCompacts(CompactionExtension):
    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        return None


def _replay(engine, turns=6, **options):
    return zett_lab.replay(
        coding_conversation(turns=turns),
        **LIMITS,
        summarizer=CountingSummarizer(),
        cache=False,
        engine=engine,
        **options,
    )


# --- engines that never finish a pass: bounded by engine_timeout -------------------------------------------


def _over_budget(engine: CompactionExtension, context) -> bool:
    return engine._count_context_tokens(context) > engine.max_tokens


class AwaitsForever(CompactionExtension):
    """Over budget, the pass awaits something that never happens."""

    async def compact(self, context, *, force=False):
        if _over_budget(self, context):
            await asyncio.Event().wait()
        return await super().compact(context, force=force)


class LoopsForever(CompactionExtension):
    """A window rule stuck in a Python loop (synchronous: the event loop is blocked)."""

    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        while True:
            pass


class BlocksInSleep(CompactionExtension):
    """A window rule blocked in one long call into C (each of its passes would take a minute)."""

    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        time.sleep(60)


class WrapsEveryError(CompactionExtension):
    """A loop inside code that turns every exception into its own (as some libraries do)."""

    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):  # type: ignore[override]
        try:
            while True:
                pass
        except Exception as error:
            raise ValueError("could not select a window") from error


class SilentSummarizer(CountingSummarizer):
    """A summary model that never answers."""

    async def stream(self, request):
        await asyncio.Event().wait()
        yield  # pragma: no cover (never reached)


@pytest.fixture(autouse=True)
def loaded_tokenizer():
    """Load the tokenizer before a test: its first load is slower than the tests' 0.2 s limit on a pass."""
    zett_lab.count_tokens(coding_conversation(turns=1).messages)
    CompactionExtension._count_tokens(coding_conversation(turns=1).messages)


def _timed_out(trace, reason):
    """The compaction rows of passes that ran over engine_timeout; checks they are failures, never results."""
    rows = trace.compactions
    assert len(rows) > 0 and (rows["error_kind"] == TIMEOUT_KIND).all() and (rows["skip_reason"] == reason).all()
    assert not rows["applied"].any() and rows["summary_tokens"].isna().all()
    assert (
        rows["error"]
        .str.startswith("EngineTimeout: the engine's pass did not finish within engine_timeout=0.2 s")
        .all()
    )
    counts = trace.failure_counts
    assert counts[["what", "kind", "count"]].values.tolist() == [
        ["engine pass" if reason == ENGINE_FAILED else "summary call", TIMEOUT_KIND, len(rows)]
    ]
    assert trace.summary()["failed"] == len(rows) and trace.settings.engine_timeout == 0.2
    passes = trace.steps[trace.steps["compaction_id"].notna()]
    assert len(passes) == len(rows) and (passes["skip_reason"] == reason).all() and not passes["applied"].any()
    return rows


def test_a_pass_that_awaits_forever_is_a_recorded_timeout_and_the_replay_goes_on():
    trace = _replay(AwaitsForever, turns=3, engine_timeout=0.2)
    rows = _timed_out(trace, ENGINE_FAILED)
    assert rows["error"].str.endswith("it was still waiting (an await that never finished)").all()
    assert trace.steps["step"].tolist() == _replay(None, turns=3).steps["step"].tolist()  # every step was replayed


def test_a_summary_model_that_never_answers_is_a_timed_out_summary_call():
    trace = zett_lab.replay(
        coding_conversation(turns=3), **LIMITS, summarizer=SilentSummarizer(), cache=False, engine_timeout=0.2
    )
    _timed_out(trace, SUMMARY_FAILED)
    from zett_lab.study.regions import prefix_regions, region

    # The stock engine, but how long a pass takes is a matter of time: nothing from the timed-out pass on is
    # proven for another setting (neither reused nor forked from); the steps before it are.
    first = int(trace.compactions["step"].min())
    before, through = prefix_regions(trace, [first, first + 1])
    assert before.reason is None and before.m_hi is not None and before.m_hi > 600
    assert (through.m_lo, through.m_hi, through.reason) == (
        600,
        600,
        f"step {first}: its pass timed out (a matter of time, not of the setting)",
    )
    assert region(trace) == through
    assert zett_lab.measure(trace).conversation["compactions"].iloc[0] == 0  # nothing measured from a failed pass


def _on_a_helper_thread(run):
    """Run ``run`` the way a notebook does: from inside a running event loop (replay then uses a helper thread)."""

    async def inside_a_running_loop():
        return run()

    return asyncio.run(inside_a_running_loop())


@pytest.mark.parametrize(
    ("engine", "where"),
    [
        (LoopsForever, "main thread"),
        (LoopsForever, "helper thread"),
        (BlocksInSleep, "main thread"),
        (WrapsEveryError, "main thread"),
        (WrapsEveryError, "helper thread"),
    ],
)
def test_a_pass_blocked_in_synchronous_code_is_interrupted(engine, where):
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL  # SIGALRM is free: the main thread can be interrupted
    run = lambda: _replay(engine, turns=3, engine_timeout=0.2)  # noqa: E731
    trace = run() if where == "main thread" else _on_a_helper_thread(run)
    rows = _timed_out(trace, ENGINE_FAILED)
    assert rows["error"].str.endswith("it was still running (synchronous code that never returned)").all()
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL  # handed back after the replay


def test_a_timed_out_pass_in_strict_mode_stops_naming_the_engine_and_step():
    with pytest.raises(
        ReplayError,
        match=r"engine tests\.replay\.test_engines\.LoopsForever, turn \d+, step \d+: engine failed \(strict\): EngineTimeout: "
        r"the engine's pass did not finish within engine_timeout=0\.2 s",
    ):
        _replay(LoopsForever, engine_timeout=0.2, strict=True)
    with pytest.raises(SummaryError, match=r"step \d+: summary failed \(strict\): EngineTimeout"):
        zett_lab.replay(
            coding_conversation(turns=3),
            **LIMITS,
            summarizer=SilentSummarizer(),
            cache=False,
            engine_timeout=0.2,
            strict=True,
        )


@pytest.mark.parametrize("value", [0, -1, float("inf"), float("nan"), "10", True])
def test_a_bad_engine_timeout_is_a_setting_error(value):
    with pytest.raises(zett_lab.SettingError, match="engine_timeout must be a positive number of seconds or None"):
        _replay(None, engine_timeout=value)


def test_sweeps_and_reports_pass_engine_timeout_on_and_never_measure_a_timed_out_cell():
    from zett_lab.show.report import Report
    from zett_lab.study.sweep import measured_cells, sweep

    options = {"executor": "serial", "cache": False, "engine_timeout": 0.2}
    result = sweep(
        [coding_conversation(turns=3)],
        max_tokens=[600, 100_000],
        keep_recent_tokens=[200],
        summarizers=[CountingSummarizer()],
        engines={"stock": None, "hangs": AwaitsForever},
        progress=False,
        **options,
    )
    table = result.results.set_index(["engine", "max_tokens"])
    assert table.loc[("hangs", 600), "failed"] > 0 and "EngineTimeout" in table.loc[("hangs", 600), "summary_error"]
    assert measured_cells(result.results).tolist() == [
        not (e == "hangs" and m == 600)
        for e, m in zip(result.results["engine"], result.results["max_tokens"], strict=True)
    ]
    assert result.failure_counts[["what", "kind"]].values.tolist() == [["engine pass", TIMEOUT_KIND]]
    with pytest.raises(zett_lab.SettingError, match="engine_timeout"):
        sweep(
            [coding_conversation(turns=3)],
            max_tokens=[600],
            keep_recent_tokens=[200],
            engine_timeout=0,
            **{k: v for k, v in options.items() if k != "engine_timeout"},
        )
    report = Report.build(
        [coding_conversation(turns=3)],
        ["truncate"],
        {"max_tokens": [600], "keep_recent_tokens": [200]},
        engines={"stock": None, "hangs": AwaitsForever},
        date="2025-02-03",
        **options,
    )
    assert report.failure_counts[["what", "kind"]].values.tolist() == [["engine pass", TIMEOUT_KIND]]


def test_the_stock_engine_by_class_is_the_default_engine():
    default, explicit = _replay(None), _replay(CompactionExtension)
    assert same_replay(default, explicit) == []
    assert default.setting.engine_name == "CompactionExtension"
    assert engine_reuse(None) == engine_reuse(CompactionExtension) == ("max_tokens", "keep_recent_tokens")


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        (NotAnEngine, "is not a subclass of zett_agent's CompactionExtension"),
        (CompactionExtension(max_tokens=10, keep_recent_tokens=5), "not a configured instance"),
        (42, "must be a CompactionExtension subclass or a factory"),
        (lambda **options: "not an engine", "returned str, not a CompactionExtension"),
        (lambda **options: 1 / 0, "could not be built .* ZeroDivisionError"),
        (
            lambda **options: CompactionExtension(options["model"], max_tokens=999, keep_recent_tokens=200),
            "has max_tokens=999 but was asked for 600",
        ),
    ],
)
def test_a_bad_engine_is_one_clear_error_before_anything_runs(engine, message):
    with pytest.raises(EngineError, match=message):
        _replay(engine)
    assert issubclass(EngineError, zett_lab.SettingError)


def test_an_engine_failing_inside_its_pass_is_a_recorded_failed_attempt():
    trace = _replay(BrokenWindow)
    failed = trace.compactions[trace.compactions["skip_reason"] == ENGINE_FAILED]
    assert len(failed) == len(trace.compactions) > 0
    assert (failed["error"] == "RuntimeError: window bug").all() and not failed["applied"].any()
    assert (trace.steps.loc[trace.steps["compaction_id"].notna(), "skip_reason"] == ENGINE_FAILED).all()
    assert trace.summary()["failed"] == len(failed)
    assert trace.setting.engine_name.endswith("test_engines.BrokenWindow")


def test_strict_mode_and_errors_outside_the_pass_stop_the_replay_naming_the_engine_and_step():
    with pytest.raises(
        ReplayError, match=r"BrokenWindow, turn \d+, step \d+: engine failed \(strict\): RuntimeError: window bug"
    ) as raised:
        _replay(BrokenWindow, strict=True)
    assert not isinstance(raised.value, SummaryError)  # the engine failed, not its summary
    with pytest.raises(SummaryError, match=r"step \d+: summary failed \(strict\): AgentProtocolError"):
        zett_lab.replay(
            coding_conversation(turns=6),
            **LIMITS,
            summarizer=BadSummarizer("empty"),
            cache=False,
            engine=SplitTurnCompaction,
            strict=True,
        )
    with pytest.raises(
        ReplayError,
        match=r"engine tests\.replay\.test_engines\.BrokenAfterModel, turn 0, step 0: RuntimeError: after_model bug",
    ):
        _replay(BrokenAfterModel)


def test_an_engine_with_its_own_window_rule_and_no_reason_gets_the_generic_reason():
    trace = _replay(NeverCompacts)
    triggered = trace.steps[trace.steps["triggered"]]
    assert len(triggered) > 0 and (triggered["skip_reason"] == NO_WINDOW).all()
    assert len(trace.compactions) == 0
    assert set(trace.steps["skip_reason"]) <= set(SKIP_REASONS)


def test_engine_names_and_declared_reuse():
    import functools

    partial = functools.partial(ObservationMaskingCompaction, masking_target=0.5)
    assert engine_name(partial) == "zett_lab.replay.policies.ObservationMaskingCompaction(masking_target=0.5)"
    assert engine_reuse(SplitTurnCompaction) == ("max_tokens",)
    assert engine_reuse(functools.partial(SplitTurnCompaction)) == ("max_tokens",)
    assert engine_reuse(ObservationMaskingCompaction) == () and engine_reuse(lambda **o: SplitTurnCompaction(**o)) == ()
    assert engine_reuse(BrokenWindow) == ()


# --- the engine as a dimension of a sweep, and proven reuse only where it was proven ----------------


def test_a_sweep_compares_engines_cell_by_cell_with_no_unproven_reuse(fixture_conversations):
    from zett_lab.study.sweep import sweep

    conversations = [c for c in fixture_conversations if c.id in ("swe-httpq-4821", "billing-rounding")]
    engines = {"stock": None, "split": SplitTurnCompaction, "mask": ObservationMaskingCompaction}
    result = sweep(
        conversations,
        max_tokens=[12_000, 30_000, 200_000],
        keep_recent_tokens=[3_000, 8_000],
        summarizers=["anchors:0.1"],
        engines=engines,
        executor="serial",
        metrics=False,
        progress=False,
    )
    table = result.results
    assert list(table.columns[:3]) == ["conversation_id", "engine", "summarizer"] and table["error"].isna().all()
    assert sorted(set(table["engine"])) == ["mask", "split", "stock"] and len(table) == 2 * 3 * 3 * 2
    assert result.config["engine_reuse"] == {
        "stock": ["max_tokens", "keep_recent_tokens"],
        "split": ["max_tokens"],
        "mask": [],
    }
    assert table.loc[table["engine"] == "mask", "replayed"].all()  # never reused: the masking policy declares nothing
    assert not table.loc[table["engine"] == "stock", "replayed"].all()
    for (cid, setting), trace in result.traces():
        _summarizer, engine = result.labels(setting)
        m, k = setting.max_tokens, setting.keep_recent_tokens
        fresh = zett_lab.replay(
            result.conversations[cid],
            max_tokens=m,
            keep_recent_tokens=k,
            summarizer="anchors:0.1",
            engine=engines[engine],
        )
        assert same_replay(trace, fresh) == [], (cid, engine, m, k)
    split = table[table["engine"] == "split"]
    for _, row in split[~split["replayed"]].iterrows():  # a reused split cell stands on a replay with the same keep
        cell = result.cell(
            row["conversation_id"], row["max_tokens"], row["keep_recent_tokens"], row["summarizer"], "split"
        )
        source = result.store.source(cell)
        assert source.settings.keep_recent_tokens == row["keep_recent_tokens"]
    swe = table[table["conversation_id"] == "swe-httpq-4821"].set_index(["engine", "max_tokens", "keep_recent_tokens"])
    assert (
        swe.loc[("split", 30_000, 8_000), "steps_over_budget"]
        == 0
        < swe.loc[("stock", 30_000, 8_000), "steps_over_budget"]
    )


def test_a_declared_reuse_is_a_proof_derived_traces_equal_fresh_replays(fixture_conversations):
    from zett_lab.study.regions import derive, region

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    options = {"keep_recent_tokens": 3_000, "summarizer": "anchors:0.1", "engine": SplitTurnCompaction}
    trace = zett_lab.replay(conversation, max_tokens=12_000, **options)
    where = region(trace, limits=engine_reuse(SplitTurnCompaction))
    assert where.k_lo == where.k_hi == 3_000 and where.m_lo < 12_000 and where.m_hi is not None
    for edge in (where.m_lo, where.m_hi):
        assert (
            same_replay(derive(trace, edge, 3_000, where), zett_lab.replay(conversation, max_tokens=edge, **options))
            == []
        )
    outside = zett_lab.replay(conversation, max_tokens=where.m_hi + 1, **options)
    assert same_replay(derive(trace, where.m_hi + 1, 3_000), outside) != []  # the region is tight
    assert (
        region(trace).reason and region(trace).m_lo == region(trace).m_hi == 12_000
    )  # no declaration passed: none assumed


def test_decision_boundaries_walk_an_engine_only_along_what_it_declares(fixture_conversations):
    from zett_lab.study.boundaries import decision_boundaries

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    walk = decision_boundaries(
        conversation,
        "anchors:0.1",
        keep_recent_tokens=3_000,
        max_tokens_range=(8_000, 20_000),
        engine=SplitTurnCompaction,
        progress=False,
    )
    assert walk.values and all(t.setting.engine_name.endswith("SplitTurnCompaction") for t in walk.traces.values())
    with pytest.raises(zett_lab.SettingError, match="declares no proven reuse along keep_recent_tokens"):
        decision_boundaries(
            conversation,
            "anchors:0.1",
            max_tokens=12_000,
            keep_recent_tokens_range=(1_000, 5_000),
            engine=SplitTurnCompaction,
            progress=False,
        )
    with pytest.raises(zett_lab.SettingError, match="declares no proven reuse along max_tokens"):
        decision_boundaries(
            conversation,
            "anchors:0.1",
            keep_recent_tokens=3_000,
            max_tokens_range=(8_000, 20_000),
            engine=ObservationMaskingCompaction,
            progress=False,
        )


def test_an_engine_that_cannot_reach_worker_processes_is_refused_before_the_sweep_starts(fixture_conversations):
    import concurrent.futures as cf

    from zett_lab.study.sweep import sweep

    class LocalPolicy(CompactionExtension):
        pass

    with (
        cf.ProcessPoolExecutor(max_workers=1) as pool,
        pytest.raises(zett_lab.SettingError, match="cannot be sent to worker processes"),
    ):
        sweep(
            fixture_conversations[:1],
            max_tokens=[10_000],
            keep_recent_tokens=[2_000],
            engines={"local": LocalPolicy},
            executor=pool,
        )
    with pytest.raises(EngineError, match="not a subclass"):
        sweep(
            fixture_conversations[:1],
            max_tokens=[10_000],
            keep_recent_tokens=[2_000],
            engines={"bad": NotAnEngine},
            executor="serial",
        )
    with pytest.raises(EngineError, match="has max_tokens=999 but was asked for 10000"):
        sweep(
            fixture_conversations[:1],
            max_tokens=[10_000],
            keep_recent_tokens=[2_000],
            engines={"ignores": lambda **o: CompactionExtension(o["model"], max_tokens=999, keep_recent_tokens=2_000)},
            executor="serial",
        )


# --- engines side by side: compare, plots ------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_sweep(fixture_conversations):
    from zett_lab.study.sweep import sweep

    conversations = [
        c for c in fixture_conversations if c.id in ("swe-httpq-4821", "billing-rounding", "ci-flaky-kafka")
    ]
    return sweep(
        conversations,
        max_tokens=[9_000, 14_000, 30_000],
        keep_recent_tokens=[3_000],
        summarizers=["anchors:0.1"],
        engines={"stock": None, "split": SplitTurnCompaction, "mask": ObservationMaskingCompaction},
        executor="serial",
        progress=False,
    )


def test_compare_pairs_engines_per_conversation_and_setting(engine_sweep):
    from zett_lab.measure.catalogue import default_metrics

    traces: dict[str, list] = {}
    for (_, setting), trace in engine_sweep.traces():
        traces.setdefault(engine_sweep.labels(setting)[1], []).append(trace)
    result = zett_lab.compare(traces, by="engine", seed=1)
    assert (
        result.by == "engine"
        and result.level == "conversation"
        and result.settings["metrics"] == list(default_metrics("conversation"))
    )
    assert set(result.summary["engine"]) == {"stock", "split", "mask"}
    assert (result.matched["matched"] == 3 * 3).all()  # every conversation × setting, paired
    over = result.pairwise[
        (result.pairwise["a"] == "stock")
        & (result.pairwise["b"] == "split")
        & (result.pairwise["metric"] == "steps_over_budget")
    ].iloc[0]
    assert (
        over["mean_diff"] > 0 and over["loss_rate"] > 0 and over["win_rate"] == 0
    )  # fewer steps over budget is better
    assert over["ci_low"] <= over["mean_diff"] <= over["ci_high"]
    from_sweep = zett_lab.compare(engine_sweep, by="engine", seed=1)
    columns = ["engine", "metric", "n", "mean"]
    pd.testing.assert_frame_equal(from_sweep.summary[columns], result.summary[columns], check_dtype=False)


def test_plots_draw_engines_side_by_side(engine_sweep):
    from zett_lab.show import plots

    comparison = zett_lab.compare(engine_sweep, by="engine")
    figure = plots.summarizer_comparison(comparison)
    axis = figure.axes[0]
    assert axis.get_title(loc="left").startswith("Engines compared")
    assert [t.get_text() for t in axis.get_yticklabels()] == ["stock", "split", "mask"]
    front = plots.pareto(engine_sweep, cost="total_input_tokens", loss="needed_anchor_recall")
    labels = front.axes[0].get_legend_handles_labels()[1]
    assert {"stock", "split", "mask"} <= set(labels)


def test_the_comparison_widget_pairs_engines_like_summarizers(fixture_conversations):
    from zett_lab.show.widgets import ComparisonExplorer

    conversations = [
        c for c in fixture_conversations if c.id in ("swe-httpq-4821", "billing-rounding", "ci-flaky-kafka")
    ]
    engines = {"stock": None, "split": SplitTurnCompaction}
    widget = ComparisonExplorer(conversations, ["anchors:0.1"], 14_000, 3_000, engines=engines)
    pairing = widget.comparison
    assert widget.error is None and pairing is not None and pairing.by == "engine"
    assert set(pairing.summary["engine"]) == {"stock", "split"} and len(pairing.figures()) == 6
    assert pairing.trace("split", "swe-httpq-4821").setting.engine_name.endswith("SplitTurnCompaction")
    titles = [axis.get_title(loc="left") for axis in widget.figure.axes]
    assert (
        titles[0].startswith("stock: ") and titles[1].startswith("split: ") and titles[-1].startswith("Engines paired")
    )
    swe = next(c for c in conversations if c.id == "swe-httpq-4821")
    fresh = zett_lab.replay(
        swe, max_tokens=14_000, keep_recent_tokens=3_000, summarizer="anchors:0.1", engine=SplitTurnCompaction
    )
    shown = pairing.figures().set_index(["conversation_id", "engine"]).loc[("swe-httpq-4821", "split")]
    assert shown["steps_over_budget"] == fresh.summary()["steps_over_budget"]
    assert "Paired differences" in widget.metrics_area.value


def test_the_report_shows_engines_where_it_shows_summarizers(fixture_conversations):
    from zett_lab.show.report import Report

    conversations = [c for c in fixture_conversations if c.id in ("swe-httpq-4821", "billing-rounding")]
    grid = {"max_tokens": [14_000, 30_000], "keep_recent_tokens": [3_000]}
    engines = {"stock": None, "split": SplitTurnCompaction}
    report = Report.build(conversations, ["anchors:0.1"], grid, executor="serial", engines=engines, date="2025-02-03")
    assert report.summarizers == ["stock", "split"] and not report.failures
    comparison = report.data.comparison
    assert comparison is not None and set(comparison.summary["summarizer"]) == {"stock", "split"}
    over = report.data.results.groupby("summarizer")["steps_over_budget"].sum()
    assert over["split"] < over["stock"]
    page = report.to_html()
    assert "split" in page and "stock" in page
    trace = report.data.trace_for("swe-httpq-4821", "split", 30_000, 3_000)
    assert trace is not None and trace.setting.engine_name.endswith("SplitTurnCompaction")


def test_engines_named_in_text_get_their_short_name_or_class_name_as_label():
    from zett_lab.replay.engine_names import ENGINE_NAMES, labelled_engines

    engines = labelled_engines(["stock", "zett_lab.replay.policies:SplitTurnCompaction", "mask=observation-masking"])
    assert engines == {"stock": None, "SplitTurnCompaction": SplitTurnCompaction, "mask": ObservationMaskingCompaction}
    assert set(ENGINE_NAMES) == {"stock", "split-turn", "observation-masking"}
