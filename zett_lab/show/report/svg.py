"""Small hand-written SVG for the report: a compact context timeline per grid cell, and inlining helpers.

The explorer in the HTML report switches between one timeline per sweep cell, so each must be
a few kilobytes: :func:`mini_timeline` draws only numbers and fixed labels (no conversation
text ever reaches it), with integer-rounded coordinates, so the same trace gives the same bytes.
:func:`inline_svg` prepares a matplotlib SVG (from :func:`zett_lab.show.plots.to_svg`) for inlining
in an HTML page: it drops the XML prolog and prefixes every id, so several figures on one page
never share an id.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from ...formatting import compact
from ...replay.schema import FAILURE_REASONS, NO_WINDOW_REASONS, NOT_SMALLER, SUMMARY_FAILED
from ..plots.base import NO_WINDOW_OUTCOME, OUTCOME_STYLES

WIDTH, HEIGHT = 760, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 12, 12, 30

#: Colours (shape and dash style carry the same information, so it reads in black and white).
_LINE = "#1f3a68"
_LIMIT = "#cc3311"
_KEEP = "#555555"
_APPLIED = "#228833"
_REJECTED = "#ee7733"
_NOWINDOW = "#aa3377"

#: Outcome markers: SVG style, tooltip (the outcome's label in the timeline figure's legend) and legend symbol.
_MARKERS = {
    "applied": (
        f'fill="{_APPLIED}" stroke="#222" stroke-width="0.6"',
        OUTCOME_STYLES["applied"]["label"],
        "▼",
    ),
    "rejected": (
        f'fill="none" stroke="{_REJECTED}" stroke-width="2.2"',
        OUTCOME_STYLES[NOT_SMALLER]["label"],
        "✕",
    ),
    "failed": (f'fill="{_LIMIT}"', OUTCOME_STYLES[SUMMARY_FAILED]["label"], "■"),
    "nowindow": (
        f'fill="none" stroke="{_NOWINDOW}" stroke-width="2"',
        OUTCOME_STYLES[NO_WINDOW_OUTCOME]["label"],
        "|",
    ),
}


def marker_legend() -> list[tuple[str, str]]:
    """Each outcome marker of :func:`mini_timeline`: its symbol and the words of its tooltip."""
    return [(symbol, title) for _, title, symbol in _MARKERS.values()]


_STEPS = [1, 2, 2.5, 5, 10]


def _nums(column: pd.Series) -> list[float | None]:
    """A numeric column's values as floats, None where missing (thousands of steps per replay: at once)."""
    return [None if v != v else v for v in column.to_numpy(dtype=float, na_value=np.nan).tolist()]


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


class _Scale:
    """Steps on x (one slot per step) and tokens on y (0 to ``top``), in SVG coordinates."""

    def __init__(self, steps: int, top: float) -> None:
        self.steps, self.top = steps, top
        self.width, self.height = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(self, step: float) -> float:
        return _LEFT + (self.width * (step + 0.5) / self.steps if self.steps else 0)

    def y(self, tokens: float) -> float:
        return _TOP + self.height * (1 - tokens / self.top)


def _line(x1: object, x2: object, y1: object, y2: object, style: str) -> str:
    return f'<line x1="{x1}" x2="{x2}" y1="{y1}" y2="{y2}" {style}/>'


def _text(x: object, y: object, text: str, style: str) -> str:
    return f'<text x="{x}" y="{y}" {style}>{text}</text>'


def _axes(scale: _Scale) -> list[str]:
    """Grid lines and token labels on y, step numbers on x, axis lines and titles."""
    parts = []
    for value in MaxNLocator(nbins=4, steps=_STEPS).tick_values(0, scale.top):
        if 0 <= value <= scale.top:
            yy = _fmt(scale.y(value))
            parts.append(_line(_LEFT, WIDTH - _RIGHT, yy, yy, 'stroke="#e4e4e4" stroke-width="1"'))
            parts.append(
                _text(_LEFT - 6, yy, compact(value), 'text-anchor="end" dominant-baseline="middle" font-size="10"')
            )
    axis = 'stroke="#444" stroke-width="1"'
    parts.append(
        _line(_LEFT, _LEFT, _TOP, HEIGHT - _BOTTOM, axis)
        + _line(_LEFT, WIDTH - _RIGHT, HEIGHT - _BOTTOM, HEIGHT - _BOTTOM, axis)
    )
    if scale.steps:
        for i in MaxNLocator(nbins=8, steps=_STEPS, integer=True).tick_values(0, scale.steps):
            if 0 <= i < scale.steps:
                parts.append(
                    _text(_fmt(scale.x(i)), HEIGHT - _BOTTOM + 13, str(int(i)), 'text-anchor="middle" font-size="10"')
                )
    parts.append(
        _text(WIDTH - _RIGHT, HEIGHT - 3, "model step", 'text-anchor="end" font-size="10"')
        + _text(_LEFT + 4, _TOP + 10, "tokens", 'font-size="10" fill="#444"')
    )
    return parts


def _limits(scale: _Scale, max_tokens: int, keep_recent_tokens: int) -> list[str]:
    """The ``max_tokens`` line and, when it fits, the ``keep_recent_tokens`` line."""
    ym = _fmt(scale.y(max_tokens))
    parts = [
        _line(_LEFT, WIDTH - _RIGHT, ym, ym, f'stroke="{_LIMIT}" stroke-width="1.4" stroke-dasharray="7 3 2 3"')
        + _text(
            WIDTH - _RIGHT - 2,
            _fmt(scale.y(max_tokens) - 4),
            f"max_tokens {compact(max_tokens)}",
            f'text-anchor="end" font-size="10" fill="{_LIMIT}"',
        )
    ]
    if keep_recent_tokens < scale.top:
        yk = _fmt(scale.y(keep_recent_tokens))
        parts.append(
            _line(_LEFT, WIDTH - _RIGHT, yk, yk, f'stroke="{_KEEP}" stroke-width="1" stroke-dasharray="2 3"')
            + _text(
                WIDTH - _RIGHT - 2,
                _fmt(scale.y(keep_recent_tokens) - 4),
                f"keep_recent_tokens {compact(keep_recent_tokens)}",
                f'text-anchor="end" font-size="10" fill="{_KEEP}"',
            )
        )
    return parts


