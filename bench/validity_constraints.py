"""The validation set of constraint survival (issue 28): every extracted rule at a sample of compactions, its
held-back quarter, and one dossier per item for labellers.

The pool is every (rule, compaction) verdict of the shared real agent logs (``../shared/agent-logs``, read from
there, never copied): each conversation is replayed as the "lost but needed" set's pool was
(:func:`validity_pool.settings_of`: ``max_tokens`` a third of its tokens, ``keep_recent_tokens`` a tenth, the
stock or the split-turn engine) with ``truncate:0.1``, and the agent's own recorded compactions are measured too
where the log has them (``native``: real production summaries). Not ``anchors``: a label judges one summary
text, and the anchors summaries change whenever the anchor extractor is tuned. At every applied
compaction with a summary, every ``constraint`` anchor of the span (a rule the user or the task stated) gets the
constraint metric's verdict: **kept** when the summary or the kept tail holds it (``in_summary`` or ``in_tail``
of :func:`zett_lab.measure`'s ``anchors`` table, what ``constraint_survival`` counts), else **dropped**.

The sample takes every rule (one per conversation and normal form) and, per rule, one compaction where the metric
says kept and one where it says dropped, when it has such compactions (drawn at random, seed :data:`SEED`):
strata = (rule, verdict), weight = N_h / n_h. The held-back quarter is fixed by the same kind of rule as the
other set's, on the item's own fields (:func:`validity_pool.part_of` with type ``constraint``): one rule of one
conversation is in one part at every compaction.

Dossiers (``--dossiers DIR``, written OUTSIDE the repository: they quote the logs) show what the guidelines'
constraint schema asks a labeller to weigh (``docs/validation/guidelines.md``): the rule in its message, the
compaction boundary, the summary (whole when short, else the lines closest in wording to the rule), the tail's
closest wording, the user's next messages and later restatements, and the harness note; never the metric's
verdict::

    .venv/bin/python bench/validity_constraints.py [--logs DIR] [--write] [--dossiers /work/team/dossiers-constraints]

Without ``--write`` it builds the pool and prints its strata without writing anything.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validity_dossiers import Part, excerpt, flat, harness_note, parts_of
from validity_pool import (
    HELD_BACK,
    LOGS,
    ROOT,
    SET_DIR,
    TUNE,
    ReplaySetting,
    Source,
    part_of,
    read_sources,
    replay,
    settings_of,
    write,
)

import zett_lab
from zett_lab.measure.native import native_trace
from zett_lab.tokens import count_text_tokens

ITEMS_FILE = SET_DIR / "constraint_items.json"
SPLIT_FILE = SET_DIR / "constraint_split.json"
SEED = 2805
ORDER_SEED = 2806
NATIVE = "native"
#: Replayed summarizers whose summaries the set judges. Not ``anchors``: it picks lines with the anchor extractor,
#: so its summaries change whenever the extractor is tuned, and a label judges one summary text.
SUMMARIZERS = ("truncate:0.1",)
KEPT, DROPPED = "kept", "dropped"
DEFAULT_DOSSIERS = Path("/work/team/dossiers-constraints")
#: The summary is shown whole up to this many characters; a longer one by its lines closest to the rule.
SUMMARY_WHOLE = 6_000
CLOSEST_SHOWN = 6
STATED_CONTEXT, CLOSE_CONTEXT = 700, 400
#: Words this long or longer carry a rule's content (shorter ones are mostly function words).
CONTENT_WORD = 4
SPLIT_RULE = (
    "held-back iff int(sha256('\\x1f'.join([log, conversation_id, 'constraint', text])).hexdigest()[:8], 16) % 4 "
    "== 0, else tune (UTF-8; one rule of one conversation is in one part at every compaction)"
)


def item_id(fields: dict[str, Any]) -> str:
    """A stable id from the item's identity (log, conversation, summarizer setting, window, rule), ``c`` first."""
    identity = [
        fields["log"],
        fields["conversation_id"],
        fields["setting"],
        fields["span_start"],
        fields["span_end"],
        fields["n_recorded"],
        fields["text"],
    ]
    return "c" + hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:11]


def traces_of(source: Source) -> list[tuple[dict[str, Any], zett_lab.Trace]]:
    """The other set's replays with the summarizers of :data:`SUMMARIZERS`, then the agent's own compactions
    (``native``) where the log has them."""
    traces = [(asdict(s), trace) for s, trace in settings_of(source.conversation) if s.summarizer in SUMMARIZERS]
    if source.conversation.native_compactions:
        traces.append(({"summarizer": NATIVE, "agent": source.agent}, native_trace(source.conversation)))
    return traces


