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
import math
import re
from typing import Any

import pandas as pd

WIDTH, HEIGHT = 760, 230
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 12, 12, 30

#: Colours (shape and dash style carry the same information, so it reads in black and white).
_LINE = "#1f3a68"
_ESTIMATE = "#8aa1c9"
_LIMIT = "#cc3311"
_KEEP = "#555555"
_APPLIED = "#228833"
_REJECTED = "#ee7733"
_NOWINDOW = "#aa3377"


def _nice_step(span: float, ticks: int = 4) -> float:
    raw = span / max(ticks, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * magnitude:
            return factor * magnitude
    return 10 * magnitude


def tokens_label(value: float) -> str:
    """``12000`` -> ``12k``, ``1500`` -> ``1.5k``, ``800`` -> ``800``."""
    value = float(value)
    if abs(value) >= 1_000_000:
        text = f"{value / 1_000_000:.1f}".rstrip("0").rstrip(".")
        return f"{text}M"
    if abs(value) >= 1000:
        text = f"{value / 1000:.1f}".rstrip("0").rstrip(".")
        return f"{text}k"
    return f"{value:.0f}"


def _num(value: Any) -> float | None:
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return float(value)


def mini_timeline(steps: pd.DataFrame, max_tokens: int, keep_recent_tokens: int, *, label: str = "") -> str:
    """A compact SVG of one replay: estimate and context sent per step, limits, compaction outcomes.

    ``steps`` is ``Trace.steps``. Only numbers and fixed words are drawn; ``label`` must be
    plain text (it is escaped anyway).
    """
    n = len(steps)
    estimates = [_num(v) for v in steps["estimate"]] if n else []
    sent = [_num(v) for v in steps["context_tokens_after"]] if n else []
    peak = max([v for v in estimates + sent if v is not None] + [max_tokens, 1])
    top = peak * 1.08
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(i: float) -> float:
        return _LEFT + (plot_w * (i + 0.5) / n if n else 0)

    def y(v: float) -> float:
        return _TOP + plot_h * (1 - v / top)

    def fmt(v: float) -> str:
        return f"{v:.1f}".rstrip("0").rstrip(".")

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{html.escape(label or "context timeline", quote=True)}" class="zl-mini">'
    ]
    # axes and y ticks
    step = _nice_step(top)
    value = 0.0
    while value <= top:
        yy = fmt(y(value))
        parts.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{yy}" y2="{yy}" stroke="#e4e4e4" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{_LEFT - 6}" y="{yy}" text-anchor="end" dominant-baseline="middle" '
            f'font-size="10">{tokens_label(value)}</text>'
        )
        value += step
    parts.append(
        f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{HEIGHT - _BOTTOM}" stroke="#444" stroke-width="1"/>'
        f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{HEIGHT - _BOTTOM}" y2="{HEIGHT - _BOTTOM}" stroke="#444" '
        'stroke-width="1"/>'
    )
    # x ticks: steps
    if n:
        xstep = max(1, int(_nice_step(n, 8)))
        for i in range(0, n, xstep):
            parts.append(
                f'<text x="{fmt(x(i))}" y="{HEIGHT - _BOTTOM + 13}" text-anchor="middle" font-size="10">{i}</text>'
            )
    parts.append(
        f'<text x="{WIDTH - _RIGHT}" y="{HEIGHT - 3}" text-anchor="end" font-size="10">model step</text>'
        f'<text x="{_LEFT + 4}" y="{_TOP + 10}" font-size="10" fill="#444">tokens</text>'
    )
    # limits
    ym = fmt(y(max_tokens))
    parts.append(
        f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{ym}" y2="{ym}" stroke="{_LIMIT}" stroke-width="1.4" '
        'stroke-dasharray="7 3 2 3"/>'
        f'<text x="{WIDTH - _RIGHT - 2}" y="{fmt(y(max_tokens) - 4)}" text-anchor="end" font-size="10" '
        f'fill="{_LIMIT}">max_tokens {tokens_label(max_tokens)}</text>'
    )
    if keep_recent_tokens < top:
        yk = fmt(y(keep_recent_tokens))
        parts.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{yk}" y2="{yk}" stroke="{_KEEP}" stroke-width="1" '
            'stroke-dasharray="2 3"/>'
            f'<text x="{WIDTH - _RIGHT - 2}" y="{fmt(y(keep_recent_tokens) - 4)}" text-anchor="end" font-size="10" '
            f'fill="{_KEEP}">keep_recent_tokens {tokens_label(keep_recent_tokens)}</text>'
        )
    if n:
        # over-budget steps: one band per run of consecutive steps, along the x axis
        over = (
            steps["over_budget_after"].fillna(False).astype(bool).tolist()
            if "over_budget_after" in steps
            else [False] * n
        )
        width = plot_w / n
        i = 0
        while i < n:
            if not over[i]:
                i += 1
                continue
            j = i
            while j + 1 < n and over[j + 1]:
                j += 1
            parts.append(
                f'<rect x="{fmt(x(i) - width / 2)}" y="{HEIGHT - _BOTTOM - 6}" width="{fmt(width * (j - i + 1))}" '
                'height="6" '
                f'fill="{_LIMIT}" opacity="0.55"><title>steps {i}-{j} sent over max_tokens</title></rect>'
            )
            i = j + 1
        # sawtooth: estimate before the check, then context sent
        points = []
        for i in range(n):
            before = estimates[i] if estimates[i] is not None else sent[i]
            after = sent[i] if sent[i] is not None else before
            if before is None:
                continue
            points.append(f"{fmt(x(i))},{fmt(y(before))}")
            if after is not None and after != before:
                points.append(f"{fmt(x(i))},{fmt(y(after))}")
        parts.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{_LINE}" stroke-width="1.6"/>')
        # outcome markers: one path per outcome
        applied = steps["applied"].fillna(False).astype(bool).tolist()
        reasons = steps["skip_reason"].tolist()
        triggered = steps["triggered"].fillna(False).astype(bool).tolist()
        shapes: dict[str, list[str]] = {"applied": [], "rejected": [], "failed": [], "nowindow": []}
        for i in range(n):
            before = estimates[i] if estimates[i] is not None else sent[i]
            if before is None:
                continue
            cx, cy = x(i), y(before)
            if applied[i]:
                shapes["applied"].append(f"M{fmt(cx - 5)},{fmt(cy - 9)}h10l-5,8z")
            elif triggered[i] and reasons[i] == "summary not smaller":
                shapes["rejected"].append(f"M{fmt(cx - 4)},{fmt(cy - 4)}l8,8m0,-8l-8,8")
            elif triggered[i] and reasons[i] == "summary failed":
                shapes["failed"].append(f"M{fmt(cx - 4)},{fmt(cy - 4)}h8v8h-8z")
            elif reasons[i] in ("no whole-turn boundary", "only earlier checkpoints"):
                shapes["nowindow"].append(f"M{fmt(cx)},{fmt(cy - 6)}v12")
        styles = {
            "applied": (f'fill="{_APPLIED}" stroke="#222" stroke-width="0.6"', "compaction applied"),
            "rejected": (f'fill="none" stroke="{_REJECTED}" stroke-width="2.2"', "rejected: summary not smaller"),
            "failed": (f'fill="{_LIMIT}"', "summary failed"),
            "nowindow": (
                f'fill="none" stroke="{_NOWINDOW}" stroke-width="2"',
                "over the threshold, nothing to summarize",
            ),
        }
        for name, paths in shapes.items():
            if paths:
                style, title = styles[name]
                parts.append(
                    f'<path class="zl-{name}" d="{"".join(paths)}" {style}><title>{title} ({len(paths)})</title></path>'
                )
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
