"""A 10×10 grid over every fixture: zett_lab.study.sweep against naive per-point replays.

Naive = what a user would write without zett_lab's sweep: for every grid point a fresh
``zett_lab.replay(..., count_tokens=zett_lab.replay.engine.engine_count_tokens, cache=False)``
(zett-agent's own default counter, no summary cache, nothing shared).

Sweep = ``zett_lab.study.sweep`` on the default process pool (fresh workers), same grid,
same offline summarizer, ``metrics=False`` so both sides do the same work (replays and the
budget figures); the time with loss metrics is printed separately.

- cold: empty summary cache, a new session (fresh worker processes, pool start-up included);
- warm: the summary cache of the cold run, a new session (nothing else kept);
- warm, same session: the replays proven in this session are kept too (a re-run in the same
  notebook answers every cell without replaying).

The naive side would take tens of minutes on the whole grid, so by default it replays a
documented sample: per conversation, 10 of the 100 points, one in each row and each column
of the grid (point i uses max_tokens[i] and keep_recent_tokens[(3 i + conversation#) % 10]).
Its total is extrapolated as mean(sampled time) × 100 per conversation, and the output says
so. ``--full`` replays every point. Every sampled naive trace is compared with the sweep's
trace of that cell (steps and compaction records; latency and cache bookkeeping excepted).

Run: .venv/bin/python bench/sweep.py [--full] [--summarizer SPEC]
Prints ratios measured in this run, ending with ``identical``, ``speedup cold`` and
``speedup warm`` lines (wall time), and ``cpu speedup cold`` / ``cpu speedup warm`` (CPU time of
every process involved: the machine's load moves them much less).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import zett_lab
from zett_lab import study
from zett_lab.replay import replay
from zett_lab.replay.engine import engine_count_tokens
from zett_lab.tokens import count_tokens

ROOT = Path(__file__).resolve().parent.parent
MAX_TOKENS = [4_000, 6_000, 8_000, 12_000, 16_000, 24_000, 32_000, 48_000, 64_000, 96_000]
KEEP_RECENT = [500, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 12_000, 16_000, 24_000]


def same_records(a, b) -> bool:
    """Same steps and same compaction records (summaries included); run bookkeeping excepted."""
    run = ["latency_s", "cache_hit"]
    return a.steps.equals(b.steps) and a.compactions.drop(columns=run).equals(b.compactions.drop(columns=run))


def timed_sweep(conversations, summarizer: str, cache: Path, *, fresh_workers: bool, metrics: bool = False):
    if fresh_workers:  # a new session: new worker processes, and this process forgets its replays too
        study.shutdown_default_executor()
        study.clear_worker_state()
    started = time.perf_counter()
    result = study.sweep(
        conversations,
        max_tokens=MAX_TOKENS,
        keep_recent_tokens=KEEP_RECENT,
        summarizers=[summarizer],
        cache=cache,
        metrics=metrics,
        progress=False,
    )
    return result, time.perf_counter() - started


def run_sweeps(conversations, summarizer: str):
    """The cold, warm and warm-same-session sweeps, then the cold time with loss metrics; exits on a failed cell."""
    workdir = Path(tempfile.mkdtemp(prefix="zett-lab-bench-"))
    cache = workdir / "summaries.sqlite"
    cold, cold_s = timed_sweep(conversations, summarizer, cache, fresh_workers=True)
    warm, warm_s = timed_sweep(conversations, summarizer, cache, fresh_workers=True)
    session, session_s = timed_sweep(conversations, summarizer, cache, fresh_workers=False)
    study.shutdown_default_executor()
    with_metrics, metrics_s = timed_sweep(
        conversations, summarizer, workdir / "metrics.sqlite", fresh_workers=True, metrics=True
    )
    study.shutdown_default_executor()
    for name, result in (
        ("cold", cold),
        ("warm", warm),
        ("warm, same session", session),
        ("with metrics", with_metrics),
    ):
        if result.config["errors"]:
            print(f"{name}: {result.config['errors']} cells failed: {result.errors['error'].iloc[0]}")
            sys.exit(1)
    return (cold, cold_s), (warm, warm_s), (session, session_s), metrics_s


def naive_side(conversations, summarizer: str, full: bool, sweeps):
    """Fresh per-point replays (wall and CPU seconds per conversation), each compared with every sweep's trace."""
    naive_times: dict[str, list[float]] = {}
    naive_cpu: dict[str, list[float]] = {}
    identical = True
    compared = 0
    replay(
        conversations[0],
        max_tokens=MAX_TOKENS[0],
        keep_recent_tokens=KEEP_RECENT[0],
        summarizer=summarizer,
        cache=False,
        count_tokens=engine_count_tokens,
    )  # warm imports, vocabulary and summarizer
    for n, conversation in enumerate(conversations):
        if full:
            points = [(m, k) for m in MAX_TOKENS for k in KEEP_RECENT]
        else:
            points = [(MAX_TOKENS[i], KEEP_RECENT[(3 * i + n) % len(KEEP_RECENT)]) for i in range(len(MAX_TOKENS))]
        times = naive_times.setdefault(conversation.id, [])
        cpu = naive_cpu.setdefault(conversation.id, [])
        for m, k in points:
            started, cpu_started = time.perf_counter(), time.process_time()
            naive = replay(
                conversation,
                max_tokens=m,
                keep_recent_tokens=k,
                summarizer=summarizer,
                cache=False,
                count_tokens=engine_count_tokens,
            )
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
            for result in sweeps:
                identical &= same_records(naive, result.trace(conversation.id, m, k, summarizer))
            compared += 1
    return naive_times, naive_cpu, identical, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="replay every naive point instead of a sample")
    parser.add_argument("--summarizer", default=None, help="offline summarizer spec (default: zett_lab's default)")
    args = parser.parse_args()
    from zett_lab.summarizers import DEFAULT_SUMMARIZER

    summarizer = args.summarizer or DEFAULT_SUMMARIZER
    conversations = sorted(zett_lab.load_all(ROOT / "fixtures"), key=lambda c: count_tokens(c.messages))
    print(
        f"fixtures: {len(conversations)} conversations, "
        f"{', '.join(f'{c.id} ({count_tokens(c.messages)} tok)' for c in conversations)}"
    )
    print(
        f"grid: {len(MAX_TOKENS)} max_tokens × {len(KEEP_RECENT)} keep_recent_tokens = "
        f"{len(MAX_TOKENS) * len(KEEP_RECENT) * len(conversations)} cells; summarizer {summarizer}"
    )
    print(f"machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}")

    (cold, cold_s), (warm, warm_s), (session, session_s), metrics_s = run_sweeps(conversations, summarizer)
    naive_times, naive_cpu, identical, compared = naive_side(conversations, summarizer, args.full, (cold, warm))
    cells = len(MAX_TOKENS) * len(KEEP_RECENT)
    naive_total = sum(statistics.fmean(t) * cells for t in naive_times.values())
    naive_cpu_total = sum(statistics.fmean(t) * cells for t in naive_cpu.values())
    sampled = sum(len(t) for t in naive_times.values())

    print()
    print(
        f"naive: {sampled} of {cells * len(conversations)} points replayed"
        + (
            ""
            if args.full
            else f" (sample: one per grid row and column per conversation; total extrapolated as mean × {cells})"
        )
    )
    for conversation in conversations:
        t = naive_times[conversation.id]
        print(
            f"  {conversation.id:<24} mean {statistics.fmean(t):7.3f} s/point  → {statistics.fmean(t) * cells:8.1f} s "
            f"for {cells} points"
        )
    print(
        f"naive total{' (extrapolated)' if not args.full else ''}: {naive_total:.1f} s wall, {naive_cpu_total:.1f} s "
        "CPU"
    )
    for name, result, seconds in (
        ("cold", cold, cold_s),
        ("warm", warm, warm_s),
        ("warm, same session", session, session_s),
    ):
        c = result.config
        cpu = c["worker_cpu_s"] + c["driver_cpu_s"]
        print(
            f"sweep {name}: {seconds:.1f} s wall, {cpu:.1f} s CPU ({c['replays']} replays ({c.get('forked', 0)} forked, "
            f"{c.get('shared_steps', 0)} steps shared), {c['reused']} cells proven "
            f"identical to one, {c['model_calls']} summary calls, {c['cache_hits']} cache hits, "
            f"{len(c['workers'])} workers) — CPU-time speedup {naive_cpu_total / cpu:.0f}x"
        )
    print(f"sweep cold with loss metrics: {metrics_s:.1f} s (metrics add {metrics_s - cold_s:+.1f} s)")
    print(f"compared {compared} naive traces with the sweep's cold and warm traces")
    print(f"speedup warm, same session: {naive_total / session_s:.0f}")
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    print(f"identical: {str(identical).lower()}")
    print(f"speedup cold: {naive_total / cold_s:.1f}")
    print(f"speedup warm: {naive_total / warm_s:.1f}")
    for name, result in (("cold", cold), ("warm", warm)):
        c = result.config
        print(f"cpu speedup {name}: {naive_cpu_total / (c['worker_cpu_s'] + c['driver_cpu_s']):.1f}")


if __name__ == "__main__":
    main()