def trace_for(source: Source, setting: dict[str, Any]) -> zett_lab.Trace:
    """The trace an item's setting names: a replay with the recorded setting, or the log's own compactions."""
    if setting["summarizer"] == NATIVE:
        return native_trace(source.conversation)
    return replay(source.conversation, ReplaySetting(**setting))


def constraint_rows(trace: zett_lab.Trace) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trace's constraint anchors at applied compactions, with each one's window and summary text; and
    every window of the trace with its summary text (a window may have no constraint left)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        losses = zett_lab.measure(trace)
    anchors = losses.anchors
    windows = losses.compactions[["compaction_id", "span_start", "span_end", "n_recorded"]].merge(
        trace.compactions[["compaction_id", "summary_text"]], on="compaction_id"
    )
    if not len(anchors):
        return pd.DataFrame(columns=[*anchors.columns, *windows.columns[1:]]), windows
    chosen = anchors[(anchors["type"] == "constraint") & anchors["applied"].fillna(False).astype(bool)]
    return chosen.merge(windows, on="compaction_id"), windows


def verdict_now(rows: pd.DataFrame, windows: pd.DataFrame, item: dict[str, Any]) -> str:
    """The metric's verdict now on one item: ``kept`` or ``dropped``; ``not extracted`` when the extractor no
    longer finds the rule there; ``window gone`` or ``summary changed`` when today's trace no longer has the
    summary the labels judged (then nothing is measured)."""
    window = windows[
        (windows["span_start"] == item["span_start"])
        & (windows["span_end"] == item["span_end"])
        & (windows["n_recorded"] == item["n_recorded"])
    ]
    if not len(window):
        return "window gone"
    judged = [summary_digest(text) == item["summary_sha256"] for text in window["summary_text"]]
    if not any(judged):
        return "summary changed"
    found = rows[rows["compaction_id"].isin(window["compaction_id"][judged])]
    for mask in (found["normalized"] == item["normalized"], found["value"] == item["text"]):
        if mask.any():
            row = found[mask].iloc[0]
            return KEPT if bool(row["in_summary"]) or bool(row["in_tail"]) else DROPPED
    return "not extracted"


def constraint_verdicts(items: list[dict[str, Any]], logs: Path) -> dict[str, str]:
    """The metric's verdict now on every item (:func:`verdict_now`), one trace per conversation and setting."""
    sources = {(s.log, s.conversation.id): s for s in read_sources(logs)}
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for item in items:
        groups[(item["log"], item["conversation_id"], json.dumps(item["setting"], sort_keys=True))].append(item)
    verdicts = {}
    for (log, conversation_id, setting), members in groups.items():
        source = sources.get((log, conversation_id))
        if source is None:
            raise SystemExit(f"{logs / log}: conversation {conversation_id!r} of the constraint set is not there")
        rows, windows = constraint_rows(trace_for(source, json.loads(setting)))
        verdicts.update({item["id"]: verdict_now(rows, windows, item) for item in members})
    return verdicts


def verdicts_of(source: Source) -> list[dict[str, Any]]:
    """Every (rule, applied compaction with a summary) of one conversation with the metric's verdict."""
    out: list[dict[str, Any]] = []
    for setting, trace in traces_of(source):
        for row in constraint_rows(trace)[0].to_dict("records"):
            fields = {
                "log": source.log,
                "conversation_id": source.conversation.id,
                "agent": source.agent,
                "setting": setting,
                "span_start": int(row["span_start"]),
                "span_end": int(row["span_end"]),
                "n_recorded": int(row["n_recorded"]),
                "type": "constraint",
                "text": str(row["value"]),
                "normalized": str(row["normalized"]),
                "message_index": int(row["message_index"]),
            }
            kept = bool(row["in_summary"]) or bool(row["in_tail"])
            out.append(
                {
                    "id": item_id(fields),
                    **fields,
                    "summary_sha256": summary_digest(row["summary_text"]),
                    "verdict_at_sampling": KEPT if kept else DROPPED,
                }
            )
    return out


def summary_digest(text: Any) -> str:
    """The first 16 hex digits of the summary's SHA-256: a label judges this text, and the bench measures the
    metric only where today's summary is the same (the text itself quotes the logs and is not kept here)."""
    return hashlib.sha256(str(text or "").encode("utf-8")).hexdigest()[:16]


