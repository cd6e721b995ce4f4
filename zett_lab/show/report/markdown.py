"""The report's findings and tables as Markdown (figures and the explorer are in the HTML page only).

Every piece of text goes through :func:`md`: HTML-escaped, Markdown punctuation and table pipes
neutralized, line breaks collapsed, so no value can start a table cell, a link or markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...formatting import count, decimal, number, numbered, percent, usd
from ...measure.catalogue import label
from ...report.data import ReportData
from .content import ReportDocument, failure_headline
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
    settings_text,
    trust_cell,
    trust_lines,
)


def md(value: object) -> str:
    """Text for a Markdown table cell or paragraph: HTML escaped, pipes and line breaks neutralized."""
    text = html.escape("" if value is None else str(value), quote=False)
    text = " ".join(text.split())
    for char in "\\`*_[]|":
        text = text.replace(char, "\\" + char)
    return text


def md_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table: a header row, then one row per item, every cell through :func:`md`."""
    lines = ["| " + " | ".join(md(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _summary(document: Mapping[str, Any]) -> list[str]:
    study, rec = document["study"], document["recommendation"]
    out = [
        f"# {md(document['title'])}",
        "",
        f"{md(study['date'])} · {md(study['engine'])} · zett_lab {md(study['zett_lab_version'])}",
        "",
    ]
    failures = document["failures"]
    if failures["causes"] or failures.get("skipped_files"):
        out += [f"> **{md(failure_headline(failures))}**"]
        out += [">"] if failures["causes"] else []
        out += [
            f"> - {c['count']} {md(c['what'])}(s), {md(c['summarizer'])}: {md(c['cause'])}" for c in failures["causes"]
        ]
        out.append("")
    if document["alerts"]:
        out += ["## Alerts", ""]
        out += [f"- **{md(a['title'])}.** {md(a['detail'])}" for a in document["alerts"]]
        out.append("")
    out += ["## Summary", ""]
    if rec:
        held, validity = rec["held_out"], document["metrics"]["validity"]
        out += [md(rec["verdict"]), ""]
        if rec["caveats"]:
            out += ["Before adopting it:", "", *(f"- {md(caveat)}" for caveat in rec["caveats"]), ""]
        out += [
            md_table(
                [
                    "per conversation",
                    "in sample",
                    "held out" if held["folds"] else "held out (not checked)",
                    "how far to trust it",
                ],
                [
                    (label(c), number(v), number(held["figures"].get(c)), trust_cell(validity.get(c)))
                    for c, v in rec["figures"].items()
                ],
            ),
            "",
            md(f"{rec['rule']} {held['note']} {TRUST_NOTE}."),
            "",
        ]
    return out


def _study(study: Mapping[str, Any]) -> list[str]:
    out = ["## What was studied", ""]
    out.append(
        md_table(
            ["", ""],
            [
                ("Date", study["date"]),
                ("Engine", study["engine"]),
                ("Token counter", study["counter"]),
                ("Summarizers", ", ".join(study["summarizers"])),
                *([("Engines compared", ", ".join(study["engines"]))] if study.get("engines") else []),
                ("max_tokens", ", ".join(count(v) for v in study["grid"]["max_tokens"])),
                ("keep_recent_tokens", ", ".join(count(v) for v in study["grid"]["keep_recent_tokens"])),
                ("Other replay settings", settings_text(study["settings"])),
                ("Replays", count(study["replays"])),
            ],
        )
    )
    out += [
        "",
        md_table(
            ["conversation", "file", "format", "messages", "turns", "model steps", "tokens", "probes"],
            [
                (
                    c["id"],
                    c["file"] or "(in memory)",
                    c["format"],
                    count(c["messages"]),
                    count(c["turns"]),
                    count(c["model_steps"]),
                    count(c["tokens"]),
                    count(c["probes"]),
                )
                for c in study["conversations"]
            ],
        ),
        "",
    ]
    if study.get("skipped_files"):
        out += [
            "Files that could not be read (their conversations are not in this report):",
            "",
            md_table(["file", "why"], [(f["file"], f["reason"]) for f in study["skipped_files"]]),
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
    return out


def _metrics(document: Mapping[str, Any], summarizers: list[str]) -> list[str]:
    metrics = document["metrics"]
    shown, by = metric_table(document["metrics"], summarizers)
    compared = document["study"].get("compared", "summarizer")

    def cell(name: str, metric: str) -> str:
        row = by.get((name, metric))
        return UNDEFINED if row is None else f"{ci_text(row['mean'], row['ci_low'], row['ci_high'])} (n={row['n']})"

    out = [
        f"## Loss by {compared}",
        "",
        f"Mean [{confidence_text(metrics)} paired bootstrap CI] (n units). {direction_note(shown)}",
        "",
    ]
    out.append(
        md_table([compared, *(label(m) for m in shown)], [[s, *(cell(s, m) for m in shown)] for s in summarizers])
    )
    trust, sources = trust_lines(metrics["validity"])
    out += [*(f"\n**Note:** {note}" for note in metrics["notes"])]
    out += [
        "",
        "**How far to trust these metrics**: precision and recall of what each one counts, checked against "
        "people's labels on real conversations (95% intervals).",
        "",
        *(f"- {line}" for line in trust),
        *(f"\nMeasured on {source}." for source in sources),
    ]
    out += ["", md_table(*outcome_table(metrics["totals"])), ""]
    return out


def _dropped(items: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["", "### Constraints dropped", ""]
    if not items:
        return [*out, "No summary dropped a rule."]
    rows = [
        (
            i["value"],
            i["conversation_id"],
            f"message {i['message_index']}",
            ", ".join(f"{e['summarizer']} (#{e['compaction_id']})" for e in i["dropped_by"]),
        )
        for i in items
    ]
    return [*out, md_table(["rule", "conversation", "stated in", "dropped by"], rows)]


def _lost(items: Sequence[Mapping[str, Any]]) -> list[str]:
    out = ["## Lost but needed later", ""]
    if not items:
        return [*out, "Nothing that was needed later was lost."]
    out += [
        f"{count(len(items))} distinct item(s), lost {count(sum(i['losses'] for i in items))} times in all: once for "
        f"each compaction that dropped one, as {label('lost_but_needed').lower()} counts them.",
        "",
    ]
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
                        f"{e['summarizer']} ({_compactions(e)} at step {e['step']}, messages {e['span_start']}–"
                        f"{e['span_end']}, needed again at message {e['next_use_index']})"
                        for e in i["lost_by"]
                    ),
                )
                for i in items
            ],
        )
    )
    return out


