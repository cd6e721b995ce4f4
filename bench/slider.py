"""One slider move on the largest fixture: re-replay under a new setting with a warm cache.

A notebook slider over ``max_tokens`` re-runs the replay for every value it stops at. This
times that, on the largest bundled fixture, in one process (as a notebook kernel would):

- warm-up: each of the 20 settings is replayed once (fills the summary cache and the
  counter's memo: what earlier slider positions and sweeps leave behind);
- move: ``zett_lab.replay`` at one of those settings again (the real engine runs; summaries
  come from the persistent cache, token counts from the memo) — median over the 20;
- move through ``sweep`` (one cell, with cost and loss metrics, replay forced by forgetting
  proven replays first) — median over the 20;
- move to a setting a previous replay already proves (a slider stop inside a known region:
  no replay at all) — median over the 20;
- floor: one plain tokenization pass over the conversation (zett-agent's default counter,
  nothing memoized) — median of 5.

Run: .venv/bin/python bench/slider.py [--summarizer SPEC]
Prints the medians and their ratios to the floor, measured in this run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import zett_lab
from zett_lab import study as zsweep
from zett_lab.replay import replay
from zett_lab.replay.engine import engine_count_tokens
from zett_lab.summarizers import DEFAULT_SUMMARIZER, SummaryCache
from zett_lab.tokens import count_tokens

ROOT = Path(__file__).resolve().parent.parent
KEEP = 8_000
MOVES = [20_000 + 5_000 * i for i in range(20)]  # 20k .. 115k: every stop changes the compaction schedule


def median_time(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--summarizer", default=DEFAULT_SUMMARIZER)
    args = parser.parse_args()
    conversations = zett_lab.load_all(ROOT / "fixtures")
    largest = max(conversations, key=lambda c: count_tokens(c.messages))
    cache = SummaryCache(Path(tempfile.mkdtemp(prefix="zett-lab-slider-")) / "summaries.sqlite")
    print(
        f"conversation: {largest.id} ({len(largest.messages)} messages, {count_tokens(largest.messages)} tokens); "
        f"summarizer {args.summarizer}; keep_recent_tokens={KEEP}; max_tokens stops {MOVES[0]}..{MOVES[-1]}"
    )

    traces = {
        m: replay(largest, max_tokens=m, keep_recent_tokens=KEEP, summarizer=args.summarizer, cache=cache)
        for m in MOVES
    }
    applied = [int(t.compactions["applied"].sum()) if len(t.compactions) else 0 for t in traces.values()]
    print(f"warm-up: {len(MOVES)} replays, {min(applied)}..{max(applied)} compactions applied per setting")

    moves = []
    for m in MOVES:
        started = time.perf_counter()
        again = replay(largest, max_tokens=m, keep_recent_tokens=KEEP, summarizer=args.summarizer, cache=cache)
        moves.append(time.perf_counter() - started)
        assert again.steps.equals(traces[m].steps)
    move = statistics.median(moves)

    through_sweep = []
    for m in MOVES:
        zsweep.clear_worker_state()
        started = time.perf_counter()
        zsweep.sweep(
            largest,
            max_tokens=[m],
            keep_recent_tokens=[KEEP],
            summarizers=[args.summarizer],
            executor="serial",
            cache=cache,
            progress=False,
        )
        through_sweep.append(time.perf_counter() - started)
    sweep_move = statistics.median(through_sweep)

    zsweep.sweep(
        largest,
        max_tokens=MOVES,
        keep_recent_tokens=[KEEP],
        summarizers=[args.summarizer],
        executor="serial",
        cache=cache,
        progress=False,
    )  # every stop now proven
    known = []
    for m in MOVES:
        inside = m + 1  # one token further: almost always inside the proven region of m
        started = time.perf_counter()
        result = zsweep.sweep(
            largest,
            max_tokens=[inside],
            keep_recent_tokens=[KEEP],
            summarizers=[args.summarizer],
            executor="serial",
            cache=cache,
            progress=False,
        )
        known.append((time.perf_counter() - started, result.config["replays"]))
    known_move = statistics.median(t for t, _ in known)
    answered = sum(1 for _, replays in known if replays == 0)

    floor = median_time(lambda: engine_count_tokens(largest.messages), 5)
    print(f"floor, one tokenization pass (zett-agent's counter, no memo): {floor * 1000:.1f} ms")
    print(
        f"slider move, zett_lab.replay with warm cache: median {move * 1000:.0f} ms "
        f"(min {min(moves) * 1000:.0f}, max {max(moves) * 1000:.0f}) = {move / floor:.1f}x the floor"
    )
    print(
        f"slider move through sweep (one cell, cost + loss metrics): median {sweep_move * 1000:.0f} ms "
        f"= {sweep_move / floor:.1f}x the floor"
    )
    print(
        f"slider move inside a proven region (no replay; {answered}/{len(known)} stops): median "
        f"{known_move * 1000:.1f} ms = {known_move / floor:.2f}x the floor"
    )
    print(f"cache: {cache.stats() if hasattr(cache, 'stats') else cache}")
    print(f"slider median: {move * 1000:.0f} ms")
    print(f"ratio to tokenization pass: {move / floor:.1f}")


if __name__ == "__main__":
    main()
