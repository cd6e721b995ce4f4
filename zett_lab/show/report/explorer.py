"""The data of the report's explorer: one precomputed cell per (summarizer, max_tokens, keep_recent_tokens).

The page's script switches between cells with no kernel: each cell holds a small timeline SVG
(:func:`~zett_lab.show.report.svg.mini_timeline`, numbers only), a status line, the step table by
column (:func:`column`) and the rows of the compaction table, as plain values the script writes with
``textContent``.

Each cell is in the page as its JSON, gzip-compressed and base64-encoded (:func:`packed`), and the
script unpacks only the cell shown (the browser's own ``DecompressionStream``): a long conversation's
cells hold every model step of every replay (3.5 MB as plain JSON for 2,500 steps × 24 replays), which
made the page heavy to send and slow to open; packed, they are a tenth of that and cost nothing until
shown.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from ...formatting import count, decimal
from ...measure.catalogue import label
from ...records import is_missing, plain
from ...replay.schema import BELOW_THRESHOLD
from ...replay.trace import Trace
from ...report.data import ReportData
from ...report.lost import excerpt
from ...report.tables import DIGITS
from .content import definition
from .svg import marker_legend, mini_timeline

T = TypeVar("T")


def _columns(*columns: tuple[str, bool]) -> list[dict[str, Any]]:
    """Table columns for the page's script: label, right-aligned or not, and the label's meaning on hover."""
    return [{"label": text, "num": num, "title": definition(text)} for text, num in columns]


#: Columns of the explorer's step table (``num``: right-aligned).
EXPLORER_STEP_COLUMNS = _columns(
    ("step", True),
    ("turn", True),
    ("estimate", True),
    ("source", False),
    ("decision", False),
    ("context sent", True),
    ("over budget", False),
)

#: Columns of the explorer's compaction table.
EXPLORER_COMPACTION_COLUMNS = _columns(
    ("#", True),
    ("step", True),
    ("span (messages)", False),
    ("span tokens", True),
    ("summary tokens", True),
    ("compression", True),
    ("outcome", False),
    (label("needed_anchor_recall"), True),
    (label("lost_but_needed"), True),
    ("summary (start)", False),
)


def _step_columns(trace: Trace) -> list[dict[str, Any]]:
    """The step table by column (:func:`column`): thousands of rows per replay, so numbers go as differences."""
    steps = trace.steps
    decisions = [
        "applied" if applied else ("" if reason == BELOW_THRESHOLD else (reason or ""))
        for applied, reason in zip(steps["applied"], steps["skip_reason"], strict=True)
    ]
    return [
        column(steps["step"], count),
        column(steps["turn"], count),
        column(steps["estimate"], count),
        column([plain(source, DIGITS) for source in steps["estimate_source"]], str),
        column(decisions, str),
        column(steps["context_tokens_after"], count),
        column(["yes" if bool(over) else "" for over in steps["over_budget_after"]], str),
    ]


def _whole_numbers(series: pd.Series) -> bool:
    """Whether a column holds whole numbers (by its type), at least one and none missing."""
    return series.dtype.kind == "i" and len(series) > 0 and not series.isna().any()


def column(values: Iterable[T], text: Callable[[T], str]) -> dict[str, list[int] | list[str]]:
    """One table column as the page's script reads it: whole numbers (none missing) written by ``text`` =
    :func:`~zett_lab.formatting.count` as ``{"d": differences}``, each from the one before (the script adds them
    up and writes each with thousands separators, as ``count`` does); anything else as ``{"v": distinct texts (by
    ``text``), "c": each row's index into them}``."""
    if text is count and isinstance(values, pd.Series) and _whole_numbers(values):
        # the loop's differences below, at once (thousands of steps per replay)
        return {"d": np.diff(values.to_numpy(dtype=np.int64), prepend=0).tolist()}
    values = list(values)
    whole = all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in values)
    if values and text is count and whole:
        numbers = [int(v) for v in values if isinstance(v, (int, np.integer))]
        return {"d": [b - a for a, b in zip([0, *numbers[:-1]], numbers, strict=True)]}
    texts: dict[str, int] = {}
    codes = [texts.setdefault(text(v), len(texts)) for v in values]
    return {"v": list(texts), "c": codes}


