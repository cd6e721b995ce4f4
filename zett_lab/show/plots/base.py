"""Shared plumbing of every zett_lab figure: style, new figures and axes, SVG/PNG output, token labels."""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure

from ...errors import SettingError
from ...formatting import compact
from ...replay.schema import NOT_SMALLER, SUMMARY_FAILED

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

#: rcParams every zett_lab figure is drawn and saved with (independent of the user's style).
STYLE: dict[RcKeyType, Any] = {
    "svg.hashsalt": "zett_lab",
    # Names come from the user's data: "use $HOME and $PATH" is text, never mathtext (a "$" pair would
    # render as italic math, and an unbalanced one stops the figure with a parse error).
    "text.parse_math": False,
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

#: The timeline's outcome for a step over the threshold where the engine found no window to summarize.
NO_WINDOW_OUTCOME = "no window"
#: How each compaction outcome is drawn on the timeline: marker, colour, label.
OUTCOME_STYLES: dict[str, dict[str, Any]] = {
    "applied": {"marker": "v", "color": "#228833", "label": "compaction applied", "size": 9},
    NOT_SMALLER: {"marker": "X", "color": "#EE7733", "label": f"rejected: {NOT_SMALLER}", "size": 9},
    SUMMARY_FAILED: {"marker": "s", "color": "#CC3311", "label": "failed (summary or engine)", "size": 8},
    NO_WINDOW_OUTCOME: {"marker": "|", "color": "#AA3377", "label": "threshold crossed, no window", "size": 11},
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

LINE_COLOR = "#1F3A68"


@contextmanager
def drawing_style() -> Iterator[None]:
    """Draw (and save) with zett_lab's figure style, whatever the user's matplotlib style is."""
    with matplotlib.rc_context(STYLE):
        yield


def figure(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None
) -> tuple[Figure, Axes | np.ndarray]:
    """A new pyplot-free Figure and its axes (an array when more than one), styled like every zett_lab figure.

    Example::

        >>> fig, (left, right) = figure(ncols=2)
    """
    with drawing_style():
        fig = Figure(figsize=figsize or (5.5 * ncols, 3.6 * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=True)
    return fig, axes


def figure_and_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[Figure, Axes]:
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
    with drawing_style():
        fig.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return buffer.getvalue()


def to_png(fig: Figure, dpi: float = 100, *, tight: bool = True) -> bytes:
    """The figure as PNG bytes (no software metadata), for widgets and quick looks.

    ``tight=False`` skips the tight bounding box (one draw instead of two), which widgets use
    on figures whose margins are already set.
    """
    buffer = io.BytesIO()
    with drawing_style():
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None}, bbox_inches="tight" if tight else None)
    return buffer.getvalue()


def floats(series: pd.Series) -> np.ndarray:
    """A nullable column as float64 with NaN for missing values."""
    return pd.to_numeric(series, errors="coerce").astype("float64").to_numpy(dtype=float, na_value=np.nan)


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, stop) index pairs of consecutive True values."""
    if not len(mask):
        return []
    padded = np.concatenate([[False], mask.astype(bool), [False]])
    changes = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(changes[0::2].tolist(), changes[1::2].tolist(), strict=True))


def token_axis(axis: Axis) -> None:
    """Label an axis's ticks in tokens (``12k``, ``1.5M``)."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _: compact(value)))


def whiten(color: str, amount: float) -> tuple[float, float, float]:
    """Mix a colour with white (amount 0 = colour, 1 = white)."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


#: Marker shapes and colours told apart in black and white, one per summarizer or metric.
SERIES_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p"]
SERIES_COLORS = ["#4477AA", "#EE6677", "#228833", "#CCBB44", "#66CCEE", "#AA3377", "#BBBBBB", "#222222"]


def numeric_columns(results: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Numeric (and boolean) columns of a results table, minus ``exclude``."""
    excluded = set(exclude)
    return [
        c
        for c in results.columns
        if c not in excluded and (pd.api.types.is_numeric_dtype(results[c]) or pd.api.types.is_bool_dtype(results[c]))
    ]
