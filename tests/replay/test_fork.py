"""Forked replays equal fresh ones: on every fixture, across a grid, and from every mark that the proof allows."""

from __future__ import annotations

import pytest

from zett_lab.errors import SettingError
from zett_lab.replay import ObservationMaskingCompaction, SplitTurnCompaction, replay
from zett_lab.replay.engine import engine_reuse
from zett_lab.replay.fork import Fork
from zett_lab.replay.run import replay_forkable
from zett_lab.replay.setting import ReplayOptions, Setting
from zett_lab.study import clear_worker_state, prefix_regions, region, same_replay, sweep
from zett_lab.study.reuse import ForkPlanner
from zett_lab.tokens import count_tokens

GRID_MAX = [3_000, 6_000, 12_000, 48_000]
GRID_KEEP = [500, 2_000, 6_000]


def test_every_forked_cell_of_a_grid_equals_its_fresh_replay(fixture_conversations, tmp_path):
    cache = tmp_path / "cache.sqlite"
    clear_worker_state()
    s = sweep(
        fixture_conversations,
        max_tokens=GRID_MAX,
        keep_recent_tokens=GRID_KEEP,
        summarizers=["truncate"],
        executor="serial",
        cache=cache,
        metrics=False,
        progress=False,
    )
    assert s.results["error"].isna().all()
    forked = s.results[s.results["shared_steps"] > 0]
    assert s.config["forked"] == len(forked) > 0
    # Every fixture with more than one turn has a cell that starts from another replay's turn.
    several_turns = {c.id for c in fixture_conversations if len(c.turns) > 1}
    assert set(forked["conversation_id"]) == several_turns
    by_id = {c.id: c for c in fixture_conversations}
    for row in s.results.itertuples(index=False):
        alone = replay(
            by_id[row.conversation_id],
            max_tokens=int(row.max_tokens),
            keep_recent_tokens=int(row.keep_recent_tokens),
            summarizer="truncate",
            cache=cache,
        )
        assert same_replay(s.trace(row.conversation_id, row.max_tokens, row.keep_recent_tokens), alone) == [], tuple(
            row
        )[:4]


@pytest.mark.parametrize("setting", [(15_000, 1_000), (20_000, 6_000), (31_000, 3_000)])
def test_a_fork_from_every_proven_mark_equals_the_fresh_replay(fixture_conversations, setting):
    """From each mark whose proven rectangle holds the setting, the forked replay is the fresh one."""
    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    max_tokens, keep = setting
    source, run = replay_forkable(
        conversation,
        Setting(max_tokens=60_000, keep_recent_tokens=8_000, summarizer="extractive"),
        ReplayOptions(cache=False),
    )
    assert run is not None and len(run.marks) == len(conversation.turns) - 1
    fresh = replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="extractive", cache=False)
    regions = prefix_regions(source, [mark.steps for mark in run.marks])
    usable = [mark for mark, where in zip(run.marks, regions, strict=True) if where.contains(max_tokens, keep)]
    assert usable, "the grid setting should share at least the first turn"
    for mark in usable:
        forked, again = replay_forkable(
            conversation,
            Setting(max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="extractive"),
            ReplayOptions(cache=False),
            fork=Fork(run, mark),
        )
        assert same_replay(forked, fresh) == [], mark.turn
        assert again is not None and [m.turn for m in again.marks] == list(range(1, len(conversation.turns)))
    # The rectangles are nested turn by turn, and each holds the replay's own region.
    full = region(source)
    for earlier, later in zip(regions, [*regions[1:], full], strict=True):
        assert earlier.m_lo <= later.m_lo and earlier.k_lo <= later.k_lo
        assert earlier.contains(60_000, 8_000)


