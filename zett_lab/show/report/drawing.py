"""Drawing the page's figures: here, or on the workers of the process pool the report's sweep ran on.

After its sweep a report's own process builds the page while the pool's workers idle. The figures do not
depend on the explorer's cells, so :class:`Figures` sends them (each a plot function with its arguments,
picklable: :func:`draw`) to the pool's workers while this process builds the explorer, then collects them.
A figure is the same SVG wherever it is drawn (:func:`~zett_lab.show.plots.to_svg` is deterministic). With
no process pool (a saved sweep, ``executor="serial"``, a thread pool: matplotlib's style is global to a process),
every figure is drawn here; on a ``dask.distributed`` cluster too (its workers are not this machine's idle cores).
This module is kept small: it is what a worker imports to draw.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from markupsafe import Markup
from matplotlib.figure import Figure

from ...study.executors import parallelism
from .. import plots
from .svg import inline_svg

#: A figure not yet drawn: a plot function of :mod:`zett_lab.show.plots` with its arguments (a ``partial``).
Plot = Callable[[], Figure]


def draw(numbered: Sequence[tuple[int, Plot]]) -> list[str]:
    """Each figure's inline SVG, its ids prefixed by its number on the page (what a pool's worker runs)."""
    return [inline_svg(plots.to_svg(plot()), f"zlf{number}") for number, plot in numbered]


@dataclass(frozen=True)
class FigureView:
    """One figure of the page: inline SVG (None: nothing to draw, or not drawn yet), its caption, and its number
    among the page's figures (0: nothing to draw)."""

    svg: Markup | None
    caption: str
    conversation_id: str | None = None
    number: int = 0


class Figures:
    """The page's figures: planned in page order (:meth:`add`), each with its own id prefix (so several on one
    page never share an id), then drawn (:meth:`start`, :meth:`drawn`)."""

    def __init__(self) -> None:
        self._plots: list[Plot] = []
        self._here: set[int] = set()
        self._pending: list[tuple[list[int], cf.Future[list[str]]]] = []

    def add(self, plot: Plot, caption: str, conversation_id: str | None = None, *, here: bool = False) -> FigureView:
        """Plan a figure; ``here``: always drawn in this process (its arguments are too large to send)."""
        self._plots.append(plot)
        if here:
            self._here.add(len(self._plots))
        return FigureView(None, caption, conversation_id, len(self._plots))

    def start(self, pool: cf.Executor | None) -> None:
        """Send the figures to ``pool``'s workers, in as many tasks as it has workers, when it is a process pool (this
        machine's cores; else, or None, all are drawn by :meth:`drawn`). A pool that refuses the tasks (shut down,
        broken) leaves them to :meth:`drawn`."""
        if not isinstance(pool, cf.ProcessPoolExecutor):  # a cluster's workers are not this machine's idle cores
            return
        numbers = [n for n in range(1, len(self._plots) + 1) if n not in self._here]
        tasks = max(1, min(parallelism(pool), len(numbers)))
        groups = [numbers[i::tasks] for i in range(tasks) if numbers[i::tasks]]
        try:
            for group in groups:
                self._pending.append((group, pool.submit(draw, [(n, self._plots[n - 1]) for n in group])))
        except Exception:  # noqa: BLE001 - refused (shut down, broken): drawn here instead
            for _, future in self._pending:
                future.cancel()
            self._pending.clear()

    def drawn(self) -> dict[int, Markup]:
        """Every figure's SVG by number: those not sent to the pool drawn here first, then the pool's collected
        (those of a task that failed on the pool drawn here too)."""
        sent = {n for group, _ in self._pending for n in group}
        svgs = self._draw_here(lambda n: n not in sent)
        for group, future in self._pending:
            try:
                svgs.update(zip(group, map(Markup, future.result()), strict=True))
            except Exception:  # noqa: BLE001 - a worker gone, arguments it could not take: drawn here below
                continue  # (a figure that cannot be drawn raises its error here, as without a pool)
        self._pending.clear()
        svgs.update(self._draw_here(lambda n: n not in svgs))
        return svgs

    def _draw_here(self, which: Callable[[int], bool]) -> dict[int, Markup]:
        numbered = [(n, plot) for n, plot in enumerate(self._plots, start=1) if which(n)]
        return dict(zip((n for n, _ in numbered), map(Markup, draw(numbered)), strict=True))


def filled(view: FigureView | None, svgs: dict[int, Markup]) -> FigureView | None:
    """``view`` with its drawn SVG (a view with nothing to draw as it is)."""
    return replace(view, svg=svgs[view.number]) if view is not None and view.number else view
