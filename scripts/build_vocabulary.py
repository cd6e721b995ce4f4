"""Rebuild ``zett_lab/data/vocabulary.json.gz``: the vocabulary "needed later" does not count.

Every name comes from a real source, read on this machine (no hand-typed lists of names):

* Python: ``keyword``, ``builtins``, ``sys.stdlib_module_names`` and the public names of every
  standard library module that imports cleanly (the members of their public classes included),
  from the interpreter running this script; the public module-level names and class members of
  common frameworks' wheels (``--wheels DIR``: Django, Flask, FastAPI, requests, SQLAlchemy,
  pydantic from PyPI), read with ``ast`` (never imported).
* Scientific Python: the public names of NumPy, pandas and SciPy and of their public submodules (members
  of their public classes included), imported from the environment running this script
  (:data:`SCIENTIFIC`). ``--scientific-only`` puts just this section into an existing vocabulary file
  (the other sources need the downloads below).
* JavaScript / TypeScript: the keywords of the TypeScript scanner and every name declared in the
  ``.d.ts`` files of ``--npm DIR``'s ``node_modules`` for the packages in :data:`JS_VOCABULARY`
  (TypeScript's ``lib.*.d.ts``: the language and the DOM; Node's, Express's, React's, jQuery's,
  lodash's and Jest's types; highlight.js and the Phoenix / LiveView clients), parsed with the
  TypeScript compiler API under ``node``.
* Elixir and Erlang/OTP: every module of Elixir's applications and its public functions, macros
  and types, and the names of the Erlang modules, from ``elixir`` (Debian package ``elixir``).
* Document frequency over a background corpus of independent projects' code: every Python
  distribution installed beside this script (``--site-packages``) and every package of
  ``--npm DIR``'s ``node_modules``, one project each, up to :data:`PROJECT_BYTES` of text files
  per project, anchors found with zett_lab's own extraction. Only counts are kept (no text), and
  only of items in at least two projects.

Usage (what made the shipped file; see docs/how-to/loss-metrics.md)::

    npm pack / npm install --prefix NPM_DIR <JS_VOCABULARY + BACKGROUND_NPM packages>
    pip download --no-deps -d WHEELS django flask fastapi requests sqlalchemy pydantic
    apt-get install elixir
    .venv/bin/python scripts/build_vocabulary.py --npm NPM_DIR --wheels WHEELS
    .venv/bin/python scripts/build_vocabulary.py --scientific-only    # NumPy, pandas, SciPy as installed
"""

from __future__ import annotations

import argparse
import ast
import builtins
import gzip
import importlib
import importlib.metadata
import inspect
import json
import keyword
import pkgutil
import platform
import subprocess
import sys
import tempfile
import warnings
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from zett_lab.load.anchor_forms import components
from zett_lab.load.anchors import anchors_in_text
from zett_lab.load.vocabulary import VOCABULARY_PATH

#: npm packages whose declared names are vocabulary (a language runtime or a common framework).
JS_VOCABULARY = (
    "typescript",
    "@types/node",
    "@types/express",
    "@types/react",
    "@types/jquery",
    "@types/lodash",
    "@types/jest",
    "highlight.js",
    "phoenix",
    "phoenix_live_view",
)
#: Python packages of scientific computing whose public names are vocabulary (imported as installed).
SCIENTIFIC = ("numpy", "pandas", "scipy")
#: Standard library modules not imported: importing them opens a browser, prints, or needs a display.
SKIPPED_MODULES = frozenset({"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__"})
#: Text of one project read for document frequency (the rest of a large project adds little).
PROJECT_BYTES = 300_000
TEXT_SUFFIXES = frozenset(
    ".py .pyi .js .mjs .cjs .ts .tsx .jsx .json .md .rst .txt .toml .cfg .ini .yaml .yml .html .css .ex .exs".split()
)

