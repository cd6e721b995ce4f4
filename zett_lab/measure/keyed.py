"""Keyed values: what each message states about a named thing (a setting, a port, a version, a test, ...).

:func:`observe` reads every message once (user and agent text, commands, edits, files read, test
runs) and returns, per message, the :class:`Observation` s it makes: ``setting:<file>:NAME = value``,
``port`` with the words that say which port, ``test:<node>`` failed or passed, a user instruction
and a clause that reverses or narrows one. :mod:`zett_lab.measure.updates` groups them by key to
find the values that changed; the kinds are documented there.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, AssistantMessage, ToolCall, ToolMessage, UserMessage

from ..load.anchors import command_of, loose
from ..load.text import clean_text, message_text


@dataclass(frozen=True)
class Observation:
    """One keyed value stated by one message (``index`` in ``Conversation.messages``)."""

    kind: str
    key: str
    name: str
    value: str
    index: int
    qualifiers: frozenset[str] = frozenset()
    change: bool = False


# --------------------------------------------------------------------------------------------
# Words

_STOP = frozenset(
    "the a an and or of to in on at for with by from as is are was be been it this that these those we you i they "
    "our your their its can will would should could may might please also just then than so if into onto about "
    "there here what when where which who how all any some each such only very more most use using used fyi note "
    "heads up last night today yesterday morning this week".split()
)
_CHANGE = re.compile(
    r"\b(?:now|moved|move|changed|change|switched|switch|updated|update|upgraded|upgrade|downgraded|bumped|bump|raised|"
    r"lowered|increased|decreased|reduced|renamed|instead|new|no longer|anymore)\b",
    re.I,
)
_CUES = re.compile(
    r"\b(?:actually|instead(?! of)|after all|change of plan|scratch that|on second thought|never ?mind|"
    r"forget (?:that|it|about)|"
    r"ignore (?:that|my|what)|no longer|not anymore|from now on|going forward)\b",
    re.I,
)
_NARROW = re.compile(r"\b(?:only|just|except|but not|other than|apart from|limit(?:ed)? to|restrict(?:ed)? to)\b", re.I)
_IMPERATIVE = re.compile(
    r"^(?:please\s+)?(?:always\s+|never\s+|do not\s+|don['’]?t\s+)?"
    r"(?:use|run|keep|make|add|remove|set|raise|lower|write|"
    r"commit|open|push|target|skip|bump|change|put|leave|avoid|touch|test|deploy|build|create|delete|name|follow)\b",
    re.I,
)
_DIRECTIVE = re.compile(
    r"\b(?:you (?:may|can|should|must|need to)|let['’]s|please|go ahead|we(?:['’]ll| will) (?:use|keep|go))\b", re.I
)
NEGATIVE = re.compile(r"\b(?:never|not|no|don['’]?t|do not|avoid|mustn['’]?t|shouldn['’]?t|without)\b", re.I)
_WORD = re.compile(r"[a-z0-9_][a-z0-9_./-]*[a-z0-9_]|[a-z0-9_]")


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> frozenset[str]:
    """Content words (stemmed; dotted names and hosts kept whole), without stop words."""
    text = loose(text).replace("don't", "not").replace("dont", "not").replace("do not", "not")
    return frozenset(
        _stem(w) for w in _WORD.findall(text) if w not in _STOP and (len(w) > 2 or w.isdigit() or w == "no")
    )


def clauses(text: str) -> list[str]:
    """Lines, split further into sentences (``.``, ``!``, ``?`` followed by a space)."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(part for part in re.split(r"(?<=[.!?])\s+", line) if part.strip())
    return out


# --------------------------------------------------------------------------------------------
# Values

_LITERAL = re.compile(r"""(['"])(.*?)\1|(?<![\w.])(-?\d+(?:[.,]\d+)*)(?![\w.])""")


