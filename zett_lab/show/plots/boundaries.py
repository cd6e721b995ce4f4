"""Exact decision boundaries drawn over a sweep heatmap: normalizing their many shapes, and drawing one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from ...errors import SettingError
from ...measure.catalogue import label as column_label

if TYPE_CHECKING:
    from ...study.boundaries import Boundaries

#: What ``boundaries=`` takes: decision boundaries or a list of them, a DataFrame of boundary points (an object
#: holding one as ``boundaries``, ``table``, ``frame`` or ``results`` works too), a mapping label -> any of
#: these, or a list of ``(max_tokens, keep_recent_tokens)`` points; None draws none.
BoundaryInput: TypeAlias = (
    "Boundaries | Sequence[Boundaries] | pd.DataFrame | Mapping[str, Any] | Sequence[tuple[float, float]] | None"
)


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
            point = (
                {"max_tokens": walked, "keep_recent_tokens": fixed}
                if item.parameter == "max_tokens"
                else {"max_tokens": fixed, "keep_recent_tokens": walked}
            )
            rows.append({**point, "parameter": item.parameter, "after": after})
    return pd.DataFrame(rows, columns=["max_tokens", "keep_recent_tokens", "parameter", "after"])


_SEGMENT_COLUMNS = ("compactions_applied", "attempts", "steps_over_budget")


def _is_boundaries(value: Any) -> bool:
    return all(hasattr(value, name) for name in ("parameter", "fixed", "values"))


def boundary_frames(boundaries: BoundaryInput, column: str | None = None) -> list[tuple[str, pd.DataFrame]]:
    """Normalize decision boundaries to (label, frame) pairs with max_tokens / keep_recent_tokens columns."""
    data: Any = boundaries  # normalized step by step below
    if data is None:
        return []
    if _is_boundaries(data):
        data = [data]
    if isinstance(data, (list, tuple)) and data and all(_is_boundaries(b) for b in data):
        label = f"{column_label(column)} changes (exact)" if column in _SEGMENT_COLUMNS else "schedule changes (exact)"
        return [(label, _from_boundaries(data, column))]
    for attribute in ("boundaries", "table", "frame", "results"):
        inner = getattr(data, attribute, None)
        if isinstance(inner, pd.DataFrame):
            data = inner
            break
    if isinstance(data, pd.DataFrame):
        label_column = next(
            (c for c in ("boundary", "label", "name", "metric", "kind", "change") if c in data.columns), None
        )
        if label_column is None:
            return [("decision boundary", data)]
        return [(str(label), group) for label, group in data.groupby(label_column, sort=True, dropna=False)]
    if isinstance(data, Mapping):
        out = []
        for label, value in data.items():
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
    if isinstance(data, Sequence):
        return [("decision boundary", pd.DataFrame(list(data), columns=["max_tokens", "keep_recent_tokens"]))]
    raise SettingError(
        "boundaries: expected Boundaries (zett_lab.study.boundaries.decision_boundaries) or a list of them, a "
        "DataFrame, "
        f"a mapping, or a list of (max_tokens, keep_recent_tokens); got {type(data).__name__}"
    )


#: A matplotlib line style: a name (``"--"``) or ``(offset, (on, off, ...))``.
LineStyle: TypeAlias = str | tuple[float, tuple[float, ...]]
#: Line style and marker of each boundary drawn on one heatmap, in turn.
BOUNDARY_STYLES: list[tuple[LineStyle, str]] = [("--", "o"), (":", "s"), ("-.", "^"), ((0, (5, 1, 1, 1)), "D")]


def _band(edges: np.ndarray, centres: np.ndarray, value: float) -> int:
    """Index of the grid cell holding ``value`` on one axis (exact grid values first)."""
    hits = np.flatnonzero(centres == value)
    if len(hits):
        return int(hits[0])
    return int(np.clip(np.searchsorted(edges, value, side="right") - 1, 0, len(centres) - 1))


def _cell_point(edges: np.ndarray, i: int, log: bool, at: float = 0.28) -> float:
    """A point ``at`` of the way through cell ``i`` (below the printed value at the centre)."""
    if log:
        return math.exp(math.log(edges[i]) + at * (math.log(edges[i + 1]) - math.log(edges[i])))
    return edges[i] + at * (edges[i + 1] - edges[i])


@dataclass(slots=True)
class _BoundaryPath:
    """One boundary's pieces: a polyline (NaN breaks between pieces), its point markers and ``→n`` notes.

    Not frozen: the plot extends its pieces point by point.
    """

    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    marks: list[tuple[float, float]] = field(default_factory=list)
    notes: list[tuple[float, float, str]] = field(default_factory=list)

    def break_line(self) -> None:
        """Start a new piece: the next segment is not joined to the last one."""
        if self.xs:
            self.xs.append(np.nan)
            self.ys.append(np.nan)


def _add_walks_along_max_tokens(
    path: _BoundaryPath, along_x: pd.DataFrame, ys: np.ndarray, ye: np.ndarray, ylog: bool
) -> None:
    """Vertical marks at exact ``max_tokens`` values across their ``keep_recent_tokens`` rows.

    With one point per row over several rows the marks are joined into a staircase; each
    mark is annotated ``→n`` (the ``after`` column) unless its row holds more than four.
    """
    along_x = along_x.sort_values(["keep_recent_tokens", "max_tokens"])
    rows = [
        (_band(ye, ys, float(k)), float(m))
        for m, k in zip(along_x["max_tokens"], along_x["keep_recent_tokens"], strict=True)
    ]
    per_row = pd.Series([r for r, _ in rows]).value_counts() if rows else pd.Series(dtype=int)
    staircase = len(rows) > 1 and per_row.max() == 1
    for n, (row, px) in enumerate(rows):
        if staircase and n and rows[n - 1][0] == row - 1:
            path.xs.append(px)
            path.ys.append(ye[row])
        else:
            path.break_line()
        path.xs += [px, px]
        path.ys += [ye[row], ye[row + 1]]
        path.marks.append((px, _cell_point(ye, row, ylog)))
    if "after" in along_x.columns:
        for (row, px), after in zip(rows, along_x["after"], strict=True):
            if pd.notna(after) and per_row.get(row, 0) <= 4:
                path.notes.append((px, _cell_point(ye, row, ylog), f"→{int(after)}"))


def _add_walks_along_keep_recent(
    path: _BoundaryPath, along_y: pd.DataFrame, xs: np.ndarray, xe: np.ndarray, xlog: bool
) -> None:
    """Horizontal marks at exact ``keep_recent_tokens`` values across their ``max_tokens`` columns."""
    for m, k in zip(along_y["max_tokens"].astype(float), along_y["keep_recent_tokens"].astype(float), strict=True):
        column = _band(xe, xs, m)
        path.break_line()
        path.xs += [xe[column], xe[column + 1]]
        path.ys += [k, k]
        path.marks.append((_cell_point(xe, column, xlog), k))


def _draw_path(ax: Axes, path: _BoundaryPath, style: dict[str, Any], halo: dict[str, Any], marker: str) -> None:
    """Draw the polyline over its halo, then its point markers and notes on top."""
    ax.plot(path.xs, path.ys, **halo)
    ax.plot(path.xs, path.ys, **style)
    if path.marks:
        ax.plot(
            [p[0] for p in path.marks],
            [p[1] for p in path.marks],
            linestyle="none",
            marker=marker,
            markersize=5,
            markerfacecolor="white",
            markeredgecolor="black",
            zorder=4.1,
        )
    for x, y, text in path.notes:
        ax.annotate(
            text,
            (x, y),
            xytext=(4, 3),
            textcoords="offset points",
            fontsize=6.5,
            zorder=4.2,
            bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        )


def draw_boundary(
    ax: Axes,
    points: pd.DataFrame,
    xs: np.ndarray,
    ys: np.ndarray,
    xe: np.ndarray,
    ye: np.ndarray,
    linestyle: LineStyle,
    marker: str,
    label: str,
) -> Line2D:
    """Draw one boundary (a white halo under a black line, visible on any colour) and return its legend handle.

    A point walked along ``max_tokens`` is a vertical mark at its exact value across its
    ``keep_recent_tokens`` row (one point per row: joined into a staircase); a point walked
    along ``keep_recent_tokens`` (``parameter`` column) a horizontal mark across its column.
    Points with only one of the two settings are full-height or full-width lines.
    """
    has_x = "max_tokens" in points.columns
    has_y = "keep_recent_tokens" in points.columns
    style: dict[str, Any] = {"color": "black", "linestyle": linestyle, "linewidth": 1.6, "zorder": 4}
    halo: dict[str, Any] = {"color": "white", "linestyle": "-", "linewidth": 3.4, "zorder": 3.9, "alpha": 0.85}
    handle = Line2D(
        [], [], label=label, marker=marker, markerfacecolor="white", markeredgecolor="black", markersize=5, **style
    )
    if has_x and has_y:
        points = points.dropna(subset=["max_tokens", "keep_recent_tokens"])
        walked = (
            points["parameter"].astype(str)
            if "parameter" in points.columns
            else pd.Series("max_tokens", index=points.index)
        )
        path = _BoundaryPath()
        _add_walks_along_max_tokens(path, points[walked == "max_tokens"], ys, ye, ax.get_yscale() == "log")
        _add_walks_along_keep_recent(path, points[walked == "keep_recent_tokens"], xs, xe, ax.get_xscale() == "log")
        _draw_path(ax, path, style, halo, marker)
    elif has_x:
        for value in points["max_tokens"].dropna():
            ax.axvline(float(value), **halo)
            ax.axvline(float(value), **style)
    elif has_y:
        for value in points["keep_recent_tokens"].dropna():
            ax.axhline(float(value), **halo)
            ax.axhline(float(value), **style)
    return handle
