"""`zett-lab report` on a long session, against one warm replay of the same conversation.

The conversation is ``bench/long_session.py``'s: 250 user turns, 5,001 messages, ~1.55 M
tokens. Every side runs in a fresh child process; all share one summary cache:

- **replay**: load the conversation, replay it at 100k / 20k (``max_tokens`` /
  ``keep_recent_tokens``) once to fill the summary cache, reset the peak-memory mark, then
  replay it again ``WARM_REPLAYS`` times; done before the reports and again after them, and the
  median of those warm replays' wall and CPU times is what the ratios divide by (one replay of
  under 2 s moved the ratios by ±20 % from run to run), with the children's peak RSS;
- **report**: ``zett-lab report long.json -o report.html --no-progress`` with the default grid
  and summarizers (run through the CLI's ``main`` in the child, so the peak RSS of the main
  process and of each pool worker can be read before the pool stops), twice: first with a
  cache holding only the replay's summaries (every summary of the grid is computed: "cold"),
  then again ("warm": the summaries are cached, as on any later report of the conversations).

Prints both sides and the ratios: ``time ratio`` (cold report wall time / warm replay wall
time) and ``memory ratio`` (the cold report's main-process peak / the replay's peak), the same
for the warm report, CPU-time ratios (all processes of the report against the replay: less
moved by other jobs on the machine), and the workers' peaks.

- **the replays alone**: every replay of the report's grid (each summarizer × setting), in full,
  one after another in one process with the report's summaries cached: their CPU time over the
  machine's cores, as a ratio to the warm replay's wall time, is the time ratio a report of
  that grid could reach if it did nothing but replay (forks share only the steps before a
  path's first compaction, so it is close to a floor). Run twice, after the reports and at the
  very end, and the median taken: between two runs of this script at stop 39 one such run
  moved by 18 % (35.6 to 30.2 s CPU) while each report moved by 1 %.
- **the page**: its size, and its time to first paint in Chromium (``bench/first_paint.py``).
- **on more workers**: each report's wall time on 4, 16 and 64 workers, simulated from its
  sweep's units' measured CPU times and its own process's CPU before and after the sweep
  (``bench/schedule.py`` says how), and the critical path no number of workers beats.

Run: .venv/bin/python bench/report_scale.py [--turns N] [--issue-grid]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTING = {"max_tokens": 100_000, "keep_recent_tokens": 20_000}
#: Warm replays the baseline is measured by, before the reports and again after them (their median is divided by).
WARM_REPLAYS = 3


def _status(field: str, pid: int | str = "self") -> float:
    """One ``/proc/PID/status`` memory field (``VmHWM``, ``VmRSS``) in MB; NaN when unreadable."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process, from ``/proc/PID/stat``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def work_folder(prefix: str) -> Path:
    """A new temporary folder for one run's conversations, summary cache and pages, removed when the benchmark
    exits (hundreds of MB per run: left behind, a few runs fill the temporary folder)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _reset_peak() -> None:
    """Start a new peak-RSS mark for this process (Linux ``clear_refs``)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
        handle.write("5")


def child_replay(path: str) -> None:
    import zett_lab

    conversation = zett_lab.load(path)
    zett_lab.replay(conversation, **SETTING)
    _reset_peak()
    seconds, cpus = [], []
    for _ in range(WARM_REPLAYS):
        started, cpu = time.perf_counter(), time.process_time()
        trace = zett_lab.replay(conversation, **SETTING)
        seconds.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    result = {
        "seconds": seconds,
        "cpu": cpus,
        "peak_mb": _status("VmHWM"),
        "steps": len(trace.steps),
        "compactions": int(trace.compactions["applied"].sum()) if len(trace.compactions) else 0,
    }
    print(json.dumps(result))


def child_report(path: str, output: str, *grid: str) -> None:
    import zett_lab.report.sweep as report_sweep
    from zett_lab.show import cli
    from zett_lab.study import executors

    stages: dict = {}
    sweep = report_sweep.sweep

    def timed_sweep(*args, **kwargs):
        """The report's own sweep, with this process's CPU time before and after it (for the simulated schedule)."""
        stages["prepare_s"] = time.process_time()
        result = sweep(*args, **kwargs)
        stages["after_sweep_cpu"] = time.process_time()
        stages.update(units=result.config["unit_times"], driver_cpu_s=result.config["driver_cpu_s"])
        return result

    report_sweep.sweep = timed_sweep
    started = time.perf_counter()
    code = cli.main(["report", path, "-o", output, "--no-progress", *grid])
    seconds = time.perf_counter() - started
    stages["finish_s"] = time.process_time() - stages.pop("after_sweep_cpu")
    pool = executors.running_pool()
    pids = executors.worker_pids(pool) if pool is not None else []
    own = resource.getrusage(resource.RUSAGE_SELF)
    result = {
        "code": code,
        "seconds": seconds,
        "cpu": own.ru_utime + own.ru_stime + sum(_cpu_seconds(pid) for pid in pids),
        "peak_mb": _status("VmHWM"),
        "workers_mb": [_status("VmHWM", pid) for pid in pids],
        "html_bytes": Path(output).stat().st_size if Path(output).exists() else 0,
        "schedule": stages,
    }
    print(json.dumps(result))


