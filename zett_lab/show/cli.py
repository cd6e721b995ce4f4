"""``zett-lab``: a thin command line over the library.

Commands::

    zett-lab import PATH... -o OUT.sqlite|OUT.db|OUT.json
    zett-lab replay PATH --max-tokens N --keep-recent-tokens N [--summarizer SPEC] [--session ID] [-o trace.parquet]
    zett-lab sweep PATH... --max-tokens A:B:STEP|LIST --keep-recent-tokens ... --summarizer SPEC... -o sweep.parquet
        [--scheduler tcp://HOST:PORT]
    zett-lab report PATH_OR_SWEEP... -o report.html [--format html|md|json] [--scheduler tcp://HOST:PORT]
    zett-lab demo DIR
    zett-lab lab [DIR] [--dry-run] [-- JUPYTER_ARGS]

Exit codes (:data:`EXIT_CODES`): 0 when everything succeeded; 1 when the command ran but some
results failed (summaries, replays, sweep cells: one line per cause on stderr, and ``--strict``
stops at the first); 2 when nothing was done (bad usage, unreadable input, a bad setting, a
refused output path), with one line on stderr (``zett-lab: error: ...``); 130 when interrupted
(Ctrl-C), 143 when terminated (SIGTERM is handled like Ctrl-C: workers stopped, temporary data
removed, no partial output left).
``--debug`` shows the Python traceback instead of the one line.

Outputs: an output is never one of the command's inputs (nor a folder holding one); an existing
output is replaced only with ``--force``. Both are checked before any work starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from ..errors import InputError, ResultFailure, SettingError, SummaryFailureWarning, Terminated, ZettLabError
from ..files import check_output, claims_released
from ..progress import Progress
from ..replay.schema import COMPACTION_SUMMARY_COLUMNS, STEP_SUMMARY_COLUMNS
from .arguments import (
    EXIT_CODES,
    EXIT_ERROR,
    EXIT_FAILURES,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    FORCE,
    PROG,
    build_parser,
    parse_grid,
    parse_tokens,
)

__all__ = [
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_FAILURES",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "parse_grid",
    "parse_tokens",
]

# --- commands -------------------------------------------------------------------------------------------


class _Reading:
    """What a command's inputs gave: the files read, and the files of folders not read, each with why.

    Each file not read is named on stderr as it is passed over; the command's final line counts them;
    a run that skipped a file that looked like recorded data (JSON, JSON lines, SQLite) but could not
    be read exits 1 unless ``--skip-unreadable`` accepts it.
    """

    def __init__(self, accept_skipped: bool) -> None:
        self.read = 0
        self.skipped: list[Path] = []
        self.not_data: list[Path] = []
        self.accept_skipped = accept_skipped
        self._lines: list[str] = []

    def __call__(self, path: Path, reason: str | None, unreadable: bool) -> None:
        if reason is None:
            self.read += 1
        elif unreadable:
            self.skipped.append(path)
            self._lines.append(f"{PROG}: skipped {_shown(path)}: {_one_line(reason)}")
        else:
            self.not_data.append(path)
            self._lines.append(f"{PROG}: not read {_shown(path)}: {_one_line(reason)}")

    def name_passed_over(self) -> None:
        """Name every file not read, one line each, when the work starts (a run refused before says only why)."""
        for line in self._lines:
            print(line, file=sys.stderr)
        self._lines.clear()

    def counts(self) -> str:
        """``3 file(s) read, 1 skipped, 2 not recorded data (named above)``, as the final line says it."""
        parts = [f"{self.read} file(s) read"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.not_data:
            parts.append(f"{len(self.not_data)} not recorded data")
        return ", ".join(parts) + (" (named above)" if len(parts) > 1 else "")

    def exit_code(self, code: int) -> int:
        """``code``, or 1 when files were skipped and the run did not accept it (with one line saying so)."""
        if not self.skipped or self.accept_skipped or code != EXIT_OK:
            return code
        print(
            f"{PROG}: {len(self.skipped)} file(s) of the input folders could not be read (named above); "
            "pass --skip-unreadable to accept that",
            file=sys.stderr,
        )
        return EXIT_FAILURES


def _shown(path: Path | str) -> str:
    """A path as printed: bytes that are not UTF-8 in a file name shown as escapes, never an encoding error."""
    return os.fsdecode(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _load(
    paths: Sequence[str], sessions: Sequence[str] | None = None, progress: bool = False, reading: _Reading | None = None
) -> list[Any]:
    from ..load import load_all

    conversations = load_all([Path(p) for p in paths], progress=progress, on_file=reading)
    if sessions:
        known = {c.id for c in conversations}
        missing = [s for s in sessions if s not in known]
        if missing:
            listing = ", ".join(sorted(known)[:20])
            raise InputError(paths[0], f"session {missing[0]!r}", f"no such session; found: {listing}")
        conversations = [c for c in conversations if c.id in set(sessions)]
    return conversations


def _output(path: str, inputs: Sequence[Any], args: argparse.Namespace) -> Path:
    """The output path, refused (before any work) when it is an input or exists without --force.

    Folders of recordings among ``inputs`` are left to the check after loading (their files that
    were read count, not the folder); a saved sweep is read as a whole.
    """
    inputs = [p for p in map(Path, inputs) if not p.is_dir() or _is_sweep(p)]
    return check_output(path, inputs, overwrite=args.force, force_hint=FORCE)


def _inputs(conversations: Sequence[Any], cache: Any) -> list[Path]:
    """Every file a command reads: the conversations' files and the summary cache file."""
    path = getattr(cache, "path", None)
    return [f for c in conversations for f in c.input_files()] + ([Path(path)] if isinstance(path, Path) else [])


