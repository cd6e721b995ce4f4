"""Grids of replays: conversations × engines × summarizers × max_tokens × keep_recent_tokens.

:func:`sweep` replays every cell of the grid through the real engine and returns a
:class:`~zett_lab.study.results.Sweep`: a tidy results table (one row per conversation ×
engine × summarizer × setting, with the budget figures of :meth:`Trace.summary`, token and money cost
from :mod:`zett_lab.measure.cost`, the offline loss metrics of :func:`zett_lab.measure`, and
an ``error`` column) plus every cell's :class:`Trace`, kept on disk.

Every cell is exactly what :func:`zett_lab.replay` gives for that setting alone. Speed comes
from sharing work, never from approximating the engine:

- one exact memoizing token counter per worker process, shared by all its replays;
- the persistent summary cache (:class:`~zett_lab.summarizers.SummaryCache`): a summary
  request seen before, in this sweep or an earlier one, is not computed again;
- proven reuse (:mod:`zett_lab.study.regions`): one replay proves a whole rectangle of
  settings takes the same decisions (e.g. every ``max_tokens`` above the peak estimate,
  with any ``keep_recent_tokens``); cells inside it get that replay's trace with only the
  setting columns changed;
- forked replays (:mod:`zett_lab.replay.fork`): a setting that takes another replay's
  decisions up to some turn starts there, from the engine state that replay left, so a grid
  pays for each distinct decision path once.

Both proofs are made for the stock engine; a user engine (``engines=``) shares work only
along the limits it declares (``zett_lab_reuse``), one that declares none replays every cell.

Work is split into units of one conversation, engine and summarizer (split further by
``keep_recent_tokens`` when there are fewer units than workers; :mod:`zett_lab.study.plan`), run on any
:class:`concurrent.futures.Executor` (:mod:`zett_lab.study.executors`), and collected as they
finish (:mod:`zett_lab.study.collect`): each distinct replay's tables and engine events go to disk at once (a worker on this
machine writes them itself; one on a cluster sends them back), so memory does not grow with the
number of cells. A unit that fails (or a worker that dies) marks only its own cells with the
error, and a rerun picks up the finished summaries from the cache. A cell whose replay had
failed summaries is marked (``failed``, ``summary_error``) and is no measurement
(:func:`~zett_lab.study.choose.measured_cells`). The default pool starts
its workers with ``forkserver``: a script (not a notebook) that sweeps with it needs the
usual ``if __name__ == "__main__":`` guard.

Example::

    >>> import zett_lab
    >>> from zett_lab.study import sweep, recommend
    >>> s = sweep(zett_lab.load_all("fixtures/"), max_tokens=[0.1, 0.2, 0.4],
    ...           keep_recent_tokens=[0.02, 0.05], summarizers=["anchors:0.1", "mask"],
    ...           context_window="gpt-4o")                                   # doctest: +SKIP
    >>> s.results[["conversation_id", "max_tokens", "needed_anchor_recall"]]   # doctest: +SKIP
    >>> recommend(s, "needed_anchor_recall >= 0.9 and constraint_survival == 1")  # doctest: +SKIP
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from zett_agent.model import AgentModel

from ..errors import SummaryFailureWarning
from ..load import SkippedFile
from ..load.conversation import Conversation
from ..measure.catalogue import plugin_modules
from ..progress import Progress, ProgressEvent
from ..replay.engine import EngineSpec, engine_name, engine_reuse
from ..summarizers import SummaryCache
from .choose import measured_cells
from .collect import Collector, run_plan
from .executors import is_remote, resolve_executor
from .grid import GridValue
from .kept_times import KeptTimes, keep_runs
from .plan import Plan, UnitOptions, plan_sweep
from .result_columns import results_frame
from .results import Sweep, SweepConfig
from .store import SweepStore


def sweep(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
    *,
    max_tokens: Sequence[GridValue] | GridValue,
    keep_recent_tokens: Sequence[GridValue] | GridValue,
    summarizers: Sequence[str | AgentModel] | str | None = None,
    engines: Mapping[str, EngineSpec] | None = None,
    executor: cf.Executor | str | None = None,
    progress: bool | Callable[[ProgressEvent], None] = True,
    cache: SummaryCache | str | os.PathLike[str] | bool | None = None,
    context_window: int | str | None = None,
    primary_model: str | None = None,
    prices: Mapping[str, object] | None = None,
    metrics: bool = True,
    reuse: bool = True,
    at_tail: Callable[[], object] | None = None,
    skipped_files: Sequence[SkippedFile] = (),
    **replay_options: object,
) -> Sweep:
    """Replay every conversation under every setting and summarizer; see the module docstring.

    Long on purpose: the sweep's stages in order (plan, run, keep the units' times, assemble the result).

    Args:
        conversations: a Conversation, a list of them, or a path for :func:`zett_lab.load_all`.
        max_tokens, keep_recent_tokens: token counts (ints) or fractions of
            ``context_window`` (floats in (0, 1]). ``keep_recent_tokens >= max_tokens`` is
            allowed (the engine allows it) and simply reported.
        summarizers: specs for :func:`zett_lab.summarizer` and/or AgentModel instances
            (picklable ones for a process executor); None: the default offline summarizer.
        engines: ``{label: engine}``: compaction engines to compare (None: the stock engine,
            a ``CompactionExtension`` subclass, or a factory, as for :func:`zett_lab.replay`);
            the labels fill the ``engine`` column. None: ``{"stock": None}``. Each is built
            once before anything runs, so a failing factory is one error. Proven reuse and
            forks are applied to an engine only along the limits it declares (``zett_lab_reuse``).
        executor: None (the session's process pool, one worker per core), ``"serial"``, or any
            :class:`concurrent.futures.Executor` (e.g. ``distributed.Client.get_executor()``).
        progress: a progress bar with an ETA (tqdm: a widget in a notebook, from the start; on
            stderr in a terminal, once the sweep takes a second); False for none; or a function called with a
            :class:`ProgressEvent` after each unit.
        cache: the summary cache: a SummaryCache, a path, None (the default cache) or False.
        context_window: tokens, or a model name from :data:`~zett_lab.study.grid.CONTEXT_WINDOWS`.
        primary_model: price the primary model's input (``*_usd`` columns); None: tokens only.
        prices: price overrides for :func:`zett_lab.measure.cost.add_costs`.
        metrics: compute the offline loss metrics.
        reuse: share proven-identical replays and forks between settings (off: replay every cell).
        at_tail: the caller's work for after the sweep (e.g. imports its results will need), run in a thread
            of this process once every unit has gone out and a worker has nothing left to do, so it takes
            a core the sweep's last units leave idle; the sweep returns once it is done and raises what it
            raised.
        skipped_files: files of the input folders that could not be read (``load_all``'s ``on_file`` names
            them): kept in the sweep's config and saved with it, so its reports list them.
        **replay_options: passed to :func:`zett_lab.replay` (``usage``, ``reasoning_effort``,
            ``strict``, ``engine_timeout``, ``compact_at``, ``count_tokens``, ...). With ``strict=True`` the sweep
            stops at its first failed cell.

    Raises:
        SettingError: an empty grid, a bad value, an unknown summarizer spec, engine or option;
            :class:`~zett_lab.replay.engine.EngineError` for an engine that cannot be built.
        ResultFailure: with ``strict=True``, the first failed cell (named).
    """
    started, cpu_started = time.perf_counter(), time.process_time()
    runner, runner_name = resolve_executor(executor)
    if replay_options.get("compact_at"):
        reuse = False  # manual passes: every setting is its own replay
    plan = plan_sweep(
        conversations,
        max_tokens,
        keep_recent_tokens,
        summarizers,
        engines,
        cache,
        context_window,
        runner,
        dict(replay_options),
        UnitOptions(
            metrics=metrics,
            primary_model=primary_model,
            prices=prices,
            reuse=reuse,
            metric_modules=plugin_modules() if metrics else (),
        ),
    )
    collector = Collector(plan, reuse, remote=is_remote(runner))
    tracker = Progress(total=sum(len(u.cells) for u in plan.units), label="sweep", show=progress)
    try:
        run_plan(plan, runner, collector, tracker, strict=bool(replay_options.get("strict")), at_tail=at_tail)
    finally:
        tracker.close()
    keep_runs(KeptTimes.beside(getattr(plan.cache, "path", None)), plan.units, plan.keys, collector.finished)
    swept = _swept(
        plan,
        collector,
        runner_name,
        replay_options,
        context_window,
        primary_model=primary_model,
        metrics=metrics,
        reuse=reuse,
        started=(started, cpu_started),
        skipped_files=skipped_files,
    )
    _warn_failures(swept)
    return swept


def _swept(
    plan: Plan,
    collector: Collector,
    runner_name: str,
    replay_options: dict[str, Any],
    context_window: int | str | None,
    *,
    primary_model: str | None,
    metrics: bool,
    reuse: bool,
    started: tuple[float, float],
    skipped_files: Sequence[SkippedFile],
) -> Sweep:
    """The :class:`Sweep` of a plan run to the end: its results in grid order, its config, its replays on disk
    (``started``: the wall clock and this process's CPU time when the sweep began)."""
    rows, cell_map = collector.rows()
    results = results_frame(rows, plan.window is not None)
    config = _config(
        plan,
        collector,
        results,
        runner_name,
        replay_options,
        context_window,
        primary_model=primary_model,
        metrics=metrics,
        reuse=reuse,
        elapsed=time.perf_counter() - started[0],
        driver_cpu=time.process_time() - started[1],
    )
    config["skipped_files"] = [SkippedFile(path=f["path"], reason=f["reason"]) for f in skipped_files]
    return Sweep(
        results=results,
        config=config,
        store=SweepStore({c.id: c for c in plan.conversations}, collector.sources, cell_map),
    )


def _warn_failures(swept: Sweep) -> None:
    """One :class:`~zett_lab.errors.SummaryFailureWarning` per distinct failure cause of the sweep."""
    for failure in swept.failure_counts.itertuples(index=False):
        warnings.warn(
            f"{failure.count} {failure.what}(s) failed ({failure.summarizer}): {failure.cause}; "
            "those cells are no measurement (see Sweep.failure_counts)",
            SummaryFailureWarning,
            stacklevel=3,
        )


def _config(
    plan: Plan,
    collector: Collector,
    results: pd.DataFrame,
    runner_name: str,
    replay_options: dict[str, Any],
    context_window: int | str | None,
    *,
    primary_model: str | None,
    metrics: bool,
    reuse: bool,
    elapsed: float,
    driver_cpu: float,
) -> SweepConfig:
    finished = collector.finished.values()
    replayed = results["replayed"] == True if "replayed" in results else None  # noqa: E712 - nullable booleans
    shared = results["shared_steps"].fillna(0) if "shared_steps" in results else None
    return SweepConfig(
        conversations=[c.id for c in plan.conversations],
        max_tokens=[m for m, _ in plan.max_values],
        keep_recent_tokens=[k for k, _ in plan.keep_values],
        summarizers=plan.labels,
        summarizer_identities=plan.identities,
        engines=[label for label, _ in plan.engines],
        engine_identities=[engine_name(engine) for _, engine in plan.engines],
        engine_reuse={label: list(engine_reuse(engine)) for label, engine in plan.engines},
        context_window=plan.window,
        context_window_name=context_window if isinstance(context_window, str) else None,
        primary_model=primary_model,
        metrics=metrics,
        reuse=reuse,
        setting={
            name: value
            for name, value in plan.template.names().items()
            if name not in ("max_tokens", "keep_recent_tokens", "summarizer", "engine")
        },
        replay_options={
            k: (v if isinstance(v, (str, int, float, bool, list, type(None))) else repr(v))
            for k, v in replay_options.items()
        },
        cache=str(plan.cache.path) if plan.cache is not None else None,
        executor=runner_name,
        units=len(plan.units),
        workers=sorted({r.worker for r in finished}),
        replays=int(replayed.sum()) if replayed is not None else 0,
        forked=int(((shared > 0) & replayed).sum()) if shared is not None and replayed is not None else 0,
        shared_steps=int(shared.sum()) if shared is not None else 0,
        reused=int((results["replayed"] == False).sum()) if "replayed" in results else 0,  # noqa: E712
        errors=int(results["error"].notna().sum()),
        cells_with_failed_summaries=int((results["error"].isna() & ~measured_cells(results)).sum()),
        model_calls=int(results["model_calls"].fillna(0).sum()) if "model_calls" in results else 0,
        cache_hits=int(results["cache_hits"].fillna(0).sum()) if "cache_hits" in results else 0,
        summaries_merged=collector.merged,
        elapsed_s=round(elapsed, 3),
        worker_cpu_s=round(sum(r.cpu_seconds for r in finished), 3),
        worker_busy_s=round(sum(r.seconds for r in finished), 3),
        driver_cpu_s=round(driver_cpu, 3),
        unit_times=_unit_times(plan, collector),
    )


def _unit_times(plan: Plan, collector: Collector) -> list[dict[str, Any]]:
    """Per unit that ran, in submission order: what it was, where it ran, its wall, CPU and setup CPU seconds, and
    the seconds of the summaries it computed."""
    out = []
    for unit in plan.order:
        ran = collector.finished.get(unit.index)
        if ran is None:
            continue
        out.append(
            {
                "unit": unit.index,
                "conversation_id": unit.conversation.id,
                "engine": unit.engine_label,
                "summarizer": unit.label,
                "cells": len(unit.cells),
                "worker": ran.worker,
                "seconds": round(ran.seconds, 3),
                "cpu_s": round(ran.cpu_seconds, 3),
                "setup_cpu_s": round(ran.setup_cpu_seconds, 3),
                "summary_s": round(ran.summary_seconds, 3),
            }
        )
    return out
