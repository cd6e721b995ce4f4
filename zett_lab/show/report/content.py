"""What the report states, as plain data: the JSON output, and what the HTML and Markdown show.

Built from a :class:`~zett_lab.study.report_study.ReportData`; nothing is computed here.
Nothing here reads the environment: settings shown are an explicit allow-list of a trace's
settings, source files are shown by name only (never a full path), and no value is taken
from ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from ...measure.catalogue import default_metrics, label, metric, metrics
from ...records import plain, records
from ...replay.schema import FAILURE_COLUMNS, NO_TURN_BOUNDARY, NOT_SMALLER, ONLY_CHECKPOINTS
from ...study.recommendation import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_FOLDS,
    DEFAULT_OBJECTIVES,
    DEFAULT_SLACK,
    constraint_text,
)
from ...study.report_lost import DIGITS
from ...study.report_study import ReportData
from ...tokens import EXACT_COUNTER

FORMAT = "zett-lab-report"
VERSION = 1

#: Per-replay columns kept in the JSON document's ``results`` before its metrics (the rest is in the traces).
_RESULT_FIGURES = (
    "conversation_id",
    "summarizer",
    "max_tokens",
    "keep_recent_tokens",
    "steps",
    "compactions",
    "attempts",
)
#: Cost figures kept after the metrics: what the cost section's shares are made of.
_COST_FIGURES = ("primary_cached_input_tokens", "cached_input_share", "summary_calls")


def result_columns() -> tuple[str, ...]:
    """Per-replay columns kept in the JSON document's ``results``: the replay's figures and every metric of the
    catalogue at the conversation level (the rest is in the traces)."""
    return (*_RESULT_FIGURES, *(m.name for m in metrics("conversation")), *_COST_FIGURES)


def _metric(name: str) -> tuple[str, str]:
    """A metric's glossary entry, read from the metric catalogue: its label, definition and direction."""
    entry = metric(name)
    return entry.label, f"{entry.definition} {'Higher' if entry.higher_is_better else 'Lower'} is better."


