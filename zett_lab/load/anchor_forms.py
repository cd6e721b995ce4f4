"""The anchor vocabulary: the anchor types, the :class:`Anchor` record, and the normal form of each type.

Two spellings of one item (``./src/a.py`` and ``src/a.py``, ``250 ms`` and ``250ms``) are the
same anchor when their normal forms are equal; :mod:`zett_lab.load.anchors` finds anchors in
messages and documents what each type covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from .text import clean_text

ANCHOR_TYPES: tuple[str, ...] = (
    "path",
    "url",
    "identifier",
    "sha",
    "number",
    "error",
    "command",
    "constraint",
    "decision",
)
#: Types compared as whole sentences (fuzzy presence in summaries), not exact strings.
SENTENCE_TYPES: frozenset[str] = frozenset({"constraint", "decision"})
#: Types a re-fetching tool call can mention (see :func:`zett_lab.measure.measure`).
ARTIFACT_TYPES: frozenset[str] = frozenset({"path", "identifier", "url"})

AnchorKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Anchor:
    """One exact item found in a message.

    Attributes:
        type: One of :data:`ANCHOR_TYPES`.
        value: The item as written (first spelling seen).
        normalized: The comparison form; two anchors are the same item when
            ``(type, normalized)`` are equal.
        message_index: Index in ``Conversation.messages`` (None for free text).
    """

    type: str
    value: str
    normalized: str
    message_index: int | None = None

    @property
    def key(self) -> AnchorKey:
        """``(type, normalized)``: the identity used for set operations."""
        return (self.type, self.normalized)


# ---------------------------------------------------------------------------
# Characters and units

_UNITS = {
    "ms": "ms",
    "msec": "ms",
    "millisecond": "ms",
    "milliseconds": "ms",
    "us": "us",
    "µs": "us",
    "microseconds": "us",
    "ns": "ns",
    "nanoseconds": "ns",
    "s": "s",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "m": "m",
    "min": "min",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "h": "h",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "d": "d",
    "day": "d",
    "days": "d",
    "week": "wk",
    "weeks": "wk",
    "wk": "wk",
    "b": "b",
    "byte": "b",
    "bytes": "b",
    "kb": "kb",
    "mb": "mb",
    "gb": "gb",
    "tb": "tb",
    "pb": "pb",
    "kib": "kib",
    "mib": "mib",
    "gib": "gib",
    "tib": "tib",
    "k": "k",
    "bn": "bn",
    "million": "m",
    "billion": "bn",
    "thousand": "k",
    "token": "tokens",
    "tokens": "tokens",
    "tok": "tokens",
    "%": "%",
    "percent": "%",
    "x": "x",
    "px": "px",
    "rem": "rem",
    "em": "em",
    "pt": "pt",
    "hz": "hz",
    "khz": "khz",
    "mhz": "mhz",
    "ghz": "ghz",
    "fps": "fps",
    "rps": "rps",
    "qps": "qps",
    "req/s": "rps",
    "requests": "requests",
    "request": "requests",
    "kbps": "kbps",
    "mbps": "mbps",
    "gbps": "gbps",
    "line": "lines",
    "lines": "lines",
    "file": "files",
    "files": "files",
    "test": "tests",
    "tests": "tests",
    "row": "rows",
    "rows": "rows",
    "item": "items",
    "items": "items",
    "user": "users",
    "users": "users",
    "worker": "workers",
    "workers": "workers",
    "thread": "threads",
    "threads": "threads",
    "core": "cores",
    "cores": "cores",
    "cpu": "cpus",
    "cpus": "cpus",
    "gpu": "gpus",
    "gpus": "gpus",
    "step": "steps",
    "steps": "steps",
    "call": "calls",
    "calls": "calls",
    "retry": "retries",
    "retries": "retries",
    "attempt": "attempts",
    "attempts": "attempts",
    "error": "errors",
    "errors": "errors",
    "usd": "usd",
    "eur": "eur",
    "dollars": "usd",
    "km": "km",
    "cm": "cm",
    "mm": "mm",
    "kg": "kg",
    "°c": "c",
    "°f": "f",
}
_UNIT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
#: A number with its unit or currency, a percentage or a version (the ``number`` anchor type).
NUMBER = re.compile(
    # the lookahead (the first character any number starts with) rejects most positions before the groups do
    r"(?<![\w.,/$€£-])(?=[$€£v\d])(?P<cur>[$€£])?(?P<v>v)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)*|\d+(?:\.\d+)*)"
    # a comma ends a number unless a digit follows (``5 ms, 410 tests, 0 failures``; not ``1,000``)
    r"(?:(?P<sp>[ \t]?)(?P<unit>" + _UNIT + r")(?![\w/]|→|\t)|(?!\w|[.,]\d|→|\t))",
    re.I,
)

_BULLET = re.compile(r"^(?:[-*•>]+|\d+[.)])\s*")
_QUOTES = str.maketrans({"'": None, '"': None, "`": None, "‘": None, "’": None, "“": None, "”": None})
_WS = re.compile(r"\s+")
TRAILING_PUNCTUATION = " \t\r\n.,;:!?)]}>'\"`"
_LEAD = " \t\r\n([{<'\"`"


# ---------------------------------------------------------------------------
# Normalization


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


_SLASHES = re.compile(r"/{2,}")


def normalize_path(value: str) -> str:
    v = value.strip(_LEAD).rstrip(TRAILING_PUNCTUATION).translate(_QUOTES)
    while v.startswith("./"):
        v = v[2:]
    v = _SLASHES.sub("/", v)
    if len(v) > 1:
        v = v.rstrip("/")
    return v


def normalize_url(value: str) -> str:
    v = value.rstrip(TRAILING_PUNCTUATION)
    match = re.match(r"([a-zA-Z][a-zA-Z0-9+.-]*://)([^/?#]*)(.*)", v)
    if match:
        v = match.group(1).lower() + match.group(2).lower() + match.group(3)
    return v.rstrip("/")


def normalize_sentence(value: str) -> str:
    v = value.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    v = _collapse(v).lower()
    v = _BULLET.sub("", v)
    return v.strip(_LEAD).rstrip(TRAILING_PUNCTUATION).strip()


def normalize_error(value: str) -> str:
    return _collapse(value.translate(_QUOTES)).rstrip(TRAILING_PUNCTUATION)


def normalize_command(value: str) -> str:
    return _collapse(value)


def normalize(type_: str, value: str) -> str:
    """The comparison form of a value of one anchor type (see the module docstring)."""
    value = clean_text(value)
    if type_ == "path":
        return normalize_path(value)
    if type_ == "url":
        return normalize_url(value)
    if type_ == "sha":
        return value.strip().lower()
    if type_ == "number":
        value = value.strip()
        match = NUMBER.search(value)
        return keyed_number(value, match)[1] if match else _collapse(value).lower()
    if type_ == "error":
        return normalize_error(value)
    if type_ == "command":
        return normalize_command(value)
    if type_ in SENTENCE_TYPES:
        return normalize_sentence(value)
    return value.strip(_LEAD).rstrip(TRAILING_PUNCTUATION.replace(")", ""))


def normalize_number(match: re.Match[str]) -> str:
    """The comparison form of a :data:`NUMBER` match: no thousands separators, one spelling per unit."""
    number = match.group("num").replace(",", "")
    unit = match.group("unit")
    currency = match.group("cur") or ""
    return currency + number + (_UNITS.get(unit.lower(), unit.lower()) if unit else "")


#: The key a number without a unit stands for, right before it: ``port 6543``, ``The port is 6543``,
#: ``PORT=6543``, ``"port": 6543``, ``--port 6543``, ``Process.sleep(200``. A key is a word of three or
#: more letters, then ``=`` or ``:`` (not a file extension: ``app.tsx:304`` is a line number), or a space
#: with at most one word of one or two letters after it; or a called name and ``(``.
_NUMBER_KEY = re.compile(
    r"(?:(?<![\w.])(?P<key>[A-Za-z][A-Za-z_]{2,})[\"'\]]?[ \t]*(?:[=:][ \t]*|[ \t](?:[A-Za-z]{1,2}[ \t]+)?)"
    r"|(?<!\w)(?P<call>[A-Za-z][A-Za-z_]{2,})\()[\"']?\Z"
)


def keyed_number(text: str, match: re.Match[str]) -> tuple[str, str]:
    """``(value, normalized)`` of a :data:`NUMBER` match in ``text``: a number without a unit, currency or
    version mark carries the key written right before it (``port 6543``; see :data:`_NUMBER_KEY`), so
    ``200`` as an HTTP status and ``sleep(200)`` are two items. A key that is itself a unit of position
    or count (``line 304``, ``row 12``) is no key: such a number stays bare (and never specific)."""
    value, normalized = match.group().strip(), normalize_number(match)
    if match.group("unit") or match.group("cur") or match.group("v"):
        return value, normalized
    found = _NUMBER_KEY.search(text, max(0, match.start() - 40), match.start())
    key = (found.group("key") or found.group("call")).lower() if found else None
    if found is None or key in _UNITS:
        return value, normalized
    return text[found.start() : match.end()].strip(), f"{key} {normalized}"


_DOT_SLASH = re.compile(r"(?<![\w.])\./")


def _strip_quotes(text: str) -> str:
    for quote in ("'", '"', "`", "‘", "’", "“", "”"):
        if quote in text:
            text = text.replace(quote, "")
    return text


def loose(text: str) -> str:
    """Lower-cased text with quotes removed, ``./`` prefixes dropped and whitespace collapsed.

    The form substring presence is checked in (see :class:`TextIndex`).
    """
    text = _strip_quotes(clean_text(text)).lower()
    if "./" in text:
        text = _DOT_SLASH.sub("", text)
    return " ".join(text.split())


@lru_cache(maxsize=65_536)
def loose_needle(text: str) -> str:
    return loose(text)


# ---------------------------------------------------------------------------
# Spellings: the forms under which an item can be visible again

#: Types whose items are names made of components: ``src/a/b.py``, ``a.b.Name``, ``Name``.
NAME_TYPES: frozenset[str] = frozenset({"path", "identifier"})
_FILE_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_SHA_PREFIX = 7
#: What separates a path's components; a Windows drive (``C:``), no component.
_PATH_SEPARATORS = re.compile(r"[/\\]+")
_DRIVE = re.compile(r"[A-Za-z]:")


def components(type_: str, normalized: str) -> list[str]:
    """A name's components: a path split at its slashes (leading ``/``, ``~``, ``.``, ``..`` dropped), an
    identifier at its dots (a trailing ``()`` or ``(`` dropped). Case is kept (``BITBUCKET_TOKEN`` and
    ``bitbucket_token`` are two names)."""
    value = normalized
    if type_ == "path":
        parts = _PATH_SEPARATORS.split(value)
        return [p for p in parts if p not in ("", "~", ".", "..") and not _DRIVE.fullmatch(p)]
    value = value.removesuffix("()").removesuffix("(")
    return [p for p in value.split(".") if p]


def file_stem(type_: str, normalized: str) -> str | None:
    """A path's file name without its extension (``opencode.plugin`` of ``src/x/opencode.plugin.ts``); None
    for another type, a path without a file extension or an empty stem."""
    parts = components(type_, normalized) if type_ == "path" else []
    stem = _FILE_EXTENSION.sub("", parts[-1]) if parts else ""
    return stem if stem and stem != parts[-1] else None


def url_prefixes(normalized: str) -> list[str]:
    """The shorter URLs a normalized URL names on the way: itself without its query or fragment, and every leading
    run of its path's segments (``…/issues/10730/comments`` names ``…/issues/10730`` and ``…/issues``), down to
    the bare host."""
    match = re.match(r"([a-z][a-z0-9+.-]*://[^/?#]+)([^?#]*)", normalized)
    if not match:
        return []
    host, path = match.groups()
    segments = [s for s in path.split("/") if s]
    shorter = {host + "".join("/" + s for s in segments[:n]) for n in range(len(segments) + 1)}
    return sorted(shorter - {normalized})


class Spelling(NamedTuple):
    """How an anchor can be visible in another spelling (:func:`spellings`)."""

    #: Its own form.
    canonical: str
    #: Spellings that name it too (a trailing run of its components, itself included).
    forms: frozenset[str]
    #: What it names on the way (leading runs of its components: the folders of a path, the packages of a
    #: dotted name): an occurrence of it shows them.
    prefixes: frozenset[str]


@lru_cache(maxsize=1 << 18)
def spellings(key: tuple[str, str]) -> Spelling:
    """The spellings of an anchor; :func:`shows` says when an occurrence of one anchor shows another.

    Paths and identifiers are names made of components (``/`` and ``.`` separated, compared
    lower-cased: ``IFNULL`` is ``ifnull``): their forms are every trailing run of components, also without the last one's file extension when at
    least two components remain; their prefixes every leading run but the whole. So an absolute path
    and the relative one it ends with, a qualified name and the bare one (``Hooks.TranscriptHighlighter``,
    ``TranscriptHighlighter``), a module path with and without ``.py`` (``src/project/__init__``) and a
    dotted module and its file (``pkg.mod``, ``src/pkg/mod.py``) are one item; ``a/x/b.py`` and
    ``c/x/b.py`` are not; and ``/testbed/src/a.py`` shows the folder ``/testbed``. A ``file://`` URL is
    its path; another URL names its shorter forms on the way (:func:`url_prefixes`), so ``…/issues/1/comments``
    shows ``…/issues``. A commit SHA's forms are its prefixes of seven characters or more (``dde0244`` is
    ``dde0244f…``). Other types have one form, their normalized value.
    """
    type_, normalized = key
    if type_ == "url" and normalized.lower().startswith("file://"):
        type_, normalized = "path", normalized[len("file://") :]
    if type_ in NAME_TYPES:
        parts = [part.lower() for part in components(type_, normalized)]
        if parts:
            forms = {"/".join(parts[i:]) for i in range(len(parts))}
            bare = _FILE_EXTENSION.sub("", parts[-1])
            if type_ == "path" and bare and bare != parts[-1]:
                stripped = [*parts[:-1], bare]
                forms.update("/".join(stripped[i:]) for i in range(len(stripped) - 1))
            prefixes = frozenset("name:" + "/".join(parts[:n]) for n in range(1, len(parts)))
            return Spelling("name:" + "/".join(parts), frozenset("name:" + form for form in forms), prefixes)
    if type_ == "sha":
        prefixes = frozenset("sha:" + normalized[:n] for n in range(_SHA_PREFIX, len(normalized) + 1))
        return Spelling("sha:" + normalized, prefixes, frozenset())
    if type_ == "url":
        canonical = "url:" + normalized
        return Spelling(canonical, frozenset({canonical}), frozenset("url:" + p for p in url_prefixes(normalized)))
    canonical = f"{type_}:{normalized}"
    return Spelling(canonical, frozenset({canonical}), frozenset())


def shows(seen: tuple[str, str], item: tuple[str, str], folders: bool = True) -> bool:
    """Whether an occurrence of anchor ``seen`` shows anchor ``item`` in some spelling (see :func:`spellings`):
    either is a spelling of the other, or (``folders``) ``item`` is a leading part of ``seen``."""
    a, b = spellings(seen), spellings(item)
    return b.canonical in a.forms or a.canonical in b.forms or (folders and b.canonical in a.prefixes)
