"""The HTML report in a real browser (Debian chromium via Playwright), opened from disk with no network.

Skipped where no browser is installed, never when CI=true.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.show.test_report import EVIL_ID, build, evil_conversation
from zett_lab.show.report import Report

pytestmark = pytest.mark.browser

OUTPUT = ROOT / "test-output" / "test_report_browser"


class Watched:
    """A page with every request, JS error, console error and dialog recorded."""

    def __init__(self, browser) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        self.page.on(
            "console",
            lambda message: (
                self.errors.append(f"console {message.type}: {message.text}")
                if message.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("dialog", self._dialog)

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: Path) -> None:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("html[data-zl-ready='1']", state="attached", timeout=15_000)

    def close(self) -> None:
        self.page.close()


def shown_cell(page, key: str) -> None:
    """Wait until the explorer shows cell ``key`` (its data is unpacked on demand, so it is shown a moment later)."""
    page.wait_for_function(
        "key => document.getElementById('zl-explore-figure').getAttribute('data-cell') === key", arg=key, timeout=10_000
    )


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import zett_lab

    conversations = [c for c in zett_lab.load_all(FIXTURES) if c.id in ("billing-rounding", "search-p95-regression")]
    report = Report.build(
        conversations,
        ["anchors", "mask"],
        {"max_tokens": [8000, 12000, 16000], "keep_recent_tokens": [2000, 4000]},
        executor="serial",
        date="2025-01-01",
        explore="billing-rounding",
    )
    return report.save_html(tmp_path_factory.mktemp("report") / "report.html")


def test_report_from_disk_makes_no_request_and_switches_settings(browser, fixture_report: Path) -> None:
    watched = Watched(browser)
    try:
        watched.open(fixture_report)
        page = watched.page
        figure = page.locator("#zl-explore-figure")
        first_cell = figure.get_attribute("data-cell")
        first_svg = figure.inner_html()
        first_status = page.locator("#zl-explore-status").inner_text()
        assert first_svg.startswith("<svg") and "polyline" in first_svg
        assert page.locator("#zl-explore-steps tbody tr").count() > 10
        assert page.locator("#zl-explore-compactions thead th").count() == 10

        current = page.locator("#zl-sel-max").input_value()
        other = next(v for v in ("8000", "16000", "12000") if v != current)
        summarizer, _, keep = first_cell.split("|")
        page.select_option("#zl-sel-max", other)
        shown_cell(page, f"{summarizer}|{other}|{keep}")  # a cell is unpacked when first shown
        assert figure.inner_html() != first_svg, "the timeline follows the max_tokens control"
        assert page.locator("#zl-explore-status").inner_text() != first_status

        page.select_option("#zl-sel-keep", "4000")
        page.select_option("#zl-sel-summarizer", index=1)
        shown_cell(page, f"1|{other}|4000")
        assert figure.locator("svg").count() == 1
        assert page.locator("#zl-explore-steps tbody tr").count() > 10

        for section in ("summary", "study", "metrics", "timelines", "sweep", "lost", "costs", "glossary"):
            assert page.locator(f"section#{section}").is_visible()
        assert page.locator("figure svg").count() >= 8

        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "report.png"), full_page=True)
        assert watched.requests == [fixture_report.resolve().as_uri()]
        assert not [url for url in watched.requests if url.startswith(("http:", "https:"))]
        assert watched.errors == [] and watched.dialogs == []
    finally:
        watched.close()


#: Elements that reach past the right edge of the window, or scroll sideways inside it.
_SIDEWAYS = """() => {
    const width = document.documentElement.clientWidth;
    const wide = [...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > width + 0.5)
        .map(e => e.tagName + '.' + e.className);
    const scrolling = [...document.querySelectorAll('body *')]
        .filter(e => e.scrollWidth > e.clientWidth + 1 && !['visible', 'hidden', 'clip'].includes(getComputedStyle(e).overflowX))
        .map(e => e.tagName + '.' + e.className + ' ' + e.scrollWidth + '>' + e.clientWidth);
    return {page: document.documentElement.scrollWidth, wide: wide.slice(0, 5), scrolling: scrolling.slice(0, 5)};
}"""


def test_report_reads_at_1280_px_without_sideways_scrolling(browser, fixture_report: Path) -> None:
    """Folded and unfolded, nothing is wider than a 1280 px window; long parts are folded with their counts;
    every metric's column header carries its catalogue definition."""
    from zett_lab.measure.catalogue import CATALOGUE

    watched = Watched(browser)
    try:
        watched.open(fixture_report)
        page = watched.page
        folded = page.evaluate("document.documentElement.scrollHeight")
        assert page.evaluate(_SIDEWAYS) == {"page": 1280, "wide": [], "scrolling": []}
        summaries = page.locator("details.more > summary").all_inner_texts()
        assert any("more timeline" in s for s in summaries) and any("terms and metrics" in s for s in summaries)
        assert all(any(ch.isdigit() for ch in s) for s in summaries), f"a folded part without its count: {summaries}"
        titles = dict(page.eval_on_selector_all("#metrics th[title]", "ths => ths.map(t => [t.innerText, t.title])"))
        for entry in CATALOGUE.values():
            if entry.label in titles:
                assert titles[entry.label].startswith(entry.definition)
        assert "Needed-anchor recall" in titles
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_timeout(200)
        assert page.evaluate(_SIDEWAYS) == {"page": 1280, "wide": [], "scrolling": []}
        assert page.evaluate("document.documentElement.scrollHeight") > folded
        assert watched.errors == []
    finally:
        watched.close()