#: Seconds ``--scheduler`` waits for the scheduler to answer.
SCHEDULER_TIMEOUT = 20


@contextlib.contextmanager
def _scheduler(address: str | None) -> Iterator[Executor | None]:
    """The executor of the dask.distributed cluster at ``address`` while the command runs (None: no address, so
    the local process pool). An unreachable or malformed address stops the command before any work."""
    if not address:
        yield None
        return
    try:
        from distributed import Client
    except ImportError:
        raise SettingError(
            f"--scheduler {address}: dask.distributed is not installed; pip install 'zett-lab[dask]'"
        ) from None
    try:
        client = Client(address, timeout=SCHEDULER_TIMEOUT, set_as_default=False)
    except (OSError, ValueError, TimeoutError) as error:
        raise SettingError(
            f"--scheduler {address}: no dask scheduler answered ({_one_line(error)}); give the address the "
            "scheduler prints (tcp://HOST:PORT), or leave --scheduler out to run on this machine"
        ) from None
    try:
        yield client.get_executor()
    finally:
        with contextlib.suppress(Exception):  # the results are in; a scheduler gone by now changes nothing
            client.close()


def _cache(args: argparse.Namespace) -> Any:
    """The summary cache the command uses (opened now, so a bad cache stops it before any work), or False."""
    if args.no_cache:
        return False
    from ..summarizers import SummaryCache

    return SummaryCache()


