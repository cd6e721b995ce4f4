"""How one replay's time grows with the context it carries, and whose code grows.

A replay whose contexts are bounded by ``max_tokens`` costs the same per step however long the
conversation is. A report's default grid scales ``max_tokens`` with the conversation (up to
its whole size), so on a long session its replays carry contexts of hundreds of thousands of
tokens. This benchmark replays ``bench/long_session.py``'s session at 62, 125 and 250 turns
(1×, 2×, 4×) twice each, in one process with a warm summary cache:

- **bounded**: ``max_tokens`` 100k / ``keep_recent_tokens`` 20k (the contexts stay under 100k);
- **unbounded**: ``max_tokens`` above the session (no compaction: every step carries all of it).

For each it prints wall and CPU time, the ratio to 1×, and, from a cProfile run of the same
replay, the share of the time spent inside zett-agent's own modules, zett_lab's, and the rest
(asyncio, copy, the standard library), with the zett-agent functions that take the most.

Run: .venv/bin/python bench/runtime_growth.py
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCALES = (62, 125, 250)
BOUNDED = (100_000, 20_000)
UNBOUNDED = (10_000_000, 20_000)


def owner(filename: str) -> str:
    """Whose code a profiled function is: zett-agent, zett_lab, or the rest."""
    if f"{os.sep}zett_agent{os.sep}" in filename:
        return "zett-agent"
    if f"{os.sep}zett_lab{os.sep}" in filename:
        return "zett_lab"
    return "other"


def profile_shares(run) -> tuple[dict[str, float], list[tuple[str, float]]]:
    """Own-time share per owner, and zett-agent's three most expensive functions (seconds)."""
    profiler = cProfile.Profile()
    profiler.runcall(run)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    by_owner: Counter[str] = Counter()
    agent: Counter[str] = Counter()
    for (filename, line, name), (_, _, own, _, _) in stats.items():
        by_owner[owner(filename)] += own
        if owner(filename) == "zett-agent":
            agent[f"{Path(filename).name}:{line}({name})"] += own
    total = sum(by_owner.values()) or 1.0
    return {key: value / total for key, value in by_owner.items()}, agent.most_common(3)


def main() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    os.environ.setdefault("ZETT_LAB_CACHE", str(Path(tempfile.mkdtemp(prefix="zett-lab-growth-")) / "c.sqlite"))
    from long_session import long_conversation

    import zett_lab

    print(f"machine: {os.cpu_count()} cores, load average at start {os.getloadavg()[0]:.1f}")
    for label, (max_tokens, keep) in (("bounded", BOUNDED), ("unbounded", UNBOUNDED)):
        base_cpu = None
        for turns in SCALES:
            conversation = long_conversation(turns)

            def run(conversation=conversation, max_tokens=max_tokens, keep=keep):
                return zett_lab.replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep)

            run()  # fills the summary cache and the token memo
            started, cpu = time.perf_counter(), time.process_time()
            trace = run()
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            base_cpu = base_cpu or cpu
            shares, top = profile_shares(run)
            print(
                f"{label} {max_tokens // 1000}k/{keep // 1000}k, {turns} turns ({len(conversation.messages)} messages, "
                f"{len(trace.steps)} steps, mean context {trace.steps['estimate'].mean():,.0f} tokens): "
                f"{wall:.2f} s wall, {cpu:.2f} s CPU ({cpu / base_cpu:.2f}x), "
                f"{1000 * cpu / len(trace.steps):.2f} ms CPU per step"
            )
            print(
                "   own time: "
                + ", ".join(f"{key} {100 * value:.0f}%" for key, value in sorted(shares.items()))
                + "; zett-agent's largest: "
                + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in top)
            )
    print(f"load average at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
