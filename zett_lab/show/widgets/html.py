"""HTML the widgets show: the step table, one step's decision, one compaction, differences; one stylesheet.

Every builder takes results (a :class:`~zett_lab.replay.trace.Trace`, its
:class:`~zett_lab.measure.losses.Losses`) and returns an HTML string; conversation text is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from ...formatting import decimal, percent
from ...load.conversation import role_of
from ...load.text import message_text
from ...measure import Losses
from ...measure.catalogue import CATALOGUE, label
from ...records import flags, is_missing
from ...replay.schema import (
    COMPACTION_SUMMARY_COLUMNS,
    FAILURE_REASONS,
    NO_WINDOW_REASONS,
    NOT_SMALLER,
    SKIP_REASON_MEANINGS,
    STEP_DETAIL_COLUMNS,
)
from ...replay.trace import Trace
from ...study.session import live_description
from ..report.content import definition
from ..tables import CSS, cell, column_head, frame_html


def error_html(error: BaseException, where: str) -> str:
    text = f"{where}: {type(error).__name__}: {error}"
    return f'{CSS}<div class="zl-error">{html.escape(text)}</div>'


def steps_table_html(trace: Trace, columns: Sequence[str] = STEP_DETAIL_COLUMNS, max_rows: int | None = None) -> str:
    """The step table as HTML, rows tinted by what happened (applied, over budget, no window, rejected)."""
    steps = trace.steps
    columns = [c for c in columns if c in steps.columns]
    data = steps if max_rows is None else steps.head(max_rows)
    records = data[columns].astype("object").to_numpy()
    applied = flags(data["applied"])
    over = flags(data["over_budget_after"])
    reason = data["skip_reason"].astype("object").to_numpy()
    rows = []
    for i, record in enumerate(records):
        if applied[i]:
            css = "zl-applied"
        elif reason[i] == NOT_SMALLER or reason[i] in FAILURE_REASONS:
            css = "zl-rejected"
        elif reason[i] in NO_WINDOW_REASONS:
            css = "zl-nowindow"
        elif over[i]:
            css = "zl-over"
        else:
            css = ""
        cells = "".join(f"<td>{cell(v)}</td>" for v in record)
        rows.append(f'<tr class="{css}">{cells}</tr>')
    head = "".join(column_head(c) for c in columns)
    legend = "rows: " + " · ".join(
        f'<span style="background:{colour}" title="{html.escape(definition(term) or "")}">{words}</span>'
        for colour, words, term in (
            ("#e3f2e1", "applied", "compaction applied"),
            ("#fdebd3", "rejected/failed", NOT_SMALLER),
            ("#f1e0ec", "threshold crossed, no window", "threshold crossed, no window"),
            ("#fbe3dd", "sent over budget", "steps_over_budget"),
        )
    )
    legend = f'<div class="zl-muted" style="font-size:11px">{legend} (hover for what each means)</div>'
    settings = trace.settings
    caption = (
        f"<b>{len(steps)} steps</b> of {html.escape(str(getattr(trace.conversation, 'id', '')))} at "
        f"max_tokens={cell(settings.max_tokens)}, keep_recent_tokens={cell(settings.keep_recent_tokens)}"
        f" · {html.escape(settings.summarizer)}"
    )
    return (
        f'{CSS}<div class="zl-steps-caption">{caption}</div>{legend}<div class="zl-scroll">'
        f'<table class="zl-table zl-steps" data-steps="{len(steps)}" data-max-tokens="{settings.max_tokens}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def live_summary_html(trace: Trace | None) -> str:
    """One line of a live run's figures, shown above the what-if replay's ('' without a live trace)."""
    if trace is None:
        return ""
    summary = trace.summary()
    keys = ("steps", "compactions_applied", "peak_context", "steps_over_budget")
    chips = _chips(summary, keys)
    described = html.escape(live_description(trace))
    return f"{CSS}<div><b>live</b> ({described}): {chips}</div><div><b>what-if</b>:</div>"


def chip(name: str, value: object) -> str:
    """One headline figure, named in words (a metric's catalogue label, else the name with spaces, capitalized)
    with its definition on hover where the glossary has one."""
    words = label(name) if name in CATALOGUE else name.replace("_", " ").capitalize()
    meaning = definition(name)
    title = f' title="{html.escape(meaning)}"' if meaning else ""
    return f'<span class="zl-chip"{title}>{html.escape(words)}: {cell(value)}</span>'


def _chips(summary: Mapping[str, Any], keys: Sequence[str]) -> str:
    """Headline figures as chips."""
    return " ".join(chip(k, summary.get(k)) for k in keys)


def summary_html(trace: Trace, extra: str = "") -> str:
    """Headline figures of a trace as chips."""
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
    chips = _chips(summary, keys)
    return f"{CSS}<div>{chips}{extra}</div>"


def short_text(message: object, limit: int = 240) -> str:
    """One line of a message's text (content and tool-call arguments), at most ``limit`` characters."""
    text = " ".join(message_text(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lost_count(losses: Losses | None) -> int | None:
    """Lost-but-needed anchors over applied compactions."""
    anchors = getattr(losses, "anchors", None)
    if isinstance(anchors, pd.DataFrame) and "lost_but_needed" in anchors:
        lost = flags(anchors["lost_but_needed"])
        if "applied" in anchors:
            lost &= flags(anchors["applied"])
        return int(lost.sum())
    return None


def _anchors_for(losses: Losses | None, compaction_id: int) -> pd.DataFrame | None:
    anchors = getattr(losses, "anchors", None)
    if not isinstance(anchors, pd.DataFrame):
        return None
    if "compaction_id" in anchors.columns:
        return anchors[anchors["compaction_id"] == compaction_id]
    return anchors


def compaction_html(
    trace: Trace, compaction_id: int, losses: Losses | None = None, max_messages: int = 120, *, facts: bool = True
) -> str:
    """One compaction: where it happened, the span and the kept tail, the summary, and what was lost.

    ``facts=False`` leaves out the table of its facts (:func:`step_html` puts them in the step's own table).
    """
    rows = trace.compactions[trace.compactions["compaction_id"] == compaction_id]
    if not len(rows):
        return f'{CSS}<p class="zl-muted">No compaction #{compaction_id}.</p>'
    row = rows.iloc[0]
    parts = [CSS]
    if facts:
        table = _fact_rows(
            {"step": row["step"], "turn": row["turn"], "trigger": row["trigger"], **_compaction_facts(row)}
        )
        parts.append(
            f'<table class="zl-table zl-compaction" data-compaction="{compaction_id}">'
            f"<caption>Compaction #{compaction_id}</caption>{table}</table>"
        )
    anchors = _anchors_for(losses, compaction_id)
    lost_values: list[str] = []
    if anchors is not None and len(anchors):
        lost_html, lost_values = _lost_anchors_html(anchors)
        parts.append(lost_html)
    elif losses is None:
        parts.append('<p class="zl-muted">Loss metrics unavailable (zett_lab.measure.measure not installed).</p>')
    summary = row["summary_text"]
    if isinstance(summary, str):
        parts.append(f'<h4>Summary</h4><div class="zl-pre zl-summary">{html.escape(summary)}</div>')
    if pd.notna(row["span_start"]):
        parts.append(_span_html(trace.conversation.messages, row, lost_values, max_messages))
    return "".join(parts)


def _compaction_facts(row: pd.Series) -> dict[str, Any]:
    """One compaction attempt's facts, by the words a person reads: outcome, span, tokens, summarizer, error."""
    outcome = "applied" if bool(row["applied"]) else f"not applied: {row['skip_reason']}"
    return {
        "outcome": outcome,
        "span (summarized)": f"messages[{row['span_start']}:{row['span_end']}]"
        if pd.notna(row["span_start"])
        else "no window",
        "kept verbatim": f"messages[{row['span_end']}:{row['n_recorded']}]" if pd.notna(row["span_end"]) else "",
        "older tokens": row["older_tokens"],
        "kept tokens": row["recent_tokens"],
        "summary tokens": row["summary_tokens"],
        "compression": percent(row["compression_ratio"]),
        "summarizer": row["summarizer"],
        "latency": f"{decimal(row['latency_s'])} s" if pd.notna(row["latency_s"]) else "",
        "cache hit": row["cache_hit"],
        "error": row["error"],
    }


#: What the rows of the step and compaction tables mean, shown on hover (the report's glossary words).
_ROW_TERMS = {
    "estimate": "estimate",
    "estimate from": "estimate",
    "max_tokens": "max_tokens",
    "threshold crossed": "max_tokens",
    "context sent": "context sent",
    "over budget": "steps_over_budget",
    "span (summarized)": "span",
    "kept verbatim": "span",
    "compression": "compression_ratio",
}


def _fact_rows(facts: Mapping[str, Any]) -> str:
    """Rows of a labelled facts table (a word the glossary defines carries its definition on hover)."""
    rows = []
    for key, value in facts.items():
        if is_missing(value) or value == "":
            continue
        meaning = definition(_ROW_TERMS[key]) if key in _ROW_TERMS else None
        title = f' title="{html.escape(meaning)}"' if meaning else ""
        rows.append(
            f"<tr><th style='text-align:left'{title}>{html.escape(key)}</th>"
            f"<td style='text-align:left'>{cell(value)}</td></tr>"
        )
    return "".join(rows)


def _lost_anchors_html(anchors: pd.DataFrame) -> tuple[str, list[str]]:
    """What the span's anchors became (counts, lost-but-needed chips, other lost chips), and the values
    lost but needed, to highlight in the span."""
    flags = {
        c: anchors[c].astype("boolean").fillna(False).to_numpy(bool) if c in anchors else np.zeros(len(anchors), bool)
        for c in ("in_summary", "in_tail", "lost_but_needed")
    }
    lost = anchors[~flags["in_summary"] & ~flags["in_tail"]]
    needed = anchors[flags["lost_but_needed"]]
    lost_values = [str(v) for v in needed["value"]] if "value" in needed else []
    kept = int(flags["in_summary"].sum())
    parts = [
        f"<h4>What was lost</h4><p>{len(anchors)} anchors in the span: {kept} in the summary, "
        f"{int(flags['in_tail'].sum())} also in the kept tail, {len(lost)} no longer visible, "
        f"<span class='zl-lost'>{len(needed)} lost but needed later</span>.</p>"
    ]
    if len(needed):
        chips = " ".join(
            f'<span class="zl-chip zl-lost" title="{html.escape(str(r.get("type", "")))}">'
            f"{html.escape(str(r.get('type', '')))}: {html.escape(str(r.get('value', '')))}</span>"
            for r in needed.to_dict("records")[:200]
        )
        parts.append(f"<p><b>Lost but needed:</b> {chips}</p>")
    constraint = anchors["type"].eq("constraint").to_numpy(bool) if "type" in anchors else np.zeros(len(anchors), bool)
    dropped = anchors[constraint & ~flags["in_summary"] & ~flags["in_tail"]]
    if len(dropped):
        rules = "".join(f"<li>{html.escape(str(value))}</li>" for value in dropped["value"][:50])
        parts.append(f"<p><b>Constraints dropped ({len(dropped)}):</b></p><ul class='zl-dropped'>{rules}</ul>")
    other = lost[~lost.index.isin(needed.index)]
    if len(other):
        chips = " ".join(
            f'<span class="zl-chip">{html.escape(str(r.get("type", "")))}: '
            f"{html.escape(str(r.get('value', '')))}</span>"
            for r in other.to_dict("records")[:200]
        )
        parts.append(f"<details><summary>Lost, not needed later ({len(other)})</summary>{chips}</details>")
    return "".join(parts), lost_values


def _span_html(messages: Sequence[Any], row: pd.Series, lost_values: list[str], max_messages: int) -> str:
    """The summarized messages (lost-but-needed values highlighted, at most ``max_messages``), then the kept tail."""
    start, end, seen = int(row["span_start"]), int(row["span_end"]), int(row["n_recorded"])
    listing = []
    for index in range(start, min(end, start + max_messages)):
        text = html.escape(short_text(messages[index]))
        for value in lost_values:
            escaped = html.escape(value)
            if escaped and escaped in text:
                text = text.replace(escaped, f'<span class="zl-lost">{escaped}</span>')
        listing.append(
            f"<tr><td>{index}</td><td>{html.escape(role_of(messages[index]))}</td>"
            f"<td style='text-align:left;white-space:normal'>{text}</td></tr>"
        )
    more = f"<p class='zl-muted'>… {end - start - max_messages} more</p>" if end - start > max_messages else ""
    return (
        f"<details><summary>Span: {end - start} summarized messages (lost-but-needed anchors highlighted)</summary>"
        f"<div class='zl-scroll'><table class='zl-table'>{''.join(listing)}</table></div>{more}</details>"
        f"<p class='zl-muted'>Kept verbatim: {seen - end} messages [{end}:{seen}]; "
        f"future: {len(messages) - seen} messages.</p>"
    )


#: The headline figures (:meth:`Trace.summary`) a manual compaction is compared by.
_Compared = Literal[
    "compactions_applied", "rejected_not_smaller", "failed", "peak_context", "total_input_tokens", "steps_over_budget"
]


def manual_diff_html(
    baseline: Trace, manual: Trace, baseline_losses: Losses | None = None, manual_losses: Losses | None = None
) -> str:
    """Headline figures and compactions of two traces side by side."""
    a, b = baseline.summary(), manual.summary()
    keys: list[_Compared] = [
        "compactions_applied",
        "rejected_not_smaller",
        "failed",
        "peak_context",
        "total_input_tokens",
        "steps_over_budget",
    ]
    rows: list[dict[str, object]] = [
        {"measure": k, "baseline": a[k], "with manual compaction": b[k], "difference": b[k] - a[k]} for k in keys
    ]
    lost_a, lost_b = lost_count(baseline_losses), lost_count(manual_losses)
    if lost_a is not None and lost_b is not None:
        rows.append(
            {
                "measure": "lost_but_needed anchors",
                "baseline": lost_a,
                "with manual compaction": lost_b,
                "difference": lost_b - lost_a,
            }
        )
    columns = COMPACTION_SUMMARY_COLUMNS
    return (
        f"{CSS}<h4>Difference</h4>{frame_html(pd.DataFrame(rows))}"
        f"<h4>Compactions: baseline</h4>{frame_html(baseline.compactions[columns], scroll=True)}"
        f"<h4>Compactions: with manual compaction</h4>{frame_html(manual.compactions[columns], scroll=True)}"
    )


def step_html(trace: Trace, step: int, losses: Losses | None = None) -> str:
    """One model step in one labelled table: what the engine estimated, decided and sent, and for a compaction
    attempt its facts; then that compaction's summary and what it lost."""
    rows = trace.steps[trace.steps["step"] == step]
    if not len(rows):
        return f'{CSS}<p class="zl-muted">No step {int(step)} in this replay.</p>'
    row = rows.iloc[0]
    reason = row["skip_reason"]
    if bool(row["applied"]):
        decision = "a compaction was applied: the checkpoint replaced the older messages before this step"
    elif is_missing(reason):
        decision = "nothing to decide"
    else:
        decision = f"{reason}: {SKIP_REASON_MEANINGS.get(str(reason), '')}".rstrip(": ")
    facts = {
        "turn": row["turn"],
        "estimate": row["estimate"],
        "estimate from": row["estimate_source"],
        "max_tokens": row["max_tokens"],
        "threshold crossed": bool(row["triggered"]),
        "trigger": row["trigger"],
        "decision": decision,
        "window": (
            f"summarize messages before {int(row['cutoff_index'])}, keep {cell(row['recent_tokens'])} tokens"
            if not is_missing(row["cutoff_index"])
            else "no window"
        ),
        "context sent": row["context_tokens_after"],
        "over budget": bool(row["over_budget_after"]),
    }
    compaction = None if is_missing(row["compaction_id"]) else int(row["compaction_id"])
    attempt = ""
    if compaction is not None:
        attempts = trace.compactions[trace.compactions["compaction_id"] == compaction]
        if len(attempts):
            attempt = (
                f"<tr><th colspan='2' style='text-align:left'>compaction #{compaction}</th></tr>"
                f"{_fact_rows(_compaction_facts(attempts.iloc[0]))}"
            )
    marker = f' data-compaction="{compaction}"' if compaction is not None else ""
    parts = [
        CSS,
        f'<table class="zl-table zl-step" data-step="{int(step)}"{marker}><caption>Step {int(step)}: what the '
        f"engine estimated, decided and sent</caption>{_fact_rows(facts)}{attempt}</table>",
    ]
    if compaction is not None:
        parts.append(compaction_html(trace, compaction, losses, facts=False))
    return "".join(parts)
