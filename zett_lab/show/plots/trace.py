"""Figures of one replayed conversation: the context timeline and the summarized/kept message strip."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ...formatting import compact
from ...records import flags
from ...replay.schema import FAILURE_REASONS, NO_WINDOW_REASONS, NOT_SMALLER, SUMMARY_FAILED
from .base import (
    KIND_STYLES,
    LINE_COLOR,
    NO_WINDOW_OUTCOME,
    OUTCOME_STYLES,
    drawing_style,
    figure_and_axes,
    floats,
    token_axis,
    true_runs,
    whiten,
)

if TYPE_CHECKING:
    from ...replay.trace import Trace


def timeline(trace: Trace, ax: Axes | None = None, *, title: str | None = None, legend: bool = True) -> Figure:
    """The engine's estimate at every model step, against the limits, with every compaction decision.

    Drawn: the context sawtooth (solid line through each step's estimate before the check
    and the context actually sent after it, so an applied compaction is a vertical drop);
    estimate markers, open when the estimator decided and filled when the provider-usage
    baseline did; ``max_tokens`` (dash-dot) and ``keep_recent_tokens`` (dotted); one marker
    shape per compaction outcome (applied ``v``, rejected as not smaller ``X``, failed
    ``s``, threshold crossed with no window ``|``), a ring around manual ones; steps sent
    over budget shaded with hatching; thin dotted lines at turn starts.

    Args:
        trace: A :class:`~zett_lab.replay.trace.Trace`.
        ax: Draw into this axes instead of a new figure.
        title: Override the title (default: conversation, limits, summarizer, outcomes).
        legend: Draw the legend.
    """
    steps = trace.steps
    with drawing_style():
        fig, ax = figure_and_axes(ax, (10.0, 4.2))
        x = floats(steps["step"])
        estimate = floats(steps["estimate"])
        sent = floats(steps["context_tokens_after"])
        estimate_known = np.where(np.isnan(estimate), sent, estimate)
        max_tokens, keep_recent = _limits(trace)
        handles: list[Any] = _over_budget_spans(ax, steps, x)
        _turn_starts(ax, steps, x)
        handles += _context_path(ax, steps, x, estimate, estimate_known, sent)
        handles += _limit_lines(ax, max_tokens, keep_recent)
        outcomes, manual = _outcome_steps(trace, x)
        handles += _outcome_marks(ax, outcomes, manual, x, estimate_known)
        top = np.nanmax(
            [np.nanmax(estimate_known) if len(x) else 0, np.nanmax(sent) if len(x) else 0, max_tokens or 0, 1]
        )
        ax.set_ylim(0, top * (1.42 if legend else 1.08))
        if len(x):
            ax.set_xlim(x.min() - 0.8, x.max() + 0.8)
        ax.set_xlabel("model step")
        ax.set_ylabel("context tokens")
        token_axis(ax.yaxis)
        locator = ax.xaxis.get_major_locator()
        if isinstance(locator, MaxNLocator):
            locator.set_params(integer=True)
        ax.set_title(title if title is not None else _timeline_title(trace, max_tokens, keep_recent), loc="left")
        if legend and handles:
            ax.legend(
                handles=handles,
                loc="upper left",
                ncol=3,
                frameon=True,
                framealpha=0.92,
                borderaxespad=0.4,
                handlelength=2.4,
            )
    return fig


def _limits(trace: Trace) -> tuple[int | None, int | None]:
    """``max_tokens`` and ``keep_recent_tokens`` of the replay (None for a trace of given spans)."""
    return trace.settings.max_tokens, trace.settings.keep_recent_tokens


def _over_budget_spans(ax: Axes, steps: pd.DataFrame, x: np.ndarray) -> list[Any]:
    """Hatch the runs of steps sent over budget; the legend handle when there are any."""
    over = flags(steps["over_budget_after"]) if len(steps) else np.zeros(0, bool)
    for start, stop in true_runs(over):
        ax.axvspan(
            x[start] - 0.5,
            x[stop - 1] + 0.5,
            facecolor=(0.8, 0.2, 0.07, 0.10),
            edgecolor=(0.8, 0.2, 0.07, 0.55),
            linewidth=0,
            hatch="///",
            zorder=0.5,
        )
    if not over.any():
        return []
    return [
        Patch(
            facecolor=(0.8, 0.2, 0.07, 0.10),
            edgecolor=(0.8, 0.2, 0.07, 0.55),
            hatch="///",
            linewidth=0,
            label=f"sent over budget ({int(over.sum())} steps)",
        )
    ]


def _turn_starts(ax: Axes, steps: pd.DataFrame, x: np.ndarray) -> None:
    """Thin dotted lines where a turn starts (left out when there are more than 150)."""
    turns = steps["turn"].to_numpy() if len(steps) else np.zeros(0)
    starts = x[1:][np.diff(turns.astype(float)) != 0] if len(turns) > 1 else np.zeros(0)
    if 0 < len(starts) <= 150:
        for value in starts:
            ax.axvline(value - 0.5, color="#999999", linewidth=0.5, linestyle=":", zorder=0.6)


def _context_path(
    ax: Axes, steps: pd.DataFrame, x: np.ndarray, estimate: np.ndarray, estimate_known: np.ndarray, sent: np.ndarray
) -> list[Any]:
    """The sawtooth (estimate → sent at every step) and the estimate markers, open or filled by their source."""
    if not len(x):
        return []
    path_x = np.repeat(x, 2)
    path_y = np.column_stack([estimate_known, sent]).ravel()
    (line,) = ax.plot(
        path_x, path_y, color=LINE_COLOR, linewidth=1.2, linestyle="-", zorder=2, label="context: estimate → sent"
    )
    handles: list[Any] = [line]
    source = steps["estimate_source"].astype("object").to_numpy()
    size = 4.5 if len(x) <= 150 else 3.0 if len(x) <= 600 else 2.0
    for name, face, label in (
        ("estimator", "white", "estimate from counter (open)"),
        ("usage", LINE_COLOR, "estimate from usage baseline (filled)"),
    ):
        mask = (source == name) & ~np.isnan(estimate)
        if mask.any():
            (points,) = ax.plot(
                x[mask],
                estimate[mask],
                linestyle="none",
                marker="o",
                markersize=size,
                markerfacecolor=face,
                markeredgecolor=LINE_COLOR,
                markeredgewidth=0.8,
                zorder=3,
                label=label,
            )
            handles.append(points)
    return handles


def _limit_lines(ax: Axes, max_tokens: int | None, keep_recent: int | None) -> list[Any]:
    """Horizontal lines at ``max_tokens`` (dash-dot) and ``keep_recent_tokens`` (dotted)."""
    handles = []
    if max_tokens is not None:
        handles.append(
            ax.axhline(
                max_tokens,
                color="black",
                linestyle="-.",
                linewidth=1.2,
                zorder=1.5,
                label=f"max_tokens = {max_tokens:,}",
            )
        )
    if keep_recent is not None:
        handles.append(
            ax.axhline(
                keep_recent,
                color="#555555",
                linestyle=":",
                linewidth=1.2,
                zorder=1.5,
                label=f"keep_recent_tokens = {keep_recent:,}",
            )
        )
    return handles


def _outcome_steps(trace: Trace, x: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The steps of each compaction outcome (keys of :data:`OUTCOME_STYLES`), and the steps of manual compactions."""
    steps, compactions = trace.steps, trace.compactions
    outcomes: dict[str, np.ndarray] = {}
    manual = np.zeros(0)
    manual_no_window = np.zeros(0)
    if len(compactions):
        cstep = floats(compactions["step"])
        applied = flags(compactions["applied"])
        reason = compactions["skip_reason"].astype("object").to_numpy()
        has_window = ~np.isnan(floats(compactions["span_start"]))
        outcomes["applied"] = cstep[applied]
        failed = np.isin(reason, FAILURE_REASONS)
        outcomes[NOT_SMALLER] = cstep[reason == NOT_SMALLER]
        outcomes[SUMMARY_FAILED] = cstep[failed]
        manual_no_window = cstep[(compactions["trigger"].to_numpy() == "manual") & ~applied & ~has_window & ~failed]
        manual = cstep[compactions["trigger"].to_numpy() == "manual"]
    if len(steps):
        reason = steps["skip_reason"].astype("object").to_numpy()
        no_window = x[np.isin(reason, NO_WINDOW_REASONS) & flags(steps["triggered"])]
        outcomes[NO_WINDOW_OUTCOME] = np.concatenate([no_window, manual_no_window])
    return outcomes, manual


