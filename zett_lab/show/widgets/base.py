"""What every widget shares: its own figure drawn as PNG, slider ranges, error display, a static snapshot."""

from __future__ import annotations

import base64
import html
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets
import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...formatting import number
from .. import plots
from ..tables import CSS
from .clickable import ClickableImage
from .html import error_html

#: Margins of widget figures (fractions of the figure), per kind of plot: fixed, so a redraw is one draw.
MARGINS = {
    "timeline": {"left": 0.065, "right": 0.99, "top": 0.92, "bottom": 0.12, "hspace": 0.42},
    "heatmap": {"left": 0.13, "right": 0.98, "top": 0.88, "bottom": 0.2},
    "comparison": {"left": 0.2, "right": 0.97, "top": 0.9, "bottom": 0.3},
}


def new_figure(size: tuple[float, float]) -> Figure:
    """A widget's own figure, styled like every zett_lab figure, with no layout engine."""
    with matplotlib.rc_context(plots.STYLE):
        return Figure(figsize=size)


def draw(figure: Figure, paint: Callable[[Any], Any], nrows: int = 1, margins: str = "timeline") -> bytes:
    """Clear the widget's figure, let ``paint`` draw into its axes, and return the figure as PNG."""
    figure.clear()
    adjust = dict(MARGINS[margins])
    if nrows > 1:
        adjust["top"], adjust["bottom"] = 0.95, 0.07
    else:
        adjust.pop("hspace", None)
    with matplotlib.rc_context(plots.STYLE):
        figure.subplots_adjust(**adjust)
        axes = figure.subplots(nrows, 1, squeeze=False)[:, 0] if nrows > 1 else figure.add_subplot()
    paint(axes)
    return plots.to_png(figure, tight=False)


def png_image() -> widgets.Image:
    """An area for a widget's PNG figure, hidden while it has none (an empty image shows a broken-image icon)."""
    return widgets.Image(format="png", layout=widgets.Layout(max_width="100%", display="none"))


def show_png(image: widgets.Image, png: bytes) -> None:
    """Show ``png`` in an area made by :func:`png_image`; hide the area when there is nothing to show."""
    image.value = png
    image.layout.display = None if png else "none"


def step_regions(ax: Axes, steps: list[int]) -> list[list[str | float]]:
    """One clickable band per model step of a timeline drawn in ``ax`` (the full height of the axes)."""
    if not steps:
        return []
    low, high = ax.get_ylim()
    boxes = plots.image_boxes(
        ax, [s - 0.5 for s in steps], [s + 0.5 for s in steps], [low] * len(steps), [high] * len(steps)
    )
    return [[f"step:{s}", f"step {s}", *box] for s, box in zip(steps, boxes.tolist(), strict=True)]


def nice_step(total: int, parts: int = 200) -> int:
    """A round slider step that cuts ``total`` into about ``parts`` pieces (1, 2 or 5 times a power of ten)."""
    ticks = MaxNLocator(nbins=parts, steps=[1, 2, 5, 10], integer=True).tick_values(0, max(total, 1))
    return max(1, int(ticks[1] - ticks[0]))


def round_to(value: float, step: int) -> int:
    return max(step, round(value / step) * step)


def set_range(slider: widgets.IntSlider, low: int, high: int, step: int, value: int) -> None:
    """Change a slider's range and value without tripping its validators."""
    slider.max = max(slider.max, high)
    slider.min = min(slider.min, low)
    slider.step = step
    slider.value = min(max(value, low), high)
    slider.min = low
    slider.max = high


class WidgetBase(widgets.VBox):
    """A suspend flag (several control changes, one render), status and error areas, and a static snapshot.

    Where no widget front end runs (a documentation page, GitHub's notebook view, nbconvert) the widget
    shows :meth:`snapshot_html` instead: its plots, tables and control values as plain HTML.
    """

    def __init__(self) -> None:
        super().__init__()
        self._suspended = 0
        self.error: BaseException | None = None
        self.error_traceback: str | None = None
        self.renders = 0
        self.status = widgets.HTML(value="", layout=widgets.Layout(min_height="22px"))
        self.error_area = widgets.HTML(value="")

    @contextmanager
    def _suspend(self) -> Iterator[None]:
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    def _fail(self, error: BaseException, where: str) -> None:
        """Keep an error on ``.error`` and show it in place, instead of raising it into the notebook."""
        self.error = error
        self.error_traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.error_area.value = error_html(error, where)
        self.status.value = '<span class="zl-muted">failed (see the message below)</span>'

    def snapshot_html(self) -> str:
        """The widget as static HTML: control values, plots as images, and every HTML area."""
        return f'{CSS}<div class="zl-snapshot">{"".join(_snapshot(child) for child in self.children)}</div>'

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any] | None:
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is not None:
            bundle["text/html"] = self.snapshot_html()
        return bundle


def _snapshot(widget: widgets.Widget) -> str:
    if isinstance(widget, widgets.Box) and not isinstance(widget, ClickableImage):
        return f"<div>{''.join(_snapshot(child) for child in widget.children)}</div>"
    if isinstance(widget, (ClickableImage, widgets.Image)):
        png = bytes(widget.value)
        return (
            f'<img style="max-width:100%" src="data:image/png;base64,{base64.b64encode(png).decode()}">' if png else ""
        )
    if isinstance(widget, widgets.HTML):
        return widget.value
    if isinstance(widget, widgets.ValueWidget) and str(getattr(widget, "description", "") or ""):
        value = widget.value
        if isinstance(widget, (widgets.Dropdown, widgets.Select)):
            value = widget.label
        written = number(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
        return f'<span class="zl-chip">{html.escape(str(widget.description))}: {html.escape(written)}</span> '
    return ""
