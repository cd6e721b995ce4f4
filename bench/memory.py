"""Peak memory of the 10×10 sweep, and how time and memory grow with conversation length.

1. The 10×10 grid of ``bench/sweep.py`` over every fixture (default summarizer, loss
   metrics on), on the default process pool: peak RSS of this process (which holds the
   results and every trace) and of each worker (``VmHWM`` from ``/proc``), against the RSS
   after imports.
2. Scaling: the largest fixture repeated 1×, 2× and 4× (its dialogue appended again with
   fresh tool-call ids, so it stays a valid recording), swept over a 3×3 grid in a fresh
   child process each (``executor="serial"``, so one process holds everything): cold (an
   empty summary cache) and warm (the cold run's cache, nothing else kept; the fastest of
   ``WARM_RUNS`` runs, since the 1× run takes under two seconds); wall and CPU
   time, and peak RSS (``ru_maxrss``) above the child's RSS after imports and loading, with
   ratios to 1×. The grid's thresholds are fixed, so a longer conversation is compacted more
   often per token (the counts are printed): the cold run includes computing those summaries.
   Fewer cells share a replay on a longer conversation (the replay counts are printed), and a
   forked replay shares only the steps before its first different decision, so the CPU time per
   distinct replay and per step the replays ran themselves are printed too.

Run: .venv/bin/python bench/memory.py
Prints figures and ratios measured in this run.
"""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_TOKENS = [4_000, 6_000, 8_000, 12_000, 16_000, 24_000, 32_000, 48_000, 64_000, 96_000]
KEEP_RECENT = [500, 1_000, 2_000, 3_000, 4_000, 6_000, 8_000, 12_000, 16_000, 24_000]
SCALE_MAX = [16_000, 48_000, 96_000]
SCALE_KEEP = [2_000, 8_000, 24_000]
SCALES = (1, 2, 4)
#: Warm runs per length; the fastest counts (the machine's speed moves by ~10 % between runs).
WARM_RUNS = 3


def rss_mb() -> float:
    """Current resident set size of this process, MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb(pid: int | str = "self") -> float:
    """Peak resident set size (VmHWM) of a process, MB."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def repeated(conversation, times: int):
    """The conversation with its dialogue repeated ``times`` times (fresh tool-call ids each copy)."""
    import dataclasses

    from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage

    import zett_lab

    system = [m for m in conversation.messages if isinstance(m, SystemMessage)]
    dialogue = [m for m in conversation.messages if not isinstance(m, SystemMessage)]
    messages = list(system)
    for copy_number in range(times):
        suffix = "" if copy_number == 0 else f"-r{copy_number}"
        for message in dialogue:
            message = copy.deepcopy(message)
            if suffix and isinstance(message, AssistantMessage) and message.tool_calls:
                calls = tuple(dataclasses.replace(call, id=call.id + suffix) for call in message.tool_calls)
                message = dataclasses.replace(message, tool_calls=calls)
            elif suffix and isinstance(message, ToolMessage):
                message = dataclasses.replace(message, tool_call_id=message.tool_call_id + suffix)
            messages.append(message)
    result = zett_lab.Conversation(id=f"{conversation.id}-x{times}", messages=messages)
    result.validate()
    return result


def child(scale: int) -> None:
    """Sweep the largest fixture repeated ``scale`` times, cold then warm; print one JSON line."""
    import zett_lab
    from zett_lab.study import clear_worker_state, sweep
    from zett_lab.tokens import count_tokens

    largest = max(zett_lab.load_all(ROOT / "fixtures"), key=lambda c: count_tokens(c.messages))
    conversation = repeated(largest, scale)
    tokens = count_tokens(conversation.messages)
    cache = Path(tempfile.mkdtemp(prefix="zett-lab-mem-")) / "s.sqlite"
    baseline = rss_mb()
    runs = {}
    # warm: the cold run's summary cache, nothing else kept; best of WARM_RUNS (a 1× run takes under 2 s)
    for name in ("cold", *["warm"] * WARM_RUNS):
        clear_worker_state()
        started, cpu = time.perf_counter(), time.process_time()
        result = sweep(
            conversation,
            max_tokens=SCALE_MAX,
            keep_recent_tokens=SCALE_KEEP,
            cache=cache,
            executor="serial",
            progress=False,
        )
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        ran = result.results[result.results["replayed"].eq(True)]
        if name in runs:
            runs[name]["all_seconds"].append(seconds)
            runs[name]["seconds"], runs[name]["cpu"] = min(runs[name]["seconds"], seconds), min(runs[name]["cpu"], cpu)
            continue
        runs[name] = {
            "seconds": seconds,
            "all_seconds": [seconds],
            "cpu": cpu,
            "replays": result.config["replays"],
            "summary_calls": result.config["model_calls"],
            "compactions": int(result.results["compactions_applied"].sum()),
            # Steps the replays ran themselves (a fork takes its shared prefix from the replay it forked from).
            "steps_run": int((ran["steps"] - ran["shared_steps"]).sum()),
            "errors": result.config["errors"],
        }
        if name == "cold":
            runs[name]["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {"scale": scale, "messages": len(conversation.messages), "tokens": tokens, "baseline_mb": baseline, **runs}
        )
    )


