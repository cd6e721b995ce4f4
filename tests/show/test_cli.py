"""``zett-lab`` end to end, as a user runs it: subprocesses on the bundled fixtures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import zett_lab
from tests.conftest import FIXTURES, ROOT
from tests.show.test_report import evil_conversation
from zett_lab.errors import InputError, SettingError
from zett_lab.replay.trace import Trace
from zett_lab.show.cli import EXIT_ERROR, EXIT_USAGE, parse_grid, parse_tokens

SCRIPT = Path(sys.executable).parent / "zett-lab"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "zett_lab.show.cli"]
SESSION = "billing-rounding"


def run(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=os.environ.copy()
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The failure contract: non-zero exit, exactly one line on stderr, no traceback."""
    assert result.returncode != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("zett-lab")
    return lines[0]


# --- help and argument parsing ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["", "import", "replay", "sweep", "report", "demo", "lab"])
def test_help_with_examples(command: str) -> None:
    result = run(*([command] if command else []), "--help")
    assert result.returncode == 0, result.stderr
    assert "examples:" in result.stdout
    assert "zett-lab" in result.stdout


def test_every_option_says_what_it_takes() -> None:
    """``sweep --help`` listed ``--max-tokens GRID`` with no help, ``report --help`` never said what a GRID is, and
    "(default: the offline default)" named no summarizer."""
    from zett_lab.show.arguments import GRID_FORMS, build_parser
    from zett_lab.summarizers import DEFAULT_SUMMARIZER

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for command in ("sweep", "report"):
        options = {o: a for a in commands[command]._actions for o in a.option_strings}
        for option in ("--max-tokens", "--keep-recent-tokens"):
            assert GRID_FORMS in (options[option].help or ""), (command, option)
    for command in ("replay", "sweep"):
        summarizer = next(a for a in commands[command]._actions if "--summarizer" in a.option_strings)
        assert f"default: {DEFAULT_SUMMARIZER}" in (summarizer.help or "") and "offline default" not in summarizer.help
    for command, parser in commands.items():
        for action in parser._actions:
            assert action.help or action.option_strings == ["-h", "--help"], (command, action.dest)


