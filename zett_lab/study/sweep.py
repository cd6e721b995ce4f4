"""Grids of replays: conversations × max_tokens × keep_recent_tokens × summarizers.

:func:`sweep` replays every cell of the grid through the real engine and returns a
:class:`Sweep`: a tidy results table (one row per conversation × setting × summarizer,
with the budget figures of :meth:`Trace.summary`, token and money cost from
:mod:`zett_lab.measure.cost`, the offline loss metrics of :func:`zett_lab.measure.measure`, and an
``error`` column) plus every cell's :class:`Trace`.

Every cell is exactly what :func:`zett_lab.replay` gives for that setting alone. Speed comes
from sharing work, never from approximating the engine:

- one exact memoizing token counter per worker process, shared by all its replays;
- the persistent summary cache (:class:`~zett_lab.summarizers.SummaryCache`): a summary
  request seen before, in this sweep or an earlier one, is not computed again;
- proven reuse (:mod:`zett_lab.study.boundaries`): one replay proves a whole rectangle of
  settings takes the same decisions (e.g. every ``max_tokens`` above the peak estimate,
  with any ``keep_recent_tokens``); cells inside it get that replay's trace with only the
  setting columns changed. Each worker remembers proven replays across units and sweeps.

Work is split into units of one (conversation, summarizer, keep_recent_tokens) column, run
on any :class:`concurrent.futures.Executor` (default: a process pool kept for the session;
``"serial"``; a ``dask.distributed`` ``client.get_executor()``), and collected as they
finish: a unit that fails (or an executor that dies) marks only its own cells with the
error, and a rerun picks up the finished summaries from the cache. The default pool starts
its workers with ``forkserver``: a script (not a notebook) that sweeps with it needs the
usual ``if __name__ == "__main__":`` guard.

Example::

    >>> import zett_lab
    >>> from zett_lab.study.sweep import sweep, recommend
    >>> s = sweep(zett_lab.load_all("fixtures/"), max_tokens=[0.1, 0.2, 0.4],
    ...           keep_recent_tokens=[0.02, 0.05], summarizers=["anchors:0.1", "mask"],
    ...           context_window="gpt-4o")                                   # doctest: +SKIP
    >>> s.results[["conversation_id", "max_tokens", "needed_anchor_recall"]]   # doctest: +SKIP
    >>> recommend(s, "needed_anchor_recall >= 0.9 and instruction_survival == 1")  # doctest: +SKIP
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import functools
import hashlib
import html
import itertools
import json
import math
import multiprocessing
import os
import pickle
import re
import threading
import time
import uuid
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from zett_agent.model import ReasoningEffort

from ..errors import (
    InputError,
    OutputError,
    ResultFailure,
    SettingError,
    SettingWarning,
    SummaryFailureWarning,
    ZettLabError,
)
from ..files import atomic_folder, check_output
from ..load.conversation import Conversation
from ..measure.catalogue import CATALOGUE, higher_is_better
from ..measure.catalogue import label as metric_label
from ..records import is_missing
from ..replay.engine import EngineSpec, ReplayProbe, build_engine, check_engine, engine_name, engine_reuse
from ..replay.recorder import COMPACTION_COLUMNS, STEP_COLUMNS
from ..replay.trace import (
    Trace,
    combine_failure_counts,
    count_causes,
    failure_counts,
    frame,
)
from ..tokens import count_tokens as default_counter
from .boundaries import (
    Boundaries,
    Region,
    decision_boundaries,
    derive,
    region,
    same_replay,
)

__all__ = [
    "CONTEXT_WINDOWS",
    "Boundaries",
    "NoFeasibleSetting",
    "Recommendation",
    "SerialExecutor",
    "Sweep",
    "clear_worker_state",
    "decision_boundaries",
    "default_executor",
    "higher_is_better",
    "measured_cells",
    "pareto_front",
    "parse_constraints",
    "recommend",
    "resolve_context_window",
    "same_replay",
    "shutdown_default_executor",
    "sweep",
]

#: Context windows (tokens) of common models, for settings given as fractions of a window.
#: Names follow ``zett_lab/data/prices.json``; a provider prefix (``openai:``) and a dated
#: suffix (``-2025-08-07``) are ignored. Pass an int for anything else.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-5-haiku": 200_000,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}

#: The setting columns that identify a cell (with ``conversation_id``).
SETTING_COLUMNS = ("engine", "summarizer", "max_tokens", "keep_recent_tokens")
#: The ``engine`` label of the stock ``CompactionExtension`` when a sweep is given no ``engines``.
STOCK_ENGINE = "stock"
#: Replay options a sweep passes through to :func:`zett_lab.replay`.
REPLAY_OPTIONS = (
    "reasoning_effort",
    "strict",
    "compact_at",
    "usage",
    "usage_overhead",
    "on_missing_usage",
    "count_tokens",
)
#: Concurrent replays per unit for summarizers that call a provider (offline ones run one at a time).
DEFAULT_PROVIDER_CONCURRENCY = 4
#: Conversation-metric columns that depend on the setting and not only on the replay.
_SETTING_DEPENDENT_METRICS = ("max_tokens", "keep_recent_tokens", "steps_over_budget")
_SWEEP_FORMAT = "zett-lab-sweep"
_SWEEP_VERSION = 1


# --- settings -------------------------------------------------------------------------------


def resolve_context_window(context_window: int | str | None) -> int | None:
    """Tokens of a context window given as an int or a model name from :data:`CONTEXT_WINDOWS`."""
    if context_window is None:
        return None
    if isinstance(context_window, bool):
        raise SettingError(f"context_window must be an int or a model name, got {context_window!r}")
    if isinstance(context_window, int):
        if context_window < 1:
            raise SettingError(f"context_window must be positive, got {context_window}")
        return context_window
    if not isinstance(context_window, str):
        raise SettingError(f"context_window must be an int or a model name, got {type(context_window).__name__}")
    name = re.sub(r"@\S*$", "", context_window.strip())
    name = name.split(":", 1)[1] if ":" in name else name
    name = name.split("/")[-1].lower()
    if name in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[name]
    for key in sorted(CONTEXT_WINDOWS, key=len, reverse=True):
        if name.startswith(key) and re.fullmatch(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest|preview.*)", name[len(key):]):
            return CONTEXT_WINDOWS[key]
    raise SettingError(
        f"unknown model {context_window!r} for context_window; known: {', '.join(sorted(CONTEXT_WINDOWS))} "
        "(or pass the window as an int)"
    )


def _resolve_values(values: Any, name: str, window: int | None) -> list[tuple[int, float | None]]:
    """``[(tokens, share of the window or None)]`` from ints and fractions, in order, without duplicates."""
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    try:
        items = list(values)
    except TypeError:
        raise SettingError(f"{name} must be a list of ints or fractions, got {values!r}") from None
    if not items:
        raise SettingError(f"{name} is empty: a sweep needs at least one value")
    resolved: list[tuple[int, float | None]] = []
    seen: set[int] = set()
    for value in items:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise SettingError(f"{name} entry {value!r} is not a number")
        if isinstance(value, (float, np.floating)):
            if not 0 < value <= 1:
                raise SettingError(
                    f"{name} entry {value!r}: a float is a fraction of context_window in (0, 1]; use an int for tokens"
                )
            if window is None:
                raise SettingError(
                    f"{name} entry {value!r} is a fraction: pass context_window= (an int or a model name)"
                )
            tokens, share = max(1, round(float(value) * window)), float(value)
        else:
            tokens, share = int(value), None
            if tokens < 1:
                raise SettingError(f"{name} entry {value!r} must be a positive number of tokens")
        if tokens not in seen:
            seen.add(tokens)
            resolved.append((tokens, share))
    return resolved


def _conversations(conversations: Any) -> list[Conversation]:
    if isinstance(conversations, Conversation):
        items = [conversations]
    elif isinstance(conversations, (str, os.PathLike)):
        from ..load import load_all

        items = load_all(Path(conversations))
    else:
        try:
            items = list(conversations)
        except TypeError:
            raise SettingError(
                f"conversations must be a Conversation, a list of them or a path, got {type(conversations).__name__}"
            ) from None
    if not items:
        raise SettingError("conversations is empty: a sweep needs at least one conversation")
    ids: set[str] = set()
    for item in items:
        if not isinstance(item, Conversation):
            raise SettingError(f"conversations must hold Conversation objects, got {type(item).__name__}")
        if item.id in ids:
            raise SettingError(f"two conversations share the id {item.id!r}; ids must be unique within a sweep")
        ids.add(item.id)
    return items


def _fingerprint(conversation: Conversation) -> str:
    """A content hash of what replay reads from a conversation (id, messages, usage)."""
    from dataclasses import asdict

    from zett_agent.storage import encode_messages

    digest = hashlib.sha256()
    digest.update(conversation.id.encode())
    digest.update(json.dumps(encode_messages(conversation.messages), sort_keys=True, default=repr).encode())
    digest.update(
        json.dumps({str(k): asdict(v) for k, v in sorted(conversation.usage.items())}, sort_keys=True).encode()
    )
    return digest.hexdigest()


def _label(spec: Any) -> str:
    from ..summarizers import summarizer_identity

    return spec.strip() if isinstance(spec, str) else summarizer_identity(spec)


def _is_offline(model: Any) -> bool:
    from ..summarizers import OfflineSummarizer

    return isinstance(model, OfflineSummarizer)


# --- work units (run in worker processes) -------------------------------------------------------


@dataclass
class _Unit:
    """One (conversation, summarizer, keep_recent_tokens) column of the grid."""

    index: int
    conversation: Conversation
    fingerprint: str
    summarizer: Any
    label: str
    keep_recent_tokens: int
    max_tokens: list[int]
    cache: Any
    replay_options: dict[str, Any]
    metrics: bool
    primary_model: str | None
    prices: Any
    concurrency: int
    reuse: bool
    engine: EngineSpec = None
    engine_label: str = STOCK_ENGINE


@dataclass
class _Proven:
    source_id: str
    region: Region
    trace: Trace
    row: dict[str, Any] | None = None
    row_error: str | None = None


class _ProofStore:
    """Replays this process has run, with the settings each one provably stands for (LRU)."""

    def __init__(self, limit: int = 512) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple, list[_Proven]] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, key: tuple, max_tokens: int, keep_recent_tokens: int) -> _Proven | None:
        with self._lock:
            items = self._items.get(key)
            if not items:
                return None
            self._items.move_to_end(key)
            for item in items:
                if item.region.contains(max_tokens, keep_recent_tokens):
                    return item
        return None

    def add(self, key: tuple, proven: _Proven) -> None:
        with self._lock:
            items = self._items.setdefault(key, [])
            if any(item.source_id == proven.source_id for item in items):
                return
            items.append(proven)
            self._items.move_to_end(key)
            while sum(len(v) for v in self._items.values()) > self.limit and len(self._items) > 1:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_STORE = _ProofStore()


def clear_worker_state() -> None:
    """Forget the proven replays this process remembers (workers of a pool keep their own)."""
    _STORE.clear()


def _store_key(unit: _Unit, identity: str) -> tuple:
    options = unit.replay_options
    counter = options.get("count_tokens")
    counter_name = (
        None
        if counter is None
        else f"{getattr(counter, '__module__', '')}.{getattr(counter, '__qualname__', type(counter).__name__)}"
    )
    rest = json.dumps({k: v for k, v in options.items() if k != "count_tokens"}, sort_keys=True, default=str)
    cache = unit.cache
    cache_key = "off" if cache is False else str(getattr(cache, "path", None))
    row_options = json.dumps([unit.metrics, unit.primary_model, unit.prices], sort_keys=True, default=repr)
    return (unit.fingerprint, identity, engine_name(unit.engine), rest, counter_name, cache_key, row_options)


def _identity_key(identity: str, unit: _Unit) -> str:
    from zett_agent.model import ReasoningEffort

    effort = ReasoningEffort(unit.replay_options.get("reasoning_effort", ReasoningEffort.LOW)).value
    return f"{identity}|effort={effort}"


def _resolved_cell(proven: _Proven, max_tokens: int, keep_recent_tokens: int) -> dict[str, Any]:
    """A cell answered by a replay proven to stand for its setting (nothing is run)."""
    return {
        "max_tokens": max_tokens, "source_id": proven.source_id, "replayed": False,
        "row": _derived_row(proven, max_tokens, keep_recent_tokens), "error": proven.row_error,
        "seconds": 0.0, "model_calls": 0, "cache_hits": 0,
    }


def _payload(proven: _Proven) -> dict[str, Any]:
    trace = proven.trace
    return {
        "steps": trace.steps,
        "compactions": trace.compactions,
        "settings": trace.settings,
        "engine_events": trace.engine_events,
        "region": proven.region,
        "row": proven.row,
        "row_error": proven.row_error,
    }


def _source_rows(sources: list[_Proven], unit: _Unit) -> None:
    """Fill ``row`` (budget figures, cost, loss metrics) of replays that have none yet.

    Costs of all of them are computed in one :func:`zett_lab.measure.cost.add_costs` call (the
    tables concatenated with a ``run_id``), metrics per replay. A failure is kept in
    ``row_error`` and reported by every cell that uses that replay.
    """
    todo = [p for p in sources if p.row is None]
    if not todo:
        return
    from ..measure.cost import add_costs, cost_summary

    rows = {n: p.trace.summary() for n, p in enumerate(todo)}
    try:
        steps = pd.concat([p.trace.steps.assign(run_id=n) for n, p in enumerate(todo)], ignore_index=True)
        compactions = pd.concat(
            [p.trace.compactions.assign(run_id=n, max_tokens=p.trace.settings["max_tokens"],
                                        keep_recent_tokens=p.trace.settings["keep_recent_tokens"])
             for n, p in enumerate(todo)],
            ignore_index=True,
        )
        priced_steps, priced_compactions = add_costs(
            steps, compactions, primary_model=unit.primary_model or "offline", prices=unit.prices
        )
        for record in cost_summary(priced_steps, priced_compactions).to_dict("records"):
            row = rows[int(record["run_id"])]
            for key, value in record.items():
                if key in ("run_id", "conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "steps"):
                    continue
                if unit.primary_model is None and key in ("primary_cost_usd", "total_cost_usd"):
                    continue
                row[str(key)] = value
    except SettingError as exc:
        # No list price for this summarizer (a custom or self-hosted model): the replay and its
        # metrics stand; only the money is unknown until prices= names it.
        for row in rows.values():
            row["cost_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - reported by the cells
        for p in todo:
            p.row_error = f"cost: {type(exc).__name__}: {exc}"
    if unit.metrics:
        from ..measure import measure

        for n, p in enumerate(todo):
            try:
                losses = measure(p.trace).conversation.iloc[0].to_dict()
            except Exception as exc:  # noqa: BLE001 - reported by the cells
                p.row_error = p.row_error or f"metrics: {type(exc).__name__}: {exc}"
                continue
            for key, value in losses.items():
                rows[n].setdefault(str(key), value)
    for n, p in enumerate(todo):
        p.row = rows[n]


def _derived_row(proven: _Proven, max_tokens: int, keep_recent_tokens: int) -> dict[str, Any]:
    """The row of another setting in a replay's proven region.

    Only the figures that name the setting differ (``max_tokens``, ``keep_recent_tokens``)
    and the one that compares with it (``steps_over_budget``); everything else is a
    function of the identical trace. ``tests/test_sweep.py`` checks this against
    :meth:`Trace.summary` and :func:`zett_lab.measure.measure` of the derived trace.
    """
    row = dict(proven.row or proven.trace.summary())
    sent = proven.trace.steps["context_tokens_after"]
    row.update(max_tokens=max_tokens, keep_recent_tokens=keep_recent_tokens,
               steps_over_budget=int((sent > max_tokens).sum()) if len(sent) else 0)
    return row


def _calls(trace: Trace) -> tuple[int, int]:
    """(summary calls that reached the model, calls served by the summary cache)."""
    hits = trace.compactions["cache_hit"] if len(trace.compactions) else pd.Series(dtype="boolean")
    return int(hits.eq(False).sum()), int(hits.eq(True).sum())


def _run_unit(unit: _Unit) -> dict[str, Any]:
    """Replay one column (every max_tokens for one conversation, summarizer, keep_recent_tokens)."""
    from ..replay.run import replay, resolve_summarizer
    from ..summarizers import summarizer_identity

    started, cpu_started = time.perf_counter(), time.process_time()
    model = resolve_summarizer(unit.summarizer)
    key = _store_key(unit, _identity_key(summarizer_identity(model), unit))
    counter = unit.replay_options.get("count_tokens")
    keep = unit.keep_recent_tokens
    picked: dict[int, tuple[_Proven, bool, float]] = {}
    failed: dict[int, tuple[str, float]] = {}
    lock = threading.Lock()

    def run(max_tokens: int) -> None:
        began = time.perf_counter()
        try:
            trace = replay(
                unit.conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer=model,
                engine=unit.engine, cache=unit.cache, warn=False, **unit.replay_options,
            )
        except Exception as exc:  # noqa: BLE001 - a cell records its own failure
            with lock:
                failed[max_tokens] = (f"{type(exc).__name__}: {exc}", time.perf_counter() - began)
            return
        where = (region(trace, count_tokens=counter, limits=engine_reuse(unit.engine)) if unit.reuse
                 else Region.point(max_tokens, keep, "reuse off"))
        proven = _Proven(f"{os.getpid()}-{uuid.uuid4().hex[:12]}", where, trace)
        if unit.reuse:
            _STORE.add(key, proven)
        with lock:
            picked[max_tokens] = (proven, True, time.perf_counter() - began)

    pending = sorted(set(unit.max_tokens), reverse=True)
    while pending:
        remaining = []
        for max_tokens in pending:
            proven = _STORE.find(key, max_tokens, keep) if unit.reuse else None
            if proven is not None:
                picked[max_tokens] = (proven, False, 0.0)
            else:
                remaining.append(max_tokens)
        if not remaining:
            break
        wave = _spread(remaining, unit.concurrency)
        if len(wave) == 1:
            run(wave[0])
        else:
            with cf.ThreadPoolExecutor(max_workers=len(wave)) as threads:
                list(threads.map(run, wave))
        pending = [m for m in remaining if m not in wave]

    began = time.perf_counter()
    used = list({id(p): p for p, _, _ in picked.values()}.values())
    _source_rows(used, unit)
    share = (time.perf_counter() - began) / max(1, sum(1 for _, replayed, _ in picked.values() if replayed))
    cells: list[dict[str, Any]] = []
    sources: dict[str, dict[str, Any]] = {}
    for max_tokens in unit.max_tokens:
        if max_tokens in failed:
            error, seconds = failed[max_tokens]
            cells.append({"max_tokens": max_tokens, "source_id": None, "replayed": True, "row": None, "error": error,
                          "seconds": seconds, "model_calls": 0, "cache_hits": 0})
            continue
        if max_tokens not in picked:
            continue
        proven, replayed, seconds = picked[max_tokens]
        sources[proven.source_id] = _payload(proven)
        if not replayed:
            cells.append(_resolved_cell(proven, max_tokens, keep))
            continue
        calls, hits = _calls(proven.trace)
        assert proven.row is not None, "_source_rows gave every replay in use its row"
        cells.append({
            "max_tokens": max_tokens, "source_id": proven.source_id, "replayed": True, "row": dict(proven.row),
            "error": proven.row_error, "seconds": seconds + share, "model_calls": calls, "cache_hits": hits,
        })
    return {
        "index": unit.index,
        "cells": cells,
        "sources": sources,
        "worker": os.getpid(),
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "ended_at": time.time(),
    }


def _spread(values: list[int], n: int) -> list[int]:
    """Up to ``n`` values spread over a (descending) list: the first, the last, evenly between."""
    if n <= 1 or len(values) <= 1:
        return values[:1]
    if len(values) <= n:
        return list(values)
    picks = sorted({round(i * (len(values) - 1) / (n - 1)) for i in range(n)})
    return [values[i] for i in picks]


# --- executors ------------------------------------------------------------------------------------


class SerialExecutor(cf.Executor):
    """Runs each task in the calling thread when it is submitted (``executor="serial"``)."""

    def submit(self, fn, /, *args, **kwargs):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            future.set_exception(exc)
        return future


#: Modules the default pool's fork server imports once, so workers start with them loaded.
_PRELOAD = ("zett_lab.sweep", "zett_lab.replay", "zett_lab.summarizers", "zett_lab.metrics", "zett_lab.cost")


def _warm_worker() -> None:
    """Load the o200k vocabulary when a worker starts (instead of inside its first cell)."""
    from ..tokens import _encoding

    with contextlib.suppress(Exception):  # the first replay reports any real problem
        _encoding()


_POOL: cf.ProcessPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def default_workers() -> int:
    """Worker processes of the default pool: the machine's cores."""
    return max(1, os.cpu_count() or 1)