def _over_budget(scale: _Scale, over: list[bool]) -> list[str]:
    """One band along the x axis per run of consecutive steps sent over ``max_tokens``."""
    parts, width, n, i = [], scale.width / scale.steps, scale.steps, 0
    while i < n:
        if not over[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and over[j + 1]:
            j += 1
        parts.append(
            f'<rect x="{_fmt(scale.x(i) - width / 2)}" y="{HEIGHT - _BOTTOM - 6}" '
            f'width="{_fmt(width * (j - i + 1))}" height="6" '
            f'fill="{_LIMIT}" opacity="0.55"><title>steps {i}-{j} sent over max_tokens</title></rect>'
        )
        i = j + 1
    return parts


def _sawtooth(scale: _Scale, before: list[float | None], sent: list[float | None]) -> str:
    """The estimate before the check at each step, dropping to the context sent."""
    points = []
    for i, (estimate, after) in enumerate(zip(before, sent, strict=True)):
        if estimate is None:
            continue
        points.append(f"{_fmt(scale.x(i))},{_fmt(scale.y(estimate))}")
        if after is not None and after != estimate:
            points.append(f"{_fmt(scale.x(i))},{_fmt(scale.y(after))}")
    return f'<polyline points="{" ".join(points)}" fill="none" stroke="{_LINE}" stroke-width="1.6"/>'


def _markers(scale: _Scale, steps: pd.DataFrame, before: list[float | None]) -> list[str]:
    """One path per compaction outcome: applied ▼, rejected ✕, failed ■, nothing to summarize |."""
    applied = steps["applied"].fillna(False).astype(bool).tolist()
    triggered = steps["triggered"].fillna(False).astype(bool).tolist()
    shapes: dict[str, list[str]] = {name: [] for name in _MARKERS}
    for i, (reason, estimate) in enumerate(zip(steps["skip_reason"].tolist(), before, strict=True)):
        if estimate is None:
            continue
        cx, cy = scale.x(i), scale.y(estimate)
        if applied[i]:
            shapes["applied"].append(f"M{_fmt(cx - 5)},{_fmt(cy - 9)}h10l-5,8z")
        elif triggered[i] and reason == NOT_SMALLER:
            shapes["rejected"].append(f"M{_fmt(cx - 4)},{_fmt(cy - 4)}l8,8m0,-8l-8,8")
        elif triggered[i] and reason in FAILURE_REASONS:
            shapes["failed"].append(f"M{_fmt(cx - 4)},{_fmt(cy - 4)}h8v8h-8z")
        elif reason in NO_WINDOW_REASONS:
            shapes["nowindow"].append(f"M{_fmt(cx)},{_fmt(cy - 6)}v12")
    out = []
    for name, paths in shapes.items():
        style, title, _ = _MARKERS[name]
        if paths:
            out.append(
                f'<path class="zl-{name}" d="{"".join(paths)}" {style}><title>{title} ({len(paths)})</title></path>'
            )
    return out


def mini_timeline(steps: pd.DataFrame, max_tokens: int, keep_recent_tokens: int, *, label: str = "") -> str:
    """A compact SVG of one replay: estimate and context sent per step, limits, compaction outcomes.

    ``steps`` is ``Trace.steps``. Only numbers and fixed words are drawn; ``label`` must be
    plain text (it is escaped anyway).
    """
    n = len(steps)
    estimates = _nums(steps["estimate"]) if n else []
    sent = _nums(steps["context_tokens_after"]) if n else []
    peak = max([v for v in estimates + sent if v is not None] + [max_tokens, 1])
    scale = _Scale(n, peak * 1.08)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{html.escape(label or "context timeline", quote=True)}" class="zl-mini">',
        *_axes(scale),
        *_limits(scale, max_tokens, keep_recent_tokens),
    ]
    if n:
        over = (
            steps["over_budget_after"].fillna(False).astype(bool).tolist()
            if "over_budget_after" in steps
            else [False] * n
        )
        before = [e if e is not None else s for e, s in zip(estimates, sent, strict=True)]
        after = [s if s is not None else b for s, b in zip(sent, before, strict=True)]
        parts += [*_over_budget(scale, over), _sawtooth(scale, before, after), *_markers(scale, steps, before)]
    else:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle" font-size="12">no model steps</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


_PROLOG = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')


def inline_svg(svg: str, prefix: str) -> str:
    """A matplotlib SVG ready to inline: no prolog or metadata, every id prefixed with ``prefix``."""
    svg = _PROLOG.sub("", svg, count=1)
    svg = _METADATA.sub("", svg)
    svg = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', svg)
    svg = _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)
    # Scale to the page width while keeping the aspect ratio.
    svg = re.sub(r'<svg([^>]*?)\swidth="([\d.]+)pt"\sheight="([\d.]+)pt"', _responsive, svg, count=1)
    return svg.strip()


def _responsive(match: re.Match[str]) -> str:
    width, height = float(match.group(2)), float(match.group(3))
    return f'<svg{match.group(1)} width="{width:g}pt" height="{height:g}pt" style="max-width:100%;height:auto"'