#: Words (runs of letters and digits) a line break cuts in two inside the lost-but-needed tables ("messa|ge 3:")
#: though their whole unspaced run is narrower than a column may be (an unspaced run wider than 300 px, and a value
#: in its monospace box, may break anywhere).
_BROKEN_WORDS = r"""() => {
    const broken = [];
    const rects = (node, start, end) => {
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, end);
        return [...range.getClientRects()].filter(r => r.width > 0);
    };
    for (const cell of document.querySelectorAll('table.lost td')) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (node.parentElement.closest('.value, pre, details:not([open]) > :not(summary)')) { continue; }
            for (const token of node.data.matchAll(/\S+/g)) {
                const width = rects(node, token.index, token.index + token[0].length).reduce((s, r) => s + r.width, 0);
                if (width > 300) { continue; }
                for (const word of token[0].matchAll(/[\p{L}\p{N}_]+/gu)) {
                    const at = token.index + word.index;
                    if (new Set(rects(node, at, at + word[0].length).map(r => Math.round(r.top))).size > 1) {
                        broken.push(word[0]);
                    }
                }
            }
        }
    }
    return broken.slice(0, 5);
}"""


#: Whether the row with this id is what the reader sees at its centre (not under the table's sticky header),
#: and its cells' background (the :target mark).
_SHOWN = """id => {
    const row = document.getElementById(id), box = row.getBoundingClientRect();
    const x = Math.min(box.left + box.width / 2, innerWidth / 2), y = box.top + box.height / 2;
    return [row.contains(document.elementFromPoint(x, y)), getComputedStyle(row.cells[0]).backgroundColor];
}"""


@pytest.fixture(scope="module")
def lossy_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A report whose lost-but-needed and dropped-constraint tables have rows (truncate at small windows) and whose
    alerts link to rows of the sweep's table."""
    import zett_lab

    conversations = [c for c in zett_lab.load_all(FIXTURES) if c.id in ("billing-rounding", "cache-layer-migration")]
    grid = {"max_tokens": [4000, 6000, 9000, 12000], "keep_recent_tokens": [1000, 1600]}
    report = Report.build(conversations, ["truncate", "mask"], grid, executor="serial", cache=False, date="2025-01-01")
    return report.save_html(tmp_path_factory.mktemp("lossy") / "report.html")


