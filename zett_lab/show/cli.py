"""``zett-lab``: a thin command line over the library.

Commands::

    zett-lab import PATH... -o OUT.sqlite|OUT.db|OUT.json
    zett-lab replay PATH --max-tokens N --keep-recent-tokens N [--summarizer SPEC] [--session ID] [-o trace.parquet]
    zett-lab sweep PATH... --max-tokens A:B:STEP|LIST --keep-recent-tokens ... --summarizer SPEC... -o sweep.parquet
    zett-lab report PATH_OR_SWEEP... -o report.html [--format html|md|json]
    zett-lab demo DIR
    zett-lab lab [DIR] [--dry-run] [-- JUPYTER_ARGS]

Every command exits 0 on success and non-zero with one line on stderr on failure
(``zett-lab: error: ...``); ``--debug`` shows the Python traceback instead.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, SettingError, ZettLabError

PROG = "zett-lab"

#: Exit codes: 0 success, 1 a user error (bad input, bad setting), 2 bad command-line usage (argparse).
EXIT_ERROR = 1
EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one clear line on stderr (and the usage hint) for a usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32, width=100)


# --- argument types -------------------------------------------------------------------------------------


_INT = re.compile(r"^\s*(\d[\d_]*)(k?)\s*$", re.I)


def parse_tokens(text: str, name: str = "value") -> int:
    """A positive token count: ``20000``, ``20_000`` or ``20k``."""
    match = _INT.match(str(text))
    if not match:
        raise SettingError(f"{name}: {text!r} is not a whole number of tokens (e.g. 20000 or 20k)")
    value = int(match.group(1).replace("_", "")) * (1000 if match.group(2) else 1)
    if value < 1:
        raise SettingError(f"{name}: must be a positive number of tokens, got {text!r}")
    return value


def parse_grid(text: str, name: str) -> list[int]:
    """Token values from ``A:B:STEP`` (inclusive of B) or a comma list ``A,B,C``."""
    text = str(text).strip()
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise SettingError(f"{name}: {text!r} must be A:B:STEP (e.g. 8000:32000:8000) or a list A,B,C")
        start, stop, step = (parse_tokens(p, name) for p in parts)
        if stop < start:
            raise SettingError(f"{name}: in {text!r} the end {stop} is below the start {start}")
        values = list(range(start, stop + 1, step))
        if len(values) > 200:
            raise SettingError(f"{name}: {text!r} gives {len(values)} values; use a larger step (at most 200)")
        return values
    values = [parse_tokens(p, name) for p in text.split(",") if p.strip()]
    if not values:
        raise SettingError(f"{name}: no values in {text!r}")
    return sorted(set(values))


def _grid_type(name: str):
    def convert(text: str) -> list[int]:
        try:
            return parse_grid(text, name)
        except SettingError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{name}: ")) from None

    convert.__name__ = name  # argparse names the type in its messages
    return convert


def _tokens_type(name: str):
    def convert(text: str) -> int:
        try:
            return parse_tokens(text, name)
        except SettingError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{name}: ")) from None

    convert.__name__ = name
    return convert


# --- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        formatter_class=_formatter,
        description="Replay recorded agent conversations through zett-agent's real compaction engine "
        "and measure what each summary loses.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab report fixtures/ -o report.html
              zett-lab replay fixtures/sessions.sqlite --session ci-flaky-kafka --max-tokens 20k --keep-recent-tokens 4k
              zett-lab sweep fixtures/ --max-tokens 8k:32k:8k --keep-recent-tokens 2k,6k --summarizer anchors mask -o sweep.parquet
              zett-lab import ~/.zettcode/sessions/myproject -o sessions.sqlite

            Run 'zett-lab COMMAND --help' for each command's options."""  # noqa: E501 - example commands stay whole so they can be copied
        ),
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", action="store_true", help="show the Python traceback on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    common = _Parser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the Python traceback on errors"
    )

    # import
    p = commands.add_parser(
        "import",
        parents=[common],
        formatter_class=_formatter,
        help="convert recorded sessions to a zett-agent SQLite database or neutral JSON",
        description="Convert recorded sessions (any format zett_lab reads) to a new zett-agent SQLite database "
        "(.sqlite/.db, written through zett-agent's own storage API) or zett_lab's neutral JSON (.json). "
        "An existing output file is never overwritten.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab import ~/.zettcode/sessions/myproject -o sessions.sqlite
              zett-lab import run1.jsonl run2.json -o conversations.json

            formats read: """
        )
        + _formats_line(),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="recorded session files or directories")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="new .sqlite/.db or .json file")

    # replay
    p = commands.add_parser(
        "replay",
        parents=[common],
        formatter_class=_formatter,
        help="replay one conversation and print its steps and compactions",
        description="Replay one recorded conversation through zett-agent's real CompactionExtension and print a "
        "table of model steps (estimate, threshold, context sent) and of the compaction attempts.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab replay fixtures/sessions.sqlite --session ci-flaky-kafka --max-tokens 20k --keep-recent-tokens 4k
              zett-lab replay run.jsonl --max-tokens 30000 --keep-recent-tokens 8000 --summarizer truncate:0.1 -o trace.parquet
              zett-lab replay run.jsonl --max-tokens 30k --keep-recent-tokens 8k --summarizer openai:gpt-5-mini"""  # noqa: E501 - example commands stay whole so they can be copied
        ),
    )
    p.add_argument("path", metavar="PATH", help="recorded session file or directory")
    p.add_argument("--session", metavar="ID", help="session id, when the file holds several")
    p.add_argument(
        "--max-tokens", required=True, type=_tokens_type("--max-tokens"), metavar="N", help="engine threshold"
    )
    p.add_argument(
        "--keep-recent-tokens", required=True, type=_tokens_type("--keep-recent-tokens"), metavar="N",
        help="tokens kept verbatim (a minimum)",
    )
    p.add_argument("--summarizer", metavar="SPEC", help="summary model spec (default: the offline default)")
    p.add_argument(
        "--usage", choices=("none", "recorded", "synthetic"), default="none", help="usage baseline mode (default: none)"
    )
    p.add_argument("--no-cache", action="store_true", help="do not use the persistent summary cache")
    p.add_argument("-o", "--output", metavar="TRACE", help="also save the trace (.parquet or .json)")
    p.add_argument("--all-steps", action="store_true", help="print every step (default: at most 60 rows)")

    # sweep
    p = commands.add_parser(
        "sweep",
        parents=[common],
        formatter_class=_formatter,
        help="replay conversations over a grid of settings and summarizers",
        description="Replay every conversation under every (max_tokens, keep_recent_tokens, summarizer) of a grid "
        "and save the results table (Parquet). Token values are A:B:STEP (inclusive) or a list A,B,C; "
        "'k' means thousands.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab sweep fixtures/ --max-tokens 8k:32k:8k --keep-recent-tokens 2k,6k --summarizer anchors mask -o sweep.parquet
              zett-lab sweep run.jsonl --max-tokens 20000,40000 --keep-recent-tokens 5000 --summarizer extractive:0.1 -o s.parquet
              zett-lab report sweep.parquet -o report.html"""  # noqa: E501 - example commands stay whole so they can be copied
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="recorded session files or directories")
    p.add_argument("--max-tokens", required=True, type=_grid_type("--max-tokens"), metavar="GRID")
    p.add_argument("--keep-recent-tokens", required=True, type=_grid_type("--keep-recent-tokens"), metavar="GRID")
    p.add_argument(
        "--summarizer", nargs="+", metavar="SPEC", help="one or more summary model specs (default: the offline default)"
    )
    p.add_argument("--session", action="append", metavar="ID", help="only this session (repeatable)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="SWEEP",
        help="output folder for the sweep's Parquet tables (e.g. sweep.parquet)",
    )
    p.add_argument(
        "--primary-model", metavar="MODEL", help="also price the primary model's tokens as this model (e.g. gpt-5-mini)"
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    # report
    p = commands.add_parser(
        "report",
        parents=[common],
        formatter_class=_formatter,
        help="write one self-contained HTML (or Markdown/JSON) report",
        description="Write a report: what was studied, loss metrics per summarizer with confidence intervals, "
        "context timelines, sweep heatmaps and the Pareto front with a recommended setting, what was lost but "
        "needed later, costs, and a glossary. Inputs are saved sweeps (.parquet from 'zett-lab sweep') or recorded "
        "conversations; for conversations a default grid (chosen from their sizes) is run with the built-in offline "
        "summarizers (no network, no key). The HTML file is self-contained: it makes no network request.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab report fixtures/ -o report.html
              zett-lab report sweep.parquet -o report.html
              zett-lab report fixtures/ -o report.md --format md
              zett-lab report runs/ -o report.html --max-tokens 40k,80k --keep-recent-tokens 10k --summarizer anchors mask"""  # noqa: E501 - example commands stay whole so they can be copied
        ),
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH_OR_SWEEP",
        help="recorded conversations, or one sweep folder saved by 'zett-lab sweep'",
    )
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="report file")
    p.add_argument(
        "--format", choices=("html", "md", "json"), help="output format (default: from OUT's suffix, else html)"
    )
    p.add_argument("--title", help="report title")
    p.add_argument("--date", help="date printed in the report (default: today), e.g. 2025-01-31")
    p.add_argument(
        "--max-tokens",
        type=_grid_type("--max-tokens"),
        metavar="GRID",
        help="grid for conversations (default: chosen from their sizes)",
    )
    p.add_argument(
        "--keep-recent-tokens", type=_grid_type("--keep-recent-tokens"), metavar="GRID", help="grid for conversations"
    )
    p.add_argument(
        "--summarizer",
        nargs="+",
        metavar="SPEC",
        help="summarizers for conversations (default: the built-in offline ones)",
    )
    p.add_argument(
        "--explore",
        metavar="ID",
        help="conversation shown in the interactive explorer (default: the one with most compactions)",
    )
    p.add_argument(
        "--recommend",
        metavar="CONSTRAINTS",
        help=(
            "recommend the cheapest setting meeting these, e.g. 'needed_anchor_recall >= 0.8' "
            "(default: the Pareto knee)"
        ),
    )
    p.add_argument(
        "--primary-model",
        default="gpt-5-mini",
        metavar="MODEL",
        help="price the primary model's tokens as this model (default: gpt-5-mini)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")

    # demo
    p = commands.add_parser(
        "demo",
        parents=[common],
        formatter_class=_formatter,
        help="write the notebooks and the sample sessions into a folder",
        description="Write the notebooks and the sample sessions (recorded through zett-agent, with gold probes) "
        "that come with zett-lab into DIR: DIR/notebooks/*.ipynb, DIR/fixtures/sessions.sqlite and its probes. "
        "A file that is already there is kept, never overwritten. Then run 'zett-lab lab DIR'.",
        epilog=(
            "examples:\n  zett-lab demo my-study\n  zett-lab lab my-study\n"
            "  zett-lab report my-study -o my-study/report.html"
        ),
    )
    p.add_argument("folder", metavar="DIR", help="folder to write into (created when missing)")

    # lab
    p = commands.add_parser(
        "lab",
        parents=[common],
        formatter_class=_formatter,
        help="open JupyterLab on the notebooks",
        description="Start JupyterLab on the notebooks of DIR (a folder written by 'zett-lab demo', or any folder "
        "of notebooks); without DIR, on the notebooks of the source checkout. Replaces this process. Arguments "
        "after '--' go to jupyter lab.",
        epilog=(
            "examples:\n  zett-lab lab my-study\n  zett-lab lab my-study --dry-run\n"
            "  zett-lab lab my-study -- --port 8899"
        ),
    )
    p.add_argument("folder", nargs="?", metavar="DIR", help="a folder written by 'zett-lab demo', or of notebooks")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(jupyter_args=[])
    return parser


