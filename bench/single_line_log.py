"""Peak memory of reading and importing a large log written on one line, as a multiple of the file's size.

Issue 30 asks for at most 4× the file. The file is the largest fixture's dialogue repeated (its system
prompt once) until it holds ``--mb`` MB of neutral JSON on a single line, written twice: all ASCII, and
with one emoji in one message (a Python string holding one character beyond U+FFFF stores every
character in 4 bytes, so the whole file's text then takes 4× its size while it is parsed). Each case runs
in a fresh child process: ``zett_lab.load_all`` alone and ``zett-lab import -o out.json``; the figure is
the child's peak RSS (VmHWM, Linux) above a child that only imported zett_lab, over the file's size.

Run: .venv/bin/python bench/single_line_log.py [--mb 40]
Prints the peaks and ratios measured in this run (the machine may be shared: ratios, not seconds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: What each child runs, then prints its own peak RSS (KiB) as its last line on stderr. The peak is the
#: kernel's VmHWM, not ``ru_maxrss``: Linux carries ``ru_maxrss`` over from the parent at the fork and
#: through exec, so a child started while this process held the log it had just written measured
#: this process's size (the figures before 2026-12-02 10:50 were that floor, not the child's peak).
LOAD = "import zett_lab; zett_lab.load_all(sys.argv[1])"
IMPORT = "from zett_lab.show.cli import main; main(['import', *sys.argv[1:]])"
BASELINE = "import zett_lab, zett_lab.show.cli"
MEASURED = (
    "import re, sys\n{code}\n"
    "print(re.search(r'VmHWM:\\s*(\\d+)', open('/proc/self/status').read()).group(1), file=sys.stderr)"
)


def write_log(path: Path, megabytes: int, *, emoji: bool) -> int:
    """One conversation of about ``megabytes`` MB of neutral JSON on one line; its size in bytes."""
    import zett_lab
    from zett_lab.load.neutral_writer import conversation_to_neutral

    largest = max(zett_lab.load_all(ROOT / "fixtures" / "sessions.sqlite"), key=lambda c: len(c.messages))
    document = conversation_to_neutral(largest)
    dialogue = [m for m in document["messages"] if m["role"] != "system"]
    messages, size = list(document["messages"]), 0
    while size < megabytes * 1_000_000:
        messages.extend(dialogue)
        size += sum(len(json.dumps(m)) for m in dialogue)
    if emoji:
        messages[1] = {**messages[1], "content": f"\U0001f600 {messages[1].get('content') or ''}"}
    document["messages"] = messages
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return path.stat().st_size


def child_peak(code: str, *argv: str) -> int:
    """Peak RSS in bytes of a fresh child process running ``code`` with ``argv``."""
    ran = subprocess.run(
        [sys.executable, "-c", MEASURED.format(code=code), *argv],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    return int(ran.stderr.strip().splitlines()[-1]) * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=40, help="size of the log in MB (default 40)")
    args = parser.parse_args()
    baseline = child_peak(BASELINE)
    print(f"baseline (imports only): {baseline / 1e6:,.0f} MB")
    with tempfile.TemporaryDirectory(prefix="zett-lab-bench-") as folder:
        for emoji in (False, True):
            log = Path(folder) / f"one-line-{'emoji' if emoji else 'ascii'}.json"
            size = write_log(log, args.mb, emoji=emoji)
            out = Path(folder) / "out.json"
            for label, code, argv in (
                ("load_all", LOAD, [str(log)]),
                ("import", IMPORT, [str(log), "-o", str(out), "--force", "--no-progress"]),
            ):
                peak = max(child_peak(code, *argv), baseline)
                print(
                    f"{'one emoji' if emoji else 'all ASCII'}, {size / 1e6:,.1f} MB file, {label}: peak "
                    f"{peak / 1e6:,.0f} MB, {(peak - baseline) / size:.1f}x the file above the baseline"
                )


if __name__ == "__main__":
    main()
