"""The report as one self-contained HTML page, rendered from the Jinja2 templates in ``templates/``.

Autoescaping is on for every template: every piece of text that comes from a conversation, a
summary, a file name or a setting is escaped where it is written. Only three kinds of value
pass as they are (:class:`~markupsafe.Markup`): the page's own stylesheet and script, SVG
figures zett_lab drew, and the explorer's JSON, written by :func:`script_json` so that it
cannot end its ``<script>`` element. Figures are inline SVG; the page loads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from ...formatting import count, decimal, number, numbered, percent, usd
from ...measure.catalogue import INDEPENDENT_METRICS, label, label_with_direction
from ...measure.columns import ANCHOR_ROWS
from ...records import read_float, read_int
from ...report.choices import RECOMMEND_COST, RECOMMEND_LOSS
from ...report.data import ReportData
from ...report.tables import CONFIGURATION_COLUMNS
from .. import plots
from .assets import CSS, JS, content_security_policy
from .content import ReportDocument, definition, failure_headline
from .drawing import Figures, FigureView, filled
from .explorer import explorer_view
from .formats import (
    TRUST_NOTE,
    UNDEFINED,
    ci_text,
    confidence_text,
    defined,
    direction_note,
    metric_table,
    outcome_table,
    production_metrics,
    setting_text,
    settings_text,
    trust_cell,
    trust_lines,
)

#: Characters that reorder text around them (bidirectional controls): a name holding U+202E shows its
#: characters in another order than they are stored ("txt.exe" as "exe.txt").
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SHOWN_CONTROLS = str.maketrans({char: f"[U+{ord(char):04X}]" for char in BIDI_CONTROLS})


def neutralise_bidi(text: str) -> str:
    """``text`` with every bidirectional control character shown as ``[U+202E]`` instead of acting on the text around it.

    Applied to the Markdown report, which has no style to isolate them (the HTML page isolates each text
    that holds one, so it reorders only itself).
    """
    return text.translate(_SHOWN_CONTROLS)


def script_json(data: object) -> str:
    """JSON that is safe inside a ``<script>`` element (no ``<``, ``>``, ``&``, U+2028/9 left)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


@dataclass(frozen=True)
class Header:
    """A column header: the words shown, and what they mean (shown on hover), when the page defines them."""

    text: str
    title: str | None = None


def header(name: str | Header) -> Header:
    """A column's header: a metric's catalogue label with its definition, else the word with its glossary entry."""
    return name if isinstance(name, Header) else Header(label(name), definition(name))


def term(name: str, text: str | None = None) -> Markup:
    """A word of the page with its meaning on hover (its catalogue definition or glossary entry), where it first
    appears; the word alone when the page does not define it."""
    meaning = definition(name)
    if meaning is None:
        return Markup.escape(text or name)
    return Markup('<abbr class="term" title="{}">{}</abbr>').format(meaning, text or name)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(__package__, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        int_text=count,
        numbered=numbered,
        number=number,
        ratio=decimal,
        pct=percent,
        usd=usd,
        defined=defined,
        settings_text=settings_text,
        metric_label=label,
        header=header,
        script_json=lambda data: Markup(script_json(data)),
    )
    env.globals.update(
        UNDEFINED=UNDEFINED,
        setting_text=setting_text,
        ci_text=ci_text,
        direction_note=direction_note,
        outcome_table=outcome_table,
        trust_lines=trust_lines,
        trust_cell=trust_cell,
        TRUST_NOTE=TRUST_NOTE,
        term=term,
    )
    return env


_ENV = _environment()