def rule_of(row: dict[str, Any]) -> str:
    return f"{row['log']}#{row['conversation_id']}|{row['normalized']}"


def sample(pool: list[dict[str, Any]], seed: int = SEED) -> list[dict[str, Any]]:
    """One item per (rule, verdict) stratum, drawn at random; each with its stratum and weight N_h / n_h."""
    strata: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in pool:
        strata[(rule_of(row), row["verdict_at_sampling"])].append(row)
    rng = random.Random(seed)
    chosen = []
    for key in sorted(strata):
        members = sorted(strata[key], key=lambda r: r["id"])
        pick = rng.choice(members)
        chosen.append({**pick, "stratum": f"{key[0]}|{key[1]}", "weight": float(len(members))})
    return chosen


def procedure() -> dict[str, Any]:
    """How the pool and the sample were made, for the record."""
    import subprocess

    import zett_agent

    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    return {
        "built_at_commit": commit.strip(),
        "zett_agent_version": zett_agent.__version__,
        "logs": "../shared/agent-logs (paths below are relative to it)",
        "replay": "the truncate:0.1 replays of the lost-item set's pool (bench/validity_pool.py settings_of: "
        "max_tokens = tokens // 3, keep_recent_tokens = tokens // 10, stock or split-turn engine as decided there), "
        "plus the agent's own recorded compactions (summarizer 'native') where the log has them; not the anchors "
        "replays (their summaries change whenever the anchor extractor does)",
        "candidate": "a constraint anchor (zett_lab.load.anchors, type constraint) of an applied compaction's span "
        "with a summary; text = the rule as first written, message_index = the first span message holding it",
        "verdict_at_sampling": "the constraint metric's verdict at built_at_commit: kept iff in_summary or in_tail "
        "of measure(trace).anchors (what constraint_survival counts), else dropped; dossiers never show it",
        "summary_sha256": "first 16 hex digits of the SHA-256 of the summary the dossier shows (UTF-8)",
        "strata": "(log, conversation, normalized rule, verdict)",
        "draw": f"random.Random({SEED}).choice over each stratum's items sorted by id, strata in sorted order",
        "weight": "N_h / n_h of the item's stratum (pool size over sample size, n_h = 1)",
        "split": SPLIT_RULE,
    }


