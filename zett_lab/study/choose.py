"""Choosing settings from a sweep: which cells are measurements, the Pareto front, constraints.

- :func:`measured_cells`: a cell with a failed replay or a failed summary is no measurement; its
  setting is never on a front and never recommended.
- :func:`setting_points`: per setting, a cost and a loss pooled over conversations (the Pareto front and its plot).
- :func:`pareto_front`: the settings no other setting beats on both a cost and a loss.
- :func:`parse_constraints`: ``"needed_anchor_recall >= 0.9 and steps_over_budget <= 0"`` as
  :class:`Constraint` tuples (parsed, never evaluated).

The recommendation itself (constraints first, then the user's order of objectives, checked out of
sample) is :func:`zett_lab.study.recommendation.recommend`. Metric directions come from the metric
catalogue (:mod:`zett_lab.measure.catalogue`), never from a column's name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..formatting import number
from ..measure.catalogue import across_conversations, higher_is_better, label, metrics
from .grid import SETTING_COLUMNS
from .result_columns import result_column_names
from .results import Sweep


def _maximize(column: str, maximize: bool | None) -> bool:
    return bool(maximize) if maximize is not None else higher_is_better(column)


def results_table(results: Sweep | pd.DataFrame) -> pd.DataFrame:
    """The results table of a :class:`Sweep`, or the table given."""
    table = results.results if isinstance(results, Sweep) else results
    if not isinstance(table, pd.DataFrame):
        raise SettingError(f"expected a Sweep or its results DataFrame, got {type(results).__name__}")
    return table


def need_columns(table: pd.DataFrame, *columns: str) -> None:
    """Raise :class:`SettingError` naming the missing columns (and the numeric ones there are)."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
        raise SettingError(f"no column(s) {missing} in the results; numeric columns: {', '.join(numeric)}")


def need_result_columns(*columns: str) -> None:
    """Raise :class:`SettingError` naming the columns no sweep's results table has (checked before any replay)."""
    known = result_column_names()
    missing = [c for c in columns if c not in known]
    if missing:
        metric_names = sorted({entry.name for entry in metrics()})
        raise SettingError(f"no column(s) {missing} in a sweep's results; metrics: {', '.join(metric_names)}")


def measured_cells(table: pd.DataFrame) -> pd.Series:
    """Which rows are measurements: the cell ran (no ``error``) and none of its summaries failed.

    A failed summary leaves the context unsummarized, so the cell's loss metrics would describe
    no summary at all; such cells are marked (``failed`` > 0, ``summary_error``) and are never
    ranked, averaged into a front, or recommended.
    """
    ok = pd.Series(True, index=table.index)
    if "error" in table.columns:
        ok &= table["error"].isna()
    if "failed" in table.columns:
        ok &= pd.to_numeric(table["failed"], errors="coerce").fillna(0).eq(0)
    return ok


def per_setting(table: pd.DataFrame, by: Sequence[str] = SETTING_COLUMNS) -> pd.DataFrame:
    """The rows of settings whose every cell is a measurement (a setting with a failed cell is left out)."""
    by = [c for c in by if c in table.columns]
    failed = ~measured_cells(table)
    if not by:
        return table.loc[~failed]
    bad = set(table.loc[failed, by].itertuples(index=False, name=None))
    keep = [key not in bad for key in table[by].itertuples(index=False, name=None)]
    return table.loc[keep]


def setting_points(table: pd.DataFrame, cost: str, loss: str, keys: Sequence[str]) -> pd.DataFrame:
    """One row per setting (``keys``): ``cost`` and ``loss`` pooled over its rows as their catalogue entries say
    (``across``; a column outside it: cost summed, loss averaged), ``conversations``, and
    ``conversations_with_loss``: the rows whose loss is defined. A mean leaves an undefined loss (nothing was
    compacted) out, as every table and heatmap of a sweep does, so a metric means the same everywhere."""
    values = table.assign(**{loss: pd.to_numeric(table[loss], errors="coerce")})
    return (
        values.groupby(list(keys), dropna=False, sort=False)
        .agg(
            **{
                cost: (cost, across_conversations(cost, "sum")),
                loss: (loss, across_conversations(loss, "mean")),
                "conversations": ("conversation_id", "nunique"),
                "conversations_with_loss": (loss, "count"),
            }
        )
        .reset_index()
    )


