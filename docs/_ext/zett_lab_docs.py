"""Sphinx steps that make every generated fact on the site come from the code.

* The notebooks of ``notebooks/`` are copied into ``docs/notebooks/`` (generated, not committed) for
  myst-nb to execute; the kernels get no provider key, a scratch summary cache and output folder.
* ``<!-- zett_lab: NAME ARGUMENT -->`` markers in pages are replaced by generated Markdown before they
  are parsed: ``api`` (every name in ``zett_lab.__all__`` and the display modules, grouped by stage),
  ``columns MODULE.NAME`` (a column-documentation mapping as a table), ``metrics`` (the metric
  catalogue), ``validity`` (each headline metric's measured precision and recall, from the catalogue's data
  file) and ``cli`` (the help of every ``zett-lab`` command). An unknown marker fails the build.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import inspect
import io
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: Provider keys a notebook must not see while the site is built (its provider cell then skips itself).
PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY")
#: Stages in the order data flows through them (the API reference follows it).
STAGES = ("errors", "tokens", "load", "summarizers", "replay", "measure", "study", "report", "show")
#: Base modules: they have no stage package docstring of their own.
BASE_MODULES = ("errors", "tokens")
#: Display modules documented beside ``zett_lab.__all__`` (notebook users import them directly).
DISPLAY_MODULES = ("zett_lab.show.tables", "zett_lab.show.plots", "zett_lab.show.widgets")
#: Modules of the study stage the widgets use, documented in full (a script can use them the same way).
#: (``Session`` itself is documented where ``compare`` takes it.)
STUDY_MODULES = ("zett_lab.study.session\n   :exclude-members: Session", "zett_lab.study.production")
#: What a metric of one's own is written with (documented in full: the "Add a metric" page points here).
METRIC_DOCS = (
    ".. automodule:: zett_lab.measure.catalogue",
    ".. autoclass:: zett_lab.measure.attempt.Attempt\n   :members:",
)
#: The recommendation's parts and the alerts, documented in full (``recommend``, ``Recommendation``, ``pareto_front`` and
#: ``Constraint`` are documented where the public names and the types of their signatures are).
CHOICE_MODULES = (
    "zett_lab.study.choose\n   :exclude-members: pareto_front, Constraint",
    "zett_lab.study.recommendation\n   :exclude-members: recommend, Recommendation",
    "zett_lab.study.ranking\n   :members: Ranked, Alternative, HeldOut",
    "zett_lab.study.alerts",
)

_MARKER = re.compile(r"<!--\s*zett_lab:\s*(?P<name>[a-z]+)(?:\s+(?P<argument>[\w.]+))?\s*-->")


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("config-inited", _prepare)
    app.connect("env-get-outdated", _generated_pages)
    app.connect("source-read", _expand)
    app.connect("autodoc-process-docstring", _literal_bars)
    app.connect("autodoc-process-signature", _qualify_type_checking_names)
    app.connect("missing-reference", _resolve_alias)
    app.connect("build-finished", _clean)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# --- notebooks ------------------------------------------------------------------------------------


def _prepare(app: Sphinx, config) -> None:
    """Copy the notebooks in (only changed ones, so unchanged pages stay cached); set up the kernels' environment."""
    target = Path(app.srcdir) / "notebooks"
    target.mkdir(exist_ok=True)
    wanted = {path.name for path in NOTEBOOKS.glob("*.ipynb")}
    for stale in target.glob("*.ipynb"):
        if stale.name not in wanted:
            stale.unlink()
    for name in sorted(wanted):
        source, copy = NOTEBOOKS / name, target / name
        if not copy.exists() or copy.read_bytes() != source.read_bytes():
            shutil.copyfile(source, copy)
    scratch = Path(tempfile.mkdtemp(prefix="zett-lab-docs-"))
    app.zett_lab_scratch = scratch  # type: ignore[attr-defined]
    for name in PROVIDER_KEYS:
        os.environ.pop(name, None)
    os.environ.update(
        {
            "ZETT_LAB_FIXTURES": str(ROOT / "fixtures"),  # the notebooks read ../fixtures, beside them in a demo folder
            "ZETT_LAB_OUT": str(scratch / "out"),
            "ZETT_LAB_CACHE": str(scratch / "summaries.sqlite"),
            "PYTHONWARNINGS": "ignore",
            "MPLBACKEND": "agg",
        }
    )