def _compactions(entry: Mapping[str, Any]) -> str:
    """The compactions of a lost-by entry: ``#5`` alone, or ``compactions #5–#7; the first (#5)``."""
    first = f"#{entry['compaction_id']}"
    ids = entry["compaction_ids"]
    return f"compaction {first}" if len(ids) == 1 else f"compactions {numbered(ids)}; the first ({first})"


def _production(entries: Sequence[Mapping[str, Any]], skipped: Sequence[str]) -> list[str]:
    """Recorded production summaries, each beside the baselines on its span (nothing without any)."""
    if not entries:
        return []
    shown = production_metrics(entries)
    out = ["", "## Production summaries", "", direction_note(shown), ""]
    if skipped:
        out += [
            md(
                f"Not summarized on these spans: {', '.join(skipped)} (known here only by identity: a provider named in saved results is never called by a report; "
                f"name it with --summarizer on this run, or native_baselines= in Python)."
            ),
            "",
        ]
    for e in entries:
        agent = (
            f"{count(e['tokens_before'])} tokens by the agent's count"
            if e["tokens_before"] is not None
            else "no token figure in the log"
        )
        out += [
            f"### {md(e['subject'])} · {md(e['conversation_id'])} · compaction #{e['native_id']}",
            "",
            md(
                f"{e['trigger'] or e['kind']}, before message {e['position']}: {agent}, {count(e['estimate_before'])} by "
                f"zett-agent's estimate; it replaced messages {e['span_start']}–{e['span_end']} ({count(e['span_tokens'])} tokens)."
            ),
            "",
        ]
        if e["summary_missing"]:
            out += ["**The log lost this summary's text**: its own metrics cannot be measured.", ""]
        rows = [
            (
                name,
                v["status"],
                *(defined(count(v[m]) if m == "lost_but_needed" else decimal(v[m], 2)) for m in shown),
            )
            for name, v in e["summarizers"].items()
        ]
        out.append(md_table(["summarizer", "status", *(label(m) for m in shown)], rows))
        lost = e["summarizers"][e["subject"]]["lost"]
        if lost:
            out += ["", "Used again later but dropped by the production summary: " + ", ".join(md(v) for v in lost)]
        out.append("")
    return out


def _costs(costs: Mapping[str, Any]) -> list[str]:
    out = [
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
                label("primary_input_tokens"),
                "cached share",
                "summary calls",
                label("total_cost_usd"),
            ],
            [
                (
                    r["summarizer"],
                    count(r["max_tokens"]),
                    count(r["keep_recent_tokens"]),
                    count(r.get("primary_input_tokens")),
                    percent(r.get("cached_input_share")),
                    decimal(r.get("summary_calls"), 1),
                    usd(r.get("total_cost_usd")),
                )
                for r in costs["rows"]
            ],
        )
    )
    return out


def render_markdown(data: ReportData, document: ReportDocument) -> str:
    """The report's findings and tables as Markdown."""
    out = _summary(document) + _study(document["study"]) + _metrics(document, data.summarizers)
    out += _lost(document["lost_but_needed"]) + _dropped(document.get("dropped_constraints", []))
    out += _production(document["native"], data.native_skipped)
    out += _costs(document["costs"])
    out += ["", "## Glossary", ""]
    out += [f"- **{md(g['term'])}**: {md(g['definition'])}" for g in document["glossary"]]
    out += [
        "",
        "Figures and the interactive explorer are in the HTML report (`zett-lab report ... -o report.html`).",
        "",
    ]
    return "\n".join(out)
