"""Figures comparing summarizers: estimates with confidence intervals, and anchor retention by type."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ...errors import SettingError
from ...formatting import count
from ...measure.catalogue import label_with_direction
from .base import SERIES_COLORS, SERIES_MARKERS, drawing_style, figure_and_axes

if TYPE_CHECKING:
    from ...measure.losses import Losses
    from ...study.compare import Comparison


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
    names = ("summarizer", "engine", "model", "name")
    data = data.reset_index() if not _find(data.columns, *names) else data
    name = _find(data.columns, *names)
    estimate = _find(data.columns, "estimate", "mean", "value", "point", "median")
    low = _find(data.columns, "ci_low", "low", "lower", "ci_lower", "lo")
    high = _find(data.columns, "ci_high", "high", "upper", "ci_upper", "hi")
    metric = _find(data.columns, "metric", "measure")
    if name is None or estimate is None:
        raise SettingError(
            f"summarizer_comparison: need a summarizer column and an estimate/mean column, got {list(data.columns)}"
        )
    out = pd.DataFrame(
        {
            "summarizer": data[name].astype(str),
            "by": name,
            "metric": data[metric].astype(str) if metric else "value",
            "estimate": pd.to_numeric(data[estimate], errors="coerce"),
            "ci_low": pd.to_numeric(data[low], errors="coerce") if low else np.nan,
            "ci_high": pd.to_numeric(data[high], errors="coerce") if high else np.nan,
        }
    )
    return out


def summarizer_comparison(
    compare_result: Comparison | pd.DataFrame,
    ax: Axes | None = None,
    *,
    metrics: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Summarizers (or engines) side by side: point estimates with confidence intervals, per metric.

    Accepts a DataFrame (or an object with one, e.g. the result of
    :func:`zett_lab.compare`) with a summarizer (or engine) column, an estimate/mean column,
    ``ci_low``/``ci_high`` and optionally a ``metric`` column. One row per summarizer,
    one marker shape per metric (offset within the row), horizontal whiskers for the
    intervals.
    """
    frame = comparison_frame(compare_result)
    if metrics is not None:
        frame = frame[frame["metric"].isin(list(metrics))]
    names = list(dict.fromkeys(frame["summarizer"]))
    metric_names = list(dict.fromkeys(frame["metric"]))
    legend = len(metric_names) > 1 or metric_names != ["value"]
    # Two legend columns for long labels ("Needed-anchor recall (higher is better)"), so the legend fits the figure.
    ncol = min(len(metric_names), 4 if max(map(len, map(label_with_direction, metric_names)), default=0) <= 18 else 2)
    legend_rows = math.ceil(len(metric_names) / max(ncol, 1)) if legend else 0
    own = ax is None
    height = 1.4 + 0.45 * max(len(names), 1) * max(1, len(metric_names)) ** 0.5 + 0.2 * legend_rows
    with drawing_style():
        fig, ax = figure_and_axes(ax, (6.8, height))
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
                fmt=SERIES_MARKERS[k % len(SERIES_MARKERS)],
                color=SERIES_COLORS[k % len(SERIES_COLORS)],
                markeredgecolor="black",
                markeredgewidth=0.5,
                ecolor="#333333",
                elinewidth=1.1,
                capsize=3,
                markersize=6,
                label=label_with_direction(metric),
                zorder=3,
            )
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.grid(axis="x", color="#DDDDDD", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel("estimate with confidence interval")
        if legend and own:  # below the axes, inside the figure: the layout engine makes room for it
            fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=ncol, frameon=False)
        elif legend:  # the caller's axes: below them and their x label (40 pt), within the margin the caller left
            axes_height = ax.get_position().height * fig.get_figheight() * 72
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -40 / axes_height), ncol=ncol, frameon=False)
        compared = "Engines" if len(frame) and frame["by"].iloc[0] == "engine" else "Summarizers"
        ax.set_title(title or f"{compared} compared (bars: confidence intervals)", loc="left")
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
    losses: Losses | Sequence[Losses] | pd.DataFrame,
    ax: Axes | None = None,
    *,
    title: str | None = None,
    count_column: str | None = None,
) -> Figure:
    """Per anchor type: share of a span's anchors found in its summary, and recall of the ones needed later.

    Only applied compactions count (when the table has an ``applied`` column).
    ``losses`` is a :class:`~zett_lab.measure.Losses` (its ``anchors`` table: ``type``,
    ``in_summary``, ``in_tail``, ``needed_later``, ``lost_but_needed``), a list of them
    (pooled across conversations) or that table itself. Two hatched bars per type:
    retention (``in_summary`` over all span anchors) and needed-anchor recall
    (``in_summary`` over anchors needed later and not in the kept tail); counts of
    anchors and of lost-but-needed anchors are printed next to them. ``count_column`` names a
    column of a table already counted: how many anchors each row stands for (what a report keeps
    of a long conversation's per-anchor tables).

    Long on purpose: one figure drawn top to bottom (pooling, bars, hatching, counts, legend) on one axes.
    """
    table = _anchor_table(losses)
    if "applied" in table.columns and len(table):
        table = table[table["applied"].astype("boolean").fillna(False).to_numpy(bool)]
    with drawing_style():
        fig, ax = figure_and_axes(ax, (7.0, 1.4 + 0.42 * max(table["type"].nunique() if "type" in table else 1, 1)))
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
        weights = table[count_column].astype("int64") if count_column else pd.Series(1, index=table.index)
        rows = []
        for kind, part in table.groupby("type", sort=True):
            index = part.index
            weight, in_summary = weights[index], flags["in_summary"][index]
            n_anchors, n_needed = int(weight.sum()), int(weight[needed[index]].sum())
            rows.append(
                {
                    "type": kind,
                    "anchors": n_anchors,
                    "retention": int(weight[in_summary].sum()) / n_anchors,
                    "needed": n_needed,
                    "recall": int(weight[in_summary & needed[index]].sum()) / n_needed if n_needed else np.nan,
                    "lost": int(weight[flags["lost_but_needed"][index]].sum()),
                }
            )
        stats = pd.DataFrame(rows).sort_values("anchors", ascending=False, kind="mergesort").reset_index(drop=True)
        y = np.arange(len(stats))
        height = 0.38
        ax.barh(
            y - height / 2,
            stats["retention"],
            height=height,
            color="#4477AA",
            edgecolor="black",
            linewidth=0.5,
            hatch="///",
            label="in summary (all span anchors)",
        )
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
                1.02,
                i - height / 2,
                f"n={count(row['anchors'])}",
                va="center",
                fontsize=7,
                transform=ax.get_yaxis_transform(),
            )
            text = f"needed={count(row['needed'])}, lost={count(row['lost'])}" if row["needed"] else "none needed later"
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
            or f"Anchor retention by type ({count(stats['anchors'].sum())} span anchors, {count(total_lost)} lost but needed)",
            loc="left",
        )
    return fig