_TS_NAMES = r"""
const path = require('path');
const ts = require(path.join(process.argv[2], 'typescript'));
const names = new Set();
for (let k = ts.SyntaxKind.FirstKeyword; k <= ts.SyntaxKind.LastKeyword; k++) names.add(ts.tokenToString(k));
function visit(node) {
  if (node.name && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name))) names.add(node.name.text);
  ts.forEachChild(node, visit);
}
for (const file of process.argv.slice(3)) {
  const text = require('fs').readFileSync(file, 'utf8');
  visit(ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false));
}
process.stdout.write(JSON.stringify([...names]));
"""

_ELIXIR_NAMES = r"""
apps = [:elixir, :ex_unit, :mix, :logger, :eex, :iex]
names =
  for app <- apps, Application.load(app) in [:ok, {:error, {:already_loaded, app}}],
      {:ok, mods} = :application.get_key(app, :modules), mod <- mods, reduce: MapSet.new() do
    acc ->
      acc = MapSet.put(acc, inspect(mod))
      info = try do mod.__info__(:functions) ++ mod.__info__(:macros) rescue _ -> [] end
      types = case Code.Typespec.fetch_types(mod) do
        {:ok, ts} -> for {_, {name, _, args}} <- ts, do: {name, length(args)}
        _ -> []
      end
      Enum.reduce(info ++ types, acc, fn {name, _}, acc -> MapSet.put(acc, Atom.to_string(name)) end)
  end
erlang = for {name, _, _} <- :code.all_available(), do: to_string(name)
IO.puts(Enum.join(MapSet.to_list(names) ++ erlang, "\n"))
"""


def lowered_components(names: Iterable[str]) -> set[str]:
    """Each name's dotted components, lower-cased (what :func:`~zett_lab.load.vocabulary.is_generic` compares)."""
    out: set[str] = set()
    for name in names:
        out.update(part.lower() for part in components("identifier", name.strip()))
    return {part for part in out if part}


def python_names() -> set[str]:
    names = set(keyword.kwlist) | set(getattr(keyword, "softkwlist", ())) | set(dir(builtins))
    for value in vars(builtins).values():
        if inspect.isclass(value):
            names.update(dir(value))
    for module_name in sorted(sys.stdlib_module_names):
        names.add(module_name)
        if module_name.startswith("_") or module_name.split(".")[0] in SKIPPED_MODULES:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(module_name)
        except Exception:  # noqa: BLE001  (a module this platform lacks: its name is all we keep)
            continue
        public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
        for name in public:
            names.add(str(name))
            value = getattr(module, str(name), None)
            if inspect.isclass(value):
                names.update(n for n in dir(value) if not n.startswith("_") or n.endswith("__"))
            elif inspect.ismodule(value):  # os.path
                names.update(n for n in dir(value) if not n.startswith("_"))
    return names


def public_names(module: object) -> set[str]:
    """A module's public names (``__all__``, else what ``dir`` lists without a leading underscore), and the public
    members of its public classes and modules."""
    names: set[str] = set()
    public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    for name in public:
        names.add(str(name))
        value = getattr(module, str(name), None)
        if inspect.isclass(value) or inspect.ismodule(value):
            names.update(n for n in dir(value) if not n.startswith("_"))
    return names


def scientific_names() -> tuple[set[str], list[str]]:
    """Public names of :data:`SCIENTIFIC` and of their public submodules (no ``_`` component, no tests)."""
    names: set[str] = set()
    read = []
    for package_name in SCIENTIFIC:
        package = importlib.import_module(package_name)
        read.append(f"{package_name}=={importlib.metadata.version(package_name)}")
        names.update(public_names(package))
        for found in pkgutil.walk_packages(package.__path__, f"{package_name}."):
            parts = found.name.split(".")
            if any(p.startswith("_") or "test" in p or p == "conftest" for p in parts):
                continue
            names.update(parts)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    names.update(public_names(importlib.import_module(found.name)))
            except Exception:  # noqa: BLE001  (an optional dependency missing: its module name is all we keep)
                continue
    return names, read


def wheel_names(wheels: Path) -> tuple[set[str], list[str]]:
    """Public module-level names and class members of every ``.py`` file in the wheels (ast, not imported)."""
    names: set[str] = set()
    read = []
    for wheel in sorted(wheels.glob("*.whl")):
        read.append(wheel.name)
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if not member.endswith(".py") or "/tests/" in member or "/_" in member.replace("/__init__", ""):
                    continue
                try:
                    tree = ast.parse(archive.read(member))
                except SyntaxError:
                    continue
                names.update(p for p in Path(member).with_suffix("").parts if p != "__init__")
                for node in tree.body:
                    names.update(_public_defined(node))
    return names, read