#: Definitions of every term and metric the report uses (the glossary section); metrics come
#: from the metric catalogue.
GLOSSARY: tuple[tuple[str, str], ...] = (
    (
        "max_tokens",
        "The engine's threshold. Before every model step it compares its estimate of the context with "
        "max_tokens and compacts when the estimate is strictly greater.",
    ),
    (
        "keep_recent_tokens",
        "The minimum number of recent tokens the engine keeps verbatim. The cut point walks back "
        "from the end until at least this many tokens are kept, then further back to the start of a user turn.",
    ),
    (
        "estimate",
        "What the engine compared with max_tokens at a step: the counter over all messages, or, after a model "
        "step that reported usage, that usage plus the counter over messages appended since (estimate_source).",
    ),
    (
        "context sent",
        "Tokens (by the same counter) of the context the model step actually received, after any compaction "
        "(context_tokens_after).",
    ),
    (
        "compaction applied",
        "The summary replaced the older messages: the context became [system, checkpoint, recent messages].",
    ),
    (
        NOT_SMALLER,
        "The engine discarded the summary because its checkpoint was not smaller than the span it "
        "would replace; it tries again at the next step, so these attempts cost a summary call each.",
    ),
    (
        f"{NO_TURN_BOUNDARY} / {ONLY_CHECKPOINTS}",
        "The estimate was over max_tokens but the engine found nothing to summarize: the cut point snapped back to "
        "the start of the conversation (one oversized turn), or only earlier checkpoints were older than it. "
        "The step is sent over budget and no event is published.",
    ),
    _metric("steps_over_budget"),
    (
        "span S_k, tail T_k, future F_k",
        "For compaction k: S_k are the original messages the checkpoint stands for "
        "(cumulative: a summary of a summary is measured against all of them), T_k the messages kept verbatim, F_k the "
        "messages the recorded conversation went on with.",
    ),
    (
        "anchor",
        "An exact item a later step may need verbatim, extracted from message text: file paths, URLs, identifiers, "
        "commit SHAs, numbers with units, error strings, shell commands of tool calls, user constraints (always / "
        "never / must / don't sentences) and decisions.",
    ),
    _metric("compression_ratio"),
    _metric("context_reduction"),
    _metric("anchor_retention"),
    (
        "needed anchors N_k",
        "Anchors of the span that the user or the agent used again later (in its text, tool-call arguments or "
        "commands; reappearing in a tool result does not count) and that are not in the kept tail T_k: once the span "
        "is replaced, only the summary can still show them.",
    ),
    _metric("needed_anchor_recall"),
    _metric("lost_but_needed"),
    _metric("superseded_rate"),
    (
        "production summaries",
        "Compactions the recording agent made itself (Claude Code, OpenHands, a zett-agent session recorded with "
        "compaction on, ...), measured on their own span beside the baselines summarizing the same span.",
    ),
    (
        "re-fetched",
        "A later tool call's arguments mention a lost anchor: the agent had to fetch again what the summary "
        "dropped (refetch_calls counts such calls).",
    ),
    _metric("constraint_survival"),
    _metric("probe_presence"),
    _metric("decay_survival_1"),
    _metric("final_survival"),
    _metric("primary_input_tokens"),
    (
        "cache break / cached input share",
        "Prompt-cache model of the cost section: each step's context starts with the "
        "previous step's, so that prefix is read from the provider's cache, except at the first step and whenever a "
        "compaction changed the context (a cache break).",
    ),
    (
        "cost (USD)",
        "Primary input (cached and uncached) and output tokens, plus summary-call tokens, priced with the "
        "bundled list prices for the primary model named in the cost section. Offline summarizers cost nothing.",
    ),
    (
        "confidence interval",
        "95% percentile bootstrap interval of the mean (2,000 resamples, fixed seed), over units paired across "
        "summarizers: one unit is one conversation at one (max_tokens, keep_recent_tokens) setting, and only units "
        "where every summarizer has a value count (n).",
    ),
    (
        "paired difference",
        "Mean of A − B over the units both summarizers have, with its bootstrap interval, the share of "
        "units where A is better (win rate) and a two-sided Wilcoxon signed-rank p-value.",
    ),
    (
        "Pareto front",
        "The configurations (summarizer, max_tokens, keep_recent_tokens) that no other configuration beats "
        "on both mean primary input tokens and mean lost-but-needed anchors.",
    ),
    (
        "recommended setting",
        "The configuration the report suggests. Settings with a failed replay or summary are never recommended; "
        "constraints rule settings out first (yours, then by default "
        + " and ".join(constraint_text(c).lower() for c in DEFAULT_CONSTRAINTS)
        + ", in every conversation), unless no setting meets them; the rest are ranked by "
        + ", then ".join(label(o).lower() for o in DEFAULT_OBJECTIVES)
        + f" (means per conversation; for all but the last, values within {DEFAULT_SLACK:.0%} of the best count as "
        "equal). The verdict states the rule, the trade-off against the next-best alternatives, and the figures "
        "held out of sample.",
    ),
    (
        "held out",
        f"The check of a recommendation on conversations it was not chosen on: the conversations are dealt into "
        f"{DEFAULT_FOLDS} folds (one per conversation when there are fewer); for each fold the rule chooses a setting "
        "on the other folds, and that setting is scored on the fold. The held-out figures are those scores, beside "
        "the in-sample figures of the recommended setting.",
    ),
)


def glossary() -> list[tuple[str, str]]:
    """:data:`GLOSSARY`, then the entry of every other metric of the catalogue's default set (one registered later)."""
    defined = {term for term, _ in GLOSSARY}
    return [*GLOSSARY, *(_metric(name) for name in default_metrics() if metric(name).label not in defined)]


#: Words of the page (column headers, legends) explained on hover by a glossary entry under another name.
_SAME_AS = {
    "span": "span S_k, tail T_k, future F_k",
    "span (messages)": "span S_k, tail T_k, future F_k",
    "where it was (in the span)": "span S_k, tail T_k, future F_k",
    "threshold crossed, no window": f"{NO_TURN_BOUNDARY} / {ONLY_CHECKPOINTS}",
    NO_TURN_BOUNDARY: f"{NO_TURN_BOUNDARY} / {ONLY_CHECKPOINTS}",
    ONLY_CHECKPOINTS: f"{NO_TURN_BOUNDARY} / {ONLY_CHECKPOINTS}",
    "cached share": "cache break / cached input share",
    "needed again": "needed anchors N_k",
    "re-fetched": "re-fetched",
    "compaction applied": "compaction applied",
    "compactions applied": "compaction applied",
    "compactions": "compaction applied",
    "lost-but-needed": "Lost but needed",
    f"rejected: {NOT_SMALLER}": NOT_SMALLER,
    "failed (summary or engine)": "failed",
    "over budget": "steps_over_budget",
    "source": "estimate",
    "decision": "compaction applied",
}


