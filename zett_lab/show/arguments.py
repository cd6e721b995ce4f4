"""The ``zett-lab`` command line's arguments: token values and grids, the parser with its help,
examples and the exit codes every command uses (:mod:`zett_lab.show.cli` runs the commands)."""

from __future__ import annotations

import argparse
import re
import textwrap

from ..errors import SettingError
from ..replay.deadline import DEFAULT_ENGINE_TIMEOUT, check_engine_timeout
from ..summarizers import DEFAULT_SUMMARIZER

PROG = "zett-lab"

EXIT_OK = 0
#: The command ran, but some results failed (or --strict stopped at the first failure).
EXIT_FAILURES = 1
#: Nothing was done: bad usage, unreadable input, a bad setting, a refused output path.
EXIT_ERROR = 2
EXIT_USAGE = EXIT_ERROR
EXIT_INTERRUPTED = 130
#: Stopped by SIGTERM (128 + 15, as a shell reports a process the signal ended).
EXIT_TERMINATED = 143
EXIT_CODES = {
    EXIT_OK: "success: every replay and every summary succeeded",
    EXIT_FAILURES: "the command ran, but some summaries, replays or sweep cells failed (one line per cause on "
    "stderr; outputs mark them); with --strict, it stopped at the first failure",
    EXIT_ERROR: "nothing was done: bad usage, unreadable input, a bad setting, or a refused output path "
    "(one of the inputs, an existing file without --force, or something else than a file)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_TERMINATED: "terminated (SIGTERM, e.g. kill PID): stopped like Ctrl-C, workers stopped, temporary data removed",
}
#: How the command line asks to replace an existing output.
FORCE = "--force"
#: What ``--engine`` takes (resolved by :func:`zett_lab.replay.engine_names.engine_from_spec`).
ENGINE_FORMS = "stock, split-turn, observation-masking, module:Class or path/to/file.py:Class"
#: What a grid option takes (:func:`parse_grid`).
GRID_FORMS = "comma-separated values (8k,16k,32k) or A:B:STEP with B included (8k:32k:8k); k means thousands"
#: What ``--max-tokens`` and ``--keep-recent-tokens`` set, for one value (``replay``) or a grid.
MAX_TOKENS_MEANING = "engine threshold"
KEEP_RECENT_MEANING = "tokens kept verbatim (a minimum)"
#: The summarizer of a command given none.
SUMMARIZER_DEFAULT = f"default: {DEFAULT_SUMMARIZER}, offline"


