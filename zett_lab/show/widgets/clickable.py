"""A plot you can click: a PNG with rectangular regions that report clicks to the kernel.

Built on anywidget: the front-end code (``clickable.js``) ships inside this package and reaches
the notebook through the widget's own comm, so it needs no network and no notebook extension
beyond anywidget's (JupyterLab, Jupyter Notebook and VS Code). A region is
``[key, label, left, top, width, height]`` with the box in fractions of the image (origin top-left);
a click calls every handler given to :meth:`ClickableImage.on_click` with the region's key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from ...errors import SettingError

HERE = Path(__file__).resolve().parent


class ClickableImage(anywidget.AnyWidget):
    """A PNG (``value``) with clickable ``regions``; ``selected`` is the key the front end outlines."""

    _esm = HERE / "clickable.js"
    _css = HERE / "clickable.css"
    value = traitlets.Bytes(b"").tag(sync=True)
    regions: traitlets.List[list[object]] = traitlets.List([]).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    alt = traitlets.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self._handlers: list[Callable[[str], None]] = []
        self.on_msg(self._on_message)

    def on_click(self, handler: Callable[[str], None]) -> None:
        """Call ``handler(key)`` when a region is clicked."""
        self._handlers.append(handler)

    def click(self, key: str) -> None:
        """What a click on region ``key`` in the browser does (also for code and tests)."""
        if key not in {region[0] for region in self.regions}:
            raise SettingError(f"no clickable region {key!r} in this plot")
        for handler in self._handlers:
            handler(key)

    def show(self, png: bytes, regions: Iterable[Sequence[str | float]], selected: str = "") -> None:
        """Replace the image and its regions in one update."""
        with self.hold_sync():
            self.value = png
            self.regions = [[str(r[0]), str(r[1]), *(round(float(v), 5) for v in r[2:6])] for r in regions]
            self.selected = selected

    def clear(self) -> None:
        with self.hold_sync():
            self.value = b""
            self.regions = []
            self.selected = ""

    def _on_message(self, widget: Any, content: Any, buffers: Any) -> None:
        key = str(content.get("key")) if isinstance(content, dict) and content.get("event") == "click" else None
        if key is not None and key in {
            region[0] for region in self.regions
        }:  # a click on a region just replaced is dropped
            self.click(key)