def value_cores(value: str) -> frozenset[str]:
    """The literals a value is made of (strings and numbers), or the value itself when it has none."""
    found = set()
    for match in _LITERAL.finditer(value):
        literal = match.group(2) if match.group(1) else match.group(3).replace(",", "")
        if literal and literal.strip():
            found.add(loose(literal))
    return frozenset(found) or frozenset({loose(value)})


_ASSIGN_LINE = re.compile(
    r"""^(?P<indent>[ \t]*)(?:export\s+|const\s+|let\s+|var\s+|final\s+|static\s+)*"""
    r"""(?P<q>["']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)\s*(?::\s*[\w\[\], |.]+?)?\s*(?P<op>=|:)\s*"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s#,;][^#\n]*?)\s*[,;]?\s*(?:(?:#|//).*)?$"""
)
_ENV_ASSIGN = re.compile(
    r"(?<![\w.-])(?P<key>[A-Za-z_]\w*(?:\.\w+)+|[A-Z][A-Z0-9_]{2,})=(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;)\]}`'\"]+)"
)
#: ``KEY=value`` at the start of a shell command (or after ``export``, ``env``, ``&&``, ``;``): an environment setting.
_COMMAND_ENV = re.compile(
    r"(?:^|&&|;|(?<![\w-])export|(?<![\w-])env)\s+(?:[A-Z_][A-Z0-9_]*=\S+\s+)*(?P<key>[A-Z_][A-Z0-9_]*)=(?P<value>\S+)"
)
_PURE_LITERAL = re.compile(r"""-?\d[\d_.,]*|"[^"\n]*"|'[^'\n]*'|True|False|None|true|false|null""")
_YAML_SCALAR = re.compile(r"[\w./:@-]+")
_PROSE_SET = re.compile(
    r"\b(?:set|change|changed|raise|raised|lower|lowered|bump|bumped|update|updated)\s+(?:the\s+)?`?(?P<key>[A-Za-z_][\w]*(?:[._][\w]+)+|[A-Z][A-Z0-9_]{2,})`?"
    r"(?:\s+from\s+`?(?P<old>[^\s`,;]+)`?)?\s+to\s+`?(?P<value>[^\s`,;]+?)`?(?=[\s,;]|\.(?:\s|$)|$)"
    r"|`?(?P<key2>[A-Za-z_][\w]*(?:[._][\w]+)+|[A-Z][A-Z0-9_]{2,})`?\s+is\s+now\s+`?(?P<value2>[^\s`,;]+?)`?(?=[\s,;]|\.(?:\s|$)|$)"
)
_VERSION = re.compile(
    r"(?<![\w.@/-])(?P<pkg>[A-Za-z][\w.-]*[A-Za-z0-9])\s*(?:==|@|>=|~=)\s*v?(?P<v>\d+(?:\.\d+)+(?:[-.]?[a-z]+\d*)?)(?!\w|\.\d)"
)
_JSON_VERSION = re.compile(
    r"""^["']?(?P<pkg>@?[a-z][\w./-]*)["']?\s*[:=]\s*["'][\^~>=]*v?(?P<v>\d+(?:\.\d+)+[\w.-]*)["']""", re.I
)
_HOST_PORT = re.compile(
    r"(?<![\w./-])(?:[a-z][a-z0-9+.-]*://(?:[^@\s/]*@)?)?(?P<host>[a-z][\w-]*(?:\.[\w-]+)+|localhost):(?P<port>\d{2,5})(?![\w.:])",
    re.I,
)
#: Last labels that make ``name.ext:12`` a file and line, not a host and port.
_FILE_LABELS = frozenset(
    "py pyi js mjs ts tsx jsx go rs rb java kt c h cc cpp hpp cs php ex exs erl sh sql json yaml yml toml md txt html "
    "css vue".split()
)
_PROSE_PORT = re.compile(r"\bport\s*(?:=|:|is|to|on)?\s*(?P<port>\d{2,5})\b", re.I)
_FLAG_PORT = re.compile(r"(?:^|\s)(?:-p|--port)[ =](?P<port>\d{2,5})\b")
_FLAG_HOST = re.compile(r"(?:^|\s)(?:-h|--host)[ =](?P<host>[\w.-]+)")
_QUANTITY = re.compile(
    r"\b(?P<num>\d+(?:\.\d+)?)\s?(?P<unit>GB|GiB|MB|MiB|TB|KB|vCPUs?|CPUs?|cores?|workers?|threads?|replicas?|nodes?|ms|s|seconds|minutes|hours|days)\s+"
    r"(?:of\s+)?(?P<noun>RAM|memory|disk|storage|swap|heap|CPU|cores|workers|threads|replicas|nodes|timeout|budget|retention|TTL)\b",
    re.I,
)
_RENAME = re.compile(
    r"\b(?P<verb>renamed|moved|rename|move)\s+`?(?P<old>[\w./-]+)`?\s+(?:to|into|as|->|→)\s+`?(?P<new>[\w./-]+)`?", re.I
)
_IDENTIFIER_LIKE = re.compile(r"[A-Za-z_]\w*(?:_\w+|[a-z][A-Z]\w*|\.\w+)+|[A-Z][A-Z0-9_]{2,}")
_MV = re.compile(
    r"(?:^|&&|;|\|\|)\s*(?:git\s+)?mv\s+(?:-\w+\s+)*(?P<old>[\w./-]+)\s+(?P<new>[\w./-]+)\s*(?=$|&&|;|\|\|)"
)
_PYTEST_FAILED = re.compile(r"(?:^|\s)(?:FAILED|ERROR)\s+(?P<node>[\w./-]+\.py::[\w\[\]./:-]+)")
_PYTEST_VERBOSE = re.compile(r"(?P<node>[\w./-]+\.py::[\w\[\]./:-]+)\s+(?P<status>PASSED|FAILED|ERROR)\b")
_PYTEST_SUMMARY = re.compile(r"^=*\s*(?P<body>(?:\d+ \w+(?:, )?)+) in [\d.]+s", re.M)
_GO_TEST = re.compile(r"^\s*--- (?P<status>FAIL|PASS): (?P<node>\w+)", re.M)
_UNITTEST = re.compile(r"^(?P<status>FAIL|ERROR): (?P<node>test\w*) \((?P<where>[\w.]+)\)", re.M)
_CARGO = re.compile(r"^test (?P<node>[\w:]+) \.\.\. (?P<status>ok|FAILED)$", re.M)
_LINE_NUMBER = re.compile(r"^\s*\d+(?:\t|→|: ?)", re.M)
_GREP_LINE = re.compile(r"^(?P<path>[\w./-]+\.\w+):(?P<line>\d+)[:-](?P<text>.*)$")

