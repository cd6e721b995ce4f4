"""A trace's tables are built as pandas would build them from the same rows, whatever the values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zett_lab
from zett_lab.records import is_missing
from zett_lab.replay.schema import BOOLEAN_COLUMNS, COMPACTION_COLUMNS, FLOAT_COLUMNS, INTEGER_COLUMNS, STEP_COLUMNS
from zett_lab.replay.trace import frame

#: One column of each kind: integer, boolean, float, anything else.
KINDS = ["step", "applied", "latency_s", "summary_text"]
CELLS = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(2**63, 2**64),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.sampled_from([float("nan"), pd.NA, np.int64(3), np.float64(2.5), np.bool_(True)]),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.integers(), st.integers()),
    st.dictionaries(st.text(max_size=1), st.integers(), max_size=1),
)


def by_pandas(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """The reference: every column built by pandas from the rows' values (nullable ones through ``pd.array``)."""
    columns = [*columns, *(key for row in rows[:1] for key in row if key not in columns)]
    data = {}
    for column in columns:
        values = [row.get(column) for row in rows]
        if column in INTEGER_COLUMNS:
            data[column] = pd.array(values, dtype="Int64")
        elif column in BOOLEAN_COLUMNS:
            data[column] = pd.array(values, dtype="boolean")
        elif column in FLOAT_COLUMNS:
            data[column] = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").astype("float64")
        else:
            data[column] = pd.Series([None if is_missing(value) else value for value in values], dtype=object)
    return pd.DataFrame(data, columns=columns)


def assert_built_alike(rows: list[dict], columns: list[str]) -> None:
    """``frame`` and the reference give equal tables (dtypes included) holding the same objects, or the same error."""
    try:
        expected = by_pandas(rows, columns)
    except Exception as error:  # noqa: BLE001 - whatever pandas raises, frame raises too
        with pytest.raises(type(error)):
            frame(rows, columns)
        return
    built = frame(rows, columns)
    pd.testing.assert_frame_equal(built, expected, check_exact=True)
    for column in [c for c in built.columns if built[c].dtype == np.dtype(object)]:
        assert all(a is b for a, b in zip(built[column], expected[column], strict=True)), column


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
    assert_built_alike(step_rows, STEP_COLUMNS)
    assert_built_alike(compaction_rows, COMPACTION_COLUMNS)


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


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({}, optional={column: CELLS for column in [*KINDS, "extra"]}), max_size=5))
def test_rows_with_any_keys_and_values_are_built_as_pandas_builds_them(rows):
    assert_built_alike(rows, KINDS)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[CELLS] * len(KINDS)), max_size=5))
def test_full_rows_in_column_order_are_built_as_pandas_builds_them(cells):
    """Rows holding every column in order (a recorder's) take the transposing path."""
    assert_built_alike([dict(zip(KINDS, row, strict=True)) for row in cells], KINDS)
