"""Interactive explorers for notebooks (ipywidgets), with all results kept as testable state.

* :class:`Explorer` — one conversation under one setting: ``max_tokens`` and
  ``keep_recent_tokens`` sliders, the timeline, the step table, a compaction viewer
  (span, summary, what was lost, lost-but-needed anchors highlighted) and a
  "compact here" control that re-runs the replay with a manual compaction and shows
  the difference.
* :class:`SweepExplorer` — a sweep's heatmap for any metric, and the timeline of one cell.
* :class:`Comparison` — several summarizers on the *same* compactions, side by side.

Conventions (DESIGN.md §6): every control is observed with ``names="value"`` into one
render; sliders use ``continuous_update=False``; results live on attributes
(``.trace``, ``.losses``, ``.figure``, ``.error``, ...) so tests and users can read them;
each widget owns one matplotlib Figure it clears and redraws (never ``pyplot``), shown as
PNG in an ``Image`` widget; an error is shown in place and kept on ``.error`` instead of
being raised into the notebook.

Example::

    >>> import zett_lab
    >>> from zett_lab.show.widgets import Explorer
    >>> explorer = Explorer(zett_lab.load_all("fixtures/"))   # doctest: +SKIP
    >>> explorer                                              # doctest: +SKIP
    >>> explorer.max_tokens.value = 40_000; explorer.trace.summary()  # doctest: +SKIP
"""

from __future__ import annotations

import html
import math
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..errors import SettingError
from ..load.conversation import Conversation, role_of
from . import plots

__all__ = ["Comparison", "Explorer", "SweepExplorer"]

#: Step-table columns shown in the Explorer.
STEP_TABLE_COLUMNS = [
    "step",
    "turn",
    "n_recorded",
    "estimate",
    "estimate_source",
    "triggered",
    "skip_reason",
    "cutoff_index",
    "compaction_id",
    "summary_tokens",
    "applied",
    "context_tokens_after",
    "over_budget_after",
    "checkpoint_id",
    "kept_from",
]

_CSS = """
<style>
.zl-table {border-collapse: collapse; font-size: 12px; font-family: var(--jp-code-font-family, monospace);}
.zl-table th, .zl-table td {border: 1px solid #ddd; padding: 2px 6px; text-align: right; white-space: nowrap;}
.zl-table th {background: #f3f3f3; position: sticky; top: 0;}
.zl-table tr.zl-applied td {background: #e3f2e1;}
.zl-table tr.zl-over td {background: #fbe3dd;}
.zl-table tr.zl-nowindow td {background: #f1e0ec;}
.zl-table tr.zl-rejected td {background: #fdebd3;}
.zl-scroll {max-height: 320px; overflow: auto; border: 1px solid #ddd;}
.zl-error {color: #8a1f11; background: #fbe3dd; border: 1px solid #cc3311; padding: 6px 8px; white-space: pre-wrap;
           font-family: var(--jp-code-font-family, monospace); font-size: 12px;}
.zl-pre {white-space: pre-wrap; max-height: 260px; overflow: auto; background: #f7f7f7; border: 1px solid #ddd;
         padding: 6px; font-size: 12px; font-family: var(--jp-code-font-family, monospace);}
.zl-lost {background: #ffd54f; font-weight: bold; padding: 0 2px;}
.zl-muted {color: #666;}
.zl-chip {display: inline-block; border: 1px solid #bbb; border-radius: 3px; padding: 0 4px; margin: 1px;
          font-family: var(--jp-code-font-family, monospace); font-size: 11px;}
</style>
"""


# --- helpers -----------------------------------------------------------------------------


def _conversation_map(conversations: Any) -> dict[str, Conversation]:
    if isinstance(conversations, Conversation):
        conversations = [conversations]
    items = list(conversations.values()) if isinstance(conversations, Mapping) else list(conversations)
    if not items:
        raise SettingError("no conversations given")
    out: dict[str, Conversation] = {}
    for item in items:
        if not isinstance(item, Conversation):
            raise SettingError(f"expected Conversation objects, got {type(item).__name__}")
        out[item.id] = item
    return out


def _summarizer_labels(summarizers: Any) -> dict[str, Any]:
    """Label -> spec (string) or model, in the given order."""
    if summarizers is None:
        try:
            from ..summarizers import DEFAULT_SUMMARIZER, OFFLINE_SUMMARIZERS

            names = [DEFAULT_SUMMARIZER, *[n for n in OFFLINE_SUMMARIZERS if n != DEFAULT_SUMMARIZER]]
        except ImportError:
            names = ["extractive"]
        summarizers = names
    if isinstance(summarizers, str) or callable(getattr(summarizers, "stream", None)):
        summarizers = [summarizers]
    out: dict[str, Any] = {}
    for item in summarizers:
        if isinstance(item, str):
            out[item] = item
        else:
            from ..summarizers import summarizer_identity

            label, n = summarizer_identity(item), 2
            while label in out:
                label, n = f"{summarizer_identity(item)} ({n})", n + 1
            out[label] = item
    if not out:
        raise SettingError("no summarizers given")
    return out


def _nice_step(total: int, parts: int = 200) -> int:
    raw = max(1, total / parts)
    magnitude = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * magnitude:
            return int(factor * magnitude)
    return int(10 * magnitude)


def _round_to(value: float, step: int) -> int:
    return max(step, round(value / step) * step)


def _set_range(slider: widgets.IntSlider, low: int, high: int, step: int, value: int) -> None:
    """Change a slider's range and value without tripping its validators."""
    slider.max = max(slider.max, high)
    slider.min = min(slider.min, low)
    slider.step = step
    slider.value = min(max(value, low), high)
    slider.min = low
    slider.max = high


def _error_html(error: BaseException, where: str) -> str:
    text = f"{where}: {type(error).__name__}: {error}"
    return f'{_CSS}<div class="zl-error">{html.escape(text)}</div>'


def _cell(value: Any) -> str:
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "✓" if value else ""
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return html.escape(str(value))


