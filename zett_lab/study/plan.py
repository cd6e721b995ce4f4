"""A sweep's plan: its grid checked and cut into units of work, before anything runs.

:func:`plan_sweep` checks every value and option, builds each summarizer and engine once (a bad spec or a
failing factory is one error before anything runs), and cuts the grid into :class:`~zett_lab.study.units.Unit`
s of one conversation, engine and summarizer, split further by ``keep_recent_tokens`` only where a conversation
would otherwise keep one worker busy alone or the units are too few to balance (:data:`UNITS_PER_WORKER`). The
:class:`Plan` orders them the costliest first: by what they took when they last ran
(:mod:`~zett_lab.study.kept_times`), else by an estimate (:func:`replay_cost`).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import math
import os
import pickle
import warnings
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import TypedDict

from zett_agent.model import AgentModel, ReasoningEffort

from ..errors import SettingError, SettingWarning
from ..load.conversation import Conversation
from ..load.text import message_text
from ..replay.engine import EngineSpec, ReplayProbe, build_engine, engine_name
from ..replay.setting import ReplayOptions, Setting, build_summarizer, check_limits, compose, keep_fills_budget
from ..summarizers import DEFAULT_SUMMARIZER, SummaryCache, resolve_cache, summarizer_identity
from ..summarizers.offline import OfflineSummarizer
from .executors import in_process, is_remote, parallelism
from .grid import (
    REPLAY_OPTIONS,
    GridValue,
    conversations_of,
    fingerprint,
    is_offline,
    resolve_context_window,
    resolve_engines,
    resolve_values,
    summarizer_label,
)
from .kept_times import KeptTimes, kept_costs
from .reuse import StoreKey
from .units import WORKER_CACHE, Unit, unit_store_key

#: Concurrent replays per unit for summarizers that call a provider (offline ones run one at a time).
DEFAULT_PROVIDER_CONCURRENCY = 4


#: Units per worker a sweep is cut into at least, where a conversation and summarizer can be cut (by
#: ``keep_recent_tokens``, :func:`_keep_parts`): with one long conversation, one unit per summarizer left a worker
#: idle while another ran the costliest summarizer's unit at the end; forks lose little (a worker forks a unit's
#: replays from any replay it ran before, of any summarizer, up to their first compaction).
UNITS_PER_WORKER = 4

#: What a unit of a summarizer with no budget (observation masking, ``mask``: its summaries are as long as their
#: spans' transcripts without tool outputs, which the engine counts and measuring reads) is estimated to cost
#: against another summarizer's unit of the same cells, before any ran: a 5,001-message session's report (idle,
#: stop 38) spent 6.6-7.7 s CPU on each mask unit, 2.6-4.2 on the others' warm (6.1 on extractive's first, cold).
#: Estimated alike, the costliest went out last and ran alone at the end.
UNBOUNDED_COST = 2.0


@dataclass(frozen=True, slots=True)
class Plan:
    """A checked grid, cut into units."""

    conversations: list[Conversation]
    window: int | None
    max_values: list[tuple[int, float | None]]
    keep_values: list[tuple[int, float | None]]
    labels: list[str]
    identities: list[str]
    engines: list[tuple[str, EngineSpec]]
    cache: SummaryCache | None
    units: list[Unit]
    keys: dict[int, StoreKey]
    #: The units in the order they are submitted: the costliest first (:func:`costliest_first`).
    order: list[Unit]
    #: Per unit index: its cost (:func:`unit_costs`).
    costs: dict[int, float]
    #: The grid's Setting at its first cell (what every cell shares but its engine, summarizer and limits).
    template: Setting


class UnitOptions(TypedDict):
    """What every unit of a sweep measures and reuses (the :class:`~zett_lab.study.units.Unit` fields of that name)."""

    metrics: bool
    primary_model: str | None
    prices: Mapping[str, object] | None
    reuse: bool
    metric_modules: tuple[tuple[str, str | None], ...]


def plan_sweep(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
    max_tokens: Sequence[GridValue] | GridValue,
    keep_recent_tokens: Sequence[GridValue] | GridValue,
    summarizers: Sequence[str | AgentModel] | str | None,
    engines: Mapping[str, EngineSpec] | None,
    cache: SummaryCache | str | os.PathLike[str] | bool | None,
    context_window: int | str | None,
    runner: cf.Executor,
    replay_options: Mapping[str, object],
    unit_options: UnitOptions,
) -> Plan:
    """Check the grid and cut it into units (nothing runs yet; each engine is built once)."""
    unknown = sorted(set(replay_options) - set(REPLAY_OPTIONS))
    if unknown:
        raise SettingError(
            f"unknown sweep option(s) {unknown}; replay options a sweep passes on: {', '.join(REPLAY_OPTIONS)}"
        )
    items = conversations_of(conversations)
    window, max_values, keep_values = _limits(max_tokens, keep_recent_tokens, context_window)
    # The grid's Setting at its first cell, and how each replay runs: every option checked before anything runs.
    template, options = compose(
        None,
        ReplayOptions(warn=False),
        {"max_tokens": max_values[0][0], "keep_recent_tokens": keep_values[0][0], **replay_options},
    )
    _warn_keep_fills_budget(max_values, keep_values)
    specs, models, labels = _summarizers(summarizers)
    summary_cache = resolve_cache(cache)
    engine_items = _engines(engines, runner, models[0], template)
    shipped = _shippable(specs, models, in_process(runner))
    units = _units(
        items,
        ([m for m, _ in max_values], [k for k, _ in keep_values]),
        engine_items,
        list(zip(shipped, models, labels, strict=True)),
        runner,
        template,
        options,
        False if summary_cache is None else (WORKER_CACHE if is_remote(runner) else summary_cache),
        unit_options,
    )
    keys = {unit.index: unit_store_key(unit) for unit in units}
    costs = _costs(units, keys, summary_cache, list(zip(models, labels, strict=True)))
    return Plan(
        items,
        window,
        max_values,
        keep_values,
        labels,
        [summarizer_identity(m) for m in models],
        engine_items,
        summary_cache,
        units,
        keys,
        costliest_first(units, costs),
        costs,
        template,
    )


def _costs(
    units: list[Unit], keys: dict[int, StoreKey], cache: SummaryCache | None, summarizers: list[tuple[AgentModel, str]]
) -> dict[int, float]:
    """Each unit's cost to order by: its measured time kept beside the summary ``cache`` where it ran before, else
    its estimate (:func:`unit_costs`)."""
    offline = {label for model, label in summarizers if is_offline(model)}
    measured = kept_costs(KeptTimes.beside(getattr(cache, "path", None)), units, keys, offline)
    return unit_costs(units, measured, {label for model, label in summarizers if _unbounded(model)})


def _limits(
    max_tokens: Sequence[GridValue] | GridValue,
    keep_recent_tokens: Sequence[GridValue] | GridValue,
    context_window: int | str | None,
) -> tuple[int | None, list[tuple[int, float | None]], list[tuple[int, float | None]]]:
    """The context window in tokens, and the grid's ``(tokens, share of the window)`` values of each limit, every
    pair of them checked."""
    window = resolve_context_window(context_window)
    max_values = resolve_values(max_tokens, "max_tokens", window)
    keep_values = resolve_values(keep_recent_tokens, "keep_recent_tokens", window)
    for m, _ in max_values:
        for k, _ in keep_values:
            check_limits(m, k)
    return window, max_values, keep_values


def _summarizers(
    summarizers: Sequence[str | AgentModel] | str | None,
) -> tuple[list[str | AgentModel], list[AgentModel], list[str]]:
    """The specs, the models they build (a bad spec fails here) and their labels, each summarizer once."""
    specs: list[str | AgentModel] = (
        [DEFAULT_SUMMARIZER]
        if summarizers is None
        else ([summarizers] if isinstance(summarizers, str) else list(summarizers))
    )
    if not specs:
        raise SettingError("summarizers is empty: a sweep needs at least one summarizer")
    models = [build_summarizer(spec) for spec in specs]  # fails fast on a bad spec
    labels = [summarizer_label(spec) for spec in specs]
    if len(set(labels)) != len(labels):
        raise SettingError(f"summarizers must be distinct, got {labels}")
    _refuse_one_under_two_labels("summarizers", labels, [summarizer_identity(m) for m in models])
    return specs, models, labels


def _engines(
    engines: Mapping[str, EngineSpec] | None, runner: cf.Executor, model: AgentModel, template: Setting
) -> list[tuple[str, EngineSpec]]:
    """``(label, engine)`` of each engine, each built once at the grid's first setting: a factory that fails or
    ignores the limits is one error before anything runs."""
    engine_items = resolve_engines(engines, in_process(runner))
    _refuse_one_under_two_labels(
        "engines", [label for label, _ in engine_items], [engine_name(e) for _, e in engine_items]
    )
    for _, engine in engine_items:
        build_engine(
            engine,
            ReplayProbe,
            model=model,
            max_tokens=template.max_tokens,
            keep_recent_tokens=template.keep_recent_tokens,
            count_tokens=template.token_counter(),
            reasoning_effort=ReasoningEffort(template.reasoning_effort),
        )
    return engine_items


def _units(
    conversations: list[Conversation],
    limits: tuple[list[int], list[int]],
    engine_items: list[tuple[str, EngineSpec]],
    summarizer_items: list[tuple[str | AgentModel, AgentModel, str]],
    runner: cf.Executor,
    template: Setting,
    options: ReplayOptions,
    cache: SummaryCache | str | bool,
    unit_options: UnitOptions,
) -> list[Unit]:
    """The grid cut into units: per conversation, engine and summarizer, its ``keep_recent_tokens`` values in one
    unit, or in as few groups as the workers need to be kept evenly busy to the end (:func:`_keep_parts`)."""
    max_tokens, keeps = limits
    costs = [replay_cost(conversation) for conversation in conversations]
    parts = _keep_parts(costs, len(engine_items) * len(summarizer_items), parallelism(runner), len(keeps))
    units: list[Unit] = []
    for conversation, count in zip(conversations, parts, strict=True):
        digest = fingerprint(conversation)
        groups = _keep_groups(keeps, count)
        # group by group: a summarizer's later groups start after every summarizer's first (what they share across
        # workers, its lines' items, is left by the first by then); ordered by measured costs, after its own first
        # (costliest_first)
        for group, ((engine_label, engine), (spec, model, label)) in itertools.product(
            groups, itertools.product(engine_items, summarizer_items)
        ):
            concurrency = (
                1 if is_offline(model) else (getattr(model, "max_concurrency", None) or DEFAULT_PROVIDER_CONCURRENCY)
            )
            units.append(
                Unit(
                    index=len(units),
                    conversation=conversation,
                    fingerprint=digest,
                    setting=dataclasses.replace(template, summarizer=spec, engine=engine),
                    options=options,
                    label=label,
                    cells=[(m, k) for k in group for m in max_tokens],
                    cache=cache,
                    concurrency=concurrency,
                    engine_label=engine_label,
                    **unit_options,
                )
            )
    return units


def _refuse_one_under_two_labels(what: str, labels: list[str], names: list[str]) -> None:
    """A cell is a conversation under a Setting: two labels naming one engine or summarizer would be one cell twice."""
    first: dict[str, str] = {}
    for label, name in zip(labels, names, strict=True):
        if name in first:
            raise SettingError(f"{what} {first[name]!r} and {label!r} are the same ({name}); give it once")
        first[name] = label


def _warn_keep_fills_budget(
    max_values: list[tuple[int, float | None]], keep_values: list[tuple[int, float | None]]
) -> None:
    """One :class:`~zett_lab.errors.SettingWarning` for all settings whose kept tail alone fills the budget."""
    filling = [(m, k) for m, _ in max_values for k, _ in keep_values if keep_fills_budget(m, k)]
    if filling:
        m, k = filling[0]
        warnings.warn(
            f"{len(filling)} of {len(max_values) * len(keep_values)} settings have keep_recent_tokens >= max_tokens; "
            f"e.g. {keep_fills_budget(m, k)}",
            SettingWarning,
            stacklevel=4,
        )


def _shippable(specs: Sequence[str | AgentModel], models: Sequence[AgentModel], local: bool) -> list[str | AgentModel]:
    """What each unit carries of its summarizer: the spec string, or a model that pickles."""
    shipped: list[str | AgentModel] = []
    for spec, model in zip(specs, models, strict=True):
        if isinstance(spec, str) or local:
            shipped.append(spec if isinstance(spec, str) else model)
            continue
        try:
            pickle.dumps(model)
        except Exception as error:
            raise SettingError(
                f"summarizer {summarizer_label(model)!r} cannot be sent to worker processes ({type(error).__name__}: {error}); "
                "pass it as a spec string or use executor='serial'"
            ) from error
        shipped.append(model)
    return shipped


def replay_cost(conversation: Conversation) -> float:
    """A conversation's relative cost in a sweep (messages × characters: each step's runtime grows with the
    context, and longer conversations compact more often, so take more distinct replays)."""
    return float(len(conversation.messages) * sum(len(message_text(m)) for m in conversation.messages))


def unit_costs(units: list[Unit], measured: Mapping[int, float], unbounded: Set[str]) -> dict[int, float]:
    """Per unit index: its cost in a sweep, the seconds it took when it last ran (``measured``: a summarizer's
    units differ threefold where :func:`replay_cost` sees one cost) or, for a unit never run, its estimate
    (:func:`replay_cost` × cells, × :data:`UNBOUNDED_COST` for the summarizer labels ``unbounded`` names), scaled
    to seconds by the units that ran (as they are, when none ran)."""
    cost_of: dict[int, float] = {}
    estimates = {
        unit.index: cost_of.setdefault(id(unit.conversation), replay_cost(unit.conversation))
        * len(unit.cells)
        * (UNBOUNDED_COST if unit.label in unbounded else 1.0)
        for unit in units
    }
    known = sum(estimates[index] for index in measured)
    scale = sum(measured.values()) / known if known > 0 and sum(measured.values()) > 0 else 1.0
    return {index: measured.get(index, estimate * scale) for index, estimate in estimates.items()}


def _unbounded(model: AgentModel) -> bool:
    """Whether a summarizer runs offline with no budget (its units cost :data:`UNBOUNDED_COST` times the others')."""
    return isinstance(model, OfflineSummarizer) and model.budget is None


def costliest_first(units: list[Unit], costs: Mapping[int, float]) -> list[Unit]:
    """The units in the order they are handed out: the costliest conversation first, and within it the costliest
    unit first (so none runs alone at the end), ties in the grid's order. A conversation's units stay together,
    so a small one's still go out as one task (:func:`~zett_lab.study.collect.next_batch`) and one worker loads,
    counts and indexes it: ranked by unit alone, a corpus's warm report cost more CPU than its cold one (336 s
    against 311 s for 150 sessions). The keep groups of one conversation, engine and summarizer
    (:func:`_keep_groups`) go in their own order, each taking the place of the next of them in cost, so a later
    group starts after the first (it takes the lines' items the first leaves,
    :meth:`~zett_lab.study.sources.TableWriter.take_lines`)."""
    conversation_costs: dict[str, float] = {}
    for unit in units:
        conversation_costs[unit.fingerprint] = conversation_costs.get(unit.fingerprint, 0.0) + costs[unit.index]
    ranked = sorted(units, key=lambda unit: (-conversation_costs[unit.fingerprint], -costs[unit.index]))
    chains: dict[tuple[str, str, str], list[Unit]] = {}
    for unit in reversed(units):
        chains.setdefault((unit.fingerprint, unit.engine_label, unit.label), []).append(unit)
    return [chains[(unit.fingerprint, unit.engine_label, unit.label)].pop() for unit in ranked]


def _keep_parts(costs: list[float], pairs: int, workers: int, keeps: int) -> list[int]:
    """Per conversation, into how many groups of ``keep_recent_tokens`` values each of its ``pairs`` (engine ×
    summarizer) is cut: as few as balance needs, since a cut loses what one unit shares (forks, cells proven
    identical, summaries computed once) and two workers then compute the same cold summaries.

    Units are handed out the costliest first (:func:`costliest_first`), so the workers end evenly when no unit
    costs more than one worker's share of the grid and there are enough units to even out the last ones. So a
    conversation is first cut until each of its units costs at most a whole worker's share; then, while the grid
    has fewer than ``workers`` × :data:`UNITS_PER_WORKER` units, the conversation whose units cost the most is cut
    once more. Many conversations thus leave the biggest cut in two at most (the fixtures: 7 + 1 units), while
    one long conversation under 4 summarizers on 2 workers is cut into 8 units (a mask unit costs twice the
    others, so 4 cannot balance). One worker runs everything as it comes: nothing is cut.
    """
    if workers <= 1 or not costs or keeps <= 1:
        return [1] * len(costs)
    share = sum(costs) * pairs / workers
    parts = [min(keeps, max(1, math.ceil(cost / share))) if share > 0 else 1 for cost in costs]
    while sum(parts) * pairs < workers * UNITS_PER_WORKER:
        cuttable = [i for i, count in enumerate(parts) if count < keeps]
        if not cuttable:
            break
        parts[max(cuttable, key=lambda i: costs[i] / parts[i])] += 1
    return parts


def _keep_groups(keeps: list[int], parts: int) -> list[list[int]]:
    """``keep_recent_tokens`` values per unit of one conversation and summarizer, cut into ``parts`` groups
    (:func:`_keep_parts`, at most one per value) of neighbouring values, as even in size as they can be: neighbours
    take the same decisions longest, so share the most forks.
    """
    cuts = [len(keeps) * i // parts for i in range(parts + 1)]
    return [keeps[start:end] for start, end in itertools.pairwise(cuts)]
