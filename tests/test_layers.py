"""The package layout: one folder per stage, each importing only the stages before it, no cycles.

Every ``import`` in ``zett_lab`` counts, also those inside functions; imports under ``if TYPE_CHECKING:``
(annotations, never run) are left out of the stages' order, not of the cycles: a circle of annotations is
still a circle a reader walks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "zett_lab"

#: The stages in data-flow order; the shared base modules sit below all of them.
STAGES = ["base", "load", "summarizers", "replay", "measure", "study", "report", "show"]
BASE_MODULES = {
    "zett_lab.collector",
    "zett_lab.errors",
    "zett_lab.tokens",
    "zett_lab.asyncrun",
    "zett_lab.files",
    "zett_lab.records",
    "zett_lab.version",
    "zett_lab.progress",
    "zett_lab.formatting",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def stage_of(module: str) -> str | None:
    """The stage a module belongs to; None for the package facade ``zett_lab`` itself."""
    if module == "zett_lab":
        return None
    if module in BASE_MODULES:
        return "base"
    stage = module.split(".")[1]
    assert stage in STAGES, f"{module} is in no stage folder ({', '.join(STAGES[1:])}) nor the base"
    return stage


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def parse(path: Path) -> ast.Module:
    """The file's syntax tree.

    Parsed a second time on CPython 3.11's spurious "AST constructor recursion depth mismatch"
    SystemError (cpython#106905: its depth counter is shared by threads), which says nothing of the file.
    """
    source = path.read_text(encoding="utf-8")
    try:
        return ast.parse(source, filename=str(path))
    except SystemError:
        return ast.parse(source, filename=str(path))


def imports_of(path: Path, modules: set[str], *, annotations: bool = False) -> set[str]:
    """The zett_lab modules a file imports (a ``from package import name`` counts the submodule when it is one);
    ``annotations``: those under ``if TYPE_CHECKING:`` too."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = parse(path)
    for node in ast.walk(tree) if annotations else _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("zett_lab"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("zett_lab"):
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                found.add(submodule if submodule in modules else target)
    found.discard(name)
    return found


def import_graph(*, annotations: bool = False) -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules, annotations=annotations) for p in paths}


def test_every_module_is_in_a_stage():
    for module in import_graph():
        stage_of(module)


def test_no_module_imports_a_later_stage():
    upward = []
    for module, targets in import_graph().items():
        stage = stage_of(module)
        if stage is None:
            continue
        for target in targets:
            target_stage = stage_of(target)
            if target_stage is None or STAGES.index(target_stage) > STAGES.index(stage):
                upward.append(f"{module} ({stage}) imports {target} ({target_stage or 'the package facade'})")
    assert not upward, "imports that run back up:\n" + "\n".join(sorted(upward))


@pytest.mark.parametrize("annotations", [False, True], ids=["imports that run", "annotations too"])
def test_no_import_cycles(annotations):
    graph = import_graph(annotations=annotations)
    # a package's __init__ importing its own submodules is how packages export; cycles through it
    # are real cycles all the same, so nothing is left out here.
    state: dict[str, int] = {}
    cycles = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*trail[trail.index(target) :], target]))
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize(
    ("module", "imported"),
    [("zett_lab.show.commands.report", "zett_lab.report"), ("zett_lab.replay.run", "zett_lab.replay.stored")],
)
def test_graph_sees_function_level_imports(module, imported):
    """The checker itself: imports inside functions are counted (the commands import stages lazily)."""
    assert imported in import_graph()[module], f"{module} imports {imported} in a function; the graph must see it"


def test_only_the_replay_stage_reads_the_recorder_and_later_stages_read_the_trace_schema():
    """The trace's vocabulary (columns, skip reasons) has its own home, ``replay/schema.py``; the recorder that
    fills the rows is replay's own business."""
    graph = import_graph()
    readers = sorted(module for module, targets in graph.items() if "zett_lab.replay.recorder" in targets)
    assert all(module.startswith("zett_lab.replay.") for module in readers), readers
    schema_readers = {module for module, targets in graph.items() if "zett_lab.replay.schema" in targets}
    assert any(m.startswith("zett_lab.measure.") for m in schema_readers)
    assert any(m.startswith("zett_lab.show.") for m in schema_readers)


#: The example engines are engines: they override the engine's hooks, as any user subclass does.
ENGINE_SUBCLASSES = {"zett_lab.replay.policies"}