def _report_failures(counts: Any) -> int:
    """One stderr line per distinct cause of failure; the exit code for them."""
    for row in counts.itertuples(index=False):
        print(f"{PROG}: {row.count} {row.what}(s) failed ({row.summarizer}): {row.cause}", file=sys.stderr)
    return EXIT_FAILURES if len(counts) else EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix not in (".sqlite", ".db", ".json"):
        raise SettingError(f"{out}: output must end in .sqlite or .db (zett-agent database) or .json (neutral JSON)")
    _output(args.output, args.paths, args)
    if not out.parent.is_dir():
        raise InputError(out, None, f"folder {out.parent} does not exist")
    started = time.perf_counter()
    reading = _Reading(args.skip_unreadable)
    conversations = _load(args.paths, progress=not args.no_progress, reading=reading)
    ids = [c.id for c in conversations]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InputError(
            args.paths[0], f"session {duplicates[0]!r}", "the same session id occurs more than once in the inputs"
        )
    reading.name_passed_over()
    if suffix == ".json":
        from ..load.neutral_writer import write_neutral

        write_neutral(conversations, out, overwrite=args.force)
    else:
        from ..load.zett import write_sqlite

        try:
            write_sqlite(conversations, out, overwrite=args.force)
        except ValueError as error:
            if isinstance(error, ZettLabError):
                raise
            raise InputError(out, None, f"zett-agent storage refused a session: {error}") from error
    messages = sum(len(c.messages) for c in conversations)
    natives = sum(len(c.native_compactions) for c in conversations)
    print(
        f"wrote {len(conversations)} conversation(s), {messages} messages, {natives} native compaction(s), to "
        f"{_shown(out)} in {_took(started)}; {reading.counts()}"
    )
    from ..load.conversation import probes_sidecar_path

    if suffix != ".json" and (sidecar := probes_sidecar_path(out)).exists():
        print(f"probes and native compactions: {_shown(sidecar)}")
    return reading.exit_code(EXIT_OK)


def _table(frame: Any, columns: list[str], limit: int | None = None) -> str:
    import pandas as pd

    from ..formatting import frame_formatters

    shown = frame[[c for c in columns if c in frame.columns]]
    written = frame_formatters(shown)
    if limit is not None and len(shown) > limit:
        head = limit // 2
        text = pd.concat([shown.head(head), shown.tail(limit - head)]).to_string(
            index=False, na_rep="", formatters=written
        )
        lines = text.splitlines()
        lines.insert(head + 1, f"... {len(shown) - limit} more steps (use --all-steps) ...")
        return "\n".join(lines)
    return shown.to_string(index=False, na_rep="", formatters=written)


def _no_compaction_line(steps: Any) -> str:
    """What the steps' own skip reasons say about a replay that made no compaction attempt."""
    from ..replay.schema import BELOW_THRESHOLD

    reasons = steps["skip_reason"].dropna()
    over = reasons[reasons != BELOW_THRESHOLD].value_counts()
    if not len(over):
        return "compactions: none (the engine's estimate never exceeded max_tokens)"
    listing = ", ".join(f"{count} {reason}" for reason, count in over.items())
    return f"compactions: none; {int(over.sum())} step(s) exceeded max_tokens and the engine found no window to summarize ({listing})"


def cmd_replay(args: argparse.Namespace) -> int:
    from ..replay.engine_names import engine_from_spec
    from ..replay.run import replay
    from ..replay.setting import ReplayOptions, Setting

    engine = engine_from_spec(args.engine) if args.engine else None
    if args.output:
        if Path(args.output).suffix not in (".parquet", ".json"):
            raise SettingError(f"{args.output}: a trace is saved as .parquet or .json")
        _output(args.output, [args.path], args)
    if args.summarizer:
        _check_summarizers([args.summarizer])
    cache = _cache(args)
    reading = _Reading(args.skip_unreadable)
    conversations = _load([args.path], [args.session] if args.session is not None else None, reading=reading)
    if len(conversations) > 1:
        listing = ", ".join(c.id for c in conversations[:20])
        raise InputError(
            args.path, None, f"holds {len(conversations)} conversations ({listing}); choose one with --session ID"
        )
    conversation = conversations[0]
    if args.output:
        _output(args.output, _inputs([conversation], cache), args)
    reading.name_passed_over()
    setting = Setting(
        max_tokens=args.max_tokens,
        keep_recent_tokens=args.keep_recent_tokens,
        summarizer=args.summarizer,
        engine=engine,
        usage=args.usage,
    )
    options = ReplayOptions(
        cache=cache, on_missing_usage="estimate", strict=args.strict, engine_timeout=args.engine_timeout
    )
    trace = replay(conversation, setting, options)
    summary = trace.summary()
    print(
        f"conversation {conversation.id}: {summary['messages']} messages, {summary['steps']} steps; "
        f"max_tokens={setting.max_tokens}, keep_recent_tokens={setting.keep_recent_tokens}, "
        f"summarizer={trace.settings.summarizer}, engine={setting.engine_name}, "
        f"zett-agent {trace.settings.zett_agent_version}"
    )
    print()
    print("steps:")
    print(_table(trace.steps, STEP_SUMMARY_COLUMNS, None if args.all_steps else 60))
    print()
    if len(trace.compactions):
        print("compactions:")
        print(_table(trace.compactions, COMPACTION_SUMMARY_COLUMNS))
    else:
        print(_no_compaction_line(trace.steps))
    print()
    print(
        f"applied {summary['compactions_applied']}, not smaller {summary['rejected_not_smaller']}, "
        f"failed {summary['failed']}; peak context {summary['peak_context']} tokens; "
        f"{summary['steps_over_budget']} step(s) over budget; {summary['total_input_tokens']} input tokens in total; "
        f"{reading.counts()}"
    )
    if args.output:
        path = trace.save(args.output, overwrite=args.force)
        print(f"saved trace to {_shown(path)}")
    return reading.exit_code(_report_failures(trace.failure_counts))


