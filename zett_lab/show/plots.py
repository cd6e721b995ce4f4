"""Figures for traces, sweeps and loss metrics: matplotlib Figures, nothing global.

Every function returns a :class:`matplotlib.figure.Figure` and accepts ``ax=`` to draw
into an existing axes (then the axes' figure is returned). Figures are built with the
object-oriented API (``matplotlib.figure.Figure``), never through ``pyplot``, so nothing
is registered with a GUI backend and nothing leaks: drop the Figure and it is gone.

Every figure is readable in black and white: outcomes are told apart by marker shape,
regions by hatching, limits by line style; colour only repeats what shape already says.

Output is deterministic: :func:`to_svg` gives the same bytes for the same input (fixed
hash salt, text kept as text, no date in the metadata), so reports and tests can compare
figures byte for byte.

Example::

    >>> from zett_lab import plots
    >>> fig = plots.timeline(trace)                 # doctest: +SKIP
    >>> svg = plots.to_svg(fig)                     # doctest: +SKIP
    >>> fig, axes = plots.figure(ncols=2)           # doctest: +SKIP
    >>> plots.timeline(trace, ax=axes[0]); plots.message_strip(trace, ax=axes[1])  # doctest: +SKIP
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection, QuadMesh
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator
from numpy.typing import ArrayLike

from ..errors import SettingError
from ..measure.catalogue import CATALOGUE, higher_is_better
from ..records import flags

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

    from ..measure.compare import Comparison
    from ..measure.losses import Losses
    from ..replay.trace import Trace
    from ..study.sweep import Sweep

__all__ = [
    "KIND_STYLES",
    "OUTCOME_STYLES",
    "anchor_retention",
    "figure",
    "heatmap",
    "heatmap_cells",
    "image_boxes",
    "message_strip",
    "pareto",
    "summarizer_comparison",
    "timeline",
    "to_png",
    "to_svg",
]

#: rcParams every zett_lab figure is drawn and saved with (independent of the user's style).
STYLE: dict[RcKeyType, Any] = {
    "svg.hashsalt": "zett_lab",
    "svg.fonttype": "none",
    "svg.id": None,
    "font.family": ["DejaVu Sans"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "legend.fontsize": 8.0,
    "xtick.labelsize": 8.0,
    "ytick.labelsize": 8.0,
    "hatch.linewidth": 0.8,
    "axes.grid": False,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "path.simplify": True,
    "image.cmap": "viridis",
}

#: How each compaction outcome is drawn on the timeline: marker, colour, label.
OUTCOME_STYLES: dict[str, dict[str, Any]] = {
    "applied": {"marker": "v", "color": "#228833", "label": "compaction applied", "size": 9},
    "summary not smaller": {"marker": "X", "color": "#EE7733", "label": "rejected: summary not smaller", "size": 9},
    "summary failed": {"marker": "s", "color": "#CC3311", "label": "summary failed", "size": 8},
    "no window": {"marker": "|", "color": "#AA3377", "label": "threshold crossed, no window", "size": 11},
}

#: How each message kind is drawn in the message strip: colour and hatch.
KIND_STYLES: dict[str, dict[str, str]] = {
    "user": {"color": "#4477AA", "hatch": "///"},
    "assistant": {"color": "#EE6677", "hatch": ""},
    "tool": {"color": "#228833", "hatch": "..."},
    "system": {"color": "#BBBBBB", "hatch": "xxx"},
    "agent": {"color": "#CCBB44", "hatch": "\\\\\\"},
    "checkpoint": {"color": "#AA3377", "hatch": "+++"},
}

_LINE = "#1F3A68"
_OVER_BUDGET = "#CC3311"
_NO_WINDOW_REASONS = ("no whole-turn boundary", "only earlier checkpoints")


# --- plumbing --------------------------------------------------------------------------------


@contextmanager
def _style():
    with matplotlib.rc_context(STYLE):
        yield


def figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **subplot_kw: Any):
    """A new pyplot-free Figure and its axes (an array when more than one), styled like every zett_lab figure.

    Example::

        >>> fig, (left, right) = figure(ncols=2)
    """
    with _style():
        fig = Figure(figsize=figsize or (5.5 * ncols, 3.6 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=True, **subplot_kw)
    return fig, axes


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
    """The figure ``ax`` is drawn on (the whole figure, also when the caller's axes sit in a sub-figure), or a new one."""
    if ax is not None:
        if not isinstance(ax, Axes):
            raise SettingError(f"ax must be a matplotlib Axes, got {type(ax).__name__}")
        root = ax.get_figure(root=True)
        assert isinstance(root, Figure)  # an Axes always belongs to a figure
        return root, ax
    fig = Figure(figsize=figsize, layout="constrained")
    return fig, fig.add_subplot()


def to_svg(fig: Figure) -> str:
    """The figure as SVG text, byte-identical for identical figures (no date, fixed ids, text as text)."""
    buffer = io.StringIO()
    with _style():
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return buffer.getvalue()


def to_png(fig: Figure, dpi: float = 100, *, tight: bool = True) -> bytes:
    """The figure as PNG bytes (no software metadata), for widgets and quick looks.

    ``tight=False`` skips the tight bounding box (one draw instead of two), which widgets use
    on figures whose margins are already set.
    """
    buffer = io.BytesIO()
    with _style():
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight" if tight else None)
    return buffer.getvalue()


def _floats(series: pd.Series) -> np.ndarray:
    """A nullable column as float64 with NaN for missing values."""
    return pd.to_numeric(series, errors="coerce").astype("float64").to_numpy(dtype=float, na_value=np.nan)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) index pairs of consecutive True values."""
    if not len(mask):
        return []
    padded = np.concatenate([[False], mask.astype(bool), [False]])
    changes = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(changes[0::2].tolist(), changes[1::2].tolist(), strict=True))


def _tokens(value: float | None) -> str:
    """Compact token count: 950, 12.5k, 1.2M."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    value = float(value)
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g}M"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.0f}"


def _token_axis(axis) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: _tokens(value)))


