"""The recommendation (issue 29): constraints first, the user's order of objectives, checked out of sample, and a
verdict whose numbers are the table's."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pandas as pd
import pytest

from zett_lab.errors import SettingError
from zett_lab.formatting import number
from zett_lab.measure.catalogue import label
from zett_lab.study import DEFAULT_CONSTRAINTS, DEFAULT_OBJECTIVES, NoFeasibleSetting, recommend
from zett_lab.study.choose import Constraint


def _rows(settings: dict[tuple[str, int], dict[str, list[float]]], keep: int = 500) -> pd.DataFrame:
    """One row per conversation and setting: ``{(summarizer, max_tokens): {column: [value per conversation]}}``."""
    rows = []
    for (summarizer, max_tokens), columns in settings.items():
        n = len(next(iter(columns.values())))
        for i in range(n):
            rows.append(
                {
                    "conversation_id": f"c{i}",
                    "engine": "stock",
                    "summarizer": summarizer,
                    "max_tokens": max_tokens,
                    "keep_recent_tokens": keep,
                    "error": None,
                    "failed": 0,
                    **{column: values[i] for column, values in columns.items()},
                }
            )
    return pd.DataFrame(rows)


def _setting(over: float, lost: float, tokens: float, superseded: float = 0.0, n: int = 2) -> dict[str, list[float]]:
    return {
        "steps_over_budget": [over] * n,
        "lost_but_needed": [lost] * n,
        "total_input_tokens": [tokens] * n,
        "superseded_rate": [superseded] * n,
    }


def test_the_default_puts_the_budget_first_then_lost_items_then_tokens():
    table = _rows(
        {
            ("cheap", 1000): _setting(over=30, lost=2, tokens=100),  # cheapest, loses least, but over budget
            ("steady", 4000): _setting(over=0, lost=9, tokens=400),
            ("careful", 4000): _setting(over=0, lost=5, tokens=500),  # within budget, fewest lost: recommended
            ("lavish", 8000): _setting(over=0, lost=5.2, tokens=480),  # within 10% of the fewest lost, cheaper
        }
    )
    choice = recommend(table)
    assert choice.objectives == DEFAULT_OBJECTIVES
    # steps over budget first (cheap is out of the running), then lost but needed: careful (5) and lavish (5.2,
    # within 10% of 5) count as equal, so tokens decide: lavish.
    assert (choice.summarizer, choice.max_tokens) == ("lavish", 8000)
    assert list(choice.ranking["summarizer"]) == ["lavish", "careful", "steady", "cheap"]
    strict = recommend(table, slack=0)
    assert strict.summarizer == "careful"
    # what matters is yours to say, within the constraints (cheap is over budget: ruled out first)
    assert recommend(table, objectives=["total_input_tokens"]).summarizer == "steady"
    assert recommend(table, objectives="lost_but_needed, total_input_tokens").summarizer == "lavish"
    assert recommend(table, "steps_over_budget <= 30", objectives="total_input_tokens").summarizer == "cheap"
    with pytest.raises(SettingError, match="not a metric of the catalogue"):
        recommend(table, objectives=["max_tokens"])  # a column without a direction is never guessed
    with pytest.raises(SettingError, match="twice"):
        recommend(table, objectives="lost_but_needed,lost_but_needed")


def test_constraints_rule_settings_out_before_any_trade_off():
    table = _rows(
        {
            ("stale", 4000): _setting(over=0, lost=1, tokens=100, superseded=0.6),  # best on everything but stale
            ("fresh", 4000): _setting(over=0, lost=4, tokens=200),
            ("over", 2000): _setting(over=3, lost=0, tokens=50),
        }
    )
    choice = recommend(table)
    assert choice.summarizer == "fresh"
    over, superseded = choice.constraints
    assert (over.constraint, over.default, over.judged, over.met, over.applied) == (
        DEFAULT_CONSTRAINTS[0],
        True,
        3,
        2,
        True,
    )
    assert (superseded.constraint, superseded.judged, superseded.met, superseded.applied) == (
        DEFAULT_CONSTRAINTS[1],
        2,
        1,
        True,
    )
    assert "Of the 3 settings measured, 1 meets steps over budget ≤ 0; superseded-only rate ≤ 0.1;" in choice.verdict
    ruled = choice.ranking.set_index("summarizer")["ruled_out_by"]
    assert ruled["stale"] == "superseded_rate <= 0.1" and ruled["over"] == "steps_over_budget <= 0"
    assert ruled.isna()["fresh"]
    page = choice._repr_html_()  # the ranking a person reads: the constraint and the metrics in their words
    assert "<td>Superseded-only rate ≤ 0.1</td>" in page and "<td>Steps over budget ≤ 0</td>" in page
    assert "superseded_rate" not in page and "<th>Superseded-only rate</th>" in page
    # the setting a constraint ruled out, which would otherwise have come first, is weighed in the verdict
    [*_, stale] = choice.alternatives
    assert stale.setting.summarizer == "stale" and stale.why == "ruled out by superseded-only rate ≤ 0.1"
    assert stale.changes["lost_but_needed"] == pytest.approx(-0.75)
    # a constraint of yours on the same column replaces the default
    tolerant = recommend(table, "superseded_rate <= 1")
    assert tolerant.summarizer == "stale" and [c.default for c in tolerant.constraints] == [False, True]


def test_when_no_setting_passes_a_constraint_it_rules_nothing_out_and_the_verdict_says_so():
    table = _rows(
        {
            ("a", 1000): _setting(over=12, lost=3, tokens=100),
            ("b", 2000): _setting(over=8, lost=6, tokens=200),
        }
    )
    choice = recommend(table)
    [over, superseded] = choice.constraints
    assert not over.applied and over.met == 0 and over.best == 8
    assert superseded.applied and superseded.met == 2
    assert choice.summarizer == "b", "ranked by steps over budget first: b has fewer"
    assert choice.unmet == (over,)
    assert (
        "No setting meets steps over budget ≤ 0 in every conversation (at best 8 in a setting's worst conversation), "
        "so that constraint rules nothing out." in choice.verdict
    )
    mean = recommend(table, over="mean")
    assert "No setting meets steps over budget ≤ 0 on the mean over conversations (the best mean is 8)" in mean.verdict
    # yours too: nothing meets it, so nothing is ruled out by it, and the page says so
    yours = recommend(table.assign(needed_anchor_recall=0.5), "needed_anchor_recall >= 0.9")
    assert not yours.constraints[0].applied and "No setting meets needed-anchor recall ≥ 0.9" in yours.verdict


def test_a_failed_setting_is_never_recommended_and_counted_as_left_out():
    table = _rows(
        {
            ("broken", 1000): _setting(over=0, lost=0, tokens=1),
            ("fine", 1000): _setting(over=0, lost=4, tokens=200),
        }
    )
    table.loc[(table["summarizer"] == "broken") & (table["conversation_id"] == "c1"), "failed"] = 2
    choice = recommend(table)
    assert choice.summarizer == "fine" and choice.settings == 1 and choice.left_out == 1
    assert "(1 more left out: a replay or summary failed)" in choice.verdict
    with pytest.raises(NoFeasibleSetting):
        recommend(table[table["summarizer"] == "broken"])


def test_held_out_figures_come_from_conversations_not_used_to_choose():
    # A and C are each perfect on one conversation and bad on the other; B is steady. In sample A (first of the
    # tie at 5) is recommended; each setting chosen on one conversation is scored on the other: 10 both times.
    table = _rows(
        {
            ("a", 1000): {"lost_but_needed": [0, 10], "total_input_tokens": [100, 100]},
            ("b", 1000): {"lost_but_needed": [6, 6], "total_input_tokens": [100, 100]},
            ("c", 1000): {"lost_but_needed": [10, 0], "total_input_tokens": [100, 100]},
        }
    )
    choice = recommend(table, objectives=["lost_but_needed", "total_input_tokens"])
    held = choice.held_out
    assert choice.summarizer == "a" and held.in_sample["lost_but_needed"] == 5
    assert held.figures["lost_but_needed"] == 10, "each conversation scored at the setting chosen without it"
    assert held.folds == 2 and held.asked == 5 and "leave-one-out over the 2 conversations" in held.note
    chosen = {conversation: held.chosen[fold][0] for conversation, fold in held.assignment.items()}
    assert chosen == {"c0": "c", "c1": "a"}, "without c0 the rule sees only c1, where c is perfect"
    assert held.agreement == 1
    assert "10 needed-anchor losses" in choice.verdict and "against 5, 100 in sample" in choice.verdict


def test_k_fold_chooses_each_fold_on_the_other_conversations():
    rng = np.random.default_rng(7)
    n = 9
    table = _rows(
        {
            (name, max_tokens): {
                "steps_over_budget": list(rng.integers(0, 3, n).astype(float)),
                "lost_but_needed": list(rng.integers(0, 20, n).astype(float)),
                "total_input_tokens": list(rng.integers(1000, 5000, n).astype(float)),
            }
            for name in ("x", "y", "z")
            for max_tokens in (1000, 2000)
        }
    )
    choice = recommend(table, folds=3)
    held = choice.held_out
    assert held.folds == 3 and sorted(set(held.assignment.values())) == [0, 1, 2]
    expected = {column: [] for column in held.figures}
    for fold in range(3):
        out = [c for c, f in held.assignment.items() if f == fold]
        inside = recommend(table[~table["conversation_id"].isin(out)], folds=2)
        assert held.chosen[fold] == (inside.summarizer, inside.max_tokens, inside.keep_recent_tokens, inside.engine)
        rows = table[
            table["conversation_id"].isin(out)
            & (table["summarizer"] == inside.summarizer)
            & (table["max_tokens"] == inside.max_tokens)
        ]
        for column in expected:
            expected[column] += list(rows[column])
    assert held.figures == pytest.approx({c: float(np.mean(v)) for c, v in expected.items()})
    assert held.in_sample == pytest.approx(dict(choice.figures))


def test_one_conversation_is_not_checked_out_of_sample():
    table = _rows({("a", 1000): _setting(0, 1, 10, n=1), ("b", 1000): _setting(0, 2, 10, n=1)})
    choice = recommend(table)
    assert choice.held_out.folds == 0 and choice.held_out.figures == {}
    assert "Not checked out of sample: it needs at least two conversations." in choice.verdict
    with pytest.raises(SettingError, match="folds"):
        recommend(table, folds=1)


def _change(value: float, base: float, name: str) -> str:
    change = (value - base) / base
    if abs(change) < 0.005:
        return f"same {name}"
    if change >= 2:
        return f"{number(value / base, 2)}× {name}"
    return f"{'+' if change > 0 else '−'}{abs(change) * 100:.0f}% {name}"


def test_the_verdict_states_the_tables_numbers():
    table = _rows(
        {
            ("chosen", 4000): {
                "steps_over_budget": [1, 0, 0],
                "lost_but_needed": [5, 7, 6],
                "total_input_tokens": [1_200_000, 1_300_000, 1_250_000],
                "superseded_rate": [0.0, 0.0, 0.0],
            },
            ("next", 4000): {
                "steps_over_budget": [1, 0, 0],
                "lost_but_needed": [9, 9, 9],
                "total_input_tokens": [1_000_000, 1_100_000, 1_050_000],
                "superseded_rate": [0.0, 0.0, 0.0],
            },
            ("over", 2000): {
                "steps_over_budget": [40, 30, 20],
                "lost_but_needed": [20, 20, 20],
                "total_input_tokens": [900_000, 900_000, 900_000],
                "superseded_rate": [0.0, 0.0, 0.0],
            },
        }
    )
    choice = recommend(table)
    verdict = choice.verdict
    ranking = choice.ranking.set_index("summarizer")
    top = ranking.loc["chosen"]
    assert verdict.startswith("Recommended: chosen at max_tokens=4,000, keep_recent_tokens=500.")
    figures = ", ".join(f"{number(top[o])} {label(o).lower()}" for o in DEFAULT_OBJECTIVES)
    assert f"it comes first with {figures} per conversation" in verdict
    assert figures == "0.333 steps over budget, 6 needed-anchor losses, 1,250,000 total input tokens"
    assert [(a.setting.summarizer, a.why) for a in choice.alternatives] == [
        ("next", "next in the ranking"),
        ("over", "fewest total input tokens of the settings not ruled out"),
    ]
    for alternative in choice.alternatives:
        row = ranking.loc[alternative.setting.summarizer]
        changes = ", ".join(_change(row[o], top[o], label(o).lower()) for o in DEFAULT_OBJECTIVES)
        assert f"{alternative.setting.setting_text()} ({alternative.why}): {changes}" in verdict
    assert (
        "(next in the ranking): same steps over budget, +50% needed-anchor losses, −16% total input tokens" in verdict
    )
    assert "(fewest total input tokens of the settings not ruled out): 90× steps over budget, 3.3× needed" in verdict
    held = choice.held_out
    shown = ", ".join(f"{number(held.figures[o])} {label(o).lower()}" for o in DEFAULT_OBJECTIVES)
    in_sample = ", ".join(number(held.in_sample[o]) for o in DEFAULT_OBJECTIVES)
    assert f"{shown} per conversation, against {in_sample} in sample" in verdict
    assert "e+" not in verdict


def test_a_recommendation_reads_and_travels_as_plain_data():
    table = _rows(
        {
            ("a", 1000): _setting(over=0, lost=3, tokens=9_308_850.4),
            ("b", 2000): _setting(over=0, lost=6, tokens=1_080.0),
        }
    )
    choice = recommend(table)
    text = repr(choice)
    assert "total_input_tokens=9,308,850" in text and "e+" not in text
    page = choice._repr_html_()
    assert "in sample" in page and "held out" in page and "9,308,850" in page and "e+0" not in page
    document = json.loads(json.dumps(choice.record()))
    assert document["summarizer"] == "a" and document["verdict"] == choice.verdict
    assert document["constraints"][0] == {
        "constraint": str(Constraint("steps_over_budget", "<=", 0.0)),
        "text": "Steps over budget ≤ 0",
        "default": True,
        "judged": 2,
        "met": 2,
        "applied": True,
        "best": 0.0,
    }
    assert len(document["ranking"]) == 2 and document["held_out"]["folds"] == 2
    assert re.search(r"\b1 of 2 folds chose this setting|\b2 of 2 folds chose this setting", choice.verdict)


def test_the_recommendation_says_what_its_figures_cannot_tell():
    settings = {
        ("careful", 4000): _setting(over=0, lost=5, tokens=500, n=3),
        ("careful", 8000): _setting(over=0, lost=2, tokens=480, n=3),  # the best: at the top of the grid
        ("twin", 8000): _setting(over=0, lost=2, tokens=480, n=3),  # the same figures: a tie, not a finding
        ("lavish", 2000): _setting(over=0, lost=9, tokens=900, n=3),
    }
    table = _rows(settings)
    table["compactions_applied"] = [1, 0, 2] * 4  # one conversation of three never compacts
    choice = recommend(table)
    assert (choice.summarizer, choice.max_tokens) == ("careful", 8000)
    caveats = choice.caveats
    assert any(c.startswith("max_tokens=8,000 is the largest value measured") for c in caveats)
    assert not any(c.startswith("keep_recent_tokens") for c in caveats)  # one value: no edge to speak of
    assert any("1 other setting has the same figures" in c and "twin at max_tokens=8,000" in c for c in caveats)
    assert any(c.startswith("At this setting 2 of 3 conversations have an applied compaction") for c in caveats)
    assert choice.record()["caveats"] == list(caveats)
    assert all(f"<li>{html.escape(c)}</li>" in choice._repr_html_() for c in caveats)
    # in the middle of the grid, alone in its figures, every conversation compacting: nothing to add
    middle = _rows(
        {
            **settings,
            ("twin", 8000): _setting(over=0, lost=3, tokens=480, n=3),
            ("wide", 9000): _setting(over=0, lost=8, tokens=900, n=3),
        }
    )
    middle["compactions_applied"] = 1
    assert recommend(middle).caveats == ()
