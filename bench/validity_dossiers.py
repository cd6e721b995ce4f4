"""One dossier per item of the validation set, for labellers who judge whether a lost item was truly needed.

A dossier is plain text (at most about 2,500 tokens) holding what the labelling guidelines
(``docs/validation/guidelines.md``) ask a labeller to weigh, and nothing of what a metric decided:

* the item's text, type and agent format;
* the compaction boundary: which messages the summary replaced (the span), which it kept verbatim (the tail),
  which came after;
* the span message the item was taken from (its first in the span, as the extractor reads it), with its role
  and about 600 characters around it, and the other span messages holding it;
* every occurrence after the compaction up to and including the first one in a message of the user or the agent
  (tool results included, each with its role, message index and about 400 characters around it; the nearest
  ones to that use are shown in full, the others listed);
* mentions in the tail and in the system prompt found by a loose search (case-insensitive, whitespace-collapsed),
  also of the short form (last path components, unqualified name), so the labeller can judge other spellings;
* a note on what the harness sends that the log does not show (aider re-sends the files added to the chat with
  every request; a system prompt that is not recorded; an in-context demonstration).

The dossiers are written OUTSIDE the repository (they quote the shared logs), one file per item, with an index
``items.jsonl`` (item id, dossier path) in a shuffled order that says nothing of the item's stratum::

    .venv/bin/python bench/validity_dossiers.py [--logs DIR] [--out /work/team/dossiers]
    .venv/bin/python bench/validity_dossiers.py --items bench/validation/items2.json --out /work/team/dossiers2
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from validity_pool import ITEMS_FILE, LOGS, ROOT, Source, read_items, read_sources
from zett_agent.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage

from zett_lab.load.anchor_forms import normalize
from zett_lab.load.text import clean_text, content_text, tool_call_text
from zett_lab.tokens import count_text_tokens

DEFAULT_OUT = Path("/work/team/dossiers")
#: Characters of context around an occurrence: in the span, after the compaction, in the tail or system prompt.
SPAN_CONTEXT, AFTER_CONTEXT, MENTION_CONTEXT = 600, 400, 240
#: Occurrences after the compaction shown in full (the use and the ones nearest before it); the rest are listed.
AFTER_SHOWN = 5
MENTIONS_SHOWN = 3
#: Short forms shorter than this are not searched (``get`` of ``Client.users.get`` matches everything), except a
#: number's digits (``250`` of ``250 ms``).
SHORT_MIN = 4
#: A file name's stem is a short form when it has an underscore or this many characters (``singlediode``,
#: ``signal_schema``; not ``service``).
STEM_MIN = 10
TOKEN_BUDGET = 2_500
ORDER_SEED = 2804
#: User-message attributes of importers that mark a message the harness wrote, not the user.
HARNESS_ATTRIBUTES = ("aider_output", "meta", "injected", "demonstration")


@dataclass(frozen=True)
class Part:
    """One searchable piece of a message: its index, who wrote it (as shown) and its whitespace-collapsed text."""

    index: int
    role: str
    text: str
    is_use: bool  # written by the user or the agent (not a tool result, not the harness)


def flat(text: str) -> str:
    return " ".join(clean_text(text).split())


def parts_of(index: int, message: Any) -> list[Part]:
    """The pieces of one message a labeller tells apart: text, each tool call, a tool result."""
    if isinstance(message, AssistantMessage):
        pieces = [Part(index, "assistant", flat(content_text(message.content)), True)]
        pieces += [
            Part(index, f"assistant tool call {call.name}", flat(tool_call_text(call)), True)
            for call in message.tool_calls or ()
        ]
        return [p for p in pieces if p.text]
    text = flat(content_text(message.content))
    if isinstance(message, ToolMessage):
        return [Part(index, f"tool result {message.name or ''}".strip(), text, False)]
    if isinstance(message, SystemMessage):
        return [Part(index, "system prompt", text, False)]
    if isinstance(message, UserMessage):
        marks = [key for key in HARNESS_ATTRIBUTES if (message.attributes or {}).get(key)]
        if marks:
            return [Part(index, f"user message written by the harness ({', '.join(marks)})", text, False)]
        return [Part(index, "user", text, True)]
    return [Part(index, str(getattr(message, "role", "message")), text, False)]


def variants(item: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(full spellings, short forms) of the item's text to search for, longest first.

    Short forms: a path's last two components, its file name, a Python file's dotted module name and a
    distinctive stem (``singlediode``, not ``service``); an identifier's last one or two dotted parts; a
    number without its unit."""
    text = flat(item["text"])
    full = {text, flat(normalize(item["type"], item["text"]))}
    short: set[str] = set()
    if item["type"] == "path":
        pieces = [p for p in re.split(r"[\\/]", text) if p and p not in (".", "..", "~")]
        if len(pieces) >= 2:
            short.add("/".join(pieces[-2:]))
        if pieces:
            short.add(pieces[-1])
            stem = pieces[-1].rsplit(".", 1)[0]
            if "." in pieces[-1] and ("_" in stem or len(stem) >= STEM_MIN):
                short.add(stem)
                if pieces[-1].endswith(".py") and len(pieces) >= 2:
                    short.add(f"{pieces[-2]}.{stem}")
    elif item["type"] == "identifier":
        bare = text.rstrip("()").rstrip("(")
        full.add(bare)
        dotted = bare.split(".")
        if len(dotted) >= 3:
            short.add(".".join(dotted[-2:]))
        if len(dotted) >= 2:
            short.add(dotted[-1])
    elif item["type"] == "number":
        digits = re.search(r"\d[\d,]*(?:\.\d+)?", text)
        if digits:
            short.add(digits.group())
    full_spellings = list({v.lower(): v for v in sorted(full) if v}.values())
    lowered = {v.lower() for v in full_spellings}
    short_forms = list(
        {
            v.lower(): v
            for v in sorted(short)
            if (len(v) >= SHORT_MIN or item["type"] == "number") and v.lower() not in lowered
        }.values()
    )
    return sorted(full_spellings, key=len, reverse=True), sorted(short_forms, key=len, reverse=True)


