"""How often "lost but needed" is right: precision and recall on the labelled validation set.

Reads the validation set (``bench/validation/items.json``: the sampled candidate lost items, their strata and
weights; ``split.json``: the held-back quarter) and a label file (``bench/validation/labels.jsonl`` or
``--labels PATH``, in the format of ``docs/validation/guidelines.md``), replays every item's conversation with
its recorded setting through the metric as the code is now, and prints, per agent format and overall:

* **precision**: of the items the metric flags as needed later, the share the labels call truly needed;
* **recall**: of the items the labels call truly needed, the share the metric flags;

each with a Wilson 95% interval, separately for the tuning part and the held-back part (``--part``), and the
false positives counted by the labels' reason code (``--errors`` lists them item by item). The
sample is stratified (by conversation and by the flag of the metric the set was drawn with), so every figure
is weighted by the items' sampling weights N_h / n_h. Items are not independent draws: one anchor (log,
conversation, type, text) is an item at every window that loses it. So each interval is a Wilson interval on
Korn and Graubard's effective sample size p(1 − p) / v, v the Taylor-linearised variance of the weighted ratio
with the anchors as clusters within their conversations as strata (never above Kish's (Σw)² / Σw²). The same figures for the metric the set was drawn with (recorded in ``items.json``) are printed
beside them: the "before" of any change. Cohen's κ between the labellers before resolution comes first.

What the metric is asked: whether the item, at its compaction (span, tail and future as recorded), is
*needed later* (``needed_later`` of :func:`zett_lab.measure`'s ``anchors`` table). Every item of the set is
lost by construction (the recorded summary lacks it), so this is the metric's "lost but needed" verdict on it;
a summary lookup that has since become looser is not what these labels judge. The item is found in the
measured table by its type and text as written, else by its type and normal form, else by its text; an item
the extractor no longer finds is not flagged. Where today's replay no longer compacts at the item's window
(the anchors summary changed with the extractor, say), the window is measured on that replay's conversation
as an applied compaction with an empty summary: ``needed_later`` does not read the summary.

When the constraint set exists (``bench/validation/constraint_items.json``, built by
``bench/validity_constraints.py``) and the label file holds constraint rows (``"kind": "constraint"``), the same
is printed for constraint survival: the precision and recall of the metric's "dropped" against the rules the
labels call truly dropped (a real rule, still in force, that the summary and the tail no longer convey), the
share of its "kept" the labels call conveyed, and the share of extracted texts that are real rules; each label
judges one summary, so an item whose summary today's replay no longer produces is left out and counted.

``--set N`` (N ≥ 2) reads a later sample instead (``bench/validation/items<N>.json``, labels
``bench/validation/labels<N>.jsonl``; :data:`validity_pool.ROUNDS`): round N, drawn from the same logs at other
replay settings before the tuning that followed it and never used for it; all its items are one part
(``unseen``), reported and written like a part of set 1.

``--write [PATH]`` records one part's precision and recall of the metric now as the measured validity of the
catalogue metrics resting on that verdict (:data:`NEEDED_LATER_METRICS`, and :data:`CONSTRAINT_METRICS` once the
constraint set is labelled) in ``zett_lab/data/metric_validity.json``,
which the catalogue, the report, the documentation and ``measure()``'s docstring show beside each metric.

Run (from any checkout beside ``../shared/agent-logs``)::

    .venv/bin/python bench/validity.py [--labels PATH] [--part tune|held-back|both] [--logs DIR] [--errors]
    .venv/bin/python bench/validity.py --part held-back --write
    .venv/bin/python bench/validity.py --set N [--errors] [--write]   # N: a round of validity_pool.ROUNDS
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from operator import attrgetter
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validity_constraints
from validity_pool import (
    HELD_BACK,
    ITEMS_FILE,
    LABELS_FILE,
    LOGS,
    ROOT,
    ROUNDS,
    SPLIT_FILE,
    TUNE,
    UNSEEN,
    ReplaySetting,
    read_items,
    read_sources,
    read_split,
    replay,
)

import zett_lab
from zett_lab.load.anchor_forms import normalize

CONFIDENCES = ("low", "medium", "high")
NEEDED_REASONS = {
    "only-in-span": True,
    "not-an-item": False,
    "not-used": False,
    "different-thing": False,
    "generic": False,
    "user-supplied": False,
    "back-in-context": False,
    "harness-resent": False,
    "in-tail-or-system": False,
    "unclear": None,
}
RESOLVED = "resolved"
Z95 = 1.959963984540054
#: The catalogue's data file of measured validity (what ``--write`` fills).
VALIDITY_DATA = ROOT / "zett_lab" / "data" / "metric_validity.json"
#: The catalogue metrics whose correctness is the "needed later" verdict on lost items (what these labels judge).
NEEDED_LATER_METRICS = ("lost_but_needed", "needed_anchor_recall")
#: The catalogue metric whose verdict the constraint labels judge (kept or dropped, per rule and compaction).
CONSTRAINT_METRICS = ("constraint_survival",)
#: What a constraint label's reason says the summary and the tail convey: the rule (True) or not (False).
CONVEYED = {"conveyed-verbatim": True, "conveyed-paraphrase": True, "weakened": False, "absent": False}
SCOPES = ("session", "task", "over")
PART_WORDS = {TUNE: "tuning part of the validation set", HELD_BACK: "held-back quarter of the validation set"}


def part_words(part: str, set_number: int) -> str:
    """What a part of a set is, in the data file's words: set 1's parts, or a later round's sample."""
    if part != UNSEEN:
        return PART_WORDS[part]
    later = ROUNDS[set_number]
    return f"{later.name} of the validation set (the same logs at other replay settings, {later.drawn_after}; never tuned on)"


