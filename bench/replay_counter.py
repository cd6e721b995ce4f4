"""Replay the largest fixture with zett-agent's default counter and with zett_lab's memoizing counter.

Checks both traces are identical and prints the speedup (ratio measured in this run).
Run: .venv/bin/python bench/replay_counter.py [max_tokens keep_recent_tokens]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import zett_lab
from zett_lab.replay import replay
from zett_lab.replay.engine import engine_count_tokens
from zett_lab.tokens import MemoizingCounter

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    max_tokens, keep = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) == 3 else (40_000, 12_000)
    conversations = zett_lab.load_all(ROOT / "fixtures")
    largest = max(conversations, key=lambda c: zett_lab.count_tokens(c.messages))
    options = dict(max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="truncate:0.2", cache=False)
    replay(largest, **options, count_tokens=MemoizingCounter())  # warm imports and the summarizer
    started = time.perf_counter()
    naive = replay(largest, **options, count_tokens=engine_count_tokens)
    naive_s = time.perf_counter() - started
    started = time.perf_counter()
    fast = replay(largest, **options, count_tokens=MemoizingCounter())
    fast_s = time.perf_counter() - started
    identical = fast.steps.equals(naive.steps) and fast.compactions.drop(columns="latency_s").equals(
        naive.compactions.drop(columns="latency_s")
    )
    print(
        f"conversation: {largest.id} ({len(largest.messages)} messages, {zett_lab.count_tokens(largest.messages)} "
        "tokens)"
    )
    print(
        f"setting: max_tokens={max_tokens} keep_recent_tokens={keep}; steps={len(fast.steps)} "
        f"compactions={int(fast.compactions['applied'].sum())}"
    )
    print(f"default counter: {naive_s:.2f} s")
    print(f"memoizing counter (fresh memo): {fast_s:.2f} s")
    print(f"identical: {str(identical).lower()}")
    print(f"speedup: {naive_s / fast_s:.1f}x")


if __name__ == "__main__":
    main()
