"""What a report states, computed once by the report stage (:func:`zett_lab.report.build_report_data`)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from tests.helpers import coding_conversation
from zett_lab import SettingError
from zett_lab.report import build_report_data, default_grid, report_sweep, tables
from zett_lab.report.choices import recommend_report_setting
from zett_lab.tokens import count_tokens

GRID = {"max_tokens": [900, 1800], "keep_recent_tokens": [250, 500]}
SUMMARIZERS = ["truncate", "mask"]


def test_report_data_states_what_was_studied_and_what_failed_and_is_frozen() -> None:
    """The facts the document lays out are the report stage's: sizes by the engine's counter, files by name
    only, failures counted per cause; the data cannot be changed after it is computed."""
    conversations = [coding_conversation(turns=6, cid="plain-session"), coding_conversation(turns=3, cid="short")]
    result = report_sweep(conversations, SUMMARIZERS, GRID, executor="serial", cache=False)
    data = build_report_data(sweep=result)
    studied = data.studied
    assert studied["summarizers"] == SUMMARIZERS and studied["grid"] == GRID
    assert studied["replays"] == len(conversations) * len(SUMMARIZERS) * 4 == len(data.entries)
    sizes = {c["id"]: c for c in studied["conversations"]}
    assert set(sizes) == {"plain-session", "short"}
    for conversation in conversations:
        facts = sizes[conversation.id]
        assert facts["tokens"] == count_tokens(conversation.messages)
        assert facts["messages"] == len(conversation.messages) and facts["turns"] == len(conversation.turns)
    assert data.failed["replays"] == data.attempted == len(data.results) + data.failed["unmeasured_replays"]
    assert data.failed["summary_calls"] == data.failed["cells"] == data.failed["settings_left_out"] == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        data.results = pd.DataFrame()  # type: ignore[misc]
    with pytest.raises(SettingError, match="at least one trace"):
        build_report_data()


def test_a_setting_with_a_failed_replay_is_never_recommended() -> None:
    def row(summarizer, max_tokens, conversation, cost, error=None):
        return {
            "conversation_id": conversation,
            "summarizer": summarizer,
            "max_tokens": max_tokens,
            "keep_recent_tokens": 100,
            "total_input_tokens": cost,
            "lost_but_needed": 0.0,
            "needed_anchor_recall": 1.0,
            "error": error,
        }

    # Setting "cheap" ran in one conversation only: summed over what ran, it would look cheapest.
    results = pd.DataFrame(
        [
            row("steady", 1000, "x", 100),
            row("steady", 1000, "y", 100),
            row("cheap", 1000, "x", 60),
            row("cheap", 1000, "y", float("nan"), error="summary failed: provider exploded"),
        ]
    )
    for constraints in (None, "needed_anchor_recall >= 0.5"):
        chosen = recommend_report_setting(results, constraints)
        assert chosen["summarizer"] == "steady", constraints
    assert recommend_report_setting(results[results["summarizer"] == "cheap"]) is None


def test_default_grid_scales_with_the_conversations(fixture_conversations) -> None:
    grid = default_grid(fixture_conversations)
    assert len(grid["max_tokens"]) == 3 and len(grid["keep_recent_tokens"]) == 2
    assert max(grid["keep_recent_tokens"]) < min(grid["max_tokens"])
    assert default_grid([coding_conversation(turns=2)])["max_tokens"][0] >= 2000


def test_the_default_grid_stays_inside_the_primary_models_context_window(fixture_conversations) -> None:
    """Conversations longer than the model's window are scaled to the window: no max_tokens the model cannot take."""
    uncapped = default_grid(fixture_conversations)
    assert default_grid(fixture_conversations, 10 * max(uncapped["max_tokens"])) == uncapped
    assert default_grid(fixture_conversations, "gpt-4o") == uncapped  # 128k: the fixtures fit
    assert default_grid(fixture_conversations, "a-model-without-a-listed-window") == uncapped
    capped = default_grid(fixture_conversations, 8_000)
    assert capped == {"max_tokens": [2_000, 4_000, 8_000], "keep_recent_tokens": [500, 1_000]}
    assert max(uncapped["max_tokens"]) > 8_000
    with pytest.raises(SettingError, match="context_window must be positive"):
        default_grid(fixture_conversations, 0)


def test_the_default_grid_counting_conversations_only_past_the_window_is_the_grid_of_their_full_counts(
    fixture_conversations, monkeypatch
) -> None:
    """Each conversation is tokenized only until it is longer than the window (count_tokens_past: exact below
    the limit, above it past it), and the grid is the one of every conversation counted in full."""
    from zett_lab.report import sweep as report_sweep_module
    from zett_lab.tokens import count_tokens, count_tokens_past

    sizes = sorted(count_tokens(c.messages) for c in fixture_conversations)
    limits = {0, 1, 8_000, 10**9, *sizes, *(s - 1 for s in sizes), *(s + 1 for s in sizes)}
    for conversation in fixture_conversations:
        total = count_tokens(conversation.messages)
        for limit in limits:
            past = count_tokens_past(conversation.messages, limit)
            assert past == total if total <= limit else limit < past <= total
    windows = sorted(limits - {0, 1})
    subsets = [fixture_conversations, fixture_conversations[:4], fixture_conversations[2:3]]
    grids = [default_grid(chosen, window) for chosen in subsets for window in windows]
    monkeypatch.setattr(report_sweep_module, "count_tokens_past", lambda messages, limit: count_tokens(messages))
    assert grids == [default_grid(chosen, window) for chosen in subsets for window in windows]