def _public_defined(node: ast.stmt) -> Iterator[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
        yield node.name
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                yield from _public_defined(item)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        yield from (t.id for t in targets if isinstance(t, ast.Name) and not t.id.startswith("_"))


def js_names(node_modules: Path) -> tuple[set[str], list[str]]:
    files: list[str] = []
    read = []
    for package in JS_VOCABULARY:
        root = node_modules / package
        if not root.is_dir():
            raise SystemExit(f"{root}: missing; npm install it first (see this script's docstring)")
        read.append(f"{package}@{json.loads((root / 'package.json').read_text())['version']}")
        found = sorted(root.rglob("*.d.ts"))
        if package == "typescript":
            found = sorted((root / "lib").glob("lib*.d.ts"))
        if not found:  # a package without types: its sources' names
            found = sorted(p for p in root.rglob("*.js") if "test" not in p.parts and ".min." not in p.name)[:50]
        files.extend(str(p) for p in found)
    with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as script:
        script.write(_TS_NAMES)
    output = subprocess.run(
        ["node", script.name, str(node_modules), *files], capture_output=True, text=True, check=True
    ).stdout
    Path(script.name).unlink()
    return set(json.loads(output)), read


def elixir_names() -> tuple[set[str], str]:
    version = subprocess.run(["elixir", "--short-version"], capture_output=True, text=True, check=True).stdout
    output = subprocess.run(["elixir", "-e", _ELIXIR_NAMES], capture_output=True, text=True, check=True).stdout
    return {line.strip() for line in output.splitlines() if line.strip()}, version.strip()


def _project_texts(files: Iterable[Path], root: Path) -> tuple[list[str], list[str]]:
    """Up to PROJECT_BYTES of a project's text files (in path order), and their paths relative to ``root``."""
    texts, paths, size = [], [], 0
    for path in sorted(files):
        relative = path.relative_to(root).as_posix()
        paths.append(relative)
        if path.suffix not in TEXT_SUFFIXES or size >= PROJECT_BYTES or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="ignore")[: PROJECT_BYTES - size]
        size += len(text)
        texts.append(text)
    return texts, paths