def _outcome_marks(
    ax: Axes, outcomes: dict[str, np.ndarray], manual: np.ndarray, x: np.ndarray, estimate_known: np.ndarray
) -> list[Any]:
    """One marker shape per outcome on the sawtooth, and a ring around manual compactions."""
    index = {int(s): i for i, s in enumerate(x)}

    def y_at(step_values: np.ndarray) -> np.ndarray:
        return np.array([estimate_known[index[int(s)]] if int(s) in index else np.nan for s in step_values])

    handles = []
    for name, style in OUTCOME_STYLES.items():
        at = outcomes.get(name, np.zeros(0))
        if not len(at):
            continue
        filled = style["marker"] not in ("|", "x", "+")
        (marks,) = ax.plot(
            at,
            y_at(at),
            linestyle="none",
            marker=style["marker"],
            markersize=style["size"],
            markerfacecolor=style["color"],
            markeredgecolor="black" if filled else style["color"],
            markeredgewidth=0.7 if filled else 2.0,
            zorder=4,
            label=f"{style['label']} ({len(at)})",
        )
        handles.append(marks)
    if len(manual):
        (rings,) = ax.plot(
            manual,
            y_at(manual),
            linestyle="none",
            marker="o",
            markersize=15,
            markerfacecolor="none",
            markeredgecolor="black",
            markeredgewidth=1.0,
            zorder=4,
            label=f"manual compaction ({len(manual)})",
        )
        handles.append(rings)
    return handles


