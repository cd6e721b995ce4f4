"""Which engine a replay runs and how it is built: a class or factory (:data:`EngineSpec`), its name,
the limits it may be reused along, and the instrumented instance (the probe in front of it)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence

from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.messages import AnyMessage
from zett_agent.model import AgentModel, ReasoningEffort

from ...errors import SettingError
from .probe import EngineProbe, instrumented_class

#: A class or a factory called like ``CompactionExtension(model, *, max_tokens, keep_recent_tokens,
#: count_tokens, reasoning_effort)``; None is the stock engine.
EngineSpec = type[CompactionExtension] | Callable[..., CompactionExtension] | None
#: The attribute an engine class sets to declare the limits along which one replay provably stands for
#: other settings (``("max_tokens",)``, ``("max_tokens", "keep_recent_tokens")``); see ``study.regions``.
#: Declaring also promises that the engine keeps nothing between requests but the session's history (as
#: the stock engine): forked replays (``replay.fork``) start a new engine at a turn along those limits.
REUSE_ATTRIBUTE = "zett_lab_reuse"
#: The limits the stock engine is proven to read only in its two comparisons.
STOCK_REUSE = ("max_tokens", "keep_recent_tokens")


class EngineError(SettingError):
    """An engine that cannot be used: not a CompactionExtension, a failing or wrong factory."""


def engine_name(engine: EngineSpec) -> str:
    """How a trace names an engine: ``CompactionExtension`` (stock), ``module.Class``, or a factory's name."""
    if engine is None or engine is CompactionExtension:
        return "CompactionExtension"
    if isinstance(engine, functools.partial):
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(engine.keywords.items()))
        return f"{engine_name(engine.func)}({options})"
    module = getattr(engine, "__module__", None) or ""
    name = getattr(engine, "__qualname__", None) or type(engine).__qualname__
    return f"{module}.{name}" if module and module != "builtins" else name


def engine_reuse(engine: EngineSpec) -> tuple[str, ...]:
    """The limits along which a replay of ``engine`` may stand for other settings (empty: none).

    The stock engine is proven for both (``study.regions``); a user engine gets only what
    its class declares in ``zett_lab_reuse``; a factory other than ``functools.partial`` of a
    declaring class gets nothing (its options may read the limits anywhere).
    """
    if engine is None or engine is CompactionExtension:
        return STOCK_REUSE
    target = engine.func if isinstance(engine, functools.partial) else engine
    if not isinstance(target, type):
        return ()
    declared = getattr(target, REUSE_ATTRIBUTE, ())
    return tuple(limit for limit in STOCK_REUSE if limit in declared)


def check_engine(engine: EngineSpec) -> None:
    """Raise :class:`EngineError` unless ``engine`` is None, a CompactionExtension subclass, or a callable."""
    if engine is None:
        return
    if isinstance(engine, type):
        if not issubclass(engine, CompactionExtension):
            name = f"{engine.__module__}.{engine.__qualname__}"
            raise EngineError(f"engine {name} is not a subclass of zett_agent's CompactionExtension")
        return
    if isinstance(engine, CompactionExtension):
        raise EngineError(
            f"engine= takes a class or a factory, not a configured instance ({type(engine).__name__}); "
            "to record a live agent's extension use zett_lab.instrument(extension, path)"
        )
    if not callable(engine):
        raise EngineError(f"engine must be a CompactionExtension subclass or a factory, got {type(engine).__name__}")


def build_engine(
    engine: EngineSpec,
    probe: type[EngineProbe],
    *,
    model: AgentModel | None,
    max_tokens: int,
    keep_recent_tokens: int,
    count_tokens: Callable[[Sequence[AnyMessage]], int] | None,
    reasoning_effort: ReasoningEffort,
) -> CompactionExtension:
    """An instrumented engine: ``engine`` (class or factory) built with the extension's own arguments, ``probe``
    in front."""
    check_engine(engine)
    name = engine_name(engine)
    target = CompactionExtension if engine is None else engine
    limits = {"max_tokens": max_tokens, "keep_recent_tokens": keep_recent_tokens}
    make = instrumented_class(target, probe) if isinstance(target, type) else target
    try:
        made = make(
            model=model,
            max_tokens=max_tokens,
            keep_recent_tokens=keep_recent_tokens,
            count_tokens=count_tokens,
            reasoning_effort=reasoning_effort,
        )
        if not isinstance(made, CompactionExtension):
            raise EngineError(f"engine factory {name} returned {type(made).__name__}, not a CompactionExtension")
        built = made if isinstance(target, type) else graft(made, probe)
    except EngineError:
        raise
    except Exception as error:
        arguments = sorted(["model", *limits, "count_tokens", "reasoning_effort"])
        raise EngineError(
            f"engine {name} could not be built with {arguments}: {type(error).__name__}: {error}"
        ) from error
    for limit, asked in limits.items():
        if getattr(built, limit, None) != asked:
            raise EngineError(
                f"engine {name} has {limit}={getattr(built, limit, None)!r} but was asked for {asked!r}; "
                "a factory must pass the limits on, or the trace would name a setting the engine did not use"
            )
    return built


def graft(extension: CompactionExtension, probe: type[EngineProbe]) -> CompactionExtension:
    """A copy of a configured extension with ``probe`` in front of its class (the original is untouched).

    Attributes are shared shallowly; a bound method the extension stored on itself in
    ``__init__`` stays bound to the original object.
    """
    grafted = copy.copy(extension)
    grafted.__class__ = instrumented_class(type(extension), probe)
    return grafted
