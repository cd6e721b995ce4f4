"""How fast the agent-log importers are, relative to just parsing the JSON.

For every shared real log (``../shared/agent-logs`` or ``--logs``) this imports the
file through the reader :func:`zett_lab.load.detect` picks and reports MB/s and
the ratio to a baseline measured in the same run on the same file: ``json.loads``
of every line (JSONL), of the whole file (JSON), or reading and splitting the lines
(aider markdown). Then it synthesizes logs of about 3 MB (and 1.5 / 6 MB, to show the
import stays linear) from real records in a temporary directory (ids renamed so every
repetition is a distinct turn) and times those the same way.

Run::

    .venv/bin/python bench/import_speed.py [--logs DIR] [--repeat 5] [--target-mb 3]

Timings are best-of-``--repeat`` wall times; the ratios (import / baseline) are
what to compare across machines. Nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zett_lab.load import detect, readers  # noqa: E402

DEFAULT_LOGS = ROOT.parent / "shared" / "agent-logs"


def best(function: Callable[[], object], repeat: int) -> float:
    """Best-of-``repeat`` wall time of one call."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def baseline(path: Path) -> Callable[[], object]:
    """The cheapest honest parse of the file: json.loads per line, of the whole file, or splitlines."""
    raw = path.read_bytes()
    stripped = raw.lstrip()
    if stripped[:1] in (b"{", b"["):
        try:
            json.loads(raw)
            return lambda: json.loads(path.read_bytes())
        except json.JSONDecodeError:
            return lambda: [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return lambda: path.read_text(encoding="utf-8").splitlines()


def pick_reader(path: Path):
    """The agent-log reader that recognises the file (asked before the registry's order), else detect()."""
    head = path.open("rb").read(64 * 1024) if path.is_file() else b""
    for reader in readers():
        if reader.read.__module__.startswith("zett_lab.load.agents") and reader.sniff(path, head):
            return reader
    return detect(path)


def measure(path: Path, repeat: int) -> dict[str, object]:
    reader = pick_reader(path)

    def run() -> object:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return reader.read(path)

    conversations = run()
    size_mb = path.stat().st_size / 1e6
    t_import = best(run, repeat)
    t_base = best(baseline(path), repeat)
    return {
        "file": path.name,
        "format": reader.name,
        "mb": size_mb,
        "conversations": len(conversations),
        "messages": sum(len(c.messages) for c in conversations),
        "import_s": t_import,
        "import_mb_s": size_mb / t_import,
        "baseline_mb_s": size_mb / t_base,
        "ratio": t_import / t_base,
    }


# --- synthesized logs --------------------------------------------------------------------------


def _suffix_ids(value: object, suffix: str, keys: frozenset[str]) -> object:
    """Append ``suffix`` to every string under one of ``keys`` (ids), recursively."""
    if isinstance(value, dict):
        return {
            k: (v + suffix if k in keys and isinstance(v, str) and v else _suffix_ids(v, suffix, keys))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_suffix_ids(v, suffix, keys) for v in value]
    return value


_CLAUDE_IDS = frozenset(
    {
        "uuid",
        "parentUuid",
        "logicalParentUuid",
        "id",
        "tool_use_id",
        "toolUseID",
        "parentToolUseID",
        "messageId",
        "sourceToolAssistantUUID",
    }
)
_CODEX_IDS = frozenset({"call_id"})
_OPENHANDS_IDS = frozenset({"tool_call_id", "id"})


def synthesize_jsonl(source: Path, target: Path, target_mb: float, ids: frozenset[str], keep_first: int) -> Path:
    """Repeat the records of a real JSONL log (header kept once) until ``target_mb``, renaming ids per copy."""
    lines = source.read_bytes().splitlines()
    header, body = lines[:keep_first], [json.loads(line) for line in lines[keep_first:] if line.strip()]
    out = [*header]
    size = sum(len(line) + 1 for line in out)
    copy_no = 0
    while size < target_mb * 1e6:
        copy_no += 1
        for record in body:
            line = json.dumps(_suffix_ids(record, f"-r{copy_no}", ids), ensure_ascii=False).encode()
            out.append(line)
            size += len(line) + 1
    target.write_bytes(b"\n".join(out) + b"\n")
    return target


def synthesize_openhands(source: Path, target: Path, target_mb: float) -> Path:
    """Repeat a real OpenHands trajectory's events (system prompt once) with fresh event and call ids."""
    data = json.loads(source.read_bytes())
    events = data["trajectory"] if isinstance(data, dict) else data
    head, body = events[:2], [e for e in events[2:] if e.get("action") != "system"]
    out = list(head)
    size = len(json.dumps(out))
    copy_no = 0
    next_id = max(e.get("id", 0) for e in events) + 1
    while size < target_mb * 1e6:
        copy_no += 1
        offset = next_id * copy_no
        for event in body:
            event = copy.deepcopy(event)
            event["id"] = event.get("id", 0) + offset
            if isinstance(event.get("cause"), int):
                event["cause"] += offset
            metadata = event.get("tool_call_metadata")
            if isinstance(metadata, dict):
                event["tool_call_metadata"] = _suffix_ids(metadata, f"-r{copy_no}", _OPENHANDS_IDS)
            args = event.get("args")
            if event.get("action") == "condensation" and isinstance(args, dict):
                for key in ("forgotten_events_start_id", "forgotten_events_end_id"):
                    if isinstance(args.get(key), int):
                        args[key] += offset
            out.append(event)
            size += len(json.dumps(event))
    target.write_text(json.dumps({"trajectory": out}))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--logs", type=Path, default=DEFAULT_LOGS, help="folder of real agent logs (default: %(default)s)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="best-of repetitions (default: %(default)s)")
    parser.add_argument(
        "--target-mb", type=float, default=3.0, help="size of the synthesized logs (default: %(default)s)"
    )
    args = parser.parse_args()
    if not args.logs.is_dir():
        sys.exit(f"no agent logs at {args.logs}")

    print(
        f"{'file':44} {'format':30} {'MB':>6} {'conv':>4} {'msgs':>5} {'import MB/s':>11} {'json MB/s':>9} {'ratio':>6}"
    )
    files = sorted(p for p in args.logs.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    for path in files:
        row = measure(path, args.repeat)
        print(
            f"{row['file'][:44]:44} {row['format']:30} {row['mb']:6.2f} {row['conversations']:4d} {row['messages']:5d} "
            f"{row['import_mb_s']:11.1f} {row['baseline_mb_s']:9.1f} {row['ratio']:6.2f}"
        )

    print(f"\nsynthesized logs (~{args.target_mb:g} MB from real records; ratio = import time / baseline time):")
    print(f"{'log':34} {'MB':>6} {'msgs':>6} {'import s':>9} {'json s':>8} {'ratio':>6} {'s per MB':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        sources = {
            "claude-code": (args.logs / "claude-code" / "subagent.jsonl", _CLAUDE_IDS, 0),
            "codex": (next((args.logs / "codex").glob("*.jsonl"), None), _CODEX_IDS, 1),
        }
        for name, (source, ids, keep_first) in sources.items():
            if source is None or not source.is_file():
                continue
            for factor in (0.5, 1.0, 2.0):
                target = synthesize_jsonl(
                    source, tmp_dir / f"{name}-{factor}.jsonl", args.target_mb * factor, ids, keep_first
                )
                _report_synth(f"{name} x{factor:g}", target, args.repeat)
        openhands = next((args.logs / "openhands").glob("*.json"), None)
        if openhands is not None:
            for factor in (0.5, 1.0, 2.0):
                target = synthesize_openhands(openhands, tmp_dir / f"openhands-{factor}.json", args.target_mb * factor)
                _report_synth(f"openhands x{factor:g}", target, args.repeat)


def _report_synth(label: str, path: Path, repeat: int) -> None:
    row = measure(path, repeat)
    t_base = row["import_s"] / row["ratio"]
    print(
        f"{label:34} {row['mb']:6.2f} {row['messages']:6d} {row['import_s']:9.3f} {t_base:8.3f} {row['ratio']:6.2f} "
        f"{row['import_s'] / row['mb']:9.3f}"
    )


if __name__ == "__main__":
    main()