def _clean(app: Sphinx, exception: BaseException | None) -> None:
    scratch = getattr(app, "zett_lab_scratch", None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


# --- generated sections ---------------------------------------------------------------------------


def _generated_pages(app: Sphinx, env, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """Pages with markers are read again on every build: what they show comes from the code."""
    pages = []
    for docname in env.found_docs:
        path = Path(env.doc2path(docname))
        if path.suffix == ".md" and _MARKER.search(path.read_text(encoding="utf-8")):
            pages.append(docname)
    return pages


def _expand(app: Sphinx, docname: str, source: list[str]) -> None:
    def replace(match: re.Match[str]) -> str:
        name, argument = match["name"], match["argument"]
        if name == "api" and not argument:
            return api_reference()
        if name == "columns" and argument:
            return columns_table(argument)
        if name == "cli" and not argument:
            return cli_reference()
        if name == "metrics" and not argument:
            return metrics_table()
        if name == "validity" and not argument:
            return validity_table()
        raise ExtensionError(f"{docname}: unknown marker {match[0]!r}")

    source[0] = _MARKER.sub(replace, source[0])


#: Every documented object by ``id``, with the name it is documented under (references by any other path resolve to it).
DOCUMENTED: dict[int, str] = {}


def api_reference() -> str:
    """autodoc directives for every public name, grouped by the stage that defines it, stages in flow order.

    Public names are documented as ``zett_lab.NAME``, the way users import them; the zett_lab classes
    their signatures return or take are documented under their own path, so every type a user meets
    has an entry.
    """
    import zett_lab

    groups: dict[str, list[str]] = {}
    public = {}
    for name in zett_lab.__all__:
        value = getattr(zett_lab, name)
        module = getattr(value, "__module__", None)
        if callable(value) and isinstance(module, str) and module.startswith("zett_lab."):
            kind = "autoclass" if inspect.isclass(value) else "autofunction"
        else:
            module, kind = _defining_module(name), "autodata"
        groups.setdefault(_stage(module, name), []).append(f".. {kind}:: zett_lab.{name}")
        DOCUMENTED[id(value)] = f"zett_lab.{name}"
        public[name] = value
    for value in _signature_types(public.values()):
        if id(value) not in DOCUMENTED:
            path = f"{value.__module__}.{value.__qualname__}"
            groups.setdefault(_stage(value.__module__, path), []).append(f".. autoclass:: {path}")
            DOCUMENTED[id(value)] = path
    parts = []
    for stage in sorted(groups, key=STAGES.index):
        parts.append(f"## `zett_lab.{stage}`\n")
        # the stage's own docstring; not indexed where a public function has the same name (zett_lab.replay)
        index = "\n   :no-index:" if hasattr(zett_lab, stage) and not inspect.ismodule(getattr(zett_lab, stage)) else ""
        head = [f".. automodule:: zett_lab.{stage}\n   :no-members:{index}"] if stage not in BASE_MODULES else []
        parts.append(_rst("\n\n".join([*head, *sorted(groups[stage], key=_short_name)])))
    parts.append("## Metrics: the catalogue, and what a metric reads\n")
    parts.append(_rst("\n\n".join(METRIC_DOCS)))
    parts.append("## Recommendations and alerts\n")
    parts.append(_rst("\n\n".join(f".. automodule:: {module}" for module in CHOICE_MODULES)))
    parts.append("## Sessions and production summaries\n")
    parts.append(_rst("\n\n".join(f".. automodule:: {module}" for module in STUDY_MODULES)))
    parts.append("## Display: tables, plots and widgets\n")
    parts.append(_rst("\n\n".join(f".. automodule:: {module}" for module in DISPLAY_MODULES)))
    return "\n".join(parts)


def _rst(text: str) -> str:
    """A block of reStructuredText inside a MyST page (autodoc writes reST)."""
    return f"```{{eval-rst}}\n{text}\n```\n"


def _short_name(directive: str) -> str:
    return directive.rsplit(".", 1)[1].lower()


def _signature_types(values: Iterable[object]) -> list[type]:
    """zett_lab classes in the signatures of these functions and of these classes' public methods."""
    import typing

    found: dict[int, type] = {}
    callables: list[object] = []
    for value in values:
        if inspect.isclass(value):
            callables += [
                member for name, member in vars(value).items() if callable(member) and not name.startswith("_")
            ]
            callables.append(value.__init__)
        elif callable(value):
            callables.append(value)
    for function in callables:
        try:
            hints = typing.get_type_hints(function)
        except Exception:  # noqa: BLE001 - an annotation that only resolves for a type checker
            continue
        for hint in hints.values():
            for candidate in _flatten(hint):
                if (
                    inspect.isclass(candidate)
                    and candidate.__module__.startswith("zett_lab.")
                    and not candidate.__name__.startswith("_")
                ):
                    found[id(candidate)] = candidate
    return sorted(found.values(), key=lambda cls: (cls.__module__, cls.__qualname__))


def _flatten(hint: object) -> Iterator[object]:
    import typing

    yield hint
    for argument in typing.get_args(hint):
        yield from _flatten(argument)


def _literal_bars(app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]) -> None:
    """zett_lab docstrings write sizes as ``|N_k|``; in reStructuredText a bar pair would be a substitution."""
    if name.startswith("zett_lab"):
        lines[:] = [line.replace("|", "\\|") for line in lines]


def _qualify_type_checking_names(
    app: Sphinx, what: str, name: str, obj: object, options: object, signature: str | None, annotation: str | None
) -> tuple[str | None, str | None] | None:
    """Names a module imports only for type checkers reach autodoc unresolved; write them with their module."""
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    names = (
        type_checking_imports(module.__name__) if module is not None and module.__name__.startswith("zett_lab") else {}
    )
    if not names:
        return None
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")(?![\w])")
    return tuple(pattern.sub(lambda m: names[m[1]], text) if text else text for text in (signature, annotation))  # type: ignore[return-value]