def test_version() -> None:
    import zett_agent

    result = run("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"zett-lab {zett_lab.__version__} (zett-agent {zett_agent.__version__})"


def test_one_version_number() -> None:
    """The metadata reads the version from zett_lab/version.py (no second copy in pyproject.toml)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "zett_lab/version.py"


def test_no_command_is_a_usage_error() -> None:
    result = run()
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_token_values() -> None:
    assert parse_tokens("20k") == 20_000 and parse_tokens("20_000") == 20_000
    assert parse_grid("8k:32k:8k", "x") == [8000, 16000, 24000, 32000]
    assert parse_grid("4000,2000,4000", "x") == [2000, 4000]
    for bad in ("0", "-5", "abc", "1.5"):
        with pytest.raises(SettingError):
            parse_tokens(bad)
    for bad in ("8k:4k:1k", "1:2", "1:100000:1", ","):
        with pytest.raises(SettingError):
            parse_grid(bad, "x")


# --- import ----------------------------------------------------------------------------------------------


def test_import_to_a_zett_database_and_back(tmp_path: Path, fixture_conversations) -> None:
    out = tmp_path / "sessions.sqlite"
    result = run("import", FIXTURES, "-o", out)
    assert result.returncode == 0, result.stderr
    assert f"{len(fixture_conversations)} conversation(s)" in result.stdout
    again = zett_lab.load_all(out)
    assert [c.id for c in again] == [c.id for c in fixture_conversations]
    for before, after in zip(fixture_conversations, again, strict=True):
        assert after.messages == before.messages
        assert after.format == "zett-sqlite"
    # Never overwritten.
    content = out.read_bytes()
    line = one_error_line(run("import", FIXTURES, "-o", out))
    assert "already exists" in line and str(out) in line
    assert out.read_bytes() == content


def test_import_to_neutral_json(tmp_path: Path, fixture_conversations) -> None:
    out = tmp_path / "sessions.json"
    result = run("import", FIXTURES / "sessions.sqlite", "-o", out)
    assert result.returncode == 0, result.stderr
    again = zett_lab.load_all(out)
    assert [c.id for c in again] == [c.id for c in fixture_conversations]
    for before, after in zip(fixture_conversations, again, strict=True):
        assert [_shape(m) for m in after.messages] == [_shape(m) for m in before.messages]
    json.loads(out.read_text())


def _shape(message):
    """What the neutral format keeps of a message (it does not carry provider/model names)."""
    calls = tuple(
        (c.id, c.name, json.dumps(c.arguments, sort_keys=True)) for c in getattr(message, "tool_calls", ()) or ()
    )
    return (type(message).__name__, str(message.content), calls)


def test_import_failures(tmp_path: Path) -> None:
    assert "must end in .sqlite or .db" in one_error_line(run("import", FIXTURES, "-o", tmp_path / "out.txt"))
    assert "no such file or directory" in one_error_line(
        run("import", tmp_path / "missing.jsonl", "-o", tmp_path / "o.json")
    )
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00\x01 not a recording")
    assert "unknown format" in one_error_line(run("import", garbage, "-o", tmp_path / "o.json"))
    assert not (tmp_path / "o.json").exists()


# --- replay ------------------------------------------------------------------------------------------------


def test_replay_prints_steps_and_compactions(tmp_path: Path) -> None:
    out = tmp_path / "trace.parquet"
    result = run(
        "replay",
        FIXTURES / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "12k",
        "--keep-recent-tokens",
        "3000",
        "--summarizer",
        "truncate:0.1",
        "-o",
        out,
    )
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "steps:" in text and "compactions:" in text
    assert "context_tokens_after" in text and "span_start" in text
    assert "applied" in text and "max_tokens=12,000, keep_recent_tokens=3,000" in text
    compactions = text.split("compactions:")[1]
    assert "None" not in compactions and "NaN" not in compactions
    assert re.search(r"peak context \d{1,3}(,\d{3})+ tokens; .* \d{1,3}(,\d{3})+ input tokens in total", text)
    trace = Trace.load(out)
    assert trace.conversation.id == SESSION and trace.setting.max_tokens == 12000
    assert int(trace.compactions["applied"].sum()) >= 1


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (
            ["replay", "missing.sqlite", "--max-tokens", "1k", "--keep-recent-tokens", "100"],
            "no such file or directory",
            EXIT_ERROR,
        ),
        (
            ["replay", FIXTURES / "sessions.sqlite", "--max-tokens", "1k", "--keep-recent-tokens", "100"],
            "--session",
            EXIT_ERROR,
        ),
        (
            [
                "replay",
                FIXTURES / "sessions.sqlite",
                "--session",
                "nope",
                "--max-tokens",
                "1k",
                "--keep-recent-tokens",
                "100",
            ],
            "no such session",
            EXIT_ERROR,
        ),
        (
            [
                "replay",
                FIXTURES / "sessions.sqlite",
                "--session",
                SESSION,
                "--max-tokens",
                "0",
                "--keep-recent-tokens",
                "100",
            ],
            "--max-tokens",
            EXIT_USAGE,
        ),
        (
            [
                "replay",
                FIXTURES / "sessions.sqlite",
                "--session",
                SESSION,
                "--max-tokens",
                "1k",
                "--keep-recent-tokens",
                "100",
                "--summarizer",
                "bogus",
            ],
            "unknown summarizer spec",
            EXIT_ERROR,
        ),
        (
            [
                "replay",
                FIXTURES / "sessions.sqlite",
                "--session",
                SESSION,
                "--max-tokens",
                "1k",
                "--keep-recent-tokens",
                "100",
                "--summarizer",
                "openai:gpt-5-mini",
            ],
            "OPENAI_API_KEY",
            EXIT_ERROR,
        ),
        (
            ["sweep", FIXTURES, "--max-tokens", "8k:4k:1k", "--keep-recent-tokens", "1k", "-o", "x"],
            "below the start",
            EXIT_USAGE,
        ),
        (["report", "missing-dir/", "-o", "r.html"], "no such file or directory", EXIT_ERROR),
        (["report", FIXTURES, "-o", "r.html", "--summarizer", "bogus"], "unknown summarizer spec", EXIT_ERROR),
        (["report", FIXTURES, "-o", "r.html", "--date", "yesterday"], "YYYY-MM-DD", EXIT_ERROR),
    ],
)
def test_failures_are_one_clear_line(
    args, expected: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = run(*args, cwd=tmp_path)
    assert result.returncode == code
    line = one_error_line(result)
    assert expected in line
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [("--recommend", "nosuch>=1", "no column(s) ['nosuch']"), ("--prefer", "nosuch", "nosuch")],
)
def test_a_report_option_naming_no_column_fails_before_any_replay(
    option: str, value: str, named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Exit 2 means nothing was done: no pool started, no summary cached, no report written."""
    from zett_lab.show.cli import main
    from zett_lab.study import executors

    cache = tmp_path / "summaries.sqlite"
    monkeypatch.setenv("ZETT_LAB_CACHE", str(cache))
    out = tmp_path / "r.html"
    executors.shutdown_default_executor()
    code = main(["report", str(FIXTURES / "sessions.sqlite"), "-o", str(out), "--no-progress", option, value])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert err.count("\n") == 1 and named in err, err
    assert executors.running_pool() is None
    assert not cache.exists() and not out.exists()


def test_every_column_of_a_sweeps_results_may_be_constrained(fixture_conversations) -> None:
    """The columns a constraint is checked against before the run are those a sweep's results have."""
    from zett_lab.study import sweep
    from zett_lab.study.choose import need_result_columns

    small = min(fixture_conversations, key=lambda c: len(c.messages))
    results = sweep([small], max_tokens=[3000], keep_recent_tokens=[1000], summarizers=["truncate"], executor="serial")
    need_result_columns(*results.results.columns)
    with pytest.raises(SettingError, match="nosuch"):
        need_result_columns("nosuch")


def test_files_that_could_not_be_read_are_in_every_output(tmp_path: Path, fixture_conversations) -> None:
    """A folder with one good and one broken file: the report (JSON, HTML, Markdown) and the saved sweep list the
    broken one with why, and a report from that sweep exits 1 like the run that made it."""
    from zett_lab.load.neutral_writer import write_neutral

    folder = tmp_path / "mixed"
    folder.mkdir()
    small = min(fixture_conversations, key=lambda c: len(c.messages))
    write_neutral([small], folder / "a.json")
    (folder / "b.json").write_text('{"id": "x", "messages": [{"role": "user", "content": "hi"}, {"role": "tool"')
    grid = ("--max-tokens", "3k", "--keep-recent-tokens", "1k", "--summarizer", "truncate", "--no-progress")
    made = run("report", folder, "-o", tmp_path / "r.json", *grid)
    assert made.returncode == 1 and "skipped" in made.stderr and "b.json" in made.stderr, made.stderr
    document = json.loads((tmp_path / "r.json").read_text())
    [skipped] = document["study"]["skipped_files"]
    assert skipped["file"] == "b.json" and "not valid JSON" in skipped["reason"]
    assert document["failures"]["skipped_files"] == 1
    assert document["alerts"][0]["kind"] == "skipped_files"
    swept = run("sweep", folder, "-o", tmp_path / "s.parquet", *grid)
    assert swept.returncode == 1, swept.stderr
    for out in ("r.html", "r.md"):
        again = run("report", tmp_path / "s.parquet", "-o", tmp_path / out, "--no-progress")
        assert again.returncode == 1 and "b.json" in again.stderr, again.stderr
        page = (tmp_path / out).read_text()
        assert "b.json" in page and "could not be read" in page
        assert "not valid JSON" in page
    accepted = run("report", tmp_path / "s.parquet", "-o", tmp_path / "ok.md", "--no-progress", "--skip-unreadable")
    assert accepted.returncode == 0, accepted.stderr


def test_unreadable_input_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"id": "x", "messages": [{"role": "user", "content": "hi"}, {"role": "tool"')
    line = one_error_line(run("replay", broken, "--max-tokens", "1k", "--keep-recent-tokens", "100"))
    assert str(broken) in line


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = run("--debug", "replay", tmp_path / "missing.json", "--max-tokens", "1k", "--keep-recent-tokens", "100")
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "InputError" in result.stderr


def test_engine_timeout_bounds_every_pass_and_a_bad_value_is_a_usage_error(tmp_path: Path) -> None:
    from tests.helpers import coding_conversation
    from tests.loopback import LoopbackServer
    from zett_lab.load.neutral_writer import write_neutral

    recorded = write_neutral([coding_conversation(turns=2)], tmp_path / "run.json")
    limits = ("--max-tokens", "600", "--keep-recent-tokens", "200", "--no-cache")
    with LoopbackServer(delay=120) as server:  # a provider that never answers within the test
        spec = f"openai-compatible:m@{server.openai_url}"
        # A limit above the first pass's one-time work (importing and starting the provider's client).
        result = run("replay", recorded, *limits, "--summarizer", spec, "--engine-timeout", "3")
        calls = server.count("/v1/chat/completions")
    assert result.returncode == 1, result.stderr
    failed = int(re.search(r"^applied 0, not smaller 0, failed (\d+);", result.stdout, re.M).group(1))
    # Every call that reached the provider failed; on a busy machine a pass can also run out of time before
    # its request is sent (still starting the client), which fails it the same way.
    assert failed >= calls > 0
    assert result.stderr.strip() == (
        f"zett-lab: {failed} summary call(s) failed ({spec}): EngineTimeout: the engine's pass did not finish within "
        "engine_timeout=3 s: it was still waiting (an await that never finished)"
    )
    for value in ("0", "soon"):
        line = one_error_line(run("replay", recorded, *limits, "--engine-timeout", value))
        assert f"argument --engine-timeout: {value!r} is not a positive number of seconds (or 'none')" in line
    assert run("replay", recorded, *limits, "--engine-timeout", "none").returncode == 0


# --- --engine: a policy without Python glue ------------------------------------------------------------

POLICY_FILE = """
from zett_agent.extensions.compaction import CompactionExtension


class Holdout(CompactionExtension):
    \"\"\"Never finds a window: every step over budget says so.\"\"\"

    def _select_compaction_window(self, messages, *, keep_recent_tokens, count_tokens):
        return None
"""


def test_engine_option_takes_a_short_name_a_module_or_a_file(tmp_path: Path) -> None:
    from zett_lab.replay.policies import SplitTurnCompaction
    from zett_lab.study.regions import same_replay

    policy = tmp_path / "holdout_policy.py"
    policy.write_text(POLICY_FILE)
    conversation = zett_lab.load(FIXTURES / "sessions.sqlite", session=SESSION)
    settings = (
        "--session",
        SESSION,
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        "truncate:0.1",
    )
    traces = {}
    for n, (spec, expected) in enumerate(
        (
            ("split-turn", "zett_lab.replay.policies.SplitTurnCompaction"),
            ("zett_lab.replay.policies:SplitTurnCompaction", "zett_lab.replay.policies.SplitTurnCompaction"),
            (f"{policy}:Holdout", "holdout_policy.Holdout"),
        )
    ):
        out = tmp_path / f"trace-{n}.json"
        result = run("replay", FIXTURES / "sessions.sqlite", *settings, "--engine", spec, "-o", out)
        assert result.returncode == 0, result.stderr
        assert f"engine={expected}," in result.stdout
        traces[spec] = Trace.load(out)
        assert traces[spec].setting.engine_name == expected
    fresh = zett_lab.replay(
        conversation, max_tokens=8000, keep_recent_tokens=2000, summarizer="truncate:0.1", engine=SplitTurnCompaction
    )
    assert same_replay(traces["split-turn"], fresh) == []
    held = traces[f"{policy}:Holdout"]  # the file's engine really ran: it never found a window
    assert (
        len(held.compactions) == 0
        and (held.steps.loc[held.steps["triggered"], "skip_reason"] == "engine found no window").all()
    )


def test_sweep_and_report_compare_several_engines_including_one_from_a_file(tmp_path: Path) -> None:
    from zett_lab.study.sweep import Sweep

    policy = tmp_path / "holdout_policy.py"
    policy.write_text(POLICY_FILE)
    out = tmp_path / "engines.parquet"
    engines = ("--engine", "stock", "--engine", "split-turn", "--engine", f"held={policy}:Holdout")
    result = run(
        "sweep",
        FIXTURES / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        "truncate",
        *engines,
        "-o",
        out,
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr  # the file's engine reached the worker processes
    assert "x 3 engine(s) (stock, split-turn, held)" in result.stdout
    table = Sweep.load(out).results.set_index("engine")
    assert table["error"].isna().all() and table.loc["held", "compactions_applied"] == 0
    assert table.loc["split-turn", "steps_over_budget"] < table.loc["stock", "steps_over_budget"]
    report = tmp_path / "report.json"
    result = run(
        "report",
        FIXTURES / "sessions.sqlite",
        "-o",
        report,
        "--date",
        "2025-01-01",
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        "truncate",
        "--engine",
        "stock",
        "--engine",
        "split-turn",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    assert "7 conversation(s), 2 engine(s) × 1 summarizer(s), " in result.stdout  # engines named as engines
    document = json.loads(report.read_text())
    assert document["study"]["summarizers"] == ["truncate"] and document["study"]["engines"] == ["stock", "split-turn"]
    assert document["recommendation"]["verdict"].startswith("Recommended: engine ")
    assert " with summarizer truncate at " in document["recommendation"]["verdict"]
    assert {r["summarizer"] for r in document["results"]} == {"stock", "split-turn"}  # the arms the tables compare
    line = one_error_line(run("report", out, "-o", tmp_path / "x.html", "--engine", "split-turn"))
    assert "--engine apply to recorded conversations, not to a saved sweep" in line


@pytest.mark.parametrize(
    ("engines", "message"),
    [
        (
            ["bogus"],
            "engine 'bogus': not an engine name; use module:Class, path/to/file.py:Class, or one of stock, "
            "split-turn, observation-masking",
        ),
        (["no_such_module_here:Policy"], "engine 'no_such_module_here:Policy': no module named 'no_such_module_here'"),
        (
            ["zett_lab.replay.policies:Nope"],
            "engine 'zett_lab.replay.policies:Nope': zett_lab.replay.policies has no attribute 'Nope'",
        ),
        (
            ["zett_lab.replay.policies:tool_group_starts"],
            "engine zett_lab.replay.policies.tool_group_starts could not be built",
        ),
        (
            ["tests.replay.test_engines:NotAnEngine"],
            "engine tests.replay.test_engines.NotAnEngine is not a subclass of zett_agent's CompactionExtension",
        ),
        (["missing.py:Policy"], "engine 'missing.py:Policy': no such file 'missing.py'"),
        (["json.py:Policy"], "engine 'json.py:Policy': a module named 'json' already exists"),
        (
            ["broken.py:Policy"],
            "engine 'broken.py:Policy': importing broken failed: ZeroDivisionError: division by zero",
        ),
        (["stock", "split-turn", "stock"], "engine label 'stock' is given twice"),
        (["=split-turn"], "engine '=split-turn': the label before '=' is empty"),
    ],
)
def test_a_bad_engine_is_one_line_and_exit_2_before_any_work(
    engines: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from zett_lab.show import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a file's folder is added to it
    (tmp_path / "json.py").write_text(POLICY_FILE)
    (tmp_path / "broken.py").write_text("1 / 0\n")
    command = [
        "sweep",
        str(FIXTURES / "sessions.sqlite"),
        "--max-tokens",
        "8k",
        "--keep-recent-tokens",
        "2k",
        "-o",
        str(tmp_path / "out.parquet"),
    ]
    for engine in engines:
        command += ["--engine", engine]
    if len(engines) == 1:  # replay takes one engine
        assert cli.main(
            [
                "replay",
                str(FIXTURES / "sessions.sqlite"),
                "--session",
                SESSION,
                "--max-tokens",
                "8k",
                "--keep-recent-tokens",
                "2k",
                "--engine",
                engines[0].partition("=")[2] or engines[0],
            ]
        ) == (EXIT_ERROR if not engines[0].startswith("=") else 0)
        capsys.readouterr()
    assert cli.main(command) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"zett-lab: error: {message}"), err
    assert not (tmp_path / "out.parquet").exists()


def test_an_engine_that_hangs_on_the_command_line_is_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.helpers import coding_conversation
    from zett_lab.load.neutral_writer import write_neutral
    from zett_lab.show import cli

    recorded = write_neutral([coding_conversation(turns=2)], tmp_path / "run.json")
    code = cli.main(
        [
            "replay",
            str(recorded),
            "--max-tokens",
            "600",
            "--keep-recent-tokens",
            "200",
            "--engine",
            "tests.replay.test_engines:AwaitsForever",
            "--engine-timeout",
            "0.2",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert re.fullmatch(
        r"zett-lab: \d+ engine pass\(s\) failed \(anchors\(budget=0\.1\)\): EngineTimeout: the engine's pass "
        r"did not finish within engine_timeout=0\.2 s: it was still waiting \(an await that never finished\)\n",
        err,
    )


# --- sweep and report ----------------------------------------------------------------------------------


def test_sweep_then_report_from_the_saved_sweep(tmp_path: Path) -> None:
    out = tmp_path / "sweep.parquet"
    result = run(
        "sweep",
        FIXTURES / "sessions.sqlite",
        "--session",
        SESSION,
        "--max-tokens",
        "8k:16k:8k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        "truncate",
        "mask",
        "-o",
        out,
    )
    assert result.returncode == 0, result.stderr
    assert (out / "results.parquet").is_file()
    from zett_lab.study import Sweep

    assert len(Sweep.load(out).results) == 4
    for name, fmt in (("report.html", None), ("report.md", "md"), ("report.json", "json")):
        args = ["report", out, "-o", tmp_path / name, "--date", "2025-01-01"] + (["--format", fmt] if fmt else [])
        result = run(*args)
        assert result.returncode == 0, result.stderr
    page = (tmp_path / "report.html").read_text()
    assert SESSION in page and "truncate" in page and "<svg" in page
    assert json.loads((tmp_path / "report.json").read_text())["study"]["replays"] == 4
    assert (tmp_path / "report.md").read_text().startswith("# ")
    events = sorted((out / "sources").glob("*.engine-events.json"))[0]  # read only when asked for: one error then
    events.write_text('{"broken')
    with pytest.raises(InputError, match="engine events.*run the sweep again") as raised:
        for _, trace in Sweep.load(out).traces():
            assert trace.engine_events is not None
    assert events.name in str(raised.value)
    damaged = sorted((out / "sources").glob("*.compactions.parquet"))[0]  # a table the report reads: no page
    damaged.write_bytes(b"PAR1 not a table PAR1")
    line = one_error_line(run("report", out, "-o", tmp_path / "damaged.html"))
    assert damaged.name in line and "sweep table" in line and "run the sweep again" in line
    assert not (tmp_path / "damaged.html").exists()
    line = one_error_line(run("report", out, "-o", tmp_path / "x.html", "--max-tokens", "1k"))
    assert "saved sweep" in line


#: How a command's last line says how long it took: "in 0.4 s" or "in 3 min 12 s".
TOOK = r"in (\d+\.\d s|\d+ min \d+ s)"


def test_no_progress_is_quiet_and_the_last_line_says_what_was_done_and_how_long(tmp_path: Path) -> None:
    """import, sweep and report under --no-progress: nothing on stderr, one closing line with the work and the time."""
    import re

    source = tmp_path / "one.json"
    imported = run("import", FIXTURES / "sessions.sqlite", "-o", source, "--no-progress")
    assert imported.returncode == 0 and imported.stderr == "", imported.stderr
    assert re.fullmatch(
        rf"wrote 7 conversation\(s\), \d+ messages, \d+ native compaction\(s\), to {re.escape(str(source))} "
        rf"{TOOK}; 1 file\(s\) read",
        imported.stdout.strip().splitlines()[-1],
    ), imported.stdout
    swept = tmp_path / "s.sweep"
    result = run(
        "sweep",
        source,
        "--session",
        SESSION,
        "--max-tokens",
        "8k,16k",
        "--keep-recent-tokens",
        "2k",
        "--summarizer",
        "truncate",
        "-o",
        swept,
        "--no-progress",
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert re.fullmatch(
        r"swept 1 conversation\(s\) x 2 max_tokens x 1 keep_recent_tokens x 1 summarizer\(s\) "
        rf"\(2 cells: \d+ replays \(\d+ forked\), \d+ proven identical to one, \d+ summary calls\) {TOOK}; "
        rf"saved to {re.escape(str(swept))}; 1 file\(s\) read",
        result.stdout.strip().splitlines()[-1],
    ), result.stdout
    page = tmp_path / "r.html"
    result = run("report", swept, "-o", page, "--no-progress")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert re.fullmatch(
        rf"wrote html report to {re.escape(str(page))} \([\d,]+ bytes\): 1 conversation\(s\), 1 summarizer\(s\), "
        rf"2 replay\(s\); 2 cells: \d+ replays \(\d+ forked\), \d+ proven identical to one, \d+ summary calls; "
        rf"from a saved sweep; {TOOK}",
        result.stdout.strip().splitlines()[-1],
    ), result.stdout


def test_report_is_deterministic_across_processes(tmp_path: Path) -> None:
    source = tmp_path / "evil.json"
    evil_conversation().save(source)
    pages = []
    for n in range(2):
        target = tmp_path / f"report-{n}.html"
        result = run(
            "report",
            source,
            "-o",
            target,
            "--date",
            "2025-01-01",
            "--max-tokens",
            "900,1800",
            "--keep-recent-tokens",
            "250",
            "--summarizer",
            "truncate",
            "mask",
            "--no-progress",
        )
        assert result.returncode == 0, result.stderr
        pages.append(target.read_bytes())
    assert pages[0] == pages[1]
    assert b"<script>window.__zl_pwned" not in pages[0]


@pytest.mark.slow
def test_report_on_the_bundled_fixtures(tmp_path: Path) -> None:
    """What ``make report`` runs: offline, the built-in summarizers, the default grid."""
    target = tmp_path / "report.html"
    result = run("report", FIXTURES, "-o", target, timeout=900)
    assert result.returncode == 0, result.stderr
    assert f"({target.stat().st_size:,} bytes)" in result.stdout
    page = target.read_text(encoding="utf-8")
    for conversation in zett_lab.load_all(FIXTURES):
        assert conversation.id in page
    for name in ("anchors", "extractive", "truncate", "mask"):
        assert f"<code>{name}</code>" in page or f">{name}<" in page
    assert target.stat().st_size < 3_000_000
    # Progress on stderr: the sweep's bar, then the report's own parts (measuring what it shows, the page).
    assert re.search(r"sweep: 100%.*\b(\d+)/\1 ", result.stderr), result.stderr[-2000:]
    assert re.search(r"report: 100%.*2/2 \[", result.stderr), result.stderr[-2000:]


# --- lab ---------------------------------------------------------------------------------------------------


def test_lab_dry_run(tmp_path: Path) -> None:
    result = run("lab", tmp_path, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "jupyter lab" in result.stdout and f"--notebook-dir={tmp_path}" in result.stdout
    (tmp_path / "notebooks").mkdir()
    demo_folder = run("lab", tmp_path, "--dry-run", "--", "--port", "8899")
    assert demo_folder.returncode == 0, demo_folder.stderr
    assert f"--notebook-dir={tmp_path / 'notebooks'}" in demo_folder.stdout
    assert demo_folder.stdout.rstrip().endswith("--port 8899")
    relative = run("lab", ".", "--dry-run", cwd=tmp_path)
    assert relative.returncode == 0 and f"--notebook-dir={tmp_path.resolve() / 'notebooks'}" in relative.stdout
    checkout = run("lab", "--dry-run")
    assert checkout.returncode == 0 and f"--notebook-dir={ROOT / 'notebooks'}" in checkout.stdout
    assert "no such notebooks folder" in one_error_line(run("lab", tmp_path / "nope", "--dry-run"))


def test_lab_as_root_passes_allow_root_and_says_so(tmp_path: Path, monkeypatch, capsys) -> None:
    """Jupyter refuses to run as root without --allow-root, and most containers run as root."""
    from zett_lab.show import cli
    from zett_lab.show.commands import notebooks

    for root in (True, False):
        monkeypatch.setattr(notebooks, "_is_root", lambda root=root: root)
        assert cli.main(["lab", str(tmp_path), "--dry-run", "--", "--port", "8899"]) == 0
        out, err = capsys.readouterr()
        assert ("--allow-root" in out) == root and out.rstrip().endswith("--port 8899")
        assert ("running as root: starting JupyterLab with --allow-root" in err) == root
    monkeypatch.setattr(notebooks, "_is_root", lambda: True)
    assert cli.main(["lab", str(tmp_path), "--dry-run", "--", "--allow-root"]) == 0
    assert capsys.readouterr().out.count("--allow-root") == 1


@pytest.mark.parametrize("command", [["lab", "--dry-run"], ["demo", "study"]])
def test_lab_and_demo_name_the_extra_they_need(tmp_path: Path, command: list[str]) -> None:
    """Without the notebook side (``pip install zett-lab``), one line names the extra; nothing is written."""
    blocked = "import sys; sys.modules.update(jupyterlab=None, ipywidgets=None, anywidget=None); "
    result = subprocess.run(
        [sys.executable, "-c", blocked + "from zett_lab.show.cli import main; sys.exit(main(sys.argv[1:]))", *command],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    line = one_error_line(result)
    assert result.returncode == 2
    assert "needs zett-lab's 'lab' extra" in line and 'pip install "zett-lab[lab]"' in line
    assert "jupyterlab, ipywidgets, anywidget" in line
    assert not (tmp_path / "study").exists()


def test_widgets_name_the_extra_they_need() -> None:
    blocked = "import sys; sys.modules.update(ipywidgets=None); "
    result = subprocess.run(
        [sys.executable, "-c", blocked + "import zett_lab, zett_lab.show.report; import zett_lab.show.widgets"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "MissingExtra: zett_lab.show.widgets needs zett-lab's 'lab' extra" in result.stderr
    assert 'pip install "zett-lab[lab]"' in result.stderr


# --- demo --------------------------------------------------------------------------------------------------


def test_demo_writes_notebooks_and_samples(tmp_path: Path) -> None:
    folder = tmp_path / "study"
    result = run("demo", folder)
    assert result.returncode == 0, result.stderr
    notebooks = sorted(p.name for p in (folder / "notebooks").glob("*.ipynb"))
    assert notebooks == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert "01-explore.ipynb" in notebooks and "05-policy-lab.ipynb" in notebooks
    for name in ("sessions.sqlite", "sessions.probes.json"):
        assert (folder / "fixtures" / name).read_bytes() == (FIXTURES / name).read_bytes()
    assert f"zett-lab lab {folder}" in result.stdout and f"zett-lab report {folder / 'fixtures'} -o" in result.stdout
    loaded = zett_lab.load_all(folder / "fixtures")
    assert len(loaded) == 7 and sum(len(c.probes) for c in loaded) > 0


def test_the_quickstart_lists_what_demo_writes() -> None:
    """The quickstart and the README name every notebook ``demo`` writes, and count them right."""
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    count = {4: "four", 5: "five", 6: "six", 7: "seven"}[len(notebooks)]
    quickstart = (ROOT / "docs" / "quickstart.md").read_text()
    assert f"writes the {count} notebooks" in quickstart
    assert [name for name in notebooks if name not in quickstart] == []
    assert f"the {count} notebooks" in (ROOT / "README.md").read_text()


def test_demo_never_overwrites(tmp_path: Path) -> None:
    mine = tmp_path / "notebooks" / "01-explore.ipynb"
    mine.parent.mkdir()
    mine.write_text("my own edits")
    result = run("demo", tmp_path)
    assert result.returncode == 0, result.stderr
    assert mine.read_text() == "my own edits"
    assert f"kept  {mine}" in result.stdout
    assert (tmp_path / "notebooks" / "02-tune-thresholds.ipynb").is_file()
    again = run("demo", tmp_path)
    assert again.returncode == 0 and "wrote" not in again.stdout
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_demo_into_a_file_is_one_error(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x")
    assert "is a file" in one_error_line(run("demo", target))
    assert target.read_text() == "x"
