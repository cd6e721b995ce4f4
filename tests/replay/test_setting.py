"""One typed Setting: what decides a replay, named so it survives every file it is saved in, and read by field."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from zett_agent.extensions.compaction import CompactionExtension

import zett_lab
from tests.replay.test_live import DECISIONS, LIMITS, run_agent
from zett_lab import ReplayOptions, Setting
from zett_lab.errors import SettingError
from zett_lab.replay.engine import EngineError
from zett_lab.replay.policies import SplitTurnCompaction
from zett_lab.replay.setting import SETTING_FIELDS, SavedName, TraceSettings
from zett_lab.summarizers import summarizer
from zett_lab.tokens import APPROX_COUNTER, EXACT_COUNTER, ApproxCounter, MemoizingCounter, count_tokens

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def conversation(fixture_conversations):
    return next(c for c in fixture_conversations if c.id == "billing-rounding")


def test_a_setting_is_named_by_identities_and_equal_to_its_record():
    given = Setting(max_tokens=12_000, keep_recent_tokens=3_000, summarizer="truncate:0.1", engine="split-turn")
    built = Setting(12_000, 3_000, summarizer=summarizer("truncate:0.1"), engine=SplitTurnCompaction)
    names = given.names()
    assert names["summarizer"] == "truncate(budget=0.1)"
    assert names["engine"] == "zett_lab.replay.policies.SplitTurnCompaction" and names["counter"] == EXACT_COUNTER
    assert given == built and hash(given) == hash(built) and len({given, built}) == 1
    read = Setting.from_record(names)
    assert read == given and isinstance(read.summarizer, SavedName) and read.engine_spec() is SplitTurnCompaction
    assert pickle.loads(pickle.dumps(given.named())) == given
    assert given != dataclasses.replace(given, max_tokens=12_001)
    assert given != dataclasses.replace(given, counter=ApproxCounter())


def test_a_setting_checks_every_field_when_it_is_made():
    with pytest.raises(SettingError, match="max_tokens must be a positive integer"):
        Setting(max_tokens=0, keep_recent_tokens=10)
    with pytest.raises(SettingError, match="usage must be one of"):
        Setting(100, 10, usage="live")
    with pytest.raises(SettingError, match="reasoning_effort must be one of"):
        Setting(100, 10, reasoning_effort="extreme")
    with pytest.raises(SettingError, match="compact_at entry"):
        Setting(100, 10, compact_at=("step:x",))
    with pytest.raises(EngineError, match="not a subclass"):
        Setting(100, 10, engine=dict)
    assert Setting(100, 10, compact_at=[3, "step:4", "turn:5"]).compact_at == (3, "step:4", 5)
    with pytest.raises(SettingError, match="unknown replay keyword"):
        zett_lab.replay(None, Setting(100, 10), max_token=5)  # type: ignore[arg-type]


def test_keywords_build_the_one_setting_and_options(conversation):
    by_keywords = zett_lab.replay(
        conversation, max_tokens=12_000, keep_recent_tokens=3_000, summarizer="mask", strict=True, cache=False
    )
    by_setting = zett_lab.replay(
        conversation, Setting(12_000, 3_000, summarizer="mask"), ReplayOptions(strict=True, cache=False)
    )
    assert by_keywords.setting == by_setting.setting == Setting(12_000, 3_000, summarizer="mask")
    assert by_keywords.settings.strict is by_setting.settings.strict is True
    pd.testing.assert_frame_equal(by_keywords.steps, by_setting.steps)


@pytest.mark.parametrize("suffix", [".json", ".parquet"])
def test_a_setting_round_trips_through_a_saved_trace_and_replays_again(conversation, tmp_path, suffix):
    setting = Setting(12_000, 3_000, summarizer="truncate:0.1", engine="split-turn", compact_at=("step:3",))
    trace = zett_lab.replay(conversation, setting, ReplayOptions(cache=False))
    loaded = zett_lab.Trace.load(trace.save(tmp_path / f"trace{suffix}"))
    assert loaded.setting == setting and loaded.settings == trace.settings
    again = zett_lab.replay(loaded.conversation, loaded.setting, ReplayOptions(cache=False))
    pd.testing.assert_frame_equal(again.steps, trace.steps)


def test_a_saved_provider_is_named_but_never_called_from_the_file():
    read = Setting.from_record({"max_tokens": 100, "keep_recent_tokens": 10, "summarizer": "openai:gpt-5-mini"})
    assert read.summarizer_name == "openai:gpt-5-mini"
    with pytest.raises(SettingError, match="read from a file"):
        read.summary_model()
    with pytest.raises(EngineError, match="read from a file"):
        Setting.from_record({"max_tokens": 100, "keep_recent_tokens": 10, "engine": "os.system"}).engine_spec()


def test_a_setting_round_trips_through_a_saved_sweep(fixture_conversations, tmp_path):
    small = sorted(fixture_conversations, key=lambda c: len(c.messages))[:2]
    swept = zett_lab.sweep(
        small,
        max_tokens=[4_000, 9_000],
        keep_recent_tokens=[1_000],
        summarizers=["truncate:0.1"],
        engines={"stock": None, "split": SplitTurnCompaction},
        executor="serial",
        cache=False,
        progress=False,
        usage="synthetic",
        usage_overhead=50,
    )
    loaded = zett_lab.Sweep.load(swept.save(tmp_path / "sweep"))
    assert set(swept.cells()) == set(loaded.cells()) and len(swept.cells()) == 2 * 2 * 2
    for cell in swept.cells():
        summarizer_label, engine_label = swept.labels(cell.setting)
        engine = None if engine_label == "stock" else SplitTurnCompaction
        expected = Setting(
            cell.setting.max_tokens,
            cell.setting.keep_recent_tokens,
            "truncate:0.1",
            engine,
            usage="synthetic",
            usage_overhead=50,
        )
        assert cell.setting == expected and loaded.labels(cell.setting) == (summarizer_label, engine_label)
        by_labels = loaded.setting(expected.max_tokens, expected.keep_recent_tokens, summarizer_label, engine_label)
        assert by_labels == expected
        fresh, read = swept.trace(*cell), loaded.trace(cell.conversation_id, expected)
        assert fresh.setting == read.setting == expected
        pd.testing.assert_frame_equal(fresh.steps, read.steps)


def test_two_labels_naming_one_summarizer_or_engine_are_refused(fixture_conversations):
    with pytest.raises(SettingError, match="are the same"):
        zett_lab.sweep(
            fixture_conversations[:1],
            max_tokens=[4_000],
            keep_recent_tokens=[1_000],
            summarizers=["truncate:0.1", "truncate:0.10"],
            executor="serial",
            progress=False,
        )
    with pytest.raises(SettingError, match="are the same"):
        zett_lab.sweep(
            fixture_conversations[:1],
            max_tokens=[4_000],
            keep_recent_tokens=[1_000],
            engines={"a": SplitTurnCompaction, "b": SplitTurnCompaction},
            executor="serial",
            progress=False,
        )


def test_a_setting_round_trips_through_a_live_trace_and_replays_its_decisions(tmp_path):
    extension = CompactionExtension(summarizer("truncate:0.1"), **LIMITS)
    asyncio.run(run_agent(zett_lab.instrument(extension, tmp_path / "live.jsonl")))
    live = zett_lab.Trace.load(tmp_path / "live.jsonl")
    assert live.setting == Setting(**LIMITS, summarizer="truncate:0.1", usage="recorded")
    assert live.settings.live is not None and live.settings.counter == EXACT_COUNTER
    replayed = zett_lab.replay(live.conversation, live.setting, ReplayOptions(cache=False))
    pd.testing.assert_frame_equal(replayed.steps[DECISIONS], live.steps[DECISIONS], check_dtype=False)


class ApproxLookingExact(MemoizingCounter):
    """An exact counter whose class name says "Approx": its identity, not its name, decides."""


def test_the_counters_identity_decides_which_counter_measure_uses(conversation, tmp_path):
    options = ReplayOptions(cache=False)
    approx = zett_lab.replay(conversation, Setting(6_000, 2_000, "truncate:0.1", counter=ApproxCounter()), options)
    assert approx.settings.counter == APPROX_COUNTER
    loaded = zett_lab.Trace.load(approx.save(tmp_path / "approx.json"))
    by_identity = zett_lab.measure(loaded).compactions["span_tokens"]
    assert by_identity.equals(zett_lab.measure(approx, counter=ApproxCounter()).compactions["span_tokens"])
    assert not by_identity.equals(zett_lab.measure(approx, counter=count_tokens).compactions["span_tokens"])
    named = zett_lab.replay(conversation, Setting(6_000, 2_000, "truncate:0.1", counter=ApproxLookingExact()), options)
    assert named.settings.counter == EXACT_COUNTER
    assert (
        zett_lab.measure(named)
        .compactions["span_tokens"]
        .equals(zett_lab.measure(named, counter=count_tokens).compactions["span_tokens"])
    )


def test_trace_settings_are_read_by_field_outside_their_record():
    """No module reads a setting by string key (``x.settings["max_tokens"]``, ``settings.get("engine")``) except
    where settings are written and read back (``replay/setting.py``)."""
    keys = set(SETTING_FIELDS) | {f.name for f in dataclasses.fields(TraceSettings)}
    found = []
    for path in sorted((ROOT / "zett_lab").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() == "zett_lab/replay/setting.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Subscript):
                owner, key = node.value, node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
                owner, key = node.func.value, node.args[0] if node.args else None
            else:
                continue
            if isinstance(key, ast.Constant) and key.value in keys and ast.unparse(owner).endswith("settings"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_a_record_is_read_by_typed_fields_and_a_wrong_type_fails_naming_its_field():
    """Older spellings still read (numbers as text, turns as ints); a field of another type names itself."""
    read = Setting.from_record(
        {"max_tokens": "4000", "keep_recent_tokens": 500.0, "usage": "live", "compact_at": [2, "step:5"]}
    )
    assert (read.max_tokens, read.keep_recent_tokens, read.usage, read.compact_at) == (
        4000,
        500,
        "recorded",
        (2, "step:5"),
    )
    settings = TraceSettings.from_record(
        {
            **read.names(),
            "live": True,
            "source": "run.jsonl",
            "torn_records": [3, 7],
            "gaps": ["a gap"],
            "strict": True,
            "engine_timeout": 30,
            "cache": {"path": ":memory:", "hits": 2},
        }
    )
    assert settings.live is not None and settings.live.torn_records == (3, 7) and settings.live.gaps == ("a gap",)
    assert (settings.strict, settings.engine_timeout, settings.cache) == (True, 30.0, {"path": ":memory:", "hits": 2})
    assert TraceSettings.from_record(settings.record()) == settings
    with pytest.raises(ValueError, match="field 'max_tokens' is not an integer: 'many'"):
        Setting.from_record({"max_tokens": "many", "keep_recent_tokens": 10})
    with pytest.raises(ValueError, match="field 'torn_records' is not an integer: 'x'"):
        TraceSettings.from_record({"live": True, "torn_records": ["x"]})
    with pytest.raises(ValueError, match="field 'strict' is not true or false: 'yes'"):
        TraceSettings.from_record({"strict": "yes", "summarizer": "s", "counter": "c"})
    with pytest.raises(SettingError, match="names no max_tokens"):
        Setting.from_record({"keep_recent_tokens": 10})


def test_a_record_of_numpy_numbers_reads_as_python_ints_and_a_flag_is_no_integer():
    """Records built from tables hold numpy numbers; a bool (numpy's too) is never read as 0 or 1."""
    read = Setting.from_record({"max_tokens": np.int64(4000), "keep_recent_tokens": np.float64(500.0)})
    assert (read.max_tokens, read.keep_recent_tokens) == (4000, 500)
    assert type(read.max_tokens) is int
    for flag in (True, np.True_):
        with pytest.raises(ValueError, match="field 'max_tokens' is not an integer"):
            Setting.from_record({"max_tokens": flag, "keep_recent_tokens": 10})