@functools.cache
def type_checking_imports(module_name: str) -> dict[str, str]:
    """``{name: module.name}`` for the ``from ... import name`` lines under ``if TYPE_CHECKING:`` in a module."""
    module = sys.modules[module_name]
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return {}
    package = module.__package__ or module_name.rpartition(".")[0]
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                if isinstance(child, ast.ImportFrom) and child.module is not None:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)] if child.level else []
                    source = ".".join([*base, child.module]) if child.level else child.module
                    found.update({alias.asname or alias.name: f"{source}.{alias.name}" for alias in child.names})
    return found


def _resolve_alias(app: Sphinx, env, node, contnode):
    """References to zett_lab names that exist: to the entry of the object when it is documented under
    another path (``zett_lab.replay.run.replay``), else plain text. A name that does not exist stays a
    broken reference and fails the build."""
    target = str(node.get("reftarget", ""))
    if node.get("refdomain") != "py" or not target.startswith("zett_lab"):
        return None
    found = list(_objects_at(target))
    for value in found:
        documented = DOCUMENTED.get(id(value))
        if documented is not None and documented != target:
            return env.get_domain("py").resolve_xref(
                env, node["refdoc"], app.builder, "obj", documented, node, contnode
            )
    return contnode if found else None


def _objects_at(path: str) -> Iterator[object]:
    """Every object a dotted path can name: after importing its longest module prefix, then shorter ones."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute, None)
            if value is None:
                break
        else:
            yield value


def _stage(module: str, name: str) -> str:
    stage = module.split(".")[1] if module.count(".") else ""
    if stage not in STAGES:
        raise ExtensionError(f"zett_lab.{name} is defined in {module}, which is in no known stage {STAGES}")
    return stage


def _defining_module(name: str) -> str:
    """The zett_lab module whose source assigns a public constant."""
    import zett_lab

    value = getattr(zett_lab, name)
    for module_name, module in sorted(sys.modules.items()):
        if not module_name.startswith("zett_lab.") or getattr(module, name, None) is not value or module is None:
            continue
        with contextlib.suppress(OSError, TypeError):
            if re.search(rf"^{name}\s*(:[^=]*)?=", inspect.getsource(module), re.M):
                return module_name
    raise ExtensionError(f"zett_lab.{name}: cannot find the module that defines it")


def columns_table(dotted: str) -> str:
    """A ``{column: meaning}`` mapping of the code as a Markdown table."""
    module_name, _, attribute = dotted.rpartition(".")
    try:
        columns = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ExtensionError(f"columns {dotted}: {error}") from error
    if not isinstance(columns, Mapping) or not columns:
        raise ExtensionError(f"columns {dotted}: expected a non-empty mapping of column name to meaning")
    rows = ["| column | meaning |", "|---|---|"]
    rows += [f"| `{name}` | {_escape(text)} |" for name, text in columns.items()]
    return "\n".join(rows) + "\n"


def metrics_table() -> str:
    """The metric catalogue (one entry per metric: name, label, which way is better, where it appears, definition)."""
    from zett_lab.measure.catalogue import METRICS

    rows = ["| metric | label | better | appears per | definition |", "|---|---|---|---|---|"]
    rows += [
        f"| `{m.name}` | {_escape(m.label)} | {m.direction} | {', '.join(m.levels)} | {_escape(m.definition)} |"
        for m in METRICS
    ]
    return "\n".join(rows) + "\n"


def validity_table() -> str:
    """How far to trust each headline metric (and any other with a measurement): precision and recall with their
    95% intervals and what they were measured on, "exact" (counted from the replay), or "not validated"."""
    from zett_lab.measure.catalogue import trust, trusted_metrics

    rows = ["| metric | precision [95% CI] (n) | recall [95% CI] (n) | measured on |", "|---|---|---|---|"]
    for m in trusted_metrics():
        validity = m.validity
        if validity is None:
            rows.append(f"| {_escape(m.label)} (`{m.name}`) | {trust(m.name)} | | |")  # exact or not validated
            continue
        shares = [e.text() if e is not None else "not measured" for e in (validity.precision, validity.recall)]
        rows.append(f"| {_escape(m.label)} (`{m.name}`) | {' | '.join(shares)} | {_escape(validity.source)} |")
    return "\n".join(rows) + "\n"


def _escape(text: str) -> str:
    """Table-cell text: pipes escaped, Markdown emphasis characters kept literal."""
    return re.sub(r"([|*_\\`])", r"\\\1", " ".join(str(text).split()))


def cli_reference() -> str:
    """``zett-lab --help`` and every command's ``--help``, as the command line prints them."""
    from zett_lab.show import cli

    parts = []
    for arguments in ([], *([name] for name in cli.COMMANDS)):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
            cli.build_parser().parse_args([*arguments, "--help"])
        title = " ".join(["zett-lab", *arguments])
        parts.append(f"## `{title}`\n\n```text\n{buffer.getvalue().rstrip()}\n```\n")
    return "\n".join(parts)
