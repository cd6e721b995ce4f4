"""Interactive explorers for notebooks (ipywidgets), with all results kept as testable state.

* :class:`~zett_lab.show.widgets.Explorer`: one conversation under one setting: ``max_tokens`` and
  ``keep_recent_tokens`` sliders, the timeline (click a step to see the engine's decision
  there and, for a compaction, its summary and what it lost), the step table, a compaction
  viewer and "compact here".
* :class:`~zett_lab.show.widgets.SweepExplorer`: a sweep's heatmap for any metric; click a cell to see its timeline.
* :class:`~zett_lab.show.widgets.ComparisonExplorer`: several summarizers on the *same* compactions, side by side.

Conventions: every control is observed with ``names="value"`` into one render;
sliders use ``continuous_update=False``; results live on attributes (``.trace``, ``.losses``,
``.figure``, ``.error``, ...) so tests and users can read them; each widget owns one matplotlib
Figure it clears and redraws (never ``pyplot``); an error is shown in place and kept on ``.error``.
Clicks reach the kernel through :class:`~zett_lab.show.widgets.clickable.ClickableImage`
(anywidget: no network, no extra notebook extension); the dropdowns and number boxes beside a
plot select the same things from the keyboard. Where no widget front end runs, a widget shows a
static snapshot of itself.

Replays, loss metrics and the paired design come from :mod:`zett_lab.study` (``Session``,
``compare``); these classes only show them.

Example::

    >>> import zett_lab
    >>> from zett_lab.show.widgets import Explorer
    >>> explorer = Explorer(zett_lab.load_all("fixtures/"))   # doctest: +SKIP
    >>> explorer                                              # doctest: +SKIP
    >>> explorer.max_tokens.value = 40_000; explorer.trace.summary()  # doctest: +SKIP
"""

from ..extras import require

require("lab", "zett_lab.show.widgets")

from .comparison import ComparisonExplorer  # noqa: E402 - after the check, so a missing extra is named, not a bare ImportError
from .explorer import Explorer  # noqa: E402
from .html import compaction_html, manual_diff_html, step_html, steps_table_html  # noqa: E402
from .sweep_explorer import SweepExplorer  # noqa: E402

__all__ = [
    "ComparisonExplorer",
    "Explorer",
    "SweepExplorer",
    "compaction_html",
    "manual_diff_html",
    "step_html",
    "steps_table_html",
]
