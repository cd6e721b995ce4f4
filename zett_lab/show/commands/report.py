"""The ``zett-lab report`` command: a report over recorded conversations (swept here) or over a saved sweep."""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import Executor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError, SettingError
from ...progress import Progress
from ..arguments import PROG
from .common import (
    Reading,
    check_summarizers,
    checked_output,
    input_files,
    is_sweep,
    load_conversations,
    open_cache,
    report_failures,
    scheduler,
    shown,
    took,
    work_done,
)

if TYPE_CHECKING:
    from ...study.results import Sweep


def cmd_report(args: argparse.Namespace) -> int:
    out = Path(args.output)
    fmt = args.format or {".md": "md", ".markdown": "md", ".json": "json"}.get(out.suffix.lower(), "html")
    paths = [Path(p) for p in args.paths]
    for path in paths:
        if not path.exists():
            raise InputError(path, None, "no such file or directory")
    sweep_files = [p for p in paths if is_sweep(p)]
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
    _check_report_options(out, options, over_saved_sweep=bool(sweep_files))
    checked_output(args.output, paths, args)
    with scheduler(args.scheduler) as executor:
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
    from ..report import Report

    started = time.perf_counter()
    reading = Reading(args.skip_unreadable)
    if sweep_files:
        result = _saved_sweep(args, sweep_files[0], options, reading)
    else:
        result = _new_sweep(args, recorded, options, executor, reading, fmt)
    # After the sweep's bar: measuring the replays the report shows, then its figures and page.
    phases = Progress(2, "report", not args.no_progress, unit="part")
    try:
        report = Report(sweep=result, executor=executor, **options)
        phases.advance(1)
        report.save(out, format=fmt, overwrite=args.force)
        phases.advance(1)
    finally:
        phases.close()
    sweep_done = f"; {work_done(report.sweep)}" if report.sweep is not None else ""
    print(
        f"wrote {fmt} report to {shown(out)} ({out.stat().st_size:,} bytes): {len(report.conversations)} conversation(s), "
        f"{report.data.arms.counted}, {len(report.traces)} replay(s){sweep_done}; "
        f"{reading.counts() if not sweep_files else 'from a saved sweep'}; in {took(started)}"
    )
    if not len(report.results):
        print(
            f"{PROG}: no replay in this report is a measurement: every one failed or had a failed summary",
            file=sys.stderr,
        )
    return reading.exit_code(report_failures(report.failure_counts))


def _saved_sweep(args: argparse.Namespace, path: Path, options: dict[str, Any], reading: Reading) -> Sweep:
    """The saved sweep a report is made from (the grid options apply only to recorded conversations; the
    summarizers named on this run summarize the production spans). The files its sweep could not read are
    named again, and count as this run's (exit 1 unless ``--skip-unreadable``)."""
    from ...study.choose import need_columns, parse_constraints
    from ...study.results import Sweep

    if args.max_tokens or args.keep_recent_tokens or args.engine:
        raise SettingError(
            "--max-tokens/--keep-recent-tokens/--engine apply to recorded conversations, not to a saved sweep"
        )
    if args.summarizer:  # over saved results, only the summarizers named on this run are called
        check_summarizers(args.summarizer)
        options["native_baselines"] = list(args.summarizer)
    saved = Sweep.load(path)
    checked_output(args.output, saved.input_files(), args)
    if options.get("constraints"):
        need_columns(saved.results, *(c.column for c in parse_constraints(options["constraints"])))
    for skipped in saved.skipped_files:
        reading(Path(skipped["path"]), skipped["reason"], True)
    reading.name_passed_over()
    return saved


def _new_sweep(
    args: argparse.Namespace,
    recorded: list[Path],
    options: dict[str, Any],
    executor: Executor | None,
    reading: Reading,
    fmt: str,
) -> Sweep:
    """The report's sweep over recorded conversations: its summarizers (default: the offline ones) over its grid
    (default: scaled to the conversations, :func:`~zett_lab.report.default_grid`; ``--max-tokens`` and
    ``--keep-recent-tokens`` replace an axis); at its tail, the modules a report in ``fmt`` needs are imported."""
    from ...replay.engine_names import labelled_engines
    from ...report import DEFAULT_PRIMARY_MODEL, DEFAULT_REPORT_SUMMARIZERS, default_grid, report_sweep
    from ...study.executors import default_executor
    from ..report.core import import_report_modules

    engines = labelled_engines(args.engine) if args.engine else None
    cache = open_cache(args, recorded)
    conversations = load_conversations([str(p) for p in recorded], progress=not args.no_progress, reading=reading)
    checked_output(args.output, input_files(conversations, cache), args)
    if args.explore is not None and args.explore not in {c.id for c in conversations}:
        raise SettingError(
            f"--explore {args.explore!r}: no such conversation; found: {', '.join(c.id for c in conversations[:20])}"
        )
    summarizers = args.summarizer or list(DEFAULT_REPORT_SUMMARIZERS)
    check_summarizers(summarizers)
    if executor is None:  # every check passed: the local pool starts while the grid and the plan are made
        default_executor()
    options["native_baselines"] = list(summarizers)
    grid = default_grid(conversations, options.get("primary_model", DEFAULT_PRIMARY_MODEL))
    if args.max_tokens:
        grid["max_tokens"] = args.max_tokens
    if args.keep_recent_tokens:
        grid["keep_recent_tokens"] = args.keep_recent_tokens
    reading.name_passed_over()
    return report_sweep(
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
        at_tail=partial(import_report_modules, html=fmt == "html"),
        skipped_files=reading.skipped,
    )


def _check_report_options(out: Path, options: dict[str, Any], *, over_saved_sweep: bool) -> None:
    """Fail before any replay on a setting the report would only reject at the end (a constraint's columns: those
    a sweep's results may have; over a saved sweep, its own, once it is read)."""
    from ...measure.cost import price_for
    from ...report import DEFAULT_PRIMARY_MODEL
    from ..report import report_date
    from ..report.core import check_report_path

    check_report_path(out)
    report_date(options.get("date"))
    price_for(options.get("primary_model") or DEFAULT_PRIMARY_MODEL)
    if options.get("constraints"):
        from ...study import parse_constraints
        from ...study.choose import need_result_columns

        constraints = parse_constraints(options["constraints"])
        if not over_saved_sweep:
            need_result_columns(*(c.column for c in constraints))
    if options.get("objectives"):
        from ...study.recommendation import parse_objectives

        parse_objectives(options["objectives"])