_READ_KEYS = ("path", "file_path", "filePath", "filename", "file")
_OLD_KEYS = ("old_string", "old_str", "old", "search")
_NEW_KEYS = ("new_string", "new_str", "new", "replace")
_WRITE_KEYS = ("content", "file_text", "contents", "text")


def _qualifiers(text: str, end: int, floor: int = 0) -> frozenset[str]:
    """Content words of the clause before position ``end`` (at most five, none before ``floor``), without
    change words."""
    start = max(floor - 1, *(text.rfind(sep, 0, end) for sep in (".", "\n", ";", ":", "(", "!", "?")))
    words = [
        w for w in _WORD.findall(loose(text[start + 1 : end])) if w not in _STOP and not w.isdigit() and len(w) > 2
    ]
    words = [w for w in words if not _CHANGE.fullmatch(w) and w not in ("listen", "listens", "runs", "run", "port")]
    parts: set[str] = set()
    for word in words[-5:]:
        parts.update(p for p in re.split(r"[.-]", word) if len(p) > 2)
    return frozenset(_stem(p) for p in parts)


def _prose(text: str, index: int) -> Iterator[Observation]:
    """Settings, ports, quantities, versions and renames stated in user or agent text."""
    for match in _PROSE_SET.finditer(text):
        key = match.group("key") or match.group("key2")
        value = match.group("value") or match.group("value2")
        if match.group("old"):
            yield Observation("setting", f"setting:{key.lower()}", key, match.group("old"), index)
        yield Observation("setting", f"setting:{key.lower()}", key, value, index, change=True)
    yield from _env_assignments(text, index)
    yield from _ports(text, index)
    for match in _QUANTITY.finditer(text):
        noun = match.group("noun").lower()
        clause_end = min(
            [p for p in (text.find(".", match.end()), text.find("\n", match.end())) if p >= 0] or [len(text)]
        )
        change = bool(_CHANGE.search(text[max(0, match.start() - 60) : clause_end]))
        value = f"{match.group('num')} {match.group('unit')}"
        yield Observation("quantity", f"quantity:{noun}", noun, value, index, _qualifiers(text, match.start()), change)
    yield from _versions(text, index)
    for match in _RENAME.finditer(text):
        old, new = match.group("old").strip(".,"), match.group("new").strip(".,")
        if _is_path(old) and _is_path(new):
            kind = "path"
        elif (
            match.group("verb").lower().startswith("rename")
            and _IDENTIFIER_LIKE.fullmatch(old)
            and _IDENTIFIER_LIKE.fullmatch(new)
        ):
            kind = "name"
        else:
            continue
        yield Observation(kind, f"{kind}:{old}", old, old, index)
        yield Observation(kind, f"{kind}:{old}", old, new, index, change=True)


