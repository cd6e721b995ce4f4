"""One way to show a table to a person: readable numbers, metric columns headed by their catalogue labels.

:func:`table` wraps a DataFrame (or Series) for a notebook; the widgets and :func:`table` share
:func:`frame_html`, so a figure reads the same in every output. Numbers come from
``zett_lab.formatting`` (``155,336``, ``0.693``, never ``1.55e+05``); a metric column is headed by its
catalogue label with its definition on hover; an index that carries meaning (a pivot's rows, a
``groupby``'s groups, a ``set_index``) is kept as row headers, a plain row number is dropped.

Example::

    >>> import pandas as pd
    >>> from zett_lab.show import table
    >>> shown = table(pd.DataFrame({"needed_anchor_recall": [0.5], "total_input_tokens": [155336]}))
    >>> "Needed-anchor recall" in shown._repr_html_() and "155,336" in shown._repr_html_()
    True
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from ..formatting import cell as formatted_cell
from ..formatting import count
from ..measure.catalogue import CATALOGUE, label
from .report.content import definition

# The stylesheet of every table and widget, written once per output.
CSS = """
<style>
.zl-table {border-collapse: collapse; font-size: 12px; font-family: var(--jp-code-font-family, monospace);}
.zl-table th, .zl-table td {border: 1px solid #ddd; padding: 2px 6px; text-align: right; white-space: nowrap;}
.zl-table th {background: #f3f3f3; position: sticky; top: 0; white-space: normal; min-width: 3em;}
.zl-table caption {text-align: left; font-weight: bold; padding: 4px 0;}
.zl-table.zl-steps {width: 100%;}
.zl-table.zl-steps td, .zl-table.zl-frame td {white-space: normal;}
.zl-table.zl-frame tbody th {text-align: left; background: #f9f9f9; position: static;}
.zl-table th[title] {text-decoration: underline dotted #888; cursor: help;}
.zl-table tr.zl-applied td {background: #e3f2e1;}
.zl-table tr.zl-over td {background: #fbe3dd;}
.zl-table tr.zl-nowindow td {background: #f1e0ec;}
.zl-table tr.zl-rejected td {background: #fdebd3;}
.zl-scroll {max-height: 320px; overflow: auto; border: 1px solid #ddd;}
.zl-error {color: #8a1f11; background: #fbe3dd; border: 1px solid #cc3311; padding: 6px 8px; white-space: pre-wrap;
           font-family: var(--jp-code-font-family, monospace); font-size: 12px;}
.zl-pre {white-space: pre-wrap; overflow-wrap: anywhere; max-height: 260px; overflow: auto; background: #f7f7f7; border: 1px solid #ddd;
         padding: 6px; font-size: 12px; font-family: var(--jp-code-font-family, monospace);}
.zl-lost {background: #ffd54f; font-weight: bold; padding: 0 2px;}
.zl-muted {color: #666;}
.zl-chip {display: inline-block; border: 1px solid #bbb; border-radius: 3px; padding: 0 4px; margin: 1px;
          font-family: var(--jp-code-font-family, monospace); font-size: 11px;}
</style>
"""


def cell(value: object) -> str:
    """One table cell, escaped: missing values empty, booleans as ✓, numbers readable."""
    return html.escape(formatted_cell(value))


def column_head(column: object) -> str:
    """A table header cell in words: a metric's catalogue label with its definition on hover, else the column's
    name with spaces (the name itself on hover, for code). A pivot's column (a tuple) joins its parts' words."""
    parts = [str(p) for p in (column if isinstance(column, tuple) else (column,)) if str(p)]
    if not parts:
        return "<th></th>"
    meaning = next((m for m in map(definition, parts) if m), None) or f"column {' · '.join(parts)}"
    words = " · ".join(label(p) for p in parts)
    return f'<th title="{html.escape(meaning)}">{html.escape(words)}</th>'


def row_head(value: object) -> str:
    """A row header cell: a metric's catalogue label with its definition on hover, else the value as it is."""
    name = str(value)
    if name in CATALOGUE:
        return f'<th title="{html.escape(definition(name) or "")}">{html.escape(label(name))}</th>'
    return f"<th>{cell(value)}</th>"


def value_cell(value: object) -> str:
    """A table cell: a metric's name (a ``metric`` column's value) as its catalogue label with its definition on
    hover, anything else readable by :func:`cell`."""
    if isinstance(value, str) and value in CATALOGUE:
        return f'<td title="{html.escape(definition(value) or "")}">{html.escape(label(value))}</td>'
    return f"<td>{cell(value)}</td>"


def frame_html(frame: pd.DataFrame, *, scroll: bool = False, row_heads: int = 0, css_class: str = "zl-table") -> str:
    """A DataFrame as an HTML table (metric columns headed by their catalogue labels); its first ``row_heads``
    columns are written as row headers."""
    head = "".join(column_head(c) for c in frame.columns)
    rows = "".join(
        "<tr>"
        + "".join(row_head(v) for v in record[:row_heads])
        + "".join(value_cell(v) for v in record[row_heads:])
        + "</tr>"
        for record in frame.astype("object").to_numpy()
    )
    table = f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    return f'<div class="zl-scroll">{table}</div>' if scroll else table


#: A column's name (``mean_summary_tokens``): what the rows of a transposed table are named by.
_COLUMN_NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def _row_name(value: object) -> object:
    """A row of an unnamed index (a transposed table's columns, a mapping's names): a column's name in words
    (:func:`label`; a metric keeps its name, written as its label by :func:`row_head`), anything else as it is."""
    if isinstance(value, str) and value not in CATALOGUE and _COLUMN_NAME.fullmatch(value):
        return label(value)
    return value


def _meaningful_index(index: pd.Index) -> bool:
    """Whether an index says something about its rows: named, several levels, or not row numbers."""
    return any(n is not None for n in index.names) or not pd.api.types.is_integer_dtype(index.dtype)


@dataclass(frozen=True)
class Table:
    """A DataFrame shown to a person (what :func:`table` returns); its ``_repr_html_`` is the table.

    Attributes:
        frame: The data, unchanged.
        max_rows: At most this many rows are shown (None: all), with a line saying how many there are.
    """

    frame: pd.DataFrame
    max_rows: int | None = 30

    def _repr_html_(self) -> str:
        frame = self.frame
        levels = 0
        if _meaningful_index(frame.index):
            levels = frame.index.nlevels
            if levels == 1 and frame.index.name is None:
                frame = frame.set_axis(frame.index.map(_row_name), axis="index")
            names = ["" if name is None else str(name) for name in frame.index.names]
            frame = frame.rename_axis(index=names).reset_index(allow_duplicates=True)
        shown = frame if self.max_rows is None else frame.head(self.max_rows)
        more = (
            f'<div class="zl-muted">first {count(len(shown))} of {count(len(frame))} rows</div>'
            if len(shown) < len(frame)
            else ""
        )
        return f"{CSS}{frame_html(shown, row_heads=levels, css_class='zl-table zl-frame')}{more}"


def table(frame: pd.DataFrame | pd.Series | Mapping[str, object], max_rows: int | None = 30) -> Table:
    """A DataFrame (or Series, or a mapping of named figures such as ``trace.summary()``) for a person to read in a
    notebook: numbers with thousands separators and never in scientific notation, metric columns headed by their
    catalogue labels (definition on hover), a meaningful index (a mapping's names, in words) kept as row headers;
    at most ``max_rows`` rows (None: all).

    Example::

        from zett_lab.show import table

        table(trace.summary())
        table(trace.compactions[["step", "older_tokens", "summary_tokens", "compression_ratio"]])
        table(rows.pivot(index="native_id", columns="summarizer", values="needed_anchor_recall"))
    """
    if isinstance(frame, pd.DataFrame):
        return Table(frame, max_rows)
    if isinstance(frame, pd.Series):
        return Table(frame.to_frame(), max_rows)
    return Table(pd.DataFrame({"value": list(frame.values())}, index=list(frame), dtype=object), max_rows)