def _shade(color: str, amount: float) -> tuple[float, float, float]:
    """Mix a colour with white (amount 0 = colour, 1 = white)."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


# --- trace figures ---------------------------------------------------------------------------


def timeline(
    trace: Trace, ax: Axes | None = None, *, title: str | None = None, legend: bool = True
) -> Figure:
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
    steps, compactions, settings = trace.steps, trace.compactions, trace.settings
    with _style():
        fig, ax = _axes(ax, (10.0, 4.2))
        x = _floats(steps["step"])
        estimate = _floats(steps["estimate"])
        sent = _floats(steps["context_tokens_after"])
        estimate_known = np.where(np.isnan(estimate), sent, estimate)
        max_tokens = settings.get("max_tokens")
        keep_recent = settings.get("keep_recent_tokens")
        if max_tokens is None and len(steps):
            max_tokens = int(steps["max_tokens"].iloc[0])
        if keep_recent is None and len(steps):
            keep_recent = int(steps["keep_recent_tokens"].iloc[0])
        handles: list[Any] = []

        over = flags(steps["over_budget_after"]) if len(steps) else np.zeros(0, bool)
        for start, stop in _runs(over):
            ax.axvspan(
                x[start] - 0.5, x[stop - 1] + 0.5, facecolor=(0.8, 0.2, 0.07, 0.10),
                edgecolor=(0.8, 0.2, 0.07, 0.55), linewidth=0, hatch="///", zorder=0.5,
            )
        if over.any():
            handles.append(
                Patch(
                    facecolor=(0.8, 0.2, 0.07, 0.10),
                    edgecolor=(0.8, 0.2, 0.07, 0.55),
                    hatch="///",
                    linewidth=0,
                    label=f"sent over budget ({int(over.sum())} steps)",
                )
            )

        turns = steps["turn"].to_numpy() if len(steps) else np.zeros(0)
        starts = x[1:][np.diff(turns.astype(float)) != 0] if len(turns) > 1 else np.zeros(0)
        if 0 < len(starts) <= 150:
            for value in starts:
                ax.axvline(value - 0.5, color="#999999", linewidth=0.5, linestyle=":", zorder=0.6)

        if len(x):
            path_x = np.repeat(x, 2)
            path_y = np.column_stack([estimate_known, sent]).ravel()
            (line,) = ax.plot(path_x, path_y, color=_LINE, linewidth=1.2, linestyle="-", zorder=2,
                              label="context: estimate → sent")
            handles.append(line)
            source = steps["estimate_source"].astype("object").to_numpy()
            size = 4.5 if len(x) <= 150 else 3.0 if len(x) <= 600 else 2.0
            for name, face, label in (("estimator", "white", "estimate from counter (open)"),
                                      ("usage", _LINE, "estimate from usage baseline (filled)")):
                mask = (source == name) & ~np.isnan(estimate)
                if mask.any():
                    (points,) = ax.plot(x[mask], estimate[mask], linestyle="none", marker="o", markersize=size,
                                        markerfacecolor=face, markeredgecolor=_LINE, markeredgewidth=0.8, zorder=3,
                                        label=label)
                    handles.append(points)

        if max_tokens is not None:
            handles.append(ax.axhline(max_tokens, color="black", linestyle="-.", linewidth=1.2, zorder=1.5,
                                      label=f"max_tokens = {max_tokens:,}"))
        if keep_recent is not None:
            handles.append(ax.axhline(keep_recent, color="#555555", linestyle=":", linewidth=1.2, zorder=1.5,
                                      label=f"keep_recent_tokens = {keep_recent:,}"))

        def y_at(step_values: np.ndarray) -> np.ndarray:
            index = {int(s): i for i, s in enumerate(x)}
            return np.array([estimate_known[index[int(s)]] if int(s) in index else np.nan for s in step_values])

        outcomes: dict[str, np.ndarray] = {}
        manual = np.zeros(0)
        if len(compactions):
            cstep = _floats(compactions["step"])
            applied = flags(compactions["applied"])
            reason = compactions["skip_reason"].astype("object").to_numpy()
            has_window = ~np.isnan(_floats(compactions["span_start"]))
            outcomes["applied"] = cstep[applied]
            outcomes["summary not smaller"] = cstep[reason == "summary not smaller"]
            outcomes["summary failed"] = cstep[reason == "summary failed"]
            manual_no_window = cstep[
                (compactions["trigger"].to_numpy() == "manual") & ~applied & ~has_window & (reason != "summary failed")
            ]
            manual = cstep[compactions["trigger"].to_numpy() == "manual"]
        else:
            manual_no_window = np.zeros(0)
        if len(steps):
            reason = steps["skip_reason"].astype("object").to_numpy()
            no_window = x[np.isin(reason, _NO_WINDOW_REASONS) & flags(steps["triggered"])]
            outcomes["no window"] = np.concatenate([no_window, manual_no_window])
        for name, style in OUTCOME_STYLES.items():
            at = outcomes.get(name, np.zeros(0))
            if not len(at):
                continue
            filled = style["marker"] not in ("|", "x", "+")
            (marks,) = ax.plot(at, y_at(at), linestyle="none", marker=style["marker"], markersize=style["size"],
                               markerfacecolor=style["color"], markeredgecolor="black" if filled else style["color"],
                               markeredgewidth=0.7 if filled else 2.0, zorder=4, label=f"{style['label']} ({len(at)})")
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

        top = np.nanmax(
            [np.nanmax(estimate_known) if len(x) else 0, np.nanmax(sent) if len(x) else 0, max_tokens or 0, 1]
        )
        ax.set_ylim(0, top * (1.42 if legend else 1.08))
        if len(x):
            ax.set_xlim(x.min() - 0.8, x.max() + 0.8)
        ax.set_xlabel("model step")
        ax.set_ylabel("context tokens")
        _token_axis(ax.yaxis)
        locator = ax.xaxis.get_major_locator()
        if isinstance(locator, MaxNLocator):
            locator.set_params(integer=True)
        if title is None:
            conversation_id = getattr(trace.conversation, "id", "")
            summary = trace.summary()
            title = (
                f"{conversation_id}: max_tokens={_tokens(max_tokens)}, keep_recent_tokens={_tokens(keep_recent)}"
                f" — {summary['compactions_applied']} applied, {summary['rejected_not_smaller']} not smaller,"
                f" {summary['failed']} failed, {summary['steps_over_budget']} of {summary['steps']} steps over budget"
            )
        ax.set_title(title, loc="left")
        if legend and handles:
            ax.legend(handles=handles, loc="upper left", ncol=3, frameon=True, framealpha=0.92, borderaxespad=0.4,
                      handlelength=2.4)
    return fig


def message_strip(
    trace: Trace, ax: Axes | None = None, *, title: str | None = None, legend: bool = True
) -> Figure:
    """For each compaction, the original messages it summarized and the ones it kept verbatim.

    One row per summary attempt with a window. Messages ``span_start:span_end`` (what the
    checkpoint stands for, cumulative over earlier checkpoints) are drawn as full-height,
    full-colour cells; the kept tail ``span_end:n_recorded`` as thinner, lighter cells; the
    recorded future as a thin grey line. Cells are coloured *and hatched* by message kind
    (:data:`KIND_STYLES`) so the strip reads in black and white. Attempts that were not
    applied are labelled with the reason.
    """
    from ..load.conversation import role_of

    messages = trace.conversation.messages
    kinds = np.array([role_of(m) for m in messages], dtype=object)
    n = len(messages)
    rows = trace.compactions
    rows = rows[pd.notna(rows["span_start"])] if len(rows) else rows
    with _style():
        fig, ax = _axes(ax, (10.0, 1.3 + 0.34 * max(len(rows), 1)))
        verts: dict[tuple[str, str], list] = {}
        drawn: set[str] = set()
        labels = []
        for y, (_, row) in enumerate(rows.iterrows()):
            start, end, seen = int(row["span_start"]), int(row["span_end"]), int(row["n_recorded"])
            for region, lo, hi, half in (("summarized", start, end, 0.4), ("kept", end, seen, 0.22)):
                if hi <= lo:
                    continue
                segment = kinds[lo:hi]
                change = np.flatnonzero(segment[1:] != segment[:-1]) + 1
                bounds = [0, *change.tolist(), len(segment)]
                for a, b in itertools.pairwise(bounds):
                    x0, x1 = lo + a, lo + b
                    drawn.add(segment[a])
                    verts.setdefault((region, segment[a]), []).append(
                        [(x0, y - half), (x1, y - half), (x1, y + half), (x0, y + half)]
                    )
            if seen < n:
                ax.plot([seen, n], [y, y], color="#999999", linewidth=1.0, solid_capstyle="butt", zorder=1)
            ax.plot([seen, seen], [y - 0.45, y + 0.45], color="black", linewidth=1.6, zorder=3)
            label = f"#{int(row['compaction_id'])} step {int(row['step'])}"
            if row["trigger"] == "manual":
                label += " (manual)"
            if not bool(row["applied"]):
                label += f"\nnot applied: {row['skip_reason']}"
            labels.append(label)
        # Per-message outlines only while cells are wide enough to see; the hatch colour follows the edge.
        edge, width = ("#222222", 0.3) if n <= 150 else ((0.13, 0.13, 0.13, 0.55), 0.0)
        for (region, kind), polygons in sorted(verts.items()):
            style = KIND_STYLES.get(kind, {"color": "#777777", "hatch": "oo"})
            face = style["color"] if region == "summarized" else _shade(style["color"], 0.55)
            ax.add_collection(PolyCollection(polygons, facecolors=[face], edgecolors=[edge], linewidths=width,
                                             hatch=style["hatch"] or None, zorder=2))
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
            present = [k for k in KIND_STYLES if k in drawn]
            handles: list[Artist] = [
                Patch(
                    facecolor=KIND_STYLES[k]["color"],
                    edgecolor="#222222",
                    hatch=KIND_STYLES[k]["hatch"] or None,
                    linewidth=0.3,
                    label=k,
                )
                for k in present
            ]
            handles += [
                Patch(facecolor="#777777", edgecolor="#222222", label="summarized (tall)"),
                Patch(facecolor=_shade("#777777", 0.55), edgecolor="#222222", label="kept verbatim (thin)"),
                Line2D([], [], color="black", linewidth=1.6, label="compaction point"),
                Line2D([], [], color="#999999", linewidth=1.0, label="recorded future"),
            ]
            ax.legend(handles=handles, loc="upper left", ncol=min(len(handles), 5), frameon=True, framealpha=0.92)
    return fig


# --- sweep figures ---------------------------------------------------------------------------


def numeric_columns(results: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Numeric (and boolean) columns of a results table, minus ``exclude``."""
    excluded = set(exclude)
    return [
        c for c in results.columns
        if c not in excluded and (pd.api.types.is_numeric_dtype(results[c]) or pd.api.types.is_bool_dtype(results[c]))
    ]