def pattern(needles: list[str]) -> re.Pattern[str] | None:
    """Case-insensitive, not inside a longer word on a side where the needle starts or ends with a word character."""
    if not needles:
        return None
    alternatives = []
    for needle in needles:
        left = r"(?<![A-Za-z0-9_])" if re.match(r"\w", needle) else ""
        right = r"(?![A-Za-z0-9_])" if re.search(r"\w$", needle) else ""
        alternatives.append(left + re.escape(needle) + right)
    return re.compile("|".join(alternatives), re.IGNORECASE)


def excerpt(text: str, start: int, end: int, width: int) -> str:
    """About ``width`` characters of ``text`` around [start, end), the match marked with ⟦ ⟧."""
    room = max(0, width - (end - start)) // 2
    left, right = max(0, start - room), min(len(text), end + room)
    return (
        ("…" if left > 0 else "")
        + text[left:start]
        + "⟦"
        + text[start:end]
        + "⟧"
        + text[end:right]
        + ("…" if right < len(text) else "")
    )


def hits_in(parts: list[Part], regex: re.Pattern[str] | None) -> list[tuple[Part, re.Match[str]]]:
    """Every part holding a match, with its first match."""
    if regex is None:
        return []
    hits = []
    for part in parts:
        match = regex.search(part.text)
        if match:
            hits.append((part, match))
    return hits


def line(part: Part, match: re.Match[str], width: int, note: str = "") -> str:
    return f"  [message {part.index}, {part.role}{note}]\n    {excerpt(part.text, match.start(), match.end(), width)}"


_AIDER_ADDED = re.compile(r"> Added (.+?) to (?:the chat|read-only files)")
_AIDER_OUTPUT = re.compile(r"\d+ lines of output$")
_AIDER_CONFIRM = re.compile(r"> Add file to the chat\?.*\]:\s*(?:y|yes|a|all)\s*$", re.IGNORECASE)


