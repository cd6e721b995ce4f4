"""The report's document as plain data (the JSON output, and what the HTML and Markdown show), and its words.

Laid out from a :class:`~zett_lab.report.data.ReportData`, which holds every fact and figure; nothing
is computed here. Beside the data, the document has its title, date and notes, and the words it is
written in: the glossary (:data:`GLOSSARY`, metrics read from the catalogue) and the failures headline.
No value is taken from ``os.environ``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from ...measure.catalogue import default_metrics, label, metric, metrics
from ...records import JSONObject, records
from ...replay.schema import NO_TURN_BOUNDARY, NOT_SMALLER, ONLY_CHECKPOINTS
from ...report.choices import RECOMMEND_COST, RECOMMEND_LOSS
from ...report.data import ReportData
from ...report.tables import DIGITS, MetricSummary
from ...study.choose import constraint_text
from ...study.recommendation import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_FOLDS,
    DEFAULT_OBJECTIVES,
    DEFAULT_SLACK,
    RecommendationRecord,
)
from .formats import UNDEFINED

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
        "step that reported usage, that usage plus the counter over messages appended since (the step table's "
        "source column says which).",
    ),
    (
        "context sent",
        "Tokens (by the same counter) of the context the model step actually received, after any compaction.",
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
        UNDEFINED,
        "An undefined figure, not a zero: there was nothing to measure it over, e.g. a Superseded-only rate where the "
        "span superseded nothing, a recall with no needed anchors, or a mean over no units.",
    ),
    (
        "production summaries",
        "Compactions the recording agent made itself (Claude Code, OpenHands, a zett-agent session recorded with "
        "compaction on, ...), measured on their own span beside the baselines summarizing the same span.",
    ),
    (
        "re-fetched",
        "A later tool call's arguments mention a lost anchor: the agent had to fetch again what the summary "
        f"dropped ({label('refetch_calls')} counts such calls).",
    ),
    _metric("constraint_survival"),
    _metric("probe_presence"),
    _metric("primary_input_tokens"),
    _metric("total_input_tokens"),
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
        f"on both {label(RECOMMEND_COST).lower()} (summed over conversations) and {label(RECOMMEND_LOSS).lower()} "
        "(mean per conversation).",
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


def failure_headline(failures: Mapping[str, object]) -> str:
    """The banner's sentences: how many input files could not be read, how many summary calls and replays failed,
    and what the report left out."""
    out = []
    if failures.get("skipped_files"):
        out.append(
            f"{failures['skipped_files']} input file(s) could not be read: their conversations are not in this "
            "report (listed under What was studied)."
        )
    parts = []
    if failures["summary_calls"]:
        parts.append(f"{failures['summary_calls']} summary call(s) failed")
    if failures["cells"]:
        parts.append(f"{failures['cells']} replay(s) could not run")
    if failures["causes"]:
        out.append(
            "; ".join(parts)
            + f". {failures['unmeasured_replays']} of {failures['replays']} replays are no measurement: they are "
            f"left out of every metric, and the {failures['settings_left_out']} setting(s) they belong to are "
            "never recommended."
        )
    return " ".join(out)


class ReportDocument(TypedDict):
    """The report's data document (:func:`build_document`): what the JSON output holds and the pages show."""

    format: str
    version: int
    title: str
    date: str
    failures: dict[str, object]
    study: dict[str, object]
    alerts: list[dict[str, object]]
    recommendation: RecommendationRecord | None
    metrics: MetricSummary
    results: list[JSONObject]
    lost_but_needed: list[dict[str, object]]
    dropped_constraints: list[dict[str, object]]
    native: list[dict[str, object]]
    costs: dict[str, object]
    explore: dict[str, str]
    glossary: list[dict[str, str]]


def build_document(data: ReportData, *, title: str, date: str, notes: Sequence[str] = ()) -> ReportDocument:
    """The report's data document (what :meth:`Report.to_json` writes)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "title": title,
        "date": date,
        "failures": data.failed,
        "study": {**data.studied, "date": date, "zett_lab_version": _zett_lab_version(), "notes": list(notes)},
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