class LabelError(ValueError):
    """A label file that does not follow the format: names the file, the line and the field."""


@dataclass(frozen=True)
class Label:
    """One labeller's answer for one item (``labeller`` is ``resolved`` for the row settling a disagreement)."""

    id: str
    labeller: str
    needed: bool
    confidence: str
    reason: str


@dataclass(frozen=True)
class Verdict:
    """What the metric says of one item: flagged (needed later) or not, and how the item was found."""

    flagged: bool
    found: str  # "replay" (today's replay compacts at the window), "pinned" (window measured alone), "not extracted"


@dataclass(frozen=True)
class ConstraintLabel:
    """One labeller's answer for one constraint item: a real rule or not, its scope, what the summary and the
    tail convey (``reason``)."""

    id: str
    labeller: str
    is_rule: bool
    scope: str
    confidence: str
    reason: str

    @property
    def conveyed(self) -> bool:
        """The summary or the tail still convey it, with its force."""
        return CONVEYED[self.reason]

    @property
    def dropped(self) -> bool:
        """Truly dropped: a rule still in force that the summary and the tail no longer convey."""
        return self.is_rule and self.scope != "over" and not self.conveyed

    @property
    def answer(self) -> tuple[bool, bool, bool]:
        """What resolution compares: (truly dropped, conveyed, a real rule)."""
        return self.dropped, self.conveyed, self.is_rule