def aider_chat_files(log: Path, conversation: Any) -> list[tuple[str, int | None]]:
    """Files the aider history says went into the chat in this conversation's session (aider re-sends them),
    each with the index of the first user input after it (None when the history has no later user input):
    ``Added X to the chat`` lines, and a file aider proposed (``> X``) followed by a yes to ``Add file to the
    chat?``."""
    start = int(str(conversation.metadata.get("session_line") or 0))
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[max(0, start - 1) :]
    inputs = [
        (index, flat(content_text(m.content))[:40])
        for index, m in enumerate(conversation.messages)
        if isinstance(m, UserMessage) and not (m.attributes or {}).get("aider_output")
    ]
    added: dict[str, int | None] = {}
    pending: list[str] = []
    proposed = None
    for number, raw in enumerate(lines):
        text = raw.rstrip()
        if number > 0 and text.startswith("# aider chat started at"):
            break
        said = flat(text[5:]) if text.startswith("#### ") else ""
        if len(said) >= 8 and inputs and inputs[0][1].startswith(said[:30]):
            index = inputs.pop(0)[0]
            for name in pending:
                added.setdefault(name, index)
            pending = []
        found = _AIDER_ADDED.match(text)
        name = found.group(1) if found else (proposed if _AIDER_CONFIRM.match(text) else None)
        if name and name not in added and name not in pending and not _AIDER_OUTPUT.match(name):
            pending.append(name)
        plain = text[2:].strip() if text.startswith("> ") else ""
        if plain and " " not in plain:
            proposed = plain
        elif text.strip() and not _AIDER_CONFIRM.match(text) and not text.startswith("#### Add file"):
            proposed = None
    for name in pending:
        added.setdefault(name, None)
    return list(added.items())


def harness_note(source: Source, logs: Path) -> list[str]:
    """What the harness sends with each request that this log does not show."""
    meta = source.conversation.metadata
    notes = []
    if source.agent == "aider":
        files = aider_chat_files(logs / source.log, source.conversation)
        by_message: dict[int | None, list[str]] = defaultdict(list)
        for name, index in files:
            by_message[index].append(name)
        listed = "; ".join(
            (f"by message {index} at the latest: " if index is not None else "after the last user input: ")
            + ", ".join(names)
            for index, names in by_message.items()
        )
        notes.append(
            "aider sends its system prompt, a repository map (file names and symbols of the repository) and the "
            "full contents of every file added to the chat with EVERY request; the log shows none of them. "
            + (
                f"Files added to the chat in this session (from the history's own lines): {listed}"
                if files
                else "The history names no file added to the chat in this session."
            )
        )
    elif str(meta.get("system_prompt_recorded")) == "False":
        notes.append(f"{source.agent}'s system prompt (tool instructions, environment) is not recorded in this log.")
    demos = str(meta.get("demonstration_messages") or "")
    if demos and demos != "None":
        notes.append(
            f"Message(s) {demos.strip('[]')}: an in-context demonstration of a different task, written by the harness."
        )
    return notes