def python_projects(site_packages: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    for dist in sorted(importlib.metadata.distributions(path=[str(site_packages)]), key=lambda d: d.metadata["Name"]):
        files = [Path(str(dist.locate_file(f))) for f in dist.files or () if ".dist-info" not in str(f)]
        files = [f for f in files if site_packages in f.parents and "__pycache__" not in f.parts]
        if files:
            yield f"{dist.metadata['Name']}=={dist.version}", *_project_texts(files, site_packages)


def npm_projects(node_modules: Path) -> Iterator[tuple[str, list[str], list[str]]]:
    roots = [p for p in node_modules.iterdir() if p.is_dir() and not p.name.startswith(".")]
    packages = sorted(q for p in roots for q in ([*p.iterdir()] if p.name.startswith("@") else [p]) if q.is_dir())
    for root in packages:
        manifest = root / "package.json"
        if not manifest.is_file():
            continue
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version", "")
        files = [p for p in root.rglob("*") if "node_modules" not in p.relative_to(root).parts and p.is_file()]
        yield f"{root.relative_to(node_modules).as_posix()}@{version}", *_project_texts(files, root)


def project_items(texts: list[str], paths: list[str]) -> set[str]:
    """The ``kind:value`` items of one project (see :class:`~zett_lab.load.vocabulary.Vocabulary`)."""
    items = {"p:" + _lowered_path(p) for p in paths}
    items.update("p:" + _lowered_path(p) for p in {Path(p).name for p in paths})
    for text in texts:
        for anchor in anchors_in_text(text, role="none"):
            if anchor.type == "identifier":
                items.update("c:" + part.lower() for part in components("identifier", anchor.normalized))
            elif anchor.type == "path":
                items.add("p:" + _lowered_path(anchor.normalized))
            elif anchor.type == "url":
                items.add("u:" + anchor.normalized.lower())
            elif anchor.type == "number":
                items.add("n:" + anchor.normalized)
    return items


def _lowered_path(path: str) -> str:
    return "/".join(components("path", path)).lower()


SCIENTIFIC_SOURCE = "python_scientific"


def scientific_section() -> tuple[list[str], dict[str, str]]:
    names, read = scientific_names()
    return sorted(lowered_components(names)), {
        "name": SCIENTIFIC_SOURCE,
        "what": "public names of these packages and their public submodules (imported)",
        "version": " ".join(read),
    }


def write_vocabulary(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as handle:
        handle.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--npm", type=Path, help="folder an npm install put node_modules in")
    parser.add_argument("--wheels", type=Path, help="folder of framework wheels (pip download)")
    parser.add_argument("--site-packages", type=Path, default=Path(sys.prefix).glob("lib/python3*/site-packages"))
    parser.add_argument("--out", type=Path, default=VOCABULARY_PATH)
    parser.add_argument(
        "--scientific-only",
        action="store_true",
        help="only (re)build the scientific Python section of the existing vocabulary file --out",
    )
    args = parser.parse_args()
    if args.scientific_only:
        with gzip.open(args.out, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
        names, source = scientific_section()
        data["language"][SCIENTIFIC_SOURCE] = names
        data["sources"] = [s for s in data["sources"] if s["name"] != SCIENTIFIC_SOURCE] + [source]
        write_vocabulary(args.out, data)
        print(f"{args.out}: {len(names)} scientific Python names ({source['version']})", file=sys.stderr)
        return
    if args.npm is None or args.wheels is None:
        parser.error("--npm and --wheels are needed for a whole build (or --scientific-only)")
    site_packages = args.site_packages if isinstance(args.site_packages, Path) else next(iter(args.site_packages))
    node_modules = args.npm / "node_modules"

    framework, wheels_read = wheel_names(args.wheels)
    javascript, js_read = js_names(node_modules)
    elixir, elixir_version = elixir_names()
    scientific, scientific_source = scientific_section()
    language = {
        "python": sorted(lowered_components(python_names())),
        "python_frameworks": sorted(lowered_components(framework)),
        SCIENTIFIC_SOURCE: scientific,
        "javascript": sorted(lowered_components(javascript)),
        "elixir": sorted(lowered_components(elixir)),
    }
    frequency: Counter[str] = Counter()
    projects = []
    for name, texts, paths in [*python_projects(site_packages), *npm_projects(node_modules)]:
        projects.append(name)
        frequency.update(project_items(texts, paths))
        print(f"{len(projects):4d} {name}", file=sys.stderr)
    data = {
        "about": "Vocabulary 'needed later' does not count; built by scripts/build_vocabulary.py (names and counts "
        "only, no text of any source).",
        "sources": [
            {
                "name": "python",
                "what": "keyword, builtins, sys.stdlib_module_names and public names of the standard library",
                "version": platform.python_version(),
            },
            {
                "name": "python_frameworks",
                "what": "public names of these wheels (ast)",
                "version": " ".join(wheels_read),
            },
            scientific_source,
            {
                "name": "javascript",
                "what": "TypeScript scanner keywords and names declared in these packages' .d.ts",
                "version": " ".join(js_read),
            },
            {
                "name": "elixir",
                "what": "modules, public functions, macros and types of Elixir's applications; Erlang module names",
                "version": elixir_version,
            },
            {
                "name": "background",
                "what": f"document frequency over {len(projects)} projects (installed Python "
                "distributions and npm packages)",
                "version": " ".join(projects),
            },
        ],
        "language": language,
        "document_frequency": {
            "projects": len(projects),
            "counts": dict(sorted((k, v) for k, v in frequency.items() if v >= 2)),
        },
    }
    write_vocabulary(args.out, data)
    print(
        f"{args.out}: {sum(map(len, language.values()))} language names, {len(data['document_frequency']['counts'])} "
        f"items over {len(projects)} projects",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
