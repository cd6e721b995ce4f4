"""A report over a sweep with more and more cells and the same distinct replays: what grows with the cells.

Issue 30 asks that a report over a sweep cost in proportion to its distinct replays and what it shows, not to
its number of cells. The sweep is the smallest fixture with the truncate summarizer at ``keep_recent_tokens``
400 and 450 and ``max_tokens`` 1,500, 2,500 and N values above the conversation's size (proven to take one
replay's decisions: the distinct replays stay the same whatever N). For each N, in this process: the report's
data (``build_report_data``: what it states) and its page (``to_html``: the figures and the explorer, which
show every cell), in CPU seconds, as ratios to the smallest grid's in the same run (after one run of it that is not shown: imports and
first-use caches); and the page's size.

Then the pricing of a report for another model than the sweep's (``gpt-5``; the sweep priced for
``gpt-5-mini``): the report's data in CPU seconds, and its pricing alone, each distinct replay priced once
(``replay_costs``) against the baseline of pricing every cell's trace (``costs_per_replay`` over every cell:
what the report did before), alternated, median of ``--repeat`` runs each, with a check that both give the same
costs.
``tests/report/test_report_scale.py`` counts the work instead (replays, summaries, measurements, tables read,
traces priced).

Run: .venv/bin/python bench/report_cells.py [--extra 2 18 98 398] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from zett_lab.study import Sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", type=int, nargs="+", default=[2, 18, 98, 398], help="max_tokens values added")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each pricing (the median is shown)")
    args = parser.parse_args()
    import zett_lab
    from zett_lab.study import clear_worker_state
    from zett_lab.tokens import count_tokens

    warnings.simplefilter("ignore")
    small = min(zett_lab.load_all(ROOT / "fixtures" / "sessions.sqlite"), key=lambda c: len(c.messages))
    above = 2 * count_tokens(small.messages)
    first: tuple[int, float, float] | None = None
    for run, extra in enumerate([args.extra[0], *args.extra]):  # the first run warms up (imports, caches)
        clear_worker_state()
        result = zett_lab.sweep(
            [small],
            max_tokens=[1_500, 2_500, *(above + 100 * n for n in range(extra))],
            keep_recent_tokens=[400, 450],
            summarizers=["truncate"],
            executor="serial",
            cache=False,
            primary_model="gpt-5-mini",
        )
        cells, distinct = len(result.results), len(set(result.store.cells.values()))
        started = time.process_time()
        report = zett_lab.Report(sweep=result, date="2025-01-01")
        data_cpu = time.process_time() - started
        started = time.process_time()
        page = report.to_html()
        page_cpu = time.process_time() - started
        if not run:
            continue
        first = first or (cells, data_cpu, page_cpu)
        print(
            f"{cells:,} cells, {distinct} distinct replays: report data {data_cpu:.2f} s CPU "
            f"({data_cpu / first[1]:.2f}x), page {page_cpu:.2f} s CPU ({page_cpu / first[2]:.2f}x), "
            f"{len(page):,} characters; cells {cells / first[0]:.0f}x",
            flush=True,
        )
        _pricing(result, cells, distinct, data_cpu, args.repeat)


def _pricing(sweep: Sweep, cells: int, distinct: int, data_cpu: float, repeat: int) -> None:
    """A report priced for another model than ``sweep``'s: its data, and its pricing per distinct replay against
    pricing every cell (the baseline), medians of ``repeat`` alternated runs in CPU seconds."""
    import pandas as pd

    import zett_lab
    from zett_lab.report.measured import Measured
    from zett_lab.report.replays import replay_costs, report_replays
    from zett_lab.report.tables import costs_per_replay, price_names

    started = time.process_time()
    zett_lab.Report(sweep=sweep, date="2025-01-01", primary_model="gpt-5")
    other_cpu = time.process_time() - started
    entries = report_replays([], sweep, None, [], "gpt-5", Measured("serial")).entries
    priced = price_names(entries)[0]
    every_cpu, distinct_cpu = [], []
    for _ in range(repeat):
        started = time.process_time()
        every = costs_per_replay(entries, "gpt-5", priced)
        every_cpu.append(time.process_time() - started)
        started = time.process_time()
        once = replay_costs(entries, 0, sweep, "gpt-5", priced)
        distinct_cpu.append(time.process_time() - started)
    keys = ["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens"]
    pd.testing.assert_frame_equal(
        once.sort_values(keys).reset_index(drop=True), every.sort_values(keys).reset_index(drop=True)
    )
    baseline, now = statistics.median(every_cpu), statistics.median(distinct_cpu)
    print(
        f"  priced for another model: report data {other_cpu:.2f} s CPU ({other_cpu / data_cpu:.2f}x its own model's); "
        f"pricing {cells:,} cells {baseline:.3f} s, {distinct} distinct replays {now:.3f} s CPU "
        f"(baseline / now {baseline / now:.1f}x, same costs)",
        flush=True,
    )


if __name__ == "__main__":
    main()