def _timeline_title(trace: Trace, max_tokens: int | None, keep_recent: int | None) -> str:
    """Conversation, limits and the count of each outcome."""
    conversation_id = getattr(trace.conversation, "id", "")
    summary = trace.summary()
    return (
        f"{conversation_id}: max_tokens={compact(max_tokens)}, keep_recent_tokens={compact(keep_recent)}"
        f" — {summary['compactions_applied']} applied, {summary['rejected_not_smaller']} not smaller,"
        f" {summary['failed']} failed, {summary['steps_over_budget']} of {summary['steps']} steps over budget"
    )


def message_strip(trace: Trace, ax: Axes | None = None, *, title: str | None = None, legend: bool = True) -> Figure:
    """For each compaction, the original messages it summarized and the ones it kept verbatim.

    One row per summary attempt with a window. Messages ``span_start:span_end`` (what the
    checkpoint stands for, cumulative over earlier checkpoints) are drawn as full-height,
    full-colour cells; the kept tail ``span_end:n_recorded`` as thinner, lighter cells; the
    recorded future as a thin grey line. Cells are coloured *and hatched* by message kind
    (:data:`KIND_STYLES`) so the strip reads in black and white. Attempts that were not
    applied are labelled with the reason.
    """
    from ...load.conversation import role_of

    messages = trace.conversation.messages
    kinds = np.array([role_of(m) for m in messages], dtype=object)
    n = len(messages)
    rows = trace.compactions
    rows = rows[pd.notna(rows["span_start"])] if len(rows) else rows
    with drawing_style():
        fig, ax = figure_and_axes(ax, (10.0, 1.3 + 0.34 * max(len(rows), 1)))
        verts: dict[tuple[str, str], list[list[tuple[float, float]]]] = {}
        labels = []
        for y, (_, row) in enumerate(rows.iterrows()):
            _row_cells(verts, kinds, row, y)
            _row_lines(ax, row, y, n)
            labels.append(_row_label(row))
        _draw_cells(ax, verts, n)
        ax.set_xlim(0, max(n, 1))
        ax.set_ylim(len(rows) - 0.5 if len(rows) else 0.5, -0.5 - (1.3 if legend else 0))
        ax.set_yticks(range(len(rows)), labels)
        ax.set_xlabel("message index in the recorded conversation")
        if not len(rows):
            ax.text(0.5, 0.5, "no compaction attempt with a window", transform=ax.transAxes, ha="center", va="center")
        if title is None:
            title = (
                f"{getattr(trace.conversation, 'id', '')}: summarized (tall) and kept verbatim (thin) messages per "
                "compaction"
            )
        ax.set_title(title, loc="left")
        if legend:
            drawn = {kind for _, kind in verts}
            handles = _strip_legend_handles(drawn)
            ax.legend(handles=handles, loc="upper left", ncol=min(len(handles), 5), frameon=True, framealpha=0.92)
    return fig


