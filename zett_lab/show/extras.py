"""The optional parts of zett-lab and what each needs: ``pip install zett-lab`` is the library and the command
line (import, replay, sweep, report); ``pip install "zett-lab[lab]"`` adds the notebook side (JupyterLab, the
widgets) that ``zett-lab lab``, ``zett-lab demo`` and :mod:`zett_lab.show.widgets` use.

Example::

    >>> from zett_lab.show.extras import require
    >>> require("lab", "zett-lab lab")   # raises MissingExtra naming the extra when JupyterLab is missing  # doctest: +SKIP
"""

from __future__ import annotations

import sys
from importlib.util import find_spec

from ..errors import MissingExtra

#: The modules each extra brings, by the name ``pip install "zett-lab[NAME]"`` takes.
EXTRAS: dict[str, tuple[str, ...]] = {
    "lab": ("jupyterlab", "ipywidgets", "anywidget"),
}


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (not installed, or blocked in ``sys.modules``)."""
    return [name for name in EXTRAS[extra] if _absent(name)]


def _absent(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is None
    try:
        return find_spec(name) is None
    except (ImportError, ValueError):
        return True


def require(extra: str, what: str) -> None:
    """Raise :class:`~zett_lab.errors.MissingExtra` (one line: what needs which extra) unless ``extra`` is installed."""
    absent = missing(extra)
    if absent:
        raise MissingExtra(what, extra, absent)