def _outside_replay_engine() -> Iterator[tuple[str, ast.Module]]:
    """Every module of the package but ``replay/engine/`` and the example engines, with its syntax tree."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if not module.startswith("zett_lab.replay.engine.") and module not in ENGINE_SUBCLASSES:
            yield module, parse(path)


def test_zett_agents_internals_are_touched_only_in_replay_engine():
    """A private name of zett-agent (imported from it, or an attribute of a zett-agent class) appears only in
    ``replay/engine/``, the one package that instruments the engine."""
    found = []
    for module, tree in _outside_replay_engine():
        agent_names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("zett_agent"):
                for alias in node.names:
                    agent_names.add(alias.asname or alias.name)
                    if alias.name.startswith("_"):
                        found.append(f"{module}:{node.lineno} imports {alias.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in agent_names
            ):
                found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def _zett_agent_private_names() -> set[str]:
    """The private attributes and methods zett-agent's own classes use on ``self`` (its internals)."""
    import zett_agent

    names = set()
    for path in Path(zett_agent.__file__).parent.rglob("*.py"):
        for node in ast.walk(parse(path)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
    return {name for name in names if name.startswith("_") and not name.startswith("__")}


def test_no_private_attribute_of_zett_agents_is_reached_on_an_object_outside_replay_engine():
    """Outside ``replay/engine/`` no object's attribute bears one of zett-agent's private names (as
    ``history._sessions`` on its history extension did), except on the module's own ``self``, ``cls``, ``super()``
    and an instance its class method made (``cls.__new__(cls)``)."""
    private = _zett_agent_private_names()
    found = []
    for module, tree in _outside_replay_engine():
        own = {"self", "cls"} | {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and ast.unparse(node.value) == "cls.__new__(cls)"
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in private:
                continue
            value = node.value
            if (isinstance(value, ast.Name) and value.id in own) or ast.unparse(value) == "super()":
                continue
            found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    assert found == []


def _imported_from(folder: Path, modules: tuple[str, ...]) -> list[str]:
    """``module: name`` for every name the folder's modules import from ``modules``."""
    taken = []
    for path in sorted(folder.rglob("*.py")):
        package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
        for node in _runtime_nodes(parse(path)):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            if target in modules:
                taken += [f"{module_name(path)}: {alias.name}" for alias in node.names]
    return taken


def test_measure_runs_no_replay_and_summarizes_no_span():
    """measure is pure: it computes from the traces and summaries it is given (replaying and summarizing spans
    are the study stage's, e.g. ``zett_lab.study.compare``, where the checker does see them)."""
    runner = ("zett_lab.replay.run", "zett_lab.replay.fork")
    assert not _imported_from(PACKAGE / "measure", runner)
    assert "zett_lab.study.compare: replay" in _imported_from(PACKAGE / "study", runner)


def test_docstrings_cite_only_files_of_the_repository():
    """The design notes a docstring relies on live in ``docs/``: every ``docs/...`` page cited exists, and no
    module cites a note kept outside the repository."""
    import re

    outside, missing = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        outside += [f"{module_name(path)}: {m}" for m in re.findall(r"DESIGN\.md|DEVELOPERS\.md|\.\./shared/", text)]
        for cited in re.findall(r"docs/[\w./-]+\.md", text):
            if not (PACKAGE.parent / cited).is_file():
                missing.append(f"{module_name(path)}: {cited}")
    assert outside == [] and missing == []


def test_tests_live_in_folders_that_mirror_the_stages():
    """Each stage's tests sit in ``tests/<stage>/``; only the tests of the whole package (this layout, its
    shape's measure, the documentation) stay at the top beside the shared helpers, and every test file a docstring cites exists."""
    import re

    tests = PACKAGE.parent / "tests"
    folders = {path.parent.name for path in tests.rglob("test_*.py") if path.parent != tests}
    at_top = sorted(path.name for path in tests.glob("test_*.py"))
    cited = {m for path in PACKAGE.rglob("*.py") for m in re.findall(r"``tests/[\w/]+\.py``", path.read_text("utf-8"))}
    assert folders == set(STAGES[1:])
    assert at_top == ["test_docs.py", "test_layers.py", "test_shape.py"]
    assert sorted(c for c in cited if not (PACKAGE.parent / c.strip("`")).is_file()) == []
