"""The notebooks run top to bottom on the bundled fixtures, offline, within the time budget.

Each notebook is executed with nbclient in a fresh kernel (per-cell timeout), from the
``notebooks/`` directory, reading ``../fixtures`` as in a folder ``zett-lab demo`` writes, with
outputs directed to a temporary directory. The stored notebooks carry no outputs and refer to
nothing outside such a folder. (tests/test_lab_browser.py runs the installed demo in a browser.)
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "01-explore.ipynb",
    "02-tune-thresholds.ipynb",
    "03-compare-summary-models.ipynb",
    "04-loss-report.ipynb",
    "05-policy-lab.ipynb",
]
CELL_TIMEOUT_S = 900  # a hang guard, not a speed test: benchmarks live in bench/


def test_all_notebooks_present():
    assert [p.name for p in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name}: stored with outputs"
    assert sum(cell.cell_type == "markdown" for cell in notebook.cells) >= 4, "notebooks teach in prose"


#: Words that point outside a demo folder: the repository, the team's shared logs, files of a checkout.
OUTSIDE = re.compile(r"\brepo(sitory)?\b|shared/|agent-logs|docs/|README|find_up|\.parents\b", re.IGNORECASE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_refers_to_nothing_outside_a_demo_folder(path):
    """A notebook opens with a short introduction and a short setup cell, and reads only ``../fixtures``."""
    notebook = nbformat.read(path, as_version=4)
    for index, cell in enumerate(notebook.cells):
        assert not OUTSIDE.search(cell.source), f"{path.name} cell {index}: {OUTSIDE.search(cell.source)[0]!r}"
    intro, setup = notebook.cells[0], next(c for c in notebook.cells if c.cell_type == "code")
    assert intro.cell_type == "markdown" and len(intro.source.splitlines()) <= 16
    assert len(setup.source.splitlines()) <= 10 and '"../fixtures"' in setup.source


def _fixture_state() -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in (ROOT / "fixtures").rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_offline(path, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("ZETT_LAB_OUT", str(tmp_path / "out"))
    monkeypatch.delenv("ZETT_LAB_FIXTURES", raising=False)  # ../fixtures, beside notebooks/ as in a demo folder
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)  # the provider cell must skip itself
    monkeypatch.setenv("PYTHONWARNINGS", "ignore")
    before = _fixture_state()
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    with client.setup_kernel():
        started = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        elapsed = time.perf_counter() - started
    errors = [
        (i, o.get("ename"), o.get("evalue"))
        for i, c in enumerate(notebook.cells)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]
    assert not errors
    print(f"{path.name}: {elapsed:.1f} s")  # speed is measured in bench/, never asserted here
    assert _fixture_state() == before, "a notebook wrote into fixtures/"
    if path.name == "04-loss-report.ipynb":
        report = tmp_path / "out" / "report.html"
        assert report.is_file() and report.stat().st_size > 10_000
    if path.name == "03-compare-summary-models.ipynb":
        texts = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
        assert "skipping the provider-backed summarizer" in texts
    if path.name == "05-policy-lab.ipynb":
        texts = "".join(o.get("text", "") for c in notebook.cells if c.cell_type == "code" for o in c.outputs)
        over, steps = map(int, re.search(r"CompactionExtension (\d+) of (\d+) steps over budget", texts).groups())
        assert over > steps / 2  # the stock engine sends most of the autonomous run over budget
        assert "'split': ['max_tokens'], 'mask': [], 'headroom': []" in texts  # reuse only where declared