def label_rows(path: Path, kind: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of every row of one kind (``needed``, the default, or ``constraint``) of a label file."""
    if not path.is_file():
        raise LabelError(f"{path}: no such label file")
    rows = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        where = f"{path}, line {number}"
        try:
            row = json.loads(text)
        except json.JSONDecodeError as error:
            raise LabelError(f"{where}: not JSON ({error.msg})") from error
        if not isinstance(row, dict):
            raise LabelError(f"{where}: expected a JSON object")
        if row.get("kind", "needed") == kind:
            rows.append((where, row))
    return rows


def _check(where: str, row: dict[str, Any], fields: Sequence[tuple[str, type]], known: set[str]) -> None:
    for field, kind in fields:
        if not isinstance(row.get(field), kind):
            raise LabelError(f"{where}: field {field!r} must be a {kind.__name__}, got {row.get(field)!r}")
    if row["id"] not in known:
        raise LabelError(f"{where}: item {row['id']!r} is not in the validation set")
    if row["confidence"] not in CONFIDENCES:
        raise LabelError(f"{where}: confidence {row['confidence']!r} is not one of {', '.join(CONFIDENCES)}")


def _once(path: Path, labels: Sequence[Any]) -> None:
    seen: set[tuple[str, str]] = set()
    for label in labels:
        if (label.id, label.labeller) in seen:
            raise LabelError(f"{path}: labeller {label.labeller!r} labels item {label.id!r} twice")
        seen.add((label.id, label.labeller))


def read_labels(path: Path, known: set[str]) -> list[Label]:
    """The ``needed`` rows of a label file (constraint rows, ``"kind": "constraint"``, are skipped)."""
    labels = []
    fields = (("id", str), ("labeller", str), ("needed", bool), ("confidence", str), ("reason", str))
    for where, row in label_rows(path, "needed"):
        _check(where, row, fields, known)
        if row["reason"] not in NEEDED_REASONS:
            raise LabelError(f"{where}: reason {row['reason']!r} is not one of {', '.join(NEEDED_REASONS)}")
        implied = NEEDED_REASONS[row["reason"]]
        if implied is not None and implied != row["needed"]:
            raise LabelError(f"{where}: reason {row['reason']!r} goes with needed {implied}, not {row['needed']}")
        labels.append(Label(row["id"], row["labeller"], row["needed"], row["confidence"], row["reason"]))
    _once(path, labels)
    return labels


def read_constraint_labels(path: Path, known: set[str]) -> list[ConstraintLabel]:
    """The ``"kind": "constraint"`` rows of a label file."""
    labels = []
    fields = (("id", str), ("labeller", str), ("is_rule", bool), ("scope", str), ("confidence", str), ("reason", str))
    for where, row in label_rows(path, "constraint"):
        _check(where, row, fields, known)
        if row["reason"] not in CONVEYED:
            raise LabelError(f"{where}: reason {row['reason']!r} is not one of {', '.join(CONVEYED)}")
        if row["scope"] not in SCOPES:
            raise LabelError(f"{where}: scope {row['scope']!r} is not one of {', '.join(SCOPES)}")
        labels.append(
            ConstraintLabel(row["id"], row["labeller"], row["is_rule"], row["scope"], row["confidence"], row["reason"])
        )
    _once(path, labels)
    return labels


def resolve(
    labels: Iterable[Any], answer: Callable[[Any], Any] = attrgetter("needed")
) -> tuple[dict[str, Any], set[str]]:
    """The final answer per item (a ``resolved`` row's, else the labellers' common answer) and the items whose
    labellers disagree with no resolved row (left out of every figure)."""
    by_item: dict[str, list[Any]] = defaultdict(list)
    for label in labels:
        by_item[label.id].append(label)
    final, open_items = {}, set()
    for item, rows in by_item.items():
        resolved = [r for r in rows if r.labeller == RESOLVED]
        answers = {answer(r) for r in rows if r.labeller != RESOLVED}
        if resolved:
            final[item] = answer(resolved[0])
        elif len(answers) == 1:
            final[item] = answers.pop()
        else:
            open_items.add(item)
    return final, open_items


def cohen_kappa(first: Sequence[bool], second: Sequence[bool]) -> float:
    """Cohen's κ of two labellers' yes/no answers on the same items (NaN when chance agreement is certain)."""
    n = len(first)
    if n == 0 or n != len(second):
        return math.nan
    observed = sum(a == b for a, b in zip(first, second, strict=True)) / n
    p1, p2 = sum(first) / n, sum(second) / n
    expected = p1 * p2 + (1 - p1) * (1 - p2)
    return math.nan if expected == 1 else (observed - expected) / (1 - expected)


def agreement(
    labels: Iterable[Any], items: set[str], answer: Callable[[Any], bool] = attrgetter("needed")
) -> list[tuple[str, str, int, float, float]]:
    """(labeller, labeller, items both labelled, share agreeing, κ) for every pair of labellers, on ``items``."""
    answers: dict[str, dict[str, bool]] = defaultdict(dict)
    for label in labels:
        if label.labeller != RESOLVED and label.id in items:
            answers[label.labeller][label.id] = answer(label)
    names = sorted(answers)
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            common = sorted(set(answers[a]) & set(answers[b]))
            first, second = [answers[a][k] for k in common], [answers[b][k] for k in common]
            agree = sum(x == y for x, y in zip(first, second, strict=True)) / len(common) if common else math.nan
            rows.append((a, b, len(common), agree, cohen_kappa(first, second)))
    return rows


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``p`` observed on ``n`` (effective) trials."""
    if n <= 0 or math.isnan(p):
        return math.nan, math.nan
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    """A weighted proportion: estimate, Wilson 95% interval on the effective n, and the raw counts."""

    estimate: float
    low: float
    high: float
    hits: int
    n: int
    n_effective: float

    def text(self) -> str:
        if self.n == 0:
            return "n/a (no items)"
        return f"{self.estimate:.2f} [{self.low:.2f}, {self.high:.2f}] ({self.hits}/{self.n}, n_eff {self.n_effective:.0f})"


def clustered_variance(
    hits: Sequence[bool], weights: Sequence[float], strata: Sequence[Any], clusters: Sequence[Any]
) -> float:
    """The Taylor-linearised (sandwich) variance of the ratio Σw·hit / Σw, the clusters taken as the primary
    sampling units within their strata (with replacement): items of one cluster are not independent draws. A
    stratum holding one cluster adds its squared total (centred on zero, as R's ``survey.lonely.psu="adjust"``)."""
    total = float(sum(weights))
    estimate = sum(w for h, w in zip(hits, weights, strict=True) if h) / total
    sums: dict[Any, dict[Any, float]] = defaultdict(lambda: defaultdict(float))
    for hit, weight, stratum, cluster in zip(hits, weights, strata, clusters, strict=True):
        sums[stratum][cluster] += weight * (float(hit) - estimate) / total
    variance = 0.0
    for by_cluster in sums.values():
        values = list(by_cluster.values())
        if len(values) == 1:
            variance += values[0] ** 2
            continue
        mean = sum(values) / len(values)
        variance += len(values) / (len(values) - 1) * sum((v - mean) ** 2 for v in values)
    return variance


def weighted_rate(
    hits: Sequence[bool],
    weights: Sequence[float],
    strata: Sequence[Any] | None = None,
    clusters: Sequence[Any] | None = None,
) -> Rate:
    """Σw·hit / Σw with a Wilson interval on an effective sample size: Kish's (Σw)² / Σw² for independent items;
    with ``strata`` and ``clusters``, Korn and Graubard's p(1 − p) / v (v: :func:`clustered_variance`), never
    above Kish's (it is Kish's when p is 0 or 1, where v says nothing)."""
    total = float(sum(weights))
    if not hits or total <= 0:
        return Rate(math.nan, math.nan, math.nan, 0, 0, 0.0)
    estimate = sum(w for h, w in zip(hits, weights, strict=True) if h) / total
    n_effective = total * total / sum(w * w for w in weights)
    if strata is not None and clusters is not None and 0 < estimate < 1:
        variance = clustered_variance(hits, weights, strata, clusters)
        if variance > 0:
            n_effective = min(n_effective, estimate * (1 - estimate) / variance)
    low, high = wilson(estimate, n_effective)
    return Rate(estimate, low, high, sum(bool(h) for h in hits), len(hits), n_effective)


def table_rate(rows: pd.DataFrame, hit: str) -> Rate:
    """:func:`weighted_rate` of the boolean column ``hit`` over ``rows``, clustered by their ``anchor`` within
    their ``conversation`` (the stratum) when the table has those columns."""
    grouped = "anchor" in rows.columns and "conversation" in rows.columns
    return weighted_rate(
        list(rows[hit]),
        list(rows["weight"]),
        list(rows["conversation"]) if grouped else None,
        list(rows["anchor"]) if grouped else None,
    )


def precision_recall(rows: pd.DataFrame, flag: str, truth: str = "needed") -> tuple[Rate, Rate]:
    """Precision and recall of the flag column ``flag`` against the label column ``truth``, weighted by ``weight``
    (and clustered as :func:`table_rate` says)."""
    return table_rate(rows[rows[flag]], truth), table_rate(rows[rows[truth]], flag)


def _measured_rows(trace: zett_lab.Trace) -> pd.DataFrame:
    losses = zett_lab.measure(trace)
    if not len(losses.anchors):
        return pd.DataFrame(columns=["span_start", "span_end", "n_recorded", "type", "value", "normalized"])
    windows = losses.compactions[["compaction_id", "span_start", "span_end", "n_recorded"]]
    return losses.anchors.merge(windows, on="compaction_id")


def pinned(trace: zett_lab.Trace, windows: Sequence[tuple[int, int, int]]) -> zett_lab.Trace:
    """The trace's conversation with one applied compaction per window and an empty summary (nothing else)."""
    columns = list(trace.compactions.columns)
    rows = []
    for number, (start, end, recorded) in enumerate(windows):
        row: dict[str, Any] = dict.fromkeys(columns)
        row.update(
            compaction_id=number,
            conversation_id=trace.conversation.id,
            span_start=start,
            span_end=end,
            n_recorded=recorded,
            applied=True,
            summary_text="",
            summarizer=trace.settings.summarizer,
        )
        rows.append(row)
    return dataclasses.replace(trace, compactions=pd.DataFrame(rows, columns=columns))


def find(rows: pd.DataFrame, item: dict[str, Any]) -> pd.Series | None:
    """The measured row of the item in its window's rows: by type and text, type and normal form, or text."""
    if not len(rows):
        return None
    same_type = rows["type"] == item["type"]
    for mask in (
        same_type & (rows["value"] == item["text"]),
        same_type & (rows["normalized"] == normalize(item["type"], item["text"])),
        rows["value"] == item["text"],
    ):
        if mask.any():
            return rows[mask].iloc[0]
    return None


def metric_verdicts(items: Sequence[dict[str, Any]], logs: Path) -> dict[str, Verdict]:
    """The metric's verdict on every item, from one replay per (conversation, setting) as the code is now."""
    sources = {(s.log, s.conversation.id): s for s in read_sources(logs)}
    groups: dict[tuple[str, str, ReplaySetting], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        groups[(item["log"], item["conversation_id"], ReplaySetting(**item["setting"]))].append(item)
    verdicts = {}
    for (log, conversation_id, setting), members in groups.items():
        source = sources.get((log, conversation_id))
        if source is None:
            raise SystemExit(f"{logs / log}: conversation {conversation_id!r} of the validation set is not there")
        trace = replay(source.conversation, setting)
        measured = _measured_rows(trace)
        known = set(zip(measured["span_start"], measured["span_end"], measured["n_recorded"], strict=True))
        window_of = {i["id"]: (i["span_start"], i["span_end"], i["n_recorded"]) for i in members}
        missing = sorted({w for w in window_of.values() if w not in known})
        alone = _measured_rows(pinned(trace, missing)) if missing else measured.iloc[0:0]
        for item in members:
            window = window_of[item["id"]]
            table, how = (measured, "replay") if window in known else (alone, "pinned")
            in_window = table[
                (table["span_start"] == window[0])
                & (table["span_end"] == window[1])
                & (table["n_recorded"] == window[2])
            ]
            row = find(in_window, item)
            flag = None if row is None else row["needed_later"]
            verdicts[item["id"]] = (
                Verdict(False, "not extracted") if row is None else Verdict(bool(not pd.isna(flag) and flag), how)
            )
    return verdicts


def reasons(labels: Iterable[Label]) -> dict[str, str]:
    """The reason code per item: the resolved row's, else the labellers' common code, else their codes joined
    (``generic / not-used``)."""
    by_item: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_item[label.id].append(label)
    chosen = {}
    for item, rows in by_item.items():
        resolved = [r.reason for r in rows if r.labeller == RESOLVED]
        chosen[item] = resolved[0] if resolved else " / ".join(sorted({r.reason for r in rows}))
    return chosen


def anchor(item: dict[str, Any]) -> tuple[str, str, str, str]:
    """The item's anchor (log, conversation, type, text): one anchor is an item at every window that loses it, and
    those items are one cluster, not independent draws."""
    return item["log"], item["conversation_id"], item["type"], item["text"]


TABLE_COLUMNS = [
    "id",
    "agent",
    "conversation",
    "anchor",
    "part",
    "weight",
    "needed",
    "reason",
    "flagged_now",
    "flagged_at_sampling",
]


def results_table(
    items: Sequence[dict[str, Any]],
    parts: dict[str, str],
    final: dict[str, bool],
    verdicts: dict[str, Verdict],
    reason: dict[str, str],
) -> pd.DataFrame:
    """One row per labelled item: agent, part, weight, label and its reason, the metric's flag now and at sampling."""
    rows = [
        {
            "id": item["id"],
            "agent": item["agent"],
            "conversation": (item["log"], item["conversation_id"]),
            "anchor": anchor(item),
            "part": parts[item["id"]],
            "weight": float(item["weight"]),
            "needed": final[item["id"]],
            "reason": reason[item["id"]],
            "flagged_now": verdicts[item["id"]].flagged,
            "flagged_at_sampling": bool(item["flagged_at_sampling"]),
        }
        for item in items
        if item["id"] in final
    ]
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def report_lines(table: pd.DataFrame, title: str) -> list[str]:
    """Precision and recall per agent format and overall, for the metric now and at sampling."""
    lines = [f"\n## {title}: {len(table)} labelled items"]
    if not len(table):
        return [*lines, "  (no labelled items)"]
    header = f"{'format':15} {'items':>5}  {'metric':11} {'precision [95% CI]':40} recall [95% CI]"
    lines.append(header)
    groups = [(agent, table[table["agent"] == agent]) for agent in sorted(table["agent"].unique())]
    for name, rows in [*groups, ("overall", table)]:
        for flag, label in (("flagged_now", "now"), ("flagged_at_sampling", "at sampling")):
            precision, recall = precision_recall(rows, flag)
            shown = name if label == "now" else ""
            count = str(len(rows)) if label == "now" else ""
            lines.append(f"{shown:15} {count:>5}  {label:11} {precision.text():40} {recall.text()}")
    return lines


def error_lines(table: pd.DataFrame, listed: bool) -> list[str]:
    """The metric's (now) false positives counted by the labels' reason code, with the share of the flagged
    items' weight each takes (what it costs precision), and its misses; ``listed``: every such item too."""
    flagged = table[table["flagged_now"]]
    wrong = flagged[~flagged["needed"]]
    missed = table[table["needed"] & ~table["flagged_now"]]
    total = float(flagged["weight"].sum())
    lines = [f"false positives (flagged now, labelled not needed): {len(wrong)} of {len(flagged)} flagged items"]
    for code, rows in sorted(wrong.groupby("reason"), key=lambda pair: (-len(pair[1]), pair[0])):
        share = float(rows["weight"].sum()) / total if total else math.nan
        lines.append(f"  {code:36} {len(rows):>4}  {share:6.1%} of the flagged weight")
    lines.append(f"missed (labelled needed, not flagged now): {len(missed)} of {int(table['needed'].sum())}")
    if listed:
        for kind, rows in (("false positive", wrong), ("missed", missed)):
            lines += [f"  {kind:15} {r.id}  {r.agent:15} {r.reason}" for r in rows.sort_values("id").itertuples()]
    return lines


# --- constraint survival ----------------------------------------------------------------------------------------

CONSTRAINT_COLUMNS = [
    "id",
    "agent",
    "conversation",
    "anchor",
    "part",
    "weight",
    "dropped",
    "conveyed",
    "is_rule",
    "verdict",
    "at_sampling",
]


def constraint_table(
    items: Sequence[dict[str, Any]], parts: dict[str, str], final: dict[str, tuple[bool, bool, bool]],
    verdicts: dict[str, str],
) -> pd.DataFrame:  # fmt: skip
    """One row per labelled constraint item the metric can be asked about now: its labels (truly dropped,
    conveyed, a real rule), the metric's verdict now (kept, dropped, not extracted) and at sampling."""
    rows = [
        {
            "id": item["id"],
            "agent": item["agent"],
            "conversation": (item["log"], item["conversation_id"]),
            "anchor": anchor(item),
            "part": parts[item["id"]],
            "weight": float(item["weight"]),
            "dropped": final[item["id"]][0],
            "conveyed": final[item["id"]][1],
            "is_rule": final[item["id"]][2],
            "verdict": verdicts[item["id"]],
            "at_sampling": item["verdict_at_sampling"],
        }
        for item in items
        if item["id"] in final and verdicts[item["id"]] in ("kept", "dropped", "not extracted")
    ]
    table = pd.DataFrame(rows, columns=CONSTRAINT_COLUMNS)
    table["dropped_now"] = table["verdict"] == "dropped"
    table["dropped_at_sampling"] = table["at_sampling"] == "dropped"
    return table


def constraint_lines(table: pd.DataFrame, title: str) -> list[str]:
    """Per agent format and overall: precision and recall of the metric's "dropped" against the rules the labels
    call truly dropped, the share of its "kept" the labels call conveyed, and the share of real rules among the
    texts the extractor still finds."""
    lines = [f"\n## constraint survival, {title}: {len(table)} labelled (rule, compaction) items"]
    if not len(table):
        return [*lines, "  (no labelled items)"]
    lines.append(
        f"{'format':15} {'items':>5}  {'metric':11} {'dropped: precision [95% CI]':40} {'dropped: recall [95% CI]':40} "
        f"{'kept: precision [95% CI]':40} real rules"
    )
    groups = [(agent, table[table["agent"] == agent]) for agent in sorted(table["agent"].unique())]
    for name, rows in [*groups, ("overall", table)]:
        for flag, label in (("dropped_now", "now"), ("dropped_at_sampling", "at sampling")):
            precision, recall = precision_recall(rows, flag, truth="dropped")
            kept = rows[~rows[flag] & (rows["verdict"] != "not extracted")] if label == "now" else rows[~rows[flag]]
            kept_precision = table_rate(kept, "conveyed")
            extracted = rows[rows["verdict"] != "not extracted"]
            rules = table_rate(extracted, "is_rule")
            shown, count = (name, str(len(rows))) if label == "now" else ("", "")
            lines.append(
                f"{shown:15} {count:>5}  {label:11} {precision.text():40} {recall.text():40} "
                f"{kept_precision.text():40} {rules.text() if label == 'now' else ''}"
            )
    return lines


def constraint_error_lines(table: pd.DataFrame, listed: bool) -> list[str]:
    """The metric's (now) false "dropped" counted by why the labels say no (not a real rule, over at the
    compaction, conveyed), and its misses; ``listed``: every such item too."""
    dropped = table[table["dropped_now"]]
    wrong = dropped[~dropped["dropped"]]
    missed = table[table["dropped"] & ~table["dropped_now"]]
    why = [
        "not a real rule" if not r.is_rule else "conveyed" if r.conveyed else "over at the compaction"
        for r in wrong.itertuples()
    ]
    lines = [f'false "dropped" (labelled not truly dropped): {len(wrong)} of {len(dropped)} items called dropped']
    for code, count in sorted(Counter(why).items(), key=lambda pair: (-pair[1], pair[0])):
        lines.append(f"  {code:36} {count:>4}")
    lines.append(
        f"missed (labelled truly dropped, not called dropped now): {len(missed)} of {int(table['dropped'].sum())}"
    )
    if listed:
        for kind, rows, reasons in (("false dropped", wrong, why), ("missed", missed, list(missed["verdict"]))):
            lines += [
                f"  {kind:15} {r.id}  {r.agent:15} {reason}"
                for r, reason in zip(rows.itertuples(), reasons, strict=True)
            ]
    return lines


def constraint_report(args: argparse.Namespace, chosen: list[str]) -> tuple[dict[str, pd.DataFrame], float]:
    """Print the constraint set's figures (when it and its labels exist); its table per reported part and the
    labellers' κ on "truly dropped"."""
    if not args.constraint_items.is_file():
        print("\nconstraint survival: no constraint set yet (bench/validity_constraints.py --write builds it)")
        return {}, math.nan
    items = validity_constraints.read_items(args.constraint_items)
    labels = read_constraint_labels(args.labels or LABELS_FILE, {item["id"] for item in items})
    if not labels:
        print(f"\nconstraint survival: {len(items)} items, no constraint labels yet")
        return {}, math.nan
    parts = read_split(args.constraint_split)
    final, open_items = resolve(labels, attrgetter("answer"))
    labelled = [item for item in items if item["id"] in final]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdicts = validity_constraints.constraint_verdicts(labelled, args.logs)
    found = Counter(verdicts.values())
    print(
        f"\nconstraint labels: {len(labels)} rows, {len(final)} items decided, {len(open_items)} disagreements "
        f"without a resolved row (left out); metric now: {found['kept']} kept, {found['dropped']} dropped, "
        f"{found['not extracted']} no longer extracted (not dropped), {found['window gone'] + found['summary changed']} "
        "whose labelled summary today's replay no longer has (left out)"
    )
    ids = {item["id"] for item in items}
    kappas: dict[str, list[float]] = defaultdict(list)
    for what, answer in (("truly dropped", attrgetter("dropped")), ("a real rule", attrgetter("is_rule"))):
        for a, b, n, agree, kappa in agreement(labels, ids, answer):
            kappas[what].append(kappa)
            shown = "n/a (one answer throughout)" if math.isnan(kappa) else f"{kappa:.2f}"
            print(f"agreement before resolution on {what}, {a} vs {b}: {n} items, {agree:.1%} agree, κ {shown}")
    table = constraint_table(items, parts, final, verdicts)
    tables = {}
    for part in chosen:
        tables[part] = table[table["part"] == part]
        print("\n".join(constraint_lines(tables[part], f"{part} part")))
        print("\n".join(constraint_error_lines(tables[part], args.errors)))
    return tables, min(kappas["truly dropped"], default=math.nan)


def checkout() -> str:
    """This checkout's commit (short), marked when it has uncommitted changes; "unknown" outside git."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return "unknown"
    return commit + (" with uncommitted changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def settled_words(settled: int | None) -> str:
    """How the labellers' disagreements were settled, in the data file's words."""
    if settled is None:
        return "disagreements settled by a third"
    if settled == 0:
        return "no disagreement to settle"
    return f"{settled} disagreement{'s' * (settled != 1)} settled by a third reader"


def validity_entry(
    table: pd.DataFrame, flag: str, truth: str, *, what: str, words: str, kappa: float, logs: str, verdict: str,
    commit: str, day: str, settled: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One metric's entry of the data file: the weighted precision and recall of its verdict ``flag`` against the
    labels' ``truth`` on one part of a set (``words`` says which), and the words saying what was measured on what
    (``settled``: how many disagreements a third reader settled, when known)."""
    precision, recall = precision_recall(table, flag, truth)
    formats = sorted(table["agent"].unique())
    source = (
        f"{len(table):,} labelled {what} of {len(formats)} agent format{'s' * (len(formats) != 1)} "
        f"({', '.join(formats)}) of {logs}, the {words}; each labelled independently by two readers "
        f"(Cohen's κ {kappa:.2f}), {settled_words(settled)}; the {verdict} verdict of bench/validity.py at "
        f"{commit}, {day}; Wilson 95% intervals on the effective n of items clustered by anchor within conversation"
    )

    def estimate(rate: Rate) -> dict[str, Any] | None:
        if rate.n == 0:
            return None
        return {"value": round(rate.estimate, 4), "low": round(rate.low, 4), "high": round(rate.high, 4), "n": rate.n}

    return {"precision": estimate(precision), "recall": estimate(recall), "source": source}


def write_validity(path: Path, entries: dict[str, Any]) -> None:
    """Put ``entries`` into the data file at ``path``, keeping the other metrics' entries it holds."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    metrics = {**data.get("metrics", {}), **entries}
    data = {"written_by": "bench/validity.py --write (do not edit by hand)", "metrics": metrics}
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def sampled_at(path: Path) -> str:
    """The commit whose metric drew the set (``procedure.built_at_commit`` of the items file), or "unknown"."""
    procedure = json.loads(path.read_text(encoding="utf-8")).get("procedure") or {}
    return str(procedure.get("built_at_commit") or "unknown")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--labels",
        type=Path,
        default=None,
        help=f"label file (default {LABELS_FILE}, or labels<N>.jsonl with --set N)",
    )
    parser.add_argument(
        "--set",
        type=int,
        choices=(1, *ROUNDS),
        default=1,
        help="1: the first set (its tuning part and held-back quarter); "
        + ", ".join(map(str, ROUNDS))
        + ": a later sample (round N, never tuned on when drawn; no parts, no constraint items)",
    )
    parser.add_argument("--part", choices=(TUNE, HELD_BACK, "both"), default="both", help="which part of set 1")
    parser.add_argument("--logs", type=Path, default=LOGS, help="the shared agent logs (default ../shared/agent-logs)")
    parser.add_argument(
        "--errors", action="store_true", help="list every false positive and missed item of the reported part(s)"
    )
    parser.add_argument(
        "--write",
        type=Path,
        nargs="?",
        const=VALIDITY_DATA,
        default=None,
        metavar="PATH",
        help="record the --part's (or a later set's) precision and recall of the metric now as the catalogue's measured "
        f"validity (default {VALIDITY_DATA.relative_to(ROOT)})",
    )
    parser.add_argument("--items", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--split", type=Path, default=SPLIT_FILE, help=argparse.SUPPRESS)
    parser.add_argument(
        "--constraint-items", type=Path, default=validity_constraints.ITEMS_FILE, help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--constraint-split", type=Path, default=validity_constraints.SPLIT_FILE, help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    later = ROUNDS.get(args.set)
    items_path = args.items or (later.items_file if later else ITEMS_FILE)
    labels_path = args.labels or (later.labels_file if later else LABELS_FILE)
    if args.write is not None and args.part == "both" and not later:
        print(
            "error: --write records one part's figures: add --part held-back (never tuned on) or --part tune, "
            f"or measure a later set (--set {' or '.join(map(str, ROUNDS))})",
            file=sys.stderr,
        )
        return 2
    if not labels_path.is_file() and args.labels is None:
        print(
            f"error: no labels yet at {labels_path}: nothing to measure (label the set from "
            "docs/validation/guidelines.md)",
            file=sys.stderr,
        )
        return 2
    items = read_items(items_path)
    parts = {item["id"]: UNSEEN for item in items} if later else read_split(args.split)
    try:
        labels = read_labels(labels_path, {item["id"] for item in items})
    except LabelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    final, open_items = resolve(labels)
    if not args.logs.is_dir():
        print(f"error: no agent logs at {args.logs}: pass --logs DIR (the shared logs)", file=sys.stderr)
        return 2
    labelled = [item for item in items if item["id"] in final]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdicts = metric_verdicts(labelled, args.logs)
    found: dict[str, int] = defaultdict(int)
    for verdict in verdicts.values():
        found[verdict.found] += 1
    print(
        f"labels: {labels_path}: {len(labels)} rows, {len(final)} items decided, "
        f"{len(open_items)} disagreements without a resolved row (left out)"
    )
    kappas = agreement(labels, {item["id"] for item in items})
    for a, b, n, agree, kappa in kappas:
        print(
            f"agreement before resolution, all parts, {a} vs {b}: {n} items, {agree:.1%} agree, Cohen's κ {kappa:.3f}"
        )
    print(
        f"metric now (this checkout, {checkout()}): {found['replay']} items at their window of today's replay, "
        f"{found['pinned']} windows measured alone (today's replay compacts elsewhere), "
        f"{found['not extracted']} items no longer extracted (not flagged)"
    )
    print(f"metric at sampling: commit {sampled_at(items_path)[:12]}, as recorded in {items_path.name}")
    table = results_table(items, parts, final, verdicts, reasons(labels))
    chosen = [UNSEEN] if later else [TUNE, HELD_BACK] if args.part == "both" else [args.part]
    for part in chosen:
        ids = {item["id"] for item in items if parts[item["id"]] == part}
        rows = table[table["part"] == part]
        heading = f"{later.name} (round {later.number}, unseen)" if later else f"{part} part"
        print("\n".join(report_lines(rows, heading)))
        for a, b, n, agree, kappa in agreement(labels, ids):
            print(f"agreement before resolution, {a} vs {b}: {n} items, {agree:.0%} agree, Cohen's κ {kappa:.2f}")
        print("\n".join(error_lines(rows, args.errors)))
    constraint_tables: dict[str, pd.DataFrame] = {}
    constraint_kappa = math.nan
    try:
        if not later:  # the constraint set is drawn from round 1's replays only
            constraint_tables, constraint_kappa = constraint_report(args, chosen)
    except LabelError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    part = UNSEEN if later else args.part
    if args.write is not None:
        common = {
            "words": part_words(part, args.set),
            "logs": "real agent logs" if args.logs.resolve() == LOGS.resolve() else f"the logs in {args.logs}",
            "commit": checkout(),
            "day": date.today().isoformat(),
        }
        kappa = min((row[4] for row in kappas), default=math.nan)
        needed = validity_entry(
            table[table["part"] == part], "flagged_now", "needed", what="lost items", kappa=kappa,
            verdict='"needed later"', settled=len({row.id for row in labels if row.labeller == RESOLVED}), **common,
        )  # fmt: skip
        entries = dict.fromkeys(NEEDED_LATER_METRICS, needed)
        rules = constraint_tables.get(part)
        if rules is not None and len(rules):
            dropped = validity_entry(
                rules, "dropped_now", "dropped", what="(rule, compaction) items", kappa=constraint_kappa,
                verdict='"dropped"', **common,
            )  # fmt: skip
            entries.update(dict.fromkeys(CONSTRAINT_METRICS, dropped))
        write_validity(args.write, entries)
        print(f"\nwrote the {part} part's figures for {', '.join(entries)} to {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