def _figures(data: ReportData, document: Mapping[str, Any], figures: Figures) -> dict[str, Any]:
    """Every figure of the page, planned in page order (drawn by ``figures``: :func:`_drawn`)."""
    out: dict[str, Any] = {"comparison": None, "anchors": None, "timelines": [], "pareto": None}
    rec = document["recommendation"]
    shown, _ = metric_table(document["metrics"], data.summarizers)
    if data.comparison is not None and len(data.comparison.summary):
        # the anchor metrics and one that does not depend on their vocabulary (the anchors baseline is built from it)
        anchor = ("needed_anchor_recall", "anchor_retention", "constraint_survival")
        independent = [m for m in INDEPENDENT_METRICS if m in shown][:1]
        headline = [m for m in anchor if m in shown] + independent
        out["comparison"] = figures.add(
            partial(plots.summarizer_comparison, data.comparison, metrics=headline),
            f"Means with {confidence_text(document['metrics'])} bootstrap intervals, per summarizer.",
        )
    if rec is not None:
        anchors = [data.anchor_flags_for(t) for _, t in data.cell_traces(rec["max_tokens"], rec["keep_recent_tokens"])]
        anchors = [a for a in anchors if len(a)]
        if anchors:
            out["anchors"] = figures.add(
                partial(plots.anchor_retention, pd.concat(anchors, ignore_index=True), count_column=ANCHOR_ROWS),
                f"Anchor retention and needed-anchor recall per anchor type at "
                f"{setting_text(rec['max_tokens'], rec['keep_recent_tokens'])}, all summarizers pooled.",
            )
        out["timelines"] = _timelines(data, rec, figures)
    out.update(_sweep_figures(data, rec, figures))
    return out


def _timelines(data: ReportData, rec: Mapping[str, Any], figures: Figures) -> list[FigureView]:
    """The context timelines at the recommended setting (of :attr:`ReportData.timeline_ids`), busiest first: most
    compactions applied, then most steps over budget (the page shows the first and folds the others)."""
    traces = {
        conversation_id: data.trace_for(
            conversation_id, rec["summarizer"], rec["max_tokens"], rec["keep_recent_tokens"]
        )
        for conversation_id in data.timeline_ids
    }
    summaries = {i: t.summary() for i, t in traces.items() if t is not None}
    order = sorted(
        traces,
        key=lambda i: (
            (-summaries[i]["compactions_applied"], -summaries[i]["steps_over_budget"]) if i in summaries else (1, 0)
        ),
    )
    views = []
    for conversation_id in order:
        trace = traces[conversation_id]
        if trace is None:
            views.append(FigureView(None, "", conversation_id))
            continue
        summary = summaries[conversation_id]
        caption = (
            f"{conversation_id}: {summary['compactions_applied']} compaction(s) applied, "
            f"{count(summary['steps_over_budget'])} of {count(summary['steps'])} steps over budget, "
            f"peak {count(summary['peak_context'])} tokens."
        )
        # drawn here: a trace holds its whole conversation, too much to send to a worker
        views.append(figures.add(partial(plots.timeline, trace), caption, conversation_id, here=True))
    return views


def _sweep_figures(data: ReportData, rec: Mapping[str, Any] | None, figures: Figures) -> dict[str, Any]:
    """Heatmaps over the grid (every summarizer on one colour scale) and the Pareto front."""
    results = data.results
    highlight = (rec["max_tokens"], rec["keep_recent_tokens"]) if rec else None
    recall_map = figures.add(
        partial(
            plots.heatmaps,
            results,
            "needed_anchor_recall",
            by="summarizer",
            panels=data.summarizers,
            highlight={rec["summarizer"]: highlight} if rec and highlight else None,
            title=f"{label('needed_anchor_recall')} per summarizer (mean over conversations), one colour scale",
        ),
        f"{label_with_direction('needed_anchor_recall')}: the same colour is the same value in every panel; "
        "the recommended setting is outlined in its summarizer's panel.",
    )
    chosen = rec.get("summarizer") if rec else data.summarizers[0]

    def chosen_map(metric: str, caption: str) -> FigureView:
        """A heatmap of one metric for the recommended (or first) summarizer."""
        title = f"{label(metric)} — {chosen}"
        figure = partial(plots.heatmap, results, metric, where={"summarizer": chosen}, highlight=highlight, title=title)
        return figures.add(figure, caption)

    cost_map = chosen_map(
        "primary_input_tokens", f"{label('primary_input_tokens')} per conversation (lower is cheaper), {chosen}."
    )
    over_budget_map = chosen_map(
        "steps_over_budget", f"Model steps sent over max_tokens per conversation (lower is better), {chosen}."
    )
    pareto = None
    if RECOMMEND_COST in results and RECOMMEND_LOSS in results:
        setting = {k: rec[k] for k in ("summarizer", "max_tokens", "keep_recent_tokens")} if rec else None
        pareto = figures.add(
            partial(plots.pareto, results, cost=RECOMMEND_COST, loss=RECOMMEND_LOSS, highlight=setting),
            f"Every configuration: {label(RECOMMEND_COST).lower()} summed over conversations against "
            f"{label(RECOMMEND_LOSS).lower()} per conversation (mean); the dashed staircase is the Pareto "
            "front, each of its points labelled summarizer max_tokens/keep_recent_tokens; the star is the "
            "recommended setting.",
        )
    return {"recall_map": recall_map, "cost_map": cost_map, "over_budget_map": over_budget_map, "pareto": pareto}


