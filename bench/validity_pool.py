"""The validation set of "lost but needed" (issue 28): its pool, its stratified sample and its held-back quarter.

The pool is every *candidate lost item* of the shared real agent logs (``../shared/agent-logs``, read from
there, never copied): replay each conversation as the issue's tester did (``max_tokens`` a third of the
conversation's tokens, ``keep_recent_tokens`` a tenth, summarizers ``anchors`` and ``truncate:0.1``, the stock
engine, or ``split-turn`` where the stock engine met a step over the threshold with no window to compact);
an item is an anchor of an applied compaction's span S_k that is neither in the summary nor (exactly) in the
kept tail or the system prompt, and that occurs again anywhere after the compaction (any role, tool results
included). That is deliberately broader than any "needed" metric, so labels of a sample of it measure both
precision and recall of whichever definition is asked. One item per (log, conversation, span, anchor): the two
summarizers' replays share a span when they compact at the same place.

The sample (:data:`SAMPLE_SIZE` items, seed :data:`SEED`) is stratified by conversation and by whether the
metric on main when the pool was built flagged the item (``needed_later``): the sample is spread evenly over
agent formats, then over a format's conversations, then over the two flags, each capped by what exists, and no
conversation gets more than :data:`CONVERSATION_CAP` of the sample. Within a stratum h (N_h pool items, n_h
drawn) the draw is simple random sampling; every item carries its stratum and its weight N_h / n_h.

The held-back quarter is fixed by :func:`part_of`, a rule on the item's own fields decided before any label
exists: an item is held back when the SHA-256 of (log, conversation, anchor type, anchor text) is 0 modulo 4,
so one anchor of one conversation is in the same part in every span it belongs to.

Run once, at the commit the pool is recorded at (the pool depends on the anchor extractor of that commit; the
files it writes are the fixed record, and later code only reads them)::

    .venv/bin/python bench/validity_pool.py [--logs DIR] --write

Without ``--write`` it builds the pool and prints its strata without writing anything.

**Later rounds** (``--round N``, :data:`ROUNDS`) are further samples of the same logs, each drawn after the
rounds before it had been looked at while tuning, so that its labels are unseen: the same summarizers and engines
at replay settings no earlier round used, leaving out every anchor of a conversation an earlier round sampled
(same log, conversation, type and normal form). A later round is drawn to measure precision tightly: a number
of items the metric flagged when it was drawn and a few it did not (for recall), each shared over agent formats
in proportion to the pool (at least a floor per format and flag where the pool has them), then over a format's
conversations in proportion, so the flagged items weigh nearly alike. It has no split: nobody tunes on it; its
labels are read once, with the final metric. A round is data (:class:`Round`: its settings, seed, sizes and
floors); round 2 was drawn after the first round's held-back quarter had been measured, round 3 after round 2's
labels had been read and tuned on, round 4 after round 3's had been read, round 5 after round 4's had been read
and tuned on (at the final metric). Each writes its own ``items<N>.json`` only::

    .venv/bin/python bench/validity_pool.py --round 3 --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import zett_lab  # noqa: E402
from zett_lab.load import Conversation  # noqa: E402
from zett_lab.load.anchor_forms import normalize  # noqa: E402
from zett_lab.replay.engine_names import ENGINE_NAMES  # noqa: E402
from zett_lab.tokens import count_tokens  # noqa: E402

LOGS = ROOT.parent / "shared" / "agent-logs"
SET_DIR = ROOT / "bench" / "validation"
ITEMS_FILE = SET_DIR / "items.json"
SPLIT_FILE = SET_DIR / "split.json"
LABELS_FILE = SET_DIR / "labels.jsonl"

SUMMARIZERS = ("anchors", "truncate:0.1")
SEED = 2803
SAMPLE_SIZE = 448
CONVERSATION_CAP = 0.15
TUNE, HELD_BACK = "tune", "held-back"
#: The part every item of a later round is in: nobody tuned on it.
UNSEEN = "unseen"


@dataclass(frozen=True)
class Round:
    """A later sample of the validation set (round 2 on): its name, its replay settings (pairs of divisors of a
    conversation's tokens: ``max_tokens``, ``keep_recent_tokens``), its seed, its flagged and not-flagged sample
    sizes, the least a format gets of each where its pool has them, and what it follows (for the record)."""

    number: int
    name: str
    settings: tuple[tuple[int, int], ...]
    seed: int
    drawn_after: str
    flag_metric: str
    #: Every later round so far: 150 flagged items for precision, 40 not flagged for recall, at least 8 and 3
    #: per agent format.
    flagged: int = 150
    not_flagged: int = 40
    floor_flagged: int = 8
    floor_not_flagged: int = 3

    @property
    def items_file(self) -> Path:
        return SET_DIR / f"items{self.number}.json"

    @property
    def labels_file(self) -> Path:
        return SET_DIR / f"labels{self.number}.jsonl"

    @property
    def earlier_items(self) -> list[Path]:
        """The samples of the rounds before it: what it leaves out."""
        return [ITEMS_FILE, *(SET_DIR / f"items{n}.json" for n in range(2, self.number))]

    def floor(self, flagged: bool) -> int:
        return self.floor_flagged if flagged else self.floor_not_flagged


ROUNDS = {
    r.number: r
    for r in (
        Round(
            number=2,
            name="second sample",
            settings=((4, 20), (2, 5)),
            seed=2812,
            drawn_after="drawn after the first round's held-back quarter was measured",
            flag_metric="tuned on the first round's items",
        ),
        Round(
            number=3,
            name="third sample",
            settings=((6, 30), (5, 40)),
            seed=2833,
            drawn_after="drawn after round 2's labels were read and tuned on, before the tuning on rounds 1 and 2 "
            "that followed",
            flag_metric="tuned on the first round's items and on round 2's",
        ),
        Round(
            number=4,
            name="fourth sample",
            # Of eleven settings no earlier round used (max_tokens a third to a twentieth, keep_recent_tokens a
            # twentieth to a hundredth), counted before anything was sampled: (8, 50) has the most distinct flagged
            # anchors not sampled before of the milder ones (76; 1-52 milder still), (16, 80) the most but one
            # (148); together 149 of the 167 all eleven have, in 411 flagged items.
            settings=((8, 50), (16, 80)),
            seed=2844,
            drawn_after="drawn after round 3's labels were read (at the frozen metric), before the sixth round of "
            "tuning, on rounds 1 to 3, landed",
            flag_metric="frozen at 2b9f5f8 after the fifth round, tuned on the first round's items and on round 2's",
        ),
        Round(
            number=5,
            name="fifth sample",
            # Of nineteen settings no earlier round used (max_tokens a third to a sixty-fourth, keep_recent_tokens
            # a twentieth to a three-hundred-twentieth), counted at 97209af before anything was sampled: distinct
            # flagged anchors not sampled by rounds 1-4, 0-28 at max_tokens a third to a twelfth, 55-109 at a
            # sixteenth to a thirty-second, 121 at (40, 200), 123 at (48, 240), 138 at (64, 320), which holds
            # every one the nineteen have (138), in 427 flagged items.
            settings=((64, 320),),
            seed=2855,
            drawn_after="drawn after round 4's labels were read and tuned on by the seventh round, at the final metric",
            flag_metric="final after the seventh round, tuned on rounds 1 to 4",
        ),
    )
}
SPLIT_RULE = (
    "held-back iff int(sha256('\\x1f'.join([log, conversation_id, type, text])).hexdigest()[:8], 16) % 4 == 0, "
    "else tune (UTF-8; one anchor of one conversation is in one part in every span)"
)


@dataclass(frozen=True)
class ReplaySetting:
    """How an item's conversation was replayed: engine by its command-line name, summarizer spec, the two limits."""

    engine: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int


@dataclass(frozen=True)
class Source:
    """One conversation of the shared logs: its log file (relative to the logs folder) and the conversation."""

    log: str
    conversation: Conversation

    @property
    def agent(self) -> str:
        return str(self.conversation.metadata.get("agent") or self.conversation.format)


def read_sources(logs: Path) -> list[Source]:
    """Every conversation of the logs folder, except compaction calls (a summarizer's input, not a session)."""
    if not logs.is_dir():
        raise SystemExit(f"no agent logs at {logs}: pass --logs DIR (the shared logs, ../shared/agent-logs)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # importers warn about what they skip; the set records what it kept
        conversations = zett_lab.load_all(logs)
    return [
        Source(Path(str(c.source)).resolve().relative_to(logs.resolve()).as_posix(), c)
        for c in conversations
        if str(c.metadata.get("compaction_call")) != "True"
    ]


def limits(conversation: Conversation, divisors: tuple[int, int] = (3, 10)) -> tuple[int, int]:
    """``max_tokens`` and ``keep_recent_tokens`` as fractions of the conversation's tokens: by default a third and a
    tenth (the first round's setting)."""
    tokens = count_tokens(conversation.messages)
    return max(1, tokens // divisors[0]), max(1, tokens // divisors[1])


def replay(conversation: Conversation, setting: ReplaySetting) -> zett_lab.Trace:
    """One replay with the recorded setting (no summary cache: offline summarizers are cheap and deterministic)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zett_lab.replay(
            conversation,
            max_tokens=setting.max_tokens,
            keep_recent_tokens=setting.keep_recent_tokens,
            summarizer=setting.summarizer,
            engine=ENGINE_NAMES[setting.engine],
            cache=False,
            warn=False,
        )


def settings_of(
    conversation: Conversation, divisors: tuple[int, int] = (3, 10)
) -> list[tuple[ReplaySetting, zett_lab.Trace]]:
    """The tester's replays of one conversation at one pair of limits (:func:`limits`): the stock engine, or
    split-turn for both summarizers where a stock replay had a step over the threshold with no window (no
    whole-turn boundary, or only checkpoints)."""
    max_tokens, keep = limits(conversation, divisors)
    stock = [ReplaySetting("stock", s, max_tokens, keep) for s in SUMMARIZERS]
    traces = [(setting, replay(conversation, setting)) for setting in stock]
    stuck = any(
        int(row["steps_no_boundary"]) + int(row["steps_only_checkpoints"]) > 0
        for _, trace in traces
        for row in zett_lab.measure(trace, anchors=False).conversation.to_dict("records")
    )
    if not stuck:
        return traces
    split = [ReplaySetting("split-turn", s, max_tokens, keep) for s in SUMMARIZERS]
    return [(setting, replay(conversation, setting)) for setting in split]


def item_id(fields: dict[str, Any]) -> str:
    """A stable id from the item's identity (log, conversation, setting, span, anchor type, text, message)."""
    identity = [
        fields["log"],
        fields["conversation_id"],
        fields["setting"],
        fields["span_start"],
        fields["span_end"],
        fields["n_recorded"],
        fields["type"],
        fields["text"],
        fields["message_index"],
    ]
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()[:12]


def part_of(item: dict[str, Any]) -> str:
    """:data:`HELD_BACK` or :data:`TUNE` by :data:`SPLIT_RULE` (fields of the item only; no label, no metric)."""
    key = "\x1f".join([item["log"], item["conversation_id"], item["type"], item["text"]])
    return HELD_BACK if int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:8], 16) % 4 == 0 else TUNE


def pool_of(source: Source, settings: Iterable[tuple[int, int]] = ((3, 10),)) -> list[dict[str, Any]]:
    """The candidate lost items of one conversation under its replay settings, one per span and anchor."""
    items: dict[tuple[Hashable, ...], dict[str, Any]] = {}
    replays = [pair for divisors in settings for pair in settings_of(source.conversation, divisors)]
    for setting, trace in replays:
        losses = zett_lab.measure(trace)
        anchors = losses.anchors
        if not len(anchors):
            continue
        windows = losses.compactions[["compaction_id", "span_start", "span_end", "n_recorded"]]
        rows = anchors.merge(windows, on="compaction_id")
        lost = rows[rows["applied"] & ~rows["in_summary"] & ~rows["in_tail"] & rows["in_future"]]
        for row in lost.to_dict("records"):
            window = (int(row["span_start"]), int(row["span_end"]), int(row["n_recorded"]))
            key = (*window, row["type"], row["normalized"])
            if key in items:
                items[key]["lost_in"].append(setting.summarizer)
                continue
            item = {
                "log": source.log,
                "conversation_id": source.conversation.id,
                "agent": source.agent,
                "setting": asdict(setting),
                "span_start": window[0],
                "span_end": window[1],
                "n_recorded": window[2],
                "type": str(row["type"]),
                "text": str(row["value"]),
                "message_index": int(row["message_index"]),
            }
            items[key] = {
                "id": item_id(item),
                **item,
                "lost_in": [setting.summarizer],
                "flagged_at_sampling": bool(row["needed_later"]),
            }
    return list(items.values())


def fill(total: int, capacity: dict[Any, int]) -> dict[Any, int]:
    """``total`` shared as evenly as possible over the keys, none above its capacity (water-filling; the
    remainder of an uneven share goes to the keys with the most room left, ties in key order)."""
    given = dict.fromkeys(capacity, 0)
    left = min(total, sum(capacity.values()))
    while left > 0:
        open_keys = [k for k in sorted(capacity, key=str) if given[k] < capacity[k]]
        share = left // len(open_keys)
        if share == 0:
            for key in sorted(open_keys, key=lambda k: (given[k] - capacity[k], str(k)))[:left]:
                given[key] += 1
            break
        for key in open_keys:
            add = min(share, capacity[key] - given[key])
            given[key] += add
            left -= add
    return given


def stratum_of(item: dict[str, Any]) -> str:
    flag = "flagged" if item["flagged_at_sampling"] else "not-flagged"
    return f"{item['log']}#{item['conversation_id']}|{flag}"


def allocate(pool: list[dict[str, Any]], total: int, cap: int) -> dict[str, int]:
    """Sample size per stratum: even over agent formats, then conversations (at most ``cap`` each), then flags."""
    sizes: dict[str, Counter[str]] = defaultdict(Counter)  # conversation key -> stratum -> pool size
    agent_of: dict[str, str] = {}
    for item in pool:
        conversation = f"{item['log']}#{item['conversation_id']}"
        sizes[conversation][stratum_of(item)] += 1
        agent_of[conversation] = item["agent"]
    conversation_room = {c: min(cap, sum(s.values())) for c, s in sizes.items()}
    agent_room: Counter[str] = Counter()
    for conversation, room in conversation_room.items():
        agent_room[agent_of[conversation]] += room
    per_agent = fill(total, dict(agent_room))
    per_stratum: dict[str, int] = {}
    for agent, agent_size in per_agent.items():
        mine = {c: room for c, room in conversation_room.items() if agent_of[c] == agent}
        for conversation, conversation_size in fill(agent_size, mine).items():
            per_stratum.update(fill(conversation_size, dict(sizes[conversation])))
    return per_stratum


def proportional(total: int, sizes: dict[Any, int], floor: int = 0) -> dict[Any, int]:
    """``total`` shared over the keys in proportion to their sizes, each first given ``floor`` (or all it has),
    none above its size (what a full key cannot take goes to the others; largest remainders, ties in key order)."""
    given = {key: min(floor, size) for key, size in sizes.items()}
    left = min(total, sum(sizes.values())) - sum(given.values())
    while left > 0:
        room = {key: size for key, size in sizes.items() if given[key] < size}
        quota = {key: left * size / sum(room.values()) for key, size in room.items()}
        add = {key: min(int(q), sizes[key] - given[key]) for key, q in quota.items()}
        if not any(add.values()):
            for key in sorted(room, key=lambda k: (int(quota[k]) - quota[k], str(k)))[:left]:
                given[key] += 1
            break
        for key, count in add.items():
            given[key] += count
            left -= count
    return given


def allocate_round(pool: list[dict[str, Any]], round_: Round) -> dict[str, int]:
    """A later round's sample size per stratum: per flag, its total shared over agent formats in proportion to
    their pool (at least the round's floor of the flag each where the pool has them), then over a format's
    conversations in proportion."""
    per_stratum: dict[str, int] = {}
    for flagged, total in ((True, round_.flagged), (False, round_.not_flagged)):
        sizes: dict[str, Counter[str]] = defaultdict(Counter)  # agent -> stratum -> pool size
        for item in pool:
            if item["flagged_at_sampling"] == flagged:
                sizes[item["agent"]][stratum_of(item)] += 1
        per_agent = proportional(total, {agent: sum(s.values()) for agent, s in sizes.items()}, round_.floor(flagged))
        for agent, agent_size in per_agent.items():
            per_stratum.update(proportional(agent_size, dict(sizes[agent])))
    return per_stratum


def draw(pool: list[dict[str, Any]], sizes: dict[str, int], seed: int) -> list[dict[str, Any]]:
    """``sizes[h]`` items drawn at random from every stratum h, each with its stratum and its weight N_h / n_h."""
    by_stratum: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in sorted(pool, key=lambda i: i["id"]):
        by_stratum[stratum_of(item)].append(item)
    rng = random.Random(seed)
    chosen = []
    for stratum in sorted(by_stratum):
        members, n = by_stratum[stratum], sizes.get(stratum, 0)
        for item in rng.sample(members, n):
            chosen.append({**item, "stratum": stratum, "weight": len(members) / n})
    return sorted(chosen, key=lambda i: i["id"])


def sample(pool: list[dict[str, Any]], total: int = SAMPLE_SIZE, seed: int = SEED) -> list[dict[str, Any]]:
    """The first round's stratified sample, each item with its stratum and its weight N_h / n_h."""
    return draw(pool, allocate(pool, total, int(total * CONVERSATION_CAP)), seed)


def sampled_keys(items: Iterable[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(log, conversation, type, normal form) of every sampled item: what a later round leaves out."""
    return {(i["log"], i["conversation_id"], i["type"], normalize(i["type"], i["text"])) for i in items}


def strata_table(pool: list[dict[str, Any]], chosen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per stratum: its agent format, log, conversation, flag, pool size N and sample size n."""
    pooled = Counter(stratum_of(i) for i in pool)
    drawn = Counter(i["stratum"] for i in chosen)
    first = {stratum_of(i): i for i in pool}
    return [
        {
            "stratum": s,
            "agent": first[s]["agent"],
            "log": first[s]["log"],
            "conversation_id": first[s]["conversation_id"],
            "flagged_at_sampling": first[s]["flagged_at_sampling"],
            "N": pooled[s],
            "n": drawn[s],
        }
        for s in sorted(pooled)
    ]


def procedure() -> dict[str, Any]:
    """How the pool and the sample were made, for the record."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    import zett_agent

    return {
        "built_at_commit": commit.strip(),
        "zett_agent_version": zett_agent.__version__,
        "logs": "../shared/agent-logs (paths below are relative to it)",
        "replay": (
            "max_tokens = tokens // 3, keep_recent_tokens = tokens // 10 (tokens: zett_lab.count_tokens over all "
            "messages); summarizers " + ", ".join(SUMMARIZERS) + "; engine stock, or split-turn "
            "(SplitTurnCompaction) for every summarizer where a stock replay had steps over the threshold with no "
            "whole-turn boundary or only checkpoints; no summary cache; compaction calls (metadata "
            "compaction_call) left out"
        ),
        "candidate": (
            "an anchor of an applied compaction's span messages[span_start:span_end] that is not in the summary, "
            "not in the kept tail messages[span_end:n_recorded] nor the system prompt (exact keys), and occurs in "
            "messages[n_recorded:] (any role, tool results included); text = the anchor as first written, "
            "message_index = the first span message holding it"
        ),
        "deduplication": "one item per (log, conversation, span_start, span_end, n_recorded, type, normalized "
        "anchor); setting = the first summarizer (in the order above) that lost it, lost_in = all that did",
        "flag_at_sampling": "needed_later of the metric at built_at_commit (used again by the user or the agent, "
        "not in the tail); the stratum records it, dossiers never show it",
        "strata": "(log, conversation, flag at sampling)",
        "allocation": (
            f"{SAMPLE_SIZE} items shared evenly over agent formats, then over a format's conversations (at most "
            f"{CONVERSATION_CAP:.0%} of the sample, {int(SAMPLE_SIZE * CONVERSATION_CAP)} items, per "
            "conversation), then over the two flags, each capped by what the pool holds (water-filling: what a "
            "capped group cannot take goes to the others)"
        ),
        "draw": f"random.Random({SEED}).sample over each stratum's items sorted by id, strata in sorted order",
        "weight": "N_h / n_h of the item's stratum (pool size over sample size)",
        "split": SPLIT_RULE,
    }


def round_procedure(round_: Round) -> dict[str, Any]:
    """How a later round's pool and sample were made, for the record."""
    first = procedure()
    settings = "; ".join(f"max_tokens = tokens // {m}, keep_recent_tokens = tokens // {k}" for m, k in round_.settings)
    earlier = " and ".join(path.name for path in round_.earlier_items)
    return {
        **{key: first[key] for key in ("built_at_commit", "zett_agent_version", "logs")},
        "round": f"{round_.number}: another sample of the same logs at other replay settings, {round_.drawn_after}; "
        "never used for tuning (no split: every item is unseen)",
        "replay": first["replay"].replace("max_tokens = tokens // 3, keep_recent_tokens = tokens // 10", settings),
        "candidate": first["candidate"],
        "excluded": "every candidate whose (log, conversation, type, normal form of the text) is that of an item "
        f"of {earlier} (the earlier rounds' samples), in whatever span or setting",
        "deduplication": "one item per (log, conversation, span_start, span_end, n_recorded, type, normalized "
        "anchor) over all its settings; setting = the first (setting, summarizer), in the orders above, that lost "
        "it",
        "flag_at_sampling": "needed_later of the metric at built_at_commit (the definition of docs/needed-later.md "
        f"there, {round_.flag_metric}); the stratum records it, dossiers never show it",
        "strata": first["strata"],
        "allocation": (
            f"{round_.flagged} flagged and {round_.not_flagged} not-flagged items; each shared over agent formats "
            f"in proportion to their pool, every format first given {round_.floor_flagged} flagged and "
            f"{round_.floor_not_flagged} not-flagged items (or all it has), then over a "
            "format's conversations in proportion to their pool (largest remainders; what a full stratum cannot "
            "take goes to the others; a flag whose pool is smaller than its size is taken whole)"
        ),
        "draw": f"random.Random({round_.seed}).sample over each stratum's items sorted by id, strata in sorted order",
        "weight": first["weight"],
    }


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")


def read_items(path: Path = ITEMS_FILE) -> list[dict[str, Any]]:
    """The sampled items of the committed set (each with its stratum, weight and replay setting)."""
    if not path.is_file():
        raise SystemExit(f"no validation items at {path}: build them with bench/validity_pool.py --write")
    return list(json.loads(path.read_text(encoding="utf-8"))["items"])


def read_split(path: Path = SPLIT_FILE) -> dict[str, str]:
    """Item id -> part (:data:`TUNE` or :data:`HELD_BACK`) as committed."""
    if not path.is_file():
        raise SystemExit(f"no held-back split at {path}: build it with bench/validity_pool.py --write")
    return dict(json.loads(path.read_text(encoding="utf-8"))["parts"])


def build(logs: Path, round_: int = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The whole pool of a round and the sample drawn from it."""
    later = ROUNDS.get(round_)
    settings = later.settings if later else ((3, 10),)
    excluded = set().union(*(sampled_keys(read_items(path)) for path in later.earlier_items)) if later else set()
    pool: list[dict[str, Any]] = []
    for source in read_sources(logs):
        pool.extend(i for i in pool_of(source, settings) if next(iter(sampled_keys([i]))) not in excluded)
    ids = Counter(i["id"] for i in pool)
    if max(ids.values(), default=1) > 1:
        raise SystemExit(f"two pool items share an id: {ids.most_common(1)}")
    return pool, draw(pool, allocate_round(pool, later), later.seed) if later else sample(pool)


def summary_lines(table: Iterable[dict[str, Any]], chosen: list[dict[str, Any]], split: bool = True) -> list[str]:
    lines = [f"{'agent':15} {'conversation':52} {'flag':12} {'N':>6} {'n':>4}"]
    for row in table:
        flag = "flagged" if row["flagged_at_sampling"] else "not-flagged"
        lines.append(f"{row['agent']:15} {row['conversation_id'][:52]:52} {flag:12} {row['N']:>6,} {row['n']:>4}")
    parts = Counter(part_of(i) for i in chosen)
    flagged = sum(i["flagged_at_sampling"] for i in chosen)
    lines.append(
        f"sampled {len(chosen)} items: {flagged} flagged, {len(chosen) - flagged} not flagged"
        + (f"; {parts[TUNE]} tune, {parts[HELD_BACK]} held back" if split else "")
    )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, default=LOGS, help="the shared agent logs (default ../shared/agent-logs)")
    parser.add_argument(
        "--round",
        type=int,
        choices=(1, *ROUNDS),
        default=1,
        help="1: the first set (default); 2 and on: a later sample (ROUNDS)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write {ITEMS_FILE.name} and {SPLIT_FILE.name} (round 1) or items<N>.json (round N)",
    )
    args = parser.parse_args(argv)
    pool, chosen = build(args.logs, args.round)
    table = strata_table(pool, chosen)
    print(f"pool: {len(pool):,} candidate lost items")
    print("\n".join(summary_lines(table, chosen, split=args.round == 1)))
    later = ROUNDS.get(args.round)
    if args.write and later:
        write(later.items_file, {"procedure": round_procedure(later), "strata": table, "items": chosen})
        print(f"wrote {later.items_file.relative_to(ROOT)}")
    elif args.write:
        write(ITEMS_FILE, {"procedure": procedure(), "strata": table, "items": chosen})
        write(SPLIT_FILE, {"rule": SPLIT_RULE, "parts": {i["id"]: part_of(i) for i in chosen}})
        print(f"wrote {ITEMS_FILE.relative_to(ROOT)} and {SPLIT_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
