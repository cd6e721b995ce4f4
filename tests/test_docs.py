"""The documentation site's generated sections come from the code (the full strict build is `make docs`)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import zett_lab

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def extension():
    pytest.importorskip("sphinx")
    spec = importlib.util.spec_from_file_location("zett_lab_docs", DOCS / "_ext" / "zett_lab_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_lists_every_public_name(extension):
    text = extension.api_reference()
    documented = set(re.findall(r"^\.\. auto(?:class|function|data):: zett_lab\.(\w+)$", text, re.M))
    assert documented == set(zett_lab.__all__)
    stages = re.findall(r"^## `zett_lab\.(\w+)`", text, re.M)
    assert stages == sorted(stages, key=extension.STAGES.index)  # in the order data flows
    assert ".. autoclass:: zett_lab.study.boundaries.Boundaries" in text  # returned by a public function


def test_column_tables_come_from_the_code(extension):
    from zett_lab.measure.columns import COMPACTION_COLUMNS

    table = extension.columns_table("zett_lab.measure.columns.COMPACTION_COLUMNS")
    assert table.count("\n| `") == len(COMPACTION_COLUMNS) and "`needed_anchor_recall`" in table
    assert r"\|N\_k\|" in table  # bars and underscores stay literal in Markdown
    with pytest.raises(Exception, match="columns zett_lab.nope"):
        extension.columns_table("zett_lab.nope.COLUMNS")


def test_every_column_marker_names_a_table(extension):
    for page in DOCS.rglob("*.md"):
        for dotted in re.findall(r"<!--\s*zett_lab:\s*columns\s+([\w.]+)\s*-->", page.read_text()):
            assert extension.columns_table(dotted).startswith("| column | meaning |"), (page, dotted)


def test_the_cli_reference_has_every_command(extension):
    from zett_lab.show.cli import COMMANDS

    text = extension.cli_reference()
    for command in COMMANDS:
        assert f"## `zett-lab {command}`" in text and f"usage: zett-lab {command}" in text


def test_the_metric_table_is_the_catalogue(extension):
    from zett_lab.measure.catalogue import METRICS

    table = extension.metrics_table()
    assert table.count("\n| `") == len(METRICS)
    assert "| `lost_but_needed` | Needed-anchor losses | lower |" in table


def test_names_imported_for_type_checkers_are_qualified(extension):
    import zett_lab.show.plots.comparison  # noqa: F401 - the module must be loaded, as autodoc loads it

    names = extension.type_checking_imports("zett_lab.show.plots.comparison")
    assert names["Comparison"] == "zett_lab.study.compare.Comparison"


def test_no_merge_conflict_markers_in_the_prose():
    """A merge resolved by hand leaves no ``<<<<<<<`` / ``>>>>>>>`` lines in the README, the docs or the changelog."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md", *(ROOT / "docs").rglob("*.md")]
    marked = [
        f"{page.relative_to(ROOT)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if re.match(r"(<{7}|>{7}) |={7}$", line)
    ]
    assert len(pages) > 10 and marked == []


def _limits_row(page: str, label: str) -> str:
    """The cells after the first of the row of docs/reference/limits.md's tables whose first cell starts with ``label``."""
    rows = [line for line in page.splitlines() if line.startswith(f"| {label}")]
    assert len(rows) == 1, f"one row for {label!r} in limits.md"
    return rows[0]


def test_the_limits_page_states_the_limits_the_engine_and_zett_lab_apply():
    """Every time limit and retry bound on docs/reference/limits.md is the one in force: zett-agent's defaults
    (read from the installed engine) and zett_lab's constants."""
    from zett_agent.model import RetryOptions, TimeoutOptions
    from zett_agent.providers.ollama import OLLAMA_TIMEOUT_OPTIONS

    from zett_lab.replay.deadline import DEFAULT_ENGINE_TIMEOUT
    from zett_lab.replay.engine import REPLAY_FAILED_REQUESTS, SPAN_ATTEMPTS, SummaryNotAsked
    from zett_lab.summarizers.breaker import BREAKER_COOLDOWN_S, BREAKER_THRESHOLD

    page = (DOCS / "reference" / "limits.md").read_text(encoding="utf-8")
    timeouts, retry = TimeoutOptions(), RetryOptions()
    assert f"| {timeouts.connect:g} s |" in _limits_row(page, "connect")
    assert f"| {timeouts.first_byte:g} s (Ollama: {OLLAMA_TIMEOUT_OPTIONS.first_byte:g} s) |" in _limits_row(
        page, "first byte"
    )
    assert f"| {timeouts.idle:g} s |" in _limits_row(page, "idle")
    assert (
        f"| {retry.max_retries} more attempts, {retry.base_delay:g} s doubling to at most {retry.max_delay:g} s |"
        in _limits_row(page, "retries")
    )
    assert f"| {DEFAULT_ENGINE_TIMEOUT:g} s |" in _limits_row(page, "one compaction pass")
    assert f"| {SPAN_ATTEMPTS} |" in _limits_row(page, "attempts per span")
    assert f"| {REPLAY_FAILED_REQUESTS} |" in _limits_row(page, "failed requests per replay")
    assert f"{BREAKER_THRESHOLD} failed connection attempts in a row" in _limits_row(page, "an endpoint")
    assert f"for {BREAKER_COOLDOWN_S:g} s" in _limits_row(page, "an endpoint")
    bound = REPLAY_FAILED_REQUESTS * DEFAULT_ENGINE_TIMEOUT
    assert (
        f"at most {REPLAY_FAILED_REQUESTS} failed summary requests" in page
        and f"`{REPLAY_FAILED_REQUESTS} × engine_timeout`" in page
    )
    assert "one hour with the defaults" in page and bound == 3600
    # a summary not asked again keeps its cause's error kind (it counts under what it failed for)
    assert SummaryNotAsked("x", "timeout").error_kind == "timeout" and "not_asked_again" not in page


def test_the_import_page_says_how_to_replace_an_output():
    """``zett-lab import`` refuses an existing output unless given ``--force``; the page said it never overwrites."""
    from zett_lab.show.arguments import FORCE, build_parser

    page = (DOCS / "how-to" / "import-logs.md").read_text(encoding="utf-8")
    assert "must not exist yet" not in page and f"`{FORCE}`" in page
    assert build_parser().parse_args(["import", "x.jsonl", "-o", "out.sqlite", FORCE]).force is True