def _edges(values: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted centre values (midpoints; geometric midpoints on a log axis)."""
    values = np.asarray(values, dtype=float)
    work = np.log(values) if log else values
    if len(work) == 1:
        half = abs(work[0]) * 0.2 if not log else 0.2
        half = half or 0.5
        edges = np.array([work[0] - half, work[0] + half])
    else:
        mid = (work[1:] + work[:-1]) / 2
        edges = np.concatenate([[work[0] - (mid[0] - work[0])], mid, [work[-1] + (work[-1] - mid[-1])]])
    return np.exp(edges) if log else edges


def _use_log(values: np.ndarray) -> bool:
    values = np.asarray(values, dtype=float)
    return len(values) >= 3 and values.min() > 0 and values.max() / values.min() >= 8


def _from_boundaries(items: Sequence[Any], column: str | None = None) -> pd.DataFrame:
    """Points of :class:`zett_lab.study.boundaries.Boundaries` walks (one per fixed value of the other setting).

    When ``column`` is one of the walk's segment columns (``compactions_applied``,
    ``attempts``, ``steps_over_budget``), only the values where that column changes are
    kept, annotated with its new value; otherwise every schedule change is kept.
    """
    rows = []
    for item in items:
        segments = getattr(item, "segments", None)
        metric: str | None = None
        values: dict[int, Any] = {}
        starts: list[int] = []
        if isinstance(segments, pd.DataFrame) and "start" in segments.columns:
            metric = (
                column
                if column in segments.columns
                else ("compactions_applied" if "compactions_applied" in segments.columns else None)
            )
            values = {int(a): b for a, b in zip(segments["start"], segments[metric], strict=True)} if metric else {}
            starts = [int(a) for a in segments["start"]]
        for value in item.values:
            walked, fixed = int(value), int(item.fixed)
            after = values.get(walked)
            if metric == column and column is not None and walked in starts:
                before = values.get(starts[starts.index(walked) - 1]) if starts.index(walked) else None
                if before is not None and after == before:
                    continue
            point = {"max_tokens": walked, "keep_recent_tokens": fixed} if item.parameter == "max_tokens" else \
                {"max_tokens": fixed, "keep_recent_tokens": walked}
            rows.append({**point, "parameter": item.parameter, "after": after})
    return pd.DataFrame(rows, columns=["max_tokens", "keep_recent_tokens", "parameter", "after"])


_SEGMENT_COLUMNS = ("compactions_applied", "attempts", "steps_over_budget")


def _is_boundaries(value: Any) -> bool:
    return all(hasattr(value, name) for name in ("parameter", "fixed", "values"))


def _boundary_frames(boundaries: Any, column: str | None = None) -> list[tuple[str, pd.DataFrame]]:
    """Normalize decision boundaries to (label, frame) pairs with max_tokens / keep_recent_tokens columns."""
    if boundaries is None:
        return []
    if _is_boundaries(boundaries):
        boundaries = [boundaries]
    if isinstance(boundaries, (list, tuple)) and boundaries and all(_is_boundaries(b) for b in boundaries):
        label = f"{column} changes (exact)" if column in _SEGMENT_COLUMNS else "schedule changes (exact)"
        return [(label, _from_boundaries(boundaries, column))]
    for attribute in ("boundaries", "table", "frame", "results"):
        inner = getattr(boundaries, attribute, None)
        if isinstance(inner, pd.DataFrame):
            boundaries = inner
            break
    if isinstance(boundaries, pd.DataFrame):
        label_column = next(
            (c for c in ("boundary", "label", "name", "metric", "kind", "change") if c in boundaries.columns), None
        )
        if label_column is None:
            return [("decision boundary", boundaries)]
        return [(str(label), group) for label, group in boundaries.groupby(label_column, sort=True, dropna=False)]
    if isinstance(boundaries, Mapping):
        out = []
        for label, value in boundaries.items():
            if _is_boundaries(value) or (
                isinstance(value, (list, tuple)) and value and all(_is_boundaries(b) for b in value)
            ):
                out.append((str(label), _from_boundaries([value] if _is_boundaries(value) else value, column)))
                continue
            frame = (
                value
                if isinstance(value, pd.DataFrame)
                else pd.DataFrame(list(value), columns=["max_tokens", "keep_recent_tokens"])
            )
            out.append((str(label), frame))
        return out
    if isinstance(boundaries, Sequence):
        return [("decision boundary", pd.DataFrame(list(boundaries), columns=["max_tokens", "keep_recent_tokens"]))]
    raise SettingError(
        "boundaries: expected Boundaries (zett_lab.study.boundaries.decision_boundaries) or a list of them, a "
        "DataFrame, "
        f"a mapping, or a list of (max_tokens, keep_recent_tokens); got {type(boundaries).__name__}"
    )


_BOUNDARY_STYLES = [("--", "o"), (":", "s"), ("-.", "^"), ((0, (5, 1, 1, 1)), "D")]


def heatmap(
    sweep_results: Sweep | pd.DataFrame,
    column: str,
    ax: Axes | None = None,
    boundaries: Any = None,
    *,
    aggregate: str = "mean",
    where: Mapping[str, Any] | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    highlight: tuple[int, int] | None = None,
    title: str | None = None,
) -> Figure:
    """One sweep column over ``max_tokens`` (x) × ``keep_recent_tokens`` (y).

    Cells sit on the real token scale (log when the grid spans 8× or more), so exact
    decision boundaries land where they belong, between grid points. Several rows per
    cell (conversations, summarizers) are combined with ``aggregate``; ``where`` filters
    first (``where={"summarizer": "anchors"}``). Missing cells (not run, or invalid:
    keep_recent_tokens ≥ max_tokens) are cross-hatched. Values are printed in the cells
    when the grid is small, so the map reads in black and white.

    Args:
        sweep_results: ``Sweep.results`` (needs ``max_tokens``, ``keep_recent_tokens``, ``column``).
        column: Any numeric or boolean column.
        boundaries: Exact decision boundaries: :class:`zett_lab.study.boundaries.Boundaries` (the
            result of :func:`zett_lab.study.sweep.decision_boundaries`) or a list of them (one walk
            per ``keep_recent_tokens`` row, or per ``max_tokens`` column); a DataFrame of
            points with ``max_tokens`` and/or ``keep_recent_tokens`` columns (grouped by a
            ``boundary``/``label``/``metric`` column when present); a mapping label -> any of
            these; or a list of ``(max_tokens, keep_recent_tokens)`` points. A point walked
            along ``max_tokens`` is a vertical mark at its exact value across its row
            (annotated ``→n`` with the compactions applied from there on, when known); one
            walked along ``keep_recent_tokens`` a horizontal mark across its column; only
            ``max_tokens`` is a vertical line, only ``keep_recent_tokens`` a horizontal one.
        highlight: ``(max_tokens, keep_recent_tokens)`` of a cell to outline.
    """
    data = sweep_results
    if not isinstance(data, pd.DataFrame):
        data = getattr(data, "results", data)
    if not isinstance(data, pd.DataFrame):
        raise SettingError(f"heatmap needs a results DataFrame, got {type(sweep_results).__name__}")
    for needed in ("max_tokens", "keep_recent_tokens"):
        if needed not in data.columns:
            raise SettingError(f"heatmap: the results have no {needed!r} column")
    if column not in data.columns:
        raise SettingError(
            f"heatmap: no column {column!r}; numeric columns: "
            f"{numeric_columns(data, ('max_tokens', 'keep_recent_tokens'))}"
        )
    if where:
        for key, value in where.items():
            data = data[data[key] == value]
    values = data[column]
    if pd.api.types.is_bool_dtype(values):
        values = values.astype("float64")
    elif not pd.api.types.is_numeric_dtype(values):
        raise SettingError(
            f"heatmap: column {column!r} is not numeric; numeric columns: "
            f"{numeric_columns(data, ('max_tokens', 'keep_recent_tokens'))}"
        )
    frame = pd.DataFrame(
        {
            "max_tokens": data["max_tokens"].astype(float),
            "keep_recent_tokens": data["keep_recent_tokens"].astype(float),
            "value": pd.to_numeric(values, errors="coerce").astype(float),
        }
    )
    per_cell = frame.groupby(["keep_recent_tokens", "max_tokens"]).size()
    table = frame.pivot_table(
        index="keep_recent_tokens", columns="max_tokens", values="value", aggfunc=aggregate, dropna=False
    )
    xs = np.array(sorted(frame["max_tokens"].unique()))
    ys = np.array(sorted(frame["keep_recent_tokens"].unique()))
    table = table.reindex(index=ys, columns=xs)
    grid = table.to_numpy(dtype=float)
    with _style():
        fig, ax = _axes(ax, (6.4, 4.6))
        if not len(xs) or not len(ys):
            ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", va="center")
            return fig
        xlog, ylog = _use_log(xs), _use_log(ys)
        xe, ye = _edges(xs, xlog), _edges(ys, ylog)
        ax.add_patch(Rectangle((xe[0], ye[0]), xe[-1] - xe[0], ye[-1] - ye[0], facecolor="white", edgecolor="#888888",
                               hatch="xx", linewidth=0, zorder=0))
        mesh = ax.pcolormesh(xe, ye, np.ma.masked_invalid(grid), cmap=cmap, edgecolors="white", linewidth=0.6, zorder=1)
        mesh.set_gid(HEATMAP_GID)
        colorbar = fig.colorbar(mesh, ax=ax, pad=0.02)
        colorbar.set_label(column if aggregate == "mean" or per_cell.max() <= 1 else f"{column} ({aggregate})")
        if xlog:
            ax.set_xscale("log")
        if ylog:
            ax.set_yscale("log")
        ax.set_xlim(xe[0], xe[-1])
        ax.set_ylim(ye[0], ye[-1])
        ax.set_xticks(xs, [_tokens(v) for v in xs], minor=False)
        ax.set_yticks(ys, [_tokens(v) for v in ys], minor=False)
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        if annotate is None:
            annotate = len(xs) * len(ys) <= 144
        if annotate:
            finite = grid[np.isfinite(grid)]
            norm = mesh.norm
            for i in range(len(ys)):
                for j in range(len(xs)):
                    value = grid[i, j]
                    if not np.isfinite(value):
                        continue
                    shade = mesh.cmap(norm(value)) if len(finite) else (1, 1, 1, 1)
                    light = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] > 0.5
                    ax.text(math.sqrt(xe[j] * xe[j + 1]) if xlog else (xe[j] + xe[j + 1]) / 2,
                            math.sqrt(ye[i] * ye[i + 1]) if ylog else (ye[i] + ye[i + 1]) / 2,
                            _format_value(value), ha="center", va="center", fontsize=7,
                            color="black" if light else "white", zorder=3)
        handles = []
        for k, (label, points) in enumerate(_boundary_frames(boundaries, column)):
            linestyle, marker = _BOUNDARY_STYLES[k % len(_BOUNDARY_STYLES)]
            handles.append(_draw_boundary(ax, points, xs, ys, xe, ye, linestyle, marker, label))
        if highlight is not None:
            hx, hy = (float(v) for v in highlight)
            if hx in xs and hy in ys:
                j, i = int(np.flatnonzero(xs == hx)[0]), int(np.flatnonzero(ys == hy)[0])
                ax.add_patch(Rectangle((xe[j], ye[i]), xe[j + 1] - xe[j], ye[i + 1] - ye[i], facecolor="none",
                                       edgecolor="black", linewidth=2.4, zorder=5))
                ax.add_patch(Rectangle((xe[j], ye[i]), xe[j + 1] - xe[j], ye[i + 1] - ye[i], facecolor="none",
                                       edgecolor="white", linewidth=1.0, linestyle="--", zorder=6))
        if handles:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.14), ncol=2, frameon=False)
        ax.set_xlabel("max_tokens")
        ax.set_ylabel("keep_recent_tokens")
        if title is None:
            filters = ", ".join(f"{k}={v}" for k, v in (where or {}).items())
            many = per_cell.max() > 1
            title = (
                column
                + (f" ({aggregate} of up to {per_cell.max()} rows per cell)" if many else "")
                + (f"\n{filters}" if filters else "")
            )
        ax.set_title(title, loc="left")
    return fig


#: The ``gid`` of a heatmap's cell mesh, so :func:`heatmap_cells` finds the cells of a drawn heatmap.
HEATMAP_GID = "zett_lab-heatmap-cells"


def heatmap_cells(ax: Axes) -> pd.DataFrame:
    """The cells of the heatmap drawn into ``ax``: ``max_tokens``, ``keep_recent_tokens`` and their data-space edges.

    One row per grid cell (also the cells that were not run), with ``x0, x1, y0, y1`` in the axes'
    data coordinates; :func:`image_boxes` turns them into positions on the figure's image.
    """
    mesh = next((c for c in ax.collections if isinstance(c, QuadMesh) and c.get_gid() == HEATMAP_GID), None)
    if mesh is None:
        raise SettingError("no zett_lab heatmap is drawn in these axes")
    corners = np.asarray(mesh.get_coordinates())  # (rows + 1, columns + 1, 2): the cell edges
    xs, ys = ax.get_xticks(), ax.get_yticks()  # the heatmap puts one tick at each grid value
    rows = [
        {"max_tokens": int(round(xs[j])), "keep_recent_tokens": int(round(ys[i])),
         "x0": corners[i, j, 0], "x1": corners[i, j + 1, 0], "y0": corners[i, j, 1], "y1": corners[i + 1, j, 1]}
        for i in range(corners.shape[0] - 1) for j in range(corners.shape[1] - 1)
    ]
    return pd.DataFrame(rows, columns=["max_tokens", "keep_recent_tokens", "x0", "x1", "y0", "y1"])


def image_boxes(ax: Axes, x0: ArrayLike, x1: ArrayLike, y0: ArrayLike, y1: ArrayLike) -> np.ndarray:
    """Data-space rectangles of ``ax`` as ``[left, top, width, height]`` fractions of the figure's image.

    The figure must have been drawn (e.g. by :func:`to_png` with ``tight=False``) so the axes'
    transforms are final; the image's origin is its top-left corner.
    """
    fig = ax.figure
    width, height = fig.bbox.width, fig.bbox.height
    low = ax.transData.transform(np.column_stack([np.asarray(x0, float), np.asarray(y0, float)]))
    high = ax.transData.transform(np.column_stack([np.asarray(x1, float), np.asarray(y1, float)]))
    left, right = np.minimum(low[:, 0], high[:, 0]), np.maximum(low[:, 0], high[:, 0])
    bottom, top = np.minimum(low[:, 1], high[:, 1]), np.maximum(low[:, 1], high[:, 1])
    return np.column_stack([left / width, 1 - top / height, (right - left) / width, (top - bottom) / height])


def _format_value(value: float) -> str:
    if float(value).is_integer():
        return _tokens(value) if abs(value) >= 10_000 else f"{value:.0f}"
    if abs(value) < 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _band(edges: np.ndarray, centres: np.ndarray, value: float) -> int:
    """Index of the grid cell holding ``value`` on one axis (exact grid values first)."""
    hits = np.flatnonzero(centres == value)
    if len(hits):
        return int(hits[0])
    return int(np.clip(np.searchsorted(edges, value, side="right") - 1, 0, len(centres) - 1))


def _draw_boundary(ax: Axes, points: pd.DataFrame, xs, ys, xe, ye, linestyle, marker, label) -> Line2D:
    """Draw one boundary (a white halo under a black line, visible on any colour) and return its legend handle.

    A point walked along ``max_tokens`` is a vertical mark at its exact value across its
    ``keep_recent_tokens`` row (one point per row: joined into a staircase); a point walked
    along ``keep_recent_tokens`` (``parameter`` column) a horizontal mark across its column.
    """
    has_x = "max_tokens" in points.columns
    has_y = "keep_recent_tokens" in points.columns
    style: dict[str, Any] = {"color": "black", "linestyle": linestyle, "linewidth": 1.6, "zorder": 4}
    halo: dict[str, Any] = {"color": "white", "linestyle": "-", "linewidth": 3.4, "zorder": 3.9, "alpha": 0.85}
    handle = Line2D(
        [], [], label=label, marker=marker, markerfacecolor="white", markeredgecolor="black", markersize=5, **style
    )
    xlog, ylog = ax.get_xscale() == "log", ax.get_yscale() == "log"

    def middle(edges: np.ndarray, i: int, log: bool, at: float = 0.28) -> float:
        """A point ``at`` of the way through cell ``i`` (below the printed value at the centre)."""
        if log:
            return math.exp(math.log(edges[i]) + at * (math.log(edges[i + 1]) - math.log(edges[i])))
        return edges[i] + at * (edges[i + 1] - edges[i])

    if has_x and has_y:
        points = points.dropna(subset=["max_tokens", "keep_recent_tokens"])
        walked = (
            points["parameter"].astype(str)
            if "parameter" in points.columns
            else pd.Series("max_tokens", index=points.index)
        )
        path_x: list[float] = []
        path_y: list[float] = []
        marks: list[tuple[float, float]] = []
        notes: list[tuple[float, float, str]] = []
        along_x = points[walked == "max_tokens"].sort_values(["keep_recent_tokens", "max_tokens"])
        rows = [
            (_band(ye, ys, float(k)), float(m))
            for m, k in zip(along_x["max_tokens"], along_x["keep_recent_tokens"], strict=True)
        ]
        per_row = pd.Series([r for r, _ in rows]).value_counts() if rows else pd.Series(dtype=int)
        staircase = len(rows) > 1 and per_row.max() == 1
        for n, (row, px) in enumerate(rows):
            if staircase and n and rows[n - 1][0] == row - 1:
                path_x.append(px)
                path_y.append(ye[row])
            elif path_x:
                path_x.append(np.nan)
                path_y.append(np.nan)
            path_x += [px, px]
            path_y += [ye[row], ye[row + 1]]
            marks.append((px, middle(ye, row, ylog)))
        if "after" in along_x.columns:
            for (row, px), after in zip(rows, along_x["after"], strict=True):
                if pd.notna(after) and per_row.get(row, 0) <= 4:
                    notes.append((px, middle(ye, row, ylog), f"→{int(after)}"))
        along_y = points[walked == "keep_recent_tokens"]
        for m, k in zip(along_y["max_tokens"].astype(float), along_y["keep_recent_tokens"].astype(float), strict=True):
            column = _band(xe, xs, m)
            if path_x:
                path_x.append(np.nan)
                path_y.append(np.nan)
            path_x += [xe[column], xe[column + 1]]
            path_y += [k, k]
            marks.append((middle(xe, column, xlog), k))
        ax.plot(path_x, path_y, **halo)
        ax.plot(path_x, path_y, **style)
        if marks:
            ax.plot([p[0] for p in marks], [p[1] for p in marks], linestyle="none", marker=marker, markersize=5,
                    markerfacecolor="white", markeredgecolor="black", zorder=4.1)
        for x, y, text in notes:
            ax.annotate(text, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=6.5, zorder=4.2,
                        bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
    elif has_x:
        for value in points["max_tokens"].dropna():
            ax.axvline(float(value), **halo)
            ax.axvline(float(value), **style)
    elif has_y:
        for value in points["keep_recent_tokens"].dropna():
            ax.axhline(float(value), **halo)
            ax.axhline(float(value), **style)
    return handle


_SUMMARIZER_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p"]
_SUMMARIZER_COLORS = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB", "#222222"]

def pareto(
    sweep_results: Sweep | pd.DataFrame,
    cost: str = "total_input_tokens",
    loss: str = "needed_anchor_recall",
    ax: Axes | None = None,
    *,
    maximize: bool | None = None,
    by: Sequence[str] | None = ("summarizer", "max_tokens", "keep_recent_tokens"),
    group: str | None = "summarizer",
    front: pd.DataFrame | None = None,
    label_front: bool = True,
    title: str | None = None,
) -> Figure:
    """Cost against loss for every setting, with the Pareto front.

    Aggregation matches :func:`zett_lab.study.sweep.pareto_front`: per setting (``by``), cost is
    summed and the loss metric averaged over conversations; the loss metric's direction is
    guessed from its name (``recall``, ``retention``, ``survival``... are higher-is-better)
    unless ``maximize=`` is given. The front is :func:`zett_lab.study.sweep.pareto_front`'s (or
    ``front=``), drawn as a dashed staircase through outlined points labelled
    ``max_tokens/keep_recent_tokens``. One marker shape (and colour) per ``group`` value.
    Missing loss values (nothing compacted) count as the best value, as in the sweep.
    """
    data = sweep_results if isinstance(sweep_results, pd.DataFrame) else getattr(sweep_results, "results", None)
    if not isinstance(data, pd.DataFrame):
        raise SettingError(f"pareto needs a Sweep or its results DataFrame, got {type(sweep_results).__name__}")
    for role, column in (("cost", cost), ("loss", loss)):
        if column not in data.columns:
            raise SettingError(f"pareto: no {role} column {column!r}; numeric columns: {numeric_columns(data)}")
    higher = bool(maximize) if maximize is not None else higher_is_better(loss)
    table = data.copy()
    if "error" in table.columns:
        table = table[table["error"].isna()]
    table[loss] = pd.to_numeric(table[loss], errors="coerce").fillna(1.0 if higher else 0.0)
    table[cost] = pd.to_numeric(table[cost], errors="coerce")
    keys = [c for c in (by or ()) if c in table.columns]
    points = (
        table.groupby(keys, dropna=False, sort=True).agg(**{cost: (cost, "sum"), loss: (loss, "mean")}).reset_index()
        if keys
        else table
    )
    points = points.dropna(subset=[cost, loss])
    if front is None:
        try:
            from ..study.sweep import pareto_front

            front = pareto_front(data, cost=cost, loss=loss, maximize=higher, by=tuple(keys) if keys else None)
        except ImportError:
            front = pareto_points(points, cost, loss, maximize=higher)
    with _style():
        fig, ax = _axes(ax, (6.6, 4.4))
        groups = (
            [(None, points)] if not group or group not in points.columns else list(points.groupby(group, sort=True))
        )
        for k, (name, part) in enumerate(groups):
            ax.plot(
                part[cost],
                part[loss],
                linestyle="none",
                marker=_SUMMARIZER_MARKERS[k % len(_SUMMARIZER_MARKERS)],
                markersize=6,
                markerfacecolor=_SUMMARIZER_COLORS[k % len(_SUMMARIZER_COLORS)],
                markeredgecolor="#333333",
                markeredgewidth=0.5,
                alpha=0.85,
                zorder=2,
                label=str(name) if name is not None else "setting",
            )
        if front is not None and len(front):
            ordered = front.sort_values([cost, loss], ascending=[True, not higher])
            fx, fy = ordered[cost].to_numpy(float), ordered[loss].to_numpy(float)
            ax.plot(
                fx,
                fy,
                drawstyle="steps-post",
                color="black",
                linestyle="--",
                linewidth=1.2,
                zorder=3,
                label="Pareto front",
            )
            ax.plot(
                fx,
                fy,
                linestyle="none",
                marker="o",
                markersize=11,
                markerfacecolor="none",
                markeredgecolor="black",
                markeredgewidth=1.2,
                zorder=3,
                label=f"on the front ({len(ordered)})",
            )
            if label_front and len(ordered) <= 15 and {"max_tokens", "keep_recent_tokens"} <= set(ordered.columns):
                for _, row in ordered.iterrows():
                    ax.annotate(
                        f"{_tokens(row['max_tokens'])}/{_tokens(row['keep_recent_tokens'])}",
                        (row[cost], row[loss]),
                        xytext=(5, -9 if higher else 5),
                        textcoords="offset points",
                        fontsize=7,
                    )
        ax.set_xlabel(f"{cost}" + (" (summed over conversations)" if keys else "") + " — lower is better")
        ax.set_ylabel(f"{loss} — {'higher' if higher else 'lower'} is better")
        if any(token in cost for token in ("token",)):
            _token_axis(ax.xaxis)
        if ax.get_legend_handles_labels()[0]:  # no points (every cell failed): no legend to draw
            ax.legend(loc="lower right" if higher else "upper right", frameon=True, framealpha=0.92)
        ax.set_title(
            title or f"Cost vs {loss}: {len(points)} settings, {0 if front is None else len(front)} on the front",
            loc="left",
        )
    return fig


def pareto_points(points: pd.DataFrame, cost: str, loss: str, *, maximize: bool = False) -> pd.DataFrame:
    """Rows no other row beats on both cost (minimized) and loss (minimized, or maximized)."""
    sign = -1.0 if maximize else 1.0
    ordered = points.assign(_q=sign * points[loss].astype(float)).sort_values([cost, "_q"], kind="mergesort")
    keep, best = [], math.inf
    for index, value in zip(ordered.index, ordered["_q"].to_numpy(float), strict=True):
        if value < best:
            keep.append(index)
            best = value
    return ordered.loc[keep].drop(columns="_q")


def _find(columns: Iterable[str], *candidates: str) -> str | None:
    lowered = {c.lower(): c for c in columns}
    for candidate in candidates:
        if candidate in lowered:
            return lowered[candidate]
    return None


def comparison_frame(compare_result: Comparison | pd.DataFrame) -> pd.DataFrame:
    """Normalize a comparison result to columns summarizer, metric, estimate, ci_low, ci_high."""
    data = compare_result
    if not isinstance(data, pd.DataFrame):
        for attribute in ("table", "summary", "results", "frame", "estimates"):
            inner = getattr(compare_result, attribute, None)
            inner = inner() if callable(inner) and attribute == "summary" else inner
            if isinstance(inner, pd.DataFrame):
                data = inner
                break
    if not isinstance(data, pd.DataFrame):
        raise SettingError(
            f"summarizer_comparison needs a DataFrame (or a result holding one), got {type(compare_result).__name__}"
        )
    data = data.reset_index() if not _find(data.columns, "summarizer", "model", "name") else data
    name = _find(data.columns, "summarizer", "model", "name")
    estimate = _find(data.columns, "estimate", "mean", "value", "point", "median")
    low = _find(data.columns, "ci_low", "low", "lower", "ci_lower", "lo")
    high = _find(data.columns, "ci_high", "high", "upper", "ci_upper", "hi")
    metric = _find(data.columns, "metric", "measure")
    if name is None or estimate is None:
        raise SettingError(
            f"summarizer_comparison: need a summarizer column and an estimate/mean column, got {list(data.columns)}"
        )
    out = pd.DataFrame({
        "summarizer": data[name].astype(str),
        "metric": data[metric].astype(str) if metric else "value",
        "estimate": pd.to_numeric(data[estimate], errors="coerce"),
        "ci_low": pd.to_numeric(data[low], errors="coerce") if low else np.nan,
        "ci_high": pd.to_numeric(data[high], errors="coerce") if high else np.nan,
    })
    return out


def _metric_legend(metric: str) -> str:
    """A catalogue metric's label with the direction that is better (a column outside the catalogue: its name)."""
    entry = CATALOGUE.get(metric)
    if entry is None:
        return metric
    return f"{entry.label} ({'higher' if entry.higher_is_better else 'lower'} is better)"


