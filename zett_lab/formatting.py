"""How zett_lab writes a number for a person: the one home of every figure in reports, widgets, plots and reprs.

Thousands separators for counts (``1,304,190``), ``k``/``M``/``B`` suffixes where space is short
(``13k``, ``1.3M``), fixed decimals for ratios (``0.693``), and never scientific notation, whatever the
magnitude. Missing values (None, NaN, ``pd.NA``) are written as an empty string. Data files (JSON,
Parquet) keep exact values; only what a person reads goes through here.

Example::

    >>> count(1304190.4), compact(1304190), decimal(0.6931), number(31.08), percent(0.16)
    ('1,304,190', '1.3M', '0.693', '31.1', '16.0%')
    >>> number(9308850.0), number(1.2e-7), number(1080.0)
    ('9,308,850', '0.000', '1,080')
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import SupportsFloat, SupportsIndex

import numpy as np
import pandas as pd

from .records import is_missing

#: Suffixes of :func:`compact`, largest first.
_SUFFIXES = ((1e9, "B"), (1e6, "M"), (1e3, "k"))


def _float(value: object) -> float | None:
    """The value as a finite float; None when missing, not a number or not finite."""
    if is_missing(value) or isinstance(value, (bool, np.bool_)):
        return None
    if not isinstance(value, (SupportsFloat, SupportsIndex, str, bytes)):
        return None
    try:
        result = float(value)
    except (TypeError, ValueError):
        return None
    return result if math.isfinite(result) else None


def count(value: object) -> str:
    """A whole number with thousands separators: ``1304190.4`` -> ``1,304,190``."""
    x = _float(value)
    return "" if x is None else f"{round(x):,}"


def counted(value: object, one: str, many: str | None = None) -> str:
    """A count and the word that agrees with it: ``counted(1, "setting")`` -> ``1 setting``, ``counted(4,
    "setting")`` -> ``4 settings``; ``many`` when the plural is not ``one + "s"`` (``counted(1, "meets", "meet")``).
    """
    return f"{count(value)} {one if _float(value) == 1 else many or one + 's'}"


def decimal(value: object, digits: int = 3) -> str:
    """A ratio or mean with fixed decimals (thousands separated when large): ``0.6931`` -> ``0.693``."""
    x = _float(value)
    return "" if x is None else f"{x:,.{digits}f}"


def percent(value: object, digits: int = 1) -> str:
    """A share as a percentage: ``0.16`` -> ``16.0%``."""
    x = _float(value)
    return "" if x is None else f"{100 * x:,.{digits}f}%"


def usd(value: object) -> str:
    """Money, never fewer than two decimals: up to four below $10 (summary calls cost fractions of a cent), trailing
    zeros past the cents dropped; two from $10: ``$0.0123``, ``$0.025``, ``$2.00``, ``$12.34``."""
    x = _float(value)
    if x is None:
        return ""
    if abs(x) >= 10:
        return f"${x:,.2f}"
    text = f"{x:,.4f}"
    return f"${text[:-2] + text[-2:].rstrip('0')}"


def numbered(ids: Sequence[object]) -> str:
    """Numbers such as compaction ids, runs joined: ``[0, 1, 2, 5]`` -> ``#0–#2, #5``."""
    values = sorted({round(x) for x in map(_float, ids) if x is not None})
    runs: list[list[int]] = []
    for x in values:
        if runs and x == runs[-1][-1] + 1:
            runs[-1].append(x)
        else:
            runs.append([x])
    return ", ".join(f"#{run[0]}" if len(run) == 1 else f"#{run[0]}–#{run[-1]}" for run in runs)


def compact(value: object) -> str:
    """A token count where space is short (plot ticks, heatmap cells): ``950``, ``12.5k``, ``1.3M``, ``13k``.

    Two significant digits past the suffix's first (``12.5k``, ``125k``), trailing zeros dropped.
    """
    x = _float(value)
    if x is None:
        return ""
    for size, suffix in _SUFFIXES:
        if abs(x) >= size * 0.9995:
            scaled = x / size
            digits = 0 if abs(scaled) >= 100 else 1 if abs(scaled) >= 10 else 2
            text = f"{scaled:,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{scaled:,.0f}"
            return text + suffix
    return f"{x:.0f}" if float(x).is_integer() or abs(x) >= 100 else number(x)


def number(value: object, digits: int = 3) -> str:
    """Any figure, written the readable way for its size.

    Whole numbers and anything of a thousand or more: thousands separators (``9,308,850``); below one:
    ``digits`` decimals (``0.597``); in between, ``digits`` significant digits (``31.1``, ``2.29``).
    """
    x = _float(value)
    if x is None:
        return ""
    if x.is_integer() or abs(x) >= 1000:
        return count(x)
    if abs(x) < 1:
        return f"{x:.{digits}f}"
    places = max(digits - len(str(int(abs(x)))), 0)
    return f"{x:.{places}f}"


def cell(value: object) -> str:
    """One table cell of any type: numbers by :func:`number`, booleans as ``✓``/empty, text as it is."""
    if isinstance(value, (bool, np.bool_)):
        return "✓" if value else ""
    if is_missing(value):
        return ""
    if isinstance(value, (int, float, np.integer, np.floating)):
        return number(value)
    return str(value)


def frame_formatters(
    frame: pd.DataFrame, columns: Mapping[str, Callable[[object], str]] | None = None
) -> dict[str, Callable[[object], str]]:
    """``DataFrame.to_html(formatters=...)`` writing every numeric column by :func:`number` (or ``columns``)."""
    formatters: dict[str, Callable[[object], str]] = {}
    for name in frame.columns:
        dtype = frame[name].dtype
        if pd.api.types.is_bool_dtype(dtype):
            continue
        if pd.api.types.is_numeric_dtype(dtype):
            formatters[name] = number
    formatters.update(columns or {})
    return formatters


def blank_missing(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the missing values of its columns as NaN, so ``to_string``/``to_html`` write them as their
    ``na_rep`` (pandas writes a None as ``None`` and ``pd.NA`` as ``<NA>`` whatever the ``na_rep``). Take the
    :func:`frame_formatters` of ``frame`` first: a changed column holds Python objects."""
    positions = [
        i
        for i, (_, column) in enumerate(frame.items())
        if not pd.api.types.is_float_dtype(column.dtype) and column.isna().any()
    ]
    if not positions:
        return frame
    blanked = frame.copy()
    for i in positions:
        column = blanked.iloc[:, i]
        blanked.isetitem(i, column.astype(object).where(column.notna(), np.nan))
    return blanked


def frame_html(
    frame: pd.DataFrame,
    *,
    max_rows: int | None = None,
    columns: Sequence[str] | None = None,
    formatters: Mapping[str, Callable[[object], str]] | None = None,
    headers: Callable[[str], str] | None = None,
) -> str:
    """A DataFrame as an HTML table with readable numbers (what the ``_repr_html_`` of every result uses).

    Headers are ``headers`` of the column names (the results of later stages pass the metric catalogue's
    ``label``), else the names in words (``total input tokens``), so a narrow page wraps them.
    """
    head = headers or (lambda name: name.replace("_", " "))
    shown = frame if columns is None else frame[[c for c in columns if c in frame.columns]]
    written = {head(str(k)): v for k, v in frame_formatters(shown, formatters).items()}
    return (
        blank_missing(shown)
        .rename(columns=lambda c: head(str(c)))
        .to_html(index=False, na_rep="", max_rows=max_rows, formatters=written, escape=True)
    )