class _Parser(argparse.ArgumentParser):
    """argparse with one clear line on stderr (and the usage hint) for a usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32, width=100)


# --- argument types -------------------------------------------------------------------------------------


_INT = re.compile(r"^\s*([-+]?\d[\d_]*)(k?)\s*$", re.I)  # a sign is read, so -5 is told it must be positive


def parse_tokens(text: str, name: str = "value") -> int:
    """A positive token count: ``20000``, ``20_000`` or ``20k``."""
    match = _INT.match(str(text))
    if not match:
        raise SettingError(f"{name}: {text!r} is not a whole number of tokens (e.g. 20000 or 20k)")
    from ..tokens import MAX_TOKEN_SETTING

    value = int(match.group(1).replace("_", "")) * (1000 if match.group(2) else 1)
    if value < 1:
        raise SettingError(f"{name}: must be a positive number of tokens, got {text!r}")
    if value > MAX_TOKEN_SETTING:
        raise SettingError(
            f"{name}: {text.strip()} is larger than zett_lab can use (at most {MAX_TOKEN_SETTING:,} tokens); "
            "to never compact, give a value above the conversation's size"
        )
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


def _seconds_type(text: str) -> float | None:
    """``--engine-timeout``: a positive number of seconds, or ``none``."""
    if text.strip().lower() == "none":
        return None
    try:
        return check_engine_timeout(float(text))
    except (ValueError, SettingError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds (or 'none')") from None


_seconds_type.__name__ = "--engine-timeout"


# --- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``zett-lab`` parser: the options every command shares, then each command with its options.

    Long on purpose: the shared options and one call per command, in the order ``--help`` lists them.
    """
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

            Run 'zett-lab COMMAND --help' for each command's options.

            outputs: never one of the inputs; an existing output is replaced only with --force.

            exit codes:
            """
        )
        + "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items()),
    )
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--debug", action="store_true", help="show the Python traceback on errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    common = _Parser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the Python traceback on errors"
    )
    writes = _Parser(add_help=False)
    writes.add_argument("--force", action="store_true", help="replace an existing output (never one of the inputs)")
    summarizes = _Parser(add_help=False)
    summarizes.add_argument("--strict", action="store_true", help="stop at the first failed summary (exit 1)")
    summarizes.add_argument("--no-cache", action="store_true", help="do not use the persistent summary cache")
    summarizes.add_argument(
        "--engine-timeout",
        type=_seconds_type,
        default=DEFAULT_ENGINE_TIMEOUT,
        metavar="SECONDS",
        help=f"seconds each compaction pass (summary call included) may take before it is recorded as failed "
        f"(default: {DEFAULT_ENGINE_TIMEOUT:g}; 'none': no limit)",
    )
    distributes = _Parser(add_help=False)
    distributes.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the replays and their measuring on this dask.distributed cluster's workers, e.g. "
        "tcp://HOST:8786 (needs the dask extra; default: a process pool on this machine)",
    )

    reads = _Parser(add_help=False)
    reads.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="accept files of input folders that cannot be read (each is still named on stderr); "
        "without it, a run that skipped any exits 1",
    )

    _add_import_command(commands, [common, writes, reads])
    _add_replay_command(commands, [common, writes, reads, summarizes])
    _add_sweep_command(commands, [common, writes, reads, summarizes, distributes])
    _add_report_command(commands, [common, writes, reads, summarizes, distributes])
    _add_demo_command(commands, [common])
    _add_lab_command(commands, [common])
    return parser


def _add_import_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``import`` command: recorded sessions to a zett-agent database or neutral JSON."""
    p = commands.add_parser(
        "import",
        parents=parents,
        formatter_class=_formatter,
        help="convert recorded sessions to a zett-agent SQLite database or neutral JSON",
        description="Convert recorded sessions (any format zett_lab reads) to a new zett-agent SQLite database "
        "(.sqlite/.db, written through zett-agent's own storage API) or zett_lab's neutral JSON (.json). "
        "An existing output file is replaced only with --force, and never one of the inputs.",
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_replay_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``replay`` command: one conversation at one setting."""
    p = commands.add_parser(
        "replay",
        parents=parents,
        formatter_class=_formatter,
        help="replay one conversation and print its steps and compactions",
        description="Replay one recorded conversation through zett-agent's real CompactionExtension and print a "
        "table of model steps (estimate, threshold, context sent) and of the compaction attempts.",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab replay fixtures/sessions.sqlite --session ci-flaky-kafka --max-tokens 20k --keep-recent-tokens 4k
              zett-lab replay run.jsonl --max-tokens 30000 --keep-recent-tokens 8000 --summarizer truncate:0.1 -o trace.parquet
              zett-lab replay run.jsonl --max-tokens 30k --keep-recent-tokens 8k --summarizer openai:gpt-5-mini
              zett-lab replay run.jsonl --max-tokens 30k --keep-recent-tokens 8k --engine my_policy.py:MyCompaction"""
        ),
    )
    p.add_argument("path", metavar="PATH", help="recorded session file or directory")
    p.add_argument("--session", metavar="ID", help="session id, when the file holds several")
    p.add_argument(
        "--max-tokens", required=True, type=_tokens_type("--max-tokens"), metavar="N", help=MAX_TOKENS_MEANING
    )
    p.add_argument(
        "--keep-recent-tokens",
        required=True,
        type=_tokens_type("--keep-recent-tokens"),
        metavar="N",
        help=KEEP_RECENT_MEANING,
    )
    p.add_argument("--summarizer", metavar="SPEC", help=f"summary model spec ({SUMMARIZER_DEFAULT})")
    p.add_argument("--engine", metavar="SPEC", help=f"compaction engine: {ENGINE_FORMS} (default: stock)")
    p.add_argument(
        "--usage", choices=("none", "recorded", "synthetic"), default="none", help="usage baseline mode (default: none)"
    )
    p.add_argument("-o", "--output", metavar="TRACE", help="also save the trace (.parquet or .json)")
    p.add_argument("--all-steps", action="store_true", help="print every step (default: at most 60 rows)")


def _add_grid_arguments(p: _Parser, *, required: bool, default: str | None = None) -> None:
    """``--max-tokens`` and ``--keep-recent-tokens`` as grids (``sweep``, ``report``): one definition, one help."""
    tail = f": {GRID_FORMS}" + (f" (default: {default})" if default else "")
    for flag, meaning in (("--max-tokens", f"{MAX_TOKENS_MEANING}s"), ("--keep-recent-tokens", KEEP_RECENT_MEANING)):
        p.add_argument(flag, required=required, type=_grid_type(flag), metavar="GRID", help=f"{meaning}{tail}")