def _is_path(text: str) -> bool:
    return "/" in text or bool(re.search(r"\.[A-Za-z]{1,5}$", text))


def _env_assignments(text: str, index: int) -> Iterator[Observation]:
    """``dotted.key=value`` and ``UPPER_KEY=value`` in text or logs (keyword arguments in code are not settings)."""
    for match in _ENV_ASSIGN.finditer(text):
        key = match.group("key")
        yield Observation("setting", f"setting:{key.lower()}", key, match.group("value").strip("`'\".,"), index)


def _ports(text: str, index: int) -> Iterator[Observation]:
    for match in _HOST_PORT.finditer(text):
        host = match.group("host").lower()
        if host.rsplit(".", 1)[-1] in _FILE_LABELS:
            continue
        yield Observation("port", f"port:{host}", host, match.group("port"), index)
    host = _FLAG_HOST.search(text)
    for match in _FLAG_PORT.finditer(text):
        if host:
            yield Observation(
                "port", f"port:{host.group('host').lower()}", host.group("host"), match.group("port"), index
            )
    previous = 0
    for match in _PROSE_PORT.finditer(text):
        sentence = text[max(previous, match.start() - 80) : match.end() + 40]
        change = bool(_CHANGE.search(sentence))
        yield Observation(
            "port", "port", "port", match.group("port"), index, _qualifiers(text, match.start(), previous), change
        )
        previous = match.end()


def _versions(text: str, index: int) -> Iterator[Observation]:
    for match in _VERSION.finditer(text):
        package = match.group("pkg").lower().replace("_", "-")
        yield Observation("version", f"version:{package}", match.group("pkg"), match.group("v"), index)


def _file_settings(text: str, scope: str, index: int) -> Iterator[Observation]:
    """Module-level or UPPER_CASE assignments and quoted-key entries of one file's text, keyed by the file."""
    yaml_like = scope.endswith((".yaml", ".yml", ".toml", ".ini", ".cfg", ".env", ".properties"))
    for line in text.splitlines():
        match = _ASSIGN_LINE.match(line)
        if match is None:
            version = _JSON_VERSION.match(line.strip())
            if version and scope.endswith("package.json"):
                package = version.group("pkg").lower()
                yield Observation("version", f"version:{package}", version.group("pkg"), version.group("v"), index)
            continue
        key, op, value = match.group("key"), match.group("op"), match.group("value").strip()
        literal = bool(_PURE_LITERAL.fullmatch(value)) or yaml_like and bool(_YAML_SCALAR.fullmatch(value))
        if op == ":" and not (literal and (yaml_like or match.group("q") and re.search(r"[._-]", key))):
            continue
        if op == "=" and not (
            key.isupper() and not value.endswith(("(", "{", "[")) or literal and not match.group("indent")
        ):
            continue
        yield Observation("setting", f"setting:{scope}:{key}", key, value, index)


