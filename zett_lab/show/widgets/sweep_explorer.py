"""The SweepExplorer: a sweep's heatmap for any metric; click a cell to see that setting's timeline.

The dropdowns under the heatmap are the keyboard route to the same selection. Exact decision
boundaries come from :class:`~zett_lab.study.session.SweepWalks` (replays, so off until asked for).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import ipywidgets as widgets
import pandas as pd

from ...errors import SettingError
from ...load.conversation import Conversation
from ...measure.catalogue import label, metrics
from ...replay.trace import Trace
from ...study import Sweep
from ...study.session import SweepWalks
from .. import plots
from ..plots.boundaries import BoundaryInput
from .base import WidgetBase, draw, new_figure, png_image, show_png
from .clickable import ClickableImage
from .html import error_html, summary_html

#: The dropdown choice that averages over every conversation (or summarizer).
ALL = "(all: mean)"


class SweepExplorer(WidgetBase):
    """A sweep's heatmap for any metric it measured; click a cell (or choose it below) to see its timeline.

    Args:
        sweep: A :class:`zett_lab.study.Sweep` (``.results`` and ``.trace(...)``) or a results
            DataFrame (then pass ``trace=`` to get cell timelines).
        metric: The metric shown first, by column name (default: steps over budget). The picker lists
            every catalogue metric the sweep measured, by its catalogue label.
        boundaries: Exact decision boundaries to draw: anything :func:`zett_lab.show.plots.heatmap`
            accepts, or a callable ``(explorer) -> boundaries``. With ``"auto"`` (default) a
            checkbox offers :func:`zett_lab.study.decision_boundaries` for the chosen
            conversation and summarizer (one walk along ``max_tokens`` per
            ``keep_recent_tokens`` row; replays, so off until ticked; cached).
        trace: Callable returning the Trace of a cell: ``trace(conversation_id=, summarizer=,
            max_tokens=, keep_recent_tokens=)``; default: ``sweep.trace``.
        conversations: The sweep's conversations (for boundaries), when ``sweep`` does not hold them.

    State: ``metric``, ``conversation``, ``summarizer``, ``cell_max_tokens``,
    ``cell_keep_recent_tokens`` (the keyboard route to what a click on the heatmap selects),
    ``show_boundaries`` (controls); ``trace`` (the selected cell's), ``figure``, ``trace_figure``,
    ``boundaries``, ``error``, ``renders``.
    """

    def __init__(
        self,
        sweep: Sweep | pd.DataFrame,
        metric: str | None = None,
        *,
        boundaries: BoundaryInput | Literal["auto"] | Callable[[SweepExplorer], BoundaryInput] = "auto",
        trace: Callable[..., Trace] | None = None,
        conversations: Iterable[Conversation] | Mapping[str, Conversation] | None = None,
        figsize: tuple[float, float] = (7.2, 4.9),
    ) -> None:
        super().__init__()
        results = _results_table(sweep)
        self.sweep = sweep
        self.results = results
        self._trace_fn = trace if trace is not None else getattr(sweep, "trace", None)
        self._boundaries_source = boundaries
        self.walks = SweepWalks(sweep if isinstance(sweep, Sweep) else None, conversations)
        self.figure = new_figure(figsize)
        self.trace_figure = new_figure((10.5, 4.0))
        self.trace: Trace | None = None
        self.boundaries: BoundaryInput = None

        options, metric = _metric_options(results, metric)
        self._build_filters(results, options, metric)
        self._build_cell_controls(results)
        self._build_views()
        for control in (
            self.metric,
            self.conversation,
            self.summarizer,
            self.cell_max_tokens,
            self.cell_keep_recent_tokens,
            self.show_boundaries,
        ):
            control.observe(self._on_change, names="value")
        rows = [
            widgets.HBox(
                [self.metric, self.summarizer, self.conversation], layout=widgets.Layout(flex_flow="row wrap")
            ),
            widgets.HBox([self.cell_max_tokens, self.cell_keep_recent_tokens]),
        ]
        if isinstance(boundaries, str) and boundaries == "auto":
            rows.append(self.show_boundaries)
        self.children = [*rows, self.status, self.error_area, self.plot, self.trace_summary, self.trace_plot]
        self.add_class("zl-sweep-explorer")
        self.render()

    def _build_filters(self, results: pd.DataFrame, options: list[tuple[str, str]], metric: str) -> None:
        """The metric (catalogue labels), conversation and summarizer dropdowns."""
        self.metric = widgets.Dropdown(
            options=options,
            value=metric,
            description="metric",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="340px"),
        )
        conversations_ = (
            list(dict.fromkeys(map(str, results["conversation_id"]))) if "conversation_id" in results else []
        )
        summarizers = list(dict.fromkeys(map(str, results["summarizer"]))) if "summarizer" in results else []
        self.conversation = widgets.Dropdown(
            options=[ALL, *conversations_] if len(conversations_) > 1 else conversations_ or [ALL],
            description="conversation",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="340px"),
        )
        self.summarizer = widgets.Dropdown(
            options=[*summarizers, ALL] if len(summarizers) > 1 else summarizers or [ALL],
            description="summarizer",
            style={"description_width": "initial"},
        )

    def _build_cell_controls(self, results: pd.DataFrame) -> None:
        """The chosen cell's max_tokens and keep_recent_tokens, and the exact-boundaries switch."""
        xs = sorted(int(v) for v in results["max_tokens"].unique())
        ys = sorted(int(v) for v in results["keep_recent_tokens"].unique())
        self.cell_max_tokens = widgets.Dropdown(
            options=[(f"{v:,}", v) for v in xs],
            value=xs[len(xs) // 2],
            description="cell: max_tokens",
            style={"description_width": "initial"},
        )
        self.cell_keep_recent_tokens = widgets.Dropdown(
            options=[(f"{v:,}", v) for v in ys],
            value=ys[0],
            description="keep_recent_tokens",
            style={"description_width": "initial"},
        )
        self.show_boundaries = widgets.Checkbox(
            value=False,
            description="exact decision boundaries (replays the chosen conversation)",
            indent=False,
            layout=widgets.Layout(width="auto"),
        )

    def _build_views(self) -> None:
        """The clickable heatmap and the chosen cell's timeline and summary."""
        self.plot = ClickableImage(alt="heatmap: click a cell")
        self.plot.add_class("zl-heatmap")
        self.plot.on_click(self._on_plot_click)
        self.trace_plot = png_image()
        self.trace_plot.add_class("zl-cell-timeline")
        self.trace_summary = widgets.HTML()
        self.trace_summary.add_class("zl-cell-summary")

    def select(self, max_tokens: int, keep_recent_tokens: int) -> SweepExplorer:
        """Choose a cell (one render): what a click on the heatmap does."""
        with self._suspend():
            self.cell_max_tokens.value = int(max_tokens)
            self.cell_keep_recent_tokens.value = int(keep_recent_tokens)
        self.render()
        return self

    def _on_plot_click(self, key: str) -> None:
        max_tokens, keep_recent_tokens = (int(part) for part in key.split(":"))
        self.select(max_tokens, keep_recent_tokens)

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._suspended:
            self.render()

    def filtered(self) -> tuple[pd.DataFrame, dict[str, object]]:
        """The rows the heatmap shows, and the filter applied."""
        where: dict[str, object] = {}
        if self.summarizer.value != ALL and "summarizer" in self.results:
            where["summarizer"] = self.summarizer.value
        if self.conversation.value != ALL and "conversation_id" in self.results:
            where["conversation_id"] = self.conversation.value
        data = self.results
        for key, value in where.items():
            data = data[data[key].astype(str) == value]
        return data, where

    def _boundaries(self) -> BoundaryInput:
        source = self._boundaries_source
        if source is None or source is False:
            return None
        if callable(source):
            return source(self)
        if not (isinstance(source, str) and source == "auto"):
            return source
        if not self.show_boundaries.value:
            return None
        conversation, summarizer = self.conversation.value, self.summarizer.value
        if conversation == ALL or summarizer == ALL:
            raise SettingError("exact boundaries are per conversation and summarizer: choose one of each")
        xs = [int(v) for v in self.results["max_tokens"].unique()]
        ys = [int(v) for v in self.results["keep_recent_tokens"].unique()]
        if not self.walks.cached(conversation, summarizer, xs, ys):
            self.status.value = (
                '<span class="zl-muted">⏳ computing… walking max_tokens for exact decision boundaries</span>'
            )
        return self.walks.walks(conversation, summarizer, xs, ys)

    def render(self) -> None:
        """Redraw the heatmap (with the chosen cell outlined) and the cell's timeline."""
        self.renders += 1
        metric = self.metric.value
        cell = (self.cell_max_tokens.value, self.cell_keep_recent_tokens.value)
        self.error = None
        self.error_area.value = ""
        try:
            data, where = self.filtered()
            try:
                self.boundaries = self._boundaries()
            except Exception as error:  # noqa: BLE001 - the heatmap is still worth showing
                self.boundaries = None
                self.error = error
                self.error_area.value = error_html(error, "decision boundaries")
            self._draw_heatmap(data, metric, cell, where)
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.error = error
            self.error_area.value = error_html(error, "heatmap")
            return
        self._render_cell(*cell)

    def _draw_heatmap(self, data: pd.DataFrame, metric: str, cell: tuple[int, int], where: Mapping[str, Any]) -> None:
        """The heatmap as PNG, with one clickable region per cell of the grid."""
        axes: list[Any] = []
        title = label(metric) + (f"\n{', '.join(f'{k}={v}' for k, v in where.items())}" if where else "")

        def paint(ax: Any) -> None:
            axes.append(ax)
            plots.heatmap(data, metric, ax=ax, boundaries=self.boundaries, highlight=cell, title=title)

        png = draw(self.figure, paint, margins="heatmap")
        cells = plots.heatmap_cells(axes[0])
        boxes = plots.image_boxes(axes[0], cells["x0"], cells["x1"], cells["y0"], cells["y1"])
        regions = [
            [f"{m}:{k}", f"max_tokens={m:,}, keep_recent_tokens={k:,}", *box]
            for m, k, box in zip(cells["max_tokens"], cells["keep_recent_tokens"], boxes.tolist(), strict=True)
        ]
        self.plot.show(png, regions, f"{cell[0]}:{cell[1]}")

    def _render_cell(self, max_tokens: int, keep_recent_tokens: int) -> None:
        self.trace = None
        show_png(self.trace_plot, b"")
        self.trace_summary.value = ""
        if self._trace_fn is None:
            self.status.value = '<span class="zl-muted">no trace source: pass trace= to show a cell\'s timeline</span>'
            return
        conversation = self.conversation.value
        if conversation == ALL:
            conversation = str(self.results["conversation_id"].iloc[0]) if "conversation_id" in self.results else None
        summarizer = (
            self.summarizer.value
            if self.summarizer.value != ALL
            else (str(self.results["summarizer"].iloc[0]) if "summarizer" in self.results else None)
        )
        try:
            kwargs: dict[str, int | str] = {
                "max_tokens": int(max_tokens),
                "keep_recent_tokens": int(keep_recent_tokens),
            }
            if conversation is not None:
                kwargs["conversation_id"] = conversation
            if summarizer is not None:
                kwargs["summarizer"] = summarizer
            trace = self._trace_fn(**kwargs)
            self.trace = trace
            show_png(self.trace_plot, draw(self.trace_figure, lambda ax: plots.timeline(trace, ax=ax)))
            self.trace_summary.value = summary_html(trace)
            self.status.value = (
                f'<span class="zl-muted">cell below: {html.escape(str(conversation))} · '
                f"{html.escape(str(summarizer))} · "
                f"max_tokens={max_tokens:,} · keep_recent_tokens={keep_recent_tokens:,}</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.error = error
            self.error_area.value += error_html(error, "cell trace")
            self.status.value = ""


def _results_table(sweep: Sweep | pd.DataFrame) -> pd.DataFrame:
    """The sweep's results table; a clear error when it is missing or when every cell failed."""
    results = sweep if isinstance(sweep, pd.DataFrame) else getattr(sweep, "results", None)
    if not isinstance(results, pd.DataFrame):
        raise SettingError(
            f"SweepExplorer needs a Sweep (with .results) or a results DataFrame, got {type(sweep).__name__}"
        )
    if "error" in results.columns and results["error"].notna().all():
        raise SettingError(f"every cell of this sweep failed; first error: {results['error'].dropna().iloc[0]}")
    return results


def _metric_options(results: pd.DataFrame, metric: str | None) -> tuple[list[tuple[str, str]], str]:
    """The metric picker's choices, ``(catalogue label, column)`` in catalogue order for every catalogue metric the
    results measured (never an internal column), and the metric shown first: ``metric`` (a column outside the
    catalogue only when asked for by name), else steps over budget, else the first."""
    numeric = set(plots.numeric_columns(results))
    measured = [m for m in metrics("cell") if m.name in numeric and results[m.name].notna().any()]
    options = [(m.label, m.name) for m in measured]
    if metric is not None and metric not in {name for _, name in options}:
        if metric not in numeric:
            raise SettingError(f"no numeric column {metric!r}; the metrics measured: {[n for _, n in options]}")
        options.append((label(metric), metric))
    if not options:
        raise SettingError(
            f"sweep results have no metric of the catalogue to show; numeric columns: {sorted(numeric) or 'none'}"
        )
    names = [name for _, name in options]
    if metric is None:
        metric = "steps_over_budget" if "steps_over_budget" in names else names[0]
    return options, metric
