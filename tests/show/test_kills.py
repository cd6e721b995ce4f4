"""Outputs under races and kills: one writer per output, SIGTERM handled like Ctrl-C, nothing left behind.

Real processes (``python -m zett_lab.show.cli``), real signals; each run gets its own ``TMPDIR`` so
what it leaves in the system's temporary folder can be seen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zett_lab.errors import OutputError
from zett_lab.files import atomic_folder, check_output, release_output, write_atomic

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SQLITE = FIXTURES / "sessions.sqlite"


def _env(tmp: Path) -> dict[str, str]:
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}


def _cli(*argv: str) -> list[str]:
    return [sys.executable, "-m", "zett_lab.show.cli", *argv]


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (read from /proc: children, their children, ...)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_until(condition, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


# -- one writer per output -----------------------------------------------------------------------------------


def test_two_runs_writing_one_new_output_never_both_succeed(tmp_path, fixture_conversations):
    """Two reports started together: a report renders its page between the output check and the write."""
    from zett_lab.load.neutral_writer import write_neutral

    small = min(fixture_conversations, key=lambda c: len(c.messages))
    source = write_neutral([small], tmp_path / "one.json")
    out = tmp_path / "out" / "report.html"
    out.parent.mkdir()
    argv = _cli(
        "report", str(source), "--max-tokens", "3k", "--keep-recent-tokens", "1k", "--summarizer", "truncate",
        "--no-cache", "--no-progress", "-o", str(out),
    )  # fmt: skip
    logs = [tmp_path / f"run{n}.err" for n in range(2)]
    runs = [
        subprocess.Popen(argv, env=_env(tmp_path / "tmp"), stdout=subprocess.DEVNULL, stderr=log.open("wb"))
        for log in logs
    ]
    results = [(run.wait(timeout=300), log.read_text()) for run, log in zip(runs, logs, strict=True)]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2)
    assert str(out) in refused and ("being written by another zett_lab run" in refused or "already exists" in refused)
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.html"]  # and nothing else


def test_an_output_another_process_is_writing_is_refused_before_any_work(tmp_path, capsys):
    from zett_lab.show.cli import main

    out = tmp_path / "report.html"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys,time; from zett_lab.files import claim_output; claim_output({str(out)!r}); print('held', flush=True); time.sleep(60)"],
        env=_env(tmp_path / "tmp"),
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == b"held"
        started = time.monotonic()
        code = main(["report", str(FIXTURES), "-o", str(out), "--no-progress"])
        assert time.monotonic() - started < 30  # refused at once, not after the report's work
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert code == 2
    assert "being written by another zett_lab run right now" in capsys.readouterr().err
    assert not out.exists()


def test_an_output_that_appears_meanwhile_is_never_replaced_without_force(tmp_path):
    out = tmp_path / "notes.txt"
    check_output(out)
    out.write_text("someone else's")  # another program wrote it after the check
    with pytest.raises(OutputError, match="was created by another program"):
        write_atomic(out, "ours", overwrite=False)
    assert out.read_text() == "someone else's"
    folder = tmp_path / "run.sweep"
    check_output(folder)
    folder.mkdir()  # even an empty folder is kept (a plain rename would replace it)
    with (
        pytest.raises(OutputError, match="was created by another program"),
        atomic_folder(folder, overwrite=False) as staging,
    ):
        (staging / "sweep.json").write_text("{}")
    assert list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "run.sweep"]
    release_output(out)


# -- SIGTERM and kill -9 --------------------------------------------------------------------------------------


def test_sigterm_stops_a_sweep_like_ctrl_c(tmp_path):
    """Workers stopped, the sweep's temporary folder removed, no partial output, exit 143."""
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    out.mkdir()
    argv = _cli(
        "sweep", str(FIXTURES), "--max-tokens", "4k:60k:2k", "--keep-recent-tokens", "1k,2k,3k",
        "--summarizer", "anchors", "mask", "--no-progress", "--no-cache", "-o", str(out / "s.sweep"),
    )  # fmt: skip
    log = tmp_path / "sweep.err"
    # stderr to a file: a worker that outlived the sweep would hold a pipe open and hang the test
    run = subprocess.Popen(argv, env=_env(tmp), stdout=subprocess.DEVNULL, stderr=log.open("wb"))
    below: set[int] = set()
    try:
        started = _wait_until(
            lambda: (
                any(p.name.startswith("zett-lab-sweep-") for p in tmp.iterdir())
                and any(_descendants(child) for child in _descendants(run.pid))
            )
        )
        assert started, "the sweep never started its workers"
        time.sleep(1.0)
        below = _descendants(run.pid)
        run.send_signal(signal.SIGTERM)
        code = run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        gone = _wait_until(lambda: not [pid for pid in below if _alive(pid)], 30)
        for pid in below:  # never leave a worker behind, whatever the test found
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    err = log.read_text()
    assert code == 143, err
    assert err.strip().endswith("zett-lab: terminated")
    assert gone, "workers outlived the sweep"
    assert [p.name for p in tmp.iterdir() if p.name.startswith("zett-lab")] == []  # (tiktoken's cache stays)
    assert list(out.iterdir()) == []


