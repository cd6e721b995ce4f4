"""Sweeps: exact equality with single replays, proven reuse, executors, failures, files, helpers."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import json
import threading

import pandas as pd
import pytest
from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import ModelEvent, ModelResponse, RetryOptions

import zett_lab
from zett_lab.errors import SettingError, ZettLabError
from zett_lab.replay import replay
from zett_lab.study import (
    CONTEXT_WINDOWS,
    NoFeasibleSetting,
    Sweep,
    clear_worker_state,
    decision_boundaries,
    pareto_front,
    parse_constraints,
    recommend,
    sweep,
)
from zett_lab.study.boundaries import schedule
from zett_lab.study.regions import derive, region, same_replay
from zett_lab.study.result_columns import RUN_COLUMNS

SMALL = ("auth-refresh-token", "api-v2-deprecation", "ci-flaky-kafka", "search-p95-regression", "billing-rounding")


@pytest.fixture(scope="module")
def small(fixture_conversations):
    chosen = [c for c in fixture_conversations if c.id in SMALL]
    assert len(chosen) == len(SMALL)
    return chosen


def build(turns: int = 8, cid: str = "synthetic", seed: int = 0):
    """A multi-turn coding conversation with tool calls (one failed), sized ~250-900 tokens a turn."""
    import random

    rng = random.Random(seed)
    words = ["alpha", "src/app.py", "ValueError", "42ms", "def", "return", "class", "import", "retry", "cache"]
    messages = [SystemMessage(content="You are a careful coding agent.")]
    n = 0
    for t in range(turns):
        messages.append(
            UserMessage(content=f"turn {t}: " + " ".join(rng.choice(words) for _ in range(rng.randint(20, 120))))
        )
        for k in range(rng.randint(0, 4)):
            n += 1
            call = ToolCall(id=f"call-{n}", name=rng.choice(["read", "bash"]), arguments={"path": f"f{t}_{k}.py"})
            messages.append(AssistantMessage(content="", tool_calls=(call,)))
            text = "\n".join(" ".join(rng.choice(words) for _ in range(10)) for _ in range(rng.randint(3, 25)))
            messages.append(ToolMessage(tool_call_id=call.id, name=call.name, content=text, success=(k != 1)))
        messages.append(
            AssistantMessage(content=f"done {t} " + " ".join(rng.choice(words) for _ in range(rng.randint(5, 40))))
        )
    return zett_lab.Conversation(id=cid, messages=messages)


def assert_same(a, b):
    assert same_replay(a, b) == []


# --- exactness ----------------------------------------------------------------------------------


def test_sweep_equals_single_replays_on_fixture_grid(small, tmp_path):
    cache = tmp_path / "cache.sqlite"
    grid_m, grid_k = [3_000, 7_000, 60_000], [600, 8_000]  # 8_000 >= 3_000 and 7_000: allowed
    s = sweep(
        small,
        max_tokens=grid_m,
        keep_recent_tokens=grid_k,
        summarizers=["anchors:0.1", "truncate"],
        executor="serial",
        cache=cache,
        metrics=False,
        progress=False,
    )
    assert len(s.results) == len(small) * 3 * 2 * 2
    assert s.results["error"].isna().all()
    assert s.results["replayed"].eq(False).sum() > 0
    for row in s.results.itertuples(index=False):
        mine = s.trace(row.conversation_id, row.max_tokens, row.keep_recent_tokens, row.summarizer)
        conversation = next(c for c in small if c.id == row.conversation_id)
        alone = replay(
            conversation,
            max_tokens=int(row.max_tokens),
            keep_recent_tokens=int(row.keep_recent_tokens),
            summarizer=row.summarizer,
            cache=cache,
        )
        assert_same(mine, alone)
        summary = alone.summary()
        for key, value in summary.items():
            if key not in ("summarizer", "engine"):  # labels in the sweep, identities in the trace
                assert getattr(row, key) == value, key


def test_region_is_exact_inside_and_tight_outside():
    conversation = build(10)
    from zett_lab.summarizers import summarizer

    model = summarizer("truncate")
    for m, k in [(2_500, 600), (4_000, 1_500), (9_000, 300)]:
        trace = replay(conversation, max_tokens=m, keep_recent_tokens=k, summarizer=model, cache=False)
        where = region(trace, verify=True)  # the prefix-sum arithmetic agrees with the engine's own walk
        assert where.reason is None and where.contains(m, k)
        corners = [(where.m_lo, where.k_lo), (where.m_hi or where.m_lo + 10**6, where.k_hi or where.k_lo + 10**6)]
        for mm, kk in corners:
            again = replay(conversation, max_tokens=mm, keep_recent_tokens=kk, summarizer=model, cache=False)
            assert same_replay(derive(trace, mm, kk, where), again) in ([], ["compactions differ"])
            pd.testing.assert_frame_equal(derive(trace, mm, kk).steps, again.steps)
            cols = [c for c in trace.compactions.columns if c not in ("latency_s", "cache_hit")]
            pd.testing.assert_frame_equal(trace.compactions[cols], again.compactions[cols])
        outside = [(where.m_lo - 1, k), (m, where.k_lo - 1)]
        outside += [(where.m_hi + 1, k)] if where.m_hi is not None else []
        outside += [(m, where.k_hi + 1)] if where.k_hi is not None else []
        for mm, kk in outside:
            if mm < 1 or kk < 1:
                continue
            other = replay(conversation, max_tokens=mm, keep_recent_tokens=kk, summarizer=model, cache=False)
            assert not derive(trace, mm, kk).steps.equals(other.steps), (mm, kk)


def test_derived_cells_carry_the_metrics_of_their_own_trace(small, tmp_path):
    from zett_lab.measure import measure

    conversation = next(c for c in small if c.id == "billing-rounding")
    s = sweep(
        conversation,
        max_tokens=[9_000, 9_100, 60_000, 70_000],
        keep_recent_tokens=[2_000, 3_000],
        executor="serial",
        cache=tmp_path / "c.sqlite",
        progress=False,
    )
    derived = s.results[s.results["replayed"].eq(False)]
    assert len(derived)
    for row in derived.to_dict("records"):
        trace = s.trace(row["conversation_id"], row["max_tokens"], row["keep_recent_tokens"])
        expected = measure(trace).conversation.iloc[0].to_dict()
        for key, value in expected.items():
            if key == "summarizer":
                continue
            assert (pd.isna(value) and pd.isna(row[key])) or row[key] == pytest.approx(value), key


def test_a_sweep_answered_from_an_earlier_sweeps_replays_keeps_their_loss_tables():
    """A second sweep of the same process answers its cells from the replays the first one ran (proven reuse,
    nothing replayed) and still keeps every cell's loss tables, as the first did: what a report then reads
    instead of measuring again, whatever ran before it."""
    clear_worker_state()
    conversation = build(turns=8, cid="again")
    grid = {"max_tokens": [900, 1_800], "keep_recent_tokens": [250, 500]}
    first, second = (
        sweep(conversation, **grid, summarizers=["mask"], executor="serial", cache=False, progress=False)
        for _ in range(2)
    )
    assert first.results["replayed"].any() and not second.results["replayed"].any()
    for key in first.cells():
        kept = first.lost_and_counted(*key)
        again = second.lost_and_counted(*key)
        assert kept is not None and again is not None, key
        for name in ("anchors", "compactions", "conversation"):
            pd.testing.assert_frame_equal(getattr(again[0], name), getattr(kept[0], name))
        pd.testing.assert_frame_equal(again[1], kept[1])
        pd.testing.assert_frame_equal(
            second.losses(*key, anchors=False).conversation, first.losses(*key, anchors=False).conversation
        )
    clear_worker_state()


# --- settings -----------------------------------------------------------------------------------


def test_relative_settings_and_context_windows(small, tmp_path):
    conversation = small[0]
    s = sweep(
        conversation,
        max_tokens=[0.025, 0.05, 4_000],
        keep_recent_tokens=[0.01],
        context_window="gpt-4o",
        executor="serial",
        cache=tmp_path / "c.sqlite",
        metrics=False,
        progress=False,
    )
    assert list(s.results["max_tokens"]) == [3_200, 6_400, 4_000]
    assert list(s.results["keep_recent_tokens"]) == [1_280] * 3
    assert list(s.results["max_tokens_share"].fillna(-1)) == [0.025, 0.05, -1]
    assert (s.results["context_window"] == 128_000).all()
    assert s.trace(conversation.id, 0.05, 0.01).setting.max_tokens == 6_400
    assert CONTEXT_WINDOWS["claude-sonnet-4"] == 200_000
    from zett_lab.study import resolve_context_window

    assert resolve_context_window("openai:gpt-4o-2024-08-06") == 128_000
    with pytest.raises(SettingError, match="unknown model"):
        resolve_context_window("my-model")
    with pytest.raises(SettingError, match="context_window"):
        sweep(conversation, max_tokens=[0.5], keep_recent_tokens=[100], executor="serial")
    with pytest.raises(SettingError, match=r"\(0, 1\]"):
        sweep(conversation, max_tokens=[1.5], keep_recent_tokens=[100], context_window=1000, executor="serial")


@pytest.mark.parametrize(
    "grid",
    [
        {"max_tokens": [], "keep_recent_tokens": [100]},
        {"max_tokens": [1000], "keep_recent_tokens": []},
        {"max_tokens": [1000], "keep_recent_tokens": [100], "summarizers": []},
        {"max_tokens": [0], "keep_recent_tokens": [100]},
        {"max_tokens": [1000], "keep_recent_tokens": [100], "summarizers": ["no-such-summarizer"]},
        {"max_tokens": [1000], "keep_recent_tokens": [100], "store": "x.sqlite"},
    ],
)
def test_bad_grids_raise_setting_error(small, grid):
    with pytest.raises(SettingError):
        sweep(small[:1], executor="serial", progress=False, **grid)
    with pytest.raises(SettingError):
        sweep([], max_tokens=[1000], keep_recent_tokens=[100], executor="serial")


def test_keep_recent_at_or_above_max_tokens_runs_and_reports(small, tmp_path):
    s = sweep(
        small[:2],
        max_tokens=[2_000],
        keep_recent_tokens=[2_000, 5_000],
        executor="serial",
        cache=tmp_path / "c.sqlite",
        metrics=False,
        progress=False,
    )
    assert s.results["error"].isna().all()
    assert (s.results["steps_over_budget"] > 0).any()


# --- failures and executors -------------------------------------------------------------------------


def test_a_broken_conversation_fails_only_its_cells(small, tmp_path):
    broken = zett_lab.Conversation(
        id="broken", messages=[UserMessage(content="hi"), ToolMessage(tool_call_id="nope", name="x", content="?")]
    )
    s = sweep(
        [small[0], broken],
        max_tokens=[2_000, 4_000],
        keep_recent_tokens=[500],
        executor="serial",
        cache=tmp_path / "c.sqlite",
        metrics=False,
        progress=False,
    )
    bad = s.results[s.results["conversation_id"] == "broken"]
    good = s.results[s.results["conversation_id"] != "broken"]
    assert bad["error"].str.contains("no matching assistant tool call").all()
    assert good["error"].isna().all() and len(good) == 2
    with pytest.raises(ZettLabError, match="failed"):
        s.trace("broken", 2_000, 500)


class DyingExecutor(cf.Executor):
    """Runs the first ``survive`` tasks; every later future fails as if the workers died."""

    def __init__(self, survive: int) -> None:
        self.survive = survive
        self.submitted = 0

    def submit(self, fn, /, *args, **kwargs):
        self.submitted += 1
        future: cf.Future = cf.Future()
        if self.submitted > self.survive:
            future.set_exception(cf.BrokenExecutor("worker process died"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_executor_dying_mid_sweep_keeps_finished_cells_and_rerun_resumes_from_cache(small, tmp_path):
    cache = tmp_path / "c.sqlite"
    grid = {
        "max_tokens": [3_000, 5_000, 8_000],
        "keep_recent_tokens": [500, 1_500, 3_000],
        "summarizers": ["extractive"],
        "cache": cache,
        "metrics": False,
        "progress": False,
    }
    clear_worker_state()
    first = sweep(small[2:4], executor=DyingExecutor(survive=1), **grid)  # one unit: cells of one conversation
    done, lost = first.results[first.results["error"].isna()], first.results[first.results["error"].notna()]
    assert len(done) + len(lost) == 2 * 3 * 3 and 0 < len(done) <= len(lost)
    assert done["conversation_id"].nunique() == 1
    assert lost["error"].str.contains("BrokenExecutor").all()
    made = int(done["model_calls"].sum())
    assert made > 0
    for row in done.itertuples(index=False):  # finished cells are usable
        first.trace(row.conversation_id, row.max_tokens, row.keep_recent_tokens)
    clear_worker_state()  # fresh workers: nothing remembered but the summary cache
    second = sweep(small[2:4], executor="serial", **grid)
    assert second.results["error"].isna().all()
    again = second.results.merge(done[["conversation_id", "max_tokens", "keep_recent_tokens"]])
    assert int(again["cache_hits"].sum()) >= made and int(again["model_calls"].sum()) == 0
    assert second.config["cache_hits"] > 0


def test_default_process_pool_and_dask_give_the_same_results(small, tmp_path):
    distributed = pytest.importorskip("distributed")
    grid = {
        "max_tokens": [4_000, 9_000, 40_000],
        "keep_recent_tokens": [800, 2_500],
        "summarizers": ["anchors:0.1"],
        "cache": tmp_path / "c.sqlite",
        "progress": False,
    }
    local = sweep(small[1:3], executor="serial", **grid)
    clear_worker_state()  # this process remembers the replays: make the others run them
    pooled = sweep(small[1:3], **grid)  # the session's process pool
    clear_worker_state()
    with (
        distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = sweep(small[1:3], executor=client.get_executor(), **grid)
        assert len(remote.config["workers"]) >= 1
    run_columns = list(RUN_COLUMNS)  # how each cell was computed differs between executors, not what it holds
    for other in (pooled, remote):
        pd.testing.assert_frame_equal(local.results.drop(columns=run_columns), other.results.drop(columns=run_columns))
        for key, trace in local.traces():
            assert_same(trace, other.trace(*key))


class SlowModel:
    """A deterministic summarizer that is not offline: sleeps, and records how many calls overlap."""

    retry = RetryOptions(max_retries=0)
    identity = "slow-test-model"
    max_concurrency = 3
    lock = threading.Lock()
    running = 0
    peak = 0

    async def stream(self, request):
        with SlowModel.lock:
            SlowModel.running += 1
            SlowModel.peak = max(SlowModel.peak, SlowModel.running)
        await asyncio.sleep(0.05)
        with SlowModel.lock:
            SlowModel.running -= 1
        text = f"checkpoint of {len(request.messages) - 2} messages"
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content=text)))


def test_provider_summarizer_calls_run_concurrently_within_their_limit(small):
    conversation = next(c for c in small if c.id == "billing-rounding")
    s = sweep(
        conversation,
        max_tokens=[4_000, 5_000, 6_000, 7_000, 8_000, 10_000],
        keep_recent_tokens=[1_000],
        summarizers=[SlowModel()],
        executor="serial",
        cache=False,
        metrics=False,
        progress=False,
    )
    assert 1 < SlowModel.peak <= SlowModel.max_concurrency
    for row in s.results.itertuples(index=False):
        alone = replay(
            conversation, max_tokens=int(row.max_tokens), keep_recent_tokens=1_000, summarizer=SlowModel(), cache=False
        )
        assert_same(s.trace(conversation.id, row.max_tokens, 1_000), alone)


def test_the_tail_starts_while_the_last_unit_runs_and_the_sweep_returns_once_it_is_done(small, monkeypatch):
    """``at_tail`` starts in its own thread as soon as a worker has nothing left (here: while the truncate unit
    waits for it, which it would do until the timeout had the tail waited for the end), once."""
    from zett_lab.study import collect

    released, tails, waited = threading.Event(), [], []
    run_units = collect.run_units

    def held(units):
        if any(unit.label == "truncate" for unit in units):
            waited.append(released.wait(60))
        return run_units(units)

    def tail():
        tails.append(threading.current_thread().name)
        released.set()

    monkeypatch.setattr(collect, "run_units", held)
    grid = {"max_tokens": [6_000], "keep_recent_tokens": [1_000]}
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        s = sweep(small[0], **grid, summarizers=["truncate", "mask"], executor=pool, cache=False, at_tail=tail)
    assert waited == [True]
    assert tails == ["zett-lab-sweep-tail"]
    assert s.results["error"].isna().all() and len(s.results) == 2


def test_a_failing_tail_fails_the_sweep(small):
    def tail():
        raise ValueError("the tail broke")

    with pytest.raises(ValueError, match="the tail broke"):
        sweep(small[0], max_tokens=[6_000], keep_recent_tokens=[1_000], executor="serial", cache=False, at_tail=tail)


# --- files, display -----------------------------------------------------------------------------------


def test_save_load_round_trip(small, tmp_path):
    s = sweep(
        small[:2],
        max_tokens=[3_000, 50_000],
        keep_recent_tokens=[700],
        summarizers=["anchors:0.1", "mask"],
        executor="serial",
        cache=tmp_path / "c.sqlite",
        progress=False,
    )
    path = s.save(tmp_path / "run")
    with pytest.raises(zett_lab.InputError, match="already exists"):
        s.save(tmp_path / "run")
    s.save(tmp_path / "run", overwrite=True)  # replacing a saved sweep, when asked, is fine
    loaded = Sweep.load(path)
    pd.testing.assert_frame_equal(s.results, loaded.results)
    assert loaded.config == s.config
    for key, trace in s.traces():
        assert_same(trace, loaded.trace(*key))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(zett_lab.InputError, match="already exists"):
        s.save(tmp_path / "other")
    with pytest.raises(zett_lab.InputError, match="exists and is not a saved sweep; refusing to replace it"):
        s.save(tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "keep.txt").read_text() == "mine"
    html = s._repr_html_()
    assert "<table" in html and small[0].id in html
    assert "Sweep(2 conversations" in repr(s)


def test_workers_write_replays_to_disk_and_the_engine_events_stay_there(small, tmp_path):
    """On the default process pool no replay's rows or engine events stay in the sweep's memory (the workers
    wrote them beside the tables); traces read back equal fresh replays, saved and loaded, and a sweep saved
    with the events inside sweep.json (as before) still loads them."""
    s = sweep(small[:2], max_tokens=[3_000, 5_000], keep_recent_tokens=[700], cache=False, progress=False)
    assert s.config["executor"].startswith("process pool") and s.store.sources
    for source in s.store.sources.values():
        assert source.held_events is None
        assert source.folder.writer.events_file(source.source_id).exists()
    for key, trace in s.traces():
        conversation = next(c for c in small if c.id == key.conversation_id)
        assert_same(trace, replay(conversation, key.setting, cache=False))
    path = s.save(tmp_path / "run")
    document = json.loads((path / "sweep.json").read_text())
    assert all("engine_events" not in info for info in document["sources"].values())
    loaded = Sweep.load(path)
    for key, trace in s.traces():
        assert loaded.trace(*key).engine_events == trace.engine_events
    for sid, info in document["sources"].items():  # the layout of earlier saves
        events_file = path / "sources" / f"{sid}.engine-events.json"
        info["engine_events"] = json.loads(events_file.read_text())
        events_file.unlink()
    (path / "sweep.json").write_text(json.dumps(document))
    earlier = Sweep.load(path)
    for key, trace in s.traces():
        assert_same(earlier.trace(*key), trace)


def test_a_sweeps_own_folder_keeps_the_engine_events_as_a_pickle_and_a_saved_one_as_json(tmp_path):
    """The events read back are the ones written in both kinds of folder; the temporary folder's are a pickle (not
    one of its tables), and a damaged one says to run the sweep again."""
    from zett_lab.errors import InputError
    from zett_lab.study.sources import SourceFolder

    events = [{"step": 3, "applied": True, "compressed_to": 7, "kept_to": 9, "summary": "[user] ü\n" * 3}]
    own, saved = SourceFolder(), SourceFolder(tmp_path / "saved")
    for folder in (own, saved):
        folder.write_events("s1", events)
        assert folder.read_events("s1") == events and folder.tables("s1") == []
    assert own.writer.events_file("s1").suffix == ".pickle" and saved.writer.events_file("s1").suffix == ".json"
    own.writer.events_file("s1").write_bytes(b"\x80\x05broken")
    with pytest.raises(InputError, match="engine events.*run the sweep again"):
        own.read_events("s1")


def test_too_few_units_to_balance_are_cut_by_keep_recent_tokens(small):
    """With two workers and fewer units than :data:`UNITS_PER_WORKER` per worker, the costliest conversations
    are cut into units by keep_recent_tokens (one worker runs everything as it comes: nothing is cut), and every
    cell equals the uncut sweep's."""
    from zett_lab.study.plan import _keep_parts, replay_cost

    conversations = [c for c in small if c.id in ("auth-refresh-token", "api-v2-deprecation", "billing-rounding")]
    costs = [replay_cost(c) for c in conversations]
    parts = _keep_parts(costs, 1, 2, 4)
    assert sum(parts) >= 8 and max(parts) > min(parts)
    grid = dict(max_tokens=[3_000, 6_000], keep_recent_tokens=[500, 1_000, 1_500, 2_000], cache=False, progress=False)
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        cut = sweep(conversations, executor=pool, **grid)
    whole = sweep(conversations, executor="serial", **grid)
    assert (cut.config["units"], whole.config["units"]) == (sum(parts), 3)
    cells = list(cut.traces())
    assert len(cells) == len(list(whole.traces())) == 3 * 2 * 4
    for key, trace in cells:
        assert_same(trace, whole.trace(*key))