def _version() -> str:
    from ..version import __version__ as zett_lab_version

    try:
        import zett_agent

        engine = zett_agent.__version__
    except Exception:  # noqa: BLE001 - --version must answer even with a broken engine install
        engine = "unknown"
    return f"zett-lab {zett_lab_version} (zett-agent {engine})"


def _formats_line() -> str:
    try:
        from ..load import readers

        return ", ".join(reader.name for reader in readers())
    except Exception:  # noqa: BLE001 - help must work even if a reader module is broken
        return "see zett_lab.load.readers()"


# --- commands -------------------------------------------------------------------------------------------


def _load(paths: Sequence[str], sessions: Sequence[str] | None = None) -> list[Any]:
    from ..load import load_all

    conversations = load_all([Path(p) for p in paths])
    if sessions:
        known = {c.id for c in conversations}
        missing = [s for s in sessions if s not in known]
        if missing:
            listing = ", ".join(sorted(known)[:20])
            raise InputError(paths[0], f"session {missing[0]!r}", f"no such session; found: {listing}")
        conversations = [c for c in conversations if c.id in set(sessions)]
    return conversations


def cmd_import(args: argparse.Namespace) -> int:
    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix not in (".sqlite", ".db", ".json"):
        raise SettingError(f"{out}: output must end in .sqlite or .db (zett-agent database) or .json (neutral JSON)")
    if out.exists():
        raise InputError(out, None, "already exists; choose a new output file (zett-lab never overwrites)")
    conversations = _load(args.paths)
    ids = [c.id for c in conversations]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InputError(
            args.paths[0], f"session {duplicates[0]!r}", "the same session id occurs more than once in the inputs"
        )
    if suffix == ".json":
        from ..load.neutral_writer import write_neutral

        write_neutral(conversations, out)
    else:
        from ..load.zett import write_sqlite

        if not out.parent.is_dir():
            raise InputError(out, None, f"folder {out.parent} does not exist")
        try:
            write_sqlite(conversations, out)
        except ValueError as error:
            if isinstance(error, ZettLabError):
                raise
            raise InputError(out, None, f"zett-agent storage refused a session: {error}") from error
    messages = sum(len(c.messages) for c in conversations)
    print(f"wrote {len(conversations)} conversation(s), {messages} messages, to {out}")
    return 0


