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
    assert "| `lost_but_needed` | Lost but needed | lower |" in table


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