def default_executor() -> cf.ProcessPoolExecutor:
    """The process pool sweeps use by default, created once and kept for the session.

    Workers keep their token-count memo and proven replays between sweeps, which is what
    makes a second sweep over the same conversations fast. Uses ``forkserver`` where
    available (safe with the threads a notebook kernel runs), else ``spawn``.
    """
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or getattr(_POOL, "_broken", False) or getattr(_POOL, "_shutdown_thread", False):
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
            if context.get_start_method() == "forkserver":
                context.set_forkserver_preload(list(_PRELOAD))
            _POOL = cf.ProcessPoolExecutor(max_workers=default_workers(), mp_context=context, initializer=_warm_worker)
        return _POOL


def shutdown_default_executor() -> None:
    """Stop the default pool's workers (a new one starts with the next sweep)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.shutdown(wait=True, cancel_futures=True)
            _POOL = None


atexit.register(shutdown_default_executor)


def _executor(executor: Any) -> tuple[cf.Executor, str]:
    if executor is None:
        return default_executor(), f"process pool ({default_workers()} workers)"
    if executor == "serial":
        return SerialExecutor(), "serial"
    if isinstance(executor, str):
        raise SettingError(f"executor must be None, 'serial' or a concurrent.futures.Executor, got {executor!r}")
    if not callable(getattr(executor, "submit", None)):
        raise SettingError(
            f"executor must have a submit() method (a concurrent.futures.Executor), got {type(executor).__name__}"
        )
    return executor, type(executor).__name__


def _parallelism(executor: cf.Executor) -> int:
    """How many units an executor runs at once (a guess for executors that do not say)."""
    for attribute in ("_max_workers",):
        value = getattr(executor, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    client = getattr(executor, "_client", None)  # dask.distributed ClientExecutor
    if client is not None:
        with contextlib.suppress(Exception):  # fall back to the local guess
            return max(1, sum(client.nthreads().values()))
    if isinstance(executor, SerialExecutor):
        return 1
    return default_workers()


def _in_process(executor: cf.Executor) -> bool:
    return isinstance(executor, (SerialExecutor, cf.ThreadPoolExecutor))


# --- the sweep ----------------------------------------------------------------------------------------


@dataclass
class Sweep:
    """The result of :func:`sweep`: a tidy results table and the trace of every cell.

    Attributes:
        results: one row per conversation × engine × summarizer × max_tokens × keep_recent_tokens.
            Setting columns (``conversation_id``, ``engine`` and ``summarizer`` (the labels given),
            ``max_tokens``, ``keep_recent_tokens`` (tokens), and with ``context_window``:
            ``context_window``, ``max_tokens_share``, ``keep_recent_share``); budget figures
            of :meth:`Trace.summary`; cost columns of :func:`zett_lab.measure.cost.cost_summary`
            (``*_usd`` only with ``primary_model``); loss metrics of
            :func:`zett_lab.measure.measure`; then ``engine_identity``, ``summarizer_identity``, ``replayed``
            (False: the cell is proven identical to another replay and shares it),
            ``model_calls`` / ``cache_hits`` (summary calls this cell made / got from the
            cache), ``seconds`` and ``error`` (None when the cell is complete). A cell whose
            replay had failed summaries is marked: ``failed`` (how many) and ``summary_error``
            (the first one's error); it is no measurement (:func:`measured_cells`).
        config: the grid, options and run statistics.
        source: the folder the sweep was loaded from (None for a sweep run in this process).
    """

    results: pd.DataFrame
    config: dict[str, Any]
    _conversations: dict[str, Conversation] = field(default_factory=dict, repr=False)
    _sources: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    #: ``(conversation_id, summarizer, max_tokens, keep_recent_tokens, engine)`` -> the replay that answers the cell.
    _cells: dict[tuple[str, str, int, int, str], str] = field(default_factory=dict, repr=False)
    source: Path | None = field(default=None, repr=False)

    # --- traces -------------------------------------------------------------------

    def _resolve(self, name: str, value: Any) -> int:
        window = self.config.get("context_window")
        (tokens, _), = _resolve_values([value], name, window)
        return tokens

    def trace(
        self,
        conversation_id: str,
        max_tokens: float,
        keep_recent_tokens: float,
        summarizer: Any = None,
        engine: str | None = None,
    ) -> Trace:
        """The trace of one cell (fractions are resolved against the sweep's context window).

        ``summarizer`` is the label given to the sweep (or its identity) and ``engine`` the
        engine's label; either may be left out when the sweep has only one. Raises
        ``KeyError`` for a cell not in the grid and :class:`~zett_lab.errors.ZettLabError`
        for a cell that failed.
        """
        engines = self.config.get("engines", [STOCK_ENGINE])
        if engine is None:
            if len(engines) != 1:
                raise SettingError(f"this sweep has several engines; name one of {engines}")
            engine = engines[0]
        labels = self.config["summarizers"]
        if summarizer is None:
            if len(labels) != 1:
                raise SettingError(f"this sweep has several summarizers; name one of {labels}")
            label = labels[0]
        else:
            label = summarizer if isinstance(summarizer, str) else _label(summarizer)
            identities = dict(zip(self.config["summarizer_identities"], labels, strict=True))
            label = label if label in labels else identities.get(label, label)
        key = (
            conversation_id,
            label,
            self._resolve("max_tokens", max_tokens),
            self._resolve("keep_recent_tokens", keep_recent_tokens),
            engine,
        )
        if key not in self._cells:
            row = self._row(key)
            if row is not None and isinstance(row.get("error"), str):
                raise ZettLabError(f"cell {key} failed: {row['error']}")
            raise KeyError(f"no cell {key} in this sweep")
        return self._trace(key)

    def _row(self, key: tuple) -> dict[str, Any] | None:
        r = self.results
        match = r[(r["conversation_id"] == key[0]) & (r["summarizer"] == key[1]) & (r["max_tokens"] == key[2])
                  & (r["keep_recent_tokens"] == key[3]) & (r["engine"] == key[4])]
        return match.iloc[0].to_dict() if len(match) else None

    def _trace(self, key: tuple[str, str, int, int, str]) -> Trace:
        source = self._sources[self._cells[key]]
        trace = source.get("trace")
        if trace is None:
            trace = source["trace"] = Trace(
                conversation=self._conversations[key[0]], steps=source["steps"], compactions=source["compactions"],
                settings=source["settings"], engine_events=source["engine_events"],
            )
        if (trace.settings["max_tokens"], trace.settings["keep_recent_tokens"]) == key[2:4]:
            # A copy: the tables are shared with the replays this process remembers for reuse.
            return Trace(
                conversation=trace.conversation,
                steps=trace.steps.copy(),
                compactions=trace.compactions.copy(),
                settings=dict(trace.settings),
                engine_events=list(trace.engine_events),
            )
        return derive(trace, key[2], key[3], source["region"])

    def traces(self) -> Iterable[tuple[tuple[str, str, int, int, str], Trace]]:
        """``((conversation_id, summarizer, max_tokens, keep_recent_tokens, engine), Trace)`` for each complete cell."""
        for key in self._cells:
            yield key, self._trace(key)

    @property
    def conversations(self) -> dict[str, Conversation]:
        """The swept conversations by id (what :func:`decision_boundaries` needs for a cell)."""
        return dict(self._conversations)

    @property
    def errors(self) -> pd.DataFrame:
        """The cells that failed, with their error."""
        return self.results[self.results["error"].notna()]

    @property
    def failure_counts(self) -> pd.DataFrame:
        """Failures per distinct cause (:data:`~zett_lab.replay.trace.FAILURE_COLUMNS`): summary calls
        that failed (each distinct replay counted once, however many cells share it) and cells
        that failed; empty when everything succeeded."""
        identities = self.config.get("summarizer_identities", [])
        labels = dict(zip(identities, self.config.get("summarizers", []), strict=True))
        parts = [src["compactions"] for src in self._sources.values() if len(src["compactions"])]
        calls = failure_counts(pd.concat(parts, ignore_index=True) if parts else pd.DataFrame())
        calls["summarizer"] = [labels.get(name, name) for name in calls["summarizer"]]
        cells = self.errors
        kinds = cells["error"].map(lambda text: str(text).split(":", 1)[0])
        failed_cells = count_causes("sweep cell", cells["summarizer"], kinds, cells["error"])
        return combine_failure_counts([calls, failed_cells])

    def input_files(self) -> list[Path]:
        """What the sweep was made from: the conversations' files, the summary cache, the folder it was loaded from."""
        files = [f for c in self._conversations.values() for f in c.input_files()]
        cache = self.config.get("cache")
        if cache and cache != ":memory:":
            files.append(Path(cache))
        return files + ([self.source] if self.source else [])

    # --- display ------------------------------------------------------------------

    def __repr__(self) -> str:
        c = self.config
        return (
            f"Sweep({len(c['conversations'])} conversations × {len(c['max_tokens'])} max_tokens × "
            f"{len(c['keep_recent_tokens'])} keep_recent_tokens × {len(c['summarizers'])} summarizers × "
            f"{len(c.get('engines', [STOCK_ENGINE]))} engines = "
            f"{len(self.results)} cells; {c.get('replays', 0)} replays, {c.get('reused', 0)} reused, "
            f"{c.get('errors', 0)} errors, {c.get('cells_with_failed_summaries', 0)} with failed summaries; "
            f"{c.get('elapsed_s', 0):.1f}s)"
        )

    def _repr_html_(self) -> str:
        c = self.config
        facts = {
            "conversations": ", ".join(c["conversations"]),
            "max_tokens": c["max_tokens"],
            "keep_recent_tokens": c["keep_recent_tokens"],
            "summarizers": ", ".join(c["summarizers"]),
            "engines": ", ".join(c.get("engines", [STOCK_ENGINE])),
            "context_window": c.get("context_window"),
            "cells": len(self.results),
            "replays / reused / errors": f"{c.get('replays', 0)} / {c.get('reused', 0)} / {c.get('errors', 0)}",
            "cells with failed summaries": c.get("cells_with_failed_summaries", 0),
            "summary calls / cache hits": f"{c.get('model_calls', 0)} / {c.get('cache_hits', 0)}",
            "executor": c.get("executor"),
            "elapsed": f"{c.get('elapsed_s', 0):.2f} s",
        }
        head = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in facts.items()
        )
        preferred = [
            "conversation_id", "engine", "summarizer", "max_tokens", "keep_recent_tokens", "compactions_applied",
            "steps_over_budget", "peak_context", "total_input_tokens", "total_cost_usd", "needed_anchor_recall",
            "instruction_survival", "replayed", "failed", "summary_error", "error",
        ]
        columns = [col for col in preferred if col in self.results.columns]
        table = self.results[columns].to_html(index=False, max_rows=40, na_rep="", float_format=lambda v: f"{v:.3g}")
        return f"<div><h4>{html.escape(repr(self))}</h4><table>{head}</table>{table}</div>"

    # --- files --------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the sweep to a directory of Parquet tables (written aside, then moved in place).

        ``results.parquet`` (the results table), ``cells.parquet`` (which replay each cell
        uses), ``steps.parquet`` / ``compactions.parquet`` (the tables of every distinct
        replay, keyed by ``source_id``), ``sweep.json`` (config, per-replay settings,
        engine events and proven regions, and each conversation once). Never over one of
        :meth:`input_files`; an existing directory is replaced only with ``overwrite=True``
        and only when it holds a saved sweep.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        from ..replay.trace import conversation_document

        target = check_output(path, self.input_files(), overwrite=overwrite)
        check_sweep_target(target)
        with atomic_folder(target) as staging:
            pq.write_table(
                pa.Table.from_pandas(_storable(self.results), preserve_index=False), staging / "results.parquet"
            )
            cells = pd.DataFrame(
                [(*key, source) for key, source in self._cells.items()],
                columns=["conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "engine", "source_id"],
            )
            pq.write_table(pa.Table.from_pandas(cells, preserve_index=False), staging / "cells.parquet")
            for name, columns in (("steps", STEP_COLUMNS), ("compactions", COMPACTION_COLUMNS)):
                parts = [src[name].assign(source_id=sid) for sid, src in self._sources.items() if len(src[name])]
                table = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[*columns, "source_id"])
                pq.write_table(
                    pa.Table.from_pandas(_storable(table), preserve_index=False), staging / f"{name}.parquet"
                )
            document = {
                "format": _SWEEP_FORMAT,
                "version": _SWEEP_VERSION,
                "config": self.config,
                "sources": {
                    sid: {
                        "conversation_id": src["conversation_id"],
                        "settings": src["settings"],
                        "engine_events": src["engine_events"],
                        "region": src["region"].__dict__,
                    }
                    for sid, src in self._sources.items()
                },
                "conversations": {cid: conversation_document(c) for cid, c in self._conversations.items()},
            }
            (staging / "sweep.json").write_text(json.dumps(document, default=_json_default), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Sweep:
        """Read a sweep written by :meth:`save` (no replay is run)."""
        import pyarrow.parquet as pq

        from ..replay.trace import conversation_from_document

        source = Path(path)
        try:
            document = json.loads((source / "sweep.json").read_text(encoding="utf-8"))
            results = pq.read_table(source / "results.parquet").to_pandas()
            cells = pq.read_table(source / "cells.parquet").to_pandas()
            steps = pq.read_table(source / "steps.parquet").to_pandas()
            compactions = pq.read_table(source / "compactions.parquet").to_pandas()
        except (OSError, ValueError, KeyError) as error:
            raise InputError(source, None, f"not a saved zett_lab sweep ({type(error).__name__}: {error})") from error
        if document.get("format") != _SWEEP_FORMAT:
            raise InputError(source / "sweep.json", "field 'format'", f"expected {_SWEEP_FORMAT!r}")
        conversations = {cid: conversation_from_document(doc) for cid, doc in document["conversations"].items()}
        by_source_steps = {sid: part.drop(columns="source_id") for sid, part in steps.groupby("source_id", sort=False)}
        by_source_comp = {
            sid: part.drop(columns="source_id") for sid, part in compactions.groupby("source_id", sort=False)
        }
        sources: dict[str, dict[str, Any]] = {}
        for sid, info in document["sources"].items():
            step_rows = _records(by_source_steps.get(sid))
            comp_rows = _records(by_source_comp.get(sid))
            sources[sid] = {
                "steps": frame(step_rows, STEP_COLUMNS),
                "compactions": frame(comp_rows, COMPACTION_COLUMNS),
                "settings": info["settings"],
                "engine_events": info["engine_events"],
                "region": Region(**info["region"]),
                "conversation_id": info["conversation_id"],
            }
        cell_rows: Iterable[Any] = cells.itertuples(index=False)  # rows of the saved cells table
        cell_map = {
            (
                r.conversation_id,
                r.summarizer,
                int(r.max_tokens),
                int(r.keep_recent_tokens),
                getattr(r, "engine", STOCK_ENGINE),  # sweeps saved before engines were a dimension
            ): r.source_id
            for r in cell_rows
        }
        return cls(results=_restore(results), config=document["config"], _conversations=conversations,
                   _sources=sources, _cells=cell_map, source=source)


def check_sweep_target(target: Path) -> None:
    """Refuse to replace anything but a saved sweep (a folder holding ``sweep.json``) with a sweep."""
    if target.exists() and not (target / "sweep.json").is_file():
        raise OutputError(target, None, "exists and is not a saved sweep; refusing to replace it")


def _records(part: pd.DataFrame | None) -> list[dict[str, Any]]:
    if part is None:
        return []
    return [{str(k): (None if is_missing(v) else v) for k, v in row.items()} for row in part.to_dict("records")]


def _storable(table: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding mixed types become strings so Parquet can store them."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object:
            kinds = {type(v) for v in out[column] if not is_missing(v)}
            if len(kinds) > 1 or (kinds and not kinds <= {str}):
                if kinds <= {int, float, np.integer, np.floating, bool, np.bool_}:
                    continue
                out[column] = out[column].map(lambda v: None if is_missing(v) else str(v))
    return out


def _restore(results: pd.DataFrame) -> pd.DataFrame:
    """Undo Parquet's string dtypes: text columns are plain objects with None, as :func:`sweep` makes them."""
    out = results.reset_index(drop=True)
    for column in out.columns:
        if isinstance(out[column].dtype, pd.StringDtype):
            out[column] = out[column].astype(object).where(out[column].notna(), None)
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return str(value)


def _engines(engines: Mapping[str, EngineSpec] | None, in_process: bool) -> list[tuple[str, EngineSpec]]:
    """``[(label, engine)]`` checked up front: each a valid engine a worker process can receive."""
    if engines is None:
        return [(STOCK_ENGINE, None)]
    if not isinstance(engines, Mapping) or not engines:
        raise SettingError(
            "engines must be a non-empty dict {label: engine}, e.g. {'stock': None, 'mine': MyCompaction}"
        )
    items = []
    for label, engine in engines.items():
        if not isinstance(label, str) or not label.strip():
            raise SettingError(f"engine labels must be non-empty strings, got {label!r}")
        check_engine(engine)
        if not in_process and engine is not None:
            _check_shippable(label, engine)
        items.append((label.strip(), engine))
    return items


def _check_shippable(label: str, engine: Any) -> None:
    """A process executor re-imports an engine by name: refuse one that only exists in this interpreter."""
    import sys

    target = engine.func if isinstance(engine, functools.partial) else engine
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    interactive = module is not None and module.__name__ == "__main__" and not hasattr(module, "__file__")
    try:
        pickle.loads(pickle.dumps(engine))
        problem = "it is defined in this notebook or interactive session" if interactive else None
    except Exception as error:  # noqa: BLE001 - reported as a setting error
        problem = f"{type(error).__name__}: {error}"
    if problem:
        raise SettingError(
            f"engine {label!r} ({engine_name(engine)}) cannot be sent to worker processes ({problem}); "
            "define it in an importable module or use executor='serial'"
        )


def sweep(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
    *,
    max_tokens: Sequence[int | float] | float,
    keep_recent_tokens: Sequence[int | float] | float,
    summarizers: Sequence[Any] | None = None,
    engines: Mapping[str, EngineSpec] | None = None,
    executor: cf.Executor | str | None = None,
    progress: bool = True,
    cache: Any = None,
    context_window: int | str | None = None,
    primary_model: str | None = None,
    prices: Any = None,
    metrics: bool = True,
    reuse: bool = True,
    **replay_options: Any,
) -> Sweep:
    """Replay every conversation under every setting and summarizer; see the module docstring.

    Args:
        conversations: a Conversation, a list of them, or a path for :func:`zett_lab.load_all`.
        max_tokens, keep_recent_tokens: token counts (ints) or fractions of
            ``context_window`` (floats in (0, 1]). ``keep_recent_tokens >= max_tokens`` is
            allowed (the engine allows it) and simply reported.
        summarizers: specs for :func:`zett_lab.summarizer` and/or AgentModel instances
            (picklable ones for a process executor); None: the default offline summarizer.
        engines: ``{label: engine}``: compaction engines to compare (None: the stock engine,
            a ``CompactionExtension`` subclass, or a factory, as for :func:`zett_lab.replay`);
            the labels fill the ``engine`` column. None: ``{"stock": None}``. Proven reuse is
            applied to an engine only along the limits it declares (``zett_lab_reuse``).
        executor: None (the session's process pool, one worker per core), ``"serial"``, or any
            :class:`concurrent.futures.Executor` (e.g. ``distributed.Client.get_executor()``).
        progress: show a progress bar (tqdm.auto) when the sweep takes more than a second.
        cache: the summary cache: a SummaryCache, a path, None (the default cache) or False.
        context_window: tokens, or a model name from :data:`CONTEXT_WINDOWS`.
        primary_model: price the primary model's input (``*_usd`` columns); None: tokens only.
        prices: price overrides for :func:`zett_lab.measure.cost.add_costs`.
        metrics: compute the offline loss metrics (the slowest part of a cell).
        reuse: share proven-identical replays between settings (off: replay every cell).
        **replay_options: passed to :func:`zett_lab.replay` (``usage``, ``reasoning_effort``,
            ``strict``, ``compact_at``, ``count_tokens``, ...).

    Raises:
        SettingError: an empty grid, a bad value, an unknown summarizer spec or option.
    """
    from tqdm.auto import tqdm

    from ..replay.run import check_limits, keep_fills_budget, resolve_cache, resolve_summarizer
    from ..summarizers import DEFAULT_SUMMARIZER, summarizer_identity

    started, cpu_started = time.perf_counter(), time.process_time()
    unknown = sorted(set(replay_options) - set(REPLAY_OPTIONS))
    if unknown:
        raise SettingError(
            f"unknown sweep option(s) {unknown}; replay options a sweep passes on: {', '.join(REPLAY_OPTIONS)}"
        )
    items = _conversations(conversations)
    window = resolve_context_window(context_window)
    max_values = _resolve_values(max_tokens, "max_tokens", window)
    keep_values = _resolve_values(keep_recent_tokens, "keep_recent_tokens", window)
    for m, _ in max_values:
        for k, _ in keep_values:
            check_limits(m, k)
    filling = [(m, k) for m, _ in max_values for k, _ in keep_values if keep_fills_budget(m, k)]
    if filling:
        m, k = filling[0]
        warnings.warn(
            f"{len(filling)} of {len(max_values) * len(keep_values)} settings have keep_recent_tokens >= max_tokens; "
            f"e.g. {keep_fills_budget(m, k)}",
            SettingWarning,
            stacklevel=2,
        )
    specs = (
        [DEFAULT_SUMMARIZER]
        if summarizers is None
        else ([summarizers] if isinstance(summarizers, str) else list(summarizers))
    )
    if not specs:
        raise SettingError("summarizers is empty: a sweep needs at least one summarizer")
    models = [resolve_summarizer(spec) for spec in specs]  # fails fast on a bad spec
    labels = [_label(spec) for spec in specs]
    if len(set(labels)) != len(labels):
        raise SettingError(f"summarizers must be distinct, got {labels}")
    identities = [summarizer_identity(m) for m in models]
    summary_cache = resolve_cache(cache)
    runner, runner_name = _executor(executor)
    in_process = _in_process(runner)
    engine_items = _engines(engines, in_process)
    for _, engine in engine_items:  # a factory that fails or ignores the limits: one error before anything runs
        build_engine(engine, ReplayProbe, model=models[0], max_tokens=max_values[0][0],
                     keep_recent_tokens=keep_values[0][0], count_tokens=replay_options.get("count_tokens") or default_counter,
                     reasoning_effort=ReasoningEffort(replay_options.get("reasoning_effort", ReasoningEffort.LOW)))
    shipped = []
    for spec, model in zip(specs, models, strict=True):
        if isinstance(spec, str) or in_process:
            shipped.append(spec if isinstance(spec, str) else model)
            continue
        try:
            pickle.dumps(model)
        except Exception as error:
            raise SettingError(
                f"summarizer {_label(model)!r} cannot be sent to worker processes ({type(error).__name__}: {error}); "
                "pass it as a spec string or use executor='serial'"
            ) from error
        shipped.append(model)
    if replay_options.get("compact_at"):
        reuse = False  # manual passes: every setting is its own replay
    strict = bool(replay_options.get("strict"))

    fingerprints = {c.id: _fingerprint(c) for c in items}
    units: list[_Unit] = []
    for conversation in items:
        summarizer_items = zip(shipped, models, labels, strict=True)
        for (engine_label, engine), (spec, model, label) in itertools.product(engine_items, summarizer_items):
            concurrency = (
                1 if _is_offline(model) else (getattr(model, "max_concurrency", None) or DEFAULT_PROVIDER_CONCURRENCY)
            )
            for keep, _ in keep_values:
                units.append(_Unit(
                    index=len(units), conversation=conversation, fingerprint=fingerprints[conversation.id],
                    summarizer=spec, label=label, keep_recent_tokens=keep, max_tokens=[m for m, _ in max_values],
                    cache=summary_cache if summary_cache is not None else False, replay_options=dict(replay_options),
                    metrics=metrics, primary_model=primary_model, prices=prices, concurrency=concurrency, reuse=reuse,
                    engine=engine, engine_label=engine_label,
                ))
    order = deque(sorted(units, key=lambda u: -len(u.conversation.messages)))  # longest first: load balance
    conversations_by_id = {c.id: c for c in items}
    identity_of = dict(zip(labels, identities, strict=True))
    keys = {unit.index: _store_key(unit, _identity_key(identity_of[unit.label], unit)) for unit in units}
    in_flight_limit = max(2, 2 * _parallelism(runner))

    finished: dict[int, dict[str, Any]] = {}
    resolved: dict[int, list[dict[str, Any]]] = {}
    failures: dict[int, str] = {}
    n_cells = len(units) * len(max_values)
    bar = tqdm(total=n_cells, desc="sweep", unit="cell", disable=not progress, delay=1.0)
    futures: dict[cf.Future, _Unit] = {}

    def remember(unit: _Unit, result: dict[str, Any]) -> None:
        """Keep the unit's replays in this process too: later units (and sweeps) need not run them."""
        if not reuse:
            return
        for sid, payload in result.get("sources", {}).items():
            if payload.get("row") is None:
                continue
            trace = Trace(conversation=conversations_by_id[unit.conversation.id], steps=payload["steps"],
                          compactions=payload["compactions"], settings=payload["settings"],
                          engine_events=payload["engine_events"])
            _STORE.add(keys[unit.index], _Proven(sid, payload["region"], trace, payload["row"], payload["row_error"]))

    def submit_more() -> None:
        while order and len(futures) < in_flight_limit:
            unit = order.popleft()
            answered, remaining = [], []
            for m in unit.max_tokens:
                proven = _STORE.find(keys[unit.index], m, unit.keep_recent_tokens) if reuse else None
                if proven is not None:
                    answered.append(_resolved_cell(proven, m, unit.keep_recent_tokens))
                    answered[-1]["payload"] = _payload(proven)
                else:
                    remaining.append(m)
            resolved[unit.index] = answered
            if not remaining:
                bar.update(len(unit.max_tokens))
                continue
            try:
                futures[runner.submit(_run_unit, replace(unit, max_tokens=remaining))] = unit
            except Exception as error:  # noqa: BLE001 - the executor refused: those cells carry it
                failures[unit.index] = f"executor: {type(error).__name__}: {error}"
                bar.update(len(unit.max_tokens))

    try:
        submit_more()
        while futures:
            done, _ = cf.wait(list(futures), return_when=cf.FIRST_COMPLETED)
            for future in done:
                unit = futures.pop(future)
                try:
                    finished[unit.index] = future.result()
                    remember(unit, finished[unit.index])
                except Exception as error:  # noqa: BLE001 - a lost unit marks its own cells
                    failures[unit.index] = f"executor: {type(error).__name__}: {error}"
                bar.update(len(unit.max_tokens))
                if strict:
                    _stop_at_first_failure(unit, finished.get(unit.index), failures.get(unit.index))
            submit_more()
    except (KeyboardInterrupt, ResultFailure):
        for future in futures:
            future.cancel()
        raise
    finally:
        bar.close()

    sources: dict[str, dict[str, Any]] = {}
    cell_map: dict[tuple[str, str, int, int, str], str] = {}
    rows: list[dict[str, Any]] = []
    share_of = {name: dict(values) for name, values in (("max", max_values), ("keep", keep_values))}
    for unit in units:
        result = finished.get(unit.index)
        for sid, payload in (result or {}).get("sources", {}).items():
            if sid not in sources:
                sources[sid] = dict(payload, conversation_id=unit.conversation.id)
        cells = {c["max_tokens"]: c for c in (result or {}).get("cells", [])}
        for known in resolved.get(unit.index, []):
            cells[known["max_tokens"]] = known
            if known["source_id"] not in sources:
                sources[known["source_id"]] = dict(known["payload"], conversation_id=unit.conversation.id)
        for m, _ in max_values:
            cell = cells.get(m)
            base = {"conversation_id": unit.conversation.id, "engine": unit.engine_label, "summarizer": unit.label,
                    "max_tokens": m, "keep_recent_tokens": unit.keep_recent_tokens}
            if window is not None:
                base.update(context_window=window, max_tokens_share=share_of["max"][m],
                            keep_recent_share=share_of["keep"][unit.keep_recent_tokens])
            if cell is None:
                reason = failures.get(unit.index) or "not run"
                rows.append({**base, "engine_identity": engine_name(unit.engine),
                             "summarizer_identity": identities[labels.index(unit.label)], "error": reason})
                continue
            row = dict(cell["row"] or {})
            row.pop("summarizer", None)
            rows.append({
                **base, **{k: v for k, v in row.items() if k not in base},
                "engine_identity": engine_name(unit.engine),
                "summarizer_identity": identities[labels.index(unit.label)],
                "replayed": cell["replayed"], "model_calls": cell["model_calls"], "cache_hits": cell["cache_hits"],
                "seconds": cell["seconds"], "error": cell["error"],
            })
            if cell["source_id"] is not None:
                key = (unit.conversation.id, unit.label, m, unit.keep_recent_tokens, unit.engine_label)
                cell_map[key] = cell["source_id"]
    results = _results_frame(rows, window is not None)
    complete = results["error"].isna()
    config = {
        "conversations": [c.id for c in items],
        "max_tokens": [m for m, _ in max_values],
        "keep_recent_tokens": [k for k, _ in keep_values],
        "summarizers": labels,
        "summarizer_identities": identities,
        "engines": [label for label, _ in engine_items],
        "engine_identities": [engine_name(engine) for _, engine in engine_items],
        "engine_reuse": {label: list(engine_reuse(engine)) for label, engine in engine_items},
        "context_window": window,
        "context_window_name": context_window if isinstance(context_window, str) else None,
        "primary_model": primary_model,
        "metrics": metrics,
        "reuse": reuse,
        "replay_options": {
            k: (v if isinstance(v, (str, int, float, bool, list, type(None))) else repr(v))
            for k, v in replay_options.items()
        },
        "cache": str(getattr(summary_cache, "path", None)) if summary_cache is not None else None,
        "executor": runner_name,
        "units": len(units),
        "workers": sorted({r["worker"] for r in finished.values()}),
        "replays": int(results["replayed"].eq(True).sum()) if "replayed" in results else 0,
        "reused": int(results["replayed"].eq(False).sum()) if "replayed" in results else 0,
        "errors": int((~complete).sum()),
        "cells_with_failed_summaries": int((complete & ~measured_cells(results)).sum()),
        "model_calls": int(results["model_calls"].fillna(0).sum()) if "model_calls" in results else 0,
        "cache_hits": int(results["cache_hits"].fillna(0).sum()) if "cache_hits" in results else 0,
        "elapsed_s": round(time.perf_counter() - started, 3),
        "worker_cpu_s": round(sum(r.get("cpu_seconds", 0.0) for r in finished.values()), 3),
        "worker_busy_s": round(sum(r.get("seconds", 0.0) for r in finished.values()), 3),
        "driver_cpu_s": round(time.process_time() - cpu_started, 3),
    }
    swept = Sweep(
        results=results, config=config, _conversations=conversations_by_id, _sources=sources, _cells=cell_map
    )
    for failure in swept.failure_counts.itertuples(index=False):
        warnings.warn(
            f"{failure.count} {failure.what}(s) failed ({failure.summarizer}): {failure.cause}; "
            "those cells are no measurement (see Sweep.failure_counts)",
            SummaryFailureWarning,
            stacklevel=2,
        )
    return swept


def _stop_at_first_failure(unit: _Unit, result: dict[str, Any] | None, lost: str | None) -> None:
    """Strict sweeps: raise :class:`ResultFailure` naming the first failed cell of a finished unit."""
    failed = [(cell["max_tokens"], cell["error"]) for cell in (result or {}).get("cells", []) if cell["error"]]
    if lost is not None:
        failed.insert(0, (unit.max_tokens[0], lost))
    if failed:
        max_tokens, error = failed[0]
        raise ResultFailure(
            f"sweep stopped at its first failure (strict): conversation {unit.conversation.id!r}, summarizer "
            f"{unit.label!r}, max_tokens={max_tokens}, keep_recent_tokens={unit.keep_recent_tokens}: {error}"
        )


_LEADING = [
    "conversation_id",
    "engine",
    "summarizer",
    "max_tokens",
    "keep_recent_tokens",
    "context_window",
    "max_tokens_share",
    "keep_recent_share",
]
_TRAILING = ["engine_identity", "summarizer_identity", "replayed", "model_calls", "cache_hits", "seconds", "error"]
_INT_RESULT_COLUMNS = {
    "max_tokens", "keep_recent_tokens", "context_window", "messages", "steps", "compactions_applied",
    "rejected_not_smaller", "failed", "peak_context", "total_input_tokens", "steps_over_budget", "model_calls",
    "cache_hits", "primary_input_tokens", "primary_cached_input_tokens", "primary_uncached_input_tokens",
    "primary_output_tokens", "cache_breaks", "summary_calls", "summary_input_tokens", "summary_output_tokens",
    "compactions", "attempts", "steps_no_boundary", "steps_only_checkpoints", "peak_context_tokens",
    "lost_but_needed", "refetch_calls", "probes", "superseded_updates", "superseded_only",
}


def _results_frame(rows: list[dict[str, Any]], relative: bool) -> pd.DataFrame:
    columns: list[str] = [
        c for c in _LEADING if relative or c not in ("context_window", "max_tokens_share", "keep_recent_share")
    ]
    for row in rows:
        for key in row:
            if key not in columns and key not in _TRAILING:
                columns.append(key)
    columns += _TRAILING
    table = pd.DataFrame(rows, columns=columns)
    for column in table.columns:
        if column in _INT_RESULT_COLUMNS:
            table[column] = pd.array([None if is_missing(v) else int(v) for v in table[column]], dtype="Int64")
        elif column == "replayed":
            table[column] = pd.array([None if is_missing(v) else bool(v) for v in table[column]], dtype="boolean")
        elif column in (
            "error", "summary_error", "engine", "engine_identity", "summarizer", "summarizer_identity", "conversation_id"
        ):
            table[column] = table[column].astype(object).where(table[column].notna(), None)
        elif table[column].dtype == object:
            converted = pd.to_numeric(table[column], errors="coerce")
            if converted.notna().sum() == table[column].notna().sum():
                table[column] = converted.astype("float64")
    return table


# --- optimisation helpers -------------------------------------------------------------------------

#: Metric-name fragments where higher is better (the rest: lower is better).
def _maximize(column: str, maximize: bool | None) -> bool:
    return bool(maximize) if maximize is not None else higher_is_better(column)


def _table(results: Sweep | pd.DataFrame) -> pd.DataFrame:
    table = results.results if isinstance(results, Sweep) else results
    if not isinstance(table, pd.DataFrame):
        raise SettingError(f"expected a Sweep or its results DataFrame, got {type(results).__name__}")
    return table


def _need(table: pd.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
        raise SettingError(f"no column(s) {missing} in the results; numeric columns: {', '.join(numeric)}")


def measured_cells(table: pd.DataFrame) -> pd.Series:
    """Which rows are measurements: the cell ran (no ``error``) and none of its summaries failed.

    A failed summary leaves the context unsummarized, so the cell's loss metrics would describe
    no summary at all; such cells are marked (``failed`` > 0, ``summary_error``) and are never
    ranked, averaged into a front, or recommended.
    """
    ok = pd.Series(True, index=table.index)
    if "error" in table.columns:
        ok &= table["error"].isna()
    if "failed" in table.columns:
        ok &= pd.to_numeric(table["failed"], errors="coerce").fillna(0).eq(0)
    return ok


def _per_setting(table: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The rows of settings whose every cell is a measurement (a setting with a failed cell is left out)."""
    by = [c for c in by if c in table.columns]
    failed = ~measured_cells(table)
    if not by:
        return table.loc[~failed]
    bad = set(table.loc[failed, by].itertuples(index=False, name=None))
    keep = [key not in bad for key in table[by].itertuples(index=False, name=None)]
    return table.loc[keep]


def pareto_front(
    results: Sweep | pd.DataFrame,
    cost: str = "total_input_tokens",
    loss: str = "needed_anchor_recall",
    *,
    maximize: bool | None = None,
    by: Sequence[str] | None = SETTING_COLUMNS,
    nan: str = "best",
) -> pd.DataFrame:
    """The settings no other setting beats on both cost and loss.

    Args:
        results: a :class:`Sweep` or its results table.
        cost: lower is better (``total_input_tokens``, ``total_cost_usd``, ...).
        loss: the quality metric; its direction is guessed from the name (``recall``,
            ``survival``, ``retention``... higher is better; anything else lower), or set
            ``maximize=``.
        by: the columns that make a setting: per setting, cost is summed and loss averaged
            over conversations; None keeps one point per row. Settings with a failed cell
            or a failed summary (:func:`measured_cells`) are left out.
        nan: a missing loss value means nothing was compacted or nothing had to be kept:
            ``"best"`` counts it as the best value (1 for ratios to maximize, 0 otherwise),
            ``"drop"`` leaves the row out.

    Returns:
        The front, cheapest first: the ``by`` columns, ``cost``, ``loss`` and ``conversations``.
    """
    table = _table(results)
    _need(table, cost, loss)
    higher = _maximize(loss, maximize)
    table = _fill_nan(table, [loss], nan, {loss: higher})
    if by is not None:
        table = _per_setting(table, by)
        keys = [c for c in by if c in table.columns]
        points = table.groupby(keys, dropna=False, sort=False).agg(
            **{cost: (cost, "sum"), loss: (loss, "mean"), "conversations": ("conversation_id", "nunique")}
        ).reset_index()
    else:
        points = table[measured_cells(table)].assign(conversations=1)
    points = points.dropna(subset=[cost, loss])
    if not len(points):
        return points.reset_index(drop=True)
    ordered = points.assign(_q=points[loss] if higher else -points[loss]).sort_values(
        [cost, "_q"], ascending=[True, False], kind="stable"
    )
    best = -math.inf
    keep = []
    for index, value in zip(ordered.index, ordered["_q"], strict=True):
        if value > best:
            keep.append(index)
            best = value
    return ordered.loc[keep].drop(columns="_q").reset_index(drop=True)


def _fill_nan(table: pd.DataFrame, columns: Sequence[str], nan: str, higher: Mapping[str, bool]) -> pd.DataFrame:
    if nan not in ("best", "drop"):
        raise SettingError(f"nan must be 'best' or 'drop', got {nan!r}")
    out = table.copy()
    ok = measured_cells(out)
    for column in columns:
        values = pd.to_numeric(out[column], errors="coerce")
        if nan == "best" and column in higher:  # a column that is no metric has no best value: its NaN stays missing
            values = values.where(~(values.isna() & ok), 1.0 if higher[column] else 0.0)
        out[column] = values
    if nan == "drop":
        out = out.dropna(subset=list(columns))
    return out


_OPERATORS = {
    ">=": np.greater_equal, "<=": np.less_equal, "==": np.equal, "!=": np.not_equal, ">": np.greater, "<": np.less,
}


def _all_meet(values: pd.Series, test: Callable[..., Any], value: float) -> bool:
    """Whether every value of one setting is present and passes ``test`` against ``value``."""
    return bool(values.notna().all() and test(values.to_numpy(dtype=float), value).all())


_CLAUSE = re.compile(
    r"^\s*(?P<column>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>>=|<=|==|!=|>|<|=)\s*"
    r"(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


def parse_constraints(constraints: str | Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """``[(column, operator, value)]`` from a dict ``{column: (op, value)}`` or a string.

    The string form is clauses joined by ``and`` (or commas): ``"needed_anchor_recall >= 0.9
    and instruction_survival == 1"``. Operators: ``>= <= == != > <`` (``=`` means ``==``).
    Parsed with a regular expression; nothing is evaluated.
    """
    parsed: list[tuple[str, str, float]] = []
    if isinstance(constraints, str):
        clauses = [c for c in re.split(r"\s+and\s+|,|&&", constraints.strip(), flags=re.IGNORECASE) if c.strip()]
        if not clauses:
            raise SettingError("constraints string is empty")
        for clause in clauses:
            match = _CLAUSE.match(clause)
            if match is None:
                raise SettingError(
                    f"cannot read constraint {clause.strip()!r}: write COLUMN OP NUMBER, e.g. 'needed_anchor_recall "
                    ">= 0.9', "
                    "joined by 'and'"
                )
            op = "==" if match["op"] == "=" else match["op"]
            parsed.append((match["column"], op, float(match["value"])))
        return parsed
    if not isinstance(constraints, Mapping) or not constraints:
        raise SettingError("constraints must be a non-empty dict {column: (op, value)} or a string")
    for column, spec in constraints.items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
            raise SettingError(f"constraint for {column!r} must be (operator, value), got {spec!r}")
        op, value = spec
        op = "==" if op == "=" else op
        if op not in _OPERATORS:
            raise SettingError(f"constraint for {column!r}: unknown operator {op!r} (use {', '.join(_OPERATORS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise SettingError(f"constraint for {column!r}: value must be a number, got {value!r}")
        parsed.append((str(column), op, float(value)))
    return parsed


class NoFeasibleSetting(SettingError):
    """No setting of the sweep meets the constraints (the message shows the closest values)."""


@dataclass
class Recommendation:
    """The recommended setting and the rule that chose it.

    Attributes:
        summarizer, max_tokens, keep_recent_tokens, engine: the setting.
        cost: its cost (summed over conversations), in the ``cost_column``.
        values: the constrained metrics for it (worst conversation, or mean with ``over="mean"``);
            with no constraints, its mean loss.
        candidates: every feasible setting, cheapest first (with no constraints: the Pareto front).
        rule: how the setting was chosen, in one sentence.
    """

    summarizer: str | None
    max_tokens: int
    keep_recent_tokens: int
    cost: float
    cost_column: str
    values: dict[str, float]
    candidates: pd.DataFrame
    constraints: list[tuple[str, str, float]]
    rule: str = ""
    engine: str = STOCK_ENGINE

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={v:.3g}" for k, v in self.values.items())
        engine = f"engine={self.engine!r}, " if self.engine != STOCK_ENGINE else ""
        return (
            f"Recommendation({engine}summarizer={self.summarizer!r}, max_tokens={self.max_tokens}, "
            f"keep_recent_tokens={self.keep_recent_tokens}, {self.cost_column}={self.cost:.6g}; {values}; "
            f"{len(self.candidates)} feasible settings)"
        )

    def _repr_html_(self) -> str:
        table = self.candidates.to_html(index=False, max_rows=20, na_rep="")
        return f"<div><h4>{html.escape(repr(self))}</h4>{table}</div>"


def recommend(
    results: Sweep | pd.DataFrame,
    constraints: str | Mapping[str, Any] | None = None,
    *,
    cost: str = "total_input_tokens",
    loss: str = "lost_but_needed",
    over: str = "all",
    nan: str = "best",
) -> Recommendation:
    """The cheapest setting whose metrics meet ``constraints``; with none, the knee of the Pareto front.

    Args:
        results: a :class:`Sweep` or its results table.
        constraints: ``{"needed_anchor_recall": (">=", 0.9), "instruction_survival": ("==", 1)}``
            or ``"needed_anchor_recall >= 0.9 and instruction_survival == 1"``. None: the
            setting on the Pareto front of (``cost``, ``loss``) closest to the ideal corner.
        cost: the column to minimize, summed over conversations.
        loss: the quality metric of the Pareto front (used only without constraints), averaged
            over conversations.
        over: ``"all"``: every conversation must meet each constraint (its worst value
            counts); ``"mean"``: the mean over conversations must.
        nan: a missing metric (nothing compacted, nothing to keep) counts as the best value
            (``"best"``) or fails the constraint (``"drop"``).

    Raises:
        NoFeasibleSetting: nothing meets the constraints (the message shows, per constraint,
            the best value any setting reached).
    """
    table = _table(results)
    if constraints is None:
        return _knee(table, cost, loss, nan)
    parsed = parse_constraints(constraints)
    columns = sorted({c for c, _, _ in parsed})
    _need(table, cost, *columns)
    if over not in ("all", "mean"):
        raise SettingError(f"over must be 'all' or 'mean', got {over!r}")
    higher = {c: CATALOGUE[c].higher_is_better for c in columns if c in CATALOGUE}
    filled = _fill_nan(table, columns, nan if nan == "best" else "best", higher) if nan == "best" else table.copy()
    for column in columns:
        filled[column] = pd.to_numeric(filled[column], errors="coerce")
    usable = _per_setting(filled, SETTING_COLUMNS)
    keys = [c for c in SETTING_COLUMNS if c in usable.columns]
    if not len(usable):
        raise NoFeasibleSetting(
            "no complete setting in the sweep (every setting has a failed cell or a failed summary)"
        )
    grouped = usable.groupby(keys, dropna=False, sort=False)
    per = grouped.agg(**{cost: (cost, "sum"), "conversations": ("conversation_id", "nunique")})
    meets = pd.Series(True, index=per.index)
    shown: dict[str, pd.Series] = {}
    for column, op, value in parsed:
        test = _OPERATORS[op]
        if over == "all":
            ok = grouped[column].apply(partial(_all_meet, test=test, value=value))
            worst = grouped[column].min() if higher[column] else grouped[column].max()
            shown[column] = worst
        else:
            mean = grouped[column].mean()
            ok = mean.notna() & pd.Series(test(mean.to_numpy(dtype=float), value), index=mean.index)
            shown[column] = mean
        meets &= ok.reindex(per.index).fillna(False).astype(bool)
    summary = per.assign(**{f"{c} ({'worst' if over == 'all' else 'mean'})": s for c, s in shown.items()})
    feasible = summary[meets].sort_values(cost, kind="stable")
    if not len(feasible):
        closest = "; ".join(
            f"{c} {op} {v:g}: best reached {(s.max() if higher[c] else s.min()):.4g}" for (c, op, v), s in
            ((p, shown[p[0]]) for p in parsed)
        )
        raise NoFeasibleSetting(
            f"no setting meets {constraints!r} over {'every conversation' if over == 'all' else 'the mean'} "
            f"({len(per)} complete settings). {closest}"
        )
    best = feasible.iloc[0]
    setting = dict(
        zip(keys, feasible.index[0] if isinstance(feasible.index[0], tuple) else (feasible.index[0],), strict=True)
    )
    return Recommendation(
        summarizer=setting.get("summarizer"), max_tokens=int(setting["max_tokens"]),
        keep_recent_tokens=int(setting["keep_recent_tokens"]), cost=float(best[cost]), cost_column=cost,
        values={c: float(shown[c].loc[feasible.index[0]]) for c in columns},
        candidates=feasible.reset_index(), constraints=parsed, engine=setting.get("engine", STOCK_ENGINE),
        rule=_constrained_rule(cost, constraints, over, len(feasible)),
    )


def _constrained_rule(cost: str, constraints: str | Mapping[str, Any], over: str, feasible: int) -> str:
    where = "in every conversation" if over == "all" else "on the mean over conversations"
    return f"The cheapest setting ({_named(cost)} summed over conversations) meeting {constraints!r} {where}; {feasible} setting(s) qualified."


def _named(column: str) -> str:
    """A metric column as a person reads it in a sentence: its catalogue label, then the column."""
    name = metric_label(column)
    return f"{name.lower()} ({column})" if name != column else column


def _knee(table: pd.DataFrame, cost: str, loss: str, nan: str) -> Recommendation:
    """The Pareto-front setting closest to the ideal corner, both axes scaled to [0, 1] over all settings."""
    front = pareto_front(table, cost=cost, loss=loss, nan=nan)
    if not len(front):
        raise NoFeasibleSetting(f"no complete setting in the results has both {cost} and {loss}")
    higher = _maximize(loss, None)
    keys = [c for c in SETTING_COLUMNS if c in front.columns]
    settings = _per_setting(_fill_nan(table, [loss], nan, {loss: higher}), keys)
    points = settings.groupby(keys, dropna=False, sort=False).agg(**{cost: (cost, "sum"), loss: (loss, "mean")})

    def scaled(column: str, best_is_high: bool) -> pd.Series:
        low, high = float(points[column].min()), float(points[column].max())
        share = (front[column].astype(float) - low) / (high - low) if high > low else front[column].astype(float) * 0.0
        return 1 - share if best_is_high else share

    distance = (scaled(cost, False) ** 2 + scaled(loss, higher) ** 2) ** 0.5
    chosen = front.assign(_distance=distance).sort_values(["_distance", cost, *keys], kind="mergesort").iloc[0]
    return Recommendation(
        summarizer=chosen.get("summarizer"), max_tokens=int(chosen["max_tokens"]),
        keep_recent_tokens=int(chosen["keep_recent_tokens"]), cost=float(chosen[cost]), cost_column=cost,
        values={loss: float(chosen[loss])}, candidates=front, constraints=[], engine=chosen.get("engine", STOCK_ENGINE),
        rule=f"Per setting ({', '.join(keys)}), {_named(cost)} is summed and {_named(loss)} averaged over conversations; "
        f"the Pareto front holds the settings no other setting beats on both; the recommended one is the front point "
        f"closest to the ideal corner (lowest {cost}, {'highest' if higher else 'lowest'} {loss}) once both axes are "
        f"scaled to [0, 1] over all settings.",
    )
