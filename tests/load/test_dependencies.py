"""The third-party libraries a conversation shows (zett_lab.load.dependencies)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zett_lab.load.dependencies import (
    _DEFMODULE,
    _ELIXIR_IMPORT,
    _INSTALLED,
    _MANIFEST,
    _PATH,
    _PYTHON_IMPORT,
    _namespaces,
    _own_folders,
    dependencies,
    snake,
)


@pytest.mark.parametrize(
    ("text", "library"),
    [
        ('  defp deps do\n    [{:phoenix_live_view, "~> 1.0"}, {:ecto_sql, "~> 3.10"}]', "ecto"),
        ('  defp deps do\n    [{:phoenix_live_view, "~> 1.0"}]', "phoenix"),
        ("requests>=2.31\nmarshmallow==3.20.1\n", "marshmallow"),
        ('  "dependencies": {\n    "zod": "^3.22.4"\n  }', "zod"),
        ('[dependencies]\nserde = { version = "1.0", features = ["derive"] }', "serde"),
        ("require github.com/pkg/errors v0.9.1", "errors"),
        ("  File /usr/lib/python3/site-packages/httpx/_client.py, line 3", "httpx"),
        ("==> ash\nCompiling 549 files (.ex)", "ash"),
        ("defmodule SpotterWeb.PageTest do\n  use Phoenix.ConnTest\n", "phoenix"),
        ("from fastapi import APIRouter\n\nrouter = APIRouter()", "fastapi"),
    ],
)
def test_a_declared_installed_or_imported_library_is_found(text, library):
    assert library in dependencies([text]).namespaces


def test_the_projects_own_namespaces_are_not_libraries():
    """What the conversation defines (``defmodule``) or holds as a folder of its paths is the project."""
    found = dependencies(
        [
            "defmodule SpotterWeb.PageTest do\n  alias Spotter.Repo\n  use SpotterWeb.ConnCase\nend",
            "from marshmallow import fields\n",
            "Editing src/marshmallow/fields.py and lib/spotter/repo.ex",
            '"version": "1.2.0", "created_at": "2024-01-02T10:00:00Z"',
        ]
    )
    assert not {"spotter_web", "spotter", "marshmallow", "created_at"} & found.namespaces


def test_a_library_name_is_qualified_and_aliases_resolve():
    """``Ecto.Adapters.SQL.Sandbox`` and, once aliased, ``Sandbox.start_owner`` are Ecto's; the package's bare
    name, a project module and a name merely spelled like an alias are not."""
    found = dependencies(["alias Ecto.Adapters.SQL.Sandbox\nuse Phoenix.LiveView\ndefmodule App.Live do end"])
    assert found.names("identifier", "Ecto.Adapters.SQL.Sandbox")
    assert found.names("identifier", "Sandbox.start_owner")
    assert not found.names("identifier", "sandbox.start_owner")
    assert not found.names("identifier", "Ecto")
    assert not found.names("identifier", "App.Live.mount")
    assert not found.names("path", "phoenix/live_view.ex")


#: The pattern of the paths :func:`_own_folders` reads before it tried matches only where a run of its characters starts.
_PATH_TRIED_EVERYWHERE = re.compile(r"[\w.@-]*(?:/[\w.@-]+)+")


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab_1é.@-/ \n:~", max_size=60))
def test_paths_are_the_matches_of_trying_every_character(text):
    """A path starts only where a run of its characters starts: the paths found are those of trying a match at
    every character (same places, same texts)."""
    assert [m.span() for m in _PATH.finditer(text)] == [m.span() for m in _PATH_TRIED_EVERYWHERE.finditer(text)]


def _found_scanning_everything(text: str) -> set[str]:
    """The libraries :func:`dependencies` finds, every pattern scanned over the whole text (as before it skipped
    the scans that could find nothing)."""
    found = {n for pattern in _MANIFEST for m in pattern.finditer(text) for n in _namespaces(m.group(1))}
    found.update(n for m in _INSTALLED.finditer(text) for n in _namespaces(m.group(1) or m.group(2)))
    imported = {snake(m.group(1)) for pattern in (_ELIXIR_IMPORT, _PYTHON_IMPORT) for m in pattern.finditer(text)}
    return found | (imported - {snake(m.group(1)) for m in _DEFMODULE.finditer(text)} - _own_folders(text))


_FRAGMENTS = [
    "import requests\n",
    "from marshmallow import fields\n",
    "use Phoenix.LiveView\n",
    "defmodule Phoenix.X do\n",
    "src/marshmallow/fields.py ",
    "lib/requests/api.py ",
    " deps/ecto/lib/x.ex ",
    "/usr/lib/python3/site-packages/httpx/_client.py\n",
    "==> ash\n",
    'serde = "1.0"\n',
    "plain words ",
    "\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=8))
def test_the_libraries_are_those_of_scanning_everything(fragments):
    """Skipping the install-folder scan of a text holding no install folder, and the project's own modules and folders
    when nothing is imported, finds the same libraries."""
    text = "".join(fragments)
    assert set(dependencies([text]).namespaces) == _found_scanning_everything(text)
