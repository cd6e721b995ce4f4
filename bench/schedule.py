"""The wall time a report would take on more workers, simulated from its units' measured times.

A report is three stages, each waiting for the one before: the report's own process prepares (imports,
loading, the grid: ``prepare_s``), the sweep's units run on the workers, then the report's process builds
the page (``finish_s``). Units of a sweep depend on nothing but the preparation (each replays its own
cells; forks and proofs are shared within a unit), so the middle stage is a schedule of independent tasks:

- every unit takes its measured CPU seconds (``cpu_s``: one unit runs on one core, so on a worker of its
  own its CPU time is its wall time; CPU is also what a machine shared with other jobs changes least);
- of those, ``setup_cpu_s`` is what a worker spends once per conversation on the anchor index its measuring
  reads: the first unit of a conversation to start builds it (the largest setup a unit of it measured), a
  later worker reads what that one left (the smallest, as measured where a unit read it; the build's own
  figure when no unit read one), and a worker that has run the conversation before pays nothing;
- units are handed out in the sweep's own order (the costliest first) to whichever worker is free first,
  as a cluster's scheduler does with idle workers (greedy list scheduling);
- the report's process receives each unit's results while the others run: the sweep stage takes at least
  that process's CPU time in the sweep (``driver_cpu_s``).

:func:`simulate` gives the wall time on ``workers`` workers (:func:`costliest_first`: in the order of the
units' own measured times, the best a plan knowing them could hand them out); :func:`critical_path` the time no
number of workers can beat: preparing, the longest unit with its setup, finishing. Not modelled: a worker that reaches
measuring while another still builds the index waits for it (a unit replays first, so the wait is short or
none).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any


def _setup_of(unit: Mapping[str, Any]) -> float:
    return float(unit.get("setup_cpu_s", 0.0))


def _setups(units: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Per conversation: ``(build, read)``, what its first worker pays for its index and what a later one does."""
    measured: dict[str, list[float]] = {}
    for unit in units:
        measured.setdefault(unit["conversation_id"], []).append(_setup_of(unit))
    out: dict[str, tuple[float, float]] = {}
    for conversation, setups in measured.items():
        paid = sorted(s for s in setups if s > 0)
        out[conversation] = (paid[-1], paid[0]) if paid else (0.0, 0.0)
    return out


def sweep_seconds(units: Sequence[Mapping[str, Any]], workers: int, driver_cpu_s: float = 0.0) -> float:
    """Wall seconds of the sweep stage on ``workers`` workers (see the module docstring)."""
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    setups = _setups(units)
    free: list[tuple[float, int]] = [(0.0, w) for w in range(workers)]
    known: list[set[str]] = [set() for _ in range(workers)]
    built: set[str] = set()
    end = 0.0
    for unit in units:
        start, worker = heapq.heappop(free)
        conversation = unit["conversation_id"]
        seconds = float(unit["cpu_s"]) - _setup_of(unit)
        if conversation not in known[worker]:
            build, read = setups[conversation]
            seconds += read if conversation in built else build
            known[worker].add(conversation)
            built.add(conversation)
        finish = start + seconds
        end = max(end, finish)
        heapq.heappush(free, (finish, worker))
    return max(end, driver_cpu_s)


def costliest_first(units: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The units the costliest first by their own measured CPU without the index setup (what
    ``zett_lab.study.kept_times.unit_cost`` keeps for the next plan of them), ties in the order given."""
    return sorted(units, key=lambda unit: -(float(unit["cpu_s"]) - _setup_of(unit)))


def simulate(schedule: Mapping[str, Any], workers: int) -> float:
    """Wall seconds of the whole report on ``workers`` workers: prepare, the sweep stage, finish."""
    units = schedule["units"]
    return (
        float(schedule["prepare_s"])
        + sweep_seconds(units, workers, float(schedule.get("driver_cpu_s", 0.0)))
        + float(schedule["finish_s"])
    )


def critical_path(schedule: Mapping[str, Any]) -> float:
    """The wall seconds no number of workers beats: prepare, the longest unit (with the index it builds or
    reads: the first of a conversation's units in the sweep's order builds it), finish."""
    setups = _setups(schedule["units"])
    built: set[str] = set()
    longest = 0.0
    for unit in schedule["units"]:
        build, read = setups[unit["conversation_id"]]
        longest = max(
            longest, float(unit["cpu_s"]) - _setup_of(unit) + (read if unit["conversation_id"] in built else build)
        )
        built.add(unit["conversation_id"])
    return (
        float(schedule["prepare_s"])
        + max(longest, float(schedule.get("driver_cpu_s", 0.0)))
        + float(schedule["finish_s"])
    )
