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

from matplotlib.figure import Figure

from .base import KIND_STYLES, OUTCOME_STYLES, STYLE, figure, numeric_columns, to_png, to_svg
from .comparison import anchor_retention, comparison_frame, summarizer_comparison
from .heatmap import HEATMAP_GID, heatmap, heatmap_cells, heatmaps, image_boxes
from .pareto import pareto, pareto_points
from .trace import message_strip, timeline

__all__ = [
    "HEATMAP_GID",
    "KIND_STYLES",
    "OUTCOME_STYLES",
    "STYLE",
    "anchor_retention",
    "comparison_frame",
    "figure",
    "heatmap",
    "heatmap_cells",
    "heatmaps",
    "image_boxes",
    "message_strip",
    "numeric_columns",
    "pareto",
    "pareto_points",
    "summarizer_comparison",
    "timeline",
    "to_png",
    "to_svg",
]


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
