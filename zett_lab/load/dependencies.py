"""The third-party libraries a conversation shows the project depending on, and the names that are their API.

A name qualified by a library the project declares (``Ecto.Adapters.SQL.Sandbox``, ``Phoenix.LiveViewTest``,
``Ash.Query.filter`` in a project depending on ``ecto``, ``phoenix`` and ``ash``) is that library's public
vocabulary: the agent knows it without the compacted span, as it knows the standard library's. No offline list
holds every library's names, but the conversation itself says which libraries the project uses:

* a **manifest entry** any message shows: ``{:phoenix, "~> 1.7"}`` (``mix.exs``), ``requests>=2.0``
  (``requirements.txt``, ``pyproject.toml``), ``"react": "^18.2.0"`` (``package.json``), ``serde = "1.0"`` or
  ``serde = { version = ... }`` (``Cargo.toml``), ``github.com/pkg/errors v0.9.1`` (``go.mod``): a name with a
  version requirement;
* an **installed package's folder**: ``deps/phoenix/`` (Mix), ``node_modules/react/`` (npm),
  ``site-packages/requests/`` (pip): where each build tool puts what the project declares, and Mix's
  ``==> ash`` heading the compilation of a dependency;
* failing these, an **import of a namespace the project does not define**: Elixir code that ``use``s, ``import``s, ``alias``es
  or ``require``s a module of a namespace no ``defmodule`` of the conversation opens (``use Phoenix.LiveView``
  beside ``defmodule SpotterWeb.X``), Python code importing a package no path of the conversation holds as a
  folder or module file (``import requests`` beside ``src/app/x.py``; not ``import marshmallow`` beside
  ``src/marshmallow/fields.py``: that is the project itself).

A package's namespace is its name and, in a name joined by underscores, its first word (``phoenix_live_view``
is ``Phoenix.LiveView``, ``ecto_sql`` ``Ecto.Adapters.SQL``: a Hex or Python package extending another is named
after it; not a hyphenated npm name, ``client-sso``),
compared with a name's first component in snake case (``SpotterWeb`` is ``spotter_web``). A name brought in
from such a namespace under a short name is one too: ``alias Ecto.Adapters.SQL.Sandbox`` makes
``Sandbox.start_owner`` Ecto's, ``from marshmallow import fields`` makes ``fields.Str`` marshmallow's. Only
qualified names count: the package's own name (``mix_audit``) is what the project chose to depend on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from .anchor_forms import components

#: Manifest entries: a package name with a version requirement (or a source, in Mix).
_MANIFEST = (
    # mix.exs: {:name, "~> 1.0"} or {:name, github: ...}, path:, git:
    re.compile(r"\{\s*:([a-z][a-z0-9_]*)\s*,\s*(?:\"[~>=<\s]*\d|(?:github|git|path|hex):)"),
    # requirements.txt, pyproject.toml, setup.py: name>=1.0, "name[extra]==1.0"
    re.compile(r"(?m)^[\s\"'-]*([A-Za-z][A-Za-z0-9._-]*)\s*(?:\[[\w,\s-]*\])?\s*(?:==|>=|~=|!=)\s*\d"),
    # package.json: "name": "^1.0.0"
    re.compile(r"\"(@?[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)?)\"\s*:\s*\"[\^~>=<\s]*\d+\.[\w.-]*\""),
    # Cargo.toml, Poetry: name = "1.0", name = { version = "1.0" }
    re.compile(r"(?m)^\s*([A-Za-z][A-Za-z0-9_-]*)\s*=\s*(?:\"[\^~>=<\s]*\d|\{[^}\n]*\bversion\b)"),
    # go.mod: github.com/owner/name v1.2.3
    re.compile(r"(?m)^\s*(?:require\s+)?[\w.-]+\.[a-z]+/(?:[\w.-]+/)*([\w.-]+)\s+v\d"),
)
#: The folders each build tool installs the declared packages into, and an installed package's folder.
_INSTALL_FOLDER = re.compile(r"(?:^|/)(?:deps|node_modules|site-packages|dist-packages)/")
_INSTALLED = re.compile(
    r"(?:^|[\s/\\\"'(])(?:deps|node_modules|site-packages|dist-packages)/(?:@[\w.-]+/)?([A-Za-z][\w.-]*)/"
    r"|^==> ([a-z][a-z0-9_]*)$",
    re.M,
)
#: What every match of :data:`_INSTALLED` holds: a text without any has none (and is not scanned for them).
_INSTALLED_MARKS = ("deps/", "node_modules/", "site-packages/", "dist-packages/", "==> ")
#: A path of two or more components; an Elixir module definition's namespace.
#: (It starts where a run of its characters starts: a match can start nowhere else, and trying every character of
#: each word as a start cost a whole long session's text half a second.)
_PATH = re.compile(r"(?<![\w.@-])[\w.@-]*(?:/[\w.@-]+)+")
_DEFMODULE = re.compile(r"\bdefmodule\s+([A-Z]\w*)")
#: Code bringing in another namespace's module: Elixir's ``use``, ``import``, ``alias``, ``require`` of a dotted module
#: (``use Phoenix.LiveView``), Python's ``import x`` and ``from x import``.
_ELIXIR_IMPORT = re.compile(r"\b(?:use|import|alias|require)\s+([A-Z]\w*)\.[A-Z]")
_PYTHON_IMPORT = re.compile(r"(?m)^\s*(?:from|import)\s+([A-Za-z_]\w*)[.\s]")
#: Short names for a library's modules: Elixir's ``alias A.B.C`` (``, as: D``), Python's ``from a.b import c, d``
#: and ``import a.b as c``.
_ELIXIR_ALIAS = re.compile(r"\balias\s+([A-Z][\w]*(?:\.[A-Z][\w]*)*)(?:\s*,\s*as:\s*([A-Z]\w*))?")
_PYTHON_FROM = re.compile(r"(?m)^\s*from\s+([A-Za-z_][\w.]*)\s+import\s+\(?([\w \t,]+)")
_PYTHON_AS = re.compile(r"(?m)^\s*import\s+([A-Za-z_][\w.]*)\s+as\s+(\w+)")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PUNCTUATION = re.compile(r"[-.]")


def snake(name: str) -> str:
    """A name's snake form: ``SpotterWeb`` -> ``spotter_web``, ``phoenix-live-view`` -> ``phoenix_live_view``."""
    return _PUNCTUATION.sub("_", _CAMEL.sub("_", name)).lower()


