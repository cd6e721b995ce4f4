"""What the report states, as plain data: the JSON output, and what the HTML and Markdown show.

Built from a :class:`~zett_lab.study.report_study.ReportData`; nothing is computed here.
Nothing here reads the environment: settings shown are an explicit allow-list of a trace's
settings, source files are shown by name only (never a full path), and no value is taken
from ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from ...records import plain, records
from ...study.report_study import DIGITS, REPORT_METRICS, ReportData

FORMAT = "zett-lab-report"
VERSION = 1

#: Per-replay columns kept in the JSON document's ``results`` (the rest is in the traces).
RESULT_COLUMNS = (
    "conversation_id", "summarizer", "max_tokens", "keep_recent_tokens", "steps", "compactions", "attempts",
    "rejected_not_smaller", "failed", "steps_over_budget", "steps_no_boundary", "steps_only_checkpoints",
    "peak_context_tokens", "primary_input_tokens", *REPORT_METRICS, "lost_but_needed", "refetch_calls",
    "decay_survival_1", "final_survival", "primary_cached_input_tokens", "cached_input_share", "cache_breaks",
    "summary_calls", "summary_input_tokens", "summary_output_tokens", "primary_cost_usd", "summary_cost_usd",
    "total_cost_usd",
)

#: Definitions of every term and metric the report uses (the glossary section).
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("max_tokens", "The engine's threshold. Before every model step it compares its estimate of the context with "
     "max_tokens and compacts when the estimate is strictly greater."),
    ("keep_recent_tokens", "The minimum number of recent tokens the engine keeps verbatim. The cut point walks back "
     "from the end until at least this many tokens are kept, then further back to the start of a user turn."),
    ("estimate", "What the engine compared with max_tokens at a step: the counter over all messages, or, after a model "
     "step that reported usage, that usage plus the counter over messages appended since (estimate_source)."),
    ("context sent", "Tokens (by the same counter) of the context the model step actually received, after any compaction "
     "(context_tokens_after)."),
    ("compaction applied", "The summary replaced the older messages: the context became [system, checkpoint, recent "
     "messages]."),
    ("summary not smaller", "The engine discarded the summary because its checkpoint was not smaller than the span it "
     "would replace; it tries again at the next step, so these attempts cost a summary call each."),
    ("no whole-turn boundary / only earlier checkpoints", "The estimate was over max_tokens but the engine found nothing "
     "to summarize: the cut point snapped back to the start of the conversation (one oversized turn), or only earlier "
     "checkpoints were older than it. The step is sent over budget and no event is published."),
    ("steps over budget", "Model steps whose context sent was still above max_tokens (steps_over_budget)."),
    ("span S_k, tail T_k, future F_k", "For compaction k: S_k are the original messages the checkpoint stands for "
     "(cumulative: a summary of a summary is measured against all of them), T_k the messages kept verbatim, F_k the "
     "messages the recorded conversation went on with."),
    ("anchor", "An exact item a later step may need verbatim, extracted from message text: file paths, URLs, identifiers, "
     "commit SHAs, numbers with units, error strings, shell commands of tool calls, user constraints (always / never / "
     "must / don't sentences) and decisions."),
    ("compression ratio", "CR_k = 1 − tok(Σ_k) / tok(S_k): how much smaller the checkpoint is than the raw span it "
     "replaced (higher is smaller). Averaged over applied compactions."),
    ("context reduction", "1 − (tok(Σ_k) + tok(T_k)) / tok(before): how much smaller the whole dialogue became at the "
     "compaction."),
    ("anchor retention", "|A(S_k) ∩ A(Σ_k)| / |A(S_k)|: the share of the span's anchors still present in the summary. "
     "Averaged over applied compactions."),
    ("needed anchors N_k", "Anchors of the span that the conversation used again later (they occur in F_k) and that are "
     "not in the kept tail T_k: once the span is replaced, only the summary can still show them."),
    ("needed-anchor recall", "NAR_k = |N_k ∩ Σ_k| / |N_k|: the share of the needed anchors the summary kept. Pooled over "
     "applied compactions of a replay (Σ kept / Σ needed). The headline loss metric: higher is better."),
    ("lost but needed", "N_k \\ Σ_k: anchors needed later that the context no longer showed after the compaction. The "
     "report lists the most harmful ones with the span they came from and the summary that dropped them."),
    ("re-fetched", "A later tool call's arguments mention a lost anchor: the agent had to fetch again what the summary "
     "dropped (refetch_calls counts such calls)."),
    ("instruction survival", "The share of the span's user constraints still visible in the summary or the kept tail."),
    ("probe presence", "Gold probes (planted facts with known answers) covered by an applied compaction whose answer is "
     "present, as text, in the context the next step sees. Offline check; no model is asked."),
    ("decay survival", "Of the anchors a summary kept, the share still present in the next applied summary "
     "(decay_survival_1), and in the last one (final_survival): loss compounds when summaries are summarized again."),
    ("primary input tokens", "The context sent summed over all model steps of a replay: what the agent's model is billed "
     "for as input."),
    ("cache break / cached input share", "Prompt-cache model of the cost section: each step's context starts with the "
     "previous step's, so that prefix is read from the provider's cache, except at the first step and whenever a "
     "compaction changed the context (a cache break)."),
    ("cost (USD)", "Primary input (cached and uncached) and output tokens, plus summary-call tokens, priced with the "
     "bundled list prices for the primary model named in the cost section. Offline summarizers cost nothing."),
    ("confidence interval", "95% percentile bootstrap interval of the mean (2,000 resamples, fixed seed), over units "
     "paired across summarizers: one unit is one conversation at one (max_tokens, keep_recent_tokens) setting, and only "
     "units where every summarizer has a value count (n)."),
    ("paired difference", "Mean of A − B over the units both summarizers have, with its bootstrap interval, the share of "
     "units where A is better (win rate) and a two-sided Wilcoxon signed-rank p-value."),
    ("Pareto front", "The configurations (summarizer, max_tokens, keep_recent_tokens) that no other configuration beats "
     "on both mean primary input tokens and mean lost-but-needed anchors."),
    ("recommended setting", "The configuration the report suggests; the rule used is stated next to it."),
)


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
    engines = sorted({str(t.settings.get("zett_agent_version")) for t in traces})
    counters = sorted({str(t.settings.get("counter")) for t in traces})
    shown = {key: plain(first.get(key), DIGITS) for key in ("usage", "usage_overhead", "reasoning_effort", "strict") if key in first}
    return {
        "date": date,
        "engine": "zett-agent " + ", ".join(engines),
        "zett_agent_version": engines[0] if len(engines) == 1 else engines,
        "zett_lab_version": _zett_lab_version(),
        "counter": counters[0] if len(counters) == 1 else counters,
        "counter_note": "o200k_base, exact and memoized (the engine's default counter)" if counters == ["count_tokens"] else None,
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


def build_document(data: ReportData, *, title: str, date: str, notes: Sequence[str] = ()) -> dict[str, Any]:
    """The report's data document (what :meth:`Report.to_json` writes)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": title,
        "date": date,
        "study": study_facts(data, date, notes),
        "recommendation": data.recommendation,
        "metrics": data.metrics,
        "results": records(data.results, RESULT_COLUMNS, digits=DIGITS),
        "lost_but_needed": data.lost_items,
        "costs": data.costs,
        "explore": {"conversation_id": data.explore_id},
        "glossary": [{"term": term, "definition": text} for term, text in GLOSSARY],
    }
