"""What a reader must know before any figure: alerts computed from a study's results, as typed data.

Each :class:`Alert` says what happened, with its numbers, what to do about it, and where the evidence
is (:class:`Evidence`: a section of the report, a conversation's timeline, a setting's row). The kinds, most
severe first:

- ``skipped_files``: files of the input folders that could not be read (their conversations are not studied);
- ``failed_summaries``: summary calls or replays that failed (their settings are never recommended);
- ``over_budget``: model steps sent over ``max_tokens`` at the recommended setting, by cause; where no
  whole-turn boundary was the cause, the example ``SplitTurnCompaction`` engine cuts inside a turn;
- ``thrash``: back-to-back compactions that free less than a tenth of the context, or compactions that
  leave the system prompt and the kept tail at or above ``max_tokens``;
- ``superseded``: a summarizer that carries only a stale value for more changed items than the recommendation
  tolerates;
- ``own_vocabulary``: a summarizer built from the metric's own vocabulary (the ``anchors`` baseline): on the
  anchor metrics it partly scores the metric against itself.

:func:`study_alerts` computes them once, in the study stage; :mod:`zett_lab.show` only displays them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

import pandas as pd

from ..formatting import count, number, percent
from ..load import SkippedFile
from ..measure.catalogue import INDEPENDENT_METRICS, label, metric, metrics
from ..measure.metrics.thrash_compactions import THRASH_FREED_SHARE
from ..replay.schema import NO_TURN_BOUNDARY, NOT_SMALLER, ONLY_CHECKPOINTS
from ..summarizers import scored_against_itself
from .choose import Constraint, constraint_text, measured_cells
from .grid import STOCK_ENGINE
from .recommendation import DEFAULT_CONSTRAINTS, Recommendation

AlertKind = Literal["skipped_files", "failed_summaries", "over_budget", "thrash", "superseded", "own_vocabulary"]
Severity = Literal["error", "warning", "info"]
#: Where evidence is on a report page: its failure banner, "What was studied", a conversation's timeline at the recommended
#: setting, one setting's row of the table of every configuration, the loss table, the recommendation.
Section = Literal["failures", "study", "timeline", "configuration", "metrics", "recommendation"]

#: Settings or conversations an alert names at most.
NAMED = 3


@dataclass(frozen=True)
class Evidence:
    """Where the evidence of an alert is: a section of the report (with a conversation or a setting)."""

    section: Section
    #: The link's words.
    text: str
    conversation_id: str | None = None
    #: ``(summarizer, max_tokens, keep_recent_tokens)`` of a configuration row.
    setting: tuple[str, int, int] | None = None


@dataclass(frozen=True)
class Alert:
    """One thing a reader must know first: what happened (``title``), its numbers and what to do (``detail``),
    and where to see it (``evidence``). ``figures`` holds the numbers the text states."""

    kind: AlertKind
    severity: Severity
    title: str
    detail: str
    evidence: tuple[Evidence, ...] = ()
    figures: Mapping[str, float] = field(default_factory=dict)

    def record(self) -> dict[str, object]:
        """JSON-ready plain data."""
        return {
            "kind": self.kind,
            "severity": self.severity,
            "title": self.title,
            "detail": self.detail,
            "evidence": [
                {
                    "section": e.section,
                    "text": e.text,
                    "conversation_id": e.conversation_id,
                    "setting": list(e.setting) if e.setting else None,
                }
                for e in self.evidence
            ],
            "figures": {k: float(v) for k, v in self.figures.items()},
        }


_ORDER: dict[Severity, int] = {"error": 0, "warning": 1, "info": 2}


def study_alerts(
    results: pd.DataFrame,
    recommendation: Recommendation | None = None,
    failure_counts: pd.DataFrame | None = None,
    identities: Mapping[str, str] | None = None,
    skipped_files: Sequence[SkippedFile] = (),
) -> list[Alert]:
    """Every alert of a study, most severe first.

    Args:
        results: one row per replay (a sweep's or a report's results; failed cells are left out here).
        recommendation: the recommended setting (over-budget steps are counted at it; without one, over every
            replay).
        failure_counts: failed summary calls and replays per cause (``Sweep.failure_counts``).
        identities: summarizer label -> its identity (default: the results' ``summarizer_identity`` column).
        skipped_files: files of the input folders that could not be read (``Sweep.skipped_files``).
    """
    measured = results[measured_cells(results)] if len(results) else results
    found = [
        *_skipped(skipped_files),
        *_failed(results, failure_counts),
        *_over_budget(measured, recommendation),
        *_thrash(measured, recommendation),
        *_superseded(measured, recommendation),
        *_own_vocabulary(measured, identities, recommendation),
    ]
    return sorted(found, key=lambda a: _ORDER[a.severity])


def _sum(rows: pd.DataFrame, column: str) -> int:
    return int(pd.to_numeric(rows[column], errors="coerce").fillna(0).sum()) if column in rows else 0


def _setting_rows(results: pd.DataFrame, recommendation: Recommendation) -> pd.DataFrame:
    at = (
        (results["summarizer"] == recommendation.summarizer)
        & (results["max_tokens"] == recommendation.max_tokens)
        & (results["keep_recent_tokens"] == recommendation.keep_recent_tokens)
    )
    if "engine" in results:
        at &= results["engine"] == recommendation.engine
    return results[at]


def _setting_words(summarizer: str, max_tokens: int, keep_recent_tokens: int) -> str:
    return f"{summarizer} at max_tokens={count(max_tokens)}, keep_recent_tokens={count(keep_recent_tokens)}"


def _skipped(skipped_files: Sequence[SkippedFile]) -> list[Alert]:
    if not skipped_files:
        return []
    first = skipped_files[0]
    return [
        Alert(
            "skipped_files",
            "error",
            f"{count(len(skipped_files))} input file(s) could not be read",
            f"Their conversations are not in this study (first: {PurePath(first['path']).name}: {first['reason']}). Repair or "
            "remove them and run again, or accept the study without them.",
            (Evidence("study", "every file not read"),),
            {"skipped_files": len(skipped_files)},
        )
    ]


def _failed(results: pd.DataFrame, failure_counts: pd.DataFrame | None) -> list[Alert]:
    counts = failure_counts if failure_counts is not None else pd.DataFrame(columns=["what", "count"])
    calls = int(counts.loc[counts["what"] != "sweep cell", "count"].sum()) if len(counts) else 0
    cells = int(counts.loc[counts["what"] == "sweep cell", "count"].sum()) if len(counts) else 0
    if not calls and not cells:
        return []
    unmeasured = results[~measured_cells(results)] if len(results) else results
    keys = [c for c in ("engine", "summarizer", "max_tokens", "keep_recent_tokens") if c in unmeasured]
    settings = len(unmeasured[keys].drop_duplicates()) if keys and len(unmeasured) else 0
    every = bool(keys) and settings == len(results[keys].drop_duplicates())
    nothing = " Every setting has one, so no setting is recommended." if every else ""
    what = [f"{count(calls)} summary call(s) failed"] if calls else []
    what += [f"{count(cells)} replay(s) could not run"] if cells else []
    first = counts.sort_values("count", ascending=False, kind="stable").iloc[0]
    return [
        Alert(
            "failed_summaries",
            "error",
            "; ".join(what),
            f"Most often ({count(first['count'])}×, {first.get('summarizer', '')}): {first.get('cause', '')}. "
            f"{count(len(unmeasured))} replay(s) are no measurement: they are left out of every metric, and the "
            f"{count(settings)} setting(s) they belong to are never recommended.{nothing}",
            (Evidence("failures", "every cause"),),
            {"summary_calls": calls, "replays": cells, "unmeasured_replays": len(unmeasured), "settings": settings},
        )
    ]


def _over_budget(results: pd.DataFrame, recommendation: Recommendation | None) -> list[Alert]:
    rows = _setting_rows(results, recommendation) if recommendation is not None else results
    over = _sum(rows, "steps_over_budget")
    if not over:
        return []
    where = "at the recommended setting" if recommendation is not None else "over every replay"
    per = rows.groupby("conversation_id")["steps_over_budget"].sum()
    per = per[per > 0].sort_values(ascending=False, kind="stable")
    causes = {
        NO_TURN_BOUNDARY: _sum(rows, "steps_no_boundary"),
        ONLY_CHECKPOINTS: _sum(rows, "steps_only_checkpoints"),
        NOT_SMALLER: _sum(rows, "rejected_not_smaller"),
    }
    causes = {k: v for k, v in causes.items() if v}
    rest = over - sum(causes.values())
    named = ", ".join(f"{c} ({count(n)})" for c, n in per.head(NAMED).items())
    more = f" and {len(per) - NAMED} more" if len(per) > NAMED else ""
    parts = [f"In {count(len(per))} of {count(rows['conversation_id'].nunique())} conversations: {named}{more}."]
    if causes:
        parts.append(
            "Why, at the steps over the threshold: "
            + "; ".join(f"{reason} at {count(n)} step(s)" for reason, n in causes.items())
            + (f"; {count(rest)} other step(s) were still over after the compaction" if rest > 0 else "")
            + "."
        )
    engine = recommendation.engine if recommendation is not None else STOCK_ENGINE
    if (NO_TURN_BOUNDARY in causes or ONLY_CHECKPOINTS in causes) and engine == STOCK_ENGINE:
        parts.append(
            "The stock engine never cuts inside a turn, so one turn larger than max_tokens is sent whole: the example "
            "SplitTurnCompaction (zett_lab.SplitTurnCompaction, --engine split-turn) cuts between complete tool "
            "groups inside a turn; compare it with --engine stock --engine split-turn."
        )
    steps = _sum(rows, "steps")
    evidence = tuple(Evidence("timeline", f"timeline of {c}", conversation_id=str(c)) for c in per.head(NAMED).index)
    if recommendation is not None and recommendation.unmet:
        evidence += (Evidence("recommendation", "the recommendation"),)
    return [
        Alert(
            "over_budget",
            "warning",
            f"{count(over)} of {count(steps)} model steps {where} were sent over max_tokens",
            " ".join(parts),
            evidence,
            {"steps_over_budget": over, "steps": steps, **{f"steps: {k}": v for k, v in causes.items()}},
        )
    ]


def _thrash(results: pd.DataFrame, recommendation: Recommendation | None) -> list[Alert]:
    columns = [c for c in ("thrash_compactions", "tail_over_budget") if c in results]
    if not columns or not len(results):
        return []
    keys = ["summarizer", "max_tokens", "keep_recent_tokens"]
    per = results.groupby(keys, sort=True)[columns].sum()
    per = per[(per > 0).any(axis=1)]
    if not len(per):
        return []
    per = per.assign(_total=per.sum(axis=1)).sort_values("_total", ascending=False, kind="stable")
    thrash, tail = _sum(per, "thrash_compactions"), _sum(per, "tail_over_budget")
    what = []
    if thrash:
        what.append(
            f"{count(thrash)} back-to-back compaction(s) freed less than {percent(THRASH_FREED_SHARE, 0)} of the "
            "context"
        )
    if tail:
        what.append(f"{count(tail)} compaction(s) left the system prompt and the kept tail at or above max_tokens")
    shown = len(per) if len(per) <= NAMED + 1 else NAMED  # naming one more beats "1 more setting(s)"
    named = "; ".join(f"{_setting_words(*key)} ({count(row['_total'])})" for key, row in per.head(shown).iterrows())
    more = len(per) - shown
    # "most at" only when the settings named have more than the rest
    lead = "most at" if more > 0 and per["_total"].iloc[shown - 1] > per["_total"].iloc[shown] else "at"
    where = f"{lead} {named}; and {count(more)} more setting(s)" if more > 0 else f"at {named}"
    chosen = (
        (recommendation.summarizer, recommendation.max_tokens, recommendation.keep_recent_tokens)
        if recommendation is not None
        else None
    )
    recommended = " The recommended setting is one of them." if chosen in set(per.index) else ""
    return [
        Alert(
            "thrash",
            "warning",
            f"Compactions that free little room, at {count(len(per))} setting(s)",
            f"{' and '.join(what).capitalize()}: {where}.{recommended} Each costs a summary call and leaves "
            "the context near or over max_tokens, so the next steps compact again or go over budget: a "
            "keep_recent_tokens close to max_tokens leaves little to summarize (lower keep_recent_tokens or raise "
            "max_tokens).",
            tuple(
                Evidence("configuration", _setting_words(*key), setting=(str(key[0]), int(key[1]), int(key[2])))
                for key in per.head(NAMED).index
            ),
            {"thrash_compactions": thrash, "tail_over_budget": tail, "settings": len(per)},
        )
    ]


def _tolerance(recommendation: Recommendation | None) -> float:
    """The superseded-only rate the recommendation tolerates: its constraint on it, else the default one."""
    if recommendation is not None:
        for check in recommendation.constraints:
            if check.constraint.column == "superseded_rate" and check.constraint.op in ("<", "<="):
                return check.constraint.value
    return next(c.value for c in DEFAULT_CONSTRAINTS if c.column == "superseded_rate")


def _superseded(results: pd.DataFrame, recommendation: Recommendation | None) -> list[Alert]:
    if "superseded_rate" not in results or not len(results):
        return []
    tolerance = _tolerance(recommendation)
    rates = results.groupby("summarizer", sort=False)["superseded_rate"].mean().dropna()
    over = rates[rates > tolerance].sort_values(ascending=False, kind="stable")
    if not len(over):
        return []
    name = label("superseded_rate").lower()
    others = rates.drop(over.index)
    rest = f"; the others: at most {number(others.max())}" if len(others) else ""
    named = ", ".join(f"{s} ({number(r)})" for s, r in over.items())
    whose = " and ".join(
        f"the summaries of {s} carry only the superseded value for {number(r)} of them" for s, r in over.items()
    )
    return [
        Alert(
            "superseded",
            "warning",
            f"Stale values kept: {name} of {named}",
            f"Of the items whose value changed within a span (a setting, a port, a version, a reversed instruction), "
            f"{whose} (mean over the replays{rest}): an error, worse than dropping the value. A setting that does not "
            f"meet {constraint_text(Constraint('superseded_rate', '<=', tolerance)).lower()} in every conversation is "
            "not recommended while another does.",
            (Evidence("metrics", f"{label('superseded_rate')} by summarizer"),),
            {str(s): float(r) for s, r in over.items()},
        )
    ]


def _own_vocabulary(
    results: pd.DataFrame, identities: Mapping[str, str] | None, recommendation: Recommendation | None
) -> list[Alert]:
    if identities is None:
        identities = (
            dict(zip(results["summarizer"], results["summarizer_identity"], strict=True))
            if {"summarizer", "summarizer_identity"} <= set(results.columns)
            else {}
        )
    own = scored_against_itself(identities)
    if not own:
        return []
    ranked = set(recommendation.objectives) if recommendation is not None else set()
    shown = [m for m in metrics("conversation") if m.anchor_based and (m.headline or m.name in ranked)]
    independent = [metric(name) for name in INDEPENDENT_METRICS]
    names = ", ".join(own)
    chosen = (
        f" The recommendation ranks by {label(o).lower()}, which favours it."
        if recommendation is not None
        and recommendation.summarizer in own
        and (o := next((o for o in recommendation.objectives if metric(o).anchor_based), None))
        else ""
    )
    return [
        Alert(
            "own_vocabulary",
            "info",
            f"{names} {'is' if len(own) == 1 else 'are'} built from the metric's own vocabulary",
            f"{names} keeps the lines holding the items the anchor metrics count, found by the same extractor: its "
            f"{', '.join(m.label.lower() for m in shown)} partly score the metric against itself.{chosen} Weigh it "
            f"on a metric that does not depend on that vocabulary: {', '.join(m.label.lower() for m in independent)}"
            " (or judged answers, with a judge).",
            (Evidence("metrics", "the loss table"),),
            {name: 1.0 for name in own},
        )
    ]


__all__ = ["Alert", "AlertKind", "Evidence", "Section", "Severity", "study_alerts"]
