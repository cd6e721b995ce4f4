"""Outputs never destroy inputs: one rule (``zett_lab.files.check_output``) for every command and every save().

An output is never one of the inputs (the same file through any path, a folder holding one, a file
inside a folder read as a whole, the summary cache), not even with ``--force``; an existing output
is replaced only with ``--force`` / ``overwrite=True``; the check comes before any work starts, and
nothing (no temporary file) is left behind when it refuses.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

import zett_lab
from tests.conftest import FIXTURES, ROOT
from tests.helpers import coding_conversation
from zett_lab.errors import OutputError
from zett_lab.files import check_output
from zett_lab.load.zett import write_sqlite
from zett_lab.show import cli
from zett_lab.show.report import Report
from zett_lab.study import Sweep, sweep
from zett_lab.summarizers import SummaryCache

SESSION = "ci-flaky-kafka"


def command_args(command: str, database: Path) -> list[object]:
    """One command over the fixtures' database (one session at one small setting where it takes them)."""
    limits = ["--max-tokens", "20k", "--keep-recent-tokens", "4k"]
    return {
        "import": ["import", database],
        "replay": ["replay", database, "--session", SESSION, *limits],
        "sweep": ["sweep", database, "--session", SESSION, *limits],
        "report": ["report", database],
    }[command]


def replay_args(recordings: Path) -> list[object]:
    """``zett-lab replay`` of one fixture session at one small setting (the tests add what they check)."""
    return [
        "replay",
        recordings / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "20k",
        "--keep-recent-tokens",
        "4k",
    ]


NEVER_OVER = "zett_lab never writes over its inputs: choose another output"
IS_INPUT = f"is one of the inputs; {NEVER_OVER}"
EXISTS = "already exists; choose a new output, or pass --force to replace it"


def digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (hidden ones too) with its SHA-256: what must not change."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def recordings(tmp_path: Path) -> Path:
    """A private copy of the bundled database and its probes file."""
    folder = tmp_path / "recordings"
    folder.mkdir()
    for name in ("sessions.sqlite", "sessions.probes.json"):
        shutil.copy(FIXTURES / name, folder / name)
    return folder