def steps_table_html(trace: Any, columns: Sequence[str] = STEP_TABLE_COLUMNS, max_rows: int | None = None) -> str:
    """The step table as HTML, rows tinted by what happened (applied, over budget, no window, rejected)."""
    steps = trace.steps
    columns = [c for c in columns if c in steps.columns]
    data = steps if max_rows is None else steps.head(max_rows)
    records = data[columns].astype("object").to_numpy()
    applied = plots._bools(data["applied"])
    over = plots._bools(data["over_budget_after"])
    reason = data["skip_reason"].astype("object").to_numpy()
    rows = []
    for i, record in enumerate(records):
        if applied[i]:
            css = "zl-applied"
        elif reason[i] in ("summary not smaller", "summary failed"):
            css = "zl-rejected"
        elif reason[i] in ("no whole-turn boundary", "only earlier checkpoints"):
            css = "zl-nowindow"
        elif over[i]:
            css = "zl-over"
        else:
            css = ""
        cells = "".join(f"<td>{_cell(v)}</td>" for v in record)
        rows.append(f'<tr class="{css}">{cells}</tr>')
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    legend = (
        '<div class="zl-muted" style="font-size:11px">rows: <span style="background:#e3f2e1">applied</span> · '
        '<span style="background:#fdebd3">rejected/failed</span> · <span style="background:#f1e0ec">threshold '
        'crossed, no window</span> · '
        '<span style="background:#fbe3dd">sent over budget</span></div>'
    )
    settings = getattr(trace, "settings", {}) or {}
    caption = (
        f"<b>{len(steps)} steps</b> of {html.escape(str(getattr(trace.conversation, 'id', '')))} at "
        f"max_tokens={_cell(settings.get('max_tokens'))}, "
        f"keep_recent_tokens={_cell(settings.get('keep_recent_tokens'))}"
        f" · {html.escape(str(settings.get('summarizer', '')))}"
    )
    return (
        f'{_CSS}<div class="zl-steps-caption">{caption}</div>{legend}<div class="zl-scroll">'
        f'<table class="zl-table zl-steps" data-steps="{len(steps)}" data-max-tokens="{settings.get("max_tokens")}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _frame_html(frame: pd.DataFrame, *, scroll: bool = False) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in record) + "</tr>"
                   for record in frame.astype("object").to_numpy())
    table = f'<table class="zl-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return f'<div class="zl-scroll">{table}</div>' if scroll else table


def _summary_html(trace: Any, extra: str = "") -> str:
    summary = trace.summary()
    keys = [
        "steps",
        "compactions_applied",
        "rejected_not_smaller",
        "failed",
        "peak_context",
        "total_input_tokens",
        "steps_over_budget",
    ]
    chips = " ".join(f'<span class="zl-chip">{html.escape(k)}: {_cell(summary.get(k))}</span>' for k in keys)
    return f"{_CSS}<div>{chips}{extra}</div>"


def _message_text(message: Any, limit: int = 240) -> str:
    text = getattr(message, "text", None)
    if not isinstance(text, str):
        content = getattr(message, "content", "")
        text = content if isinstance(content, str) else repr(content)
    calls = getattr(message, "tool_calls", None) or ()
    if calls:
        text = (text + " " if text else "") + " ".join(f"→ {c.name}({c.arguments})" for c in calls)
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _measure() -> Callable[[Any], Any] | None:
    try:
        from ..measure import measure
    except ImportError:
        return None
    return measure


def _replay(*args: Any, **kwargs: Any):
    from ..replay.run import replay

    return replay(*args, **kwargs)


def _lost_count(losses: Any) -> int | None:
    """Lost-but-needed anchors over applied compactions."""
    anchors = getattr(losses, "anchors", None)
    if isinstance(anchors, pd.DataFrame) and "lost_but_needed" in anchors:
        lost = anchors["lost_but_needed"].astype("boolean").fillna(False)
        if "applied" in anchors:
            lost &= anchors["applied"].astype("boolean").fillna(False)
        return int(lost.sum())
    return None


class _TraceCache:
    """A small LRU of (trace, losses) keyed by replay settings."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple) -> tuple[Any, Any] | None:
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
            self.hits += 1
        return entry

    def put(self, key: tuple, value: tuple[Any, Any]) -> None:
        self.misses += 1
        self.entries[key] = value
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


class _Base(widgets.VBox):
    """Shared plumbing: models and caches, a suspend flag, status and error areas."""

    def __init__(
        self,
        *,
        summarizers: Any,
        cache: Any,
        count_tokens: Any,
        lru_size: int,
        replay_options: Mapping[str, Any] | None,
    ) -> None:
        super().__init__()
        from ..replay.run import resolve_cache
        from ..tokens import MemoizingCounter

        self._labels = _summarizer_labels(summarizers)
        self._models: dict[str, Any] = {}
        self.counter = count_tokens if count_tokens is not None else MemoizingCounter()
        self.summary_cache = resolve_cache(cache)
        self.replay_options = dict(replay_options or {})
        self.cache = _TraceCache(lru_size)
        self._suspended = 0
        self.error: BaseException | None = None
        self.error_traceback: str | None = None
        self.renders = 0
        self.replays = 0
        self.last_render_seconds: float | None = None
        self.status = widgets.HTML(value="", layout=widgets.Layout(min_height="22px"))
        self.error_area = widgets.HTML(value="")

    @contextmanager
    def _suspend(self):
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    def _summary_model(self, label: str) -> Any:
        if label not in self._models:
            spec = self._labels[label]
            if isinstance(spec, str):
                from ..summarizers import summarizer

                self._models[label] = summarizer(spec)
            else:
                self._models[label] = spec
        return self._models[label]

    def _run(
        self,
        conversation: Conversation,
        label: str,
        max_tokens: int,
        keep_recent_tokens: int,
        compact_at: Sequence[str] = (),
        measure: bool = True,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Any, bool]:
        """Replay through the LRU, the shared counter and the summary cache; returns (trace, losses, cache hit)."""
        options = {**self.replay_options, **(options or {})}
        key = (
            conversation.id,
            id(conversation),
            label,
            int(max_tokens),
            int(keep_recent_tokens),
            tuple(compact_at),
            measure,
            tuple(sorted((k, repr(v)) for k, v in options.items())),
        )
        hit = self.cache.get(key)
        if hit is not None:
            return hit[0], hit[1], True
        self.status.value = (f'<span class="zl-muted">⏳ computing… replaying <b>{html.escape(conversation.id)}</b> '
                             f"({len(conversation.messages):,} messages) with {html.escape(label)}</span>")
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "no recorded usage": the status line says which source decided
            trace = _replay(
                conversation,
                max_tokens=int(max_tokens),
                keep_recent_tokens=int(keep_recent_tokens),
                summarizer=self._summary_model(label),
                count_tokens=self.counter,
                cache=self.summary_cache if self.summary_cache is not None else False,
                compact_at=list(compact_at) or None,
                **options,
            )
        self.replays += 1
        measure_fn = _measure() if measure else None
        losses = measure_fn(trace) if measure_fn is not None else None
        self.cache.put(key, (trace, losses))
        return trace, losses, False

    def _fail(self, error: BaseException, where: str) -> None:
        self.error = error
        self.error_traceback = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.error_area.value = _error_html(error, where)
        self.status.value = '<span class="zl-muted">failed (see the message below)</span>'


def _new_figure(size: tuple[float, float]) -> Figure:
    """A widget's own figure: fixed margins instead of a layout engine, so a redraw is one fast draw."""
    with plots._style():
        return Figure(figsize=size)