def _compaction_rows(trace: Trace, measured: Mapping[int, Mapping[Any, Any]]) -> list[list[Any]]:
    rows = []
    for row in trace.compactions.to_dict("records"):
        m = measured.get(int(row["compaction_id"]), {})
        outcome = "applied" if row["applied"] else (row["skip_reason"] or "")
        span = "" if is_missing(row["span_start"]) else f"{int(row['span_start'])}–{int(row['span_end'])}"
        rows.append(
            [
                count(row["compaction_id"]),
                count(row["step"]),
                span,
                count(row["older_tokens"]),
                count(row["summary_tokens"]),
                decimal(row["compression_ratio"]),
                outcome,
                decimal(m.get("needed_anchor_recall")),
                count(m.get("lost_but_needed")),
                excerpt(row["summary_text"] or "", None, 110),
            ]
        )
    return rows


def cell_data(data: ReportData, trace: Trace) -> dict[str, object]:
    """One explorer cell: timeline SVG, status line, step rows, compaction rows."""
    losses = data.losses_for(trace)
    measured = (
        {int(r["compaction_id"]): r for r in losses.compactions.to_dict("records")} if len(losses.compactions) else {}
    )
    summary = trace.summary()
    status = (
        f"{count(summary['steps'])} steps · {summary['compactions_applied']} compaction(s) applied · "
        f"{summary['rejected_not_smaller']} rejected as not smaller · "
        f"peak context {count(summary['peak_context'])} tokens · {count(summary['steps_over_budget'])} step(s) over budget · "
        f"{count(summary['total_input_tokens'])} primary input tokens"
    )
    nar = losses.conversation.iloc[0].get("needed_anchor_recall") if len(losses.conversation) else None
    if not is_missing(nar):
        status += f" · needed-anchor recall {decimal(nar)}"
    svg = mini_timeline(trace.steps, trace.setting.max_tokens, trace.setting.keep_recent_tokens)
    return {
        "svg": svg,
        "status": status,
        "rows": len(trace.steps),
        "steps": _step_columns(trace),
        "compactions": _compaction_rows(trace, measured),
    }


def packed(cell: Mapping[str, object]) -> str:
    """A cell as the page holds it: its JSON, gzip-compressed (no timestamp: the same cell gives the same bytes)
    and base64-encoded (no character in it can end the page's ``<script>`` element)."""
    text = json.dumps(cell, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


def explorer_view(data: ReportData) -> dict[str, object]:
    """What the explorer section shows: its conversation, the controls' first choice, and every cell (packed)."""
    names, grid = data.summarizers, data.grid
    cells = {}
    for index, name in enumerate(names):
        for max_tokens in grid["max_tokens"]:
            for keep in grid["keep_recent_tokens"]:
                trace = data.trace_for(data.explore_id, name, max_tokens, keep)
                if trace is not None:
                    cells[f"{index}|{max_tokens}|{keep}"] = packed(cell_data(data, trace))
    rec = data.recommendation
    return {
        "conversation_id": data.explore_id,
        "summarizer": names.index(rec["summarizer"]) if rec is not None and rec["summarizer"] in names else 0,
        "max_tokens": rec["max_tokens"] if rec is not None else grid["max_tokens"][0],
        "keep_recent_tokens": rec["keep_recent_tokens"] if rec is not None else grid["keep_recent_tokens"][0],
        "markers": [(symbol, name, definition(name)) for symbol, name in marker_legend()],
        "data": {
            "cells": cells,
            "step_columns": EXPLORER_STEP_COLUMNS,
            "compaction_columns": EXPLORER_COMPACTION_COLUMNS,
        },
    }
