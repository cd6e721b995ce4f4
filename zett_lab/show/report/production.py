"""The report section "Production summaries": recorded native compactions beside baselines on the same span.

:func:`native_document` turns :func:`zett_lab.measure.native.production_summaries` rows into the
JSON report's ``native`` entries (one per native compaction, every summarizer's metrics under it);
:func:`section_html` and :func:`section_markdown` render them. A compaction whose log lost the
summary text stays listed, saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from ...measure.catalogue import label
from ...measure.native import PRODUCTION_METRICS
from ...records import plain
from .values import DIGITS

#: Facts of one native compaction (the columns that do not depend on the summarizer).
_FACTS = ("conversation_id", "subject", "native_id", "kind", "trigger", "position", "tokens_before", "estimate_before",
          "span_start", "span_end", "span_tokens")  # fmt: skip
_PER_SUMMARIZER = ("status", "summary_tokens", *PRODUCTION_METRICS, "lost")


def native_document(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """One JSON-ready entry per native compaction: its facts, then ``summarizers`` (the native one first)."""
    out: list[dict[str, Any]] = []
    for _, group in rows.groupby(["conversation_id", "subject", "native_id"], sort=False):
        first = group.iloc[0]
        entry = {name: plain(first[name], DIGITS) for name in _FACTS}
        entry["summary_missing"] = bool((group["status"] == "summary missing from log").any())
        entry["summarizers"] = {
            str(row["summarizer"]): {name: plain(row[name], DIGITS) for name in _PER_SUMMARIZER}
            for _, row in group.iterrows()
        }
        out.append(entry)
    return out


def _cell(value: Any, metric: str) -> str:
    if value is None:
        return "–"
    if metric == "lost_but_needed":
        return f"{int(value)}"
    return f"{float(value):.2f}"


def _when(entry: dict[str, Any]) -> str:
    agent = entry["tokens_before"]
    own = f"{int(agent):,} tokens by the agent's count, " if agent is not None else "no token figure in the log, "
    return f"before message {entry['position']}: {own}{int(entry['estimate_before']):,} by zett-agent's estimate"


def _skipped_note(skipped: Sequence[str]) -> str:
    if not skipped:
        return ""
    return (
        f"Not summarized on these spans: {', '.join(skipped)} (given as models, known here only by identity; "
        "pass native_baselines= to include them)."
    )


def section_html(entries: list[dict[str, Any]], escape: Callable[[str], str], skipped: Sequence[str] = ()) -> str:
    """The section as HTML (``escape`` escapes a string, e.g. ``html.escape``); empty without native compactions.
    ``skipped`` names summarizers that could not summarize the spans (they are said to be missing)."""
    if not entries:
        return ""

    def esc(value: Any) -> str:
        return escape("" if value is None else str(value))

    parts = [
        '<section id="production"><h2>Production summaries</h2>',
        "<p>Compactions the recording agent made itself, each beside the baselines summarizing the identical span "
        "through zett-agent's summary step. Lower is better for the superseded-only rate and for lost but needed.</p>",
    ]
    if skipped:
        parts.append(f'<p class="note">{esc(_skipped_note(skipped))}</p>')
    headers = ["summarizer", "status", "summary tokens", *(label(m) for m in PRODUCTION_METRICS)]
    for entry in entries:
        parts.append(
            f"<h3><code>{esc(entry['subject'])}</code> · {esc(entry['conversation_id'])} · "
            f"compaction #{esc(entry['native_id'])}</h3>"
            f'<p class="note">{esc(entry["trigger"] or entry["kind"])}, {esc(_when(entry))}; it replaced messages '
            f"{esc(entry['span_start'])}–{esc(entry['span_end'])} ({int(entry['span_tokens']):,} tokens).</p>"
        )
        if entry["summary_missing"]:
            parts.append(
                "<p><strong>The log lost this summary's text</strong>: its own metrics cannot be measured; the "
                "baselines below summarize the same span.</p>"
            )
        rows = []
        for name, values in entry["summarizers"].items():
            cells = [_cell(values[m], m) for m in PRODUCTION_METRICS]
            tokens = "–" if values["summary_tokens"] is None else f"{int(values['summary_tokens']):,}"
            rows.append(
                f'<tr><td><code>{esc(name)}</code></td><td>{esc(values["status"])}</td><td class="num">{tokens}</td>'
                + "".join(f'<td class="num">{esc(c)}</td>' for c in cells)
                + "</tr>"
            )
        head = "".join(f"<th>{esc(h)}</th>" for h in headers)
        parts.append(
            f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        )
        lost = entry["summarizers"][entry["subject"]]["lost"] or []
        if lost:
            items = ", ".join(f"<code>{esc(value)}</code>" for value in lost)
            parts.append(f"<p>Used again later but dropped by the production summary: {items}</p>")
    parts.append("</section>")
    return "".join(parts)


def section_markdown(entries: list[dict[str, Any]], md: Callable[[Any], str], skipped: Sequence[str] = ()) -> list[str]:
    """The section as Markdown lines (``md`` escapes text); none when there are no native compactions."""
    if not entries:
        return []
    out = ["## Production summaries", ""]
    if skipped:
        out += [md(_skipped_note(skipped)), ""]
    for entry in entries:
        out += [
            f"### {md(entry['subject'])} · {md(entry['conversation_id'])} · compaction #{entry['native_id']}",
            "",
            f"{md(entry['trigger'] or entry['kind'])}, {md(_when(entry))}; it replaced messages {entry['span_start']}–"
            f"{entry['span_end']} ({int(entry['span_tokens']):,} tokens).",
            "",
        ]
        if entry["summary_missing"]:
            out += ["**The log lost this summary's text**: its own metrics cannot be measured.", ""]
        out.append("| summarizer | status | " + " | ".join(md(label(m)) for m in PRODUCTION_METRICS) + " |")
        out.append("|" + "---|" * (len(PRODUCTION_METRICS) + 2))
        for name, values in entry["summarizers"].items():
            out.append(
                f"| {md(name)} | {md(values['status'])} | "
                + " | ".join(_cell(values[m], m) for m in PRODUCTION_METRICS)
                + " |"
            )
        lost = entry["summarizers"][entry["subject"]]["lost"] or []
        if lost:
            out += ["", "Used again later but dropped by the production summary: " + ", ".join(md(v) for v in lost)]
        out.append("")
    return out