def _renamed_names(old: str, new: str, scope: str, index: int) -> Iterator[Observation]:
    """A constant whose name changed between the old and the new text of an edit (same value)."""

    def assignments(text: str) -> dict[str, str]:
        out = {}
        for line in text.splitlines():
            match = _ASSIGN_LINE.match(line)
            if match and match.group("op") == "=":
                out[match.group("key")] = loose(match.group("value"))
        return out

    before, after = assignments(old), assignments(new)
    for name, value in before.items():
        if name in after:
            continue
        renamed = [other for other, v in after.items() if v == value and other not in before]
        if len(renamed) == 1:
            yield Observation("name", f"name:{scope}:{name}", name, name, index)
            yield Observation("name", f"name:{scope}:{name}", name, renamed[0], index, change=True)


def _tests(text: str, index: int, command: str | None) -> Iterator[Observation]:
    """Test outcomes printed by a test runner; a run with no failure covers the paths of its command."""
    if "::" in text:  # cheap guards: most tool results are no test run
        for match in _PYTEST_FAILED.finditer(text):
            yield _test(match.group("node"), "failed", index)
        for match in _PYTEST_VERBOSE.finditer(text):
            yield _test(match.group("node"), "passed" if match.group("status") == "PASSED" else "failed", index)
    if "--- " in text:
        for match in _GO_TEST.finditer(text):
            yield _test(match.group("node"), "passed" if match.group("status") == "PASS" else "failed", index)
    if "FAIL: " in text or "ERROR: " in text:
        for match in _UNITTEST.finditer(text):
            yield _test(match.group("node"), "failed", index)
    if " ... " in text:
        for match in _CARGO.finditer(text):
            yield _test(match.group("node"), "passed" if match.group("status") == "ok" else "failed", index)
    summary = _PYTEST_SUMMARY.search(text)
    body = summary.group("body") if summary else ""
    clean = "passed" in body and not re.search(r"\b(?:failed|error)", body)
    if clean and command and "pytest" in command and " -k " not in command:
        paths = frozenset(a.split("::")[0].rstrip("/") for a in command.split() if "/" in a or a.endswith(".py"))
        yield Observation("test-run", "test-run", command, "passed", index, paths)


def _test(node: str, status: str, index: int) -> Observation:
    return Observation("test", f"test:{node}", node, status, index)


def _argument(call: ToolCall, names: Sequence[str]) -> str | None:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    for name in names:
        value = arguments.get(name)
        if isinstance(value, str):
            return value
    return None


def _call_observations(call: ToolCall, index: int) -> Iterator[Observation]:
    """What one tool call states: its command's settings, ports, versions and moves; an edit's or a write's
    file values."""
    command = command_of(call)
    if command:
        for match in _COMMAND_ENV.finditer(command):
            key = match.group("key")
            yield Observation("setting", f"setting:{key.lower()}", key, match.group("value").strip("'\";,"), index)
        yield from _ports(command, index)
        yield from _versions(command, index)
        for match in _MV.finditer(command):
            old, new = match.group("old"), match.group("new")
            yield Observation("path", f"path:{old}", old, old, index)
            yield Observation("path", f"path:{old}", old, new, index, change=True)
        return
    path = _argument(call, _READ_KEYS)
    old, new = _argument(call, _OLD_KEYS), _argument(call, _NEW_KEYS)
    if path and old is not None and new is not None:
        yield from _file_settings(old, path, index)
        yield from _file_settings(new, path, index)
        yield from _renamed_names(old, new, path, index)
        return
    content = _argument(call, _WRITE_KEYS)
    if path and content is not None:
        yield from _file_settings(content, path, index)