def _interrupt_like_a_terminal(tmp_path: Path, argv: list[str], started) -> tuple[int, str]:
    """Run ``argv`` in a process group of its own, wait for ``started(run)``, then send SIGINT to the whole group
    (what Ctrl-C in a terminal does: the fork server and the pool's workers get it too)."""
    log = tmp_path / "run.err"
    run = subprocess.Popen(
        argv, env=_env(tmp_path / "tmp"), stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True
    )
    try:
        assert _wait_until(lambda: started(run)), "the command never got to where it is interrupted"
        os.killpg(run.pid, signal.SIGINT)
        code = run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        with contextlib.suppress(ProcessLookupError):  # never leave a worker behind
            os.killpg(run.pid, signal.SIGKILL)
    return code, log.read_text()


def _fork_server_importing(run: subprocess.Popen) -> bool:
    """The pool's fork server is running, half a second into importing what its workers preload."""
    if not any(b"forkserver" in _cmdline(pid) for pid in _descendants(run.pid)):
        return False
    time.sleep(0.5)
    return True


def _workers_started(run: subprocess.Popen) -> bool:
    """The pool's workers are running (the fork server's children)."""
    return any(_descendants(child) for child in _descendants(run.pid))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.parametrize("started", [_fork_server_importing, _workers_started])
def test_ctrl_c_in_a_terminal_stops_a_report_with_one_line(tmp_path, started):
    """The fork server and the pool's workers ignore SIGINT; the CLI stops them: no traceback from any of them."""
    out = tmp_path / "out"
    out.mkdir()
    argv = _cli("report", str(SQLITE), "--no-cache", "--no-progress", "-o", str(out / "int.html"))
    code, err = _interrupt_like_a_terminal(tmp_path, argv, started)
    assert code == 130, err
    assert err == "zett-lab: interrupted\n"
    assert list(out.iterdir()) == []


def test_ctrl_c_in_a_terminal_stops_an_import_with_one_line(tmp_path, fixture_conversations):
    """Interrupted while the database is written: its connection is closed, not cancelled (no driver traceback)."""
    from zett_lab.load.neutral_writer import write_neutral

    many = [dataclasses.replace(c, id=f"{c.id}-{n}") for n in range(40) for c in fixture_conversations]
    source = write_neutral(many, tmp_path / "many.json")
    out = tmp_path / "out"
    out.mkdir()
    tmp = tmp_path / "tmp"
    argv = _cli("import", str(source), "--no-progress", "-o", str(out / "all.sqlite"))
    code, err = _interrupt_like_a_terminal(
        tmp_path, argv, lambda run: tmp.is_dir() and any(p.name.startswith("zett-lab-output-") for p in tmp.iterdir())
    )
    assert code == 130, err
    assert err == "zett-lab: interrupted\n"
    assert list(out.iterdir()) == []


POOL_UNDER_A_LONG_TMPDIR = textwrap.dedent(
    """
    import concurrent.futures as cf, os
    from zett_lab.study.executors import process_context
    context = process_context()
    with cf.ProcessPoolExecutor(1, mp_context=context) as pool:
        assert pool.submit(os.getpid).result(timeout=120) != os.getpid()
    manager = context.Manager()
    manager.Queue().put("tick")
    manager.shutdown()
    print("ran", flush=True)
    """
)