def build(logs: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The whole pool and the sample drawn from it."""
    pool = [row for source in read_sources(logs) for row in verdicts_of(source)]
    ids = Counter(r["id"] for r in pool)
    if max(ids.values(), default=1) > 1:
        raise SystemExit(f"two pool items share an id: {ids.most_common(1)}")
    return pool, sample(pool)


# --- dossiers --------------------------------------------------------------------------------------------------


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9_./-]+", text.lower()) if len(w) >= CONTENT_WORD}


def closest(parts: list[Part], rule: str, shown: int, minimum: int = 2) -> list[tuple[Part, float]]:
    """The parts sharing the most content words with the rule (at least ``minimum``, or all of a short rule's)."""
    words = content_words(rule)
    need = min(minimum, len(words))
    shared = [(p, len(words & content_words(p.text))) for p in parts]
    scored = [(p, n / len(words)) for p, n in shared if words and n >= max(1, need)]
    return sorted(scored, key=lambda s: (-s[1], s[0].index))[:shown]


def _window_text(text: str, rule: str, width: int) -> str:
    """About ``width`` characters of ``text`` around its densest stretch of the rule's content words."""
    words = content_words(rule)
    spots = [m.start() for m in re.finditer(r"[A-Za-z0-9_./-]+", text) if m.group().lower() in words]
    if not spots:
        return text[:width] + ("…" if len(text) > width else "")
    best = max(spots, key=lambda s: sum(1 for t in spots if s <= t < s + width // 2))
    return excerpt(text, best, best, width).replace("⟦⟧", "")


def summary_lines(summary: str, rule: str) -> list[str]:
    """The summary whole when short, else its lines closest in wording to the rule."""
    if len(summary) <= SUMMARY_WHOLE:
        return [f"  {line}" for line in summary.splitlines() if line.strip()] or ["  (empty summary)"]
    lines = [Part(i, "summary line", flat(text), False) for i, text in enumerate(summary.splitlines()) if text.strip()]
    best = closest(lines, rule, CLOSEST_SHOWN, minimum=1)
    out = [
        f"  (the summary has {len(summary):,} characters in {len(lines):,} lines; the {len(best)} lines sharing the "
        "most words with the rule are shown, in summary order)"
    ]
    out += [f"  [summary line {p.index}] {p.text[:CLOSE_CONTEXT]}" for p, _ in sorted(best, key=lambda b: b[0].index)]
    return out if best else [*out, "  (no line shares a content word with the rule)"]


def dossier(item: dict[str, Any], source: Source, summary: str, logs: Path) -> str:
    """The dossier text of one constraint item (never the metric's verdict)."""
    messages = source.conversation.messages
    start, end, recorded = item["span_start"], item["span_end"], item["n_recorded"]
    parts = [p for i, m in enumerate(messages) for p in parts_of(i, m)]
    rule = item["text"]
    who = (
        "the agent's own (production) summary, recorded in the log"
        if item["setting"]["summarizer"] == NATIVE
        else f"an offline summarizer ({item['setting']['summarizer']})"
    )
    out = [
        f"ITEM {item['id']}",
        f"Rule (as extracted): {rule}",
        f"Agent format: {source.agent}    Conversation: {len(messages)} messages    Summary: {who}",
        "",
        f"WHERE IT WAS STATED (message {item['message_index']})",
    ]
    stated = [p for p in parts if p.index == item["message_index"]]
    needle = re.compile(re.escape(flat(rule)[:80]), re.IGNORECASE)
    match = next(((p, m) for p in stated if (m := needle.search(p.text))), None)
    if match:
        part, found = match
        out.append(f"  [message {part.index}, {part.role}]")
        out.append(f"    {excerpt(part.text, found.start(), found.start() + len(flat(rule)), STATED_CONTEXT)}")
    elif stated:
        out.append(
            f"  [message {stated[0].index}, {stated[0].role}] {_window_text(stated[0].text, rule, STATED_CONTEXT)}"
        )
    again = sorted({p.index for p in parts if p.index != item["message_index"] and needle.search(p.text)})
    if again:
        out.append(
            f"  the same words also in messages: {', '.join(map(str, again[:20]))}{' …' if len(again) > 20 else ''}"
        )
    out += [
        "",
        "COMPACTION BOUNDARY",
        f"  messages {start}..{end - 1}: the span, replaced by the summary below",
        f"  messages {end}..{recorded - 1}: the tail, kept verbatim",
        f"  messages {recorded}..{len(messages) - 1}: after the compaction",
    ]
    if start > 0:
        out.append(f"  messages 0..{start - 1}: before the span (a system prompt is sent with every request)")
    out += ["", "THE SUMMARY", *summary_lines(summary, rule)]
    tail = [p for p in parts if end <= p.index < recorded]
    near = closest(tail, rule, 3)
    out += ["", f"CLOSEST WORDING IN THE TAIL (messages {end}..{recorded - 1}): {len(near)} shown"]
    out += [f"  [message {p.index}, {p.role}]\n    {_window_text(p.text, rule, CLOSE_CONTEXT)}" for p, _ in near]
    system = [p for p in parts if p.role == "system prompt"]
    near_system = closest(system, rule, 1)
    if near_system:
        out += ["", "CLOSEST WORDING IN THE SYSTEM PROMPT"]
        out += [f"  [message {p.index}]\n    {_window_text(p.text, rule, CLOSE_CONTEXT)}" for p, _ in near_system]
    after = [p for p in parts if p.index >= recorded]
    users = [p for p in after if p.role == "user"][:2]
    restated = [(p, s) for p, s in closest([p for p in after if p.is_use], rule, 3) if s >= 0.5]
    out += ["", f"AFTER THE COMPACTION ({len(messages) - recorded} messages)"]
    out += ["  the user's next messages:" if users else "  the user writes nothing more."]
    out += [
        f"  [message {p.index}, user]\n    {p.text[:CLOSE_CONTEXT]}{'…' if len(p.text) > CLOSE_CONTEXT else ''}"
        for p in users
    ]
    if restated:
        out.append("  messages of the user or the agent sharing half the rule's words or more:")
        out += [
            f"  [message {p.index}, {p.role}]\n    {_window_text(p.text, rule, CLOSE_CONTEXT)}" for p, _ in restated
        ]
    notes = harness_note(source, logs)
    if notes:
        out += ["", "HARNESS NOTE", *(f"  {n}" for n in notes)]
    return "\n".join(out) + "\n"


def summaries_of(source: Source) -> dict[tuple[str, int, int, int], str]:
    """(setting as JSON, span_start, span_end, n_recorded) -> summary text, of every trace of the conversation."""
    found: dict[tuple[str, int, int, int], str] = {}
    for setting, trace in traces_of(source):
        for row in trace.compactions.to_dict("records"):
            if row.get("summary_text") is None or row.get("span_start") is None:
                continue
            key = (
                json.dumps(setting, sort_keys=True),
                int(row["span_start"]),
                int(row["span_end"]),
                int(row["n_recorded"]),
            )
            found.setdefault(key, str(row["summary_text"]))
    return found


def write_dossiers(items: list[dict[str, Any]], logs: Path, out: Path) -> None:
    out = out.resolve()
    if out == ROOT or ROOT in out.parents:
        raise SystemExit(f"{out} is inside the repository: dossiers quote the shared logs and go outside it")
    sources = {(s.log, s.conversation.id): s for s in read_sources(logs)}
    out.mkdir(parents=True, exist_ok=True)
    summaries: dict[tuple[str, str], dict[tuple[str, int, int, int], str]] = {}
    index, sizes = [], []
    for item in items:
        key = (item["log"], item["conversation_id"])
        source = sources.get(key)
        if source is None:
            raise SystemExit(f"item {item['id']}: conversation {item['conversation_id']} of {item['log']} not found")
        if key not in summaries:
            summaries[key] = summaries_of(source)
        window = (json.dumps(item["setting"], sort_keys=True), item["span_start"], item["span_end"], item["n_recorded"])
        if window not in summaries[key]:
            raise SystemExit(f"item {item['id']}: no summary at its window {window} in today's replay")
        text = dossier(item, source, summaries[key][window], logs)
        sizes.append(count_text_tokens(text))
        path = out / f"{item['id']}.txt"
        path.write_text(text, encoding="utf-8")
        index.append({"id": item["id"], "dossier": str(path)})
    random.Random(ORDER_SEED).shuffle(index)
    (out / "items.jsonl").write_text("".join(json.dumps(row) + "\n" for row in index), encoding="utf-8")
    print(
        f"{len(index)} dossiers in {out}: mean {sum(sizes) / max(1, len(sizes)):,.0f} tokens, max {max(sizes, default=0):,}"
    )


def read_items(path: Path = ITEMS_FILE) -> list[dict[str, Any]]:
    if not path.is_file():
        raise SystemExit(f"no constraint items at {path}: build them with bench/validity_constraints.py --write")
    return list(json.loads(path.read_text(encoding="utf-8"))["items"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, default=LOGS, help="the shared agent logs (default ../shared/agent-logs)")
    parser.add_argument("--write", action="store_true", help=f"write {ITEMS_FILE.name} and {SPLIT_FILE.name}")
    parser.add_argument("--dossiers", type=Path, nargs="?", const=DEFAULT_DOSSIERS, default=None,
                        help=f"write the committed items' dossiers (default {DEFAULT_DOSSIERS})")  # fmt: skip
    args = parser.parse_args(argv)
    if args.dossiers is not None and not args.write:
        write_dossiers(read_items(), args.logs, args.dossiers)
        return
    pool, chosen = build(args.logs)
    by_agent = Counter(r["agent"] for r in chosen)
    rules = {rule_of(r) for r in pool}
    verdicts = Counter(r["verdict_at_sampling"] for r in chosen)
    parts = Counter(part_of(r) for r in chosen)
    print(f"pool: {len(pool):,} (rule, compaction) verdicts of {len(rules)} rules")
    print(f"sample: {len(chosen)} items ({verdicts[KEPT]} kept, {verdicts[DROPPED]} dropped; "
          f"{parts[TUNE]} tune, {parts[HELD_BACK]} held back) of {len(by_agent)} agent formats: "
          + ", ".join(f"{agent} {n}" for agent, n in sorted(by_agent.items())))  # fmt: skip
    if args.write:
        strata = Counter(r["stratum"] for r in chosen)
        pooled = Counter(f"{rule_of(r)}|{r['verdict_at_sampling']}" for r in pool)
        table = [{"stratum": s, "N": pooled[s], "n": strata[s]} for s in sorted(pooled)]
        write(ITEMS_FILE, {"procedure": procedure(), "strata": table, "items": chosen})
        write(SPLIT_FILE, {"rule": SPLIT_RULE, "parts": {r["id"]: part_of(r) for r in chosen}})
        print(f"wrote {ITEMS_FILE.relative_to(ROOT)} and {SPLIT_FILE.relative_to(ROOT)}")
        if args.dossiers is not None:
            write_dossiers(chosen, args.logs, args.dossiers)


if __name__ == "__main__":
    main()
