"""bench/shape.py counts what issue 31, item 6 measures, on a tiny synthetic package written here."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))

import shape  # noqa: E402


def _write(root: Path, relative: str, source: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")


def _long_function(name: str, code_lines: int, docstring: str) -> str:
    """A function of exactly ``code_lines`` code lines (the ``def`` line included), with blanks and comments."""
    body = "".join(f"    x{i} = {i}\n\n    # a comment\n" for i in range(code_lines - 2))
    return f'def {name}():\n    """{docstring}\n\n    More words.\n    """\n{body}    return 0\n'


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    _write(package, "__init__.py", "")
    _write(
        package,
        "base.py",
        """
        from typing import Any
        import typing

        def loose(x: Any) -> int: ...
        def typed(x: int) -> str: ...
        def returns_any() -> "dict[str, Any]": ...
        def qualified(*args: typing.Any) -> None: ...
        def keywords(**options: Any) -> None: ...
        def _private(x: Any) -> Any: ...

        class Public:
            def __init__(self, x: Any) -> None: ...
            def __repr__(self) -> Any: ...
            def method(self) -> int:
                def inner(y: Any) -> Any: ...
                return 0
            class Nested:
                def deep(self) -> list[Any]: ...

        class _Hidden:
            def method(self, x: Any) -> None: ...
        """,
    )
    _write(package, "stage/__init__.py", "")
    _write(package, "stage/plain.py", "def one(a: int) -> int: ...\ndef two(a: object) -> None: ...\n")
    _write(package, "stage/_private.py", "from typing import Any\ndef hidden(a: Any) -> None: ...\n")
    _write(package, "stage/long.py", "x = 1\n" * 601)
    _write(package, "stage/short.py", "x = 1\n" * 600)
    _write(
        package,
        "stage/functions.py",
        _long_function("over", 61, "Too long.")
        + _long_function("at_limit", 60, "Just fits.")
        + _long_function("excused", 70, "Long on purpose: one table."),
    )
    return package


def test_counts_public_signatures_mentioning_any_per_stage(tmp_path):
    measured = shape.measure(_package(tmp_path))
    by_name = {s.name: s.mentions_any for s in measured.signatures}
    assert by_name == {
        "loose": True,
        "typed": False,
        "returns_any": True,
        "qualified": True,
        "keywords": True,
        "Public.__init__": True,
        "Public.method": False,
        "Public.Nested.deep": True,
        "one": False,
        "two": False,
        "over": False,
        "at_limit": False,
        "excused": False,
    }
    text = shape.report(measured)
    assert "  base: 6 of 8 (75.0%)" in text
    assert "  stage: 0 of 5 (0.0%)" in text
    assert "  overall: 6 of 13 (46.2%)" in text
    assert "pkg/base.py:5 loose" in text and "hidden" not in text


def test_lists_long_modules_and_unexcused_long_functions(tmp_path):
    measured = shape.measure(_package(tmp_path))
    assert measured.long_modules == [("pkg/stage/long.py", 601)]
    assert [(f.name, f.code_lines) for f in measured.long_functions] == [("over", 61)]


def test_a_missing_folder_fails_naming_it(tmp_path, capsys):
    assert shape.main([str(tmp_path / "nowhere")]) == 2
    assert "nowhere is not a folder" in capsys.readouterr().err
