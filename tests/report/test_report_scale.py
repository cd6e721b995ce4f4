"""A report over a sweep costs in proportion to its distinct replays and what it shows, not to its cells (issue 30).

Work is counted, not timed (``bench/report_cells.py`` times it): the replays run, the summaries asked for, the
loss measurements and the reads of a replay's tables from the sweep's folder, for a sweep and its report, on
two grids of one conversation with the same distinct replays and five times the cells (every added
``max_tokens`` is above the conversation's size: proven to take the decisions of one replay per
``keep_recent_tokens``). And the traces a report prices: each distinct replay's once, not every cell's.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
import pytest

import zett_lab
from zett_lab.measure import losses
from zett_lab.report import replays, tables
from zett_lab.report.measured import Measured
from zett_lab.study import clear_worker_state, units
from zett_lab.study.sources import SourceFolder
from zett_lab.summarizers.offline.base import OfflineSummarizer
from zett_lab.tokens import count_tokens


@pytest.fixture(scope="module")
def small(fixture_conversations):
    return min(fixture_conversations, key=lambda c: len(c.messages))


def _counted(monkeypatch, counts: Counter[str], owner: object, name: str, what: str) -> None:
    real = getattr(owner, name)

    def counting(*args, **kwargs):
        counts[what] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)


def _work(monkeypatch, conversation, max_tokens: list[int]) -> tuple[int, Counter[str], str]:
    """A sweep of one conversation and its report: the cells, the work counted, the page."""
    clear_worker_state()  # no replay proven by an earlier sweep of this process
    counts: Counter[str] = Counter()
    with monkeypatch.context() as patch:
        _counted(patch, counts, units, "replay_forkable", "replays")
        _counted(patch, counts, OfflineSummarizer, "summarize", "summaries")
        _counted(patch, counts, losses, "_measure_one", "measurements")
        _counted(patch, counts, SourceFolder, "read", "tables read")
        result = zett_lab.sweep(
            [conversation],
            max_tokens=max_tokens,
            keep_recent_tokens=[400, 450],
            summarizers=["truncate"],
            executor="serial",
            cache=False,
            primary_model="gpt-5-mini",
        )
        page = zett_lab.Report(sweep=result, date="2025-01-01").to_html()
    return len(result.results), counts, page


def test_a_report_over_a_sweep_works_per_distinct_replay_not_per_cell(monkeypatch, small):
    above = 2 * count_tokens(small.messages)
    few, few_counts, few_page = _work(monkeypatch, small, [1_500, 2_500, above, above + 100])
    many, many_counts, many_page = _work(monkeypatch, small, [1_500, 2_500, *(above + 100 * n for n in range(18))])
    assert many == 5 * few
    assert few_counts["replays"] and few_counts["summaries"] and few_counts["measurements"]
    assert many_counts == few_counts, (few_counts, many_counts)
    for cells, page in ((few, few_page), (many, many_page)):  # what it shows has every cell: the explorer's
        assert page.count('"0|') == cells, cells


@pytest.mark.parametrize("sweep_model", [None, "gpt-5"])
def test_a_report_prices_each_distinct_replay_once_and_the_costs_are_every_cells(monkeypatch, small, sweep_model):
    """A sweep priced for another model (or for none): the report prices each distinct replay's trace once and
    copies its costs to the cells derived from it; they equal what pricing every cell's trace gives."""
    above = 2 * count_tokens(small.messages)
    clear_worker_state()
    result = zett_lab.sweep(
        [small],
        max_tokens=[1_500, 2_500, *(above + 100 * n for n in range(8))],
        keep_recent_tokens=[400, 450],
        summarizers=["truncate"],
        executor="serial",
        cache=False,
        primary_model=sweep_model,
    )
    distinct = len(set(result.store.cells.values()))
    priced: list[tuple[str, object]] = []

    def counting(entries, *args):
        priced.extend(entries)
        return tables.costs_per_replay(entries, *args)

    monkeypatch.setattr(replays, "costs_per_replay", counting)
    got = replays.report_replays([], result, None, [], "gpt-5-mini", Measured("serial"))
    assert len(priced) == distinct < len(result.results) == len(got.entries) == 20
    every = tables.costs_per_replay(got.entries, "gpt-5-mini", tables.price_names(got.entries)[0])
    keys = ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens"]
    shown = got.attempted[every.columns].sort_values(keys).reset_index(drop=True)
    expected = every.sort_values(keys).reset_index(drop=True)
    assert expected["total_cost_usd"].gt(0).all()
    pd.testing.assert_frame_equal(shown, expected, check_dtype=False)