def _output_observations(text: str, call: ToolCall | None, index: int) -> Iterator[Observation]:
    """What a tool result shows: a read file's values, grep hits, test outcomes, ``key=value`` in logs."""
    command = command_of(call) if call is not None else None
    if call is not None and not command:
        path = _argument(call, _READ_KEYS)
        if path and _argument(call, _OLD_KEYS) is None and _argument(call, _WRITE_KEYS) is None:
            yield from _file_settings(_LINE_NUMBER.sub("", text), path, index)
    for line in text.splitlines():
        grep = _GREP_LINE.match(line)
        if grep:
            yield from _file_settings(grep.group("text"), grep.group("path"), index)
    yield from _tests(text, index, command)
    if command:
        yield from _env_assignments(text, index)


#: observe() results of the last few message lists (a sweep measures the same conversation many times).
_OBSERVED: dict[int, tuple[Sequence[AnyMessage], int, list[tuple[Observation, ...]]]] = {}


def held_observations(messages: Sequence[AnyMessage]) -> list[tuple[Observation, ...]] | None:
    """What :func:`observe` remembers for these messages, None when it remembers nothing."""
    held = _OBSERVED.get(id(messages))
    if held is not None and held[0] is messages and held[1] == len(messages):
        return held[2]
    return None


def observe(
    messages: Sequence[AnyMessage], observed: list[tuple[Observation, ...]] | None = None
) -> list[tuple[Observation, ...]]:
    """The keyed values each message states (one tuple per message, in order); remembered per message list.
    ``observed``: what this function gave for the same messages in another process (kept across runs by
    :mod:`~zett_lab.study.kept_measuring`: a long session's take ~0.7 s of CPU), taken when none is remembered."""
    held = held_observations(messages)
    if held is not None:
        return held
    out = _observe(messages) if observed is None else observed
    if len(_OBSERVED) >= 16:
        _OBSERVED.clear()
    _OBSERVED[id(messages)] = (messages, len(messages), out)
    return out


def _observe(messages: Sequence[AnyMessage]) -> list[tuple[Observation, ...]]:
    calls: dict[str, ToolCall] = {}
    out: list[tuple[Observation, ...]] = []
    for index, message in enumerate(messages):
        found: list[Observation] = []
        if isinstance(message, AssistantMessage):
            found.extend(_prose(clean_text(message.content), index))
            for call in message.tool_calls or ():
                calls[call.id] = call
                found.extend(_call_observations(call, index))
        elif isinstance(message, UserMessage) and not isinstance(message, CompactedMessage):
            text = message_text(message)
            found.extend(_prose(text, index))
            found.extend(_instructionclauses(text, index))
        elif isinstance(message, ToolMessage):
            found.extend(_output_observations(message_text(message), calls.get(message.tool_call_id), index))
        out.append(tuple(found))
    return out


# --------------------------------------------------------------------------------------------
# Instructions


def _instructionclauses(text: str, index: int) -> Iterator[Observation]:
    """User instructions (kind ``instruction``) and the clauses that reverse or narrow one (``instruction-change``)."""
    for clause in re.split(r"[.!?]+(?=\s|$)|[;:\n]+|,\s*(?=(?:so|then|and then|but)\b)", text):
        clause = clause.strip(" -*•,")
        body = re.sub(r"^(?:so|then|and then|but|fyi|also|ok|okay)\b[, ]*", "", clause, flags=re.I).strip()
        if not body:
            continue
        directive = bool(_IMPERATIVE.search(body) or _DIRECTIVE.search(body))
        if directive and (_CUES.search(body) or _NARROW.search(body)):
            value = " ".join(_CUES.sub(" ", body).split()).strip(" ,")
            yield Observation(
                "instruction-change", "instruction", value, value, index, content_words(value), bool(_CUES.search(body))
            )
        elif (
            _IMPERATIVE.search(body)
            or NEGATIVE.search(body)
            and re.search(r"\b(?:must|always|never)\b|n['’]?t\b|not\b", body, re.I)
        ):
            yield Observation("instruction", "instruction", body, body, index, content_words(body))