def test_report_reads_at_390_px_without_sideways_scrolling(browser, lossy_report: Path) -> None:
    """On a phone-sized window the page never scrolls sideways: each wide table or figure scrolls in its own box,
    words are not cut mid-word, and the explorer's box fits its chart. An alert's evidence link shows its row,
    marked, below the sticky header of its table (tallest at this width)."""
    watched = Watched(browser)
    try:
        watched.page.set_viewport_size({"width": 390, "height": 844})
        watched.open(lossy_report)
        page = watched.page
        page.add_style_tag(content=".scroll{max-height:200px}")  # as short as a long table's box is for its rows
        link = page.locator("#alerts a[href^='#configuration-']").last
        target = link.get_attribute("href")
        link.click()
        page.wait_for_timeout(200)
        assert page.evaluate(_SHOWN, target[1:]) == [True, "rgb(255, 243, 191)"], f"{target} is hidden or unmarked"
        for state in ("folded", "unfolded"):
            if state == "unfolded":
                page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
                page.wait_for_timeout(200)
            assert page.evaluate("document.documentElement.scrollWidth") <= 392, state
            boxes = page.evaluate(
                """() => [...document.querySelectorAll('table, figure')]
                    .filter(e => e.scrollWidth > e.clientWidth + 1)
                    .map(e => [e.tagName, getComputedStyle(e).overflowX, e.closest('.scroll') !== null])"""
            )
            assert any(tag == "TABLE" for tag, _, _ in boxes), "some table is wider than 390 px (the check checks)"
            assert all(overflow == "auto" or in_box for _, overflow, in_box in boxes), boxes
        assert page.locator("table.lost tbody tr").count() > 5
        assert page.evaluate(_BROKEN_WORDS) == []
        figure, chart = page.evaluate(
            """() => { const f = document.getElementById('zl-explore-figure');
                return [f.getBoundingClientRect().height, f.querySelector('svg').getBoundingClientRect().height]; }"""
        )
        assert chart > 50 and figure - chart < 2, (figure, chart)
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "report_390.png"), full_page=True)
        assert watched.errors == []
    finally:
        watched.close()


def test_injected_content_stays_text(browser, tmp_path: Path) -> None:
    report = build([evil_conversation()], explore=EVIL_ID)
    path = report.save_html(tmp_path / "evil.html")
    watched = Watched(browser)
    try:
        watched.open(path)
        page = watched.page
        page.select_option("#zl-sel-max", "1800")  # every cell's tables go through the script
        page.select_option("#zl-sel-summarizer", index=1)
        page.wait_for_timeout(200)
        assert page.evaluate("typeof window.__zl_pwned") == "undefined", "an injected script ran"
        text = page.locator("body").inner_text()
        assert "window.__zl_pwned" in text, "the payloads are shown as text"
        assert "<script>" in text
        assert page.locator("img, iframe, object, embed").count() == 0
        assert page.locator("section#lost").is_visible()
        assert page.evaluate("getComputedStyle(document.body).display") != "none", "injected CSS did not apply"
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / "escaped.png"), full_page=False)
        assert watched.errors == [] and watched.dialogs == []
        assert all(url.startswith("file:") for url in watched.requests)
    finally:
        watched.close()


def test_notebook_frame_is_isolated(browser, tmp_path: Path, fixture_report: Path) -> None:
    """_repr_html_: the report renders and works inside an iframe; the host page's styles stay its own."""
    report = build([evil_conversation()], explore=EVIL_ID)
    host = tmp_path / "notebook.html"
    host.write_text(
        "<!DOCTYPE html><html><head><style>h2{color:rgb(1, 2, 3)}</style></head><body><h2 id='host'>notebook</h2>"
        + report._repr_html_()
        + "</body></html>",
        encoding="utf-8",
    )
    watched = Watched(browser)
    try:
        watched.page.goto(host.resolve().as_uri())
        frame = watched.page.frame_locator("iframe.zett-lab-report")
        frame.locator("html[data-zl-ready='1']").wait_for(state="attached", timeout=15_000)
        assert frame.locator("#zl-explore-figure svg").count() == 1
        frame.locator("#zl-sel-max").select_option("1800")
        assert frame.locator("#zl-explore-figure").get_attribute("data-cell").endswith("|1800|250")
        host_color = watched.page.evaluate("getComputedStyle(document.getElementById('host')).color")
        assert host_color == "rgb(1, 2, 3)"
        inner_color = frame.locator("section#summary h2").evaluate("e => getComputedStyle(e).color")
        assert inner_color != "rgb(1, 2, 3)", "the host's CSS does not reach into the report"
        assert watched.page.evaluate("typeof window.__zl_pwned") == "undefined"
        assert not [url for url in watched.requests if url.startswith(("http:", "https:"))]
        assert watched.errors == [] and watched.dialogs == []
    finally:
        watched.close()


