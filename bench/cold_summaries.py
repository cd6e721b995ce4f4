"""The long session's cold offline summaries: CPU of every summary its default report grid asks each summarizer for.

Replays the default grid (as ``zett-lab report`` sizes it) with each offline summarizer and no summary cache,
keeping every distinct span the engine asks to summarize; then, in a fresh child process per summarizer (its
memos empty, as in a report's worker), summarizes those spans ``--passes`` times in order and prints the CPU
seconds of each pass and a digest of the summaries: run it from two checkouts (``PYTHONPATH``), alternating,
and the digests say whether the summaries are identical. ``python bench/cold_summaries.py [--turns N]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUMMARIZERS = ("anchors", "extractive", "truncate", "mask")


def record_spans(turns: int, path: Path) -> None:
    """Replay the default grid with every summarizer (no cache) and pickle each distinct span with its summarizer."""
    sys.path.insert(0, str(ROOT / "bench"))
    from long_session import long_conversation

    import zett_lab
    from zett_lab.report.sweep import DEFAULT_PRIMARY_MODEL, default_grid
    from zett_lab.summarizers.offline.base import OfflineSummarizer

    conversation = long_conversation(turns)
    grid = default_grid([conversation], DEFAULT_PRIMARY_MODEL)
    spans: dict[tuple[str, str], tuple[str, list]] = {}
    summarize = OfflineSummarizer.summarize

    def recording(model: OfflineSummarizer, messages):
        span = list(messages)
        spans.setdefault((model.name, hashlib.sha256(pickle.dumps(span)).hexdigest()), (model.name, span))
        return summarize(model, span)

    OfflineSummarizer.summarize = recording  # type: ignore[method-assign]
    for name in SUMMARIZERS:
        for max_tokens in grid["max_tokens"]:
            for keep in grid["keep_recent_tokens"]:
                zett_lab.replay(
                    conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer=name, cache=False
                )
    OfflineSummarizer.summarize = summarize  # type: ignore[method-assign]
    with open(path, "wb") as handle:
        pickle.dump(list(spans.values()), handle)
    print(f"grid {grid}: {len(spans):,} distinct spans")


def time_summaries(path: Path, name: str, passes: int) -> None:
    """Summarize every span of ``name`` ``passes`` times (the spans' messages counted first, as a replay has)."""
    from zett_lab.summarizers import summarizer
    from zett_lab.tokens import count_tokens, warm_up

    with open(path, "rb") as handle:
        spans = [span for owner, span in pickle.load(handle) if owner == name]
    warm_up()
    for span in spans:
        count_tokens(span)
    model = summarizer(name)
    seconds, digest = [], hashlib.sha256()
    for number in range(passes):
        start = time.process_time()
        texts = [model.summarize(span) for span in spans]
        seconds.append(time.process_time() - start)
        if number == 0:
            for text in texts:
                digest.update(text.encode() + b"\0")
    shown = " / ".join(f"{value:.2f}" for value in seconds)
    print(f"{name:10} {len(spans):4} summaries  CPU {shown} s  digest {digest.hexdigest()[:12]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=250)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--spans", type=Path, help="spans recorded before (kept: pass the same file to each checkout)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        time_summaries(args.spans, args.child, args.passes)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = args.spans or Path(folder) / "spans.pickle"
        if not path.exists():
            record_spans(args.turns, path)
        print(f"load average {os.getloadavg()[0]:.1f}")
        for name in SUMMARIZERS:
            command = [sys.executable, __file__, "--spans", str(path), "--passes", str(args.passes), "--child", name]
            subprocess.run(command, check=True)
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
