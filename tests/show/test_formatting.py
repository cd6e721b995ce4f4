"""Numbers as a person reads them: thousands separators, k/M suffixes, fixed decimals, never scientific notation."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from zett_lab.formatting import (
    blank_missing,
    cell,
    compact,
    count,
    counted,
    decimal,
    frame_formatters,
    frame_html,
    number,
    percent,
    usd,
)

SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")
finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e15, max_value=1e15)


@pytest.mark.parametrize(
    ("write", "value", "text"),
    [
        (count, 1_304_190.4, "1,304,190"),
        (count, 9_308_850, "9,308,850"),
        (compact, 13_000, "13k"),
        (compact, 1_600, "1.6k"),
        (compact, 1_330_000, "1.33M"),
        (compact, 12_500, "12.5k"),
        (compact, 125_000, "125k"),
        (compact, 999_700, "1M"),
        (compact, 950, "950"),
        (compact, 2_100_000_000, "2.1B"),
        (decimal, 0.6931, "0.693"),
        (decimal, 18.04, "18.040"),
        (number, 9_308_850.0, "9,308,850"),
        (number, 1080.0, "1,080"),
        (number, 1.2e-7, "0.000"),
        (number, 31.08, "31.1"),
        (number, 2.2857, "2.29"),
        (number, 0.597, "0.597"),
        (number, 7, "7"),
        (percent, 0.16, "16.0%"),
        (usd, 0.01234, "$0.0123"),
        (usd, 2.0, "$2.00"),
        (usd, 0.25, "$0.25"),
        (usd, 0.025, "$0.025"),
        (usd, 1234.5, "$1,234.50"),
    ],
)
def test_written_for_a_person(write, value, text):
    assert write(value) == text


@pytest.mark.parametrize("write", [count, compact, decimal, number, percent, usd, cell])
@pytest.mark.parametrize("missing", [None, math.nan, pd.NA, np.nan, math.inf])
def test_missing_is_empty(write, missing):
    assert write(missing) == ""


def test_a_count_agrees_with_its_word():
    """What read "Of the 4 settings measured, 1 meet ..." and "1 compaction points"."""
    assert counted(1, "setting") == "1 setting" and counted(4, "setting") == "4 settings"
    assert counted(1, "meets", "meet") == "1 meets" and counted(0, "meets", "meet") == "0 meet"
    assert counted(12_000.0, "compaction point") == "12,000 compaction points"


def test_cells_of_any_type():
    assert [cell(v) for v in (True, False, np.int64(12_345), np.float64(0.5), "a<b")] == [
        "✓",
        "",
        "12,345",
        "0.500",
        "a<b",
    ]


@given(finite)
def test_never_scientific(value):
    for write in (count, compact, decimal, number, percent, usd):
        assert not SCIENTIFIC.search(write(value)), (write.__name__, value, write(value))


@given(st.floats(min_value=1000, max_value=1e15, allow_nan=False))
def test_large_numbers_keep_their_magnitude(value):
    """A large figure written in full reads back within rounding; with a suffix within 0.5% of its size."""
    assert abs(float(number(value).replace(",", "")) - value) <= 0.5
    text = compact(value)
    scale = {"k": 1e3, "M": 1e6, "B": 1e9}[text[-1]]
    assert abs(float(text[:-1].replace(",", "")) * scale - value) <= 0.005 * value


def test_frame_html_writes_every_numeric_column():
    frame = pd.DataFrame({"tokens": [9_308_850.0, 1.08e3], "recall": [0.5971, np.nan], "ok": [True, False]})
    text = frame_html(frame)
    assert "9,308,850" in text and "1,080" in text and "0.597" in text
    assert not SCIENTIFIC.search(text) and ">nan<" not in text.lower()


def test_missing_values_are_empty_in_tables_of_any_column_type():
    """pandas writes a None as ``None`` and ``pd.NA`` as ``<NA>`` whatever its ``na_rep``: what ``replay`` printed
    as ``skip_reason None  error_kind None``."""
    frame = pd.DataFrame(
        {
            "skip_reason": [None, "not smaller"],
            "tokens": pd.array([None, 12_345], dtype="Int64"),
            "applied": pd.array([True, None], dtype="boolean"),
        }
    )
    text = frame_html(frame)
    assert "None" not in text and "NA" not in text and "12,345" in text and "not smaller" in text
    assert text.count("<td></td>") == 3
    printed = blank_missing(frame).to_string(index=False, na_rep="", formatters=frame_formatters(frame))
    assert "None" not in printed and "NA" not in printed and "12,345" in printed


def test_result_reprs_write_numbers_readably():
    """What notebook 02 and 03 showed as ``total_input_tokens=9.30885e+06`` and ``1.08e+03``."""
    from zett_lab.study.compare import Comparison
    from zett_lab.study.recommendation import recommend

    grid = pd.DataFrame(
        {
            "summarizer": ["anchors", "truncate"] * 2,
            "max_tokens": [13_000] * 4,
            "keep_recent_tokens": [1_600] * 4,
            "conversation_id": ["a", "a", "b", "b"],
            "total_input_tokens": [9_308_850.0, 12_100_000.0] * 2,
            "lost_but_needed": [18.04, 12.0] * 2,
        }
    )
    recommendation = recommend(grid, objectives=["total_input_tokens", "lost_but_needed"])
    assert "max_tokens=13,000" in repr(recommendation) and "total_input_tokens=9,308,850" in repr(recommendation)
    shown = recommendation._repr_html_()
    assert "9,308,850" in shown and "Total input tokens" in shown and "Needed-anchor losses" in shown
    summary = pd.DataFrame(
        {
            "summarizer": ["a"],
            "metric": ["primary_input_tokens"],
            "n": [3],
            "mean": [1080.4],
            "ci_low": [1.2e-5],
            "ci_high": [2.5e6],
        }
    )
    pairwise = pd.DataFrame({"a": ["a"], "b": ["b"], "mean_diff": [1.08e3], "p_value": [0.00012]})
    matched = pd.DataFrame({"summarizer": ["a"], "units": [3], "matched": [3], "duplicates": [0]})
    comparison = Comparison(summary, pairwise, matched, pd.DataFrame(), "conversation")
    text = comparison._repr_html_()
    assert "+30% total input tokens" in recommendation.verdict and "9,308,850" in recommendation.verdict
    for shown_text in (recommendation._repr_html_(), repr(recommendation), recommendation.verdict, text):
        assert not SCIENTIFIC.search(shown_text)
    assert "1,080" in text and "2,500,000" in text and "0.0001" in text