def summarizer_comparison(
    compare_result: Comparison | pd.DataFrame,
    ax: Axes | None = None,
    *,
    metrics: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Summarizers side by side: point estimates with confidence intervals, per metric.

    Accepts a DataFrame (or an object with one, e.g. the result of
    :func:`zett_lab.measure.compare`) with a summarizer column, an estimate/mean column,
    ``ci_low``/``ci_high`` and optionally a ``metric`` column. One row per summarizer,
    one marker shape per metric (offset within the row), horizontal whiskers for the
    intervals.
    """
    frame = comparison_frame(compare_result)
    if metrics is not None:
        frame = frame[frame["metric"].isin(list(metrics))]
    names = list(dict.fromkeys(frame["summarizer"]))
    metric_names = list(dict.fromkeys(frame["metric"]))
    with _style():
        fig, ax = _axes(ax, (6.8, 1.2 + 0.45 * max(len(names), 1) * max(1, len(metric_names)) ** 0.5))
        width = 0.7
        for k, metric in enumerate(metric_names):
            part = frame[frame["metric"] == metric]
            offset = (k - (len(metric_names) - 1) / 2) * (width / max(len(metric_names), 1))
            ys = np.array([names.index(s) for s in part["summarizer"]], dtype=float) + offset
            est = part["estimate"].to_numpy(float)
            lo, hi = part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float)
            xerr = np.vstack([np.where(np.isnan(lo), 0, est - lo), np.where(np.isnan(hi), 0, hi - est)])
            ax.errorbar(
                est,
                ys,
                xerr=np.clip(xerr, 0, None),
                fmt=_SUMMARIZER_MARKERS[k % len(_SUMMARIZER_MARKERS)],
                color=_SUMMARIZER_COLORS[k % len(_SUMMARIZER_COLORS)],
                markeredgecolor="black",
                markeredgewidth=0.5,
                ecolor="#333333",
                elinewidth=1.1,
                capsize=3,
                markersize=6,
                label=_metric_legend(metric),
                zorder=3,
            )
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("estimate with confidence interval")
        if len(metric_names) > 1 or metric_names != ["value"]:
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(len(metric_names), 4), frameon=False)
        ax.set_title(title or "Summarizers compared (bars: confidence intervals)", loc="left")
    return fig


def _anchor_table(losses: Any) -> pd.DataFrame:
    if isinstance(losses, pd.DataFrame):
        return losses
    if isinstance(losses, (list, tuple)):
        frames = [_anchor_table(item) for item in losses]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["type"])
    anchors = getattr(losses, "anchors", None)
    if isinstance(anchors, pd.DataFrame):
        return anchors
    raise SettingError(
        "anchor_retention needs Losses (with an .anchors table), a list of them, or an anchors DataFrame; got "
        f"{type(losses).__name__}"
    )


def anchor_retention(
    losses: Losses | Sequence[Losses] | pd.DataFrame, ax: Axes | None = None, *, title: str | None = None
) -> Figure:
    """Per anchor type: share of a span's anchors found in its summary, and recall of the ones needed later.

    Only applied compactions count (when the table has an ``applied`` column).
    ``losses`` is a :class:`~zett_lab.measure.Losses` (its ``anchors`` table: ``type``,
    ``in_summary``, ``in_tail``, ``needed_later``, ``lost_but_needed``), a list of them
    (pooled across conversations) or that table itself. Two hatched bars per type:
    retention (``in_summary`` over all span anchors) and needed-anchor recall
    (``in_summary`` over anchors needed later and not in the kept tail); counts of
    anchors and of lost-but-needed anchors are printed next to them.
    """
    table = _anchor_table(losses)
    if "applied" in table.columns and len(table):
        table = table[table["applied"].astype("boolean").fillna(False).to_numpy(bool)]
    with _style():
        fig, ax = _axes(ax, (7.0, 1.4 + 0.42 * max(table["type"].nunique() if "type" in table else 1, 1)))
        if not len(table):
            ax.text(0.5, 0.5, "no anchors in any compacted span", transform=ax.transAxes, ha="center", va="center")
            ax.set_axis_off()
            return fig
        flags = {
            c: table[c].astype("boolean").fillna(False).astype(bool)
            if c in table
            else pd.Series(False, index=table.index)
            for c in ("in_summary", "in_tail", "needed_later", "lost_but_needed")
        }
        needed = flags["needed_later"] & ~flags["in_tail"]
        rows = []
        for kind, part in table.groupby("type", sort=True):
            index = part.index
            n_needed = int(needed[index].sum())
            rows.append({
                "type": kind, "anchors": len(index),
                "retention": float(flags["in_summary"][index].mean()),
                "needed": n_needed,
                "recall": float(flags["in_summary"][index][needed[index]].mean()) if n_needed else np.nan,
                "lost": int(flags["lost_but_needed"][index].sum()),
            })
        stats = pd.DataFrame(rows).sort_values("anchors", ascending=False, kind="mergesort").reset_index(drop=True)
        y = np.arange(len(stats))
        height = 0.38
        ax.barh(y - height / 2, stats["retention"], height=height, color="#4477AA", edgecolor="black", linewidth=0.5,
                hatch="///", label="in summary (all span anchors)")
        ax.barh(
            y + height / 2,
            stats["recall"].fillna(0),
            height=height,
            color="#EE7733",
            edgecolor="black",
            linewidth=0.5,
            hatch="...",
            label="needed later: recalled by summary",
        )
        for i, row in stats.iterrows():
            ax.text(
                1.02, i - height / 2, f"n={row['anchors']}", va="center", fontsize=7, transform=ax.get_yaxis_transform()
            )
            text = f"needed={row['needed']}, lost={row['lost']}" if row["needed"] else "none needed later"
            ax.text(1.02, i + height / 2, text, va="center", fontsize=7, transform=ax.get_yaxis_transform())
        ax.set_yticks(y, stats["type"].tolist())
        ax.set_ylim(len(stats) - 0.4, -0.6 - 0.9)
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.legend(loc="upper left", ncol=2, frameon=True, framealpha=0.92)
        total_lost = int(stats["lost"].sum())
        ax.set_title(
            title
            or f"Anchor retention by type ({int(stats['anchors'].sum())} span anchors, {total_lost} lost but needed)",
            loc="left",
        )
    return fig


def _register_notebook_display() -> None:
    """Show returned Figures as PNG in IPython/Jupyter without pyplot (unless a formatter exists)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython ships with jupyterlab
        return
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters.get("image/png")
    if formatter is None:
        return
    try:
        formatter.lookup_by_type(Figure)
    except KeyError:
        formatter.for_type(Figure, lambda fig: to_png(fig))


_register_notebook_display()
