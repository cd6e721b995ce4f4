"""Forked replays equal fresh ones: on every fixture, across a grid, and from every mark that the proof allows."""

from __future__ import annotations

import pytest

from zett_lab.replay import replay
from zett_lab.replay.fork import Fork
from zett_lab.replay.run import replay_forkable
from zett_lab.study import clear_worker_state, prefix_regions, region, same_replay, sweep

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
        conversation, max_tokens=60_000, keep_recent_tokens=8_000, summarizer="extractive", cache=False
    )
    assert run is not None and len(run.marks) == len(conversation.turns) - 1
    fresh = replay(conversation, max_tokens=max_tokens, keep_recent_tokens=keep, summarizer="extractive", cache=False)
    regions = prefix_regions(source, [mark.steps for mark in run.marks])
    usable = [mark for mark, where in zip(run.marks, regions, strict=True) if where.contains(max_tokens, keep)]
    assert usable, "the grid setting should share at least the first turn"
    for mark in usable:
        forked, again = replay_forkable(
            conversation,
            max_tokens=max_tokens,
            keep_recent_tokens=keep,
            summarizer="extractive",
            cache=False,
            fork=Fork(run, mark),
        )
        assert same_replay(forked, fresh) == [], mark.turn
        assert again is not None and [m.turn for m in again.marks] == list(range(1, len(conversation.turns)))
    # The rectangles are nested turn by turn, and each holds the replay's own region.
    full = region(source)
    for earlier, later in zip(regions, [*regions[1:], full], strict=True):
        assert earlier.m_lo <= later.m_lo and earlier.k_lo <= later.k_lo
        assert earlier.contains(60_000, 8_000)
