"""Cost against loss over a settings sweep: every setting a point, the Pareto front a staircase, the recommended
setting marked."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from ...errors import SettingError
from ...formatting import compact, count
from ...measure.catalogue import higher_is_better, label
from ...records import is_missing
from ...study.choose import pareto_front, setting_points
from .base import SERIES_COLORS, SERIES_MARKERS, drawing_style, figure_and_axes, numeric_columns, token_axis

if TYPE_CHECKING:
    from ...study import Sweep


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
    highlight: Mapping[str, object] | None = None,
) -> Figure:
    """Cost against loss for every setting, with the Pareto front.

    Aggregation is :func:`zett_lab.study.pareto_front`'s (:func:`~zett_lab.study.choose.setting_points`): per
    setting (``by``), cost summed and the loss metric averaged over conversations; the loss metric's direction
    is its catalogue entry's unless ``maximize=`` is given. The front is :func:`zett_lab.study.pareto_front`'s (or
    ``front=``), drawn as a dashed staircase through outlined points labelled
    with the summarizer (and engine) and ``max_tokens/keep_recent_tokens``. One marker shape (and colour)
    per ``group`` value (``"auto"``: per engine when the sweep compares engines, else per summarizer).
    Axes are labelled from the metric catalogue. ``highlight`` marks one setting with a star (e.g. the
    recommended one: ``{"summarizer": "anchors", "max_tokens": 13_000, "keep_recent_tokens": 1_600}``).
    A conversation where the loss is undefined (nothing compacted) is left out of its setting's mean, as in the
    heatmaps and tables; the title says how many runs had a value when fewer than all did.
    """
    data = sweep_results if isinstance(sweep_results, pd.DataFrame) else getattr(sweep_results, "results", None)
    if not isinstance(data, pd.DataFrame):
        raise SettingError(f"pareto needs a Sweep or its results DataFrame, got {type(sweep_results).__name__}")
    for role, column in (("cost", cost), ("loss", loss)):
        if column not in data.columns:
            raise SettingError(f"pareto: no {role} column {column!r}; numeric columns: {numeric_columns(data)}")
    higher = bool(maximize) if maximize is not None else higher_is_better(loss)
    points, keys = _setting_points(data, cost, loss, by)
    drawn = points.dropna(subset=[cost, loss])
    if front is None:
        front = pareto_front(data, cost=cost, loss=loss, maximize=higher, by=tuple(keys) if keys else None)
    with drawing_style():
        fig, ax = figure_and_axes(ax, (6.6, 4.4))
        _setting_marks(ax, drawn, cost, loss, group)
        named: list[tuple[str, float, float]] = []
        if len(front):
            named = _front_staircase(ax, front, drawn, cost, loss, higher, label_front)
        if highlight:
            _mark_setting(ax, drawn, cost, loss, highlight)
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
            or f"{label(cost)} against {label(loss).lower()}: {len(drawn)} settings, {len(front)} on the front"
            + _undefined_note(points, loss, keys),
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
    data: pd.DataFrame, cost: str, loss: str, by: Sequence[str] | None
) -> tuple[pd.DataFrame, list[str]]:
    """One point per setting (:func:`~zett_lab.study.choose.setting_points`, failed rows left out; a setting whose
    loss no conversation defines is no point), and the setting columns found."""
    table = data.copy()
    if "error" in table.columns:
        table = table[table["error"].isna()]
    table[loss] = pd.to_numeric(table[loss], errors="coerce")
    table[cost] = pd.to_numeric(table[cost], errors="coerce")
    keys = [c for c in (by or ()) if c in table.columns]
    points = (
        setting_points(table, cost, loss, keys).sort_values(keys, kind="stable")
        if keys
        else table.assign(conversations=1, conversations_with_loss=table[loss].notna().astype(int))
    )
    return points, keys


def _undefined_note(points: pd.DataFrame, loss: str, keys: Sequence[str]) -> str:
    """A second title line when some runs leave the loss undefined: how many had a value (the means are theirs)."""
    runs, defined = int(points["conversations"].sum()), int(points["conversations_with_loss"].sum())
    if defined == runs:
        return ""
    unit = "conversation runs" if keys else "rows"
    return f"\n{label(loss)}: mean over the {count(defined)} of {count(runs)} {unit} where it is defined"


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