def cmd_sweep(args: argparse.Namespace) -> int:
    from ..replay.engine_names import labelled_engines
    from ..study import check_sweep_target, measured_cells
    from ..study.sweep import sweep
    from ..summarizers import DEFAULT_SUMMARIZER

    engines = labelled_engines(args.engine) if args.engine else None
    out = _output(args.output, args.paths, args)
    summarizers = args.summarizer or [DEFAULT_SUMMARIZER]
    _check_summarizers(summarizers)
    cache = _cache(args)
    started = time.perf_counter()
    reading = _Reading(args.skip_unreadable)
    conversations = _load(args.paths, args.session, progress=not args.no_progress, reading=reading)
    _output(args.output, _inputs(conversations, cache), args)
    check_sweep_target(out)
    reading.name_passed_over()
    with _scheduler(args.scheduler) as executor:
        result = sweep(
            conversations,
            max_tokens=args.max_tokens,
            keep_recent_tokens=args.keep_recent_tokens,
            summarizers=summarizers,
            progress=not args.no_progress,
            primary_model=args.primary_model,
            cache=cache,
            strict=args.strict,
            engine_timeout=args.engine_timeout,
            engines=engines,
            executor=executor,
        )
    result.save(out, overwrite=args.force)
    unmeasured = int((~measured_cells(result.results)).sum())
    print(
        f"swept {len(conversations)} conversation(s) x {len(args.max_tokens)} max_tokens x "
        f"{len(args.keep_recent_tokens)} keep_recent_tokens x {len(summarizers)} summarizer(s)"
        + (f" x {len(engines)} engine(s) ({', '.join(engines)})" if engines else "")
        + f" ({_work_done(result)}) in {_took(started)}; saved to {_shown(out)}; {reading.counts()}"
        + (
            f"; {unmeasured} of {len(result.results)} cell(s) are no measurement (failed summaries or replays: "
            "see the failed, summary_error and error columns)"
            if unmeasured
            else ""
        )
    )
    return reading.exit_code(_report_failures(result.failure_counts))


def _took(started: float) -> str:
    """Wall time since ``started``, as the final line of a command says it."""
    seconds = time.perf_counter() - started
    return f"{seconds:.1f} s" if seconds < 120 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _work_done(result: Any) -> str:
    """What a sweep ran: cells, replays (forked), cells answered by another replay, summary calls."""
    c = result.config
    return (
        f"{len(result.results)} cells: {c.get('replays', 0)} replays ({c.get('forked', 0)} forked), "
        f"{c.get('reused', 0)} proven identical to one, {c.get('model_calls', 0)} summary calls"
    )


def _check_summarizers(specs: Sequence[str]) -> None:
    """Fail fast (before any replay) on an unknown summarizer spec or a missing key."""
    from ..summarizers import summarizer

    for spec in specs:
        summarizer(spec)


def _is_sweep(path: Path) -> bool:
    """A sweep saved by ``zett-lab sweep`` / ``Sweep.save``: a folder holding sweep.json."""
    return path.is_dir() and (path / "sweep.json").is_file()


