"""Cost accounting: prices, prompt-cache breaks, summary calls, per-conversation totals."""

from __future__ import annotations

import asyncio
import json
import types
from pathlib import Path

import pandas as pd
import pytest
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.messages import AssistantMessage, UserMessage
from zett_agent.model import ModelEvent, ModelResponse, ReasoningEffort, RetryOptions

import zett_lab
from tests.helpers import coding_conversation
from zett_lab import SettingError
from zett_lab.measure.cost import (
    add_costs,
    cost_summary,
    default_prices,
    load_prices,
    price_for,
    summary_request_overhead_tokens,
)
from zett_lab.replay import replay
from zett_lab.replay.engine import summary_frame
from zett_lab.tokens import count_tokens

M = 1_000_000


def steps_table(contexts, applied=(), checkpoints=None, outputs=None, cid="c1"):
    rows = []
    for i, tokens in enumerate(contexts):
        rows.append(
            {
                "conversation_id": cid,
                "step": i,
                "context_tokens_after": tokens,
                "applied": i in applied,
                "checkpoint_id": (checkpoints[i] if checkpoints else pd.NA),
                **({"output_tokens": outputs[i]} if outputs else {}),
            }
        )
    return pd.DataFrame(rows)


# -- prices ------------------------------------------------------------------------------------------


def test_bundled_prices_are_complete():
    table = default_prices()
    assert table.as_of
    raw = json.loads((Path(zett_lab.__file__).parent / "data" / "prices.json").read_text())
    assert raw["as_of"] and raw["currency"] == "USD" and raw["notes"]
    providers = {entry["provider"] for entry in raw["models"].values()}
    assert {"openai", "anthropic", "google", "deepseek", "zett_lab"} <= providers
    for name, price in table.models.items():
        assert price.input >= price.cached_input >= 0 and price.output >= 0, name
        assert price.source, name
    offline = table.models["offline"]
    assert (offline.input, offline.cached_input, offline.output) == (0, 0, 0)


@pytest.mark.parametrize(
    "name, key",
    [
        ("gpt-5-mini", "gpt-5-mini"),
        ("openai:gpt-5-mini", "gpt-5-mini"),
        ("openai:gpt-5-mini@https://api.example.com/v1", "gpt-5-mini"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic:claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("deepseek:deepseek-chat(temperature=0.2)", "deepseek-chat"),
        ("truncate(budget=0.1)", "offline"),
        ("anchors", "offline"),
        ("mask(budget=None)", "offline"),
    ],
)
def test_price_lookup(name, key):
    assert price_for(name)[0] == key


@pytest.mark.parametrize("name", ["gpt-5-pro", "llama-99", "", "counting-summarizer"])
def test_unknown_model_is_an_error(name):
    with pytest.raises(SettingError):
        price_for(name)


def test_price_overrides(tmp_path):
    table = load_prices({"my-model": {"input": 1, "output": 2}})
    assert table.lookup("my-model")[1].cached_input == 1.0  # defaults to input
    assert table.lookup("gpt-5")[0] == "gpt-5"  # bundled ones stay
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"as_of": "2030-01-01", "models": {"gpt-5": {"input": 9, "cached_input": 1, "output": 90}}})
    )
    table = load_prices(path)
    assert table.lookup("gpt-5")[1].input == 9 and table.as_of == "2030-01-01"
    for bad in ({"x": {"input": -1, "output": 1}}, {"x": {"output": 1}}, {"x": 5}, {"x": {"input": "1", "output": 1}}):
        with pytest.raises(SettingError):
            load_prices(bad)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SettingError, match="bad.json"):
        load_prices(tmp_path / "bad.json")
    with pytest.raises(SettingError):
        load_prices(tmp_path / "missing.json")


# -- primary steps and the prompt cache -----------------------------------------------------------------


