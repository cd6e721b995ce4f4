"""Units' measured times kept across runs, beside the summary cache: what the next plan orders its units by.

A plan hands its units out the costliest first (:mod:`~zett_lab.study.plan`). Before anything ran, all it has
is an estimate per conversation (:func:`~zett_lab.study.plan.replay_cost` × cells; twice that for a
summarizer with no budget, :data:`~zett_lab.study.plan.UNBOUNDED_COST`), while the units of one conversation
differ threefold (the report grid of a 5,001-message session, warm: a mask unit 7-8 s of CPU, an anchors or
extractive one 2.5-5 s): on two workers a costly unit could go out last and run alone at the end. After a sweep
the driver keeps each finished unit's measured times, and the next plan of the same units (a report run again
over the same logs) orders by them.

Where: ``unit-times/<code>/<conversation>.json`` in the summary cache's folder, named as the kept anchor
indexes are (:mod:`~zett_lab.study.kept_indexes`): ``<code>`` digests zett_lab's files and the versions it
runs on (a unit's time depends on the code that ran it, so times of another version are never read; their
folders are removed when times are kept); ``<conversation>`` is its content fingerprint with its harness
context. None when the summary cache is disabled or in memory.

A unit is known by its :func:`~zett_lab.study.units.unit_store_key` (summarizer identity, engine, the rest of
the Setting, what a row holds), its cells and whether it reuses replays; a file holds the units of its
conversation kept by this code version, the last :data:`UNITS_KEPT` (a later sweep of a unit replaces its
times).

Safety: the times only order the work, no result depends on them. A file is written whole beside its place
and renamed into it. One that is not as this module writes it is ignored with one warning (the plan falls
back to its estimate) and replaced at the sweep's end; a folder that cannot be written keeps nothing, with one
warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .kept import KeptFolder, conversation_key, warn_once
from .reuse import StoreKey
from .units import Unit

#: What every kept file says it is (its format).
FORMAT = "zett-lab-unit-times 2"
#: Units a conversation's file keeps at most (the last ones run): grids change, a file does not grow forever.
UNITS_KEPT = 256


@dataclass(frozen=True, slots=True)
class UnitRun:
    """One run of a unit: the worker it ran on, its wall seconds, its CPU seconds, and of those the CPU spent once
    per conversation on the anchor index (:attr:`~zett_lab.study.units.UnitResult.setup_cpu_seconds`) and the
    seconds spent computing summaries the cache did not hold
    (:attr:`~zett_lab.study.units.UnitResult.summary_seconds`)."""

    worker: str
    seconds: float
    cpu_seconds: float
    setup_cpu_seconds: float
    summary_seconds: float


def unit_cost(run: UnitRun, offline: bool) -> float:
    """The seconds a worker will be busy with the unit itself next time: for an offline summarizer its CPU
    without the index (which the first unit of a conversation to start pays, whichever it is) and without the
    summaries it computed (cached since: a report run again after a cold one spends none of them; a cold
    report's anchors unit 8.5 s of CPU, 3.6 s warm), for one that calls a provider its wall time (it mostly
    waits on the provider)."""
    return max(0.0, run.cpu_seconds - run.setup_cpu_seconds - run.summary_seconds) if offline else run.seconds


def unit_key(store_key: StoreKey, unit: Unit) -> str:
    """A unit's name within its conversation's file: its store key but the conversation, cells and reuse."""
    return json.dumps([list(store_key[1:]), [list(cell) for cell in unit.cells], unit.reuse])


@dataclass(frozen=True, slots=True)
class KeptTimes(KeptFolder):
    """The kept unit times of one code version in one folder (:meth:`~zett_lab.study.kept.KeptFolder.beside` a
    summary cache)."""

    FOLDER = "unit-times"
    SUFFIX = ".json"

    def read(self, conversation_name: str) -> dict[str, UnitRun]:
        """The times kept for a conversation (:func:`~zett_lab.study.kept.conversation_key`) by unit
        (:func:`unit_key`); none when none are kept or the file is damaged (one warning)."""
        path = self.file(conversation_name)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as error:
            warn_once(path, f"cannot read the kept unit times {path} ({error}); ordering units by their estimate")
            return {}
        times = _times(text)
        if isinstance(times, str):
            warn_once(path, f"the kept unit times {path} are damaged ({times}); ordering units by their estimate")
            return {}
        return times

    def write(self, conversation_name: str, runs: Mapping[str, UnitRun]) -> None:
        """Keep the ``runs`` of a conversation's units with those kept before (the last :data:`UNITS_KEPT`): written
        whole beside the file, then renamed into it; other code versions' folders are removed."""
        kept = {key: run for key, run in self.read(conversation_name).items() if key not in runs}
        kept.update(runs)
        units = {key: _fields(run) for key, run in list(kept.items())[-UNITS_KEPT:]}
        document = json.dumps({"format": FORMAT, "units": units})
        self.replace(conversation_name, (document.encode(),), "the units' times", "units are ordered by their estimate")


def _times(text: str) -> dict[str, UnitRun] | str:
    """The times a kept file holds, or what is wrong with it."""
    try:
        data = json.loads(text)
    except ValueError as error:
        return f"not JSON: {error}"
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("units"), dict):
        return "not a file of kept unit times"
    out: dict[str, UnitRun] = {}
    for key, value in data["units"].items():
        if not (
            isinstance(value, list)
            and len(value) == 5
            and isinstance(value[0], str)
            and all(_is_seconds(v) for v in value[1:])
        ):
            return f"a unit's run is not a worker and four numbers of seconds: {value!r:.80}"
        out[key] = UnitRun(value[0], *(float(v) for v in value[1:]))
    return out


def _fields(run: UnitRun) -> list[object]:
    seconds = (run.seconds, run.cpu_seconds, run.setup_cpu_seconds, run.summary_seconds)
    return [run.worker, *(round(value, 3) for value in seconds)]


def _is_seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def kept_costs(
    kept: KeptTimes | None, units: Iterable[Unit], keys: Mapping[int, StoreKey], offline: set[str]
) -> dict[int, float]:
    """Per unit that ran before under this code (by unit index): its :func:`unit_cost`, ``offline`` naming the
    summarizer labels that call no provider; none without kept times."""
    if kept is None:
        return {}
    costs: dict[int, float] = {}
    for name, group in _by_conversation(units).items():
        runs = kept.read(name)
        for unit in group if runs else ():
            run = runs.get(unit_key(keys[unit.index], unit))
            if run is not None:
                costs[unit.index] = unit_cost(run, unit.label in offline)
    return costs


def keep_runs(
    kept: KeptTimes | None, units: Iterable[Unit], keys: Mapping[int, StoreKey], finished: Mapping[int, UnitRun]
) -> None:
    """Keep the runs of the ``finished`` units (by unit index) for the next plan of them."""
    if kept is None:
        return
    for name, group in _by_conversation(unit for unit in units if unit.index in finished).items():
        kept.write(name, {unit_key(keys[unit.index], unit): finished[unit.index] for unit in group})


def _by_conversation(units: Iterable[Unit]) -> dict[str, list[Unit]]:
    """Units by their conversation's file name (:func:`~zett_lab.study.kept.conversation_key`)."""
    out: dict[str, list[Unit]] = {}
    names: dict[int, str] = {}
    for unit in units:
        name = names.get(id(unit.conversation))
        if name is None:
            name = names[id(unit.conversation)] = conversation_key(unit.conversation, unit.fingerprint)
        out.setdefault(name, []).append(unit)
    return out