def test_a_report_sweeps_tail_counts_every_conversations_tokens_then_does_the_callers_work(monkeypatch) -> None:
    """What the studied facts count is counted at the sweep's tail (memoized), before what the caller asked for."""
    from zett_lab.report import sweep as report_sweep_module

    done: list[str] = []
    monkeypatch.setattr(report_sweep_module, "count_tokens", lambda messages: done.append(len(messages)))
    conversations = [coding_conversation(turns=4, cid="first"), coding_conversation(turns=2, cid="second")]
    report_sweep(conversations, ["mask"], GRID, executor="serial", cache=False, at_tail=lambda: done.append("then"))
    assert done == [len(conversations[0].messages), len(conversations[1].messages), "then"]


def test_a_report_sweep_on_the_local_pool_starts_its_workers_before_making_its_grid(monkeypatch) -> None:
    """The pool's start-up (most of a second: its fork server imports zett_lab) overlaps the grid and the plan:
    workers run before any unit is submitted. An executor given starts no pool."""
    import time

    from zett_lab.report import sweep as report_sweep_module
    from zett_lab.study import executors

    class GridMade(Exception):
        pass

    seen = []

    def grid(conversations, context_window=None):
        pool = executors.running_pool()
        deadline = time.monotonic() + 120
        while pool is not None and not executors.worker_pids(pool) and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(pool is not None and bool(executors.worker_pids(pool)))
        raise GridMade

    monkeypatch.setattr(report_sweep_module, "default_grid", grid)
    executors.shutdown_default_executor()
    try:
        for executor in ("serial", None):
            with pytest.raises(GridMade):
                report_sweep([coding_conversation()], ["mask"], executor=executor, cache=False)
    finally:
        executors.shutdown_default_executor()
    assert seen == [False, True]


def test_the_report_modules_imported_at_the_tail_are_those_of_its_format() -> None:
    """SciPy's statistics for every report, matplotlib only for a page (a fresh process each)."""
    import subprocess
    import sys

    check = (
        "import sys; from zett_lab.show.report.core import import_report_modules; "
        "import_report_modules(html={html}); print('scipy.stats' in sys.modules, 'matplotlib' in sys.modules)"
    )
    for html, printed in ((False, "True False"), (True, "True True")):
        run = subprocess.run([sys.executable, "-c", check.format(html=html)], capture_output=True, text=True)
        assert run.stdout.split() == printed.split(), run.stderr


def test_a_report_prices_only_what_its_sweep_did_not_price_for_its_model(monkeypatch) -> None:
    """A sweep priced for the report's model keeps its figures (those cells' tables are not read again);
    cells of a summary model with no list price count its tokens at $0, as the cost section says; a
    sweep priced for another model is priced again, every cell."""
    from tests.helpers import CountingSummarizer

    conversations = [coding_conversation(turns=8, cid="first-session"), coding_conversation(turns=3, cid="short")]
    result = report_sweep(conversations, [CountingSummarizer(), "mask"], GRID, executor="serial", cache=False)
    priced_again: list[tuple[str, str, int, int]] = []
    price = tables._costs_of

    def counted(entries, *args):
        priced_again.extend(
            (label, t.conversation.id, t.setting.max_tokens, t.setting.keep_recent_tokens) for label, t in entries
        )
        return price(entries, *args)

    monkeypatch.setattr(tables, "_costs_of", counted)
    keys = ["summarizer", "conversation_id", "max_tokens", "keep_recent_tokens"]
    swept = result.results.set_index(keys).sort_index()
    unpriced = swept["total_cost_usd"].isna().to_numpy()
    assert unpriced.any() and not unpriced.all()  # the counting model's summaries have no list price

    data = build_report_data(sweep=result)
    shown = data.results.set_index(keys).sort_index()
    assert sorted(priced_again) == sorted(swept.index[unpriced])
    assert data.costs["unpriced"] == ["counting-summarizer"]
    assert shown["total_cost_usd"].notna().all()
    again = shown[unpriced]
    assert (again["summary_cost_usd"] == 0).all() and (again["summary_calls"] > 0).all()
    assert (again["summary_input_tokens"] == 50 * again["summary_calls"]).all()  # the model's reported usage
    assert (again["total_cost_usd"] == again["primary_cost_usd"]).all() and (again["primary_cost_usd"] > 0).all()
    columns = ["primary_input_tokens", "primary_cost_usd", "summary_calls", "total_cost_usd"]
    assert list(shown.index) == list(swept.index)
    pd.testing.assert_frame_equal(shown.loc[~unpriced, columns], swept.loc[~unpriced, columns], check_index_type=False)

    priced_again.clear()
    other = build_report_data(sweep=result, primary_model="gpt-4o").results.set_index(keys).sort_index()
    assert sorted(priced_again) == sorted(swept.index)
    assert (other["primary_input_tokens"] == shown["primary_input_tokens"]).all()
    assert (other["primary_cost_usd"] > shown["primary_cost_usd"]).all()  # gpt-4o's list price is higher
