"""The page after the sweep: its figures drawn on a process pool's workers while its process builds the explorer,
the explorer's columns taken at once; the same page."""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import pandas as pd
import pytest

from tests.helpers import coding_conversation
from zett_lab.formatting import count
from zett_lab.records import is_missing
from zett_lab.show import plots
from zett_lab.show.report import Report, svg
from zett_lab.show.report.explorer import column
from zett_lab.show.report.render import render_html
from zett_lab.study.executors import process_context


@pytest.fixture(scope="module")
def report() -> Report:
    conversations = [coding_conversation(turns=6, cid="first-session"), coding_conversation(turns=8, cid="second")]
    grid = {"max_tokens": [900, 1800], "keep_recent_tokens": [250, 500]}
    return Report.build(conversations, ["truncate", "mask"], grid, executor="serial", cache=False, date="2025-02-03")


@pytest.fixture()
def drawn_here(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The figures this process saves as SVG (a pool's workers are other processes: theirs are not counted)."""
    saved: list[object] = []
    to_svg = plots.to_svg

    def counted(fig):
        saved.append(fig)
        return to_svg(fig)

    monkeypatch.setattr(plots, "to_svg", counted)
    return saved


def test_figures_are_drawn_on_the_pool_but_the_timelines_and_the_page_is_the_same(report, drawn_here) -> None:
    page = render_html(report.data, report.document())
    assert page == report.to_html()
    timelines = len(report.data.timeline_ids)
    figures = len(drawn_here)
    assert figures > timelines > 0
    drawn_here.clear()
    with cf.ProcessPoolExecutor(2, mp_context=process_context()) as pool:
        assert render_html(report.data, report.document(), pool) == page
    assert len(drawn_here) == timelines  # the others were drawn by the workers


def test_a_pool_that_refuses_or_loses_the_figures_or_is_no_process_pool_leaves_them_here(report, drawn_here) -> None:
    page = render_html(report.data, report.document())
    figures = len(drawn_here)
    drawn_here.clear()
    pool = cf.ProcessPoolExecutor(1, mp_context=process_context())
    pool.shutdown()
    assert render_html(report.data, report.document(), pool) == page  # refused at submit
    assert len(drawn_here) == figures
    drawn_here.clear()

    class Losing(cf.ProcessPoolExecutor):
        """Takes every task and loses it, as a pool whose worker died (it starts no process)."""

        def submit(self, fn, /, *args, **kwargs):
            future: cf.Future[object] = cf.Future()
            future.set_exception(cf.process.BrokenProcessPool("a worker died"))
            return future

    assert render_html(report.data, report.document(), Losing(1)) == page
    assert len(drawn_here) == figures
    drawn_here.clear()
    with cf.ThreadPoolExecutor(2) as threads:  # not a process pool (matplotlib's style is per process): all here
        assert render_html(report.data, report.document(), threads) == page
    assert len(drawn_here) == figures


@pytest.mark.parametrize(
    "values",
    [
        pd.Series([0, 3, 3, 12_000, 7], dtype="Int64"),
        pd.Series([5, -2, 9], dtype="int64"),
        pd.Series([1, None, 4], dtype="Int64"),
        pd.Series([], dtype="Int64"),
        pd.Series([1.5, np.nan, 2.0]),
        pd.Series([True, False]),
    ],
)
def test_a_column_of_a_table_is_what_its_values_one_by_one_give(values) -> None:
    """Whole-number columns are differenced at once; any column reads as the same values listed one by one."""
    assert column(values, count) == column(list(values), count)
    numbers = [None if is_missing(v) else float(v) for v in values] if values.dtype != bool else None
    if numbers is not None:
        assert svg._nums(values) == numbers