#: Margins of widget figures (fractions of the figure), per kind of plot.
_MARGINS = {
    "timeline": {"left": 0.065, "right": 0.99, "top": 0.92, "bottom": 0.12, "hspace": 0.42},
    "heatmap": {"left": 0.13, "right": 0.98, "top": 0.88, "bottom": 0.2},
    "comparison": {"left": 0.2, "right": 0.97, "top": 0.9, "bottom": 0.3},
}


def _draw(figure: Figure, draw: Callable[[Any], Any], nrows: int = 1, margins: str = "timeline") -> bytes:
    """Clear the widget's figure, draw into it, and return it as PNG."""
    figure.clear()
    adjust = dict(_MARGINS[margins])
    if nrows > 1:
        adjust["top"], adjust["bottom"] = 0.95, 0.07
    else:
        adjust.pop("hspace", None)
    with plots._style():
        figure.subplots_adjust(**adjust)
        axes = figure.subplots(nrows, 1, squeeze=False)[:, 0] if nrows > 1 else figure.add_subplot()
    draw(axes)
    return plots.to_png(figure, tight=False)


# --- Explorer ----------------------------------------------------------------------------


class Explorer(_Base):
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

    State (read it in code and tests): ``trace``, ``losses``, ``figure``, ``error``,
    ``manual_trace``, ``manual_losses``, ``manual_figure``, ``renders``, ``replays``,
    ``last_render_seconds``; controls ``conversation``, ``summarizer``, ``usage`` (which
    baseline the engine's estimate may use: none / recorded / synthetic), ``max_tokens``,
    ``keep_recent_tokens``, ``compaction``, ``manual_step``, ``compact_button``.
    """

    def __init__(
        self,
        conversations: Any,
        summarizers: Any = None,
        *,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        cache: Any = None,
        count_tokens: Any = None,
        lru_size: int = 48,
        replay_options: Mapping[str, Any] | None = None,
        measure: bool = True,
        figsize: tuple[float, float] = (10.5, 4.2),
    ) -> None:
        super().__init__(
            summarizers=summarizers,
            cache=cache,
            count_tokens=count_tokens,
            lru_size=lru_size,
            replay_options=replay_options,
        )
        self.conversations = _conversation_map(conversations)
        self.measure = measure
        self.trace: Any = None
        self.losses: Any = None
        self.manual_trace: Any = None
        self.manual_losses: Any = None
        self.figure = _new_figure(figsize)
        self.manual_figure = _new_figure((figsize[0], figsize[1] * 1.7))
        self._sizes: dict[str, int] = {}

        self.conversation = widgets.Dropdown(
            options=list(self.conversations),
            description="conversation",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="380px"),
        )
        self.summarizer = widgets.Dropdown(options=list(self._labels), description="summarizer",
                                           style={"description_width": "initial"}, layout=widgets.Layout(width="360px"))
        slider_layout = widgets.Layout(width="520px")
        self.max_tokens = widgets.IntSlider(description="max_tokens", continuous_update=False, min=1, max=10, value=10,
                                            style={"description_width": "130px"}, layout=slider_layout)
        self.keep_recent_tokens = widgets.IntSlider(
            description="keep_recent_tokens",
            continuous_update=False,
            min=1,
            max=10,
            value=5,
            style={"description_width": "130px"},
            layout=slider_layout,
        )
        self.usage = widgets.Dropdown(
            options=[("estimator only", "none"), ("recorded usage", "recorded"), ("synthetic usage", "synthetic")],
            value=self.replay_options.pop("usage", "none"),
            description="usage baseline",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="260px"),
        )
        self.max_tokens.add_class("zl-max-tokens")
        self.keep_recent_tokens.add_class("zl-keep-recent-tokens")
        self.plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.plot.add_class("zl-timeline")
        self.summary_area = widgets.HTML()
        self.steps_area = widgets.HTML()
        self.steps_area.add_class("zl-steps-area")
        self.compaction = widgets.Dropdown(options=[], description="compaction", style={"description_width": "initial"},
                                           layout=widgets.Layout(width="520px"))
        self.compaction_area = widgets.HTML()
        self.manual_step = widgets.BoundedIntText(
            value=0,
            min=0,
            max=0,
            description="compact at step",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="220px"),
        )
        self.compact_button = widgets.Button(description="compact here", icon="compress", button_style="warning",
                                             tooltip="re-run the replay with a manual compaction before this step")
        self.manual_status = widgets.HTML()
        self.manual_plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.manual_area = widgets.HTML()

        self._apply_ranges(self.conversation.value, max_tokens, keep_recent_tokens)
        for control in (self.conversation, self.summarizer, self.usage, self.max_tokens, self.keep_recent_tokens):
            control.observe(self._on_change, names="value")
        self.compaction.observe(self._on_compaction, names="value")
        self.compact_button.on_click(lambda _: self.compact_here())

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
        self.children = [
            widgets.HBox([self.conversation, self.summarizer, self.usage], layout=widgets.Layout(flex_flow="row wrap")),
            widgets.HBox([self.max_tokens, self.keep_recent_tokens], layout=widgets.Layout(flex_flow="row wrap")),
            self.status, self.error_area, self.plot, self.summary_area, self.steps_area, tabs,
        ]
        self.add_class("zl-explorer")
        self.render()

    # --- settings ------------------------------------------------------------------------

    def size(self, conversation_id: str) -> int:
        """Tokens of the whole conversation (the engine's counter), cached."""
        if conversation_id not in self._sizes:
            self._sizes[conversation_id] = int(self.counter(self.conversations[conversation_id].messages))
        return self._sizes[conversation_id]

    def _apply_ranges(
        self, conversation_id: str, max_tokens: int | None = None, keep_recent_tokens: int | None = None
    ) -> None:
        """Slider ranges from the conversation's size (max_tokens up to 110% of it)."""
        total = max(self.size(conversation_id), 100)
        step = _nice_step(total)
        high = _round_to(total * 1.1, step) + step
        if max_tokens is None:
            max_tokens = _round_to(total / 3, step)
        keep_step = max(1, step // 2)
        if keep_recent_tokens is None:
            keep_recent_tokens = _round_to(max_tokens / 4, keep_step)
        with self._suspend():
            _set_range(self.max_tokens, step, max(high, max_tokens), step, max_tokens)
            _set_range(
                self.keep_recent_tokens,
                keep_step,
                max(_round_to(total / 2, keep_step), keep_recent_tokens),
                keep_step,
                keep_recent_tokens,
            )

    def settings(self) -> dict[str, Any]:
        """The current settings as plain values."""
        return {
            "conversation_id": self.conversation.value,
            "summarizer": self.summarizer.value,
            "max_tokens": int(self.max_tokens.value),
            "keep_recent_tokens": int(self.keep_recent_tokens.value),
            "usage": self.usage.value,
        }

    def set(self, **settings: Any) -> Explorer:
        """Change several settings with one render (``explorer.set(max_tokens=..., keep_recent_tokens=...)``)."""
        unknown = set(settings) - {"conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "usage"}
        if unknown:
            raise SettingError(f"unknown setting(s) {sorted(unknown)}")
        with self._suspend():
            if "conversation_id" in settings:
                self.conversation.value = settings["conversation_id"]
                self._apply_ranges(
                    settings["conversation_id"], settings.get("max_tokens"), settings.get("keep_recent_tokens")
                )
            if "summarizer" in settings:
                self.summarizer.value = settings["summarizer"]
            if "usage" in settings:
                self.usage.value = settings["usage"]
            for name in ("max_tokens", "keep_recent_tokens"):
                if name in settings:
                    slider = getattr(self, name)
                    value = int(settings[name])
                    slider.max = max(slider.max, value)
                    slider.min = min(slider.min, value)
                    slider.value = value
        self.render()
        return self

    def _usage_options(self) -> dict[str, Any]:
        usage = self.usage.value
        return {"usage": usage, "on_missing_usage": "estimate"} if usage == "recorded" else {"usage": usage}

    def _on_change(self, change: dict[str, Any]) -> None:
        if self._suspended:
            return
        if change["owner"] is self.conversation:
            self._apply_ranges(change["new"])
        self.render()

    # --- rendering -----------------------------------------------------------------------

    def render(self) -> None:
        """Replay (through the caches) for the current settings and redraw everything."""
        started = time.perf_counter()
        settings = self.settings()
        self.manual_trace = self.manual_losses = None
        self.manual_plot.value = b""
        self.manual_area.value = ""
        self.manual_status.value = '<span class="zl-muted">choose a step and press “compact here” to compare</span>'
        try:
            conversation = self.conversations[settings["conversation_id"]]
            trace, losses, hit = self._run(
                conversation,
                settings["summarizer"],
                settings["max_tokens"],
                settings["keep_recent_tokens"],
                measure=self.measure,
                options=self._usage_options(),
            )
            self.trace, self.losses, self.error = trace, losses, None
            self.plot.value = _draw(self.figure, lambda ax: plots.timeline(trace, ax=ax))
            lost = _lost_count(losses)
            extra = f' <span class="zl-chip">lost but needed anchors: {lost}</span>' if lost is not None else ""
            self.summary_area.value = _summary_html(trace, extra)
            self.steps_area.value = steps_table_html(trace)
            with self._suspend():
                n_steps = max(len(trace.steps), 1)
                self.manual_step.max = n_steps - 1
                options = [
                    (self._compaction_label(row), int(row["compaction_id"])) for _, row in trace.compactions.iterrows()
                ]
                self.compaction.options = options
                self.compaction.value = options[0][1] if options else None
            self._render_compaction()
            self.error_area.value = ""
            elapsed = time.perf_counter() - started
            self.status.value = (
                f'<span class="zl-muted">{"cached" if hit else "replayed"} in {elapsed:.2f} s · '
                f"{len(trace.steps)} steps · {html.escape(str(trace.settings.get('summarizer')))}</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.trace = self.losses = None
            self.plot.value = b""
            self.summary_area.value = self.steps_area.value = self.compaction_area.value = ""
            with self._suspend():
                self.compaction.options = []
            self._fail(error, "replay failed")
        finally:
            self.renders += 1
            self.last_render_seconds = time.perf_counter() - started

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
            self.compaction_area.value = f'{_CSS}<p class="zl-muted">No compaction attempt under these settings.</p>'
            return
        self.compaction_area.value = compaction_html(trace, int(choice), self.losses)

    # --- compact here ----------------------------------------------------------------------

    def compact_here(self, step: int | None = None) -> Any:
        """Re-run the replay with a manual compaction before model ``step`` and show the difference.

        Returns the manual trace (also kept on ``.manual_trace``); errors are shown in place.
        """
        if step is not None:
            with self._suspend():
                self.manual_step.value = int(step)
        step = int(self.manual_step.value)
        settings = self.settings()
        try:
            if self.trace is None:
                raise SettingError("no baseline trace (fix the error above first)")
            conversation = self.conversations[settings["conversation_id"]]
            manual, manual_losses, _ = self._run(
                conversation,
                settings["summarizer"],
                settings["max_tokens"],
                settings["keep_recent_tokens"],
                compact_at=(f"step:{step}",),
                measure=self.measure,
                options=self._usage_options(),
            )
            self.manual_trace, self.manual_losses = manual, manual_losses
            baseline = self.trace

            def draw(axes: Any) -> None:
                plots.timeline(baseline, ax=axes[0], title=f"baseline: {baseline.conversation.id}")
                plots.timeline(manual, ax=axes[1], title=f"with a manual compaction before step {step}")

            self.manual_plot.value = _draw(self.manual_figure, draw, nrows=2)
            self.manual_area.value = manual_diff_html(baseline, manual, self.losses, manual_losses)
            self.manual_status.value = f'<span class="zl-muted">manual compaction before step {step}</span>'
            self.error_area.value = ""
            self.error = None
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.manual_trace = self.manual_losses = None
            self._fail(error, f"compact here (step {step})")
        return self.manual_trace


def _anchors_for(losses: Any, compaction_id: int) -> pd.DataFrame | None:
    anchors = getattr(losses, "anchors", None)
    if not isinstance(anchors, pd.DataFrame):
        return None
    if "compaction_id" in anchors.columns:
        return anchors[anchors["compaction_id"] == compaction_id]
    return anchors


def compaction_html(trace: Any, compaction_id: int, losses: Any = None, max_messages: int = 120) -> str:
    """One compaction: where it happened, the span and the kept tail, the summary, and what was lost."""
    rows = trace.compactions[trace.compactions["compaction_id"] == compaction_id]
    if not len(rows):
        return f'{_CSS}<p class="zl-muted">No compaction #{compaction_id}.</p>'
    row = rows.iloc[0]
    messages = trace.conversation.messages
    outcome = "applied" if bool(row["applied"]) else f"not applied: {row['skip_reason']}"
    facts = {
        "step": row["step"],
        "turn": row["turn"],
        "trigger": row["trigger"],
        "outcome": outcome,
        "span (summarized)": f"messages[{row['span_start']}:{row['span_end']}]"
        if pd.notna(row["span_start"])
        else "no window",
        "kept verbatim": f"messages[{row['span_end']}:{row['n_recorded']}]" if pd.notna(row["span_end"]) else "",
        "older tokens": row["older_tokens"],
        "kept tokens": row["recent_tokens"],
        "summary tokens": row["summary_tokens"],
        "compression": f"{row['compression_ratio']:.1%}" if pd.notna(row["compression_ratio"]) else "",
        "summarizer": row["summarizer"],
        "latency": f"{row['latency_s']:.3f} s" if pd.notna(row["latency_s"]) else "",
        "cache hit": row["cache_hit"],
        "error": row["error"],
    }
    head = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>{_cell(v)}</td></tr>"
        for k, v in facts.items()
        if v is not None and v != ""
    )
    parts = [_CSS, f'<table class="zl-table zl-compaction" data-compaction="{compaction_id}">{head}</table>']

    anchors = _anchors_for(losses, compaction_id)
    lost_values: list[str] = []
    if anchors is not None and len(anchors):
        flags = {
            c: anchors[c].astype("boolean").fillna(False).to_numpy(bool)
            if c in anchors
            else np.zeros(len(anchors), bool)
            for c in ("in_summary", "in_tail", "lost_but_needed")
        }
        lost = anchors[~flags["in_summary"] & ~flags["in_tail"]]
        needed = anchors[flags["lost_but_needed"]]
        lost_values = [str(v) for v in needed["value"]] if "value" in needed else []
        kept = int(flags["in_summary"].sum())
        parts.append(f"<h4>What was lost</h4><p>{len(anchors)} anchors in the span: {kept} in the summary, "
                     f"{int(flags['in_tail'].sum())} also in the kept tail, {len(lost)} no longer visible, "
                     f"<span class='zl-lost'>{len(needed)} lost but needed later</span>.</p>")
        if len(needed):
            chips = " ".join(f'<span class="zl-chip zl-lost" title="{html.escape(str(r.get("type", "")))}">'
                             f'{html.escape(str(r.get("type", "")))}: {html.escape(str(r.get("value", "")))}</span>'
                             for r in needed.to_dict("records")[:200])
            parts.append(f"<p><b>Lost but needed:</b> {chips}</p>")
        other = lost[~lost.index.isin(needed.index)]
        if len(other):
            chips = " ".join(
                f'<span class="zl-chip">{html.escape(str(r.get("type", "")))}: '
                f'{html.escape(str(r.get("value", "")))}</span>'
                for r in other.to_dict("records")[:200]
            )
            parts.append(f"<details><summary>Lost, not needed later ({len(other)})</summary>{chips}</details>")
    elif losses is None:
        parts.append('<p class="zl-muted">Loss metrics unavailable (zett_lab.measure.measure not installed).</p>')
    summary = row["summary_text"]
    if isinstance(summary, str):
        parts.append(f'<h4>Summary</h4><div class="zl-pre zl-summary">{html.escape(summary)}</div>')
    if pd.notna(row["span_start"]):
        start, end, seen = int(row["span_start"]), int(row["span_end"]), int(row["n_recorded"])
        listing = []
        for index in range(start, min(end, start + max_messages)):
            text = html.escape(_message_text(messages[index]))
            for value in lost_values:
                escaped = html.escape(value)
                if escaped and escaped in text:
                    text = text.replace(escaped, f'<span class="zl-lost">{escaped}</span>')
            listing.append(
                f"<tr><td>{index}</td><td>{html.escape(role_of(messages[index]))}</td><td "
                f"style='text-align:left;white-space:normal'>{text}</td></tr>"
            )
        more = f"<p class='zl-muted'>… {end - start - max_messages} more</p>" if end - start > max_messages else ""
        parts.append(
            f"<details><summary>Span: {end - start} summarized messages (lost-but-needed anchors highlighted)</summary>"
            f"<div class='zl-scroll'><table class='zl-table'>{''.join(listing)}</table></div>{more}</details>"
        )
        parts.append(
            f"<p class='zl-muted'>Kept verbatim: {seen - end} messages [{end}:{seen}]; future: {len(messages) - seen} "
            "messages.</p>"
        )
    return "".join(parts)


def manual_diff_html(baseline: Any, manual: Any, baseline_losses: Any = None, manual_losses: Any = None) -> str:
    """Headline figures and compactions of two traces side by side."""
    a, b = baseline.summary(), manual.summary()
    keys = [
        "compactions_applied",
        "rejected_not_smaller",
        "failed",
        "peak_context",
        "total_input_tokens",
        "steps_over_budget",
    ]
    rows = [{"measure": k, "baseline": a[k], "with manual compaction": b[k], "difference": b[k] - a[k]} for k in keys]
    lost_a, lost_b = _lost_count(baseline_losses), _lost_count(manual_losses)
    if lost_a is not None and lost_b is not None:
        rows.append(
            {
                "measure": "lost_but_needed anchors",
                "baseline": lost_a,
                "with manual compaction": lost_b,
                "difference": lost_b - lost_a,
            }
        )
    columns = [
        "compaction_id",
        "step",
        "trigger",
        "span_start",
        "span_end",
        "older_tokens",
        "summary_tokens",
        "applied",
        "skip_reason",
    ]
    return (f"{_CSS}<h4>Difference</h4>{_frame_html(pd.DataFrame(rows))}"
            f"<h4>Compactions: baseline</h4>{_frame_html(baseline.compactions[columns], scroll=True)}"
            f"<h4>Compactions: with manual compaction</h4>{_frame_html(manual.compactions[columns], scroll=True)}")


# --- SweepExplorer -------------------------------------------------------------------------


_ALL = "(all: mean)"


class SweepExplorer(widgets.VBox):
    """A sweep's heatmap for any numeric column, and the timeline of the chosen cell.

    Args:
        sweep: A :class:`zett_lab.study.Sweep` (``.results`` and ``.trace(...)``) or a results
            DataFrame (then pass ``trace=`` to get cell timelines).
        metric: Initial column (default: ``compactions_applied`` when present, else the first
            numeric result column).
        boundaries: Exact decision boundaries to draw: anything :func:`zett_lab.show.plots.heatmap`
            accepts, or a callable ``(explorer) -> boundaries``. With ``"auto"`` (default) a
            checkbox offers :func:`zett_lab.study.decision_boundaries` for the chosen
            conversation and summarizer (one walk along ``max_tokens`` per
            ``keep_recent_tokens`` row; replays, so off until ticked; cached).
        trace: Callable returning the Trace of a cell: ``trace(conversation_id=, summarizer=,
            max_tokens=, keep_recent_tokens=)``; default: ``sweep.trace``.
        conversations: The sweep's conversations (for boundaries), when ``sweep`` does not hold them.

    State: ``metric``, ``conversation``, ``summarizer``, ``cell_max_tokens``,
    ``cell_keep_recent_tokens``, ``show_boundaries`` (controls); ``trace``, ``figure``,
    ``trace_figure``, ``boundaries``, ``error``, ``renders``.
    """

    SETTINGS = ("max_tokens", "keep_recent_tokens")

    def __init__(
        self,
        sweep: Any,
        metric: str | None = None,
        *,
        boundaries: Any = "auto",
        trace: Callable[..., Any] | None = None,
        conversations: Any = None,
        figsize: tuple[float, float] = (7.2, 4.9),
    ) -> None:
        super().__init__()
        results = sweep if isinstance(sweep, pd.DataFrame) else getattr(sweep, "results", None)
        if not isinstance(results, pd.DataFrame):
            raise SettingError(
                f"SweepExplorer needs a Sweep (with .results) or a results DataFrame, got {type(sweep).__name__}"
            )
        if "error" in results.columns and results["error"].notna().all():
            raise SettingError(f"every cell of this sweep failed; first error: {results['error'].dropna().iloc[0]}")
        self.sweep = sweep
        self.results = results
        self._trace_fn = trace if trace is not None else getattr(sweep, "trace", None)
        self._boundaries_source = boundaries
        known = (
            conversations
            if conversations is not None
            else getattr(sweep, "conversations", None) or getattr(sweep, "_conversations", None)
        )
        self._conversations = _conversation_map(known) if known else {}
        self._walks: dict[tuple, list[Any]] = {}
        self.figure = _new_figure(figsize)
        self.trace_figure = _new_figure((10.5, 4.0))
        self.trace: Any = None
        self.boundaries: Any = None
        self.error: BaseException | None = None
        self.renders = 0
        self._suspended = 0

        exclude = {*self.SETTINGS, "step", "compaction_id", "context_window", "max_tokens_share", "keep_recent_share"}
        numeric = [c for c in plots.numeric_columns(results, exclude) if results[c].notna().any()]
        if not numeric:
            raise SettingError(f"sweep results have no numeric column to show; columns: {list(results.columns)}")
        if metric is None:
            metric = "compactions_applied" if "compactions_applied" in numeric else numeric[0]
        if metric not in numeric:
            raise SettingError(f"no numeric column {metric!r}; choose one of {numeric}")
        self.metric = widgets.Dropdown(options=numeric, value=metric, description="metric",
                                       style={"description_width": "initial"}, layout=widgets.Layout(width="340px"))
        conversations_ = (
            list(dict.fromkeys(map(str, results["conversation_id"]))) if "conversation_id" in results else []
        )
        summarizers = list(dict.fromkeys(map(str, results["summarizer"]))) if "summarizer" in results else []
        self.conversation = widgets.Dropdown(
            options=[_ALL, *conversations_] if len(conversations_) > 1 else conversations_ or [_ALL],
            description="conversation",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="340px"),
        )
        self.summarizer = widgets.Dropdown(
            options=[*summarizers, _ALL] if len(summarizers) > 1 else summarizers or [_ALL],
            description="summarizer",
            style={"description_width": "initial"},
        )
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
        self.status = widgets.HTML()
        self.error_area = widgets.HTML()
        self.plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.trace_plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.trace_summary = widgets.HTML()
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

    def select(self, max_tokens: int, keep_recent_tokens: int) -> SweepExplorer:
        """Choose a cell (one render)."""
        with self._hold():
            self.cell_max_tokens.value = int(max_tokens)
            self.cell_keep_recent_tokens.value = int(keep_recent_tokens)
        self.render()
        return self

    @contextmanager
    def _hold(self):
        self._suspended += 1
        try:
            yield
        finally:
            self._suspended -= 1

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._suspended:
            self.render()

    def filtered(self) -> tuple[pd.DataFrame, dict[str, Any]]:
        """The rows the heatmap shows, and the filter applied."""
        where = {}
        if self.summarizer.value != _ALL and "summarizer" in self.results:
            where["summarizer"] = self.summarizer.value
        if self.conversation.value != _ALL and "conversation_id" in self.results:
            where["conversation_id"] = self.conversation.value
        data = self.results
        for key, value in where.items():
            data = data[data[key].astype(str) == value]
        return data, where

    def _boundaries(self) -> Any:
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
        if conversation == _ALL or summarizer == _ALL:
            raise SettingError("exact boundaries are per conversation and summarizer: choose one of each")
        if conversation not in self._conversations:
            raise SettingError("this sweep does not hold its conversations; pass conversations= to draw boundaries")
        xs = sorted(int(v) for v in self.results["max_tokens"].unique())
        ys = sorted(int(v) for v in self.results["keep_recent_tokens"].unique())
        key = (conversation, summarizer, xs[0], xs[-1], tuple(ys))
        if key not in self._walks:
            from ..study.boundaries import decision_boundaries

            options = dict(getattr(self.sweep, "config", {}).get("replay_options") or {})
            options = {
                k: v
                for k, v in options.items()
                if k in ("usage", "usage_overhead", "on_missing_usage", "reasoning_effort")
            }
            self.status.value = (
                '<span class="zl-muted">⏳ computing… walking max_tokens for exact decision boundaries</span>'
            )
            self._walks[key] = [
                decision_boundaries(self._conversations[conversation], summarizer, keep_recent_tokens=k,
                                    max_tokens_range=(xs[0], xs[-1]), progress=False, **options)
                for k in ys
            ]
        return self._walks[key]

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
                self.error_area.value = _error_html(error, "decision boundaries")
            title = metric + (f"\n{', '.join(f'{k}={v}' for k, v in where.items())}" if where else "")
            self.plot.value = _draw(
                self.figure,
                lambda ax: plots.heatmap(data, metric, ax=ax, boundaries=self.boundaries, highlight=cell, title=title),
                margins="heatmap",
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.error = error
            self.error_area.value = _error_html(error, "heatmap")
            return
        self._render_cell(*cell)

    def _render_cell(self, max_tokens: int, keep_recent_tokens: int) -> None:
        self.trace = None
        self.trace_plot.value = b""
        self.trace_summary.value = ""
        if self._trace_fn is None:
            self.status.value = '<span class="zl-muted">no trace source: pass trace= to show a cell\'s timeline</span>'
            return
        conversation = self.conversation.value
        if conversation == _ALL:
            conversation = str(self.results["conversation_id"].iloc[0]) if "conversation_id" in self.results else None
        summarizer = self.summarizer.value if self.summarizer.value != _ALL else (
            str(self.results["summarizer"].iloc[0]) if "summarizer" in self.results else None)
        try:
            kwargs: dict[str, Any] = {"max_tokens": int(max_tokens), "keep_recent_tokens": int(keep_recent_tokens)}
            if conversation is not None:
                kwargs["conversation_id"] = conversation
            if summarizer is not None:
                kwargs["summarizer"] = summarizer
            trace = self._trace_fn(**kwargs)
            self.trace = trace
            self.trace_plot.value = _draw(self.trace_figure, lambda ax: plots.timeline(trace, ax=ax))
            self.trace_summary.value = _summary_html(trace)
            self.status.value = (
                f'<span class="zl-muted">cell below: {html.escape(str(conversation))} · '
                f'{html.escape(str(summarizer))} · '
                f"max_tokens={max_tokens:,} · keep_recent_tokens={keep_recent_tokens:,}</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.error = error
            self.error_area.value += _error_html(error, "cell trace")
            self.status.value = ""


# --- Comparison ----------------------------------------------------------------------------


class Comparison(_Base):
    """Several summarizers on the same compactions, side by side.

    The first summarizer is replayed with the engine deciding (``max_tokens``,
    ``keep_recent_tokens``); the steps where it applied a compaction are then forced
    (``compact_at=["step:N", ...]``, with automatic compaction out of reach) for every
    summarizer, so each one summarizes the same spans at the same moments (a paired
    comparison). Shows a table of summaries per compaction and per-summarizer metrics.

    State: ``reference`` (the engine-decided trace), ``traces`` and ``losses`` (by
    summarizer), ``table`` (one row per compaction and summarizer), ``metrics`` (one row
    per summarizer), ``comparison`` (:func:`zett_lab.measure.compare` over the shared
    compactions: means with bootstrap CIs, pairwise tests), ``figure``, ``error``;
    controls ``conversation``, ``max_tokens``, ``keep_recent_tokens``.
    """

    #: max_tokens used in the paired replays, so only the forced compactions happen.
    UNREACHABLE = 10**12

    def __init__(
        self,
        conversations: Any,
        summarizers: Any = None,
        max_tokens: int | None = None,
        keep_recent_tokens: int | None = None,
        *,
        cache: Any = None,
        count_tokens: Any = None,
        replay_options: Mapping[str, Any] | None = None,
        measure: bool = True,
        text_chars: int = 600,
        plot_metrics: Sequence[str] = (
            "compression_ratio",
            "anchor_retention",
            "needed_anchor_recall",
            "instruction_survival",
        ),
    ) -> None:
        super().__init__(
            summarizers=summarizers, cache=cache, count_tokens=count_tokens, lru_size=64, replay_options=replay_options
        )
        self.conversations = _conversation_map(conversations)
        self.measure = measure
        self.text_chars = text_chars
        self.reference: Any = None
        self.traces: dict[str, Any] = {}
        self.losses: dict[str, Any] = {}
        self.table: pd.DataFrame | None = None
        self.metrics: pd.DataFrame | None = None
        first = next(iter(self.conversations.values()))
        total = max(int(self.counter(first.messages)), 100)
        step = _nice_step(total)
        max_tokens = int(max_tokens) if max_tokens is not None else _round_to(total / 3, step)
        keep_recent_tokens = (
            int(keep_recent_tokens) if keep_recent_tokens is not None else _round_to(max_tokens / 4, max(1, step // 2))
        )
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
        self.comparison: Any = None
        self.plot_metrics = tuple(plot_metrics)
        self.figure = _new_figure((8.0, 1.6 + 0.55 * len(self._labels)))
        self.plot = widgets.Image(format="png", layout=widgets.Layout(max_width="100%"))
        self.metrics_area = widgets.HTML()
        self.table_area = widgets.HTML()
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
        ]
        self.add_class("zl-comparison")
        self.render()

    @property
    def summarizers(self) -> list[str]:
        return list(self._labels)

    def _on_change(self, change: dict[str, Any]) -> None:
        if not self._suspended:
            self.render()

    def render(self) -> None:
        """Replay the reference, then every summarizer on its compaction steps; rebuild the tables."""
        started = time.perf_counter()
        self.renders += 1
        try:
            conversation = self.conversations[self.conversation.value]
            labels = list(self._labels)
            max_tokens, keep = int(self.max_tokens.value), int(self.keep_recent_tokens.value)
            reference, _, _ = self._run(conversation, labels[0], max_tokens, keep, measure=False)
            applied = (
                reference.compactions[plots._bools(reference.compactions["applied"])]
                if len(reference.compactions)
                else reference.compactions
            )
            compact_at = tuple(f"step:{int(s)}" for s in sorted(set(applied["step"].tolist()))) if len(applied) else ()
            traces, losses = {}, {}
            for label in labels:
                if compact_at:
                    traces[label], losses[label], _ = self._run(
                        conversation, label, self.UNREACHABLE, keep, compact_at=compact_at, measure=self.measure
                    )
            self.reference, self.traces, self.losses = reference, traces, losses
            self.table = self._table(traces)
            self.metrics = self._metrics(traces, losses)
            self.comparison = self._paired_stats(losses)
            if self.comparison is not None:
                self.plot.value = _draw(
                    self.figure,
                    lambda ax: plots.summarizer_comparison(
                        self.comparison,
                        ax=ax,
                        metrics=self.plot_metrics,
                        title=(
                            f"Paired over {len(compact_at)} compactions ({self.conversation.value}): "
                            "means with 95% bootstrap CIs"
                        ),
                    ),
                    margins="comparison",
                )
            else:
                self.plot.value = b""
            self.error, self.error_area.value = None, ""
            self.metrics_area.value = (
                f"{_CSS}<h4>Per summarizer</h4>{_frame_html(self.metrics)}" if len(self.metrics) else ""
            )
            self.table_area.value = self._table_html()
            self.status.value = (
                f'<span class="zl-muted">{len(compact_at)} compaction points from {html.escape(labels[0])} '
                f"(engine-decided); {len(labels)} summarizers in {time.perf_counter() - started:.2f} s</span>"
            )
        except Exception as error:  # noqa: BLE001 - shown in place, kept on .error
            self.reference, self.traces, self.losses, self.table, self.metrics, self.comparison = (
                None,
                {},
                {},
                None,
                None,
                None,
            )
            self.metrics_area.value = self.table_area.value = ""
            self.plot.value = b""
            self._fail(error, "comparison failed")

    def _paired_stats(self, losses: Mapping[str, Any]) -> Any:
        """Paired statistics (``zett_lab.measure.compare``) over the shared compactions, when available."""
        if not losses or any(value is None for value in losses.values()):
            return None
        try:
            from ..measure import compare
        except ImportError:
            return None
        return compare(dict(losses), level="compaction", seed=0)

    @staticmethod
    def _table(traces: Mapping[str, Any]) -> pd.DataFrame:
        frames = []
        for label, trace in traces.items():
            rows = trace.compactions.copy()
            rows.insert(0, "summarizer_label", label)
            frames.append(rows)
        columns = [
            "summarizer_label",
            "compaction_id",
            "step",
            "span_start",
            "span_end",
            "older_tokens",
            "summary_tokens",
            "compression_ratio",
            "applied",
            "skip_reason",
            "latency_s",
            "summary_text",
        ]
        if not frames:
            return pd.DataFrame(columns=columns).rename(columns={"summarizer_label": "summarizer"})
        return pd.concat(frames, ignore_index=True)[columns].rename(columns={"summarizer_label": "summarizer"})

    @staticmethod
    def _metrics(traces: Mapping[str, Any], losses: Mapping[str, Any]) -> pd.DataFrame:
        rows = []
        for label, trace in traces.items():
            c = trace.compactions
            applied = plots._bools(c["applied"]) if len(c) else np.zeros(0, bool)
            row = {
                "summarizer": label,
                "compactions": len(c),
                "applied": int(applied.sum()),
                "mean_summary_tokens": float(pd.to_numeric(c["summary_tokens"], errors="coerce").mean())
                if len(c)
                else np.nan,
                "mean_compression": float(c["compression_ratio"].mean()) if len(c) else np.nan,
                "total_latency_s": float(c["latency_s"].sum()) if len(c) else 0.0,
            }
            anchors = getattr(losses.get(label), "anchors", None)
            if isinstance(anchors, pd.DataFrame) and len(anchors):
                def flag(name: str, anchors: pd.DataFrame = anchors) -> pd.Series:
                    if name not in anchors:
                        return pd.Series(False, index=anchors.index)
                    return anchors[name].astype("boolean").fillna(False)

                needed = flag("needed_later") & ~flag("in_tail")
                row["anchor_retention"] = float(flag("in_summary").mean())
                row["needed_anchor_recall"] = float(flag("in_summary")[needed].mean()) if needed.any() else np.nan
                row["lost_but_needed"] = int(flag("lost_but_needed").sum())
            rows.append(row)
        return pd.DataFrame(rows)

    def _table_html(self) -> str:
        table = self.table
        if table is None or not len(table):
            return (
                f'{_CSS}<p class="zl-muted">The reference summarizer applied no compaction under these settings: '
                'nothing to compare.</p>'
            )
        labels = list(dict.fromkeys(table["summarizer"]))
        head = "<th>compaction</th>" + "".join(f"<th>{html.escape(label)}</th>" for label in labels)
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
                ratio = f"{r['compression_ratio']:.1%}" if pd.notna(r["compression_ratio"]) else ""
                cells.append(
                    f"<td style='text-align:left;vertical-align:top;white-space:normal;min-width:220px'>"
                    f"<b>{_cell(r['summary_tokens'])} tok</b> · {ratio} · {status}"
                    f"<div class='zl-pre'>{html.escape(short)}</div></td>"
                )
            body.append(f"<tr><td style='vertical-align:top'>{where}</td>{''.join(cells)}</tr>")
        return (
            f"{_CSS}<h4>Summaries per compaction (same spans for every summarizer)</h4>"
            "<div class='zl-scroll' style='max-height:600px'><table class='zl-table "
            f"zl-comparison-table'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>"
        )