def _add_sweep_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``sweep`` command: conversations over a grid of settings and summarizers."""
    p = commands.add_parser(
        "sweep",
        parents=parents,
        formatter_class=_formatter,
        help="replay conversations over a grid of settings and summarizers",
        description="Replay every conversation under every (max_tokens, keep_recent_tokens, summarizer) of a grid "
        "and save the results table (Parquet).",
        epilog=textwrap.dedent(
            """\
            examples:
              zett-lab sweep fixtures/ --max-tokens 8k:32k:8k --keep-recent-tokens 2k,6k --summarizer anchors mask -o sweep.parquet
              zett-lab sweep run.jsonl --max-tokens 20000,40000 --keep-recent-tokens 5000 --summarizer extractive:0.1 -o s.parquet
              zett-lab sweep fixtures/ --max-tokens 8k,16k,32k --keep-recent-tokens 2k --engine stock --engine split-turn --engine mine=my_policy.py:MyCompaction -o engines.parquet
              zett-lab sweep logs/ --max-tokens 40k,80k --keep-recent-tokens 10k --scheduler tcp://scheduler:8786 -o s.parquet
              zett-lab report sweep.parquet -o report.html"""
        ),
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="recorded session files or directories")
    _add_grid_arguments(p, required=True)
    p.add_argument(
        "--summarizer", nargs="+", metavar="SPEC", help=f"one or more summary model specs ({SUMMARIZER_DEFAULT})"
    )
    _add_engines_argument(p)
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


def _add_report_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``report`` command: one self-contained report of saved sweeps or conversations.

    Long on purpose: one ``add_argument`` per option, in the order ``--help`` lists them.
    """
    p = commands.add_parser(
        "report",
        parents=parents,
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
              zett-lab report fixtures/ -o policies.html --summarizer anchors --engine stock --engine split-turn
              zett-lab report runs/ -o report.html --max-tokens 40k,80k --keep-recent-tokens 10k --summarizer anchors mask
              zett-lab report logs/ -o report.html --scheduler tcp://scheduler:8786"""
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
    _add_grid_arguments(p, required=False, default="for conversations, chosen from their sizes")
    p.add_argument(
        "--summarizer",
        nargs="+",
        metavar="SPEC",
        help="summarizers for conversations (default: the built-in offline ones); over a saved sweep, the ones "
        "that summarize its production spans (a report over saved results calls no provider it is not given here)",
    )
    _add_engines_argument(p)
    p.add_argument(
        "--explore",
        metavar="ID",
        help="conversation shown in the interactive explorer (default: the one with most compactions)",
    )
    p.add_argument(
        "--recommend",
        metavar="CONSTRAINTS",
        help=(
            "constraints the recommended setting must meet, checked before the default ones (no step over "
            "max_tokens, superseded_rate <= 0.1), e.g. 'needed_anchor_recall >= 0.8'; one no setting meets "
            "rules nothing out, and the report says so"
        ),
    )
    p.add_argument(
        "--prefer",
        metavar="METRICS",
        help=(
            "what the recommendation ranks by, most important first: metric names joined by commas (default: "
            "steps_over_budget,lost_but_needed,total_input_tokens), e.g. 'total_input_tokens' for the cheapest "
            "setting meeting the constraints"
        ),
    )
    p.add_argument(
        "--primary-model",
        default="gpt-5-mini",
        metavar="MODEL",
        help="price the primary model's tokens as this model (default: gpt-5-mini)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_engines_argument(p: _Parser) -> None:
    """``--engine [NAME=]SPEC``, repeatable: the compaction engines a sweep or report compares."""
    p.add_argument(
        "--engine",
        action="append",
        metavar="[NAME=]SPEC",
        help=f"a compaction engine to compare, repeatable: {ENGINE_FORMS}; NAME labels it "
        "(default: the short name or the class name; without --engine: stock only)",
    )


def _add_demo_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``demo`` command: the notebooks and sample sessions written into a folder."""
    p = commands.add_parser(
        "demo",
        parents=parents,
        formatter_class=_formatter,
        help="write the notebooks and the sample sessions into a folder",
        description="Write the notebooks and the sample sessions (recorded through zett-agent, with gold probes) "
        "that come with zett-lab into DIR: DIR/notebooks/*.ipynb, DIR/fixtures/sessions.sqlite and its probes. "
        "A file that is already there is kept, never overwritten. Then run 'zett-lab lab DIR'. Needs the notebook "
        'side: pip install "zett-lab[lab]".',
        epilog=(
            "examples:\n  zett-lab demo my-study\n  zett-lab lab my-study\n"
            "  zett-lab report my-study/fixtures -o my-study/report.html"
        ),
    )
    p.add_argument("folder", metavar="DIR", help="folder to write into (created when missing)")


def _add_lab_command(commands: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """The ``lab`` command: JupyterLab on the notebooks."""
    p = commands.add_parser(
        "lab",
        parents=parents,
        formatter_class=_formatter,
        help="open JupyterLab on the notebooks",
        description="Start JupyterLab on the notebooks of DIR (a folder written by 'zett-lab demo', or any folder "
        "of notebooks); without DIR, on the notebooks of the source checkout. Replaces this process. Arguments "
        "after '--' go to jupyter lab. Run as root (as in most containers), it passes Jupyter's --allow-root and "
        'says so. Needs the notebook side: pip install "zett-lab[lab]".',
        epilog=(
            "examples:\n  zett-lab lab my-study\n  zett-lab lab my-study --dry-run\n"
            "  zett-lab lab my-study -- --port 8899"
        ),
    )
    p.add_argument("folder", nargs="?", metavar="DIR", help="a folder written by 'zett-lab demo', or of notebooks")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.set_defaults(jupyter_args=[])


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
