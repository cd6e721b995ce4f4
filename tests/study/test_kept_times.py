"""Units' times kept beside the summary cache: the next plan hands its units out by them, never changing a result."""

from __future__ import annotations

import concurrent.futures as cf
import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from zett_lab.errors import ZettLabWarning
from zett_lab.measure.message_index import release_indexes
from zett_lab.study import clear_worker_state, sweep
from zett_lab.study.grid import fingerprint
from zett_lab.study.kept import conversation_key
from zett_lab.study.kept_times import KeptTimes
from zett_lab.study.plan import UNBOUNDED_COST, costliest_first, replay_cost, unit_costs
from zett_lab.study.results import Sweep

#: One conversation on two workers: each summarizer's cells cut into two keep groups (units 0 and 1 the first
#: group of truncate and mask, units 2 and 3 the second).
GRID = dict(max_tokens=[4_000, 8_000], keep_recent_tokens=[1_000, 2_000], summarizers=["truncate", "mask"])
#: What differs between two runs of the same sweep (time, the worker, how each summary was served).
VARYING = ("seconds", "worker", "model_calls", "cache_hits")


@pytest.fixture
def conversation(fixture_conversations):
    return max(fixture_conversations, key=lambda c: len(c.messages))


def run(conversation, cache: Path) -> Sweep:
    """A sweep of fresh workers (no replay proven, no index held) on two threads."""
    clear_worker_state()
    release_indexes()
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        swept = sweep(conversation, **GRID, executor=pool, cache=cache, reuse=False, progress=False)
    assert swept.results["error"].isna().all() and swept.config["units"] == 4
    return swept


def handed_out(swept: Sweep) -> list[int]:
    """The sweep's units in the order they were handed out (by unit index)."""
    return [unit["unit"] for unit in swept.config["unit_times"]]


def same_results(one: Sweep, other: Sweep) -> None:
    keep = [c for c in one.results.columns if c not in VARYING]
    pd.testing.assert_frame_equal(one.results[keep], other.results[keep])


def times_file(conversation, cache: Path) -> Path:
    kept = KeptTimes.beside(cache)
    assert kept is not None
    return kept.file(conversation_key(conversation, fingerprint(conversation)))


def set_cpu(
    path: Path, cpu: dict[tuple[str, int], float], summaries: dict[tuple[str, int], float] | None = None
) -> None:
    """Give each kept unit (by summarizer and its keep group's keep_recent_tokens) the CPU seconds ``cpu``, of them
    ``summaries`` (none when not given) spent computing summaries."""
    data = json.loads(path.read_text())
    for key, run in data["units"].items():
        rest, cells, _ = json.loads(key)
        unit = (rest[0].split("(")[0], cells[0][1])
        run[2:] = [cpu[unit], 0.0, (summaries or {}).get(unit, 0.0)]
    path.write_text(json.dumps(data))


def test_the_next_sweep_hands_its_units_out_by_their_kept_times_and_measures_the_same(conversation, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    first = run(conversation, cache)
    assert handed_out(first) == [1, 3, 0, 2]  # nothing kept: the estimate, mask's (no budget) twice truncate's
    path = times_file(conversation, cache)
    assert len(json.loads(path.read_text())["units"]) == 4
    # truncate's second group the costliest, its first the cheapest: its first goes out in the second's place
    set_cpu(
        path,
        {
            ("truncate", 2_000): 9.0,
            ("mask", 2_000): 8.0,
            ("mask", 1_000): 7.0,
            ("truncate", 1_000): 1.0,
        },
    )
    second = run(conversation, cache)
    assert handed_out(second) == [0, 1, 3, 2]
    same_results(second, first)
    set_cpu(
        path, {(s, k): 1.0 + n for n, (s, k) in enumerate((s, k) for k in (2_000, 1_000) for s in GRID["summarizers"])}
    )
    third = run(conversation, cache)
    assert handed_out(third) == [1, 0, 3, 2]
    same_results(third, first)


def test_a_units_next_cost_leaves_out_the_summaries_it_computed(conversation, tmp_path):
    """A cold sweep's units computed their summaries (their compactions' latency, the cache missed) and keep those
    seconds; the next run, with them cached, hands its units out by their CPU without them, and computes none."""
    cache = tmp_path / "summaries.sqlite"
    cold = run(conversation, cache)
    computed = sum(
        trace.compactions.loc[trace.compactions["cache_hit"].eq(False), "latency_s"].sum() for _, trace in cold.traces()
    )
    units = cold.config["unit_times"]
    assert computed > 0 and sum(u["summary_s"] for u in units) == pytest.approx(computed, abs=0.001 * len(units))
    kept = KeptTimes.beside(cache).read(conversation_key(conversation, fingerprint(conversation)))
    assert sorted(round(r.summary_seconds, 3) for r in kept.values()) == sorted(u["summary_s"] for u in units)
    # the same CPU for all, less the summaries: 9, 8, 7 and 1 s, the order the first test's second sweep takes
    path = times_file(conversation, cache)
    summaries = {("truncate", 2_000): 1.0, ("mask", 2_000): 2.0, ("mask", 1_000): 3.0, ("truncate", 1_000): 9.0}
    set_cpu(path, dict.fromkeys(summaries, 10.0), summaries)
    warm = run(conversation, cache)
    assert handed_out(warm) == [0, 1, 3, 2]
    assert all(u["summary_s"] == 0 for u in warm.config["unit_times"])
    rerun = KeptTimes.beside(cache).read(conversation_key(conversation, fingerprint(conversation)))
    assert all(r.summary_seconds == 0 for r in rerun.values())
    same_results(cold, warm)


@pytest.mark.parametrize("damage", ["truncated", "a time that is no number"])
def test_damaged_kept_times_give_one_warning_and_the_estimates_order(conversation, tmp_path, damage):
    cache = tmp_path / "summaries.sqlite"
    first = run(conversation, cache)
    path = times_file(conversation, cache)
    text = path.read_text()
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    else:
        data = json.loads(text)
        next(iter(data["units"].values()))[2] = "soon"
        path.write_text(json.dumps(data))
    with pytest.warns(ZettLabWarning, match=r"kept unit times .* are damaged") as caught:
        again = run(conversation, cache)
    assert len([w for w in caught if "kept unit times" in str(w.message)]) == 1
    assert handed_out(again) == [1, 3, 0, 2]  # the estimate's order
    same_results(again, first)
    assert len(json.loads(path.read_text())["units"]) == 4  # written whole again at the sweep's end


def test_times_kept_by_another_code_version_are_never_read(conversation, tmp_path):
    cache = tmp_path / "summaries.sqlite"
    run(conversation, cache)
    path = times_file(conversation, cache)
    set_cpu(
        path,
        {(s, k): 10.0 - n for n, (s, k) in enumerate((s, k) for k in (1_000, 2_000) for s in ["mask", "truncate"])},
    )
    other = path.parent.with_name("0" * 32)
    shutil.move(path.parent, other)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ZettLabWarning)
        again = run(conversation, cache)
    assert handed_out(again) == [1, 3, 0, 2]  # the estimate's order
    assert not other.exists() and path.is_file()  # the other version's folder removed when times are kept


