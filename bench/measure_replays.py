"""Measuring a report grid's replays alone (what a sweep's worker runs per replay), this tree against another revision.

The long session of ``bench/long_session.py`` is replayed once on the report's default grid with its four
summarizers (a summary cache in the traces' folder) and the 24 traces are pickled, sharing one message list as
a worker's do. Then children measure them, alternating the revisions (``--repeat`` times each): each builds the
conversation's anchor index in full first (its arrays and needle automaton: another cost, timed apart), then runs
``measure_lost_and_counted`` on every trace as a worker does, timing that alone in CPU seconds (the machine is
shared: wall time is noisy), and hashes every table it made. The revision's ``zett_lab`` is taken from ``git
archive``; the traces are unpickled by each side's code.

Prints each side's median CPU seconds (per summarizer too), the ratio this tree / the revision, and whether the
tables are identical (exit 1 when they are not).

Run: .venv/bin/python bench/measure_replays.py [--turns N] [--baseline REV] [--repeat N] [--traces DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_traces(turns: int, folder: Path) -> Path:
    """The default grid's traces of the long session, pickled in ``folder`` (made once; reused when there)."""
    path = folder / f"traces{turns}.pkl"
    if path.exists():
        return path
    sys.path.insert(0, str(ROOT / "bench"))
    from long_session import long_conversation

    import zett_lab
    from zett_lab.report import DEFAULT_REPORT_SUMMARIZERS, default_grid

    conversation = long_conversation(turns)
    grid = default_grid([conversation], "gpt-5-mini")
    traces = [
        zett_lab.replay(
            conversation,
            max_tokens=max_tokens,
            keep_recent_tokens=keep,
            summarizer=summarizer,
            cache=str(folder / f"summaries{turns}.sqlite"),
        )
        for summarizer in DEFAULT_REPORT_SUMMARIZERS
        for max_tokens in grid["max_tokens"]
        for keep in grid["keep_recent_tokens"]
    ]
    with open(path, "wb") as out:
        pickle.dump(traces, out, protocol=5)
    return path


def child_measure(path: str) -> None:
    """Measure every pickled trace as a worker does; print the CPU seconds and the tables' digest as JSON."""
    import zett_lab
    from zett_lab.measure.losses import conversation_index, measure_lost_and_counted

    with open(path, "rb") as source:
        traces = pickle.load(source)
    cpu = time.process_time()
    index = conversation_index(traces[0].conversation)
    _ = index.needles  # its arrays and needle automaton too
    index_cpu = time.process_time() - cpu
    digest = hashlib.sha256()
    by_summarizer: dict[str, float] = {}
    total = 0.0
    for trace in traces:
        cpu = time.process_time()
        losses, counts = measure_lost_and_counted(trace)
        spent = time.process_time() - cpu
        total += spent
        name = str(trace.settings.summarizer).split("(")[0]
        by_summarizer[name] = by_summarizer.get(name, 0.0) + spent
        for table in (losses.compactions, losses.anchors, losses.conversation, losses.probes, losses.decay):
            digest.update(table.to_csv().encode())
        digest.update(losses.updates.to_csv().encode())
        digest.update(counts.to_csv().encode())
    print(
        json.dumps(
            {
                "cpu": total,
                "index_cpu": index_cpu,
                "by": by_summarizer,
                "digest": digest.hexdigest(),
                "package": zett_lab.__file__,
            }
        )
    )


def _run(pythonpath: Path, traces: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    output = subprocess.run(
        [sys.executable, __file__, "--child", str(traces)], capture_output=True, text=True, env=env, cwd=pythonpath
    )
    if output.returncode != 0:
        raise SystemExit(f"measuring with {pythonpath}/zett_lab failed:\n{output.stderr[-3000:]}")
    result = json.loads(output.stdout.strip().splitlines()[-1])
    if not result["package"].startswith(str(pythonpath)):
        raise SystemExit(f"measured {result['package']}, not {pythonpath}/zett_lab")
    return result


def _baseline_tree(revision: str, into: Path) -> Path:
    """``zett_lab`` as of ``revision``, extracted into ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "zett_lab"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision} failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument("--baseline", default="HEAD", help="the git revision measured against (default HEAD)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--traces", type=Path, help="folder of the pickled traces (default: a temporary one)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_measure(args.child)
        return
    folder = args.traces or Path(tempfile.mkdtemp(prefix="zett-lab-measure-replays-"))
    folder.mkdir(parents=True, exist_ok=True)
    traces = make_traces(args.turns, folder)
    with tempfile.TemporaryDirectory(prefix="zett-lab-baseline-") as tree:
        baseline = _baseline_tree(args.baseline, Path(tree))
        runs: dict[str, list[dict]] = {"this tree": [], args.baseline: []}
        for _ in range(args.repeat):
            runs[args.baseline].append(_run(baseline, traces))
            runs["this tree"].append(_run(ROOT, traces))
    medians = {}
    print(f"{args.turns} turns, {traces.name}: measuring the 24 traces (CPU seconds, median of {args.repeat})")
    for side, results in runs.items():
        medians[side] = statistics.median(r["cpu"] for r in results)
        by = {name: statistics.median(r["by"][name] for r in results) for name in results[0]["by"]}
        parts = ", ".join(f"{name} {seconds:.1f}" for name, seconds in by.items())
        index = statistics.median(r["index_cpu"] for r in results)
        print(f"  {side}: {medians[side]:.2f} s ({parts}); the index apart {index:.1f} s")
    print(f"ratio this tree / {args.baseline}: {medians['this tree'] / medians[args.baseline]:.2f}")
    digests = {r["digest"] for results in runs.values() for r in results}
    print("tables identical" if len(digests) == 1 else f"TABLES DIFFER: {len(digests)} digests")
    if len(digests) != 1:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
