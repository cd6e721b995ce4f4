"""Table cells as plain Python values: the one conversion from DataFrames to JSON-ready records.

Example::

    >>> import pandas as pd
    >>> records(pd.DataFrame({"a": [1, None]}))
    [{'a': 1.0}, {'a': None}]
"""

from __future__ import annotations

import math
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


def plain(value: object, digits: int | None = None) -> Any:
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
) -> list[dict[str, Any]]:
    """Rows of a frame as JSON-ready dicts (only the ``columns`` present, in that order)."""
    if frame is None or not len(frame):
        return []
    columns = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    return [
        {c: plain(v, digits) for c, v in zip(columns, row, strict=True)}
        for row in frame[columns].itertuples(index=False, name=None)
    ]