RLO = "\u202e"

#: Every text node holding a right-to-left override whose override could reach page text after it:
#: no element between the text and its block isolates it, and more text follows in that block.
LEAKS = r"""
() => {
  const leaks = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.includes("\u202e")) { continue; }
    let element = node.parentElement, isolated = false;
    while (element && getComputedStyle(element).display.startsWith("inline")) {
      if (getComputedStyle(element).unicodeBidi === "isolate") { isolated = true; break; }
      element = element.parentElement;
    }
    if (isolated || !element) { continue; }
    if (getComputedStyle(element).unicodeBidi === "isolate" && node.parentElement === element) { continue; }
    const range = document.createRange();
    range.setStartAfter(node);
    range.setEnd(element, element.childNodes.length);
    if (range.toString().trim()) { leaks.push(element.tagName + ": " + node.data.slice(0, 60)); }
  }
  return leaks;
}
"""


class RightToLeftSummarizer:
    """An offline summarizer whose name carries a right-to-left override (a user-given label)."""

    def __init__(self) -> None:
        from zett_lab.summarizers import summarizer

        self.model = summarizer("truncate")
        self.identity = f"trunc{RLO}ate"
        self.retry = self.model.retry

    def stream(self, request):
        return self.model.stream(request)


def rtl_conversation():
    from zett_agent.messages import AssistantMessage, ToolMessage, UserMessage

    from tests.helpers import coding_conversation

    conversation = coding_conversation(turns=5, cid=f"rtl{RLO}session")
    for index, message in enumerate(conversation.messages):
        text = message.content if isinstance(message, (UserMessage, AssistantMessage, ToolMessage)) else None
        if isinstance(text, str) and text:
            marked = text.replace("module_", f"mod{RLO}ule_")
            conversation.messages[index] = dataclasses.replace(message, content=marked)
    conversation.metadata["title"] = f"title {RLO} reversed"
    return conversation


def test_right_to_left_overrides_stay_inside_their_text(browser, tmp_path: Path) -> None:
    conversation = rtl_conversation()
    grid = {"max_tokens": [900], "keep_recent_tokens": [250]}
    report = Report.build(
        [conversation], ["mask", RightToLeftSummarizer()], grid, executor="serial", cache=False, date="2025-01-01"
    )
    path = report.save_html(tmp_path / "rtl.html")
    watched = Watched(browser)
    try:
        watched.open(path)
        page = watched.page
        holders = page.evaluate(
            "() => [...document.querySelectorAll('body *')].filter(e => e.textContent.includes('\\u202e')).length"
        )
        assert holders > 10, "the override reaches the page in many places (id, title, anchors, summaries, label)"
        assert page.evaluate(LEAKS) == []
        page.add_style_tag(content="*{unicode-bidi:normal !important}")
        assert page.evaluate(LEAKS) != [], "without isolation the check finds the override reordering page text"
    finally:
        watched.close()


def test_first_paint_of_the_report_is_printed(browser, fixture_report: Path, capsys) -> None:
    """The time to first paint, printed (bench/first_paint.py; bench/report_scale.py prints the long session's).
    A figure, never an assertion on time: the machine is shared."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from first_paint import describe, first_paint

    figures = first_paint(browser, fixture_report)
    with capsys.disabled():
        print(f"\nreport page, fixtures: {describe(figures)}")
    assert figures["first_contentful_paint"] > 0 and figures["load"] >= figures["dom_content_loaded"] > 0