def test_units_never_run_cost_their_estimate_in_the_seconds_of_those_that_ran(fixture_conversations, tmp_path):
    small, large, plan = _small_and_large_planned(fixture_conversations, ["truncate", "mask"])
    units = {(u.conversation.id, u.label): u.index for u in plan.units}
    assert unit_costs(plan.units, {}, {"mask"}) == plan.costs  # nothing measured: the estimates as they are
    ran = units[(large.id, "truncate")]
    costs = unit_costs(plan.units, {ran: 3.0}, {"mask"})
    seconds_per_estimate = 3.0 / (replay_cost(large) * 2)
    assert costs[ran] == 3.0
    assert costs[units[(large.id, "mask")]] == pytest.approx(3.0 * UNBOUNDED_COST)
    assert costs[units[(small.id, "mask")]] == pytest.approx(
        replay_cost(small) * 2 * UNBOUNDED_COST * seconds_per_estimate
    )


def test_before_any_ran_a_summarizer_with_no_budget_is_estimated_at_twice_the_others(fixture_conversations):
    """Mask with no budget keeps whole transcripts but tool outputs (its units cost about twice the others'): it goes
    out first; with a budget it is estimated as the others are."""
    small, large, plan = _small_and_large_planned(fixture_conversations, ["truncate", "mask", "mask:0.1"])
    cost = {(u.conversation.id, u.label): plan.costs[u.index] for u in plan.units}
    for conversation in (small, large):
        assert cost[(conversation.id, "mask")] == UNBOUNDED_COST * cost[(conversation.id, "truncate")]
        assert cost[(conversation.id, "mask:0.1")] == cost[(conversation.id, "truncate")]
    assert [(u.conversation.id, u.label) for u in plan.order][:2] == [(large.id, "mask"), (large.id, "truncate")]


def test_a_conversations_units_go_out_together_costliest_conversation_first(fixture_conversations):
    """Ranked by measured cost, a conversation's units still go out one after another (a small one's as one task,
    loaded and indexed by one worker), the costliest conversation first and its costliest unit first."""
    small, large, plan = _small_and_large_planned(fixture_conversations, ["truncate", "mask", "anchors"])
    by = {(u.conversation.id, u.label): u.index for u in plan.units}
    # the small conversation's mask unit alone is the costliest unit, yet the large conversation costs more in all
    measured = {by[(small.id, "mask")]: 9.0, by[(small.id, "truncate")]: 0.1, by[(small.id, "anchors")]: 0.1}
    measured |= {by[(large.id, "truncate")]: 2.0, by[(large.id, "mask")]: 5.0, by[(large.id, "anchors")]: 4.0}
    order = [(u.conversation.id, u.label) for u in costliest_first(plan.units, measured)]
    assert order == [
        (large.id, "mask"),
        (large.id, "anchors"),
        (large.id, "truncate"),
        (small.id, "mask"),
        (small.id, "truncate"),
        (small.id, "anchors"),
    ]


def _small_and_large_planned(conversations, summarizers):
    """The smallest and largest fixture conversations, and their plan at 4k/8k × 1k with ``summarizers``."""
    from zett_lab.study.executors import resolve_executor
    from zett_lab.study.plan import UnitOptions, plan_sweep

    small, large = sorted(conversations, key=replay_cost)[:: len(conversations) - 1]
    plan = plan_sweep(
        [small, large],
        [4_000, 8_000],
        [1_000],
        summarizers,
        None,
        False,
        None,
        resolve_executor("serial")[0],
        {},
        UnitOptions(metrics=True, primary_model=None, prices=None, reuse=True, metric_modules=()),
    )
    return small, large, plan