def dossier(item: dict[str, Any], source: Source, logs: Path) -> str:
    """The dossier text of one item."""
    messages = source.conversation.messages
    start, end, recorded = item["span_start"], item["span_end"], item["n_recorded"]
    parts = [p for i, m in enumerate(messages) for p in parts_of(i, m)]
    full, short = variants(item)
    full_re, short_re, any_re = pattern(full), pattern(short), pattern(full + short)
    out = [
        f"ITEM {item['id']}",
        f"Text: {item['text']}",
        f"Type: {item['type']}    Agent format: {source.agent}    Conversation: {len(messages)} messages",
        "",
        "COMPACTION BOUNDARY",
        f"  messages {start}..{end - 1}: the span, replaced by a summary that does not contain the text",
        f"  messages {end}..{recorded - 1}: the tail, kept verbatim",
        f"  messages {recorded}..{len(messages) - 1}: after the compaction",
    ]
    if start > 0:
        out.append(f"  messages 0..{start - 1}: system prompt, sent with every request")
    # the span
    span_hits = hits_in([p for p in parts if start <= p.index < end], full_re)
    where = [h for h in span_hits if h[0].index == item["message_index"]] or span_hits
    out += ["", f"IN THE SPAN (message {item['message_index']}, where the item was taken from)"]
    if where:
        out.append(line(*where[0], SPAN_CONTEXT))
    else:
        first = next((p for p in parts if p.index == item["message_index"]), None)
        out.append(
            f"  [message {item['message_index']}] (text not found verbatim) {first.text[:SPAN_CONTEXT] if first else ''}"
        )
    others = sorted({p.index for p, _ in span_hits} - {item["message_index"]})
    if others:
        out.append(
            f"  other span messages with it: {', '.join(map(str, others[:30]))}{' …' if len(others) > 30 else ''}"
        )
    # after the compaction
    after = [p for p in parts if p.index >= recorded]
    full_hits = hits_in(after, full_re)
    found = {part for part, _ in full_hits}
    short_all = [h for h in hits_in(after, short_re) if h[0] not in found]
    use = next((h for h in full_hits if h[0].is_use), None)
    use_note = ""
    if use is None:
        use = next((h for h in short_all if h[0].is_use), None)
        use_note = ", short form only" if use else ""
    limit = use[0].index if use else len(messages)
    entries = sorted(
        [(h, "") for h in full_hits if h[0].index <= limit]
        + [(h, f"; short form '{h[1].group()}'") for h in short_all if h[0].index < limit or h == use],
        key=lambda e: (e[0][0].index, e[1]),
    )
    if use:
        entries = [e for e in entries if e[0][0].index < limit or e[0] == use]
        heading = (
            f"AFTER THE COMPACTION: occurrences up to the first in a message of the user or the agent "
            f"(message {use[0].index}{use_note})"
        )
        shown = entries[-AFTER_SHOWN:]
    else:
        heading = (
            "AFTER THE COMPACTION: no occurrence (nor short form) in a message of the user or the agent; occurrences:"
        )
        shown = entries[:AFTER_SHOWN]
    hidden = [e for e in entries if e not in shown]
    listed = ", ".join(f"{h[0].index} ({h[0].role}{note})" for h, note in hidden[:20])
    listed += " …" if len(hidden) > 20 else ""
    out += ["", heading]
    if hidden and use:
        out.append(f"  earlier occurrences, not shown: {listed}")
    out += [line(*h, AFTER_CONTEXT, note) for h, note in shown]
    if hidden and not use:
        out.append(f"  later occurrences, not shown: {listed}")
    # loose mentions in the tail and the system prompt
    for title, region in (
        (f"MENTIONS IN THE TAIL (messages {end}..{recorded - 1})", [p for p in parts if end <= p.index < recorded]),
        ("MENTIONS IN THE SYSTEM PROMPT", [p for p in parts if p.role == "system prompt"]),
    ):
        hits = hits_in(region, any_re)
        searched = ", ".join(f"'{v}'" for v in full + short)
        out += ["", f"{title}, loose search for {searched}: {len(hits)} message(s)"]
        out += [line(*h, MENTION_CONTEXT) for h in hits[:MENTIONS_SHOWN]]
        if len(hits) > MENTIONS_SHOWN:
            out.append(f"  also in messages: {', '.join(str(h[0].index) for h in hits[MENTIONS_SHOWN:][:20])}")
    notes = harness_note(source, logs)
    if notes:
        out += ["", "HARNESS NOTE", *(f"  {n}" for n in notes)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, default=LOGS, help="the shared agent logs (default ../shared/agent-logs)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the dossiers go (outside the repository)")
    parser.add_argument(
        "--items", type=Path, default=ITEMS_FILE, help=f"the sampled items (default {ITEMS_FILE.relative_to(ROOT)})"
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if out == ROOT or ROOT in out.parents:
        raise SystemExit(f"{out} is inside the repository: dossiers quote the shared logs and go outside it")
    sources = {(s.log, s.conversation.id): s for s in read_sources(args.logs)}
    items = read_items(args.items)
    out.mkdir(parents=True, exist_ok=True)
    index, sizes = [], []
    for item in items:
        source = sources.get((item["log"], item["conversation_id"]))
        if source is None:
            raise SystemExit(f"item {item['id']}: conversation {item['conversation_id']} of {item['log']} not found")
        text = dossier(item, source, args.logs)
        tokens = count_text_tokens(text)
        sizes.append(tokens)
        path = out / f"{item['id']}.txt"
        path.write_text(text, encoding="utf-8")
        index.append({"id": item["id"], "dossier": str(path)})
    random.Random(ORDER_SEED).shuffle(index)
    (out / "items.jsonl").write_text("".join(json.dumps(row) + "\n" for row in index), encoding="utf-8")
    over = sum(1 for s in sizes if s > TOKEN_BUDGET)
    print(
        f"{len(index)} dossiers in {out}: mean {sum(sizes) / len(sizes):,.0f} tokens, max {max(sizes):,}, "
        f"{over} over {TOKEN_BUDGET:,}"
    )


if __name__ == "__main__":
    main()