def pareto_front(
    results: Sweep | pd.DataFrame,
    cost: str = "total_input_tokens",
    loss: str = "needed_anchor_recall",
    *,
    maximize: bool | None = None,
    by: Sequence[str] | None = SETTING_COLUMNS,
    nan: str = "skip",
) -> pd.DataFrame:
    """The settings no other setting beats on both cost and loss.

    Args:
        results: a :class:`Sweep` or its results table.
        cost: lower is better (``total_input_tokens``, ``total_cost_usd``, ...).
        loss: the quality metric; its direction is its catalogue entry's (a column outside the catalogue
            needs ``maximize=``).
        by: the columns that make a setting: per setting, cost and loss pool over conversations
            (:func:`setting_points`); None keeps one point per row. Settings with a failed cell
            or a failed summary (:func:`measured_cells`) are left out.
        nan: a missing loss value means nothing was compacted or nothing had to be kept:
            ``"skip"`` leaves it out of the setting's mean (as the heatmaps and the report's tables do; a
            setting where no conversation has one is no point), ``"best"`` counts it as the best value (1 for
            ratios to maximize, 0 otherwise), ``"drop"`` leaves the row out (its cost too).

    Returns:
        The front, cheapest first: the ``by`` columns, ``cost``, ``loss``, ``conversations`` and
        ``conversations_with_loss`` (those whose loss went into the mean).
    """
    table = results_table(results)
    need_columns(table, cost, loss)
    higher = _maximize(loss, maximize)
    table = fill_nan(table, [loss], nan, {loss: higher})
    if by is not None:
        table = per_setting(table, by)
        points = setting_points(table, cost, loss, [c for c in by if c in table.columns])
    else:
        points = table[measured_cells(table)].assign(conversations=1, conversations_with_loss=1)
    points = points.dropna(subset=[cost, loss])
    if not len(points):
        return points.reset_index(drop=True)
    ordered = points.assign(_q=points[loss] if higher else -points[loss]).sort_values(
        [cost, "_q"], ascending=[True, False], kind="stable"
    )
    best = -math.inf
    keep = []
    for index, value in zip(ordered.index, ordered["_q"], strict=True):
        if value > best:
            keep.append(index)
            best = value
    return ordered.loc[keep].drop(columns="_q").reset_index(drop=True)


def fill_nan(table: pd.DataFrame, columns: Sequence[str], nan: str, higher: Mapping[str, bool]) -> pd.DataFrame:
    """``columns`` as numbers, a measured cell's missing value of a metric (in ``higher``: its direction) left
    missing (``nan="skip"``), counted as its best value (``"best"``: 1 for a ratio to maximize, else 0) or its row
    dropped (``"drop"``)."""
    if nan not in ("skip", "best", "drop"):
        raise SettingError(f"nan must be 'skip', 'best' or 'drop', got {nan!r}")
    out = table.copy()
    ok = measured_cells(out)
    for column in columns:
        values = pd.to_numeric(out[column], errors="coerce")
        if nan == "best" and column in higher:  # a column that is no metric has no best value: its NaN stays missing
            values = values.where(~(values.isna() & ok), 1.0 if higher[column] else 0.0)
        out[column] = values
    if nan == "drop":
        out = out.dropna(subset=list(columns))
    return out


_OPERATORS = {
    ">=": np.greater_equal,
    "<=": np.less_equal,
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    "<": np.less,
}

#: How an operator reads in a sentence.
_OPERATOR_TEXT = {">=": "≥", "<=": "≤", "==": "=", "!=": "≠", ">": ">", "<": "<"}


class Constraint(NamedTuple):
    """One constraint a recommended setting must meet: ``column op value`` (a tuple, as it reads)."""

    column: str
    op: str
    value: float

    def test(self, values: np.ndarray) -> np.ndarray:
        """Which values meet it (NaN never does)."""
        with np.errstate(invalid="ignore"):
            return np.asarray(_OPERATORS[self.op](values, self.value), dtype=bool) & ~np.isnan(values)

    @property
    def higher_is_better(self) -> bool:
        """Which way is better for its column: a metric's own direction; for any other column, the direction the
        constraint asks for (``>``, ``>=``: higher)."""
        try:
            return higher_is_better(self.column)
        except SettingError:
            return self.op in (">", ">=")

    def __str__(self) -> str:
        """As it is written (and parsed): ``superseded_rate <= 0.1``, fixed-point (never ``1e+06``)."""
        value = f"{self.value:f}".rstrip("0").rstrip(".")
        return f"{self.column} {self.op} {value}"