def test_prompt_cache_and_breaks():
    prices = {"p": {"input": 2.0, "cached_input": 0.5, "output": 8.0}}
    steps = steps_table(
        [2000, 3000, 3500, 1500, 2500],
        applied={3},
        checkpoints=[None, None, None, 0, 0],
        outputs=[100, 100, 100, 100, 100],
    )
    out, comp = add_costs(steps, None, primary_model="p", prices=prices)
    assert out["primary_input_tokens"].tolist() == [2000, 3000, 3500, 1500, 2500]
    assert out["primary_cached_input_tokens"].tolist() == [0, 2000, 3000, 0, 1500]
    assert out["primary_uncached_input_tokens"].tolist() == [2000, 1000, 500, 1500, 1000]
    assert out["cache_break"].tolist() == [True, False, False, True, False]
    expected = (1000 * 2.0 + 2000 * 0.5 + 100 * 8.0) / M
    assert out.loc[1, "primary_cost_usd"] == pytest.approx(expected)
    assert out["summary_cost_usd"].eq(0).all()
    assert out["total_cost_usd"].tolist() == pytest.approx(out["primary_cost_usd"].tolist())
    assert comp.empty
    # a checkpoint change also breaks the cache, even without the applied flag
    steps2 = steps_table([2000, 3000, 1500], checkpoints=[None, None, 0])
    out2, _ = add_costs(steps2, None, primary_model="p", prices=prices)
    assert out2["cache_break"].tolist() == [True, False, True]
    # short prefixes are not cached; caching can be switched off
    out3, _ = add_costs(steps_table([500, 900]), None, primary_model="p", prices=prices)
    assert out3["primary_cached_input_tokens"].tolist() == [0, 0]
    out4, _ = add_costs(steps, None, primary_model="p", prices=prices, prompt_caching=False)
    assert out4["primary_cached_input_tokens"].eq(0).all()
    # no output_tokens column: output counts as 0
    out5, _ = add_costs(steps_table([2000]), None, primary_model="p", prices=prices)
    assert out5["primary_output_tokens"].tolist() == [0]


def test_cache_write_price_and_row_order():
    prices = {"a": {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0}}
    steps = steps_table([2000, 4000]).iloc[::-1]  # rows out of order
    out, _ = add_costs(steps, None, primary_model="a", prices=prices)
    assert out.index.tolist() == [1, 0]
    assert out.loc[0, "primary_cost_usd"] == pytest.approx(2000 * 3.75 / M)
    assert out.loc[1, "primary_cost_usd"] == pytest.approx((2000 * 3.75 + 2000 * 0.3) / M)


def test_summary_calls():
    prices = {"p": {"input": 1.0, "output": 1.0}, "s": {"input": 10.0, "cached_input": 10.0, "output": 100.0}}
    steps = steps_table([5000, 6000, 2000], applied={2}, checkpoints=[None, None, 0])
    compactions = pd.DataFrame(
        [
            # reported usage
            {
                "conversation_id": "c1",
                "step": 2,
                "older_tokens": 4000,
                "summary_text": "short",
                "error": None,
                "summary_input_tokens": 4100,
                "summary_output_tokens": 50,
                "summarizer": "openai:gpt-5-mini",
            },
            # no usage: estimated from the window and the text
            {
                "conversation_id": "c1",
                "step": 2,
                "older_tokens": 4000,
                "summary_text": "hello world",
                "error": None,
                "summary_input_tokens": pd.NA,
                "summary_output_tokens": pd.NA,
                "summarizer": "openai:gpt-5-mini",
            },
            # failed without usage: nothing billed
            {
                "conversation_id": "c1",
                "step": 1,
                "older_tokens": 3000,
                "summary_text": None,
                "error": "HTTP 500",
                "summary_input_tokens": pd.NA,
                "summary_output_tokens": pd.NA,
                "summarizer": "openai:gpt-5-mini",
            },
        ]
    )
    out, comp = add_costs(steps, compactions, primary_model="p", summary_model="s", prices=prices)
    from zett_lab.measure.cost import summary_request_overhead_tokens

    assert comp["summary_call_input_tokens"].tolist() == [4100, 4000 + summary_request_overhead_tokens(), 0]
    assert comp["summary_call_output_tokens"].tolist() == [50, 2, 0]
    assert comp["summary_tokens_estimated"].tolist() == [False, True, True]
    assert comp.loc[0, "summary_cost_usd"] == pytest.approx((4100 * 10 + 50 * 100) / M)
    assert out.loc[2, "summary_cost_usd"] == pytest.approx(comp.loc[[0, 1], "summary_cost_usd"].sum())
    assert out.loc[1, "summary_cost_usd"] == 0
    # priced by each row's summarizer when no summary_model is given
    _, by_identity = add_costs(steps, compactions, primary_model="p", prices=prices)
    assert by_identity["price_model"].eq("gpt-5-mini").all()
    offline = compactions.assign(summarizer="truncate(budget=0.1)")
    _, free = add_costs(steps, offline, primary_model="p", prices=prices)
    assert free["summary_cost_usd"].eq(0).all() and free["summary_call_input_tokens"].eq(0).all()
    with pytest.raises(SettingError, match="summary_model"):
        add_costs(steps, compactions.drop(columns="summarizer"), primary_model="p", prices=prices)


