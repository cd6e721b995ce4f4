"""Vocabulary: items any agent could write without having seen them in the conversation.

A summary that drops ``JSON.parse``, ``os.path.dirname``, ``GenServer.start_link``, a local
``filePath`` or the number ``200`` lost nothing the agent needed: it knows them from its
language, the standard library, a common framework, or because most projects have them. Such
items are *generic*; "needed later" counts only specific ones.

The vocabulary is data built from real sources by ``scripts/build_vocabulary.py`` (shipped as
``zett_lab/data/vocabulary.json.gz``, its sources recorded inside; see the docs' page on loss
metrics), never a hand-typed list:

* the names of languages and their standard libraries: Python's keywords, builtins, standard
  library modules and their public names (members of public classes included); JavaScript and
  TypeScript's keywords and the declarations of TypeScript's ``lib.*.d.ts`` (the language, the DOM,
  Node-free web APIs); Elixir's and Erlang/OTP's modules and their public functions; the public names
  of NumPy, pandas and SciPy;
* document frequency over a background corpus of independent projects' code: a name, path or
  value found in at least :data:`GENERIC_SHARE` of the projects (and at least
  :data:`GENERIC_MIN_PROJECTS`) is common vocabulary.

Rules per anchor type (:func:`is_generic`): an identifier is generic when each of its dotted
components is (``line.trim``, ``os.path.dirname``; not ``self._provider_tokens``); a path, URL
or number with a unit when it is common in the background corpus; a number without a unit,
currency, percent sign, key or decimal point is never specific (``200``, a line number): a number
counts only with its unit or key (``~> 1.4`` and ``0.25`` are specific, not ``304``); a command when none of the paths, identifiers, URLs or numbers in it is
specific; errors, SHAs, constraints and decisions are always specific.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .anchor_forms import AnchorKey, components
from .anchors import anchor_keys

#: Where the built vocabulary lives.
VOCABULARY_PATH = Path(__file__).resolve().parent.parent / "data" / "vocabulary.json.gz"
#: Share of the background corpus's projects from which a name is common vocabulary.
GENERIC_SHARE = 0.0075
#: ... and the fewest projects (a small corpus must not make a name generic from one or two).
GENERIC_MIN_PROJECTS = 5

_BARE_NUMBER = re.compile(r"\d+")
_NAME_TYPES = ("identifier", "path")


@dataclass(frozen=True)
class Vocabulary:
    """The names of languages and standard libraries (components, lower-cased), and background document
    frequency (``kind:value`` -> number of projects; kinds ``c`` identifier component, ``p`` path,
    ``u`` URL, ``n`` number) over ``projects`` projects."""

    language: frozenset[str]
    frequency: dict[str, int]
    projects: int
    sources: tuple[dict[str, str], ...]

    @property
    def threshold(self) -> int:
        """Projects a name must appear in to be common vocabulary."""
        return max(GENERIC_MIN_PROJECTS, int(GENERIC_SHARE * self.projects + 0.999))

    def common(self, kind: str, value: str) -> bool:
        return self.frequency.get(f"{kind}:{value}", 0) >= self.threshold


@lru_cache(maxsize=1)
def vocabulary() -> Vocabulary:
    """The shipped vocabulary (read once)."""
    with gzip.open(VOCABULARY_PATH, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    frequency = data["document_frequency"]
    return Vocabulary(
        language=frozenset(name for names in data["language"].values() for name in names),
        frequency=dict(frequency["counts"]),
        projects=int(frequency["projects"]),
        sources=tuple(data["sources"]),
    )


@lru_cache(maxsize=1 << 18)
def is_generic(key: AnchorKey) -> bool:
    """Whether an anchor is vocabulary any agent could write unseen (see the module docstring)."""
    type_, normalized = key
    words = vocabulary()
    if type_ == "identifier":
        parts = [part.lower() for part in components(type_, normalized)]
        return bool(parts) and all(part in words.language or words.common("c", part) for part in parts)
    if type_ == "path":
        parts = [part.lower() for part in components(type_, normalized)]
        return not parts or words.common("p", "/".join(parts)) or all(part in words.language for part in parts)
    if type_ == "url":
        return words.common("u", normalized.lower())
    if type_ == "number":
        return bool(_BARE_NUMBER.fullmatch(normalized)) or words.common("n", normalized)
    if type_ == "command":
        inner = [k for k in anchor_keys(normalized) if k[0] in (*_NAME_TYPES, "url", "number", "sha")]
        return all(is_generic(k) for k in inner)
    return False