def child_replays(path: str, *grid: str) -> None:
    """Every replay of the report's grid, in full, one after another (the cache holds the report's summaries)."""
    import zett_lab
    from zett_lab.report import DEFAULT_REPORT_SUMMARIZERS, default_grid
    from zett_lab.show.arguments import parse_grid

    conversation = zett_lab.load(path)
    settings = (
        {
            "max_tokens": parse_grid(grid[1], "max_tokens"),
            "keep_recent_tokens": parse_grid(grid[3], "keep_recent_tokens"),
        }
        if grid
        else default_grid([conversation], "gpt-5-mini")
    )
    cpu = time.process_time()
    replays = 0
    for summarizer in DEFAULT_REPORT_SUMMARIZERS:
        for max_tokens in settings["max_tokens"]:
            for keep in settings["keep_recent_tokens"]:
                zett_lab.replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer=summarizer)
                replays += 1
    print(json.dumps({"replays": replays, "cpu": time.process_time() - cpu}))


def _child(*args: str, env: dict[str, str], script: str = __file__) -> dict:
    """Run ``script`` with ``args`` in a fresh process; its last line of output is the JSON it measured."""
    output = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env)
    if output.returncode != 0:
        raise SystemExit(f"child {args[0]} failed:\n{output.stderr[-3000:]}")
    lines = output.stdout.strip().splitlines()
    for line in lines[:-1]:
        print(f"  ({args[0][8:]}) {line}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument(
        "--issue-grid",
        action="store_true",
        help="the grid the issue measured (390k/780k/1.6M × 98k/200k: the default before it was capped at "
        "the primary model's 400k window) instead of the default",
    )
    args = parser.parse_args()
    grid = ["--max-tokens", "390k,780k,1600k", "--keep-recent-tokens", "98k,200k"] if args.issue_grid else []
    sys.path.insert(0, str(ROOT / "bench"))
    from long_session import long_conversation

    work = work_folder("zett-lab-report-scale-")
    conversation = long_conversation(args.turns)
    path = conversation.save(work / "long.json")
    env = dict(
        os.environ,
        ZETT_LAB_CACHE=str(work / "summaries.sqlite"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    before = _child("--child-replay", str(path), env=env)
    cold = _child("--child-report", str(path), str(work / "cold.html"), *grid, env=env)
    warm = _child("--child-report", str(path), str(work / "warm.html"), *grid, env=env)
    alone_runs = [_child("--child-replays", str(path), *grid, env=env)]
    after = _child("--child-replay", str(path), env=env)
    alone_runs.append(_child("--child-replays", str(path), *grid, env=env))
    runs_cpu = [run["cpu"] for run in alone_runs]
    alone = {"replays": alone_runs[0]["replays"], "cpu": statistics.median(runs_cpu), "runs": runs_cpu}
    runs = before["seconds"] + after["seconds"]
    replay = {
        **before,
        "seconds": statistics.median(runs),
        "cpu": statistics.median(before["cpu"] + after["cpu"]),
        "peak_mb": max(before["peak_mb"], after["peak_mb"]),
    }
    cores = os.cpu_count() or 1
    print(f"conversation: {len(conversation.messages)} messages, {args.turns} user turns")
    print(f"grid: {' '.join(grid[1::2]) if grid else 'the default'}")
    print(
        f"warm replay at 100k/20k: {replay['seconds']:.2f} s ({replay['cpu']:.2f} s CPU), peak {replay['peak_mb']:.0f} MB "
        f"({replay['steps']} steps, {replay['compactions']} compactions): the median of {len(runs)} runs, "
        f"{WARM_REPLAYS} before the reports and {WARM_REPLAYS} after ({', '.join(f'{r:.2f}' for r in runs)} s)"
    )
    for name, report in (("cold", cold), ("warm", warm)):
        workers = ", ".join(f"{w:.0f}" for w in report["workers_mb"]) or "none"
        print(
            f"zett-lab report, {name} summary cache: {report['seconds']:.1f} s ({report['cpu']:.1f} s CPU, all processes), "
            f"main process peak {report['peak_mb']:.0f} MB, workers {workers} MB, HTML {report['html_bytes']:,} bytes"
        )
    print(
        f"the grid's {alone['replays']} replays alone, each in full, one after another: {alone['cpu']:.1f} s CPU "
        f"({alone['cpu'] / alone['replays'] / replay['cpu']:.2f}x the 100k/20k replay's CPU each): the median of "
        f"{len(alone['runs'])} runs, one between the reports and the last replays, one after ("
        f"{', '.join(f'{cpu:.1f}' for cpu in alone['runs'])} s)"
    )
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    print(f"time ratio: {cold['seconds'] / replay['seconds']:.1f}")
    print(f"memory ratio: {cold['peak_mb'] / replay['peak_mb']:.2f}")
    print(f"time ratio (warm summary cache): {warm['seconds'] / replay['seconds']:.1f}")
    print(f"memory ratio (warm summary cache): {warm['peak_mb'] / replay['peak_mb']:.2f}")
    print(f"cpu ratio: {cold['cpu'] / replay['cpu']:.1f} cold, {warm['cpu'] / replay['cpu']:.1f} warm")
    print(
        f"time ratio of those replays alone on {cores} cores: {alone['cpu'] / cores / replay['seconds']:.1f} "
        "(what no report of this grid can beat without running fewer or cheaper replays)"
    )
    print_over_replays(cold, warm, alone["cpu"], cores)
    print_first_paint(work / "cold.html")
    if cold["workers_mb"]:
        print(f"worker memory ratio (largest worker): {max(cold['workers_mb']) / replay['peak_mb']:.2f}")
    print_simulated(cold, warm, cores)


def print_first_paint(page: Path) -> None:
    """How long the report page takes to open in Chromium (bench/first_paint.py), when a browser is installed."""
    from first_paint import chromium, describe, first_paint

    try:
        with chromium() as browser:
            print(f"report page in Chromium: {describe(first_paint(browser, page))}")
    except Exception as error:  # noqa: BLE001 - no browser here: the other figures stand
        print(f"report page in Chromium: not measured ({type(error).__name__}: {error})")


def print_over_replays(cold: dict, warm: dict, replays_cpu: float, cores: int) -> None:
    """What a report costs beyond the replays it must run: its wall time over its grid's replays alone on the
    machine's cores (their CPU time / cores), cold and warm; its CPU time over theirs; and both differences in
    seconds (cheaper replays raise the ratios though the rest costs what it did: the seconds say so)."""
    alone = replays_cpu / cores
    print(
        f"report over its grid's replays alone on {cores} cores: {cold['seconds'] / alone:.2f} cold (goal <= 2.0), "
        f"{warm['seconds'] / alone:.2f} warm (goal <= 1.5); in CPU time: {cold['cpu'] / replays_cpu:.2f} cold, "
        f"{warm['cpu'] / replays_cpu:.2f} warm; beyond them: {cold['seconds'] - alone:.1f} s cold, "
        f"{warm['seconds'] - alone:.1f} s warm ({cold['cpu'] - replays_cpu:.1f} / {warm['cpu'] - replays_cpu:.1f} s CPU)"
    )


def print_simulated(cold: dict, warm: dict, cores: int) -> None:
    """The wall time each report would take on 4, 16 and 64 workers (bench/schedule.py: from its units' CPU)."""
    from schedule import costliest_first, critical_path, simulate

    for name, report in (("cold", cold), ("warm", warm)):
        schedule = report["schedule"]
        units = schedule["units"]
        print(
            f"simulated wall time, {name} report ({len(units)} units, {sum(u['cpu_s'] for u in units):.1f} s CPU on "
            f"workers; the report's process {schedule['prepare_s']:.1f} s before the sweep, "
            f"{schedule['finish_s']:.1f} s after): "
            + ", ".join(f"{n} workers {simulate(schedule, n):.1f} s" for n in (cores, 4, 16, 64))
            + f"; critical path {critical_path(schedule):.1f} s; {cores} workers with the units handed out "
            f"costliest first by their own times: {simulate({**schedule, 'units': costliest_first(units)}, cores):.1f} s"
        )
        workers = {w: f"w{i + 1}" for i, w in enumerate(dict.fromkeys(u["worker"] for u in units))}
        print(
            f"  {name} units in the order handed out (CPU s, of it the anchor index, worker): "
            + ", ".join(
                f"{u['summarizer']} x{u['cells']} {u['cpu_s']:.1f} ({u['setup_cpu_s']:.1f}, {workers[u['worker']]})"
                for u in units
            )
        )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--child-replay":
        child_replay(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--child-replays":
        child_replays(sys.argv[2], *sys.argv[3:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "--child-report":
        child_report(sys.argv[2], sys.argv[3], *sys.argv[4:])
    else:
        main()