_STEP_COLUMNS = [
    "step", "turn", "n_recorded", "estimate", "estimate_source", "triggered", "skip_reason", "applied",
    "context_tokens_after", "over_budget_after",
]
_COMPACTION_COLUMNS = [
    "compaction_id", "step", "turn", "span_start", "span_end", "older_tokens", "summary_tokens", "compression_ratio",
    "applied", "skip_reason",
]


def _table(frame: Any, columns: list[str], limit: int | None = None) -> str:
    import pandas as pd

    shown = frame[[c for c in columns if c in frame.columns]]
    if limit is not None and len(shown) > limit:
        head = limit // 2
        text = pd.concat([shown.head(head), shown.tail(limit - head)]).to_string(index=False, na_rep="")
        lines = text.splitlines()
        lines.insert(head + 1, f"... {len(shown) - limit} more steps (use --all-steps) ...")
        return "\n".join(lines)
    with pd.option_context("display.float_format", "{:.3f}".format):
        return shown.to_string(index=False, na_rep="")


def cmd_replay(args: argparse.Namespace) -> int:
    from ..load import load
    from ..replay.run import replay

    if args.output and Path(args.output).suffix not in (".parquet", ".json"):
        raise SettingError(f"{args.output}: a trace is saved as .parquet or .json")
    if args.session is None:
        conversations = _load([args.path])
        if len(conversations) > 1:
            listing = ", ".join(c.id for c in conversations[:20])
            raise InputError(
                args.path, None, f"holds {len(conversations)} conversations ({listing}); choose one with --session ID"
            )
        conversation = conversations[0]
    else:
        conversation = load(args.path, session=args.session)
    trace = replay(
        conversation,
        max_tokens=args.max_tokens,
        keep_recent_tokens=args.keep_recent_tokens,
        summarizer=args.summarizer,
        cache=False if args.no_cache else None,
        usage=args.usage,
        on_missing_usage="estimate",
    )
    summary = trace.summary()
    print(
        f"conversation {conversation.id}: {summary['messages']} messages, {summary['steps']} steps; "
        f"max_tokens={args.max_tokens}, keep_recent_tokens={args.keep_recent_tokens}, "
        f"summarizer={trace.settings.get('summarizer')}, zett-agent {trace.settings.get('zett_agent_version')}"
    )
    print()
    print("steps:")
    print(_table(trace.steps, _STEP_COLUMNS, None if args.all_steps else 60))
    print()
    if len(trace.compactions):
        print("compactions:")
        print(_table(trace.compactions, _COMPACTION_COLUMNS))
    else:
        print("compactions: none (the context never exceeded max_tokens)")
    print()
    print(
        f"applied {summary['compactions_applied']}, not smaller {summary['rejected_not_smaller']}, "
        f"failed {summary['failed']}; peak context {summary['peak_context']} tokens; "
        f"{summary['steps_over_budget']} step(s) over budget; {summary['total_input_tokens']} input tokens in total"
    )
    if args.output:
        path = trace.save(args.output)
        print(f"saved trace to {path}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..summarizers import DEFAULT_SUMMARIZER

    out = Path(args.output)
    if out.exists() and not (out / "sweep.json").is_file():
        raise InputError(out, None, "exists and is not a saved sweep; choose a new output name")
    summarizers = args.summarizer or [DEFAULT_SUMMARIZER]
    _check_summarizers(summarizers)
    conversations = _load(args.paths, args.session)
    from ..study.sweep import sweep

    result = sweep(
        conversations,
        max_tokens=args.max_tokens,
        keep_recent_tokens=args.keep_recent_tokens,
        summarizers=summarizers,
        progress=not args.no_progress,
        primary_model=args.primary_model,
    )
    result.save(out)
    failed = int(result.results["error"].notna().sum())
    print(
        f"swept {len(conversations)} conversation(s) x {len(args.max_tokens)} max_tokens x "
        f"{len(args.keep_recent_tokens)} keep_recent_tokens x {len(summarizers)} summarizer(s); saved to {out}"
        + (f" ({failed} cell(s) failed: see Sweep.errors)" if failed else "")
    )
    return 0


def _check_summarizers(specs: Sequence[str]) -> None:
    """Fail fast (before any replay) on an unknown summarizer spec or a missing key."""
    from ..summarizers import summarizer

    for spec in specs:
        summarizer(spec)


def _is_sweep(path: Path) -> bool:
    """A sweep saved by ``zett-lab sweep`` / ``Sweep.save``: a folder holding sweep.json."""
    return path.is_dir() and (path / "sweep.json").is_file()


def cmd_report(args: argparse.Namespace) -> int:
    from .report import DEFAULT_REPORT_SUMMARIZERS, Report, default_grid

    out = Path(args.output)
    fmt = args.format or {".md": "md", ".markdown": "md", ".json": "json"}.get(out.suffix.lower(), "html")
    paths = [Path(p) for p in args.paths]
    for path in paths:
        if not path.exists():
            raise InputError(path, None, "no such file or directory")
    sweep_files = [p for p in paths if _is_sweep(p)]
    recorded = [p for p in paths if p not in sweep_files]
    if sweep_files and recorded:
        raise SettingError("report takes either one saved sweep or recorded conversations, not both")
    if len(sweep_files) > 1:
        raise SettingError("report takes one saved sweep at a time")
    options = {
        "title": args.title, "date": args.date, "explore": args.explore, "primary_model": args.primary_model,
        "constraints": args.recommend,
    }
    options = {k: v for k, v in options.items() if v is not None}
    _check_report_options(out, options)
    if sweep_files:
        if args.max_tokens or args.keep_recent_tokens or args.summarizer:
            raise SettingError(
                "--max-tokens/--keep-recent-tokens/--summarizer apply to recorded conversations, not to a saved sweep"
            )
        from ..study.sweep import Sweep

        report = Report(sweep=Sweep.load(sweep_files[0]), **options)
    else:
        conversations = _load([str(p) for p in recorded])
        if args.explore is not None and args.explore not in {c.id for c in conversations}:
            raise SettingError(
                f"--explore {args.explore!r}: no such conversation; found: "
                f"{', '.join(c.id for c in conversations[:20])}"
            )
        summarizers = args.summarizer or list(DEFAULT_REPORT_SUMMARIZERS)
        _check_summarizers(summarizers)
        grid = default_grid(conversations)
        if args.max_tokens:
            grid["max_tokens"] = args.max_tokens
        if args.keep_recent_tokens:
            grid["keep_recent_tokens"] = args.keep_recent_tokens
        report = Report.build(conversations, summarizers, grid, progress=not args.no_progress, **options)
    if fmt == "html":
        report.save_html(out)
    else:
        report.save(out, format=fmt)
    print(f"wrote {fmt} report to {out} ({out.stat().st_size:,} bytes)")
    return 0


def _check_report_options(out: Path, options: dict[str, Any]) -> None:
    """Fail before any replay on a setting the report would only reject at the end."""
    from ..measure.cost import price_for
    from .report.core import _date_text

    if out.is_dir():
        raise SettingError(f"{out}: is a folder; give a file name for the report")
    if not out.parent.is_dir():
        raise InputError(out, None, f"folder {out.parent} does not exist")
    _date_text(options.get("date"))
    price_for(options.get("primary_model") or "gpt-5-mini")
    if options.get("constraints"):
        from ..study.sweep import parse_constraints

        parse_constraints(options["constraints"])


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import next_steps, write_demo

    result = write_demo(args.folder)
    for path in result.written:
        print(f"wrote {path}")
    for path in result.kept:
        print(f"kept  {path} (already there, not overwritten)")
    print(next_steps(result))
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    from .demo import checkout_notebooks

    if args.folder is None:
        folder = checkout_notebooks()
        if folder is None:
            raise SettingError("no notebooks folder given: run 'zett-lab demo DIR' first, then 'zett-lab lab DIR'")
    else:
        folder = Path(args.folder)
        if (folder / "notebooks").is_dir():
            folder = folder / "notebooks"
    if not folder.is_dir():
        raise InputError(folder, None, "no such notebooks folder (run 'zett-lab demo DIR' to write one)")
    folder = folder.resolve()
    command = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={folder}", *args.jupyter_args]
    if args.dry_run:
        import shlex

        print(shlex.join(command))
        return 0
    os.chdir(folder)
    os.execv(sys.executable, command)
    return 0  # pragma: no cover (execv does not return)


COMMANDS = {
    "import": cmd_import,
    "replay": cmd_replay,
    "sweep": cmd_sweep,
    "report": cmd_report,
    "demo": cmd_demo,
    "lab": cmd_lab,
}


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 600 else text[:597] + "..."


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``zett-lab lab ... -- ARGS``: the arguments after ``--`` go to jupyter lab, untouched."""
    if "--" in argv:
        cut = argv.index("--")
        if "lab" in argv[:cut]:
            return argv[:cut], argv[cut + 1 :]
    return argv, []


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zett-lab`` console script; returns the exit code."""
    parser = build_parser()
    arguments, passthrough = _split_passthrough(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(arguments)
    if passthrough:
        args.jupyter_args = passthrough
    debug = getattr(args, "debug", False)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `zett-lab replay ... | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except ZettLabError as error:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as error:
        if debug:
            raise
        where = f"{error.filename}: " if getattr(error, "filename", None) else ""
        print(f"{PROG}: error: {where}{error.strerror or _one_line(error)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # python -m zett_lab.show.cli
    sys.exit(main())
