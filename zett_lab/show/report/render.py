"""HTML and Markdown rendering of a :class:`~zett_lab.show.report.Report`.

Every piece of text that comes from a conversation, a summary, a file name or a setting goes
through :func:`esc` (HTML) or :func:`md` (Markdown); JSON for the page's script goes through
:func:`script_json`. Figures are inline SVG; the page loads nothing.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ...measure.catalogue import label
from ...records import is_missing, plain
from .assets import CSS, JS, content_security_policy
from .svg import inline_svg, mini_timeline
from .values import DIGITS, RECOMMEND_COST, RECOMMEND_LOSS, REPORT_METRICS, excerpt

if TYPE_CHECKING:
    from .core import Report


# --- escaping -----------------------------------------------------------------------------------------


def esc(value: Any) -> str:
    """Text for HTML element content or a quoted attribute value."""
    return html.escape("" if value is None else str(value), quote=True)


def script_json(data: Any) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``<``, ``>``, ``&``, U+2028/9 left)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def md(value: Any) -> str:
    """Text for a Markdown table cell or paragraph: HTML escaped, pipes and line breaks neutralized."""
    text = html.escape("" if value is None else str(value), quote=False)
    text = " ".join(text.split())
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text


# --- number formatting --------------------------------------------------------------------------------


def n_int(value: Any) -> str:
    return "" if is_missing(value) else f"{int(round(float(value))):,}"


def n_ratio(value: Any, digits: int = 3) -> str:
    return "" if is_missing(value) else f"{float(value):.{digits}f}"


def n_pct(value: Any) -> str:
    return "" if is_missing(value) else f"{100 * float(value):.1f}%"


def n_usd(value: Any) -> str:
    if is_missing(value):
        return ""
    value = float(value)
    return f"${value:,.4f}" if value < 10 else f"${value:,.2f}"


def ci_text(mean: Any, low: Any, high: Any) -> str:
    if is_missing(mean):
        return "n/a"
    if is_missing(low) or is_missing(high):
        return f"{float(mean):.3f}"
    return f"{float(mean):.3f} [{float(low):.3f}, {float(high):.3f}]"


# --- HTML building blocks ------------------------------------------------------------------------------


def table_html(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    numeric: Iterable[int] = (),
    *,
    raw: Iterable[int] = (),
    cls: str = "",
) -> str:
    """A table; cells are escaped except columns in ``raw`` (already-built HTML)."""
    numeric, raw = set(numeric), set(raw)
    head = "".join(f'<th{" class=num" if i in numeric else ""}>{esc(h)}</th>' for i, h in enumerate(headers))
    head = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            content = value if i in raw else esc(value)
            cells.append(f'<td{" class=num" if i in numeric else ""}>{content}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    klass = f' class="{esc(cls)}"' if cls else ""
    return f"<table{klass}>{head}<tbody>{''.join(body)}</tbody></table>"


class _Figures:
    """Inline SVG figures, each with its own id prefix."""

    def __init__(self) -> None:
        self.count = 0

    def add(self, fig: Any, caption: str) -> str:
        from .. import plots

        self.count += 1
        svg = inline_svg(plots.to_svg(fig), f"zlf{self.count}")
        return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def setting_text(max_tokens: Any, keep: Any) -> str:
    return f"max_tokens={n_int(max_tokens)}, keep_recent_tokens={n_int(keep)}"


# --- sections --------------------------------------------------------------------------------------------


def _section_summary(report: Report, doc: dict[str, Any]) -> str:
    rec = doc["recommendation"]
    parts = ['<section id="summary"><h2>Summary</h2>']
    if rec:
        details = []
        if rec.get("needed_anchor_recall") is not None:
            details.append(f"needed-anchor recall {n_ratio(rec['needed_anchor_recall'])}")
        if rec.get("lost_but_needed") is not None:
            details.append(f"{n_ratio(rec['lost_but_needed'], 1)} lost-but-needed anchors per conversation")
        if rec.get("primary_input_tokens") is not None:
            details.append(f"{n_int(rec['primary_input_tokens'])} primary input tokens per conversation")
        parts.append(
            '<div class="callout"><strong>Recommended setting:</strong> '
            f'summarizer <code>{esc(rec.get("summarizer", ""))}</code>, '
            f"<code>{esc(setting_text(rec['max_tokens'], rec['keep_recent_tokens']))}</code>"
            + (f" — {esc('; '.join(details))}." if details else ".")
            + (f'<br><span class="note">{esc(rec["rule"])}</span>' if rec.get("rule") else "")
            + "</div>"
        )
    study = doc["study"]
    metrics = doc["metrics"]
    nar = [r for r in metrics["rows"] if r["metric"] == "needed_anchor_recall" and r.get("mean") is not None]
    items = [
        f"{len(study['conversations'])} conversation(s), {study['replays']} replays through {esc(study['engine'])}'s "
        f"real compaction engine, {len(study['summarizers'])} summarizer(s), "
        f"{len(study['grid']['max_tokens'])} × {len(study['grid']['keep_recent_tokens'])} settings."
    ]
    if nar:
        best = max(nar, key=lambda r: r["mean"])
        items.append(
            f"Highest needed-anchor recall: <code>{esc(best['summarizer'])}</code> with "
            f"{esc(ci_text(best['mean'], best['ci_low'], best['ci_high']))} (mean, {esc(_pct_level(metrics))} CI, "
            f"n={best['n']})."
        )
    over = sum(t["steps_over_budget"] for t in metrics["totals"])
    if over:
        items.append(
            f"{n_int(over)} model step(s) over all replays were sent over max_tokens; see the timelines for why "
            "(no whole-turn boundary, only earlier checkpoints, or a rejected summary)."
        )
    if study["failures"]:
        items.append(
            f'<span class="status" style="color:var(--bad)">{len(study["failures"])} replay(s) failed</span> (listed '
            'under What was studied).'
        )
    parts.append("<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul></section>")
    return "".join(parts)


def _ci_cell(row: dict[str, Any] | None) -> str:
    if not row or is_missing(row.get("mean")):
        return "n/a"
    interval = "" if is_missing(row.get("ci_low")) else f"[{float(row['ci_low']):.3f}, {float(row['ci_high']):.3f}]"
    return f'<strong>{float(row["mean"]):.3f}</strong><br><span class="note">{esc(interval)} n={esc(row["n"])}</span>'


def _pct_level(metrics: dict[str, Any]) -> str:
    return f"{100 * float(metrics.get('confidence') or 0.95):.0f}%"


def _section_study(report: Report, doc: dict[str, Any]) -> str:
    study = doc["study"]
    rows = [
        ("Date", study["date"]),
        (
            "Engine",
            study["engine"] + " (zett_agent.extensions.compaction.CompactionExtension, run, not re-implemented)",
        ),
        ("zett_lab", study["zett_lab_version"]),
        ("Token counter", f"{study['counter']}" + (f" — {study['counter_note']}" if study.get("counter_note") else "")),
        ("Summarizers", ", ".join(study["summarizers"])),
        ("max_tokens", ", ".join(n_int(v) for v in study["grid"]["max_tokens"])),
        ("keep_recent_tokens", ", ".join(n_int(v) for v in study["grid"]["keep_recent_tokens"])),
        ("Other replay settings", ", ".join(f"{k}={v}" for k, v in sorted(study["settings"].items()))),
        ("Replays", n_int(study["replays"])),
    ]
    head = table_html(["", ""], rows, cls="facts")
    conv_rows = [
        (c["id"], c["title"] or "", c["file"] or "(in memory)", c["format"], n_int(c["messages"]), n_int(c["turns"]),
         n_int(c["model_steps"]), n_int(c["tokens"]), n_int(c["probes"]))
        for c in study["conversations"]
    ]
    conversations = table_html(
        ["conversation", "title", "file", "format", "messages", "turns", "model steps", "tokens", "probes"],
        conv_rows,
        numeric=(4, 5, 6, 7, 8),
    )
    parts = [
        '<section id="study"><h2>What was studied</h2>',
        head,
        "<h3>Conversations</h3>",
        conversations,
        '<p class="note">Tokens: the counter over every recorded message (system prompt once). Every conversation was '
        "replayed under every setting with keep_recent_tokens below max_tokens and every summarizer.</p>",
    ]
    if study["failures"]:
        parts.append("<h3>Replays that failed</h3>")
        parts.append(
            table_html(
                ["conversation", "summarizer", "max_tokens", "keep_recent_tokens", "error"],
                [
                    (
                        f["conversation_id"],
                        f["summarizer"],
                        n_int(f["max_tokens"]),
                        n_int(f["keep_recent_tokens"]),
                        f["error"],
                    )
                    for f in study["failures"]
                ],
                numeric=(2, 3),
            )
        )
    for note in study["notes"]:
        parts.append(f'<p class="note">{esc(note)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _section_metrics(report: Report, doc: dict[str, Any], figures: _Figures) -> str:
    metrics = doc["metrics"]
    level = _pct_level(metrics)
    by = {(r["summarizer"], r["metric"]): r for r in metrics["rows"]}
    names = list(report.summarizers)
    shown = [m for m in REPORT_METRICS if any((s, m) in by for s in names)]
    rows = []
    for name in names:
        row = [name]
        for metric in shown:
            r = by.get((name, metric))
            row.append(_ci_cell(r))
        rows.append(row)
    parts = [
        '<section id="metrics"><h2>Loss by summarizer</h2>',
        f"<p>Mean per unit with its {esc(level)} paired bootstrap confidence interval. A unit is one conversation at "
        "one "
        "setting; only units where every summarizer compacted count. Higher is better for every column.</p>",
        table_html(
            ["summarizer", *(label(m) for m in shown)],
            rows,
            numeric=range(1, len(shown) + 1),
            raw=range(1, len(shown) + 1),
        ),
    ]
    totals = metrics["totals"]
    parts.append("<h3>Outcomes over all replays</h3>")
    parts.append(
        table_html(
            [
                "summarizer",
                "replays",
                "compactions applied",
                "rejected (not smaller)",
                "failed",
                "steps over budget",
                "lost but needed per replay",
                "re-fetch calls",
            ],
            [
                (
                    t["summarizer"],
                    n_int(t["replays"]),
                    n_int(t["compactions"]),
                    n_int(t["rejected_not_smaller"]),
                    n_int(t["failed"]),
                    n_int(t["steps_over_budget"]),
                    n_ratio(t["lost_but_needed_per_replay"], 1),
                    n_int(t["refetch_calls"]),
                )
                for t in totals
            ],
            numeric=range(1, 8),
        )
    )
    comparison = report.comparison_result
    if comparison is not None and len(comparison.summary):
        from .. import plots

        fig = plots.summarizer_comparison(
            comparison,
            metrics=[m for m in ("needed_anchor_recall", "anchor_retention", "instruction_survival") if m in shown],
        )
        parts.append(figures.add(fig, f"Means with {level} bootstrap intervals, per summarizer."))
    pairwise = [p for p in metrics["pairwise"] if p["metric"] == "needed_anchor_recall"]
    if pairwise:
        parts.append("<h3>Paired differences in needed-anchor recall</h3>")
        parts.append(
            table_html(
                ["A", "B", "n", "mean A − B", f"{level} CI", "A better", "tie", "B better", "Wilcoxon p"],
                [
                    (
                        p["a"],
                        p["b"],
                        n_int(p["n"]),
                        n_ratio(p["mean_diff"]),
                        "" if is_missing(p["ci_low"]) else f"[{n_ratio(p['ci_low'])}, {n_ratio(p['ci_high'])}]",
                        n_pct(p["win_rate"]),
                        n_pct(p["tie_rate"]),
                        n_pct(p["loss_rate"]),
                        n_ratio(p["p_value"], 4),
                    )
                    for p in pairwise
                ],
                numeric=range(2, 9),
            )
        )
    rec = doc["recommendation"]
    if rec is not None:
        cell = [t for _, t in report.cell_traces(rec["max_tokens"], rec["keep_recent_tokens"])]
        anchors = [report.losses_for(t).anchors for t in cell]
        anchors = [a for a in anchors if len(a)]
        if anchors:
            from .. import plots

            fig = plots.anchor_retention(pd.concat(anchors, ignore_index=True))
            parts.append(
                figures.add(
                    fig,
                    "Anchor retention and needed-anchor recall per anchor type at "
                    f"{setting_text(rec['max_tokens'], rec['keep_recent_tokens'])}, all summarizers pooled.",
                )
            )
    parts.append("</section>")
    return "".join(parts)


STEP_COLUMNS = [
    {"label": "step", "num": True}, {"label": "turn", "num": True}, {"label": "estimate", "num": True},
    {"label": "source", "num": False}, {"label": "decision", "num": False}, {"label": "context sent", "num": True},
    {"label": "over budget", "num": False},
]
COMPACTION_COLUMNS = [
    {"label": "#", "num": True},
    {"label": "step", "num": True},
    {"label": "span (messages)", "num": False},
    {"label": "span tokens", "num": True},
    {"label": "summary tokens", "num": True},
    {"label": "compression", "num": True},
    {"label": "outcome", "num": False},
    {"label": "needed-anchor recall", "num": True},
    {"label": "lost but needed", "num": True},
    {"label": "summary (start)", "num": False},
]


def _cell_data(report: Report, trace: Any) -> dict[str, Any]:
    steps = trace.steps
    settings = trace.settings
    losses = report.losses_for(trace)
    measured = (
        {int(r["compaction_id"]): r for r in losses.compactions.to_dict("records")} if len(losses.compactions) else {}
    )
    step_rows = []
    for row in steps.itertuples(index=False):
        decision = (
            "applied" if row.applied else ("" if row.skip_reason == "below threshold" else (row.skip_reason or ""))
        )
        step_rows.append(
            [
                plain(row.step, DIGITS),
                plain(row.turn, DIGITS),
                plain(row.estimate, DIGITS),
                plain(row.estimate_source, DIGITS),
                decision,
                plain(row.context_tokens_after, DIGITS),
                "yes" if bool(row.over_budget_after) else "",
            ]
        )
    comp_rows = []
    for row in trace.compactions.to_dict("records"):
        m = measured.get(int(row["compaction_id"]), {})
        outcome = "applied" if row["applied"] else (row["skip_reason"] or "")
        span = "" if is_missing(row["span_start"]) else f"{int(row['span_start'])}–{int(row['span_end'])}"
        comp_rows.append(
            [
                plain(row["compaction_id"], DIGITS),
                plain(row["step"], DIGITS),
                span,
                plain(row["older_tokens"], DIGITS),
                plain(row["summary_tokens"], DIGITS),
                n_ratio(row["compression_ratio"]),
                outcome,
                n_ratio(m.get("needed_anchor_recall")),
                plain(m.get("lost_but_needed"), DIGITS),
                excerpt(row["summary_text"] or "", None, 110),
            ]
        )
    summary = trace.summary()
    conv = losses.conversation.iloc[0] if len(losses.conversation) else {}
    status = (
        f"{summary['steps']} steps · {summary['compactions_applied']} compaction(s) applied · "
        f"{summary['rejected_not_smaller']} rejected as not smaller · peak context {n_int(summary['peak_context'])} "
        "tokens · "
        f"{summary['steps_over_budget']} step(s) over budget · {n_int(summary['total_input_tokens'])} primary input "
        "tokens"
    )
    nar = conv.get("needed_anchor_recall") if hasattr(conv, "get") else None
    if nar is not None and not is_missing(nar):
        status += f" · needed-anchor recall {float(nar):.3f}"
    svg = mini_timeline(steps, int(settings["max_tokens"]), int(settings["keep_recent_tokens"]))
    return {"svg": svg, "status": status, "steps": step_rows, "compactions": comp_rows}


def _section_explore(report: Report, doc: dict[str, Any]) -> str:
    conversation_id = report.explore_id
    names = list(report.summarizers)
    grid = report.settings_grid
    cells = {}
    for s_index, name in enumerate(names):
        for m in grid["max_tokens"]:
            for k in grid["keep_recent_tokens"]:
                trace = report.trace_for(conversation_id, name, m, k)
                if trace is not None:
                    cells[f"{s_index}|{m}|{k}"] = _cell_data(report, trace)
    data = {"cells": cells, "step_columns": STEP_COLUMNS, "compaction_columns": COMPACTION_COLUMNS}
    rec = doc["recommendation"] or {}
    rec_s = names.index(rec["summarizer"]) if rec.get("summarizer") in names else 0

    def options(values: Sequence[Any], chosen: Any, label=lambda v: v) -> str:
        return "".join(
            f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(label(v))}</option>' for v in values
        )

    chosen_m = rec.get("max_tokens", grid["max_tokens"][0])
    chosen_k = rec.get("keep_recent_tokens", grid["keep_recent_tokens"][0])
    return (
        '<section id="explore"><h2>Explore a setting</h2>'
        f"<p>Conversation <code>{esc(conversation_id)}</code>, replayed under every setting of the grid. Pick a "
        "summarizer, "
        "max_tokens and keep_recent_tokens: the timeline and the tables switch to that replay (precomputed; no kernel "
        "needed).</p>"
        '<div class="controls">'
        '<label for="zl-sel-summarizer">summarizer<select '
        f'id="zl-sel-summarizer">{options(list(range(len(names))), rec_s, lambda i: names[i])}</select></label>'
        '<label for="zl-sel-max">max_tokens<select '
        f'id="zl-sel-max">{options(grid["max_tokens"], chosen_m, n_int)}</select></label>'
        '<label for="zl-sel-keep">keep_recent_tokens<select '
        f'id="zl-sel-keep">{options(grid["keep_recent_tokens"], chosen_k, n_int)}</select></label>'
        "</div>"
        '<p id="zl-explore-status" class="status"></p>'
        '<div id="zl-explore-figure" aria-live="polite"></div>'
        '<p class="note">Line: the engine\'s estimate before the check at each step, dropping to the context sent '
        'when a '
        "compaction is applied. ▼ applied, ✕ rejected (summary not smaller), ■ summary failed, | over the threshold "
        "with "
        "nothing to summarize; red ticks on the axis: steps sent over max_tokens.</p>"
        "<h3>Compaction attempts</h3>"
        '<div class="scroll"><table id="zl-explore-compactions"></table></div>'
        "<h3>Model steps</h3>"
        '<div class="scroll"><table id="zl-explore-steps"></table></div>'
        f'<script type="application/json" id="zl-explore-data">{script_json(data)}</script>'
        "</section>"
    )


def _section_timelines(report: Report, doc: dict[str, Any], figures: _Figures) -> str:
    from .. import plots

    rec = doc["recommendation"]
    if rec is None:
        return ""
    parts = [
        '<section id="timelines"><h2>Context timelines</h2>',
        f"<p>Every conversation at the recommended setting (<code>{esc(rec.get('summarizer', ''))}</code>, "
        f"<code>{esc(setting_text(rec['max_tokens'], rec['keep_recent_tokens']))}</code>): the engine's estimate at "
        "every "
        "model step against the limits, and every compaction decision.</p>",
    ]
    for conversation in report.conversations:
        trace = report.trace_for(
            conversation.id, rec.get("summarizer", report.summarizers[0]), rec["max_tokens"], rec["keep_recent_tokens"]
        )
        if trace is None:
            parts.append(f'<p class="note">No replay of <code>{esc(conversation.id)}</code> at this setting.</p>')
            continue
        summary = trace.summary()
        parts.append(
            figures.add(
                plots.timeline(trace),
                f"{conversation.id}: {summary['compactions_applied']} compaction(s) applied, "
                f"{summary['steps_over_budget']} of {summary['steps']} steps over budget, peak "
                f"{n_int(summary['peak_context'])} tokens.",
            )
        )
    parts.append("</section>")
    return "".join(parts)


def _section_sweep(report: Report, doc: dict[str, Any], figures: _Figures) -> str:
    from .. import plots

    results = report.results
    grid = report.settings_grid
    rec = doc["recommendation"]
    highlight = (rec["max_tokens"], rec["keep_recent_tokens"]) if rec else None
    parts = [
        '<section id="sweep"><h2>Sweep</h2>',
        f"<p>{len(grid['max_tokens'])} max_tokens × {len(grid['keep_recent_tokens'])} keep_recent_tokens values, "
        "averaged over conversations. The recommended cell is outlined; hatched cells were not run "
        "(keep_recent_tokens must be below max_tokens).</p>",
        '<h3>Needed-anchor recall per summarizer</h3><div class="grid2">',
    ]
    for name in report.summarizers:
        fig = plots.heatmap(
            results,
            "needed_anchor_recall",
            where={"summarizer": name},
            highlight=highlight,
            title=f"needed-anchor recall — {name}",
        )
        parts.append(figures.add(fig, f"Needed-anchor recall (higher is better), {name}."))
    parts.append("</div><h3>Cost and budget</h3><div class=\"grid2\">")
    chosen = rec.get("summarizer") if rec else report.summarizers[0]
    fig = plots.heatmap(
        results,
        "primary_input_tokens",
        where={"summarizer": chosen},
        highlight=highlight,
        title=f"primary input tokens — {chosen}",
    )
    parts.append(figures.add(fig, f"Primary input tokens per conversation (lower is cheaper), {chosen}."))
    fig = plots.heatmap(results, "steps_over_budget", highlight=highlight, title="steps over budget — all summarizers")
    parts.append(figures.add(fig, "Model steps sent over max_tokens per conversation (mean over summarizers)."))
    parts.append("</div><h3>Pareto front</h3>")
    if RECOMMEND_COST in results and RECOMMEND_LOSS in results:
        fig = plots.pareto(results, cost=RECOMMEND_COST, loss=RECOMMEND_LOSS)
        parts.append(
            figures.add(
                fig,
                "Every configuration: mean primary input tokens against mean lost-but-needed anchors per "
                "conversation; the dashed staircase is the Pareto front.",
            )
        )
    if rec is not None:
        parts.append(
            '<div class="callout"><strong>Recommended:</strong> '
            f"<code>{esc(rec.get('summarizer', ''))}</code> at "
            f"<code>{esc(setting_text(rec['max_tokens'], rec['keep_recent_tokens']))}</code>.</div>"
        )
    keys = ["summarizer", "max_tokens", "keep_recent_tokens"]
    cols = [
        c
        for c in ("compactions", "steps_over_budget", "needed_anchor_recall", "lost_but_needed", "primary_input_tokens")
        if c in results
    ]
    table = results.groupby(keys, sort=True)[cols].mean().reset_index()
    rows = []
    for row in table.to_dict("records"):
        mark = (
            "★ "
            if rec
            and (row["summarizer"], int(row["max_tokens"]), int(row["keep_recent_tokens"]))
            == (rec.get("summarizer"), rec["max_tokens"], rec["keep_recent_tokens"])
            else ""
        )
        rows.append(
            [
                mark + str(row["summarizer"]),
                n_int(row["max_tokens"]),
                n_int(row["keep_recent_tokens"]),
                n_ratio(row.get("compactions"), 2),
                n_ratio(row.get("steps_over_budget"), 1),
                n_ratio(row.get("needed_anchor_recall")),
                n_ratio(row.get("lost_but_needed"), 1),
                n_int(row.get("primary_input_tokens")),
            ]
        )
    parts.append("<h3>Every configuration (means per conversation)</h3>")
    parts.append(
        '<div class="scroll">'
        + table_html(
            [
                "summarizer",
                "max_tokens",
                "keep_recent_tokens",
                "compactions",
                "steps over budget",
                "needed-anchor recall",
                "lost but needed",
                "primary input tokens",
            ],
            rows,
            numeric=range(1, 8),
        )
        + "</div></section>"
    )
    return "".join(parts)


def _section_lost(report: Report, doc: dict[str, Any]) -> str:
    items = doc["lost_but_needed"]
    rec = doc["recommendation"]
    where = f" at <code>{esc(setting_text(rec['max_tokens'], rec['keep_recent_tokens']))}</code>" if rec else ""
    parts = [
        '<section id="lost"><h2>Lost but needed later</h2>',
        f"<p>Anchors a summary dropped{where} that the conversation used again later, while they were no longer in the "
        "context. Re-fetched items (a later tool call had to look them up again) first, then constraints, errors, "
        "commands, "
        "paths, URLs, SHAs, decisions, identifiers and numbers, then the soonest needed.</p>",
    ]
    if not items:
        parts.append("<p>Nothing that was needed later was lost.</p></section>")
        return "".join(parts)
    rows = []
    for item in items:
        lost_by = []
        for entry in item["lost_by"]:
            span = "" if entry["span_start"] is None else f", messages {entry['span_start']}–{entry['span_end']}"
            lost_by.append(
                f"<details><summary><code>{esc(entry['summarizer'])}</code>: compaction #{esc(entry['compaction_id'])} "
                f"at step {esc(entry['step'])}{esc(span)}</summary>"
                f'<pre class="summary">{esc(entry["summary_text"])}{"…" if entry["summary_truncated"] else ""}'
                "</pre></details>"
            )
        rows.append(
            [
                f'<span class="status">{esc(item["type"])}</span>'
                + (' <span class="status" style="color:var(--bad)">re-fetched</span>' if item["refetched"] else "")
                + f'<div class="value">{esc(item["value"])}</div>',
                esc(item["conversation_id"]),
                f'<span class="note">message {esc(item["message_index"])}:</span> {esc(item["source_excerpt"])}',
                f'<span class="note">message {esc(item["next_use_index"])}:</span> {esc(item["next_use_excerpt"])}',
                "".join(lost_by),
            ]
        )
    parts.append(
        table_html(
            [
                "anchor",
                "conversation",
                "where it was (in the span)",
                "needed again",
                "lost by (open for the summary that dropped it)",
            ],
            rows,
            raw=range(5),
            cls="lost",
        )
    )
    parts.append("</section>")
    return "".join(parts)


def _section_costs(report: Report, doc: dict[str, Any]) -> str:
    costs = doc["costs"]
    price = costs["primary_price_usd_per_million"]
    rows = [
        [r["summarizer"], n_int(r["max_tokens"]), n_int(r["keep_recent_tokens"]), n_int(r.get("primary_input_tokens")),
         n_pct(r.get("cached_input_share")), n_ratio(r.get("cache_breaks"), 1), n_ratio(r.get("summary_calls"), 1),
         n_int(r.get("summary_input_tokens")), n_int(r.get("summary_output_tokens")), n_usd(r.get("primary_cost_usd")),
         n_usd(r.get("summary_cost_usd")), n_usd(r.get("total_cost_usd"))]
        for r in costs["rows"]
    ]
    return (
        '<section id="costs"><h2>Costs</h2>'
        f"<p>Per conversation (mean over conversations) for each configuration. Money assumes the primary model "
        f"<code>{esc(costs['primary_model'])}</code> at ${esc(price['input'])} / ${esc(price['cached_input'])} / "
        f"${esc(price['output'])} per million input / cached input / output tokens (list prices as of "
        f"{esc(costs['prices_as_of'])}); offline summarizers cost nothing. Every applied compaction breaks the prompt "
        "cache.</p>"
        + (
            f'<p class="note">No list price is known for {esc(", ".join(costs["unpriced"]))}: their summary calls are '
            'counted '
            "in tokens but priced at $0.</p>"
            if costs.get("unpriced")
            else ""
        )
        + '<div class="scroll">'
        + table_html(
            [
                "summarizer",
                "max_tokens",
                "keep_recent_tokens",
                "primary input tokens",
                "cached share",
                "cache breaks",
                "summary calls",
                "summary input tokens",
                "summary output tokens",
                "primary USD",
                "summary USD",
                "total USD",
            ],
            rows,
            numeric=range(1, 12),
        )
        + "</div></section>"
    )


def _section_glossary(doc: dict[str, Any]) -> str:
    entries = "".join(f"<dt>{esc(g['term'])}</dt><dd>{esc(g['definition'])}</dd>" for g in doc["glossary"])
    return f'<section id="glossary"><h2>Glossary</h2><dl class="glossary">{entries}</dl></section>'


_TOC = (
    ("summary", "Summary"),
    ("study", "What was studied"),
    ("metrics", "Loss by summarizer"),
    ("explore", "Explore a setting"),
    ("timelines", "Timelines"),
    ("sweep", "Sweep"),
    ("lost", "Lost but needed"),
    ("costs", "Costs"),
    ("glossary", "Glossary"),
)


def render_html(report: Report) -> str:
    """The complete, self-contained HTML page."""
    doc = report.document()
    figures = _Figures()
    study = doc["study"]
    body = [
        f"<header><h1>{esc(report.title)}</h1>",
        f'<p class="meta">{esc(study["date"])} · {esc(study["engine"])} · zett_lab '
        f'{esc(study["zett_lab_version"])}</p>',
        '<nav class="toc">'
        + "".join(f'<a href="#{anchor}">{esc(label)}</a>' for anchor, label in _TOC)
        + "</nav></header>",
        _section_summary(report, doc),
        _section_study(report, doc),
        _section_metrics(report, doc, figures),
        _section_explore(report, doc),
        _section_timelines(report, doc, figures),
        _section_sweep(report, doc, figures),
        _section_lost(report, doc),
        _section_costs(report, doc),
        _section_glossary(doc),
        f"<footer>Generated by zett_lab {esc(study['zett_lab_version'])} on {esc(study['date'])}. Self-contained: "
        "this file "
        "loads nothing from the network.</footer>",
    ]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(content_security_policy())}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{esc(report.title)}</title>"
        f"<style>{CSS}</style></head>"
        f"<body><main>{''.join(body)}</main><script>{JS}</script></body></html>\n"
    )


# --- Markdown ------------------------------------------------------------------------------------------


def md_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(md(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(report: Report) -> str:
    """The report's findings and tables as Markdown."""
    doc = report.document()
    study, metrics, rec = doc["study"], doc["metrics"], doc["recommendation"]
    out = [
        f"# {md(report.title)}",
        "",
        f"{md(study['date'])} · {md(study['engine'])} · zett_lab {md(study['zett_lab_version'])}",
        "",
    ]
    out += ["## Summary", ""]
    if rec:
        out.append(
            f"**Recommended setting:** summarizer {md(rec.get('summarizer', ''))}, "
            f"{md(setting_text(rec['max_tokens'], rec['keep_recent_tokens']))}."
        )
        if rec.get("rule"):
            out += ["", md(rec["rule"])]
        out.append("")
    out += ["## What was studied", ""]
    out.append(md_table(["", ""], [
        ("Date", study["date"]), ("Engine", study["engine"]), ("Token counter", study["counter"]),
        ("Summarizers", ", ".join(study["summarizers"])),
        ("max_tokens", ", ".join(n_int(v) for v in study["grid"]["max_tokens"])),
        ("keep_recent_tokens", ", ".join(n_int(v) for v in study["grid"]["keep_recent_tokens"])),
        ("Other replay settings", ", ".join(f"{k}={v}" for k, v in sorted(study["settings"].items()))),
        ("Replays", n_int(study["replays"])),
    ]))
    out += [
        "",
        md_table(
            ["conversation", "file", "format", "messages", "turns", "model steps", "tokens", "probes"],
            [
                (
                    c["id"],
                    c["file"] or "(in memory)",
                    c["format"],
                    n_int(c["messages"]),
                    n_int(c["turns"]),
                    n_int(c["model_steps"]),
                    n_int(c["tokens"]),
                    n_int(c["probes"]),
                )
                for c in study["conversations"]
            ],
        ),
        "",
    ]
    if study["failures"]:
        out += [
            "Replays that failed:",
            "",
            md_table(
                ["conversation", "summarizer", "max_tokens", "keep_recent_tokens", "error"],
                [
                    (f["conversation_id"], f["summarizer"], f["max_tokens"], f["keep_recent_tokens"], f["error"])
                    for f in study["failures"]
                ],
            ),
            "",
        ]
    out += [
        "## Loss by summarizer",
        "",
        f"Mean [{_pct_level(metrics)} paired bootstrap CI] (n units); higher is better.",
        "",
    ]
    by = {(r["summarizer"], r["metric"]): r for r in metrics["rows"]}
    shown = [m for m in REPORT_METRICS if any((s, m) in by for s in report.summarizers)]
    out.append(
        md_table(
            ["summarizer", *(label(m) for m in shown)],
            [
                [s]
                + [
                    ci_text(by[(s, m)]["mean"], by[(s, m)]["ci_low"], by[(s, m)]["ci_high"]) + f" (n={by[(s, m)]['n']})"
                    if (s, m) in by
                    else "n/a"
                    for m in shown
                ]
                for s in report.summarizers
            ],
        )
    )
    out += [
        "",
        md_table(
            [
                "summarizer",
                "replays",
                "compactions applied",
                "rejected (not smaller)",
                "failed",
                "steps over budget",
                "lost but needed per replay",
            ],
            [
                (
                    t["summarizer"],
                    t["replays"],
                    t["compactions"],
                    t["rejected_not_smaller"],
                    t["failed"],
                    t["steps_over_budget"],
                    n_ratio(t["lost_but_needed_per_replay"], 1),
                )
                for t in metrics["totals"]
            ],
        ),
        "",
    ]
    out += ["## Lost but needed later", ""]
    if doc["lost_but_needed"]:
        out.append(
            md_table(
                ["type", "value", "conversation", "needed again at", "lost by"],
                [
                    (
                        i["type"] + (" (re-fetched)" if i["refetched"] else ""),
                        i["value"],
                        i["conversation_id"],
                        f"message {i['next_use_index']}",
                        "; ".join(
                            f"{e['summarizer']} (#{e['compaction_id']} step {e['step']}, messages "
                            f"{e['span_start']}–{e['span_end']})"
                            for e in i["lost_by"]
                        ),
                    )
                    for i in doc["lost_but_needed"]
                ],
            )
        )
    else:
        out.append("Nothing that was needed later was lost.")
    costs = doc["costs"]
    out += [
        "",
        "## Costs",
        "",
        f"Per conversation; primary model {md(costs['primary_model'])} (prices as of {md(costs['prices_as_of'])}).",
        "",
    ]
    out.append(
        md_table(
            [
                "summarizer",
                "max_tokens",
                "keep_recent_tokens",
                "primary input tokens",
                "cached share",
                "summary calls",
                "total USD",
            ],
            [
                (
                    r["summarizer"],
                    n_int(r["max_tokens"]),
                    n_int(r["keep_recent_tokens"]),
                    n_int(r.get("primary_input_tokens")),
                    n_pct(r.get("cached_input_share")),
                    n_ratio(r.get("summary_calls"), 1),
                    n_usd(r.get("total_cost_usd")),
                )
                for r in costs["rows"]
            ],
        )
    )
    out += ["", "## Glossary", ""]
    out += [f"- **{md(g['term'])}**: {md(g['definition'])}" for g in doc["glossary"]]
    out += [
        "",
        "Figures and the interactive explorer are in the HTML report (`zett-lab report ... -o report.html`).",
        "",
    ]
    return "\n".join(out)
