"""The Explorer: one conversation under one compaction setting, interactively.

Sliders over ``max_tokens`` / ``keep_recent_tokens``, the timeline (click a step to see the engine's
decision there and, for a compaction, its summary and what it lost), the step table, a compaction
viewer and "compact here". Replays and loss metrics come from a :class:`~zett_lab.study.session.Session`.
"""

from __future__ import annotations

import dataclasses
import html
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import pandas as pd

from ...errors import SettingError
from ...load.conversation import Conversation
from ...measure import Losses
from ...replay.engine import EngineSpec
from ...replay.setting import Setting
from ...replay.trace import Trace
from ...study.session import (
    ResultCache,
    Session,
    SummarizerSpec,
    live_description,
    live_map,
    live_setting,
    with_live_conversations,
)
from ...summarizers.cache import CacheSpec
from ...tokens import TokenCounter
from .. import plots
from .base import WidgetBase, draw, new_figure, nice_step, png_image, round_to, set_range, show_png, step_regions
from .clickable import ClickableImage
from .html import (
    CSS,
    chip,
    compaction_html,
    live_summary_html,
    lost_count,
    manual_diff_html,
    step_html,
    steps_table_html,
    summary_html,
)


class Explorer(WidgetBase):
    """Explore one conversation under one compaction setting, interactively.

    Args:
        conversations: A Conversation, a list of them, or a mapping id -> Conversation.
        summarizers: Specs (``"extractive"``, ``"truncate:0.1"``) or models; default: the
            built-in offline summarizers (default summarizer first).
        max_tokens, keep_recent_tokens: Initial settings (default: a third of the
            conversation's tokens, and a quarter of that).
        cache: Summary cache (see :func:`zett_lab.replay`); False for none.
        count_tokens: Counter to share across replays (default: one MemoizingCounter).
        lru_size: Traces kept in memory, keyed by settings.
        replay_options: More keyword arguments for :func:`zett_lab.replay` (``usage=...``).
        measure: Compute loss metrics (``zett_lab.measure.measure``) for each trace.
        engine: The compaction engine of the what-if replays (see :func:`zett_lab.replay`).
        live: Traces a live agent recorded (``zett_lab.instrument``; ``zett_lab.Trace.load(path,
            session=...)``): their conversations are explored too (``conversations`` may be None),
            the sliders start at the live setting with the recorded usage, and the live decisions
            are drawn above the what-if replay at the sliders' setting.

    State (read it in code and tests): ``trace``, ``losses``, ``figure``, ``error``, ``live_trace``,
    ``selected_step`` (the step shown in ``step_area``), ``manual_trace``, ``manual_losses``,
    ``manual_figure``, ``renders``, ``replays``, ``last_render_seconds``, ``session`` (the
    :class:`~zett_lab.study.session.Session` behind it); controls ``conversation``, ``summarizer``,
    ``usage`` (which baseline the engine's estimate may use: none / recorded / synthetic),
    ``max_tokens``, ``keep_recent_tokens``, ``step`` (the keyboard route to what a click on the
    timeline shows), ``compaction``, ``manual_step``, ``compact_button``.
    """

    def __init__(
        self,
        conversations: Conversation | Iterable[Conversation] | Mapping[str, Conversation] | None,
        summarizers: SummarizerSpec | Sequence[SummarizerSpec] | None = None,
        *,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        cache: CacheSpec = None,
        count_tokens: TokenCounter | None = None,
        lru_size: int = 48,
        replay_options: Mapping[str, object] | None = None,
        measure: bool = True,
        figsize: tuple[float, float] = (10.5, 4.2),
        engine: EngineSpec = None,
        live: Trace | Sequence[Trace] | None = None,
    ) -> None:
        super().__init__()
        self.live = live_map(live)
        # A recording without usage falls back to the estimator when the usage control asks for recorded usage.
        options = {"on_missing_usage": "estimate", **(replay_options or {})}
        if engine is not None:
            options["engine"] = engine
        # With live traces the what-if follows the live run's usage path: at the live setting, the live decisions.
        initial_usage = str(options.pop("usage", "recorded" if self.live else "none"))
        self.session = Session(
            with_live_conversations(conversations, self.live),
            summarizers,
            cache=cache,
            count_tokens=count_tokens,
            lru_size=lru_size,
            replay_options=options,
        )
        self.conversations = self.session.conversations
        self.measure = measure
        self.trace: Trace | None = None
        self.live_trace: Trace | None = None
        self.losses: Losses | None = None
        self.selected_step: int | None = None
        self.manual_trace: Trace | None = None
        self.manual_losses: Losses | None = None
        self.last_render_seconds: float | None = None
        self.figure = new_figure((figsize[0], figsize[1] * (1.8 if self.live else 1)))
        self.manual_figure = new_figure((figsize[0], figsize[1] * 1.7))

        self._build_settings_controls(initial_usage)
        self._build_step_views()
        self._build_compaction_views()
        if max_tokens is None and keep_recent_tokens is None:
            max_tokens, keep_recent_tokens = live_setting(self.live.get(self.conversation.value))
        self._apply_ranges(self.conversation.value, max_tokens, keep_recent_tokens)
        self._connect_controls()
        self.children = self._layout()
        self.add_class("zl-explorer")
        self.render()

    def _build_settings_controls(self, initial_usage: str) -> None:
        """The conversation, summarizer and usage dropdowns and the two threshold sliders."""
        self.conversation = widgets.Dropdown(
            options=list(self.conversations),
            description="conversation",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="380px"),
        )
        self.summarizer = widgets.Dropdown(
            options=list(self.session.summarizers),
            description="summarizer",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="360px"),
        )
        slider_layout = widgets.Layout(width="520px")
        self.max_tokens = widgets.IntSlider(
            description="max_tokens",
            readout_format=",d",
            continuous_update=False,
            min=1,
            max=10,
            value=10,
            style={"description_width": "130px"},
            layout=slider_layout,
        )
        self.keep_recent_tokens = widgets.IntSlider(
            description="keep_recent_tokens",
            readout_format=",d",
            continuous_update=False,
            min=1,
            max=10,
            value=5,
            style={"description_width": "130px"},
            layout=slider_layout,
        )
        self.usage = widgets.Dropdown(
            options=[("estimator only", "none"), ("recorded usage", "recorded"), ("synthetic usage", "synthetic")],
            value=initial_usage,
            description="usage baseline",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="260px"),
        )
        self.max_tokens.add_class("zl-max-tokens")
        self.keep_recent_tokens.add_class("zl-keep-recent-tokens")

    def _build_step_views(self) -> None:
        """The clickable timeline, the step picker and the step, summary and step-table areas."""
        self.plot = ClickableImage(alt="timeline: click a step")
        self.plot.add_class("zl-timeline")
        self.plot.on_click(self._on_plot_click)
        self.step = widgets.BoundedIntText(
            value=0,
            min=0,
            max=0,
            description="step",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="160px"),
        )
        self.step_area = widgets.HTML()
        self.step_area.add_class("zl-step-area")
        self.summary_area = widgets.HTML()
        self.steps_area = widgets.HTML()
        self.steps_area.add_class("zl-steps-area")

    def _build_compaction_views(self) -> None:
        """The compaction picker and viewer, and the "compact here" controls and their results."""
        self.compaction = widgets.Dropdown(
            options=[],
            description="compaction",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="520px"),
        )
        self.compaction_area = widgets.HTML()
        self.manual_step = widgets.BoundedIntText(
            value=0,
            min=0,
            max=0,
            description="compact at step",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="220px"),
        )
        self.compact_button = widgets.Button(
            description="compact here",
            icon="compress",
            button_style="warning",
            tooltip="re-run the replay with a manual compaction before this step",
        )
        self.manual_status = widgets.HTML()
        self.manual_plot = png_image()
        self.manual_area = widgets.HTML()

    def _connect_controls(self) -> None:
        """Re-render on a setting change; show the picked compaction or step; compact on the button."""
        for control in (self.conversation, self.summarizer, self.usage, self.max_tokens, self.keep_recent_tokens):
            control.observe(self._on_change, names="value")
        self.compaction.observe(self._on_compaction, names="value")
        self.step.observe(self._on_step, names="value")
        self.compact_button.on_click(lambda _: self.compact_here())

    def _layout(self) -> list[widgets.Widget]:
        """Settings, status, timeline, step views, and the compaction / compact-here tabs."""
        tabs = widgets.Tab(
            children=[
                widgets.VBox([self.compaction, self.compaction_area]),
                widgets.VBox(
                    [
                        widgets.HBox([self.manual_step, self.compact_button]),
                        self.manual_status,
                        self.manual_plot,
                        self.manual_area,
                    ]
                ),
            ]
        )
        tabs.set_title(0, "Compactions")
        tabs.set_title(1, "Compact here")
        return [
            widgets.HBox([self.conversation, self.summarizer, self.usage], layout=widgets.Layout(flex_flow="row wrap")),
            widgets.HBox([self.max_tokens, self.keep_recent_tokens], layout=widgets.Layout(flex_flow="row wrap")),
            self.status,
            self.error_area,
            self.plot,
            widgets.HBox(
                [
                    self.step,
                    widgets.HTML('<span class="zl-muted">click a step of the timeline, or type its number</span>'),
                ]
            ),
            self.step_area,
            self.summary_area,
            self.steps_area,
            tabs,
        ]

    # --- settings ------------------------------------------------------------------------

    def size(self, conversation_id: str) -> int:
        """Tokens of the whole conversation (the engine's counter), cached."""
        return self.session.size(conversation_id)

    @property
    def replays(self) -> int:
        """Replays run so far (revisited settings come from the session's LRU)."""
        return self.session.replays

    @property
    def cache(self) -> ResultCache:
        """The session's LRU of finished results."""
        return self.session.cache

    def _apply_ranges(
        self, conversation_id: str, max_tokens: int | None = None, keep_recent_tokens: int | None = None
    ) -> None:
        """Slider ranges from the conversation's size (max_tokens up to 110% of it)."""
        total = max(self.size(conversation_id), 100)
        step = nice_step(total)
        high = round_to(total * 1.1, step) + step
        if max_tokens is None:
            max_tokens = round_to(total / 3, step)
        keep_step = max(1, step // 2)
        if keep_recent_tokens is None:
            keep_recent_tokens = round_to(max_tokens / 4, keep_step)
        with self._suspend():
            set_range(self.max_tokens, step, max(high, max_tokens), step, max_tokens)
            set_range(
                self.keep_recent_tokens,
                keep_step,
                max(round_to(total / 2, keep_step), keep_recent_tokens),
                keep_step,
                keep_recent_tokens,
            )

    def settings(self) -> dict[str, object]:
        """The current settings as plain values."""
        return {
            "conversation_id": self.conversation.value,
            "summarizer": self.summarizer.value,
            "max_tokens": int(self.max_tokens.value),
            "keep_recent_tokens": int(self.keep_recent_tokens.value),
            "usage": self.usage.value,
        }

    def setting(self) -> Setting:
        """The Setting the controls show."""
        setting = self.session.setting(
            self.summarizer.value, int(self.max_tokens.value), int(self.keep_recent_tokens.value)
        )
        return dataclasses.replace(setting, usage=self.usage.value)

    def set(
        self,
        *,
        conversation_id: str | None = None,
        summarizer: str | None = None,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        usage: str | None = None,
    ) -> Explorer:
        """Change several controls with one render (``explorer.set(max_tokens=..., keep_recent_tokens=...)``);
        None leaves a control as it is."""
        with self._suspend():
            if conversation_id is not None:
                self.conversation.value = conversation_id
                self._apply_ranges(conversation_id, max_tokens, keep_recent_tokens)
            if summarizer is not None:
                self.summarizer.value = summarizer
            if usage is not None:
                self.usage.value = usage
            for slider, value in ((self.max_tokens, max_tokens), (self.keep_recent_tokens, keep_recent_tokens)):
                if value is not None:
                    slider.max = max(slider.max, int(value))
                    slider.min = min(slider.min, int(value))
                    slider.value = int(value)
        self.render()
        return self

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._suspended:
            return
        if change["owner"] is self.conversation:
            self._apply_ranges(change["new"], *live_setting(self.live.get(change["new"])))
        self.render()

    # --- rendering -----------------------------------------------------------------------

    def render(self) -> None:
        """Replay (through the caches) for the current settings and redraw everything."""
        started = time.perf_counter()
        conversation_id = self.conversation.value
        self.manual_trace = self.manual_losses = None
        show_png(self.manual_plot, b"")
        self.manual_area.value = ""
        self.manual_status.value = '<span class="zl-muted">choose a step and press “compact here” to compare</span>'
        try:
            self.status.value = (
                f'<span class="zl-muted">⏳ computing… replaying <b>{html.escape(conversation_id)}</b> '
                f"with {html.escape(self.summarizer.value)}</span>"
            )
            result = self.session.run(conversation_id, self.setting(), measure_losses=self.measure)
            trace, losses = result.trace, result.losses
            self.trace, self.losses, self.error = trace, losses, None
            self.live_trace = self.live.get(conversation_id)
            self._draw_timeline(trace)
            lost = lost_count(losses)
            extra = " " + chip("lost_but_needed", lost) if lost is not None else ""
            self.summary_area.value = live_summary_html(self.live_trace) + summary_html(trace, extra)
            self.steps_area.value = steps_table_html(trace)
            with self._suspend():
                last_step = max(len(trace.steps), 1) - 1
                self.manual_step.max = self.step.max = last_step
                options = [
                    (self._compaction_label(row), int(row["compaction_id"])) for _, row in trace.compactions.iterrows()
                ]
                self.compaction.options = options
                self.compaction.value = options[0][1] if options else None
            self._render_compaction()
            self._render_step(
                self.selected_step if self.selected_step is not None and self.selected_step <= last_step else None
            )
            self.error_area.value = ""
            elapsed = time.perf_counter() - started
            self.status.value = (
                f'<span class="zl-muted">{"cached" if result.cached else "replayed"} in {elapsed:.2f} s · '
                f"{len(trace.steps)} steps · {html.escape(trace.settings.summarizer)}</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.trace = self.losses = None
            self.selected_step = None
            self.plot.clear()
            self.summary_area.value = self.steps_area.value = self.compaction_area.value = self.step_area.value = ""
            with self._suspend():
                self.compaction.options = []
            self._fail(error, "replay failed")
        finally:
            self.renders += 1
            self.last_render_seconds = time.perf_counter() - started

    def _draw_timeline(self, trace: Trace) -> None:
        """The timeline as PNG, with one clickable band per model step; a live trace's decisions above it."""
        axes: list[Any] = []
        live = self.live_trace

        def paint(ax: Any) -> None:
            axes.append(ax)
            plots.timeline(trace, ax=ax)

        def paint_both(ax: Any, live: Trace) -> None:
            plots.timeline(live, ax=ax[0], title=f"live: {live_description(live)}")
            axes.append(ax[1])
            what_if = f"what-if at max_tokens={trace.setting.max_tokens:,}, keep={trace.setting.keep_recent_tokens:,}"
            plots.timeline(trace, ax=ax[1], title=f"{what_if} ({trace.setting.engine_name})")

        png = draw(self.figure, paint) if live is None else draw(self.figure, lambda ax: paint_both(ax, live), nrows=2)
        steps = [int(s) for s in trace.steps["step"]]
        selected = f"step:{self.selected_step}" if self.selected_step is not None else ""
        self.plot.show(png, step_regions(axes[0], steps), selected)

    # --- one step ----------------------------------------------------------------------------

    def select_step(self, step: int) -> Explorer:
        """Show model step ``step``: the engine's decision there and, for a compaction attempt, the compaction."""
        with self._suspend():
            self.step.value = int(step)
        self._render_step(int(step))
        return self

    def _on_plot_click(self, key: str) -> None:
        self.select_step(int(key.removeprefix("step:")))

    def _on_step(self, change: dict[str, Any]) -> None:
        if not self._suspended:
            self._render_step(int(change["new"]))

    def _render_step(self, step: int | None) -> None:
        self.selected_step = step
        self.plot.selected = f"step:{step}" if step is not None else ""
        if self.trace is None or step is None:
            self.step_area.value = ""
            return
        try:
            self.step_area.value = step_html(self.trace, step, self.losses)
            compaction = self.trace.steps.loc[self.trace.steps["step"] == step, "compaction_id"]
            if (
                len(compaction)
                and pd.notna(compaction.iloc[0])
                and int(compaction.iloc[0]) in dict(self.compaction.options).values()
            ):
                self.compaction.value = int(compaction.iloc[0])
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self._fail(error, f"step {step}")

    @staticmethod
    def _compaction_label(row: pd.Series) -> str:
        outcome = "applied" if bool(row["applied"]) else str(row["skip_reason"])
        span = f"[{row['span_start']}:{row['span_end']}]" if pd.notna(row["span_start"]) else "no window"
        return f"#{row['compaction_id']} · step {row['step']} · {row['trigger']} · {outcome} · span {span}"

    def _on_compaction(self, change: dict[str, Any]) -> None:
        if self._suspended:
            return
        try:
            self._render_compaction()
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self._fail(error, "compaction viewer")

    def _render_compaction(self) -> None:
        trace, choice = self.trace, self.compaction.value
        if trace is None or choice is None or not len(trace.compactions):
            self.compaction_area.value = f'{CSS}<p class="zl-muted">No compaction attempt under these settings.</p>'
            return
        self.compaction_area.value = compaction_html(trace, int(choice), self.losses)

    # --- compact here ----------------------------------------------------------------------

    def compact_here(self, step: int | None = None) -> Trace | None:
        """Re-run the replay with a manual compaction before model ``step`` and show the difference.

        Returns the manual trace (also kept on ``.manual_trace``); errors are shown in place.
        """
        if step is not None:
            with self._suspend():
                self.manual_step.value = int(step)
        step = int(self.manual_step.value)
        try:
            if self.trace is None:
                raise SettingError("no baseline trace (fix the error above first)")
            result = self.session.run(
                self.conversation.value,
                dataclasses.replace(self.setting(), compact_at=(f"step:{step}",)),
                measure_losses=self.measure,
            )
            manual, manual_losses = result.trace, result.losses
            self.manual_trace, self.manual_losses = manual, manual_losses
            baseline = self.trace

            def paint(axes: Any) -> None:
                plots.timeline(baseline, ax=axes[0], title=f"baseline: {baseline.conversation.id}")
                plots.timeline(manual, ax=axes[1], title=f"with a manual compaction before step {step}")

            show_png(self.manual_plot, draw(self.manual_figure, paint, nrows=2))
            self.manual_area.value = manual_diff_html(baseline, manual, self.losses, manual_losses)
            self.manual_status.value = f'<span class="zl-muted">manual compaction before step {step}</span>'
            self.error_area.value = ""
            self.error = None
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.manual_trace = self.manual_losses = None
            self._fail(error, f"compact here (step {step})")
        return self.manual_trace
