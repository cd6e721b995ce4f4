"""The sweep a report over recorded conversations runs, and its defaults.

:func:`report_sweep` sweeps conversations with the report's summarizers (default
:data:`DEFAULT_REPORT_SUMMARIZERS`) over a grid (default :func:`default_grid`, scaled to the
conversations and the primary model's context window); :func:`~zett_lab.report.data.build_report_data`
then computes what the report states from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from functools import partial
from pathlib import Path

from ..errors import ResultFailure, SettingError
from ..load import SkippedFile
from ..load.conversation import Conversation
from ..replay.deadline import DEFAULT_ENGINE_TIMEOUT
from ..replay.engine import EngineSpec
from ..study.executors import default_executor
from ..study.grid import resolve_context_window
from ..study.results import Sweep
from ..study.session import SummarizerSpec
from ..study.sweep import sweep
from ..summarizers.cache import CacheSpec
from ..tokens import count_tokens, count_tokens_past

#: Summarizers a report over recorded conversations runs: the built-in offline ones, the
#: default first (no network, no key, deterministic).
DEFAULT_REPORT_SUMMARIZERS: tuple[str, ...] = ("anchors", "extractive", "truncate", "mask")

#: Primary model whose list prices turn token counts into money in the cost section.
DEFAULT_PRIMARY_MODEL = "gpt-5-mini"


def _round_sig(value: float, digits: int = 2) -> int:
    if value <= 0:
        return 0
    magnitude = 10 ** (math.floor(math.log10(value)) - digits + 1)
    return int(round(value / magnitude) * magnitude)


def default_grid(
    conversations: Sequence[Conversation], context_window: int | str | None = None
) -> dict[str, list[int]]:
    """A small grid scaled to the conversations: what ``zett-lab report`` runs by default.

    ``max_tokens`` at a quarter, half and all of the median conversation's size (two
    significant digits, at least 2,000), ``keep_recent_tokens`` at a quarter and half of the
    smallest ``max_tokens``. On the bundled fixtures: 6.1k/12k/24k × 1.5k/3k.

    ``context_window`` (tokens, or a model name from :data:`~zett_lab.study.grid.CONTEXT_WINDOWS`;
    the report passes its primary model): conversations longer than the window are scaled to
    the window instead, since a ``max_tokens`` above it is a context the model cannot take. A
    model without a known window leaves the grid as it is.
    """
    window = _known_window(context_window)
    # Within a window, a conversation is counted only until it is longer than the window (the median of sizes
    # capped there is the median capped there): a long session's rest is not tokenized here.
    cap = None if window is None else max(window, 8000)
    sizes = sorted(
        count_tokens(c.messages) if cap is None else count_tokens_past(c.messages, cap) for c in conversations
    ) or [8000]
    median = max(sizes[len(sizes) // 2], 8000)
    if cap is not None:
        median = min(median, cap)
    max_tokens = sorted({max(2000, _round_sig(median * share)) for share in (0.25, 0.5, 1.0)})
    keep = sorted({max(500, _round_sig(max_tokens[0] * share)) for share in (0.25, 0.5)})
    return {"max_tokens": max_tokens, "keep_recent_tokens": keep}


def _known_window(context_window: int | str | None) -> int | None:
    try:
        return resolve_context_window(context_window)
    except SettingError:
        if isinstance(context_window, str):
            return None  # a model whose window is not listed: no cap
        raise


def report_sweep(
    conversations: Sequence[Conversation] | str | Path | Sequence[str | Path],
    summarizers: Sequence[SummarizerSpec] | None = None,
    grid: Mapping[str, Sequence[int]] | None = None,
    *,
    cache: CacheSpec = None,
    progress: bool = False,
    executor: Executor | str | None = None,
    primary_model: str = DEFAULT_PRIMARY_MODEL,
    strict: bool = False,
    engines: Mapping[str, EngineSpec] | None = None,
    engine_timeout: float | None = DEFAULT_ENGINE_TIMEOUT,
    at_tail: Callable[[], object] | None = None,
    skipped_files: Sequence[SkippedFile] = (),
) -> Sweep:
    """The sweep a report over recorded conversations shows.

    Args:
        conversations: Conversations, or a path / paths for :func:`zett_lab.load_all`.
        summarizers: Specs or models (default :data:`DEFAULT_REPORT_SUMMARIZERS`).
        grid: ``{"max_tokens": [...], "keep_recent_tokens": [...]}`` (default :func:`default_grid`
            within ``primary_model``'s context window).
        cache: Summary cache for the replays (see :func:`zett_lab.replay`).
        progress: Show a progress bar (a widget in a notebook, on stderr in a terminal).
        executor: Passed to :func:`zett_lab.sweep` (None: the local process pool, started before the grid is
            made so that its start-up overlaps the grid and the plan).
        primary_model: Price-table model for the money columns.
        strict: Stop at the first failed summary or replay (:class:`~zett_lab.errors.ResultFailure`).
        engines: ``{label: engine}`` to compare (see :func:`zett_lab.sweep`); the report then
            shows each engine (or engine · summarizer) where it shows a summarizer.
        engine_timeout: Seconds each compaction pass may take (see :func:`zett_lab.replay`).
        at_tail: What the report needs next, done at the sweep's tail (see :func:`zett_lab.sweep`), after
            each conversation's tokens are counted there (what "What was studied" states; the count is memoized).
        skipped_files: Files of the input folders that could not be read (kept in the sweep; the report lists them).

    Raises:
        SettingError: no conversation.
        ResultFailure: no replay succeeded (the first error is named), or ``strict`` stopped.
    """
    if isinstance(conversations, (str, Path)) or (
        isinstance(conversations, (list, tuple)) and conversations and isinstance(conversations[0], (str, Path))
    ):
        from ..load import load_all

        conversations = load_all(conversations)
    conversations = list(conversations)
    if not conversations:
        raise SettingError("a report needs at least one conversation")
    if executor is None:
        default_executor()  # the local pool starts while the grid and the sweep's plan are made
    grid = dict(grid or default_grid(conversations, primary_model))
    result = sweep(
        conversations,
        max_tokens=list(grid["max_tokens"]),
        keep_recent_tokens=list(grid["keep_recent_tokens"]),
        summarizers=list(summarizers or DEFAULT_REPORT_SUMMARIZERS),
        cache=cache,
        progress=bool(progress),
        executor=executor,
        primary_model=primary_model,
        strict=strict,
        engines=engines,
        engine_timeout=engine_timeout,
        at_tail=partial(_counted_then, conversations, at_tail),
        skipped_files=skipped_files,
    )
    errors = result.results["error"].dropna()
    if not len(result.results) or len(errors) == len(result.results):
        raise ResultFailure(f"no replay succeeded{f' (first error: {errors.iloc[0]})' if len(errors) else ''}")
    return result


def _counted_then(conversations: Sequence[Conversation], then: Callable[[], object] | None) -> None:
    """A report sweep's tail: every conversation's tokens counted (the studied facts read them from the memoized
    counter, here rather than after the sweep), then the caller's ``then``."""
    for conversation in conversations:
        count_tokens(conversation.messages)
    if then is not None:
        then()
