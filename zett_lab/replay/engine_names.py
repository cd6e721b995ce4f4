"""Engines named in text, as the command line's ``--engine`` takes them.

``stock`` and the example policies by short name (:data:`ENGINE_NAMES`), ``module:Class`` for
a class (or factory) in an importable module, and ``path/to/file.py:Class`` for one in a file.
Every mistake is one :class:`~zett_lab.replay.engine.EngineError` naming the spec and what to do.

A file's folder is added to the end of ``sys.path`` and the file imported by its name, so a
sweep's worker processes (which get this process's ``sys.path``) import the same engine by name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from importlib.machinery import PathFinder
from pathlib import Path
from typing import cast

from .engine import EngineError, EngineSpec, check_engine, engine_name
from .policies import ObservationMaskingCompaction, SplitTurnCompaction

#: Engines the command line knows by a short name (``stock`` is zett-agent's own CompactionExtension).
ENGINE_NAMES: dict[str, EngineSpec] = {
    "stock": None,
    "split-turn": SplitTurnCompaction,
    "observation-masking": ObservationMaskingCompaction,
}
_FORMS = f"module:Class, path/to/file.py:Class, or one of {', '.join(ENGINE_NAMES)}"


def engine_from_spec(spec: str) -> EngineSpec:
    """The engine ``spec`` names (see the module docstring); :class:`EngineError` when it names none."""
    text = spec.strip()
    if text in ENGINE_NAMES:
        return ENGINE_NAMES[text]
    where, colon, attribute = text.rpartition(":")
    if not colon or not where or not attribute:
        raise EngineError(f"engine {spec!r}: not an engine name; use {_FORMS}")
    module_name = _import_file(spec, Path(where)) if where.endswith(".py") else _import_module(spec, where)
    engine: object = sys.modules[module_name]
    for part in attribute.split("."):
        if not hasattr(engine, part):
            raise EngineError(f"engine {spec!r}: {module_name} has no attribute {attribute!r}")
        engine = getattr(engine, part)
    check_engine(cast(EngineSpec, engine))
    return cast(EngineSpec, engine)


def engine_named(name: str) -> EngineSpec:
    """The engine a saved trace names (:func:`~zett_lab.replay.engine.engine_name`): the stock engine or one of
    :data:`ENGINE_NAMES`; :class:`EngineError` for any other, which the user names again (a file never decides which
    code runs)."""
    for engine in ENGINE_NAMES.values():
        if engine_name(engine) == name.strip():
            return engine
    raise EngineError(f"engine {name!r} was read from a file; pass the engine itself to replay it")


def labelled_engine(text: str) -> tuple[str, EngineSpec]:
    """``name=spec`` or ``spec`` as ``(label, engine)``; the label defaults to the short name or the class name."""
    label, equals, spec = text.partition("=")
    if not equals:
        spec = text
        label = text.strip() if text.strip() in ENGINE_NAMES else text.rpartition(":")[2].rpartition(".")[2]
    if not label.strip():
        raise EngineError(f"engine {text!r}: the label before '=' is empty")
    return label.strip(), engine_from_spec(spec)


def labelled_engines(texts: list[str]) -> dict[str, EngineSpec]:
    """Several ``name=spec`` as ``{label: engine}``; two engines under one label are refused."""
    engines: dict[str, EngineSpec] = {}
    for text in texts:
        label, engine = labelled_engine(text)
        if label in engines:
            raise EngineError(f"engine label {label!r} is given twice; name them apart with NAME=SPEC")
        engines[label] = engine
    return engines


def _import_module(spec: str, name: str) -> str:
    """Import ``name``; when it is not found, also look in the working directory (as ``python -m`` would)."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not name.startswith(error.name):
            raise EngineError(f"engine {spec!r}: importing {name} failed: {error}") from error
        cwd = str(Path.cwd())
        if cwd in sys.path or PathFinder.find_spec(name.partition(".")[0], [cwd]) is None:
            raise EngineError(f"engine {spec!r}: no module named {error.name!r}") from error
        sys.path.append(cwd)
        return _import_module(spec, name)
    except Exception as error:  # a user's module failing to import is one clear error
        raise EngineError(f"engine {spec!r}: importing {name} failed: {type(error).__name__}: {error}") from error
    return name


def _import_file(spec: str, path: Path) -> str:
    """Import a ``.py`` file by its name, its folder added to the end of ``sys.path``."""
    if not path.is_file():
        raise EngineError(f"engine {spec!r}: no such file {str(path)!r}")
    path, name = path.resolve(), path.stem
    if not name.isidentifier():
        raise EngineError(f"engine {spec!r}: {path.name} cannot be imported by name; rename it (e.g. my_policy.py)")
    found = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name].__spec__
    origin = getattr(found, "origin", None)
    if found is not None and (origin is None or Path(origin).resolve() != path):
        raise EngineError(
            f"engine {spec!r}: a module named {name!r} already exists ({origin or 'built in'}); rename the file"
        )
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    return _import_module(spec, name)