def _row_cells(
    verts: dict[tuple[str, str], list[list[tuple[float, float]]]], kinds: np.ndarray, row: pd.Series, y: int
) -> None:
    """Add one row's cells to ``verts`` (keyed by region and kind): summarized tall, kept thin, one run per kind."""
    start, end, seen = int(row["span_start"]), int(row["span_end"]), int(row["n_recorded"])
    for region, lo, hi, half in (("summarized", start, end, 0.4), ("kept", end, seen, 0.22)):
        if hi <= lo:
            continue
        segment = kinds[lo:hi]
        change = np.flatnonzero(segment[1:] != segment[:-1]) + 1
        bounds = [0, *change.tolist(), len(segment)]
        for a, b in itertools.pairwise(bounds):
            x0, x1 = lo + a, lo + b
            verts.setdefault((region, segment[a]), []).append(
                [(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)]
            )


def _row_lines(ax: Axes, row: pd.Series, y: int, n: int) -> None:
    """The recorded future (thin grey) and the compaction point (black tick) of one row."""
    seen = int(row["n_recorded"])
    if seen < n:
        ax.plot([seen, n], [y, y], color="#999999", linewidth=1.0, solid_capstyle="butt", zorder=1)
    ax.plot([seen, seen], [y - 0.45, y + 0.45], color="black", linewidth=1.6, zorder=3)


def _row_label(row: pd.Series) -> str:
    """Compaction id and step, manual or not, and why it was not applied."""
    label = f"#{int(row['compaction_id'])} step {int(row['step'])}"
    if row["trigger"] == "manual":
        label += " (manual)"
    if not bool(row["applied"]):
        label += f"\nnot applied: {row['skip_reason']}"
    return label


def _draw_cells(ax: Axes, verts: dict[tuple[str, str], list[list[tuple[float, float]]]], n: int) -> None:
    """One hatched collection per region and kind; per-message outlines only while cells are wide enough to see."""
    edge, width = ("#222222", 0.3) if n <= 150 else ((0.13, 0.13, 0.13, 0.55), 0.0)  # the hatch follows the edge
    for (region, kind), polygons in sorted(verts.items()):
        style = KIND_STYLES.get(kind, {"color": "#777777", "hatch": "oo"})
        face = style["color"] if region == "summarized" else whiten(style["color"], 0.55)
        ax.add_collection(
            PolyCollection(
                polygons, facecolors=[face], edgecolors=[edge], linewidths=width, hatch=style["hatch"] or None, zorder=2
            )
        )


def _strip_legend_handles(drawn: set[str]) -> list[Artist]:
    """The message kinds drawn, then the regions and lines of the strip."""
    handles: list[Artist] = [
        Patch(
            facecolor=KIND_STYLES[k]["color"],
            edgecolor="#222222",
            hatch=KIND_STYLES[k]["hatch"] or None,
            linewidth=0.3,
            label=k,
        )
        for k in KIND_STYLES
        if k in drawn
    ]
    return handles + [
        Patch(facecolor="#777777", edgecolor="#222222", label="summarized (tall)"),
        Patch(facecolor=whiten("#777777", 0.55), edgecolor="#222222", label="kept verbatim (thin)"),
        Line2D([], [], color="black", linewidth=1.6, label="compaction point"),
        Line2D([], [], color="#999999", linewidth=1.0, label="recorded future"),
    ]