def test_bad_tables():
    with pytest.raises(SettingError, match="context_tokens_after"):
        add_costs(pd.DataFrame({"conversation_id": ["c"], "step": [0]}), primary_model="gpt-5")
    with pytest.raises(SettingError):
        add_costs([], primary_model="gpt-5")
    with pytest.raises(SettingError, match="no price"):
        add_costs(steps_table([10]), primary_model="nonexistent-model")
    with pytest.raises(SettingError, match="add_costs"):
        cost_summary(steps_table([10]))


def test_cost_summary_per_conversation():
    prices = {"p": {"input": 1.0, "cached_input": 0.1, "output": 2.0}}
    steps = pd.concat(
        [steps_table([2000, 3000], outputs=[10, 20], cid="a"), steps_table([4000], outputs=[5], cid="b")],
        ignore_index=True,
    )
    compactions = pd.DataFrame(
        [
            {
                "conversation_id": "a",
                "step": 1,
                "older_tokens": 1500,
                "summary_text": "x",
                "error": None,
                "summary_input_tokens": 1000,
                "summary_output_tokens": 10,
                "summarizer": "p",
            }
        ]
    )
    out, comp = add_costs(steps, compactions, primary_model="p", prices=prices)
    totals = cost_summary(out, comp).set_index("conversation_id")
    assert totals.loc["a", "steps"] == 2 and totals.loc["b", "steps"] == 1
    assert totals.loc["a", "primary_input_tokens"] == 5000
    assert totals.loc["a", "primary_cached_input_tokens"] == 2000
    assert totals.loc["a", "summary_calls"] == 1 and totals.loc["b", "summary_calls"] == 0
    assert totals.loc["a", "summary_cost_usd"] == pytest.approx((1000 + 20) / M)
    assert totals.loc["a", "total_cost_usd"] == pytest.approx(out[out.conversation_id == "a"]["total_cost_usd"].sum())
    assert totals["cached_input_share"].tolist() == pytest.approx([0.4, 0.0])
    # without the compactions table, summary money still comes from the steps
    assert cost_summary(out).set_index("conversation_id").loc["a", "summary_cost_usd"] == pytest.approx((1000 + 20) / M)


# -- on a real replay -------------------------------------------------------------------------------------


def test_offline_summary_is_free_but_changes_primary_cost():
    conversation = coding_conversation(turns=6, output_lines=60)
    compacted = replay(conversation, max_tokens=2_000, keep_recent_tokens=500, summarizer="anchors", cache=False)
    full = replay(conversation, max_tokens=10**9, keep_recent_tokens=500, summarizer="anchors", cache=False)
    assert compacted.compactions["applied"].any()
    costs = {}
    for name, trace in (("compacted", compacted), ("full", full)):
        steps, comp = add_costs(trace.steps, trace.compactions, primary_model="gpt-5-mini")
        totals = cost_summary(steps, comp).iloc[0]
        assert totals["summary_cost_usd"] == 0
        costs[name] = totals
    assert costs["compacted"]["primary_input_tokens"] < costs["full"]["primary_input_tokens"]
    assert costs["compacted"]["cache_breaks"] > costs["full"]["cache_breaks"] == 1
    assert costs["compacted"]["primary_cost_usd"] != costs["full"]["primary_cost_usd"]


def test_engine_instructions_match():
    """The estimate of a summary call's input uses the engine's own instruction text, read from the engine."""

    class Capture:
        retry = RetryOptions(max_retries=0)
        request = None

        async def stream(self, request):
            Capture.request = request
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="ok")))

    async def emit(event):
        return None

    context = types.SimpleNamespace(session_id="s", emit=emit)
    model = Capture()
    asyncio.run(
        CompactionExtension(model)._summarize_checkpoint(
            context, [UserMessage(content="hi")], model=model, reasoning_effort=ReasoningEffort.LOW
        )
    )
    instructions, request = summary_frame()
    assert Capture.request.messages == (instructions, UserMessage(content="hi"), request)
    assert instructions.content.startswith("Summarize the following conversation") and request.content.strip()
    assert summary_request_overhead_tokens() == count_tokens([instructions, request]) > 50