def main() -> None:
    import zett_lab
    from zett_lab import study as module
    from zett_lab.summarizers import DEFAULT_SUMMARIZER

    conversations = zett_lab.load_all(ROOT / "fixtures")
    module.shutdown_default_executor()
    baseline = rss_mb()
    started = time.perf_counter()
    result = module.sweep(
        conversations,
        max_tokens=MAX_TOKENS,
        keep_recent_tokens=KEEP_RECENT,
        summarizers=[DEFAULT_SUMMARIZER],
        cache=Path(tempfile.mkdtemp(prefix="zett-lab-mem-")) / "s.sqlite",
        progress=False,
    )
    seconds = time.perf_counter() - started
    workers = {name: peak_mb(name.rsplit(":", 1)[-1]) for name in result.config["workers"]}
    driver_peak = peak_mb()
    print(
        f"10×10 sweep over {len(conversations)} fixtures ({len(result.results)} cells, {result.config['replays']} "
        "replays, "
        f"loss metrics on): {seconds:.1f} s"
    )
    print(
        f"  this process: {baseline:.0f} MB after imports and loading, peak {driver_peak:.0f} MB "
        f"(+{driver_peak - baseline:.0f} MB for results and {len(result.store.sources)} distinct traces)"
    )
    for pid, peak in workers.items():
        print(f"  worker {pid}: peak {peak:.0f} MB")
    total = driver_peak + sum(workers.values())
    print(
        f"peak memory, 10×10 sweep: {total:.0f} MB total ({driver_peak:.0f} MB driver + "
        f"{' + '.join(f'{p:.0f}' for p in workers.values())} MB workers)"
    )
    module.shutdown_default_executor()

    print()
    print(
        f"scaling: the largest fixture repeated 1×, 2×, 4×; {len(SCALE_MAX)}×{len(SCALE_KEEP)} grid "
        f"(max_tokens {SCALE_MAX}, keep_recent_tokens {SCALE_KEEP}), serial, loss metrics on, one child process each"
    )
    rows = []
    for scale in SCALES:
        output = subprocess.run(
            [sys.executable, __file__, "--child", str(scale)], capture_output=True, text=True, check=True
        )
        rows.append(json.loads(output.stdout.strip().splitlines()[-1]))
    first = rows[0]
    first_grown = first["cold"]["peak_mb"] - first["baseline_mb"]
    for row in rows:
        cold, warm = row["cold"], row["warm"]
        grown = cold["peak_mb"] - row["baseline_mb"]
        print(
            f"  {row['scale']}×: {row['messages']} messages, {row['tokens']} tokens, {cold['replays']} replays "
            f"({cold['steps_run']} steps run), "
            f"{cold['compactions']} compactions, {cold['summary_calls']} summary calls (cold)"
            + (f", {cold['errors']} errors" if cold["errors"] else "")
        )
        for name, run in (("cold", cold), ("warm", warm)):
            runs_seen = (
                f" (best of {', '.join(f'{t:.1f}' for t in run['all_seconds'])} s)"
                if len(run["all_seconds"]) > 1
                else ""
            )
            print(
                f"     {name}: {run['seconds']:.1f} s ({run['seconds'] / first[name]['seconds']:.2f}x), "
                f"{run['cpu']:.1f} s CPU ({run['cpu'] / first[name]['cpu']:.2f}x){runs_seen}"
            )
        print(
            f"     peak {cold['peak_mb']:.0f} MB, +{grown:.0f} MB over its baseline ({grown / max(first_grown, 1e-9):.2f}x)"
        )
    for row in rows[1:]:
        for name in ("cold", "warm"):
            per_replay = (row[name]["cpu"] / row[name]["replays"]) / (first[name]["cpu"] / first[name]["replays"])
            per_step = (row[name]["cpu"] / row[name]["steps_run"]) / (first[name]["cpu"] / first[name]["steps_run"])
            print(
                f"time growth {row['scale']}x length ({name}): {row[name]['seconds'] / first[name]['seconds']:.2f}x wall, "
                f"{row[name]['cpu'] / first[name]['cpu']:.2f}x CPU, {per_replay:.2f}x CPU per distinct replay, "
                f"{per_step:.2f}x CPU per step run, steps run {row[name]['steps_run'] / first[name]['steps_run']:.2f}x"
            )
        print(
            f"memory growth {row['scale']}x length: "
            f"{(row['cold']['peak_mb'] - row['baseline_mb']) / max(first_grown, 1e-9):.2f}x"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
