"""The issue's case: a replay whose every summary call goes to a closed port, with and without the breaker.

``billing-rounding`` at max_tokens=8000 / keep_recent_tokens=2000 asks for 24 summaries. Without the
per-endpoint breaker (its threshold set out of reach, as before it existed) every call is retried
with the provider's default backoff; with it, the calls after the first fail at once. Both runs must
record the same 24 failures; prints both times and the ratio measured in this run.
Run: .venv/bin/python bench/unreachable_endpoint.py
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import zett_lab
from zett_lab.replay import replay
from zett_lab.summarizers import providers, reset_endpoint_breakers

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def timed(conversation: zett_lab.Conversation, spec: str) -> tuple[float, zett_lab.Trace]:
    reset_endpoint_breakers()
    started = time.perf_counter()
    trace = replay(conversation, max_tokens=8000, keep_recent_tokens=2000, summarizer=spec, cache=False, warn=False)
    return time.perf_counter() - started, trace


def main() -> None:
    conversation = zett_lab.load(ROOT / "fixtures" / "sessions.sqlite", session="billing-rounding")
    spec = f"openai-compatible:m@http://127.0.0.1:{closed_port()}/v1"
    replay(
        conversation, max_tokens=8000, keep_recent_tokens=2000, summarizer="mask", cache=False
    )  # warm imports and the counter
    threshold = providers.BREAKER_THRESHOLD
    providers.BREAKER_THRESHOLD = 10**9  # never opens: every call is retried, as before the breaker
    try:
        without_s, without = timed(conversation, spec)
    finally:
        providers.BREAKER_THRESHOLD = threshold
    with_s, with_breaker = timed(conversation, spec)
    failures = [t.summary()["failed"] for t in (without, with_breaker)]
    print(f"conversation: {conversation.id}; summarizer {spec}")
    print(f"failed summary calls (without / with breaker): {failures[0]} / {failures[1]}")
    print(f"without breaker: {without_s:.2f} s")
    print(f"with breaker:    {with_s:.2f} s")
    print(f"speedup: {without_s / with_s:.1f}x")


if __name__ == "__main__":
    main()
