"""A trace's tables are built as pandas would build them from the same rows, whatever the values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import zett_lab
from zett_lab.replay.recorder import BOOLEAN_COLUMNS, COMPACTION_COLUMNS, INTEGER_COLUMNS, STEP_COLUMNS
from zett_lab.replay.trace import frame


def by_pandas(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """The reference: every nullable column through ``pd.array``, the rest as ``frame`` makes them."""
    built = frame(rows, columns)
    for column in built.columns:
        values = [row.get(column) for row in rows]
        if column in INTEGER_COLUMNS:
            built[column] = pd.array(values, dtype="Int64")
        elif column in BOOLEAN_COLUMNS:
            built[column] = pd.array(values, dtype="boolean")
    return built


def test_a_replays_tables_equal_pandas_own_construction(fixture_conversations, monkeypatch):
    captured = []
    build = zett_lab.Trace.from_rows.__func__

    def capture(cls, conversation, step_rows, compaction_rows, *args, **kwargs):
        captured.append((step_rows, compaction_rows))
        return build(cls, conversation, step_rows, compaction_rows, *args, **kwargs)

    monkeypatch.setattr(zett_lab.Trace, "from_rows", classmethod(capture))
    conversation = max(fixture_conversations, key=lambda c: len(c.messages))
    trace = zett_lab.replay(conversation, max_tokens=6_000, keep_recent_tokens=2_000, cache=False)
    ((step_rows, compaction_rows),) = captured
    assert len(trace.compactions) and trace.steps["cutoff_index"].isna().any()  # missing values were built
    pd.testing.assert_frame_equal(trace.steps, by_pandas(step_rows, STEP_COLUMNS), check_exact=True)
    pd.testing.assert_frame_equal(trace.compactions, by_pandas(compaction_rows, COMPACTION_COLUMNS), check_exact=True)


@pytest.mark.parametrize(
    "integers, booleans",
    [
        ([1, None, 3], [True, None, False]),
        ([None, None, None], [None, None, None]),
        ([np.int64(4), 5, None], [np.bool_(True), False, None]),  # numpy scalars: left to pandas
        ([1, np.nan, pd.NA], [True, np.nan, pd.NA]),  # other missing values: left to pandas
        ([True, 2, None], [1, 0, None]),  # the other kind: left to pandas
        ([2**62, -(2**62), 0], [False, False, True]),
    ],
)
def test_nullable_columns_match_pandas_for_any_values(integers, booleans):
    assert "step" in INTEGER_COLUMNS and "applied" in BOOLEAN_COLUMNS
    rows = [{"step": i, "applied": b} for i, b in zip(integers, booleans, strict=True)]
    columns = ["step", "applied"]
    pd.testing.assert_frame_equal(frame(rows, columns), by_pandas(rows, columns), check_exact=True)


def test_an_integer_beyond_int64_is_pandas_own_error():
    with pytest.raises(OverflowError):
        frame([{"step": 2**70}], ["step"])
    with pytest.raises(OverflowError):
        pd.array([2**70], dtype="Int64")
