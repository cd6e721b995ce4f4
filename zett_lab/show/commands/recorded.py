"""The ``zett-lab`` commands over recorded conversations: ``import`` (into zett-agent storage or neutral JSON),
``replay`` (one conversation at one setting, its steps and compactions printed) and ``sweep`` (a grid, saved)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InputError, SettingError, ZettLabError
from ...load.conversation import probes_sidecar_path
from ...replay.schema import COMPACTION_SUMMARY_COLUMNS, STEP_SUMMARY_COLUMNS
from ..arguments import EXIT_OK
from .common import (
    Reading,
    check_summarizers,
    checked_output,
    input_files,
    load_conversations,
    open_cache,
    report_failures,
    scheduler,
    shown,
    took,
    work_done,
)

if TYPE_CHECKING:
    from ...replay.setting import Setting
    from ...replay.trace import Trace


def cmd_import(args: argparse.Namespace) -> int:
    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix not in (".sqlite", ".db", ".json"):
        raise SettingError(f"{out}: output must end in .sqlite or .db (zett-agent database) or .json (neutral JSON)")
    checked_output(args.output, args.paths, args)
    if suffix != ".json":  # the database's probes sidecar is part of the output (see write_sqlite)
        checked_output(str(probes_sidecar_path(out)), args.paths, args)
    if not out.parent.is_dir():
        raise InputError(out, None, f"folder {out.parent} does not exist")
    started = time.perf_counter()
    reading = Reading(args.skip_unreadable)
    conversations = load_conversations(args.paths, progress=not args.no_progress, reading=reading)
    ids = [c.id for c in conversations]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise InputError(
            args.paths[0], f"session {duplicates[0]!r}", "the same session id occurs more than once in the inputs"
        )
    reading.name_passed_over()
    if suffix == ".json":
        from ...load.neutral_writer import write_neutral

        write_neutral(conversations, out, overwrite=args.force)
    else:
        from ...load.zett import write_sqlite

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
        f"{shown(out)} in {took(started)}; {reading.counts()}"
    )
    if suffix != ".json" and (sidecar := probes_sidecar_path(out)).exists():
        print(f"probes and native compactions: {shown(sidecar)}")
    return reading.exit_code(EXIT_OK)


def _table(frame: Any, columns: list[str], limit: int | None = None) -> str:
    import pandas as pd

    from ...formatting import blank_missing, frame_formatters

    shown = frame[[c for c in columns if c in frame.columns]]
    written = frame_formatters(shown)
    shown = blank_missing(shown)
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
    from ...replay.schema import BELOW_THRESHOLD

    reasons = steps["skip_reason"].dropna()
    over = reasons[reasons != BELOW_THRESHOLD].value_counts()
    if not len(over):
        return "compactions: none (the engine's estimate never exceeded max_tokens)"
    listing = ", ".join(f"{count} {reason}" for reason, count in over.items())
    return f"compactions: none; {int(over.sum())} step(s) exceeded max_tokens and the engine found no window to summarize ({listing})"


def cmd_replay(args: argparse.Namespace) -> int:
    from ...replay.engine_names import engine_from_spec
    from ...replay.run import replay
    from ...replay.setting import ReplayOptions, Setting

    engine = engine_from_spec(args.engine) if args.engine else None
    if args.output:
        if Path(args.output).suffix not in (".parquet", ".json"):
            raise SettingError(f"{args.output}: a trace is saved as .parquet or .json")
        checked_output(args.output, [args.path], args)
    if args.summarizer:
        check_summarizers([args.summarizer])
    cache = open_cache(args, [args.path])
    reading = Reading(args.skip_unreadable)
    conversations = load_conversations(
        [args.path], [args.session] if args.session is not None else None, reading=reading
    )
    if len(conversations) > 1:
        listing = ", ".join(c.id for c in conversations[:20])
        raise InputError(
            args.path, None, f"holds {len(conversations)} conversations ({listing}); choose one with --session ID"
        )
    conversation = conversations[0]
    if args.output:
        checked_output(args.output, input_files([conversation], cache), args)
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
    _print_replay(trace, setting, reading, all_steps=args.all_steps)
    if args.output:
        path = trace.save(args.output, overwrite=args.force)
        print(f"saved trace to {shown(path)}")
    return reading.exit_code(report_failures(trace.failure_counts))


def _print_replay(trace: Trace, setting: Setting, reading: Reading, *, all_steps: bool) -> None:
    """What ``replay`` prints: the conversation and ``setting``, the steps (60 unless ``all_steps``), the
    compactions, and the totals."""
    conversation = trace.conversation
    summary = trace.summary()
    from ...formatting import count

    print(
        f"conversation {conversation.id}: {count(summary['messages'])} messages, {count(summary['steps'])} steps; "
        f"max_tokens={count(setting.max_tokens)}, keep_recent_tokens={count(setting.keep_recent_tokens)}, "
        f"summarizer={trace.settings.summarizer}, engine={setting.engine_name}, "
        f"zett-agent {trace.settings.zett_agent_version}"
    )
    print()
    print("steps:")
    print(_table(trace.steps, STEP_SUMMARY_COLUMNS, None if all_steps else 60))
    print()
    if len(trace.compactions):
        print("compactions:")
        print(_table(trace.compactions, COMPACTION_SUMMARY_COLUMNS))
    else:
        print(_no_compaction_line(trace.steps))
    print()
    print(
        f"applied {summary['compactions_applied']}, not smaller {summary['rejected_not_smaller']}, "
        f"failed {summary['failed']}; peak context {count(summary['peak_context'])} tokens; "
        f"{count(summary['steps_over_budget'])} step(s) over budget; "
        f"{count(summary['total_input_tokens'])} input tokens in total; "
        f"{reading.counts()}"
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    from ...measure.cost import price_for
    from ...replay.engine_names import labelled_engines
    from ...study import check_sweep_target, measured_cells
    from ...study.sweep import sweep
    from ...summarizers import DEFAULT_SUMMARIZER

    engines = labelled_engines(args.engine) if args.engine else None
    out = checked_output(args.output, args.paths, args, folder=True)
    summarizers = args.summarizer or [DEFAULT_SUMMARIZER]
    check_summarizers(summarizers)
    if args.primary_model:  # priced at the end: a model without a price fails now, as the report's does
        price_for(args.primary_model)
    cache = open_cache(args, args.paths)
    started = time.perf_counter()
    reading = Reading(args.skip_unreadable)
    conversations = load_conversations(args.paths, args.session, progress=not args.no_progress, reading=reading)
    checked_output(args.output, input_files(conversations, cache), args, folder=True)
    check_sweep_target(out)
    reading.name_passed_over()
    with scheduler(args.scheduler) as executor:
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
            skipped_files=reading.skipped,
        )
    result.save(out, overwrite=args.force)
    unmeasured = int((~measured_cells(result.results)).sum())
    print(
        f"swept {len(conversations)} conversation(s) x {len(args.max_tokens)} max_tokens x "
        f"{len(args.keep_recent_tokens)} keep_recent_tokens x {len(summarizers)} summarizer(s)"
        + (f" x {len(engines)} engine(s) ({', '.join(engines)})" if engines else "")
        + f" ({work_done(result)}) in {took(started)}; saved to {shown(out)}; {reading.counts()}"
        + (
            f"; {unmeasured} of {len(result.results)} cell(s) are no measurement (failed summaries or replays: "
            "see the failed, summary_error and error columns)"
            if unmeasured
            else ""
        )
    )
    return reading.exit_code(report_failures(result.failure_counts))
