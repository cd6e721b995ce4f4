"""The package's shape as issue 31, item 6 measures it (ast over ``zett_lab/``, nothing imported or run).

Prints the modules over 600 lines, the functions over 60 lines of code without a reason ("Long on
purpose:" in their docstring), and the share of public signatures whose annotations mention ``Any``, per
stage folder and overall, with the offenders. ``python bench/shape.py [PACKAGE_DIR]``.

Definitions: a module's lines are its physical lines; a function's lines of code are its non-blank,
non-comment lines from ``def`` to its end, its docstring left out. A public signature is a function or
method (``__init__`` and ``__call__`` included, other dunders and ``_private`` names not) defined at the
top of a public module or in a public class there, its parameters' and return annotations together;
it mentions ``Any`` when any of them names ``Any`` (``typing.Any`` or ``Any``, also inside a string).
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MODULE_LINES = 600
FUNCTION_LINES = 60
REASON = "Long on purpose:"
#: Dunders whose signatures a caller writes against.
PUBLIC_DUNDERS = {"__init__", "__call__"}

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Signature:
    """One public signature: where it is, and whether its annotations mention Any."""

    module: str
    name: str
    line: int
    mentions_any: bool


@dataclass(frozen=True)
class LongFunction:
    module: str
    name: str
    line: int
    code_lines: int


@dataclass(frozen=True)
class Shape:
    """What the script prints, as data (the test reads it)."""

    long_modules: list[tuple[str, int]]
    long_functions: list[LongFunction]
    signatures: list[Signature]


def _is_public(name: str) -> bool:
    return not name.startswith("_") or name in PUBLIC_DUNDERS


def _module_is_public(relative: Path) -> bool:
    return all(not part.startswith("_") or part == "__init__.py" for part in relative.parts)


def _names_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                continue
            if _names_any(inner):
                return True
    return False


def _mentions_any(function: Function) -> bool:
    arguments = function.args
    parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    parameters += [p for p in (arguments.vararg, arguments.kwarg) if p is not None]
    return any(_names_any(p.annotation) for p in parameters) or _names_any(function.returns)


def _code_lines(function: Function, comment_lines: set[int]) -> int:
    """Non-blank, non-comment lines of the function (its decorators not, its docstring left out)."""
    body = function.body
    docstring: set[int] = set()
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        docstring = set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = range(function.lineno, (function.end_lineno or function.lineno) + 1)
    return sum(1 for n in lines if n not in docstring and n not in comment_lines)


def _blank_or_comment_lines(source: str) -> set[int]:
    """Line numbers holding nothing but whitespace or a comment."""
    code: set[int] = set()
    ignored = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in ignored and token.type != tokenize.ENDMARKER:
            code.update(range(token.start[0], token.end[0] + 1))
    return set(range(1, source.count("\n") + 2)) - code


def _public_functions(tree: ast.Module) -> Iterator[tuple[str, Function]]:
    """Top-level public functions and the public methods of public classes (nested classes too)."""
    stack: list[tuple[str, list[ast.stmt]]] = [("", tree.body)]
    while stack:
        prefix, body = stack.pop()
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_public(node.name):
                yield prefix + node.name, node
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                stack.append((f"{prefix}{node.name}.", node.body))


def _all_functions(tree: ast.Module) -> Iterator[tuple[str, Function]]:
    """Every function, nested ones too, named by where it sits."""
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, parent = stack.pop()
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield prefix + node.name, node
                stack.append((f"{prefix}{node.name}.", node))
            elif isinstance(node, ast.ClassDef):
                stack.append((f"{prefix}{node.name}.", node))
            else:
                stack.append((prefix, node))


def measure(package: Path) -> Shape:
    """The shape of every module under ``package``."""
    long_modules: list[tuple[str, int]] = []
    long_functions: list[LongFunction] = []
    signatures: list[Signature] = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        module = relative.as_posix()
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, filename=str(path))
        lines = len(source.splitlines())
        if lines > MODULE_LINES:
            long_modules.append((module, lines))
        ignored = _blank_or_comment_lines(source)
        for name, function in _all_functions(tree):
            count = _code_lines(function, ignored)
            if count > FUNCTION_LINES and REASON not in (ast.get_docstring(function) or ""):
                long_functions.append(LongFunction(module, name, function.lineno, count))
        if _module_is_public(path.relative_to(package)):
            for name, function in _public_functions(tree):
                signatures.append(Signature(module, name, function.lineno, _mentions_any(function)))
    return Shape(long_modules, long_functions, signatures)


def stage_of(module: str) -> str:
    """The stage folder a module (``zett_lab/measure/x.py``) sits in; "base" for the package's own files."""
    parts = module.split("/")
    return parts[1] if len(parts) > 2 else "base"


def _share(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,} ({part / whole:.1%})" if whole else "0 of 0"


def report(shape: Shape) -> str:
    """The shape as the text the script prints."""
    out = [f"Modules over {MODULE_LINES} lines: {len(shape.long_modules)}"]
    out += [f"  {module}: {lines:,}" for module, lines in shape.long_modules]
    out.append(f"Functions over {FUNCTION_LINES} lines of code without {REASON!r}: {len(shape.long_functions)}")
    out += [f"  {f.module}:{f.line} {f.name}: {f.code_lines}" for f in shape.long_functions]
    out.append("Public signatures mentioning Any:")
    stages = sorted({stage_of(s.module) for s in shape.signatures})
    for stage in stages:
        in_stage = [s for s in shape.signatures if stage_of(s.module) == stage]
        out.append(f"  {stage}: {_share(sum(s.mentions_any for s in in_stage), len(in_stage))}")
    out.append(f"  overall: {_share(sum(s.mentions_any for s in shape.signatures), len(shape.signatures))}")
    out += [f"  {s.module}:{s.line} {s.name}" for s in shape.signatures if s.mentions_any]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    package = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "zett_lab"
    if not package.is_dir():
        print(f"shape: {package} is not a folder", file=sys.stderr)
        return 2
    print(report(measure(package)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
