"""The comparison explorer: several summarizers on the same compactions (or several engines), side by side.

The paired design lives in :func:`zett_lab.compare` (given a session); this widget shows its
:class:`~zett_lab.study.Comparison` (a plot of means with bootstrap intervals, per-summarizer figures,
the summaries per compaction).
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import pandas as pd

from ...formatting import counted, percent
from ...load.conversation import Conversation
from ...measure import Losses
from ...replay.engine import EngineSpec
from ...replay.trace import Trace
from ...report.production import production_entries
from ...study.compare import Comparison, compare
from ...study.production import production_summaries
from ...study.session import Session, SummarizerSpec
from ...summarizers.cache import CacheSpec
from ...tokens import TokenCounter
from .. import plots
from ..report.render import render_production
from ..tables import CSS, cell, frame_html
from .base import WidgetBase, draw, new_figure, nice_step, png_image, round_to, show_png


class ComparisonExplorer(WidgetBase):
    """Several summarizers on the same compactions, side by side.

    The first summarizer is replayed with the engine deciding (``max_tokens``,
    ``keep_recent_tokens``); the steps where it applied a compaction are then forced
    (``compact_at=["step:N", ...]``, with automatic compaction out of reach) for every
    summarizer, so each one summarizes the same spans at the same moments (a paired
    comparison). Shows a table of summaries per compaction and per-summarizer metrics.

    When the conversation holds compactions the recording agent made itself (a Claude Code,
    OpenHands or zett-agent log), ``production`` lists each beside every summarizer on its
    identical span (:func:`zett_lab.study.production.production_summaries`), shown as in the
    report's "Production summaries" section.

    With ``engines={label: engine}`` it compares compaction engines instead
    (``compare(session, by="engine", engines=...)``): every conversation is replayed at the setting
    with each engine and the first summarizer, paired per conversation; the figure shows the selected
    conversation's timeline under each engine above the engines' paired means with bootstrap intervals,
    and the tables the paired differences and the figures per conversation.

    State: ``comparison`` (the :class:`~zett_lab.study.Comparison`), and from it ``reference`` (the
    engine-decided trace), ``traces`` and ``losses`` (by summarizer or engine), ``table`` (one row per
    compaction and summarizer), ``metrics`` (one row per summarizer, or per conversation and engine);
    ``production``; ``figure``, ``error``; controls ``conversation``, ``max_tokens``, ``keep_recent_tokens``.
    """

    def __init__(
        self,
        conversations: Conversation | Iterable[Conversation] | Mapping[str, Conversation],
        summarizers: SummarizerSpec | Sequence[SummarizerSpec] | None = None,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        *,
        cache: CacheSpec = None,
        count_tokens: TokenCounter | None = None,
        replay_options: Mapping[str, object] | None = None,
        text_chars: int = 600,
        plot_metrics: Sequence[str] = (
            "compression_ratio",
            "anchor_retention",
            "needed_anchor_recall",
            "constraint_survival",
            "probe_presence",
        ),
        engines: Mapping[str, EngineSpec] | None = None,
    ) -> None:
        super().__init__()
        self.engines = dict(engines or {})
        self.session = Session(
            conversations,
            summarizers,
            cache=cache,
            count_tokens=count_tokens,
            lru_size=64,
            replay_options=replay_options,
        )
        self.conversations = self.session.conversations
        self.text_chars = text_chars
        self.comparison: Comparison | None = None
        self._build_settings_controls(*self._initial_settings(max_tokens, keep_recent_tokens))
        self.plot_metrics = tuple(plot_metrics)
        height = 2.2 * (len(self.engines) + 1) if self.engines else 2.4 + 0.55 * len(self.session.summarizers)
        self.figure = new_figure((10.5 if self.engines else 8.0, height))
        self.plot = png_image()
        self.metrics_area = widgets.HTML()
        self.table_area = widgets.HTML()
        self.production: pd.DataFrame | None = None
        self.production_area = widgets.HTML()
        for control in (self.conversation, self.max_tokens, self.keep_recent_tokens):
            control.observe(self._on_change, names="value")
        self.children = [
            widgets.HBox(
                [self.conversation, self.max_tokens, self.keep_recent_tokens],
                layout=widgets.Layout(flex_flow="row wrap"),
            ),
            self.status,
            self.error_area,
            self.plot,
            self.metrics_area,
            self.table_area,
            self.production_area,
        ]
        self.add_class("zl-comparison")
        self.render()

    def _initial_settings(self, max_tokens: int | None, keep_recent_tokens: int | None) -> tuple[int, int]:
        """The given thresholds, else a third of the first conversation's tokens and a quarter of that."""
        first = next(iter(self.conversations))
        total = max(self.session.size(first), 100)
        step = nice_step(total)
        max_tokens = int(max_tokens) if max_tokens is not None else round_to(total / 3, step)
        keep_recent_tokens = (
            int(keep_recent_tokens) if keep_recent_tokens is not None else round_to(max_tokens / 4, max(1, step // 2))
        )
        return max_tokens, keep_recent_tokens

    def _build_settings_controls(self, max_tokens: int, keep_recent_tokens: int) -> None:
        """The conversation dropdown and the two threshold fields."""
        self.conversation = widgets.Dropdown(
            options=list(self.conversations),
            description="conversation",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="380px"),
        )
        self.max_tokens = widgets.BoundedIntText(
            value=max_tokens,
            min=1,
            max=10**9,
            description="max_tokens",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="230px"),
        )
        self.keep_recent_tokens = widgets.BoundedIntText(
            value=keep_recent_tokens,
            min=1,
            max=10**9,
            description="keep_recent_tokens",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="260px"),
        )

    @property
    def summarizers(self) -> list[str]:
        return list(self.session.summarizers)

    @property
    def reference(self) -> Trace | None:
        return self.comparison.reference if self.comparison is not None else None

    @property
    def traces(self) -> dict[str, Trace]:
        """The compared summarizers' traces on the selected conversation."""
        if self.comparison is None:
            return {}
        return {name: traces[0] for name, traces in self.comparison.traces.items() if traces}

    @property
    def losses(self) -> dict[str, Losses]:
        return dict(self.comparison.losses) if self.comparison is not None else {}

    @property
    def table(self) -> pd.DataFrame | None:
        return self.comparison.summaries() if self.comparison is not None else None

    @property
    def metrics(self) -> pd.DataFrame | None:
        return self.comparison.figures() if self.comparison is not None else None

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._suspended:
            self.render()

    def render(self) -> None:
        """Replay the reference, then every summarizer on its compaction steps; rebuild the tables."""
        started = time.perf_counter()
        self.renders += 1
        if self.engines:
            self._render_engines(started)
            return
        try:
            comparison = compare(
                self.session,
                conversation=self.conversation.value,
                max_tokens=int(self.max_tokens.value),
                keep_recent_tokens=int(self.keep_recent_tokens.value),
                seed=0,
            )
            self.comparison = comparison
            if comparison.compact_at:
                show_png(
                    self.plot,
                    draw(
                        self.figure,
                        lambda ax: plots.summarizer_comparison(
                            comparison,
                            ax=ax,
                            metrics=self.plot_metrics,
                            title=f"Paired over {len(comparison.compact_at)} compactions ({self.conversation.value}): "
                            "means with 95% bootstrap CIs",
                        ),
                        margins="comparison",
                    ),
                )
            else:
                show_png(self.plot, b"")
            self.error, self.error_area.value = None, ""
            figures = comparison.figures()
            notes = "".join(f"<p><strong>Note:</strong> {html.escape(note)}</p>" for note in comparison.notes)
            self.metrics_area.value = (
                f"{CSS}{notes}<h4>Per summarizer</h4>{frame_html(figures.drop(columns='conversation_id'))}"
                if len(figures)
                else ""
            )
            self.table_area.value = self._table_html()
            self.production = self._production(self.conversation.value)
            self.production_area.value = self._production_html()
            self.status.value = (
                f'<span class="zl-muted">{counted(len(comparison.compact_at), "compaction point")} from '
                f"{html.escape(self.summarizers[0])} (engine-decided); {counted(len(self.summarizers), 'summarizer')} in "
                f"{time.perf_counter() - started:.2f} s</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.comparison, self.production = None, None
            self.metrics_area.value = self.table_area.value = self.production_area.value = ""
            show_png(self.plot, b"")
            self._fail(error, "comparison failed")

    def _render_engines(self, started: float) -> None:
        """Every conversation under every engine at the setting, paired; the selected one's timelines."""
        try:
            comparison = compare(
                self.session,
                by="engine",
                engines=self.engines,
                max_tokens=int(self.max_tokens.value),
                keep_recent_tokens=int(self.keep_recent_tokens.value),
                seed=0,
            )
            self.comparison = comparison
            show_png(
                self.plot,
                draw(self.figure, lambda axes: self._draw_engines(axes, comparison), nrows=len(self.engines) + 1),
            )
            self.error, self.error_area.value = None, ""
            first = next(iter(self.engines))
            pairs = comparison.pairwise[comparison.pairwise["a"] == first]
            columns = ["b", "metric", "n", "mean_a", "mean_b", "mean_diff", "ci_low", "ci_high"]
            self.metrics_area.value = (
                f"{CSS}<h4>Paired differences (each engine against {html.escape(first)})</h4>{frame_html(pairs[columns])}"
                f"<h4>Per conversation</h4>{frame_html(comparison.figures())}"
            )
            self.table_area.value = self.production_area.value = ""
            self.status.value = (
                f'<span class="zl-muted">{len(self.engines)} engines × {len(self.conversations)} conversations with '
                f"{html.escape(self.summarizers[0])} in {time.perf_counter() - started:.2f} s</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.comparison = None
            self.metrics_area.value = self.table_area.value = self.production_area.value = ""
            show_png(self.plot, b"")
            self._fail(error, "engine comparison failed")

    def _draw_engines(self, axes: Any, comparison: Comparison) -> None:
        conversation_id = self.conversation.value
        for axis, label in zip(axes, self.engines, strict=False):
            trace = comparison.trace(label, conversation_id)
            plots.timeline(trace, ax=axis, title=f"{label}: {conversation_id}", legend=axis is axes[0])
        plots.summarizer_comparison(
            comparison,
            ax=axes[-1],
            metrics=["context_reduction", "needed_anchor_recall"],
            title="Engines paired over the conversations: means with 95% bootstrap CIs",
        )

    def _production(self, conversation_id: str) -> pd.DataFrame | None:
        """The conversation's own (native) compactions beside every summarizer on the same spans; None without any."""
        conversation = self.session.conversation(conversation_id)
        if not conversation.native_compactions:
            return None
        models = {label: self.session.summary_model(label) for label in self.summarizers}
        cache = self.session.summary_cache if self.session.summary_cache is not None else False
        return production_summaries([conversation], models, cache=cache)

    def _production_html(self) -> str:
        if self.production is None:
            return ""
        return CSS + render_production(production_entries(self.production))

    def _table_html(self) -> str:
        table = self.table
        if table is None or not len(table):
            return (
                f'{CSS}<p class="zl-muted">The reference summarizer applied no compaction under these settings: '
                "nothing to compare.</p>"
            )
        labels = list(dict.fromkeys(table["summarizer"]))
        head = "<th style='width:8em'>compaction</th>" + "".join(f"<th>{html.escape(label)}</th>" for label in labels)
        body = []
        for cid, group in table.groupby("compaction_id", sort=True):
            first = group.iloc[0]
            where = f"#{cid} · step {first['step']}<br>span [{first['span_start']}:{first['span_end']}]"
            cells = []
            for label in labels:
                part = group[group["summarizer"] == label]
                if not len(part):
                    cells.append("<td></td>")
                    continue
                r = part.iloc[0]
                text = r["summary_text"] if isinstance(r["summary_text"], str) else ""
                short = text if len(text) <= self.text_chars else text[: self.text_chars] + "…"
                status = "applied" if bool(r["applied"]) else html.escape(str(r["skip_reason"]))
                ratio = percent(r["compression_ratio"])
                cells.append(
                    f"<td style='text-align:left;vertical-align:top;white-space:normal'>"
                    f"<b>{cell(r['summary_tokens'])} tok</b> · {ratio} · {status}"
                    f"<div class='zl-pre'>{html.escape(short)}</div></td>"
                )
            body.append(f"<tr><td style='vertical-align:top'>{where}</td>{''.join(cells)}</tr>")
        return (
            f"{CSS}<h4>Summaries per compaction (same spans for every summarizer)</h4>"
            "<div class='zl-scroll' style='max-height:600px'>"
            "<table class='zl-table zl-comparison-table' style='width:100%;table-layout:fixed'>"
            f"<thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>"
        )