@pytest.fixture()
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fail the test if a command starts replaying, sweeping or building a report."""
    started: list[str] = []

    def refuse(name: str):
        def started_work(*args, **kwargs):
            started.append(name)
            raise AssertionError(f"{name} started before the output was checked")

        return started_work

    monkeypatch.setattr(sys.modules["zett_lab.replay.run"], "replay", refuse("replay"))
    monkeypatch.setattr(sys.modules["zett_lab.study.sweep"], "sweep", refuse("sweep"))
    monkeypatch.setattr(Report, "build", classmethod(lambda cls, *a, **k: refuse("report")()))
    return started


def run_cli(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- the rule -------------------------------------------------------------------------------------------


def test_an_input_is_refused_by_every_path_to_it(tmp_path: Path) -> None:
    source = tmp_path / "run.jsonl"
    source.write_text("{}\n")
    (tmp_path / "link.jsonl").symlink_to(source)
    os.link(source, tmp_path / "hard.jsonl")
    (tmp_path / "sub").mkdir()
    for path in (source, tmp_path / "sub" / ".." / "run.jsonl", tmp_path / "link.jsonl", tmp_path / "hard.jsonl"):
        for overwrite in (False, True):
            with pytest.raises(OutputError) as error:
                check_output(path, [source], overwrite=overwrite)
            assert str(error.value) == f"{path}: {IS_INPUT}"
    with pytest.raises(OutputError, match=r"holds an input \(.*run.jsonl\)"):
        check_output(tmp_path, [source], overwrite=True)
    saved = tmp_path / "saved-sweep"
    saved.mkdir()
    with pytest.raises(OutputError, match=r"is inside an input folder \(.*saved-sweep\)"):
        check_output(saved / "report.html", [saved], overwrite=True)


def test_an_existing_output_is_replaced_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "out.html"
    assert check_output(out, [tmp_path / "in.json"]) == out
    out.write_text("earlier")
    with pytest.raises(OutputError) as error:
        check_output(out, [], force_hint="--force")
    assert str(error.value) == f"{out}: {EXISTS}"
    with pytest.raises(OutputError, match="pass overwrite=True to replace it"):
        check_output(out, [])
    assert check_output(out, [], overwrite=True) == out


# --- every save() -------------------------------------------------------------------------------------------


def test_every_save_refuses_its_inputs(tmp_path: Path) -> None:
    source = tmp_path / "session.json"
    coding_conversation(turns=4).save(source)
    before = source.read_bytes()
    conversation = zett_lab.load(source)
    cache = SummaryCache(tmp_path / "cache.sqlite")
    trace = zett_lab.replay(conversation, max_tokens=900, keep_recent_tokens=250, cache=cache, warn=False)
    result = sweep(
        [conversation], max_tokens=[900], keep_recent_tokens=[250], executor="serial", progress=False, cache=cache
    )
    report = Report(traces=[trace], date="2025-01-01")
    cache.close()
    files = digest(tmp_path)
    attempts = [
        lambda: conversation.save(source, overwrite=True),
        lambda: trace.save(source, overwrite=True),
        lambda: report.save(source, format="html", overwrite=True),
        lambda: report.save_html(cache.path, overwrite=True),
        lambda: write_sqlite([conversation], source, overwrite=True),
        lambda: result.save(tmp_path, overwrite=True),  # the folder holding the inputs
        lambda: result.save(cache.path, overwrite=True),
    ]
    for attempt in attempts:
        with pytest.raises(OutputError, match="input"):
            attempt()
    assert source.read_bytes() == before
    assert digest(tmp_path) == files, "inputs and cache untouched, no temporary file left"


def test_a_sweep_folder_is_an_input_of_its_report(tmp_path: Path) -> None:
    result = sweep(
        [coding_conversation(turns=4)],
        max_tokens=[900],
        keep_recent_tokens=[250],
        executor="serial",
        progress=False,
        cache=False,
    )
    folder = result.save(tmp_path / "run.sweep")
    before = digest(folder)
    loaded = Sweep.load(folder)
    report = Report(sweep=loaded, date="2025-01-01")
    for target in (folder / "results.parquet", folder / "new.html"):
        with pytest.raises(OutputError, match="input"):
            report.save(target, format="html", overwrite=True)
    with pytest.raises(OutputError, match="input"):
        loaded.save(folder, overwrite=True)
    assert digest(folder) == before


def test_existing_outputs_need_overwrite_in_every_save(tmp_path: Path) -> None:
    conversation = coding_conversation(turns=4)
    trace = zett_lab.replay(conversation, max_tokens=900, keep_recent_tokens=250, cache=False, warn=False)
    result = sweep(
        [conversation], max_tokens=[900], keep_recent_tokens=[250], executor="serial", progress=False, cache=False
    )
    report = Report(traces=[trace], date="2025-01-01")
    saves = {
        "c.json": lambda path, **o: conversation.save(path, **o),
        "t.parquet": lambda path, **o: trace.save(path, **o),
        "t.json": lambda path, **o: trace.save(path, **o),
        "r.html": lambda path, **o: report.save_html(path, **o),
        "r.md": lambda path, **o: report.save(path, **o),
        "s.sweep": lambda path, **o: result.save(path, **o),
        "db.sqlite": lambda path, **o: write_sqlite([conversation], path, **o),
    }
    for name, save in saves.items():
        path = tmp_path / name
        save(path)
        first = digest(tmp_path)
        with pytest.raises(OutputError, match="already exists"):
            save(path)
        assert digest(tmp_path) == first, name
        assert save(path, overwrite=True) == path
    zett_lab.load(tmp_path / "db.sqlite")  # replaced atomically: still a database
    assert Sweep.load(tmp_path / "s.sweep").results["error"].isna().all()


# --- the command line --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["import", "replay", "sweep", "report"])
def test_no_command_writes_over_its_input(command: str, recordings: Path, no_work, capsys) -> None:
    database, probes = recordings / "sessions.sqlite", recordings / "sessions.probes.json"
    args = command_args(command, database)
    if command == "replay":  # a trace is .json or .parquet: reach the inputs through links
        (recordings / "db.parquet").symlink_to(database)
        (recordings / "probes.json").symlink_to(probes)
        database, probes = recordings / "db.parquet", recordings / "probes.json"
    before = digest(recordings)
    cases = [
        (database, [], IS_INPUT),
        (database, ["--force"], IS_INPUT),
        (probes, [], IS_INPUT),  # known as an input before anything is read: not "pass --force"
        (probes, ["--force"], IS_INPUT),
    ]
    for target, force, message in cases:
        code, out, err = run_cli(capsys, *args, "-o", target, *force)
        assert (code, out, err) == (cli.EXIT_ERROR, "", f"zett-lab: error: {target}: {message}\n")
    assert no_work == []
    assert digest(recordings) == before, "the inputs are untouched and no temporary file is left"


def test_an_output_folder_holding_the_inputs_is_refused(recordings: Path, no_work, capsys) -> None:
    before = digest(recordings)
    code, _, err = run_cli(
        capsys, "sweep", recordings, "--max-tokens", "20k", "--keep-recent-tokens", "4k", "-o", recordings, "--force"
    )
    assert code == cli.EXIT_ERROR
    assert err == f"zett-lab: error: {recordings}: holds an input ({recordings / 'sessions.sqlite'}); {NEVER_OVER}\n"
    assert no_work == [] and digest(recordings) == before


@pytest.mark.parametrize("command", ["sweep", "report"])
def test_the_summary_cache_is_an_input(
    command: str, recordings: Path, tmp_path: Path, no_work, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache.sqlite"
    monkeypatch.setenv("ZETT_LAB_CACHE", str(cache))
    SummaryCache().close()
    before = cache.read_bytes()
    grid = ["--max-tokens", "20k", "--keep-recent-tokens", "4k"] if command == "sweep" else []
    code, _, err = run_cli(capsys, command, recordings, *grid, "-o", cache, "--force")
    assert (code, err) == (cli.EXIT_ERROR, f"zett-lab: error: {cache}: {IS_INPUT}\n")
    assert cache.read_bytes() == before and no_work == []


def test_a_report_cannot_be_written_into_the_sweep_it_reads(tmp_path: Path, capsys) -> None:
    result = sweep(
        [coding_conversation(turns=4)],
        max_tokens=[900],
        keep_recent_tokens=[250],
        executor="serial",
        progress=False,
        cache=False,
    )
    folder = result.save(tmp_path / "run.sweep")
    before = digest(folder)
    code, _, err = run_cli(capsys, "report", folder, "-o", folder / "results.parquet", "--force")
    assert code == cli.EXIT_ERROR
    assert err == (
        f"zett-lab: error: {folder / 'results.parquet'}: is inside an input folder ({folder}); "
        "zett_lab never writes into its inputs: choose another output\n"
    )
    assert digest(folder) == before


def test_force_replaces_an_earlier_output(recordings: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "trace.json"
    args = [*replay_args(recordings), "-o", out]
    assert run_cli(capsys, *args)[0] == cli.EXIT_OK
    out.write_text("an earlier run")
    code, _, err = run_cli(capsys, *args)
    assert (code, err) == (cli.EXIT_ERROR, f"zett-lab: error: {out}: {EXISTS}\n")
    assert out.read_text() == "an earlier run"
    assert run_cli(capsys, *args, "--force")[0] == cli.EXIT_OK
    assert zett_lab.Trace.load(out).conversation.id == SESSION
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "recordings") == ["trace.json"]


def test_make_report_runs_twice(tmp_path: Path, capsys) -> None:
    """``make report``'s command, run twice: the second run replaces the first report."""
    recipe = (ROOT / "Makefile").read_text().split("\nreport:", 1)[1].splitlines()[1].split()
    assert recipe[:2] == ["$(VENV)/bin/zett-lab", "report"] and "--force" in recipe
    source = tmp_path / "one.json"
    coding_conversation(turns=4).save(source)
    args = [source if a == "fixtures/" else tmp_path / a if a == "report.html" else a for a in recipe[2:]]
    args += [
        "--max-tokens",
        "900",
        "--keep-recent-tokens",
        "250",
        "--summarizer",
        "truncate",
        "--no-progress",
        "--date",
        "2025-01-01",
    ]
    for _ in range(2):
        code, out, err = run_cli(capsys, "report", *args)
        assert code == cli.EXIT_OK, err
        assert out.startswith(f"wrote html report to {tmp_path / 'report.html'}")