def _alerts(data: ReportData, document: Mapping[str, Any], figures: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The document's alerts, each with its evidence as ``(anchor, words)`` links to this page (a timeline's
    anchor is its place among the page's timeline figures)."""
    timelines = {view.conversation_id: f"timeline-{i}" for i, view in enumerate(figures["timelines"]) if view.svg}
    rows = {
        (c["summarizer"], read_int(c, "max_tokens"), read_int(c, "keep_recent_tokens")): f"configuration-{i}"
        for i, c in enumerate(data.configurations)
    }
    failures = bool(document["failures"]["causes"] or document["failures"].get("skipped_files"))

    def anchor(evidence: Mapping[str, Any]) -> str | None:
        section = evidence["section"]
        if section == "timeline":
            return timelines.get(evidence["conversation_id"], "timelines" if document["recommendation"] else None)
        if section == "configuration":
            return rows.get(tuple(evidence["setting"]), "sweep")
        if section == "failures":
            return "failures" if failures else None
        return str(section)

    views = []
    for alert in document["alerts"]:
        links = [(anchor(e), e["text"]) for e in alert["evidence"]]
        views.append({**alert, "links": [(href, text) for href, text in links if href]})
    return views


def render_html(data: ReportData, document: ReportDocument, pool: Executor | None = None) -> str:
    """The complete, self-contained HTML page of a report's data and document.

    ``pool``: a process pool (the one the report's sweep ran on) whose workers draw the figures while this process
    builds the explorer; None: all here. The same page either way.
    """
    metrics = document["metrics"]
    shown, by = metric_table(document["metrics"], data.summarizers)
    recall = [r for r in metrics["rows"] if r["metric"] == "needed_anchor_recall" and r.get("mean") is not None]
    planned = Figures()
    figures = _figures(data, document, planned)
    planned.start(pool)
    explore = explorer_view(data)
    figures = _drawn(figures, planned.drawn())
    page = _ENV.get_template("report.html.j2").render(
        title=document["title"],
        failures=document["failures"],
        failure_headline=failure_headline(document["failures"]),
        study=document["study"],
        rec=document["recommendation"],
        metrics=metrics,
        costs=document["costs"],
        glossary=document["glossary"],
        lost_items=document["lost_but_needed"],
        dropped_constraints=document.get("dropped_constraints", []),
        native=document["native"],
        native_skipped=data.native_skipped,
        native_metrics=production_metrics(document["native"]),
        summarizers=data.summarizers,
        grid=data.grid,
        confidence=confidence_text(metrics),
        best_recall=max(recall, key=lambda r: read_float(r, "mean") or 0.0) if recall else None,
        alerts=_alerts(data, document, figures),
        shown_metrics=shown,
        metric_rows=by,
        figures=figures,
        conversation_count=len(data.conversations),
        explore=explore,
        configurations=data.configurations,
        configuration_columns=CONFIGURATION_COLUMNS,
        css=Markup(CSS),
        js=Markup(JS),
        csp=content_security_policy(),
    )
    return page + "\n"


def _drawn(figures: Mapping[str, Any], svgs: dict[int, Markup]) -> dict[str, Any]:
    """The page's figures (:func:`_figures`) with their drawn SVG."""
    return {
        key: [filled(view, svgs) for view in value] if isinstance(value, list) else filled(value, svgs)
        for key, value in figures.items()
    }


def render_production(entries: Sequence[Mapping[str, object]], skipped: Sequence[str] = ()) -> str:
    """The "Production summaries" section alone (entries of :func:`zett_lab.report.production.production_entries`)."""
    template = _ENV.get_template("production.html.j2")
    return template.render(native=entries, native_skipped=list(skipped), native_metrics=production_metrics(entries))


def render_frame(page: str) -> str:
    """A page inside an isolated ``<iframe srcdoc>`` (for notebooks)."""
    return _ENV.get_template("frame.html.j2").render(page=page)
