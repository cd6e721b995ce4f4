"""How long a report page takes to open in Chromium: time to first paint and first contentful paint (the
browser's own Paint Timing entries), DOMContentLoaded and load (Navigation Timing), in milliseconds since the
navigation started, for a page opened from disk.

:func:`first_paint` takes a Playwright browser (the browser tests' fixture, or :func:`chromium` here); the
browser test prints its figures for the fixtures' report and ``bench/report_scale.py`` for the long
session's. A figure, never an assertion: the machine is shared.

Run: .venv/bin/python bench/first_paint.py PAGE.html [PAGE.html ...]
"""

from __future__ import annotations

import contextlib
import os
import shutil
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: Openings per page; the median of each figure is given (the first opening also warms the browser's caches).
OPENINGS = 3

_TIMINGS = """() => {
  const paint = Object.fromEntries(performance.getEntriesByType("paint").map(e => [e.name, e.startTime]));
  const nav = performance.getEntriesByType("navigation")[0];
  return {first_paint: paint["first-paint"], first_contentful_paint: paint["first-contentful-paint"],
          dom_content_loaded: nav ? nav.domContentLoadedEventEnd : null, load: nav ? nav.loadEventEnd : null};
}"""


def first_paint(browser: Any, path: Path, openings: int = OPENINGS) -> dict[str, float]:
    """Median milliseconds to first paint, first contentful paint, DOMContentLoaded and load, and the page's
    size, over ``openings`` openings of ``path`` in fresh pages of ``browser``."""
    runs = []
    for _ in range(openings):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(path.resolve().as_uri(), wait_until="load")
            # A function, not an expression: the page's CSP forbids eval, which an expression's polling needs.
            page.wait_for_function("() => performance.getEntriesByType('paint').length >= 2", timeout=30_000)
            runs.append(page.evaluate(_TIMINGS))
        finally:
            page.close()
    out = {
        name: statistics.median(run[name] for run in runs)
        for name in ("first_paint", "first_contentful_paint", "dom_content_loaded", "load")
    }
    out["bytes"] = path.stat().st_size
    return out


def describe(figures: dict[str, float]) -> str:
    """One line: the page's size and its median times."""
    return (
        f"{figures['bytes']:,} bytes: first paint {figures['first_paint']:,.0f} ms, first contentful paint "
        f"{figures['first_contentful_paint']:,.0f} ms, DOMContentLoaded {figures['dom_content_loaded']:,.0f} ms, "
        f"load {figures['load']:,.0f} ms (median of {OPENINGS} openings)"
    )


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium through Playwright, with the browser tests' flags."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT))
    from tests.conftest import CHROMIUM_ARGS

    path = os.environ.get("ZETT_LAB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


if __name__ == "__main__":
    with chromium() as browser:
        for page in sys.argv[1:]:
            print(f"{page}: {describe(first_paint(browser, Path(page)))}")
