"""A plot you can click: a PNG with rectangular regions that report clicks to the kernel.

Built on anywidget: the front-end code (``clickable.js``) ships inside this package and reaches
the notebook through the widget's own comm, so it needs no network and no notebook extension
beyond anywidget's (JupyterLab, Jupyter Notebook and VS Code). A region is
``[key, label, left, top, width, height]`` with the box in fractions of the image (origin top-left);
a click calls every handler given to :meth:`ClickableImage.on_click` with the region's key.

Each picture the front end draws is a new anywidget model that never changes: anywidget's front end
(0.11) gives a model 2 s to load its code, and when a busy browser takes longer it drops every later
update the kernel sends that model, so a model that was updated kept its empty first state (the
explorer without a timeline, for good). A new model's whole state travels in its opening message,
which the front end always applies; the plain ipywidgets box around it, whose updates anywidget never
sees, swaps the new one in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets

from ...errors import SettingError

HERE = Path(__file__).resolve().parent


class ClickableView(anywidget.AnyWidget):
    """One picture as the front end draws it: a PNG (``value``), its ``regions``, the ``selected`` key.

    Set once, when made (see the module's docstring); :class:`ClickableImage` makes a new one for a
    new picture or selection and closes the old one.
    """

    _esm = HERE / "clickable.js"
    _css = HERE / "clickable.css"
    value = traitlets.Bytes(b"").tag(sync=True)
    regions: traitlets.List[list[object]] = traitlets.List([]).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    alt = traitlets.Unicode("").tag(sync=True)


class ClickableImage(widgets.VBox):
    """A PNG with clickable regions: ``value``, ``regions``, and ``selected``, the key the front end outlines.

    The box holds one :class:`ClickableView`; each change shows a new one (see the module's docstring).
    """

    def __init__(self, alt: str = "", **kwargs: object) -> None:
        self.view = ClickableView(alt=alt)
        super().__init__(children=(self.view,), **kwargs)
        self._handlers: list[Callable[[str], None]] = []
        self.view.on_msg(self._on_message)

    @property
    def value(self) -> bytes:
        """The PNG shown (empty: nothing shown)."""
        return bytes(self.view.value)

    @property
    def regions(self) -> list[list[object]]:
        """The clickable regions, ``[key, label, left, top, width, height]`` each."""
        return list(self.view.regions)

    @property
    def selected(self) -> str:
        """The key of the region outlined ("" for none)."""
        return str(self.view.selected)

    @selected.setter
    def selected(self, key: str) -> None:
        self._replace(self.view.value, self.view.regions, key)

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
        """Show a new image with its regions and selection (one new view)."""
        self._replace(png, [[str(r[0]), str(r[1]), *(round(float(v), 5) for v in r[2:6])] for r in regions], selected)

    def clear(self) -> None:
        """Show nothing (the front end hides an empty image)."""
        self._replace(b"", [], "")

    def _replace(self, png: bytes, regions: list[list[object]], selected: str) -> None:
        """Swap in a new view made with this state and close the old one; the same state keeps the view."""
        old = self.view
        if bytes(old.value) == png and old.regions == regions and old.selected == selected:
            return
        self.view = ClickableView(value=png, regions=regions, selected=selected, alt=old.alt)
        self.view.on_msg(self._on_message)
        self.children = (self.view,)
        old.close()

    def _on_message(self, widget: Any, content: Any, buffers: Any) -> None:
        key = str(content.get("key")) if isinstance(content, dict) and content.get("event") == "click" else None
        if key is not None and key in {
            region[0] for region in self.regions
        }:  # a click on a region just replaced is dropped
            self.click(key)
