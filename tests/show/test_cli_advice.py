"""An error on the command line names the command line's flags and variables, never Python's arguments;
the library keeps its own wording for the same error."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.helpers import coding_conversation
from zett_lab import SettingError
from zett_lab.measure.cost import price_for
from zett_lab.show import cli
from zett_lab.summarizers import CacheError, SummaryCache

PYTHON_WORDS = ("overwrite=True", "prices=", "SummaryCache(")


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_import_names_force_for_an_existing_probes_sidecar(tmp_path: Path, capsys) -> None:
    shutil.copy(FIXTURES / "sessions.sqlite", tmp_path / "sessions.sqlite")
    (tmp_path / "side").mkdir()
    sidecar = tmp_path / "side" / "o.probes.json"
    sidecar.write_text("{}\n")
    code, out, err = run_cli(capsys, "import", tmp_path / "sessions.sqlite", "-o", tmp_path / "side" / "o.sqlite")
    assert (code, out) == (cli.EXIT_ERROR, "")
    assert err == f"zett-lab: error: {sidecar}: already exists; choose a new output, or pass --force to replace it\n"
    assert sidecar.read_text() == "{}\n" and sorted(p.name for p in sidecar.parent.iterdir()) == ["o.probes.json"]


@pytest.mark.parametrize("command", ["report", "sweep"])
def test_an_unknown_primary_model_names_the_flag(command: str, tmp_path: Path, capsys) -> None:
    source = tmp_path / "good.json"
    coding_conversation(turns=2).save(source)
    grid = ["--max-tokens", "900", "--keep-recent-tokens", "250"] if command == "sweep" else []
    out_path = tmp_path / ("s.sweep" if command == "sweep" else "r.html")
    code, out, err = run_cli(capsys, command, source, *grid, "-o", out_path, "--primary-model", "nosuchmodel")
    assert (code, out) == (cli.EXIT_ERROR, "")
    assert err.startswith("zett-lab: error: no price for model 'nosuchmodel'; known: ")
    assert err.endswith(". Give --primary-model one of these, or leave it out\n")
    assert not any(word in err for word in PYTHON_WORDS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.json"]  # nothing written
    with pytest.raises(SettingError, match=r"Pass prices=\{'MODEL'"):
        price_for("nosuchmodel")


def test_a_cache_path_holding_another_database_names_the_variable(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = tmp_path / "theirs.sqlite"
    with closing(sqlite3.connect(theirs)) as connection, connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    before = theirs.read_bytes()
    source = tmp_path / "good.json"
    coding_conversation(turns=2).save(source)
    monkeypatch.setenv("ZETT_LAB_CACHE", str(theirs))
    code, out, err = run_cli(capsys, "replay", source, "--max-tokens", "900", "--keep-recent-tokens", "250")
    assert (code, out) == (cli.EXIT_ERROR, "")
    assert err == (
        f"zett-lab: error: {theirs}: this SQLite database is not a zett_lab summary cache (tables: orders); it was "
        "left untouched; point ZETT_LAB_CACHE at a summary cache file elsewhere, or run without the cache "
        "(--no-cache)\n"
    )
    assert theirs.read_bytes() == before
    with pytest.raises(
        CacheError, match=r"Point the cache elsewhere \(SummaryCache\(path=\.\.\.\) or ZETT_LAB_CACHE\)"
    ):
        SummaryCache(theirs)
