"""A column of a settings sweep over the threshold grid: the heatmap, one or several, with exact decision boundaries
and the cells a page can link to."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from numpy.typing import ArrayLike

from ...errors import SettingError
from ...formatting import compact, decimal, number
from ...measure.catalogue import label, label_with_direction
from .base import drawing_style, figure_and_axes, numeric_columns
from .boundaries import BOUNDARY_STYLES, BoundaryInput, boundary_frames, draw_boundary

if TYPE_CHECKING:
    from ...study import Sweep


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
    where: Mapping[str, object] | None = None,
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
    where: Mapping[str, object] | None = None,
    highlight: tuple[int, int] | Mapping[Hashable, tuple[int, int]] | None = None,
    panels: Sequence[Hashable] | None = None,
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
    sweep_results: Sweep | pd.DataFrame, column: str, aggregate: str, where: Mapping[str, object] | None
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
