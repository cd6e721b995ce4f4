"""Figures of a settings sweep: a column over the threshold grid (heatmap) and cost against loss (pareto)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox
from numpy.typing import ArrayLike

from ...errors import SettingError
from ...formatting import compact, decimal, number
from ...measure.catalogue import across_conversations, higher_is_better, label, label_with_direction
from ...records import is_missing
from .base import SERIES_COLORS, SERIES_MARKERS, drawing_style, figure_and_axes, token_axis
from .boundaries import BOUNDARY_STYLES, BoundaryInput, boundary_frames, draw_boundary

if TYPE_CHECKING:
    from ...study import Sweep


def numeric_columns(results: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Numeric (and boolean) columns of a results table, minus ``exclude``."""
    excluded = set(exclude)
    return [
        c
        for c in results.columns
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


def heatmap(
    sweep_results: Sweep | pd.DataFrame,
    column: str,
    ax: Axes | None = None,
    boundaries: BoundaryInput = None,
    *,
    aggregate: str = "mean",
    where: Mapping[str, Any] | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    highlight: tuple[int, int] | None = None,
    title: str | None = None,
    limits: tuple[float, float] | None = None,
    colorbar: bool = True,
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
            result of :func:`zett_lab.study.decision_boundaries`) or a list of them (one walk
            per ``keep_recent_tokens`` row, or per ``max_tokens`` column); a DataFrame of
            points with ``max_tokens`` and/or ``keep_recent_tokens`` columns (grouped by a
            ``boundary``/``label``/``metric`` column when present); a mapping label -> any of
            these; or a list of ``(max_tokens, keep_recent_tokens)`` points. A point walked
            along ``max_tokens`` is a vertical mark at its exact value across its row
            (annotated ``→n`` with the compactions applied from there on, when known); one
            walked along ``keep_recent_tokens`` a horizontal mark across its column; only
            ``max_tokens`` is a vertical line, only ``keep_recent_tokens`` a horizontal one.
        highlight: ``(max_tokens, keep_recent_tokens)`` of a cell to outline.
        limits: ``(low, high)`` of the colour scale (default: this map's own range); :func:`heatmaps` passes
            one range to every panel so equal colours mean equal values.
        colorbar: Draw the colour bar (labelled from the metric catalogue).
    """
    xs, ys, grid, per_cell = _heatmap_grid(sweep_results, column, aggregate, where)
    with drawing_style():
        fig, ax = figure_and_axes(ax, (6.4, 4.6))
        if not len(xs) or not len(ys):
            ax.text(0.5, 0.5, "no results", transform=ax.transAxes, ha="center", va="center")
            return fig
        xlog, ylog = _use_log(xs), _use_log(ys)
        xe, ye = _edges(xs, xlog), _edges(ys, ylog)
        mesh = _cell_mesh(fig, ax, xe, ye, grid, cmap, limits)
        if colorbar:
            bar = fig.colorbar(mesh, ax=ax, pad=0.02)
            bar.set_label(_scale_label(column, aggregate, int(per_cell.max())))
            bar.formatter = matplotlib.ticker.FuncFormatter(lambda value, _: _format_value(value))
            bar.update_ticks()
        _grid_axes(ax, xs, ys, xe, ye, xlog, ylog)
        if annotate is None:
            annotate = len(xs) * len(ys) <= 144
        if annotate:
            _print_values(ax, mesh, grid, xe, ye, xlog, ylog)
        handles = []
        for k, (name, points) in enumerate(boundary_frames(boundaries, column)):
            linestyle, marker = BOUNDARY_STYLES[k % len(BOUNDARY_STYLES)]
            handles.append(draw_boundary(ax, points, xs, ys, xe, ye, linestyle, marker, name))
        if highlight is not None:
            _outline_cell(ax, highlight, xs, ys, xe, ye)
        if handles:
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.14), ncol=2, frameon=False)
        ax.set_xlabel("max_tokens")
        ax.set_ylabel("keep_recent_tokens")
        if title is None:
            filters = ", ".join(f"{k}={v}" for k, v in (where or {}).items())
            many = per_cell.max() > 1
            title = (
                label(column)
                + (f" ({aggregate} of up to {per_cell.max()} rows per cell)" if many else "")
                + (f"\n{filters}" if filters else "")
            )
        ax.set_title(title, loc="left")
    return fig


def _scale_label(column: str, aggregate: str, per_cell: int) -> str:
    """A colour bar's label: the metric's catalogue label and direction, and how rows were combined."""
    return label_with_direction(column) + ("" if aggregate == "mean" or per_cell <= 1 else f" ({aggregate})")


def heatmaps(
    sweep_results: Sweep | pd.DataFrame,
    column: str,
    by: str = "summarizer",
    *,
    aggregate: str = "mean",
    where: Mapping[str, Any] | None = None,
    highlight: tuple[int, int] | Mapping[Any, tuple[int, int]] | None = None,
    panels: Sequence[Any] | None = None,
    ncols: int = 2,
    cmap: str = "viridis",
    title: str | None = None,
) -> Figure:
    """One :func:`heatmap` panel per value of ``by`` (e.g. per summarizer), all on one colour scale.

    Equal colours mean equal values in every panel (a summarizer whose recall stays between 0.01 and
    0.03 is not painted as bright as one between 0.65 and 0.80), and one colour bar serves them all.
    ``highlight`` outlines a cell in every panel, or, as ``{panel value: (max_tokens, keep_recent_tokens)}``,
    in the panels named (e.g. the recommended setting in its summarizer's panel only). ``panels``: which values
    of ``by`` to draw, in that order (default: every value, in the order of the results).

    Example::

        >>> fig = heatmaps(sweep, "needed_anchor_recall", by="summarizer")   # doctest: +SKIP
    """
    data = sweep_results if isinstance(sweep_results, pd.DataFrame) else getattr(sweep_results, "results", None)
    if not isinstance(data, pd.DataFrame):
        raise SettingError(f"heatmaps needs a Sweep or its results DataFrame, got {type(sweep_results).__name__}")
    if by not in data.columns:
        raise SettingError(f"heatmaps: the results have no {by!r} column to draw one panel per value of")
    panels = list(dict.fromkeys(data[by])) if panels is None else list(panels)
    grids = [_heatmap_grid(data, column, aggregate, {**(where or {}), by: value})[2] for value in panels]
    finite = np.concatenate([g[np.isfinite(g)] for g in grids]) if grids else np.array([])
    limits = (float(finite.min()), float(finite.max())) if len(finite) else None
    ncols = max(1, min(ncols, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    with drawing_style():
        fig = Figure(figsize=(3.6 * ncols + 1.0, 2.7 * nrows + 0.5), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False)
        for k, value in enumerate(panels):
            cell = highlight.get(value) if isinstance(highlight, Mapping) else highlight
            heatmap(
                data,
                column,
                ax=axes.flat[k],
                aggregate=aggregate,
                where={**(where or {}), by: value},
                cmap=cmap,
                highlight=cell,
                title=str(value),
                limits=limits,
                colorbar=False,
            )
        for ax in axes.flat[len(panels) :]:
            ax.set_visible(False)
        meshes = [c for ax in axes.flat[: len(panels)] for c in ax.collections if c.get_gid() == HEATMAP_GID]
        if meshes:
            bar = fig.colorbar(meshes[0], ax=list(axes.flat[: len(panels)]), shrink=0.9, pad=0.02)
            bar.set_label(_scale_label(column, aggregate, 2))
            bar.formatter = matplotlib.ticker.FuncFormatter(lambda value, _: _format_value(value))
            bar.update_ticks()
        fig.suptitle(title or f"{label(column)} per {by}, one colour scale", x=0.01, ha="left", fontsize=10)
    return fig


def _heatmap_grid(
    sweep_results: Sweep | pd.DataFrame, column: str, aggregate: str, where: Mapping[str, Any] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, pd.Series]:
    """Checked and filtered results as grid values: max_tokens (x), keep_recent_tokens (y), the aggregated
    column (one row per y, one column per x) and the number of rows per cell."""
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
    return xs, ys, table.to_numpy(dtype=float), per_cell


def _cell_mesh(
    fig: Figure,
    ax: Axes,
    xe: np.ndarray,
    ye: np.ndarray,
    grid: np.ndarray,
    cmap: str,
    limits: tuple[float, float] | None = None,
) -> QuadMesh:
    """The coloured cells over a cross-hatched background (which shows through missing cells)."""
    ax.add_patch(
        Rectangle(
            (xe[0], ye[0]),
            xe[-1] - xe[0],
            ye[-1] - ye[0],
            facecolor="white",
            edgecolor="#888888",
            hatch="xx",
            linewidth=0,
            zorder=0,
        )
    )
    low, high = limits if limits is not None else (None, None)
    mesh = ax.pcolormesh(
        xe, ye, np.ma.masked_invalid(grid), cmap=cmap, vmin=low, vmax=high, edgecolors="white", linewidth=0.6, zorder=1
    )
    mesh.set_gid(HEATMAP_GID)
    return mesh


def _grid_axes(
    ax: Axes, xs: np.ndarray, ys: np.ndarray, xe: np.ndarray, ye: np.ndarray, xlog: bool, ylog: bool
) -> None:
    """Scales, limits and one tick per grid value (token labels, no minor ticks)."""
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    ax.set_xlim(xe[0], xe[-1])
    ax.set_ylim(ye[0], ye[-1])
    ax.set_xticks(xs, [compact(v) for v in xs], minor=False)
    ax.set_yticks(ys, [compact(v) for v in ys], minor=False)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def _print_values(
    ax: Axes, mesh: QuadMesh, grid: np.ndarray, xe: np.ndarray, ye: np.ndarray, xlog: bool, ylog: bool
) -> None:
    """Each cell's value at its centre, black on light cells and white on dark ones."""
    finite = grid[np.isfinite(grid)]
    norm = mesh.norm
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            value = grid[i, j]
            if not np.isfinite(value):
                continue
            shade = mesh.cmap(norm(value)) if len(finite) else (1, 1, 1, 1)
            light = 0.299 * shade[0] + 0.587 * shade[1] + 0.114 * shade[2] > 0.5
            ax.text(
                math.sqrt(xe[j] * xe[j + 1]) if xlog else (xe[j] + xe[j + 1]) / 2,
                math.sqrt(ye[i] * ye[i + 1]) if ylog else (ye[i] + ye[i + 1]) / 2,
                _format_value(value),
                ha="center",
                va="center",
                fontsize=9 if grid.size <= 48 else 7,
                color="black" if light else "white",
                zorder=3,
            )


def _outline_cell(
    ax: Axes, highlight: tuple[int, int], xs: np.ndarray, ys: np.ndarray, xe: np.ndarray, ye: np.ndarray
) -> None:
    """A black and white dashed outline around the ``(max_tokens, keep_recent_tokens)`` cell, when on the grid."""
    hx, hy = (float(v) for v in highlight)
    if hx in xs and hy in ys:
        j, i = int(np.flatnonzero(xs == hx)[0]), int(np.flatnonzero(ys == hy)[0])
        for color, width, style, z in (("black", 2.4, "solid", 5), ("white", 1.0, "--", 6)):
            ax.add_patch(
                Rectangle(
                    (xe[j], ye[i]),
                    xe[j + 1] - xe[j],
                    ye[i + 1] - ye[i],
                    facecolor="none",
                    edgecolor=color,
                    linewidth=width,
                    linestyle=style,
                    zorder=z,
                )
            )


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
        {
            "max_tokens": int(round(xs[j])),
            "keep_recent_tokens": int(round(ys[i])),
            "x0": corners[i, j, 0],
            "x1": corners[i, j + 1, 0],
            "y0": corners[i, j, 1],
            "y1": corners[i + 1, j, 1],
        }
        for i in range(corners.shape[0] - 1)
        for j in range(corners.shape[1] - 1)
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
    """A heatmap cell's value: token-sized counts with a suffix (``1.3M``), others readable (``0.69``, ``31.1``)."""
    if abs(value) >= 10_000:
        return compact(value)
    return decimal(value, 2) if abs(value) < 1 and not float(value).is_integer() else number(value)


def pareto(
    sweep_results: Sweep | pd.DataFrame,
    cost: str = "total_input_tokens",
    loss: str = "needed_anchor_recall",
    ax: Axes | None = None,
    *,
    maximize: bool | None = None,
    by: Sequence[str] | None = ("engine", "summarizer", "max_tokens", "keep_recent_tokens"),
    group: str | None = "auto",
    front: pd.DataFrame | None = None,
    label_front: bool = True,
    title: str | None = None,
    highlight: Mapping[str, Any] | None = None,
) -> Figure:
    """Cost against loss for every setting, with the Pareto front.

    Aggregation matches :func:`zett_lab.study.pareto_front`: per setting (``by``), cost is
    summed and the loss metric averaged over conversations; the loss metric's direction is
    guessed from its name (``recall``, ``retention``, ``survival``... are higher-is-better)
    unless ``maximize=`` is given. The front is :func:`zett_lab.study.pareto_front`'s (or
    ``front=``), drawn as a dashed staircase through outlined points labelled
    with the summarizer (and engine) and ``max_tokens/keep_recent_tokens``. One marker shape (and colour)
    per ``group`` value (``"auto"``: per engine when the sweep compares engines, else per summarizer).
    Axes are labelled from the metric catalogue. ``highlight`` marks one setting with a star (e.g. the
    recommended one: ``{"summarizer": "anchors", "max_tokens": 13_000, "keep_recent_tokens": 1_600}``).
    Missing loss values (nothing compacted) count as the best value, as in the sweep.
    """
    data = sweep_results if isinstance(sweep_results, pd.DataFrame) else getattr(sweep_results, "results", None)
    if not isinstance(data, pd.DataFrame):
        raise SettingError(f"pareto needs a Sweep or its results DataFrame, got {type(sweep_results).__name__}")
    for role, column in (("cost", cost), ("loss", loss)):
        if column not in data.columns:
            raise SettingError(f"pareto: no {role} column {column!r}; numeric columns: {numeric_columns(data)}")
    higher = bool(maximize) if maximize is not None else higher_is_better(loss)
    points, keys = _setting_points(data, cost, loss, higher, by)
    if front is None:
        try:
            from ...study import pareto_front

            front = pareto_front(data, cost=cost, loss=loss, maximize=higher, by=tuple(keys) if keys else None)
        except ImportError:
            front = pareto_points(points, cost, loss, maximize=higher)
    with drawing_style():
        fig, ax = figure_and_axes(ax, (6.6, 4.4))
        _setting_marks(ax, points, cost, loss, group)
        named: list[tuple[str, float, float]] = []
        if front is not None and len(front):
            named = _front_staircase(ax, front, points, cost, loss, higher, label_front)
        if highlight:
            _mark_setting(ax, points, cost, loss, highlight)
        ax.set_xlabel(f"{label(cost)}" + (", summed over conversations" if keys else "") + " (lower is better)")
        ax.set_ylabel(
            f"{label(loss)}"
            + (", mean per conversation" if keys else "")
            + f" ({'higher' if higher else 'lower'} is better)"
        )
        if any(token in cost for token in ("token",)):
            token_axis(ax.xaxis)
        if ax.get_legend_handles_labels()[0]:  # no points (every cell failed): no legend to draw
            ax.legend(loc="lower right" if higher else "upper right", frameon=True, framealpha=0.92)
        ax.set_title(
            title
            or f"{label(cost)} against {label(loss).lower()}: {len(points)} settings, "
            f"{0 if front is None else len(front)} on the front",
            loc="left",
        )
        _label_points(ax, named)
    return fig


def _setting_name(row: Mapping[str, Any] | pd.Series, keys: Sequence[str] = ("engine", "summarizer")) -> str:
    """A setting as a point label: its ``keys`` (engine, summarizer) and ``max_tokens/keep_recent_tokens``."""
    names = [str(row[k]) for k in keys if k in row and not is_missing(row[k])]
    limits = f"{compact(row['max_tokens'])}/{compact(row['keep_recent_tokens'])}"
    return " ".join([*names, limits])


def _mark_setting(ax: Axes, points: pd.DataFrame, cost: str, loss: str, setting: Mapping[str, Any]) -> None:
    """A star on the point of ``setting`` (its columns that the points have), labelled in the legend."""
    chosen = points
    for key, value in setting.items():
        if key in chosen.columns and value is not None:
            chosen = chosen[chosen[key] == value]
    if len(chosen) != 1:
        return
    row = chosen.iloc[0]
    ax.plot(
        [row[cost]],
        [row[loss]],
        linestyle="none",
        marker="*",
        markersize=17,
        markerfacecolor="#FFD54F",
        markeredgecolor="black",
        markeredgewidth=1.0,
        zorder=5,
        label=f"recommended: {_setting_name(row, _varying(points, ('engine', 'summarizer')) or ['summarizer'])}",
    )


def _setting_points(
    data: pd.DataFrame, cost: str, loss: str, higher: bool, by: Sequence[str] | None
) -> tuple[pd.DataFrame, list[str]]:
    """One point per setting (cost summed, loss averaged; failed rows left out, missing loss the best value),
    and the setting columns found."""
    table = data.copy()
    if "error" in table.columns:
        table = table[table["error"].isna()]
    table[loss] = pd.to_numeric(table[loss], errors="coerce").fillna(1.0 if higher else 0.0)
    table[cost] = pd.to_numeric(table[cost], errors="coerce")
    keys = [c for c in (by or ()) if c in table.columns]
    points = (
        table.groupby(keys, dropna=False, sort=True)
        .agg(**{cost: (cost, across_conversations(cost, "sum")), loss: (loss, across_conversations(loss, "mean"))})
        .reset_index()
        if keys
        else table
    )
    return points.dropna(subset=[cost, loss]), keys


def _setting_marks(ax: Axes, points: pd.DataFrame, cost: str, loss: str, group: str | None) -> None:
    """Every setting as a point, one marker shape and colour per ``group`` value."""
    if group == "auto":
        group = "engine" if "engine" in points.columns and points["engine"].nunique() > 1 else "summarizer"
    groups = [(None, points)] if not group or group not in points.columns else list(points.groupby(group, sort=True))
    for k, (name, part) in enumerate(groups):
        ax.plot(
            part[cost],
            part[loss],
            linestyle="none",
            marker=SERIES_MARKERS[k % len(SERIES_MARKERS)],
            markersize=6,
            markerfacecolor=SERIES_COLORS[k % len(SERIES_COLORS)],
            markeredgecolor="#333333",
            markeredgewidth=0.5,
            alpha=0.85,
            zorder=2,
            label=str(name) if name is not None else "setting",
        )


def _varying(points: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """The ``keys`` whose value differs between points (a label need not name the one engine every point used)."""
    return [k for k in keys if k in points.columns and points[k].nunique() > 1]


def _front_staircase(
    ax: Axes, front: pd.DataFrame, points: pd.DataFrame, cost: str, loss: str, higher: bool, label_front: bool
) -> list[tuple[str, float, float]]:
    """The front as a dashed staircase through outlined points; the points' names and places, to label
    (``label_front``, at most 15 points)."""
    ordered = front.sort_values([cost, loss], ascending=[True, not higher])
    fx, fy = ordered[cost].to_numpy(float), ordered[loss].to_numpy(float)
    ax.plot(
        fx, fy, drawstyle="steps-post", color="black", linestyle="--", linewidth=1.2, zorder=3, label="Pareto front"
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
    if not label_front or len(ordered) > 15 or not {"max_tokens", "keep_recent_tokens"} <= set(ordered.columns):
        return []
    keys = _varying(points, ("engine", "summarizer"))
    return [(_setting_name(row, keys), float(row[cost]), float(row[loss])) for _, row in ordered.iterrows()]


#: Where a point's label may go, in points from the point, in order of preference: right (above, below),
#: left (above, below), then further up or down.
LABEL_PLACES = (
    (6, 6, "left"),
    (6, -11, "left"),
    (-6, 6, "right"),
    (-6, -11, "right"),
    (6, 15, "left"),
    (6, -20, "left"),
    (-6, 15, "right"),
    (-6, -20, "right"),
)


def _label_points(ax: Axes, named: Sequence[tuple[str, float, float]]) -> None:
    """Label each point where its text overlaps no earlier label, no labelled point, the legend or the
    axes' edge (the first such place of ``LABEL_PLACES``; else the one overlapping least)."""
    if not named:
        return
    figure = ax.get_figure(root=True)
    assert isinstance(figure, Figure)
    figure.draw_without_rendering()  # the axes' final size and limits, so text extents are where they will be
    scale = figure.dpi / 72
    marks = []  # the outlined front points (markersize 11)
    for _, x, y in named:
        cx, cy = ax.transData.transform((x, y))
        marks.append(Bbox.from_extents(cx - 6 * scale, cy - 6 * scale, cx + 6 * scale, cy + 6 * scale))
    legend = ax.get_legend()
    labels = [legend.get_window_extent()] if legend is not None else []
    frame = ax.get_window_extent()
    for k, (name, x, y) in enumerate(named):
        taken = [*labels, *marks[:k], *marks[k + 1 :]]
        best = None
        for dx, dy, align in LABEL_PLACES:
            text = ax.annotate(
                name, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7, horizontalalignment=align
            )
            box = text.get_window_extent()
            outside = box.width * box.height - _overlap(box, frame)
            clash = outside + sum(_overlap(box, other) for other in taken)
            if best is None or clash < best[0]:
                if best is not None:
                    best[1].remove()
                best = (clash, text, box)
            else:
                text.remove()
            if clash == 0:
                break
        assert best is not None
        labels.append(best[2])


def _overlap(a: Bbox, b: Bbox) -> float:
    """The area two boxes share (0 when they do not meet)."""
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(width, 0.0) * max(height, 0.0)


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