def cmd_report(args: argparse.Namespace) -> int:
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
        "title": args.title,
        "date": args.date,
        "explore": args.explore,
        "primary_model": args.primary_model,
        "constraints": args.recommend,
        "objectives": args.prefer,
    }
    options = {k: v for k, v in options.items() if v is not None}
    _check_report_options(out, options)
    _output(args.output, paths, args)
    with _scheduler(args.scheduler) as executor:
        return _report(args, out, fmt, sweep_files, recorded, options, executor)


def _report(
    args: argparse.Namespace,
    out: Path,
    fmt: str,
    sweep_files: list[Path],
    recorded: list[Path],
    options: dict[str, Any],
    executor: Executor | None,
) -> int:
    """``report`` once its inputs and options are checked: the sweep (or the saved one), the report, its file."""
    from ..report import DEFAULT_PRIMARY_MODEL, DEFAULT_REPORT_SUMMARIZERS, default_grid, report_sweep
    from .report import Report

    started = time.perf_counter()
    reading = _Reading(args.skip_unreadable)
    if sweep_files:
        if args.max_tokens or args.keep_recent_tokens or args.engine:
            raise SettingError(
                "--max-tokens/--keep-recent-tokens/--engine apply to recorded conversations, not to a saved sweep"
            )
        if args.summarizer:  # over saved results, only the summarizers named on this run are called
            _check_summarizers(args.summarizer)
            options["native_baselines"] = list(args.summarizer)
        from ..study import Sweep

        saved = Sweep.load(sweep_files[0])
        _output(args.output, saved.input_files(), args)
        result = saved
    else:
        from ..replay.engine_names import labelled_engines

        engines = labelled_engines(args.engine) if args.engine else None
        cache = _cache(args)
        conversations = _load([str(p) for p in recorded], progress=not args.no_progress, reading=reading)
        _output(args.output, _inputs(conversations, cache), args)
        if args.explore is not None and args.explore not in {c.id for c in conversations}:
            raise SettingError(
                f"--explore {args.explore!r}: no such conversation; found: "
                f"{', '.join(c.id for c in conversations[:20])}"
            )
        summarizers = args.summarizer or list(DEFAULT_REPORT_SUMMARIZERS)
        _check_summarizers(summarizers)
        options["native_baselines"] = list(summarizers)
        grid = default_grid(conversations, options.get("primary_model", DEFAULT_PRIMARY_MODEL))
        if args.max_tokens:
            grid["max_tokens"] = args.max_tokens
        if args.keep_recent_tokens:
            grid["keep_recent_tokens"] = args.keep_recent_tokens
        reading.name_passed_over()
        result = report_sweep(
            conversations,
            summarizers,
            grid,
            progress=not args.no_progress,
            cache=cache,
            strict=args.strict,
            primary_model=options.get("primary_model", DEFAULT_PRIMARY_MODEL),
            engine_timeout=args.engine_timeout,
            engines=engines,
            executor=executor,
        )
    # After the sweep's bar: measuring the replays the report shows, then its figures and page.
    phases = Progress(2, "report", not args.no_progress, unit="part")
    try:
        report = Report(sweep=result, executor=executor, **options)
        phases.advance(1)
        report.save(out, format=fmt, overwrite=args.force)
        phases.advance(1)
    finally:
        phases.close()
    sweep_done = f"; {_work_done(report.sweep)}" if report.sweep is not None else ""
    print(
        f"wrote {fmt} report to {_shown(out)} ({out.stat().st_size:,} bytes): {len(report.conversations)} conversation(s), "
        f"{len(report.summarizers)} summarizer(s), {len(report.traces)} replay(s){sweep_done}; "
        f"{reading.counts() if not sweep_files else 'from a saved sweep'}; in {_took(started)}"
    )
    if not len(report.results):
        print(
            f"{PROG}: no replay in this report is a measurement: every one failed or had a failed summary",
            file=sys.stderr,
        )
    return reading.exit_code(_report_failures(report.failure_counts))