def test_keep_groups_are_cut_only_as_far_as_balance_needs():
    """Many conversations (the fixtures' shape: 7, one costing more than a worker's share): the big one is cut
    in two, not shredded into groups of two keep values, the others stay whole; one long conversation under
    4 summarizers on 2 workers (4 units cannot balance: mask costs twice the others) is cut into 8 units; one
    worker cuts nothing."""
    from zett_lab.study.plan import _keep_groups, _keep_parts

    fixtures = [1.0, 1.0, 2.0, 3.0, 5.0, 12.0, 30.0]
    assert _keep_parts(fixtures, 1, 2, 10) == [1, 1, 1, 1, 1, 1, 2]
    assert _keep_groups(list(range(10)), 2) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert _keep_parts([100.0], 4, 2, 2) == [2]
    assert _keep_parts([100.0], 4, 2, 1) == [1]
    assert _keep_parts(fixtures, 1, 1, 10) == [1] * 7


class RecordingExecutor(cf.Executor):
    """Two workers' worth of tasks, each run at once and recorded; tasks holding a conversation of ``fail``
    fail as if their worker died."""

    _max_workers = 2

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.fail = fail
        self.tasks: list[list] = []

    def submit(self, fn, /, *args, **kwargs):
        units = args[0]
        self.tasks.append(units)
        future: cf.Future = cf.Future()
        if any(unit.conversation.id in self.fail for unit in units):
            future.set_exception(cf.BrokenExecutor("worker process died"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_units_of_a_small_conversation_run_as_one_task_and_a_lost_task_costs_only_its_cells(small, monkeypatch):
    """Units of one small conversation go to one worker together (it builds that conversation's anchor index
    once), never past :data:`BATCH_SHARE` of a worker's part; the cells equal those of one task per unit,
    and a task that fails marks its own cells and no others."""
    from zett_lab.study import collect
    from zett_lab.study.collect import BATCH_SHARE
    from zett_lab.study.plan import _keep_parts, replay_cost

    grid = dict(
        max_tokens=[3_000, 6_000],
        keep_recent_tokens=[500, 1_000],
        summarizers=["extractive", "truncate", "anchors"],
        cache=False,
        progress=False,
    )
    recorded = RecordingExecutor()
    clear_worker_state()  # every cell replayed here, none answered from an earlier test's replays
    batched = sweep(small, executor=recorded, **grid)
    costs = {c.id: replay_cost(c) for c in small}
    budget = BATCH_SHARE * sum(costs.values()) * 3 * 4 / 2
    by_conversation: dict[str, list[int]] = {}
    for task in recorded.tasks:
        assert len({unit.conversation.id for unit in task}) == 1
        assert len(task) == 1 or sum(costs[unit.conversation.id] * len(unit.cells) for unit in task) <= budget
        by_conversation.setdefault(task[0].conversation.id, []).append(len(task))
    cheapest, *_, costliest = sorted(costs, key=costs.get)
    parts = dict(zip(costs, _keep_parts(list(costs.values()), 3, 2, 2), strict=True))
    assert by_conversation[cheapest] == [3] and by_conversation[costliest] == [1] * 3 * parts[costliest]
    assert len(recorded.tasks) < batched.config["units"] == 3 * sum(parts.values())

    monkeypatch.setattr(collect, "BATCH_SHARE", 0.0)
    alone = RecordingExecutor()
    clear_worker_state()
    one_each = sweep(small, executor=alone, **grid)
    assert all(len(task) == 1 for task in alone.tasks) and len(alone.tasks) == 3 * sum(parts.values())
    timing = ["seconds", "worker"]
    pd.testing.assert_frame_equal(batched.results.drop(columns=timing), one_each.results.drop(columns=timing))

    monkeypatch.undo()
    clear_worker_state()
    failing = sweep(small, executor=RecordingExecutor(fail=(cheapest,)), **grid)
    lost = failing.results["conversation_id"] == cheapest
    assert failing.results.loc[lost, "error"].str.contains("BrokenExecutor").all() and lost.sum() == 3 * 4
    assert failing.results.loc[~lost, "error"].isna().all()


# --- decision boundaries ------------------------------------------------------------------------------


def test_decision_boundaries_along_max_tokens_are_confirmed_by_replays(small):
    conversation = next(c for c in small if c.id == "search-p95-regression")
    b = decision_boundaries(
        conversation,
        "truncate",
        keep_recent_tokens=2_000,
        max_tokens_range=(6_000, 16_000),
        cache=False,
        progress=False,
    )
    assert b.values and b.segments["start"].iloc[0] == 6_000 and b.segments["end"].iloc[-1] == 16_000
    for value in b.values:
        before = replay(
            conversation, max_tokens=value - 1, keep_recent_tokens=2_000, summarizer="truncate", cache=False
        )
        after = replay(conversation, max_tokens=value, keep_recent_tokens=2_000, summarizer="truncate", cache=False)
        assert schedule(before) != schedule(after)
    for segment in b.segments.itertuples(index=False):  # inside a segment the schedule does not change
        middle = int(segment.start + segment.end) // 2
        inside = replay(conversation, max_tokens=middle, keep_recent_tokens=2_000, summarizer="truncate", cache=False)
        start = replay(
            conversation, max_tokens=int(segment.start), keep_recent_tokens=2_000, summarizer="truncate", cache=False
        )
        assert schedule(inside) == schedule(start)


def test_decision_boundaries_along_keep_recent_tokens(small):
    conversation = next(c for c in small if c.id == "billing-rounding")
    b = decision_boundaries(
        conversation,
        "truncate",
        max_tokens=12_000,
        keep_recent_tokens_range=(30_000, None),
        cache=False,
        progress=False,
    )
    assert b.segments["end"].isna().iloc[-1]  # the last region is unbounded
    b = decision_boundaries(
        conversation,
        "truncate",
        max_tokens=12_000,
        keep_recent_tokens_range=(3_000, 7_000),
        cache=False,
        progress=False,
    )
    assert b.values and b.segments["end"].iloc[-1] == 7_000
    for value in b.values:
        before = replay(
            conversation, max_tokens=12_000, keep_recent_tokens=value - 1, summarizer="truncate", cache=False
        )
        after = replay(conversation, max_tokens=12_000, keep_recent_tokens=value, summarizer="truncate", cache=False)
        assert schedule(before) != schedule(after)
    with pytest.raises(SettingError):
        decision_boundaries(conversation, "truncate", max_tokens=12_000)


# --- optimisation helpers -----------------------------------------------------------------------------


def _table():
    rows = []
    for summ, m, cost, recall, survival in [
        ("a", 1000, 100, 0.5, 1.0),
        ("a", 2000, 200, 0.8, 1.0),
        ("a", 3000, 300, 0.95, 0.5),
        ("a", 4000, 400, 0.97, 1.0),
        ("b", 1000, 150, 0.9, 1.0),
        ("b", 2000, 250, 0.7, 1.0),
        ("b", 5000, 500, float("nan"), float("nan")),
    ]:
        for conversation in ("x", "y"):
            rows.append(
                {
                    "conversation_id": conversation,
                    "summarizer": summ,
                    "max_tokens": m,
                    "keep_recent_tokens": 10,
                    "total_input_tokens": cost,
                    "needed_anchor_recall": recall,
                    "constraint_survival": survival,
                    "error": None,
                }
            )
    rows.append(
        {
            "conversation_id": "x",
            "summarizer": "c",
            "max_tokens": 1,
            "keep_recent_tokens": 10,
            "total_input_tokens": 1,
            "needed_anchor_recall": 1.0,
            "constraint_survival": 1.0,
            "error": "boom",
        }
    )
    return pd.DataFrame(rows)


def test_pareto_front():
    front = pareto_front(_table())  # b 5000 compacted nowhere: its recall is undefined, it is no point
    assert list(zip(front["summarizer"], front["max_tokens"], strict=True)) == [
        ("a", 1000),
        ("b", 1000),
        ("a", 3000),
        ("a", 4000),
    ]
    assert list(front["total_input_tokens"]) == [200, 300, 600, 800]  # summed over both conversations
    assert list(front["conversations_with_loss"]) == [2, 2, 2, 2]
    best = pareto_front(_table(), nan="best")  # asked for: undefined counts as perfect recall
    assert ("b", 5000) in set(zip(best["summarizer"], best["max_tokens"], strict=True))
    lower = pareto_front(_table(), loss="constraint_survival", maximize=False, nan="best")  # best: 0 here
    assert list(zip(lower["summarizer"], lower["max_tokens"], lower["constraint_survival"], strict=True)) == [
        ("a", 1000, 1.0),
        ("a", 3000, 0.5),
        ("b", 5000, 0.0),
    ]
    with pytest.raises(SettingError, match="no column"):
        pareto_front(_table(), loss="nope")


def test_recommend_dict_and_string_forms():
    # _table() has no steps_over_budget or lost_but_needed: the default objectives present are tokens only, so the
    # recommendation is the cheapest setting meeting the constraints (means per conversation, not sums as before).
    table = _table()
    best = recommend(table, {"needed_anchor_recall": (">=", 0.9), "constraint_survival": ("==", 1)})
    assert (best.summarizer, best.max_tokens) == ("b", 1000) and best.figures["total_input_tokens"] == 150
    same = recommend(table, "needed_anchor_recall >= 0.9 and constraint_survival == 1")
    assert (same.summarizer, same.max_tokens) == ("b", 1000)
    strict = recommend(table, "needed_anchor_recall >= 0.96, constraint_survival = 1")
    assert (strict.summarizer, strict.max_tokens) == ("a", 4000)
    # A constraint no setting meets no longer raises (issue 29): it rules nothing out, and the verdict says so.
    unmet = recommend(table, "needed_anchor_recall >= 0.99", nan="drop")
    [check] = unmet.constraints
    assert not check.applied and check.met == 0 and check.best == 0.97
    assert "No setting meets needed-anchor recall ≥ 0.99 in every conversation" in unmet.verdict
    for bad in ["needed_anchor_recall >= __import__('os')", "recall >=", "x ~ 1", ""]:
        with pytest.raises(SettingError):
            parse_constraints(bad)
    with pytest.raises(SettingError, match="no column"):
        recommend(table, "nonexistent >= 1")
    assert parse_constraints({"a": (">", 1)}) == [("a", ">", 1.0)]
    with pytest.raises(NoFeasibleSetting, match="failed"):
        recommend(table[table["summarizer"] == "c"])  # its only setting failed


def test_recommend_on_a_real_sweep(small, tmp_path):
    s = sweep(
        small[2:4],
        max_tokens=[6_000, 12_000, 100_000],
        keep_recent_tokens=[1_000, 3_000],
        summarizers=["anchors:0.1", "mask"],
        executor="serial",
        cache=tmp_path / "c.sqlite",
        progress=False,
    )
    choice = recommend(s, "constraint_survival >= 0.5", objectives=["total_input_tokens"])
    meeting = choice.ranking[choice.ranking["ruled_out_by"].isna()]
    assert choice.figures["total_input_tokens"] == meeting["total_input_tokens"].min()
    s.trace(small[2].id, choice.max_tokens, choice.keep_recent_tokens, choice.summarizer)
    assert len(pareto_front(s)) >= 1


def test_a_summarizer_without_a_list_price_keeps_its_cells(small, tmp_path):
    from tests.helpers import CountingSummarizer

    result = zett_lab.sweep(
        small,
        max_tokens=[3_000],
        keep_recent_tokens=[1_000],
        summarizers=[CountingSummarizer()],
        executor="serial",
        progress=False,
        cache=tmp_path / "c.sqlite",
    )
    assert result.results["error"].isna().all()
    summarized = result.results["compactions_applied"] > 0
    assert summarized.any()
    # only the money of the summary calls is unknown; a conversation never summarized is fully priced
    assert result.results.loc[summarized, "cost_error"].str.contains("no price for model").all()
    assert result.results.loc[~summarized, "cost_error"].isna().all()


def test_recommend_constrains_columns_outside_the_metric_catalogue():
    """A column with no catalogue direction is judged in the direction its constraint asks for."""
    table = _table().assign(compactions_applied=lambda t: t["max_tokens"] // 1000)
    choice = recommend(table, "compactions_applied <= 1", over="all")
    assert choice.max_tokens == 1000 and choice.figures["compactions_applied"] == 1.0
    [never] = recommend(table, "compactions_applied <= 0", over="all").constraints
    assert not never.applied and never.best == 1
    [never] = recommend(table, "compactions_applied >= 9", over="mean").constraints
    assert not never.applied and never.best == 5
    with pytest.raises(SettingError, match="nan must be 'best' or 'drop'"):
        recommend(table, "compactions_applied <= 1", nan="ignore")


def test_the_default_pool_and_the_command_collect_in_batches_and_a_users_process_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """zett_lab's own processes run the cyclic collector less often (a replay makes millions of short-lived
    objects); the ``zett-lab`` command sets the caller's thresholds back when it ends, even when it fails."""
    import gc

    from zett_lab.collector import BATCH_THRESHOLDS
    from zett_lab.show import cli
    from zett_lab.study.executors import default_executor

    clear_worker_state()
    assert default_executor().submit(gc.get_threshold).result() == BATCH_THRESHOLDS
    before = gc.get_threshold()
    assert before != BATCH_THRESHOLDS
    seen = []
    monkeypatch.setitem(cli.COMMANDS, "sweep", lambda args: seen.append(gc.get_threshold()) or 0)
    monkeypatch.setitem(cli.COMMANDS, "replay", lambda args: 1 / 0 if seen.append(gc.get_threshold()) is None else 0)
    assert cli.main(["sweep", "x.json", "--max-tokens", "8k", "--keep-recent-tokens", "2k", "-o", "o.parquet"]) == 0
    assert gc.get_threshold() == before
    with pytest.raises(ZeroDivisionError):
        cli.main(["replay", "x.json", "--max-tokens", "8k", "--keep-recent-tokens", "2k", "--debug"])
    assert gc.get_threshold() == before
    assert seen == [BATCH_THRESHOLDS, BATCH_THRESHOLDS]
