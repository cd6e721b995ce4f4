"""Table cells as plain Python values: the one conversion from DataFrames to JSON-ready records, and back.

A record read from a file is a ``Mapping[str, object]``; :func:`read_int`, :func:`read_float`,
:func:`read_text`, :func:`read_bool`, :func:`read_list`, :func:`read_ints` and :func:`read_mapping` give its fields typed
(None or empty when absent), and a field of another type fails naming it.

Example::

    >>> import pandas as pd
    >>> records(pd.DataFrame({"a": [1, None]}))
    [{'a': 1.0}, {'a': None}]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, cast

import numpy as np
import pandas as pd

#: A value as JSON holds it (what :func:`plain` gives, what a saved document or a trace record holds).
JSONValue: TypeAlias = "str | int | float | bool | None | list[JSONValue] | dict[str, JSONValue]"
#: A JSON object: a saved document, a record, a row of :func:`records`.
JSONObject: TypeAlias = "dict[str, JSONValue]"


def is_missing(value: object) -> bool:
    """Whether a table cell is missing (None, NaN, pd.NA), for values of any type."""
    if value is None:
        return True
    try:
        return bool(pd.isna(cast(Any, value)))  # any cell: pandas answers for every type
    except (TypeError, ValueError):
        return False


def int_or_none(value: object) -> int | None:
    """An int, or None for a missing value (None, NaN, NA)."""
    return None if is_missing(value) else int(cast(Any, value))


def flags(series: pd.Series) -> np.ndarray:
    """A nullable boolean column as a numpy bool array, missing values as False."""
    return series.astype("boolean").fillna(False).to_numpy(dtype=bool)


def plain(value: object, digits: int | None = None) -> JSONValue:
    """A JSON-ready Python value: missing -> None, numpy scalars and arrays -> Python, mappings keyed by str.

    ``digits`` rounds floats (for display documents); ``None`` keeps them exact (for round trips).
    Non-finite floats become None.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): plain(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, digits) for v in value]
    tolist = getattr(value, "tolist", None)
    if tolist is not None and getattr(value, "ndim", None):
        return [plain(v, digits) for v in tolist()]
    if is_missing(value):
        return None
    item = getattr(value, "item", None)
    if item is not None:
        value = item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return value if digits is None else round(value, digits)
    if isinstance(value, (int, str, bool)):
        return value
    return str(value)


def records(
    frame: pd.DataFrame | None, columns: Sequence[str] | None = None, digits: int | None = None
) -> list[JSONObject]:
    """Rows of a frame as JSON-ready dicts (only the ``columns`` present, in that order)."""
    if frame is None or not len(frame):
        return []
    columns = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    return [
        {c: plain(v, digits) for c, v in zip(columns, row, strict=True)}
        for row in frame[columns].itertuples(index=False, name=None)
    ]


def _wrong(key: str, value: object, expected: str) -> ValueError:
    return ValueError(f"field {key!r} is not {expected}: {value!r}")


def read_int(record: Mapping[str, object], key: str) -> int | None:
    """``record[key]`` as an int (also from an integral float or a numeric string); None when absent or None."""
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise _wrong(key, value, "an integer")
    if isinstance(value, numbers.Integral):  # numpy's integers too
        return int(value)
    try:
        if isinstance(value, str):
            return int(value)
        if isinstance(value, numbers.Real):
            return int(float(value))
    except (ValueError, OverflowError):
        pass
    raise _wrong(key, value, "an integer")


def read_float(record: Mapping[str, object], key: str) -> float | None:
    """``record[key]`` as a float; None when absent or None."""
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _wrong(key, value, "a number")
    return float(value)


def read_text(record: Mapping[str, object], key: str) -> str | None:
    """``record[key]`` as a str; None when absent or None."""
    value = record.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _wrong(key, value, "text")


def read_bool(record: Mapping[str, object], key: str) -> bool | None:
    """``record[key]`` as a bool; None when absent or None."""
    value = record.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise _wrong(key, value, "true or false")


def read_list(record: Mapping[str, object], key: str) -> list[object]:
    """``record[key]`` as a list (a JSON array); empty when absent or None."""
    value = record.get(key)
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    raise _wrong(key, value, "a list")


def read_ints(record: Mapping[str, object], key: str) -> tuple[int, ...]:
    """``record[key]`` as a tuple of ints (numbers of lines, messages or turns); empty when absent or None."""
    values = read_list(record, key)
    numbers = [read_int({key: value}, key) for value in values]
    if None in numbers:
        raise _wrong(key, values, "a list of integers")
    return tuple(n for n in numbers if n is not None)


def read_mapping(record: Mapping[str, object], key: str) -> Mapping[str, object] | None:
    """``record[key]`` as a mapping (a JSON object); None when absent or None."""
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value
    raise _wrong(key, value, "an object")
