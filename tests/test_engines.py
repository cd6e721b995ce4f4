"""The engine as a parameter of replay: any CompactionExtension, instrumented the same way; bad engines fail clearly."""

from __future__ import annotations

import pytest
from zett_agent.extensions.compaction import CompactionExtension

import zett_lab
from zett_lab.replay import ReplayError
from zett_lab.replay.engine import EngineError, engine_name, engine_reuse
from zett_lab.replay.policies import ObservationMaskingCompaction, SplitTurnCompaction
from zett_lab.replay.recorder import ENGINE_FAILED, NO_WINDOW, SKIP_REASONS
from zett_lab.study.boundaries import same_replay

from .helpers import CountingSummarizer, coding_conversation

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


def _replay(engine, **options):
    return zett_lab.replay(coding_conversation(turns=6), **LIMITS, summarizer=CountingSummarizer(), cache=False, engine=engine, **options)


def test_the_stock_engine_by_class_is_the_default_engine():
    default, explicit = _replay(None), _replay(CompactionExtension)
    assert same_replay(default, explicit) == []
    assert default.settings["engine"] == "CompactionExtension"
    assert engine_reuse(None) == engine_reuse(CompactionExtension) == ("max_tokens", "keep_recent_tokens")


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        (NotAnEngine, "is not a subclass of zett_agent's CompactionExtension"),
        (CompactionExtension(max_tokens=10, keep_recent_tokens=5), "not a configured instance"),
        (42, "must be a CompactionExtension subclass or a factory"),
        (lambda **options: "not an engine", "returned str, not a CompactionExtension"),
        (lambda **options: 1 / 0, "could not be built .* ZeroDivisionError"),
        (lambda **options: CompactionExtension(options["model"], max_tokens=999, keep_recent_tokens=200), "has max_tokens=999 but was asked for 600"),
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
    assert trace.settings["engine"].endswith("test_engines.BrokenWindow")


def test_strict_mode_and_errors_outside_the_pass_stop_the_replay_naming_the_engine_and_step():
    with pytest.raises(ReplayError, match=r"engine tests\.test_engines\.BrokenWindow, turn \d+, step \d+: RuntimeError: window bug"):
        _replay(BrokenWindow, strict=True)
    with pytest.raises(ReplayError, match=r"engine tests\.test_engines\.BrokenAfterModel, turn 0, step 0: RuntimeError: after_model bug"):
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