def _namespaces(package: str) -> set[str]:
    """The snake forms a package's modules are named under: its name and the name's first word."""
    name = package.rsplit("/", 1)[-1]
    return {snake(name), name.split("_")[0].lower()} - {""}


class Dependencies(NamedTuple):
    """What a conversation shows of the project's third-party libraries (see the module docstring)."""

    #: The libraries' namespaces, in snake case (``phoenix``, ``ecto``).
    namespaces: frozenset[str] = frozenset()
    #: The short names the conversation's code gives their modules, as written (``Sandbox``, ``fields``).
    aliases: frozenset[str] = frozenset()

    def names(self, type_: str, normalized: str) -> bool:
        """Whether an identifier is qualified by one of the libraries (``Ecto.Adapters.SQL.Sandbox``,
        ``Sandbox.start_owner``): a library's public name. Not a bare name: the package's own name is what the
        project chose to depend on."""
        if type_ != "identifier" or not (self.namespaces or self.aliases):
            return False
        parts = components(type_, normalized)
        return len(parts) > 1 and (parts[0] in self.aliases or snake(parts[0]) in self.namespaces)


def dependencies(texts: Iterable[str]) -> Dependencies:
    """The third-party libraries the texts show the project declaring or having installed, or importing where
    the project does not define them (no ``defmodule``, no folder of a path outside the install folders), and the
    short names the texts' code gives their modules."""
    joined = "\n".join(texts)
    found: set[str] = set()
    for pattern in _MANIFEST:
        found.update(n for m in pattern.finditer(joined) for n in _namespaces(m.group(1)))
    if any(mark in joined for mark in _INSTALLED_MARKS):
        found.update(n for m in _INSTALLED.finditer(joined) for n in _namespaces(m.group(1) or m.group(2)))
    imported = {snake(m.group(1)) for pattern in (_ELIXIR_IMPORT, _PYTHON_IMPORT) for m in pattern.finditer(joined)}
    if imported:  # (the project's own modules and folders are looked for only to take imports away)
        found |= imported - {snake(m.group(1)) for m in _DEFMODULE.finditer(joined)} - _own_folders(joined)
    if not found:
        return Dependencies()
    aliases: set[str] = set()
    for match in _ELIXIR_ALIAS.finditer(joined):
        if snake(match.group(1).split(".")[0]) in found:
            aliases.add(match.group(2) or match.group(1).rsplit(".", 1)[-1])
    for match in _PYTHON_FROM.finditer(joined):
        if snake(match.group(1).split(".")[0]) in found:
            aliases.update(n for n in re.findall(r"\w+", match.group(2)) if n != "as")
    for match in _PYTHON_AS.finditer(joined):
        if snake(match.group(1).split(".")[0]) in found:
            aliases.add(match.group(2))
    return Dependencies(frozenset(found), frozenset(aliases))


def _own_folders(text: str) -> set[str]:
    """The folders and Python modules of the paths a text shows outside the install folders, in snake case: the
    project's own namespaces (``lib/spotter_web/live/x.ex`` holds ``spotter_web``; ``src/marshmallow/fields.py``
    ``marshmallow`` and ``fields``)."""
    own: set[str] = set()
    for path in {match.group(0) for match in _PATH.finditer(text)}:
        if _INSTALL_FOLDER.search(path):
            continue
        *folders, last = path.split("/")
        own.update(snake(folder) for folder in folders if folder and folder not in (".", ".."))
        if last.endswith(".py"):
            own.add(snake(last.removesuffix(".py")))
    return own
