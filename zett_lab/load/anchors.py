"""Anchors: typed exact items (paths, identifiers, errors, ...) extracted from message text.

An anchor is something a later step may need *verbatim*: a file path, a URL, an
identifier, a commit SHA, a number with its unit, an error string, a shell command
the agent ran, a user constraint, a decision. Loss metrics ask whether the anchors
of a compacted span are still visible after the compaction (``docs/reference/results.md``).

Types (:data:`ANCHOR_TYPES`):

``path``
    File paths: with a slash (``src/auth/session.py``, ``/etc/hosts``, ``./x``,
    ``~/.zshrc``, ``build/``), Windows paths, and bare file names with a known
    extension (``README.md``). One-slash words with no extension (``and/or``,
    ``src/auth``) are not paths. Normalized: quotes, leading ``./`` and trailing
    ``/`` removed; case kept.
``url``
    ``scheme://...``. Normalized: trailing punctuation stripped, scheme and host
    lower-cased, trailing ``/`` removed.
``identifier``
    CamelCase / lowerCamel, snake_case / SCREAMING_SNAKE, dotted names
    (``os.path.join``), names followed by ``(`` (``load_user(``), UUIDs. Case kept.
``sha``
    7-64 hex digits with at least one digit and one letter a-f. Lower-cased.
``number``
    Numbers with a unit or currency (``250 ms`` -> ``250ms``, ``3.2 GB`` -> ``3.2gb``,
    ``$12``), percentages, versions (``v0.2.1`` -> ``0.2.1``), decimals, and bare
    integers of three or more digits (``6543``). Thousands separators removed,
    units lower-cased and mapped to one spelling (``seconds`` -> ``s``). A number
    without a unit keeps the key written right before it (``The port is 6543`` ->
    ``port 6543``, ``sleep(200)`` -> ``sleep 200``; not ``line 304``): the number
    alone is not the item.
``error``
    Exception lines with a message (``KeyError: 'user_id'``), pytest failures
    (``FAILED tests/x.py::test_y``), ``error:``/``fatal:``/``panic:`` lines and
    common OS errors (``... No such file or directory``). Quotes removed,
    whitespace collapsed, at most 160 characters of message.
``command``
    The command argument of shell-like tool calls (tool names containing bash,
    shell, sh, zsh, terminal, exec, run, command, cmd, console, powershell).
    Whitespace collapsed.
``constraint``
    Sentences of *user* messages (the user's rules, and the task a harness
    states as a user message) containing always / never / must / don't /
    do not / should not / make sure / avoid / no new / not allowed / only
    change (modify, touch, edit, use, contain, add, fix), one of them telling what
    to do: not "always"/"never" before a past participle or a third-person verb
    ("imported but never used", "the grid never shows ...": descriptions), not
    "don't need to" (a permission). Not of an in-context
    demonstration of another task (a message whose ``attributes`` mark it
    ``demonstration``): the real task states again the rules that hold for it.
    Lower-cased, whitespace collapsed, bullets and trailing punctuation removed.
``decision``
    Sentences of *assistant* messages such as "we'll use ...", "decided ...",
    "let's go with ...". Normalized like constraints.

The types, the :class:`Anchor` record and the normal forms are the anchor vocabulary
(:mod:`zett_lab.load.anchor_forms`, its names importable from here too); this module finds
anchors in texts and messages.

Extraction is regex-only (patterns compiled once) and cached per text, so a
150k-token conversation takes a fraction of a second and repeated calls are free.

Example::

    >>> [(a.type, a.normalized) for a in anchors_in_text("Fix KeyError: 'user_id' in ./src/auth.py")]
    [('path', 'src/auth.py'), ('identifier', 'KeyError'), ('identifier', 'user_id'), ('error', 'KeyError: user_id')]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache

from zett_agent.messages import AnyMessage, AssistantMessage, ToolCall

from .anchor_forms import (
    ANCHOR_TYPES,
    ARTIFACT_TYPES,
    NUMBER,
    SENTENCE_TYPES,
    TRAILING_PUNCTUATION,
    Anchor,
    AnchorKey,
    keyed_number,
    loose,
    loose_needle,
    normalize,
    normalize_command,
    normalize_error,
    normalize_path,
    normalize_sentence,
    normalize_url,
)
from .conversation import role_of
from .text import argument_strings, clean_text, message_text, tool_call_text

__all__ = [
    "ANCHOR_TYPES",
    "ARTIFACT_TYPES",
    "PARAGRAPH_SPLIT",
    "SENTENCE_TYPES",
    "TRAILING_PUNCTUATION",
    "Anchor",
    "AnchorKey",
    "action_keys",
    "anchor_keys",
    "anchors_in_text",
    "command_of",
    "extract_anchors",
    "is_shell_tool",
    "loose",
    "loose_needle",
    "message_anchors",
    "message_keys",
    "normalize",
    "normalize_command",
    "normalize_error",
    "normalize_path",
    "normalize_sentence",
    "normalize_url",
    "tool_call_keys",
]


# ---------------------------------------------------------------------------
# Patterns (compiled once)

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,15}://[^\s<>\"'`)\]}|]+")

_EXTENSIONS = (
    "py pyi pyx ipynb js mjs cjs ts tsx jsx json jsonl yaml yml toml ini cfg conf md rst txt csv tsv html htm "
    "css scss sass less xml svg sh bash zsh fish ps1 bat rs go java kt kts scala c h cc cpp cxx hpp hh cs rb "
    "php pl pm lua r jl swift mm sql sqlite sqlite3 db lock log env gradle vue svelte dart ex exs erl hs ml clj "
    "tf proto graphql gql mk cmake png jpg jpeg gif webp pdf zip gz tgz tar whl so dll exe bin pem crt patch diff "
    "parquet pkl npy npz h5 onnx pt safetensors traj tmpl j2 jinja properties plist gitignore dockerignore"
)
_EXT = "|".join(sorted(set(_EXTENSIONS.split()), key=len, reverse=True))
#: The lookahead after the lookbehind is a necessary condition of every alternative (a ``/ . : \\ ~`` after a
#: run of name characters), so a plain word is rejected after one scan instead of one per alternative
#: (the scan is ~half as long; tests/load/test_anchor_scans.py proves the matches unchanged).
_PATH = re.compile(
    r"(?<![\w@:/.~\\<-])(?=[\w@+-]*+[/.:\\~])(?:"
    r"(?P<win>[A-Za-z]:\\(?:[\w.@+-]+\\)*[\w.@+-]+)"
    r"|(?P<abs>(?:~|\.{1,2})?/(?:[\w.@+-]+/)*[\w.@+-]+/?)"
    r"|(?P<rel>[\w.@+-]+(?:/[\w.@+-]+)+/?)"
    r"|(?P<dir>[\w.@+-]+/(?![\w@+-]|\.\w))"
    r"|(?P<file>[\w@+-][\w.@+-]*\.(?:" + _EXT + r"))"
    r")(?![\w/\\(])"
)
_HAS_LETTER = re.compile(r"[A-Za-z]")
_HAS_EXT = re.compile(r"\.(?:" + _EXT + r")$", re.I)

#: The lookahead after ``\b`` is a necessary condition of every alternative (after a run of lower-case letters
#: and digits: an upper-case letter, ``_ . ( -`` or a non-ASCII character), so a plain lower-case word is
#: rejected at once (the scan is ~half as long; tests/load/test_anchor_scans.py proves the matches unchanged).
_IDENT = re.compile(
    r"(?<!\\)\b(?=[a-z0-9]*+[A-Z_.(\-\x80-\U0010ffff])(?:"
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"  # uuid
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?"  # dotted
    r"|_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*"  # snake / SCREAMING
    r"|__[A-Za-z][A-Za-z0-9_]*__"  # dunder
    r"|[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+"  # CamelCase
    r"|[A-Z]{2,}[a-z][A-Za-z0-9]*"  # HTTPServer
    r"|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*"  # lowerCamel
    r"|[A-Za-z_]\w*(?=\((?!s\)))"  # name(
    r")(?![\w-])"
)
_NOT_IDENT = frozenset(
    "e.g i.e etc a.m p.m vs if elif while for switch catch return and or not in is with function def lambda "
    "assert print len str int float list dict set tuple type super range open isinstance".split()
)

_HEX_WITH_DIGIT = re.compile(r"(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{7,64}$")
#: A whole run of 7-64 hex digits; :func:`_shas` keeps those with a digit and a letter. The first character is
#: matched before the lookbehind (a two-character one: the character before the run is not ``[\w-]``), so the
#: engine skips to a hex digit at once (the scan is ~half as long).
_HEX_RUN = re.compile(r"[0-9a-fA-F](?<![\w-].)[0-9a-fA-F]{6,63}(?![\w-])")

_EXC_TAIL = re.compile(r"(?:Error|Exception|Warning|Exit|Interrupt|Fault|Failure):[ \t]*(?P<msg>[^\n]{0,160})")
_EXC_NAME = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*$")
_PYTEST = re.compile(r"^[ \t]*(?P<pt>FAILED|ERROR)[ \t]+(?P<node>[^\s:]+::[^\s]+)", re.M)
_LEVEL = re.compile(
    r"^[ \t]*(?P<lvl>error|fatal|panic|npm ERR!|ERROR|FATAL)(?:\[\w+\])?:[ \t]*(?P<lmsg>[^\n]{1,160})", re.M
)
_OS_ERROR = re.compile(
    r"No such file or directory|Permission denied|command not found|Connection refused"
    r"|Segmentation fault|Address already in use|Out of memory"
)

_CONSTRAINT_WORDS = re.compile(
    r"\b(?:always|never|must|mustn['’]t|don['’]?t|do not|should not|shouldn['’]t|make sure|avoid|no new"
    r"|not allowed|only (?:change|modify|touch|edit|use|contain|add|fix)s?)\b",
    re.I,
)
#: After "always" or "never", a word that describes rather than tells: a past participle or a third-person verb
#: ("never used", "always loaded", "the grid never shows ...", not "never touch", "always proceed").
_DESCRIBING = re.compile(r"[\s*_]*[a-z]*(?:[^e\W]ed|[^\Wsui]s)\b", re.I)
#: After "don't" or "do not", a permission rather than a prohibition ("you don't need to ...", "don't have to").
_PERMITTING = re.compile(r"\s+(?:need|have)\s+to\b", re.I)
_DECISION_WORDS = re.compile(
    r"\b(?:we['’]ll use|we will use|i['’]ll use|i will use|let['’]s use|let['’]s go with|we['’]ll go with"
    r"|i['’]ll go with|going with|decided|decision is|settled on|opted for|opt for|chose to|we chose|i chose"
    r"|we['’]ll switch to|switching to|the plan is to)\b",
    re.I,
)

_SHELL_TOOL = re.compile(
    r"(?:^|[_\W])(?:bash|shell|sh|zsh|terminal|exec|execute|run|command|cmd|console|powershell)(?:$|[_\W])", re.I
)
_COMMAND_KEYS = ("command", "cmd", "commands", "script", "shell_command", "bash_command", "code", "input", "args")


# ---------------------------------------------------------------------------
# Extraction


def _keep_number(match: re.Match[str]) -> bool:
    if match.group("unit") or match.group("cur") or match.group("v"):
        return True
    number = match.group("num")
    if "." in number:
        return True
    return len(number.replace(",", "")) >= 3


def _mask(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    pieces = []
    last = 0
    for start, end in sorted(spans):
        if start < last:
            start = last
        if end <= start:
            continue
        pieces.append(text[last:start])
        pieces.append(" " * (end - start))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


_QUOTED = re.compile(r"""\s*(['"`])(.{1,150}?)\1""")


def _trim_message(message: str) -> str:
    """An exception message up to its closing quote, or to the end of its first sentence."""
    quoted = _QUOTED.match(message)
    if quoted:
        return quoted.group(0).strip()
    return re.split(r"(?<=[.!?])\s", message.strip(), maxsplit=1)[0].strip()


def _accept_path(value: str, kind: str) -> bool:
    if not _HAS_LETTER.search(value):
        return False
    if kind in ("win", "file", "dir"):
        return True
    if kind == "abs":
        stripped = value.lstrip("~.")
        return len(stripped) > 1
    # relative with slash: needs an extension, a trailing slash, or two slashes
    return value.endswith("/") or bool(_HAS_EXT.search(value)) or value.count("/") >= 2


#: A paragraph longer than this (code, logs) is read line by line for sentences.
HUGE_PARAGRAPH = 5000
#: Where :func:`_sentences_matching` ends a paragraph: a run of two or more line breaks.
_PARAGRAPH_BREAK = re.compile(r"\n\n+")

PARAGRAPH_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n\s*\n|\n(?=\s*(?:(?:[-*•>]|\d+[.)]|#+)\s|\[))")


def _sentences_matching(text: str, pattern: re.Pattern[str]) -> Iterator[str]:
    """The sentences containing a match of ``pattern``.

    Sentences end at ``. ! ? ;``, blank lines and list items; a single line break
    inside a hard-wrapped paragraph does not end one.
    """
    last_start = -1
    for match in pattern.finditer(text):
        start = text.rfind("\n\n", 0, match.start())
        start = 0 if start == -1 else start + 2
        if start == last_start:
            continue
        last_start = start
        end = text.find("\n\n", match.end())
        end = len(text) if end == -1 else end
        if end - start > HUGE_PARAGRAPH:  # stay on the match's line
            start = text.rfind("\n", 0, match.start()) + 1
            end_line = text.find("\n", match.end())
            end = len(text) if end_line == -1 else end_line
            last_start = -1
        for sentence in PARAGRAPH_SPLIT.split(text[start:end]):
            sentence = " ".join(sentence.split())
            if sentence and len(sentence) <= 400 and pattern.search(sentence):
                yield sentence


def _tells(sentence: str) -> bool:
    """Whether one of the sentence's rule words tells the reader what to do: not "always"/"never" describing
    (:data:`_DESCRIBING`: "the 'os' module is imported but never used"), not "don't" permitting
    (:data:`_PERMITTING`: "you don't need to do this")."""
    for match in _CONSTRAINT_WORDS.finditer(sentence):
        word, after = match.group().lower(), sentence[match.end() :]
        if word in ("always", "never") and _DESCRIBING.match(after):
            continue
        if word.startswith("do") and _PERMITTING.match(after):
            continue
        return True
    return False


def _errors(text: str) -> Iterator[tuple[str, str]]:
    """``(value, normalized)`` of the error anchors of one text: exception lines, pytest failures,
    ``error:``/``fatal:`` lines and common OS errors, in that order (repeats included)."""
    for match in _EXC_TAIL.finditer(text) if ":" in text else ():
        head_start = max(0, match.start() - 120)
        name = _EXC_NAME.search(text[head_start : match.start()] + match.group()[: match.group().index(":")])
        message = _trim_message(match.group("msg"))
        if name is None or not message:
            continue
        value = f"{name.group()}: {message}"
        yield value, normalize_error(value)
    for match in _PYTEST.finditer(text):
        node = match.group("node").rstrip(TRAILING_PUNCTUATION)
        path, _, test = node.partition("::")
        yield f"{match.group('pt')} {node}", f"{match.group('pt')} {normalize_path(path)}::{test}"
    for match in _LEVEL.finditer(text):
        value = f"{match.group('lvl')}: {match.group('lmsg').strip()}"
        yield value, normalize_error(value)
    for match in _OS_ERROR.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        value = text[max(line_start, match.start() - 80) : match.end()].strip()
        yield value, normalize_error(value)


def _shas(text: str) -> Iterator[re.Match[str]]:
    """The SHA matches of ``text``: runs of 7-64 hex digits, standing alone, with at least one digit and one
    letter a-f (a run that is all digits or all letters is the whole run, so no shorter SHA hides in it)."""
    for match in _HEX_RUN.finditer(text):
        value = match.group()
        if not value.isdigit() and not value.isalpha():
            yield match


def _extract(text: str, role: str) -> tuple[tuple[str, str, str], ...]:
    """Ordered, de-duplicated ``(type, value, normalized)`` triples of one text."""
    found: list[tuple[str, str, str]] = []
    seen: set[AnchorKey] = set()

    def add(type_: str, value: str, normalized: str) -> None:
        if not normalized:
            return
        key = (type_, normalized)
        if key not in seen:
            seen.add(key)
            found.append((type_, value, normalized))

    masked_spans: list[tuple[int, int]] = []
    for match in _URL.finditer(text) if "://" in text else ():
        value = match.group().rstrip(TRAILING_PUNCTUATION)
        masked_spans.append((match.start(), match.start() + len(value)))
        add("url", value, normalize_url(value))
    masked = _mask(text, masked_spans)

    path_spans: list[tuple[int, int]] = []
    for match in _PATH.finditer(masked):
        value = match.group().rstrip(".,;:")
        kind = match.lastgroup or "rel"
        if value and _accept_path(value, kind):
            path_spans.append((match.start(), match.start() + len(value)))
            add("path", value, normalize_path(value))
    masked = _mask(masked, path_spans)

    ident_spans: list[tuple[int, int]] = []
    for match in _IDENT.finditer(masked):
        value = match.group()
        normalized = value[:-2] if value.endswith("()") else value
        if len(normalized) < 3 or normalized.lower() in _NOT_IDENT or _HEX_WITH_DIGIT.match(normalized):
            continue
        ident_spans.append(match.span())
        add("identifier", value, normalized)

    for value, normalized in _errors(text):
        add("error", value, normalized)

    masked = _mask(masked, ident_spans)
    sha_spans = []
    for match in _shas(masked):
        value = match.group()
        sha_spans.append(match.span())
        add("sha", value, value.lower())
    masked = _mask(masked, sha_spans)

    for match in NUMBER.finditer(masked):
        if _keep_number(match):
            add("number", *keyed_number(text, match))

    if role in ("user", "any"):
        for sentence in _sentences_matching(text, _CONSTRAINT_WORDS):
            if _tells(sentence):
                add("constraint", sentence, normalize_sentence(sentence))
    if role in ("assistant", "any"):
        for sentence in _sentences_matching(text, _DECISION_WORDS):
            add("decision", sentence, normalize_sentence(sentence))
    return tuple(found)


#: Texts whose anchors are remembered: the anchors summarizer asks line by line, and a 250-turn session
#: has 87k distinct lines, so each replay after the first of a long session finds its lines here
#: (12.2 → 4.6 s CPU for a cold replay of that session with the anchors summarizer; ~45 MB held).
_EXTRACTED_KEPT = 1 << 18


@lru_cache(maxsize=_EXTRACTED_KEPT)
def _extract_cached(text: str, role: str) -> tuple[tuple[str, str, str], ...]:
    return _extract(text, role)


def anchors_in_text(text: str, role: str = "any", *, message_index: int | None = None) -> list[Anchor]:
    """Anchors of one free text, in order of first appearance, de-duplicated by key.

    ``role`` decides the sentence types: ``"user"`` extracts constraints,
    ``"assistant"`` decisions, ``"any"`` (default) both, anything else neither.
    Commands come only from tool calls (:func:`message_anchors`).
    """
    text = clean_text(text)
    return [Anchor(t, v, n, message_index) for t, v, n in _extract_cached(text, role)]


def anchor_keys(text: str) -> frozenset[AnchorKey]:
    """The keys of :func:`anchors_in_text` (role ``"any"``), from pieces remembered one by one.

    Every pattern stops at a line break and sentences at a paragraph (two line breaks, or a
    line of a :data:`HUGE_PARAGRAPH`), so the keys of a text are the union of its paragraphs'
    (lines' for a huge one). Long summaries that repeat what earlier ones said (an observation
    mask re-quotes the whole conversation) then cost only their new lines.
    """
    keys: set[AnchorKey] = set()
    for paragraph in _PARAGRAPH_BREAK.split(clean_text(text)):
        for piece in paragraph.split("\n") if len(paragraph) > HUGE_PARAGRAPH else (paragraph,):
            keys |= _piece_keys(piece)
    return frozenset(keys)


@lru_cache(maxsize=1 << 16)
def _piece_keys(piece: str) -> frozenset[AnchorKey]:
    return frozenset((t, n) for t, _, n in _extract(piece, "any"))


def is_shell_tool(name: str) -> bool:
    """Whether a tool name looks like a shell (``bash``, ``Bash``, ``run_shell_command``, ``exec_command``...)."""
    return bool(_SHELL_TOOL.search(name or ""))


def command_of(call: ToolCall) -> str | None:
    """The shell command of a shell-like tool call, or None."""
    if not is_shell_tool(call.name):
        return None
    arguments = call.arguments
    if isinstance(arguments, str):
        return clean_text(arguments) or None
    if not isinstance(arguments, dict):
        return None
    for key in _COMMAND_KEYS:
        value = arguments.get(key)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, (str, bytes)) and clean_text(value).strip():
            return clean_text(value)
    strings = [v for v in arguments.values() if isinstance(v, str) and v.strip()]
    return clean_text(strings[0]) if len(strings) == 1 else None


def _message_triples(message: AnyMessage) -> tuple[tuple[str, str, str], ...]:
    role = role_of(message)
    if role == "checkpoint":
        role = "any"
    elif (getattr(message, "attributes", None) or {}).get("demonstration"):
        role = "demonstration"  # another task's: its rules are not this one's (the real task repeats those that are)
    triples = list(_extract_cached(message_text(message), role))
    if isinstance(message, AssistantMessage):
        seen = {(t, n) for t, _, n in triples}
        for call in message.tool_calls or ():
            command = command_of(call)
            if command:
                normalized = normalize_command(command)
                if normalized and ("command", normalized) not in seen:
                    seen.add(("command", normalized))
                    triples.append(("command", command.strip(), normalized))
    return tuple(triples)


class _MessageMemo:
    """Per-message anchors remembered by identity (the message is held so its id stays unique)."""

    _MAX = 200_000

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[AnyMessage, tuple[tuple[str, str, str], ...], frozenset[AnchorKey]]] = {}

    def clear(self) -> None:
        self._by_id.clear()

    def get(self, message: AnyMessage) -> tuple[tuple[tuple[str, str, str], ...], frozenset[AnchorKey]]:
        entry = self._by_id.get(id(message))
        if entry is None or entry[0] is not message:
            triples = _message_triples(message)
            if len(self._by_id) >= self._MAX:
                self._by_id.clear()
            entry = (message, triples, frozenset((t, n) for t, _, n in triples))
            self._by_id[id(message)] = entry
        return entry[1], entry[2]


_memo = _MessageMemo()


def clear_anchor_caches() -> None:
    """Forget the anchors remembered per message and per text (they hold every anchor of the conversations seen)."""
    _memo.clear()
    _extract_cached.cache_clear()
    _piece_keys.cache_clear()


def message_anchors(message: AnyMessage, message_index: int | None = None) -> list[Anchor]:
    """Anchors of one message (text, tool-call arguments, shell commands); cached per message."""
    triples, _ = _memo.get(message)
    return [Anchor(t, v, n, message_index) for t, v, n in triples]


def message_keys(message: AnyMessage) -> frozenset[AnchorKey]:
    """The ``(type, normalized)`` keys of one message's anchors; cached per message."""
    return _memo.get(message)[1]


def action_keys(message: AnyMessage) -> frozenset[AnchorKey]:
    """Keys of what a message's author said or did: a user's text; an assistant's text, the string
    arguments of its tool calls and its shell commands. Tool results and system text act on nothing
    (empty); numeric tool arguments (offsets, limits, timeouts) are parameters, not references."""
    if role_of(message) == "user":
        return message_keys(message)
    if not isinstance(message, AssistantMessage):
        return frozenset()
    texts = [clean_text(message.content)]
    texts.extend(s for call in message.tool_calls or () for s in argument_strings(call.arguments) if not _is_number(s))
    keys = {(t, n) for text in texts if text for t, _, n in _extract_cached(text, "assistant")}
    keys.update(key for key in message_keys(message) if key[0] == "command")
    return frozenset(keys)


def _is_number(text: str) -> bool:
    return text.replace(".", "", 1).lstrip("-").isdigit()


def tool_call_keys(call: ToolCall) -> frozenset[AnchorKey]:
    """Keys of the anchors in one tool call's arguments (used for the re-fetch proxy)."""
    return frozenset((t, n) for t, _, n in _extract_cached(tool_call_text(call), "tool"))


def extract_anchors(messages: Iterable[AnyMessage], start: int = 0) -> list[Anchor]:
    """Anchors of every message, in order; one :class:`Anchor` per key per message.

    ``message_index`` counts from ``start`` (pass the offset when giving a slice).

    Example::

        >>> from zett_agent.messages import UserMessage
        >>> [a.type for a in extract_anchors([UserMessage(content="Never touch config.yaml")])]
        ['path', 'constraint']
    """
    anchors: list[Anchor] = []
    for index, message in enumerate(messages, start):
        anchors.extend(message_anchors(message, index))
    return anchors
