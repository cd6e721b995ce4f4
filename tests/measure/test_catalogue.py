"""The metric catalogue: every metric is one module, and one new module is all a new metric needs."""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import math
import multiprocessing
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

import zett_lab
from zett_lab.errors import SettingError
from zett_lab.measure import catalogue
from zett_lab.measure.catalogue import METRICS, Metric, default_metrics, metric, register
from zett_lab.measure.columns import COMPACTION_COLUMNS, CONVERSATION_COLUMNS
from zett_lab.measure.metrics import BUILTIN

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "add-a-metric.md"


@pytest.fixture
def own_registry(monkeypatch):
    """The catalogue as it is, given back after the test (a metric registered in it does not outlive it)."""
    monkeypatch.setattr(catalogue, "_REGISTRY", dict(catalogue._loaded()))
    yield
    sys.modules.pop("summary_share", None)
    catalogue._VERSION[0] += 1  # column tables read the restored catalogue again


def test_every_metric_lives_in_a_module_of_its_own_and_has_a_computation_or_says_where_it_is_computed():
    modules = {entry.module for entry in METRICS}
    assert modules == {f"zett_lab.measure.metrics.{name}" for name in BUILTIN}
    for entry in METRICS:
        assert (entry.compaction or entry.conversation) is not None or entry.computed_by, entry.name
        assert ("compaction" in entry.levels) == (entry.compaction is not None), entry.name
        if entry.conversation is not None:
            assert entry.name in CONVERSATION_COLUMNS, entry.name
        if entry.compaction is not None:
            assert entry.name in COMPACTION_COLUMNS, entry.name


def test_a_name_belongs_to_one_module(own_registry):
    with pytest.raises(SettingError, match="already registered by zett_lab.measure.metrics.anchor_retention"):
        register(Metric("anchor_retention", ("conversation",), "higher", "Mine", "mine", computed_by="elsewhere"))
    with pytest.raises(SettingError, match="not a metric of the catalogue"):
        metric("no_such_metric")


def test_the_default_set_is_the_catalogues_headline_metrics_at_a_level():
    assert default_metrics("compaction") == tuple(m.name for m in METRICS if m.headline and "compaction" in m.levels)
    assert "superseded_rate" in default_metrics() and "engine_compression_ratio" not in default_metrics()


def _module_of_the_page() -> str:
    """The one file the "Add a metric" page shows."""
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert blocks[0].startswith("# summary_share.py")
    return blocks[0]


def _share(compactions: pd.DataFrame) -> pd.Series:
    summary = compactions["summary_tokens"].astype("float64")
    return summary / (summary + compactions["tail_tokens"].astype("float64"))


def test_a_metric_added_in_one_file_is_measured_swept_and_catalogued(
    own_registry, tmp_path, monkeypatch, fixture_conversations
):
    """The page's module, and nothing else, puts a metric in measure(), a sweep's results (also on worker
    processes that cannot import it by name) and the catalogue."""
    (tmp_path / "summary_share.py").write_text(_module_of_the_page(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("summary_share")
    sys.path.remove(str(tmp_path))  # workers started from here on find it by its file

    entry = metric("summary_share")
    assert entry.label == "Summary share of the context" and not entry.higher_is_better
    assert entry.levels == ("compaction", "conversation", "cell") and entry.module == "summary_share"
    assert "summary_share" in [m.name for m in METRICS] and "summary_share" in COMPACTION_COLUMNS

    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    trace = zett_lab.replay(conversation, max_tokens=6_000, keep_recent_tokens=1_500)
    losses = zett_lab.measure(trace)
    compactions = losses.compactions
    windowed = compactions["span_end"].notna()
    assert windowed.sum() >= 2
    pd.testing.assert_series_equal(
        compactions.loc[windowed, "summary_share"], _share(compactions[windowed]), check_names=False
    )
    applied = compactions[compactions["status"] == "applied"]
    mean = float(_share(applied).mean())
    assert losses.conversation["summary_share"].iloc[0] == pytest.approx(mean)
    assert 0 < mean < 1

    grid = {"max_tokens": [6_000], "keep_recent_tokens": [1_500]}
    serial = zett_lab.sweep([conversation], **grid, executor="serial").results
    assert serial["summary_share"].iloc[0] == pytest.approx(mean)
    with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = zett_lab.sweep([conversation], **grid, executor=pool, reuse=False).results
    assert pooled["summary_share"].iloc[0] == pytest.approx(mean)
    assert not math.isnan(pooled["needed_anchor_recall"].iloc[0])


def test_a_setting_pools_each_metric_over_conversations_as_its_entry_says():
    """Steps over budget add up over conversations (``across="sum"``); a recall is averaged."""
    from zett_lab.study import pareto_front

    rows = [
        {"conversation_id": cid, "summarizer": "s", "max_tokens": m, "keep_recent_tokens": 100,
         "total_input_tokens": tokens, "steps_over_budget": over, "needed_anchor_recall": recall}
        for cid, m, tokens, over, recall in (
            ("a", 1000, 10, 3, 0.5), ("b", 1000, 20, 1, 0.7), ("a", 2000, 5, 0, 0.9), ("b", 2000, 50, 0, 0.5),
        )
    ]  # fmt: skip
    table = pd.DataFrame(rows)
    assert catalogue.across_conversations("steps_over_budget", "mean") == "sum"
    assert catalogue.across_conversations("not_a_metric", "mean") == "mean"
    front = pareto_front(table, loss="steps_over_budget", by=["max_tokens"]).set_index("max_tokens")
    assert front.loc[1000, "steps_over_budget"] == 4 and front.loc[1000, "total_input_tokens"] == 30
    front = pareto_front(table, loss="needed_anchor_recall", by=["max_tokens"]).set_index("max_tokens")
    assert front.loc[2000, "needed_anchor_recall"] == pytest.approx(0.7)
