"""`zett-lab report` on a folder of many sessions, against replaying that folder once.

What a user with a year of agent logs runs: ``zett-lab report ~/logs/`` over a hundred sessions
and more. The sessions are ``bench/long_session.py``'s, each of 3 to 30 user turns (seeded),
written as neutral JSON into a temporary folder. Every side runs in a fresh child process; all
share one summary cache:

- **replay**: load the folder, replay every session once at one setting (the smallest
  ``max_tokens`` and ``keep_recent_tokens`` of the report's default grid) to fill the summary
  cache, then again, timed: what one look at the corpus costs;
- **report**: ``zett-lab report FOLDER -o report.html --no-progress`` with the default grid and
  summarizers, cold (every summary of the grid computed) and warm (all cached).

Prints both sides and ``time ratio`` (cold report wall time / the warm corpus replay's wall
time), ``memory ratio`` (the cold report's main-process peak / the replay's peak), the same
warm, CPU-time ratios, the page's size and how many timelines it draws. Then, as
``report_scale.py`` does: every replay of the report's grid alone (each session × summarizer ×
setting in full, one after another, the report's summaries cached) and each report's wall time
over their CPU time on the machine's cores (what the report costs beyond its replays), and the
wall time on 4, 16 and 64 workers simulated from the units' measured times.

Run: .venv/bin/python bench/corpus_report.py [--sessions N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from report_scale import ROOT, _child, _reset_peak, _status, print_over_replays, print_simulated, work_folder

#: User turns of the generated sessions, drawn per session.
TURNS = (3, 4, 5, 6, 8, 10, 12, 15, 20, 30)


def child_corpus_replay(folder: str) -> None:
    import zett_lab
    from zett_lab.report import default_grid

    conversations = zett_lab.load_all(folder)
    grid = default_grid(conversations, "gpt-5-mini")
    setting = {"max_tokens": grid["max_tokens"][0], "keep_recent_tokens": grid["keep_recent_tokens"][0]}
    for conversation in conversations:
        zett_lab.replay(conversation, **setting)
    _reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    for conversation in conversations:
        zett_lab.replay(conversation, **setting)
    result = {
        "seconds": time.perf_counter() - started,
        "cpu": time.process_time() - cpu,
        "peak_mb": _status("VmHWM"),
        "setting": setting,
        "messages": sum(len(c.messages) for c in conversations),
    }
    print(json.dumps(result))


def child_corpus_replays(folder: str) -> None:
    """Every replay of the report's grid (each session × summarizer × setting), in full, one after another (the
    cache holds the report's summaries): what the report cannot do without."""
    import zett_lab
    from zett_lab.report import DEFAULT_REPORT_SUMMARIZERS, default_grid

    conversations = zett_lab.load_all(folder)
    grid = default_grid(conversations, "gpt-5-mini")
    cpu = time.process_time()
    replays = 0
    for conversation in conversations:
        for summarizer in DEFAULT_REPORT_SUMMARIZERS:
            for max_tokens in grid["max_tokens"]:
                for keep in grid["keep_recent_tokens"]:
                    zett_lab.replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer=summarizer)
                    replays += 1
    print(json.dumps({"replays": replays, "cpu": time.process_time() - cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=150)
    args = parser.parse_args()
    from long_session import long_conversation

    work = work_folder("zett-lab-corpus-report-")
    folder = work / "sessions"
    folder.mkdir()
    rng = random.Random(7)
    for n in range(args.sessions):
        long_conversation(rng.choice(TURNS), seed=1000 + n, conversation_id=f"session-{n:04d}").save(
            folder / f"session-{n:04d}.json"
        )
    env = dict(
        os.environ,
        ZETT_LAB_CACHE=str(work / "summaries.sqlite"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH")])),
    )
    replay = _child("--child-corpus-replay", str(folder), env=env, script=__file__)
    cold = _child("--child-report", str(folder), str(work / "cold.html"), env=env)  # report_scale's child
    warm = _child("--child-report", str(folder), str(work / "warm.html"), env=env)
    alone = _child("--child-corpus-replays", str(folder), env=env, script=__file__)
    cores = os.cpu_count() or 1
    setting = replay["setting"]
    print(f"corpus: {args.sessions} sessions, {replay['messages']:,} messages")
    print(
        f"every session replayed once at {setting['max_tokens']:,}/{setting['keep_recent_tokens']:,}, warm: "
        f"{replay['seconds']:.1f} s ({replay['cpu']:.1f} s CPU), peak {replay['peak_mb']:.0f} MB"
    )
    for name, report in (("cold", cold), ("warm", warm)):
        page = (work / f"{name}.html").read_text(encoding="utf-8")
        timelines = page.split('<section id="timelines">')[1].split("</section>")[0].count("<figure>")
        print(
            f"zett-lab report, {name} summary cache: {report['seconds']:.1f} s ({report['cpu']:.1f} s CPU, all processes), "
            f"main process peak {report['peak_mb']:.0f} MB, HTML {report['html_bytes']:,} bytes, {timelines} timelines"
        )
    print(f"time ratio: {cold['seconds'] / replay['seconds']:.1f}")
    print(f"memory ratio: {cold['peak_mb'] / replay['peak_mb']:.2f}")
    print(f"time ratio (warm summary cache): {warm['seconds'] / replay['seconds']:.1f}")
    print(f"cpu ratio: {cold['cpu'] / replay['cpu']:.1f} cold, {warm['cpu'] / replay['cpu']:.1f} warm")
    print(f"the grid's {alone['replays']:,} replays alone, each in full, one after another: {alone['cpu']:.1f} s CPU")
    print_over_replays(cold, warm, alone["cpu"], cores)
    print_simulated(cold, warm, cores)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--child-corpus-replay":
        child_corpus_replay(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "--child-corpus-replays":
        child_corpus_replays(sys.argv[2])
    else:
        main()