# --- outputs that are not files ------------------------------------------------------------------------------


def special_outputs(tmp_path: Path, name: str) -> list[tuple[Path, str]]:
    """A FIFO named ``name`` and a symlink to it (``link-NAME``), with what the refusal says each is."""
    fifo = tmp_path / name
    os.mkfifo(fifo)
    link = tmp_path / f"link-{name}"
    link.symlink_to(fifo)
    return [(fifo, "is a FIFO (named pipe)"), (link, f"is a FIFO (named pipe) (through the link to {fifo})")]


@pytest.mark.parametrize("overwrite", [False, True])
def test_an_output_that_is_not_a_file_is_refused_even_with_overwrite(tmp_path: Path, overwrite: bool) -> None:
    for path, kind in special_outputs(tmp_path, "out.html"):
        with pytest.raises(OutputError) as error:
            check_output(path, [], overwrite=overwrite)
        assert str(error.value) == (
            f"{path}: {kind}, not a file; zett_lab replaces only a file, even with overwrite=True: choose another output"
        )
        with pytest.raises(OutputError, match=r"not a folder; .* even with --force"):
            check_output(path, [], overwrite=overwrite, folder=True, force_hint="--force")
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is a directory, not a file"):
        check_output(tmp_path / "folder", [], overwrite=overwrite)
    with pytest.raises(OutputError, match="is a file, not a folder"):
        check_output(tmp_path / "file", [], overwrite=overwrite, folder=True)
    assert os.path.isfile(tmp_path / "file") and os.path.isdir(tmp_path / "folder")
    assert stat_is_fifo(tmp_path / "out.html")