_CLAUSE = re.compile(
    r"^\s*(?P<column>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>>=|<=|==|!=|>|<|=)\s*"
    r"(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


#: Constraints as a user writes them: ``"needed_anchor_recall >= 0.9 and steps_over_budget <= 0"``, a dict
#: ``{column: (operator, value)}``, or :class:`Constraint` tuples already parsed.
ConstraintSpec: TypeAlias = str | Mapping[str, tuple[str, float]] | Sequence[Constraint]


def parse_constraints(constraints: ConstraintSpec) -> list[Constraint]:
    """:class:`Constraint` tuples ``(column, operator, value)`` from a string, a dict ``{column: (op, value)}``
    or constraints already parsed.

    The string form is clauses joined by ``and`` (or commas): ``"needed_anchor_recall >= 0.9
    and constraint_survival == 1"``. Operators: ``>= <= == != > <`` (``=`` means ``==``).
    Parsed with a regular expression; nothing is evaluated.
    """
    parsed: list[Constraint] = []
    if isinstance(constraints, str):
        clauses = [c for c in re.split(r"\s+and\s+|,|&&", constraints.strip(), flags=re.IGNORECASE) if c.strip()]
        if not clauses:
            raise SettingError("constraints string is empty")
        for clause in clauses:
            match = _CLAUSE.match(clause)
            if match is None:
                raise SettingError(
                    f"cannot read constraint {clause.strip()!r}: write COLUMN OP NUMBER, e.g. 'needed_anchor_recall "
                    ">= 0.9', joined by 'and'"
                )
            op = "==" if match["op"] == "=" else match["op"]
            parsed.append(Constraint(match["column"], op, float(match["value"])))
        return parsed
    if isinstance(constraints, Sequence) and constraints and all(isinstance(c, tuple) for c in constraints):
        return [_constraint(*c) if len(c) == 3 else _bad(c) for c in constraints]
    if not isinstance(constraints, Mapping) or not constraints:
        raise SettingError("constraints must be a non-empty dict {column: (op, value)} or a string")
    for column, spec in constraints.items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
            raise SettingError(f"constraint for {column!r} must be (operator, value), got {spec!r}")
        parsed.append(_constraint(column, *spec))
    return parsed


def _constraint(column: Any, op: Any, value: Any) -> Constraint:
    op = "==" if op == "=" else op
    if op not in _OPERATORS:
        raise SettingError(f"constraint for {column!r}: unknown operator {op!r} (use {', '.join(_OPERATORS)})")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SettingError(f"constraint for {column!r}: value must be a number, got {value!r}")
    return Constraint(str(column), str(op), float(value))


def _bad(item: Any) -> Constraint:
    raise SettingError(f"a constraint is (column, operator, value), got {item!r}")


def operator_text(op: str) -> str:
    """An operator as it reads in a sentence (``<=``: ``≤``)."""
    return _OPERATOR_TEXT[op]


class NoFeasibleSetting(SettingError):
    """No setting of the results can be recommended: every one has a failed cell or lacks the figures asked for."""


@dataclass(frozen=True)
class ConstraintCheck:
    """How one constraint was honoured.

    Attributes:
        constraint: ``(column, op, value)``.
        default: one of :data:`~zett_lab.study.recommendation.DEFAULT_CONSTRAINTS` (not one you gave).
        judged: settings still in the running when it was checked.
        met: of those, the settings that meet it.
        applied: whether it ruled settings out (False: none of the ``judged`` settings met it, so it ruled
            nothing out).
        best: the best value any judged setting reached (its worst conversation with ``over="all"``, its
            mean with ``over="mean"``).
    """

    constraint: Constraint
    default: bool
    judged: int
    met: int
    applied: bool
    best: float

    def text(self) -> str:
        """The constraint in words: ``Steps over budget ≤ 0``."""
        return constraint_text(self.constraint)


def constraint_text(constraint: Constraint) -> str:
    """A constraint in words, its column by its catalogue label: ``Superseded-only rate ≤ 0.1``."""
    value = number(constraint.value)
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return f"{label(constraint.column)} {operator_text(constraint.op)} {value}"