def test_on_every_fixture_a_fork_from_every_mark_that_holds_the_setting_equals_the_fresh_replay(fixture_conversations):
    """Not only the marks a sweep picks: every mark whose proven rectangle holds a grid setting, on every fixture."""
    checked = 0
    for conversation in fixture_conversations:
        total = count_tokens(conversation.messages)
        keep = max(200, total // 10)
        # The source never compacts, so its early turns are shared with every lower max_tokens.
        source, run = replay_forkable(
            conversation,
            Setting(max_tokens=total + 1, keep_recent_tokens=keep, summarizer="truncate"),
            ReplayOptions(cache=False),
        )
        assert run is not None
        multi_turn = len(conversation.turns) > 1
        assert bool(run.marks) == multi_turn, conversation.id
        regions = prefix_regions(source, [mark.steps for mark in run.marks])
        forks = 0
        first_turn = count_tokens(conversation.messages[: conversation.turns[0].end])
        # Between the first turn and the whole: the first turn is shared, the rest compacts.
        for max_tokens in ((first_turn + total) // 2, total * 6 // 10, total * 3 // 10):
            fresh = replay(
                conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="truncate", cache=False
            )
            usable = [m for m, where in zip(run.marks, regions, strict=True) if where.contains(max_tokens, keep)]
            for mark in usable:
                forked, _ = replay_forkable(
                    conversation,
                    Setting(max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="truncate"),
                    ReplayOptions(cache=False),
                    fork=Fork(run, mark),
                )
                assert same_replay(forked, fresh) == [], (conversation.id, max_tokens, mark.turn)
                forks += 1
        assert bool(forks) == multi_turn, conversation.id  # every fixture with several turns forks somewhere
        checked += forks
    assert checked >= 20


ENGINES = {"stock": None, "split": SplitTurnCompaction, "masking": ObservationMaskingCompaction}


def test_a_sweep_over_engines_equals_fresh_replays_and_forks_only_where_an_engine_declares_it(
    fixture_conversations, tmp_path
):
    chosen = [
        c for c in fixture_conversations if c.id in ("billing-rounding", "search-p95-regression", "swe-httpq-4821")
    ]
    cache = tmp_path / "cache.sqlite"
    clear_worker_state()
    s = sweep(
        chosen,
        max_tokens=[4_000, 15_000, 20_000],
        keep_recent_tokens=[1_000, 3_000],
        summarizers=["truncate"],
        engines=ENGINES,
        executor="serial",
        cache=cache,
        metrics=False,
        progress=False,
    )
    results = s.results
    assert results["error"].isna().all() and len(results) == len(chosen) * len(ENGINES) * 6
    by_id = {c.id: c for c in chosen}
    for row in results.itertuples(index=False):
        alone = replay(
            by_id[row.conversation_id],
            max_tokens=int(row.max_tokens),
            keep_recent_tokens=int(row.keep_recent_tokens),
            summarizer="truncate",
            engine=ENGINES[row.engine],
            cache=cache,
        )
        cell = s.trace(row.conversation_id, row.max_tokens, row.keep_recent_tokens, engine=row.engine)
        assert same_replay(cell, alone) == [], tuple(row)[:5]
    shared = results.groupby("engine")["shared_steps"].sum()
    assert shared["stock"] > 0 and shared["split"] > 0
    # An engine that declares nothing shares nothing: every cell is its own replay from the first turn.
    masking = results[results["engine"] == "masking"]
    assert masking["replayed"].eq(True).all() and masking["shared_steps"].eq(0).all()
    assert s.config["engine_reuse"] == {
        "stock": ["max_tokens", "keep_recent_tokens"],
        "split": ["max_tokens"],
        "masking": [],
    }


def test_a_fork_is_proven_only_along_the_limits_an_engine_declares(fixture_conversations):
    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    keep = 2_000
    for engine, other_keep_forks in ((None, True), (SplitTurnCompaction, False)):
        trace, run = replay_forkable(
            conversation,
            Setting(max_tokens=60_000, keep_recent_tokens=keep, summarizer="truncate", engine=engine),
            ReplayOptions(cache=False),
        )
        clear_worker_state()
        planner = ForkPlanner(("billing-rounding", str(engine)), "truncate", None, engine_reuse(engine))
        planner.add(trace, run)
        assert planner.fork_for(15_000, keep) is not None  # along max_tokens: proven for both
        assert (planner.fork_for(15_000, keep + 500) is not None) == other_keep_forks
    masked, run = replay_forkable(
        conversation,
        Setting(max_tokens=60_000, keep_recent_tokens=keep, summarizer="truncate", engine=ObservationMaskingCompaction),
        ReplayOptions(cache=False),
    )
    clear_worker_state()
    planner = ForkPlanner(("billing-rounding", "masking"), "truncate", None, engine_reuse(ObservationMaskingCompaction))
    planner.add(masked, run)
    assert planner.fork_for(15_000, keep) is None and planner.fork_for(60_000, keep) is None
    # Without limits the prefix proof shrinks to the replayed point: nothing else is ever held by it.
    assert all(r.m_lo == r.m_hi == 60_000 for r in prefix_regions(masked, [m.steps for m in run.marks]))


def test_a_fork_into_another_summarizer_only_before_the_first_summary_attempt(fixture_conversations):
    """Until the engine first asks for a summary the summarizer has done nothing: up to there it is shared."""
    conversation = next(c for c in fixture_conversations if c.id == "billing-rounding")
    _, run = replay_forkable(
        conversation,
        Setting(max_tokens=20_000, keep_recent_tokens=2_000, summarizer="truncate"),
        ReplayOptions(cache=False),
    )
    assert run is not None
    before = [m for m in run.marks if m.compactions == 0]
    after = [m for m in run.marks if m.compactions > 0]
    assert before and after
    fresh = replay(conversation, max_tokens=20_000, keep_recent_tokens=2_000, summarizer="extractive", cache=False)
    for mark in before:
        forked, _ = replay_forkable(
            conversation,
            Setting(max_tokens=20_000, keep_recent_tokens=2_000, summarizer="extractive"),
            ReplayOptions(cache=False),
            fork=Fork(run, mark),
        )
        assert same_replay(forked, fresh) == [], mark.turn
    with pytest.raises(SettingError, match="cannot fork"):
        replay_forkable(
            conversation,
            Setting(max_tokens=20_000, keep_recent_tokens=2_000, summarizer="extractive"),
            ReplayOptions(cache=False),
            fork=Fork(run, after[0]),
        )
    with pytest.raises(SettingError, match="cannot fork"):
        replay_forkable(
            conversation,
            Setting(max_tokens=20_000, keep_recent_tokens=2_000, summarizer="truncate", engine=SplitTurnCompaction),
            ReplayOptions(cache=False),
            fork=Fork(run, before[0]),
        )


def test_a_sweep_forks_across_summarizers_and_every_cell_equals_its_fresh_replay(fixture_conversations, tmp_path):
    chosen = [c for c in fixture_conversations if c.id in ("billing-rounding", "cache-layer-migration")]
    cache = tmp_path / "cache.sqlite"
    clear_worker_state()
    s = sweep(
        chosen,
        max_tokens=[20_000, 200_000],
        keep_recent_tokens=[3_000],
        summarizers=["truncate", "mask"],
        executor="serial",
        cache=cache,
        metrics=False,
        progress=False,
    )
    results = s.results
    assert results["error"].isna().all()
    # Of the two summarizers' replays that never compact, the one run second (whichever the plan's order puts
    # there) starts where the first one's last turn began; the first has nothing to start from.
    never = results[results["max_tokens"] == 200_000]
    shared = never.groupby("conversation_id")["shared_steps"].agg(lambda steps: sorted(steps > 0))
    assert shared.map(lambda flags: flags == [False, True]).all(), shared
    by_id = {c.id: c for c in chosen}
    for row in results.itertuples(index=False):
        alone = replay(
            by_id[row.conversation_id],
            max_tokens=int(row.max_tokens),
            keep_recent_tokens=int(row.keep_recent_tokens),
            summarizer=row.summarizer,
            cache=cache,
        )
        assert (
            same_replay(s.trace(row.conversation_id, row.max_tokens, row.keep_recent_tokens, row.summarizer), alone)
            == []
        ), tuple(row)[:4]