def _check_report_options(out: Path, options: dict[str, Any]) -> None:
    """Fail before any replay on a setting the report would only reject at the end."""
    from ..measure.cost import price_for
    from ..report import DEFAULT_PRIMARY_MODEL
    from .report import report_date
    from .report.core import check_report_path

    check_report_path(out)
    report_date(options.get("date"))
    price_for(options.get("primary_model") or DEFAULT_PRIMARY_MODEL)
    if options.get("constraints"):
        from ..study import parse_constraints

        parse_constraints(options["constraints"])
    if options.get("objectives"):
        from ..study.recommendation import parse_objectives

        parse_objectives(options["objectives"])


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import next_steps, write_demo
    from .extras import require

    require("lab", "zett-lab demo (notebooks to run in JupyterLab)")
    result = write_demo(args.folder)
    for path in result.written:
        print(f"wrote {path}")
    for path in result.kept:
        print(f"kept  {path} (already there, not overwritten)")
    print(next_steps(result))
    return EXIT_OK


def cmd_lab(args: argparse.Namespace) -> int:
    from .demo import checkout_notebooks
    from .extras import require

    require("lab", "zett-lab lab")
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
    command = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={folder}"]
    if _is_root() and "--allow-root" not in args.jupyter_args:
        # Jupyter refuses to start as root ("Running as root is not recommended"), which is how most containers run.
        command.append("--allow-root")
        print(f"{PROG}: running as root: starting JupyterLab with --allow-root", file=sys.stderr)
    command += args.jupyter_args
    if args.dry_run:
        import shlex

        print(shlex.join(command))
        return 0
    os.chdir(folder)
    os.execv(sys.executable, command)
    return 0  # pragma: no cover (execv does not return)


def _is_root() -> bool:
    """Whether this process runs as root (POSIX; never on Windows, which has no root user)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


COMMANDS = {
    "import": cmd_import,
    "replay": cmd_replay,
    "sweep": cmd_sweep,
    "report": cmd_report,
    "demo": cmd_demo,
    "lab": cmd_lab,
}


def _one_line(error: BaseException | str) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 600 else text[:597] + "..."


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """Warnings as one line each; failed summaries are left to the per-cause lines at the end."""
    if not issubclass(category, SummaryFailureWarning):
        print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr)


def _split_passthrough(argv: list[str]) -> tuple[list[str], list[str]]:
    """``zett-lab lab ... -- ARGS``: the arguments after ``--`` go to jupyter lab, untouched."""
    if "--" in argv:
        cut = argv.index("--")
        if "lab" in argv[:cut]:
            return argv[:cut], argv[cut + 1 :]
    return argv, []


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM: stop like Ctrl-C (a second SIGTERM during the cleanup ends the process at once)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zett-lab`` console script; returns the exit code (:data:`EXIT_CODES`)."""
    import warnings

    parser = build_parser()
    arguments, passthrough = _split_passthrough(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(arguments)
    if passthrough:
        args.jupyter_args = passthrough
    debug = getattr(args, "debug", False)
    for stream in (sys.stdout, sys.stderr):  # a name with bytes that are not UTF-8 prints as escapes, never an error
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if on_main_thread else None
    try:
        with warnings.catch_warnings(), claims_released():
            warnings.showwarning = _show_warning
            return COMMANDS[args.command](args)
    except KeyboardInterrupt as stop:
        if debug:
            raise
        terminated = isinstance(stop, Terminated)
        print(f"{PROG}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `zett-lab replay ... | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILURES
    except ZettLabError as error:
        if debug:
            raise
        print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_FAILURES if isinstance(error, ResultFailure) else EXIT_ERROR
    except OSError as error:
        if debug:
            raise
        where = f"{error.filename}: " if getattr(error, "filename", None) else ""
        print(f"{PROG}: error: {where}{error.strerror or _one_line(error)}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if on_main_thread:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


if __name__ == "__main__":  # python -m zett_lab.show.cli
    sys.exit(main())