def stat_is_fifo(path: Path) -> bool:
    import stat

    return stat.S_ISFIFO(path.lstat().st_mode)


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("import", "out.sqlite"),
        ("import", "out.json"),
        ("replay", "trace.json"),
        ("sweep", "out.sweep"),
        ("report", "r.html"),
    ],
)
def test_no_command_replaces_a_fifo_or_a_link_to_one(
    command: str, name: str, recordings: Path, tmp_path: Path, no_work, capsys
) -> None:
    database = recordings / "sessions.sqlite"
    args = command_args(command, database)
    noun = "folder" if command == "sweep" else "file"
    for target, kind in special_outputs(tmp_path, name):
        for force in ([], ["--force"]):
            code, out, err = run_cli(capsys, *args, "-o", target, *force)
            assert (code, out) == (cli.EXIT_ERROR, "")
            assert err == (
                f"zett-lab: error: {target}: {kind}, not a {noun}; zett_lab replaces only a {noun}, even with --force: "
                "choose another output\n"
            )
    assert stat_is_fifo(tmp_path / name) and (tmp_path / f"link-{name}").is_symlink()
    assert no_work == []


# --- the summary cache is written to: never one of the inputs, never a user's other file -------------------


@pytest.mark.parametrize("command", ["replay", "sweep", "report"])
def test_a_cache_path_that_is_an_input_is_refused_before_anything_is_touched(
    command: str, recordings: Path, no_work, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    database, probes = recordings / "sessions.sqlite", recordings / "sessions.probes.json"
    grid = ["--max-tokens", "20k", "--keep-recent-tokens", "4k"]
    args = {
        "replay": ["replay", database, "--session", SESSION, *grid],
        "sweep": ["sweep", database, *grid, "-o", recordings.parent / "out.sweep"],
        "report": ["report", database, "-o", recordings.parent / "out.html"],
    }[command]
    before = digest(recordings)
    for cache in (database, probes):
        monkeypatch.setenv("ZETT_LAB_CACHE", str(cache))
        code, out, err = run_cli(capsys, *args)
        assert (code, out) == (cli.EXIT_ERROR, "")
        assert err == (
            f"zett-lab: error: {cache}: is one of the inputs; zett_lab never writes over its inputs: point "
            "ZETT_LAB_CACHE at a summary cache file elsewhere, or run without the cache (--no-cache)\n"
        )
    assert no_work == [] and digest(recordings) == before


def test_a_json_log_named_as_the_cache_is_left_where_it_is(
    recordings: Path, tmp_path: Path, no_work, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "mylog.json"
    log.write_text('{"messages": [{"role": "user", "content": "hello"}]}\n')
    monkeypatch.setenv("ZETT_LAB_CACHE", str(log))
    code, out, err = run_cli(capsys, *replay_args(recordings))
    assert (code, out) == (cli.EXIT_ERROR, "")
    assert err == (
        f"zett-lab: error: summary cache {log}: not an SQLite database, so not a summary cache; it was left "
        "untouched; point ZETT_LAB_CACHE at a summary cache file elsewhere, or run without the cache (--no-cache)\n"
    )
    assert log.read_text() == '{"messages": [{"role": "user", "content": "hello"}]}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mylog.json", "recordings"] and no_work == []