def definition(term: str) -> str | None:
    """What a word of the page means, for a hover: a catalogue metric's definition and direction (by column
    name or label), else its glossary entry; None for a word the glossary does not define."""
    term = _SAME_AS.get(term, term)
    entry = next((m for m in metrics() if term in (m.name, m.label)), None)
    if entry is not None:
        return _metric(entry.name)[1]
    return dict(GLOSSARY).get(term)


def _zett_lab_version() -> str:
    try:
        from importlib.metadata import version

        return version("zett-lab")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "unknown"


def _file_name(source: Any) -> str | None:
    if not source:
        return None
    return PurePath(str(source)).name


def study_facts(data: ReportData, date: str, notes: Sequence[str]) -> dict[str, Any]:
    """What was studied: conversations, sizes, engine, counter, summarizers, settings, date."""
    traces = data.traces
    first = traces[0].settings
    conversations = []
    for conversation in data.conversations:
        messages = conversation.messages
        title = conversation.metadata.get("title") if isinstance(conversation.metadata, dict) else None
        conversations.append(
            {
                "id": conversation.id,
                "title": title if isinstance(title, str) else None,
                "file": _file_name(conversation.source),
                "format": conversation.format,
                "messages": len(messages),
                "turns": len(conversation.turns),
                "model_steps": sum(1 for m in messages if getattr(m, "role", None) == "assistant"),
                "tokens": data.conversation_tokens[conversation.id],
                "probes": len(conversation.probes),
            }
        )
    engines = sorted({str(t.settings.zett_agent_version) for t in traces})
    counters = sorted({t.settings.counter for t in traces})
    setting = first.setting
    chosen: dict[str, Any] = (
        {}
        if setting is None
        else {
            "usage": setting.usage,
            "usage_overhead": setting.usage_overhead,
            "reasoning_effort": setting.reasoning_effort,
        }
    )
    if first.strict is not None:
        chosen["strict"] = first.strict
    shown = {key: plain(value, DIGITS) for key, value in chosen.items()}
    return {
        "date": date,
        "engine": "zett-agent " + ", ".join(engines),
        "zett_agent_version": engines[0] if len(engines) == 1 else engines,
        "zett_lab_version": _zett_lab_version(),
        "counter": counters[0] if len(counters) == 1 else counters,
        "counter_note": "o200k_base, exact and memoized (the engine's default counter)"
        if counters == [EXACT_COUNTER]
        else None,
        "settings": shown,
        "summarizers": list(data.summarizers),
        "grid": data.grid,
        "replays": len(traces),
        "conversations": conversations,
        "failures": [
            {
                "conversation_id": f.conversation_id,
                "summarizer": f.summarizer,
                "max_tokens": f.max_tokens,
                "keep_recent_tokens": f.keep_recent_tokens,
                "error": f.error,
            }
            for f in data.failures
        ],
        "notes": list(notes),
    }


def failures(data: ReportData) -> dict[str, Any]:
    """What failed (the report's banner): counts per cause, and how many replays are no measurement."""
    counts = data.failure_counts
    return {
        "summary_calls": int(counts.loc[counts["what"] == "summary call", "count"].sum()),
        "cells": int(counts.loc[counts["what"] == "sweep cell", "count"].sum()),
        "replays": data.attempted,
        "unmeasured_replays": data.attempted - len(data.results),
        "settings_left_out": len(data.unmeasured_settings),
        "causes": records(counts, FAILURE_COLUMNS),
    }


def failure_headline(failures: Mapping[str, Any]) -> str:
    """One sentence: how many summary calls and replays failed, and what the report left out."""
    parts = []
    if failures["summary_calls"]:
        parts.append(f"{failures['summary_calls']} summary call(s) failed")
    if failures["cells"]:
        parts.append(f"{failures['cells']} replay(s) could not run")
    return (
        "; ".join(parts)
        + f". {failures['unmeasured_replays']} of {failures['replays']} replays are no measurement: they are "
        f"left out of every metric, and the {failures['settings_left_out']} setting(s) they belong to are never "
        "recommended."
    )


def build_document(data: ReportData, *, title: str, date: str, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report's data document (what :meth:`Report.to_json` writes)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": title,
        "date": date,
        "failures": failures(data),
        "study": study_facts(data, date, notes),
        "alerts": [alert.record() for alert in data.alerts],
        "recommendation": data.recommendation,
        "metrics": data.metrics,
        "results": records(data.results, result_columns(), digits=DIGITS),
        "lost_but_needed": data.lost_items,
        "dropped_constraints": data.dropped_constraints,
        "native": data.native,
        "costs": data.costs,
        "explore": {"conversation_id": data.explore_id},
        "glossary": [{"term": term, "definition": text} for term, text in glossary()],
    }