def test_workers_start_under_a_temporary_folder_too_long_for_a_socket(tmp_path):
    """A deep TMPDIR (a CI checkout's test folder): the fork server's and manager's sockets would pass a Unix
    socket's 107 bytes ("AF_UNIX path too long"); they are made in a short system folder instead."""
    tmp = tmp_path / ("t" * max(1, 90 - len(str(tmp_path))))
    assert len(str(tmp)) >= 90
    ran = subprocess.run(
        [sys.executable, "-c", POOL_UNDER_A_LONG_TMPDIR], env=_env(tmp), capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "ran", ran.stderr
    assert list(tmp.iterdir()) == []  # multiprocessing's folder was not made (nor left) there


KILLED_IN_A_FOLDER = textwrap.dedent(
    """
    import os, sys, time
    from zett_lab.files import atomic_folder
    with atomic_folder(sys.argv[1]) as staging:
        (staging / "half.parquet").write_bytes(b"x" * 1000)
        print("writing", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2, 0.5])
def test_kill_9_during_import_leaves_nothing_in_the_users_folder(tmp_path, delay):
    """Killed while the database is being written (found by watching both places it may be built)."""
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    out.mkdir()
    run = subprocess.Popen(
        _cli("import", str(FIXTURES), "-o", str(out / "all.sqlite"), "--no-progress"),
        env=_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    writing = _wait_until(
        lambda: (
            run.poll() is not None
            or any(out.iterdir())
            or any(p.name.startswith("zett-lab-output-") for p in tmp.iterdir())
        ),
        120,
    )
    time.sleep(delay)
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert writing
    left = sorted(p.name for p in out.iterdir())
    assert left in ([], ["all.probes.json", "all.sqlite"], ["all.sqlite"]), left


def test_a_folder_left_by_kill_9_is_removed_by_the_next_write_beside_it(tmp_path):
    target = tmp_path / "run.sweep"
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_IN_A_FOLDER, str(target)], env=_env(tmp_path / "tmp"), stdout=subprocess.PIPE
    )
    assert run.stdout.readline().strip() == b"writing"
    [left] = [p for p in tmp_path.iterdir() if p.name.startswith(".run.sweep")]
    with atomic_folder(target) as staging:  # the other process still holds its staging folder: kept
        (staging / "sweep.json").write_text("{}")
    assert left.exists()
    run.send_signal(signal.SIGKILL)
    run.wait()
    run.stdout.close()
    with atomic_folder(target) as staging:
        (staging / "sweep.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sweep", "tmp"]


# -- the local pool ------------------------------------------------------------------------------------------


def test_a_report_starts_its_pool_once_its_inputs_pass_and_an_input_error_starts_none(
    tmp_path, capsys, monkeypatch, fixture_conversations
):
    """The pool's start-up (most of a second) overlaps the report's grid: its workers start before any unit is
    submitted. A report stopped by its inputs (unreadable, a bad --explore, an output that is one of them)
    says so in one line and leaves no pool, fork server or worker behind."""
    import zett_lab.report
    from zett_lab.load.neutral_writer import write_neutral
    from zett_lab.show.cli import main
    from zett_lab.study import executors

    small = min(fixture_conversations, key=lambda c: len(c.messages))
    source = write_neutral([small], tmp_path / "one.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"id": "x", "messages": [{"role": "user", "content": "hi"}, {"role": "tool"')
    cache = tmp_path / "summaries.sqlite"
    monkeypatch.setenv("ZETT_LAB_CACHE", str(cache))
    out = str(tmp_path / "report.html")
    executors.shutdown_default_executor()
    before = _descendants(os.getpid())
    for argv, message in (
        ([str(broken), "-o", out], str(broken)),
        ([str(source), "-o", out, "--explore", "nowhere"], "--explore 'nowhere': no such conversation"),
        ([str(source), "-o", str(cache), "--force"], str(cache)),
    ):
        assert main(["report", *argv, "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert executors.running_pool() is None
        assert _descendants(os.getpid()) <= before
    seen = []

    class GridAskedFor(Exception):
        """Stops the report where its grid is made: what ran before it is what this test is about."""

    def grid_once_the_workers_run(*args, **kwargs):
        pool = executors.running_pool()
        seen.append(pool is not None and _wait_until(lambda: bool(executors.worker_pids(pool))))
        raise GridAskedFor

    monkeypatch.setattr(zett_lab.report, "default_grid", grid_once_the_workers_run)
    try:
        with pytest.raises(GridAskedFor):
            main(["report", str(source), "-o", out, "--no-cache", "--no-progress"])
    finally:
        executors.shutdown_default_executor()
    assert seen == [True]  # workers running, no unit submitted yet
