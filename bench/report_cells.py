"""A report over a sweep with more and more cells and the same distinct replays: what grows with the cells.

Issue 30 asks that a report over a sweep cost in proportion to its distinct replays and what it shows, not to
its number of cells. The sweep is the smallest fixture with the truncate summarizer at ``keep_recent_tokens``
400 and 450 and ``max_tokens`` 1,500, 2,500 and N values above the conversation's size (proven to take one
replay's decisions: the distinct replays stay the same whatever N). For each N, in this process: the report's
data (``build_report_data``: what it states) and its page (``to_html``: the figures and the explorer, which
show every cell), in CPU seconds, as ratios to the smallest grid's in the same run (after one run of it that is not shown: imports and
first-use caches); and the page's size.
``tests/report/test_report_scale.py`` counts the work instead (replays, summaries, measurements, tables read).

Run: .venv/bin/python bench/report_cells.py [--extra 2 18 98 398]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", type=int, nargs="+", default=[2, 18, 98, 398], help="max_tokens values added")
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


if __name__ == "__main__":
    main()
