"""Choosing settings from a sweep: the Pareto front of cost and loss, constraints, one recommendation.

:func:`recommend` answers the two questions a study asks, with one rule each (the rule is
part of the answer, so a report can print it):

- with ``constraints``: the cheapest setting whose metrics meet them (in every conversation,
  or on the mean over conversations), by any cost column (``total_input_tokens``,
  ``total_cost_usd``, ...);
- without: the knee of the Pareto front of ``cost`` and ``loss``, the front point closest to
  the ideal corner once both axes are scaled to [0, 1] over all settings.

Settings with a failed cell or a failed summary (:func:`measured_cells`) are never
recommended and never on a front. Metric directions come from the metric catalogue
(:mod:`zett_lab.measure.catalogue`).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.typing import DataFrameGroupBy

from ..errors import SettingError
from ..formatting import count, frame_html, number
from ..measure.catalogue import CATALOGUE, across_conversations, higher_is_better
from ..measure.catalogue import label as metric_label
from .grid import SETTING_COLUMNS, STOCK_ENGINE
from .results import Sweep


def _maximize(column: str, maximize: bool | None) -> bool:
    return bool(maximize) if maximize is not None else higher_is_better(column)


def _table(results: Sweep | pd.DataFrame) -> pd.DataFrame:
    table = results.results if isinstance(results, Sweep) else results
    if not isinstance(table, pd.DataFrame):
        raise SettingError(f"expected a Sweep or its results DataFrame, got {type(results).__name__}")
    return table


def _need(table: pd.DataFrame, *columns: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        numeric = [c for c in table.columns if pd.api.types.is_numeric_dtype(table[c])]
        raise SettingError(f"no column(s) {missing} in the results; numeric columns: {', '.join(numeric)}")


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


def _per_setting(table: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """The rows of settings whose every cell is a measurement (a setting with a failed cell is left out)."""
    by = [c for c in by if c in table.columns]
    failed = ~measured_cells(table)
    if not by:
        return table.loc[~failed]
    bad = set(table.loc[failed, by].itertuples(index=False, name=None))
    keep = [key not in bad for key in table[by].itertuples(index=False, name=None)]
    return table.loc[keep]


def pareto_front(
    results: Sweep | pd.DataFrame,
    cost: str = "total_input_tokens",
    loss: str = "needed_anchor_recall",
    *,
    maximize: bool | None = None,
    by: Sequence[str] | None = SETTING_COLUMNS,
    nan: str = "best",
) -> pd.DataFrame:
    """The settings no other setting beats on both cost and loss.

    Args:
        results: a :class:`Sweep` or its results table.
        cost: lower is better (``total_input_tokens``, ``total_cost_usd``, ...).
        loss: the quality metric; its direction is its catalogue entry's (a column outside the catalogue
            needs ``maximize=``).
        by: the columns that make a setting: per setting, cost and loss pool over conversations as
            their catalogue entries say (``across``; a column outside it: cost summed, loss averaged);
            None keeps one point per row. Settings with a failed cell
            or a failed summary (:func:`measured_cells`) are left out.
        nan: a missing loss value means nothing was compacted or nothing had to be kept:
            ``"best"`` counts it as the best value (1 for ratios to maximize, 0 otherwise),
            ``"drop"`` leaves the row out.

    Returns:
        The front, cheapest first: the ``by`` columns, ``cost``, ``loss`` and ``conversations``.
    """
    table = _table(results)
    _need(table, cost, loss)
    higher = _maximize(loss, maximize)
    table = _fill_nan(table, [loss], nan, {loss: higher})
    if by is not None:
        table = _per_setting(table, by)
        keys = [c for c in by if c in table.columns]
        points = (
            table.groupby(keys, dropna=False, sort=False)
            .agg(
                **{
                    cost: (cost, across_conversations(cost, "sum")),
                    loss: (loss, across_conversations(loss, "mean")),
                    "conversations": ("conversation_id", "nunique"),
                }
            )
            .reset_index()
        )
    else:
        points = table[measured_cells(table)].assign(conversations=1)
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


def _fill_nan(table: pd.DataFrame, columns: Sequence[str], nan: str, higher: Mapping[str, bool]) -> pd.DataFrame:
    if nan not in ("best", "drop"):
        raise SettingError(f"nan must be 'best' or 'drop', got {nan!r}")
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


def _all_meet(values: pd.Series, test: Callable[..., Any], value: float) -> bool:
    """Whether every value of one setting is present and passes ``test`` against ``value``."""
    return bool(values.notna().all() and test(values.to_numpy(dtype=float), value).all())


_CLAUSE = re.compile(
    r"^\s*(?P<column>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op>>=|<=|==|!=|>|<|=)\s*"
    r"(?P<value>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)


def parse_constraints(constraints: str | Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """``[(column, operator, value)]`` from a dict ``{column: (op, value)}`` or a string.

    The string form is clauses joined by ``and`` (or commas): ``"needed_anchor_recall >= 0.9
    and constraint_survival == 1"``. Operators: ``>= <= == != > <`` (``=`` means ``==``).
    Parsed with a regular expression; nothing is evaluated.
    """
    parsed: list[tuple[str, str, float]] = []
    if isinstance(constraints, str):
        clauses = [c for c in re.split(r"\s+and\s+|,|&&", constraints.strip(), flags=re.IGNORECASE) if c.strip()]
        if not clauses:
            raise SettingError("constraints string is empty")
        for clause in clauses:
            match = _CLAUSE.match(clause)
            if match is None:
                raise SettingError(
                    f"cannot read constraint {clause.strip()!r}: write COLUMN OP NUMBER, e.g. 'needed_anchor_recall "
                    ">= 0.9', "
                    "joined by 'and'"
                )
            op = "==" if match["op"] == "=" else match["op"]
            parsed.append((match["column"], op, float(match["value"])))
        return parsed
    if not isinstance(constraints, Mapping) or not constraints:
        raise SettingError("constraints must be a non-empty dict {column: (op, value)} or a string")
    for column, spec in constraints.items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
            raise SettingError(f"constraint for {column!r} must be (operator, value), got {spec!r}")
        op, value = spec
        op = "==" if op == "=" else op
        if op not in _OPERATORS:
            raise SettingError(f"constraint for {column!r}: unknown operator {op!r} (use {', '.join(_OPERATORS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise SettingError(f"constraint for {column!r}: value must be a number, got {value!r}")
        parsed.append((str(column), op, float(value)))
    return parsed


class NoFeasibleSetting(SettingError):
    """No setting of the sweep meets the constraints (the message shows the closest values)."""


@dataclass
class Recommendation:
    """The recommended setting and the rule that chose it.

    Attributes:
        summarizer, max_tokens, keep_recent_tokens, engine: the setting.
        cost: its cost (summed over conversations), in the ``cost_column``.
        values: the constrained metrics for it (worst conversation, or mean with ``over="mean"``);
            with no constraints, its mean loss.
        candidates: every feasible setting, cheapest first (with no constraints: the Pareto front).
        rule: how the setting was chosen, in one sentence.
    """

    summarizer: str | None
    max_tokens: int
    keep_recent_tokens: int
    cost: float
    cost_column: str
    values: dict[str, float]
    candidates: pd.DataFrame
    constraints: list[tuple[str, str, float]]
    rule: str = ""
    engine: str = STOCK_ENGINE

    def __repr__(self) -> str:
        values = ", ".join(f"{k}={number(v)}" for k, v in self.values.items())
        engine = f"engine={self.engine!r}, " if self.engine != STOCK_ENGINE else ""
        return (
            f"Recommendation({engine}summarizer={self.summarizer!r}, max_tokens={count(self.max_tokens)}, "
            f"keep_recent_tokens={count(self.keep_recent_tokens)}, {self.cost_column}={count(self.cost)}; {values}; "
            f"{len(self.candidates)} feasible settings)"
        )

    def _repr_html_(self) -> str:
        """The setting, its figures labelled from the metric catalogue, the rule, and the candidates it beat."""
        engine = f" · engine <code>{html.escape(self.engine)}</code>" if self.engine != STOCK_ENGINE else ""
        figures = {metric_label(self.cost_column): count(self.cost)} | {
            metric_label(k): number(v) for k, v in self.values.items()
        }
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:right'>{html.escape(v)}</td></tr>"
            for k, v in figures.items()
        )
        rule = f"<p>{html.escape(self.rule)}</p>" if self.rule else ""
        return (
            f"<div><h4>Recommended: <code>{html.escape(str(self.summarizer))}</code> at "
            f"max_tokens={count(self.max_tokens)}, keep_recent_tokens={count(self.keep_recent_tokens)}{engine}</h4>"
            f"<table>{rows}</table>{rule}<details><summary>{len(self.candidates)} feasible settings</summary>"
            f"{frame_html(self.candidates, max_rows=20)}</details></div>"
        )


def recommend(
    results: Sweep | pd.DataFrame,
    constraints: str | Mapping[str, Any] | None = None,
    *,
    cost: str = "total_input_tokens",
    loss: str = "lost_but_needed",
    over: str = "all",
    nan: str = "best",
) -> Recommendation:
    """The cheapest setting whose metrics meet ``constraints``; with none, the knee of the Pareto front.

    Args:
        results: a :class:`Sweep` or its results table.
        constraints: ``{"needed_anchor_recall": (">=", 0.9), "constraint_survival": ("==", 1)}``
            or ``"needed_anchor_recall >= 0.9 and constraint_survival == 1"``. None: the
            setting on the Pareto front of (``cost``, ``loss``) closest to the ideal corner.
        cost: the column to minimize, summed over conversations.
        loss: the quality metric of the Pareto front (used only without constraints), averaged
            over conversations.
        over: ``"all"``: every conversation must meet each constraint (its worst value
            counts); ``"mean"``: the mean over conversations must.
        nan: a missing metric (nothing compacted, nothing to keep) counts as the best value
            (``"best"``) or fails the constraint (``"drop"``).

    Raises:
        NoFeasibleSetting: nothing meets the constraints (the message shows, per constraint,
            the best value any setting reached).
    """
    table = _table(results)
    if constraints is None:
        return _knee(table, cost, loss, nan)
    parsed = parse_constraints(constraints)
    columns = sorted({c for c, _, _ in parsed})
    _need(table, cost, *columns)
    if over not in ("all", "mean"):
        raise SettingError(f"over must be 'all' or 'mean', got {over!r}")
    if nan not in ("best", "drop"):
        raise SettingError(f"nan must be 'best' or 'drop', got {nan!r}")
    metrics = {c: CATALOGUE[c].higher_is_better for c in columns if c in CATALOGUE}
    usable = _complete_settings(table, columns, nan, metrics)
    # Which value is the worst (or the best reached): a metric's own direction; for any other
    # column, the direction its constraint asks for (``>=``: higher is better, else lower).
    higher = {c: (CATALOGUE[c].higher_is_better if c in CATALOGUE else op in (">", ">=")) for c, op, _ in parsed}
    keys = [c for c in SETTING_COLUMNS if c in usable.columns]
    grouped = usable.groupby(keys, dropna=False, sort=False)
    per = grouped.agg(**{cost: (cost, "sum"), "conversations": ("conversation_id", "nunique")})
    meets, shown = _judge_constraints(grouped, parsed, over, higher, per.index)
    summary = per.assign(**{f"{c} ({'worst' if over == 'all' else 'mean'})": s for c, s in shown.items()})
    feasible = summary[meets].sort_values(cost, kind="stable")
    if not len(feasible):
        raise _nothing_feasible(constraints, parsed, shown, higher, over, len(per))
    first = feasible.index[0]
    setting = dict(zip(keys, first if isinstance(first, tuple) else (first,), strict=True))
    return Recommendation(
        summarizer=setting.get("summarizer"),
        max_tokens=int(setting["max_tokens"]),
        keep_recent_tokens=int(setting["keep_recent_tokens"]),
        cost=float(feasible.iloc[0][cost]),
        cost_column=cost,
        values={c: float(shown[c].loc[first]) for c in columns},
        candidates=feasible.reset_index(),
        constraints=parsed,
        rule=_constrained_rule(cost, constraints, over, len(feasible)),
        engine=setting.get("engine", STOCK_ENGINE),
    )


def _complete_settings(
    table: pd.DataFrame, columns: Sequence[str], nan: str, higher: Mapping[str, bool]
) -> pd.DataFrame:
    """The cells of settings with no failed cell, the constrained ``columns`` numeric.

    With ``nan="best"`` a missing metric counts as its best value; otherwise it stays missing
    and fails its constraint.
    """
    filled = _fill_nan(table, columns, "best", higher) if nan == "best" else table.copy()
    for column in columns:
        filled[column] = pd.to_numeric(filled[column], errors="coerce")
    usable = _per_setting(filled, SETTING_COLUMNS)
    if not len(usable):
        raise NoFeasibleSetting(
            "no complete setting in the sweep (every setting has a failed cell or a failed summary)"
        )
    return usable


def _judge_constraints(
    grouped: DataFrameGroupBy,
    parsed: Sequence[tuple[str, str, float]],
    over: str,
    higher: Mapping[str, bool],
    settings: pd.Index,
) -> tuple[pd.Series, dict[str, pd.Series]]:
    """Per setting, whether it meets every constraint, and per column the value judged.

    ``over="all"`` judges every conversation (the value shown is the worst one); ``"mean"``
    judges the mean over conversations.
    """
    meets = pd.Series(True, index=settings)
    shown: dict[str, pd.Series] = {}
    for column, op, value in parsed:
        test = _OPERATORS[op]
        if over == "all":
            ok = grouped[column].apply(partial(_all_meet, test=test, value=value))
            shown[column] = grouped[column].min() if higher[column] else grouped[column].max()
        else:
            mean = grouped[column].mean()
            ok = mean.notna() & pd.Series(test(mean.to_numpy(dtype=float), value), index=mean.index)
            shown[column] = mean
        meets &= ok.reindex(settings).fillna(False).astype(bool)
    return meets, shown


def _nothing_feasible(
    constraints: str | Mapping[str, Any],
    parsed: Sequence[tuple[str, str, float]],
    shown: Mapping[str, pd.Series],
    higher: Mapping[str, bool],
    over: str,
    complete: int,
) -> NoFeasibleSetting:
    """The error for constraints no setting meets, with the best value any setting reached per constraint."""
    closest = "; ".join(
        f"{c} {op} {number(v)}: best reached {number(s.max() if higher[c] else s.min(), 4)}"
        for (c, op, v), s in ((p, shown[p[0]]) for p in parsed)
    )
    return NoFeasibleSetting(
        f"no setting meets {constraints!r} over {'every conversation' if over == 'all' else 'the mean'} "
        f"({complete} complete settings). {closest}"
    )


def _constrained_rule(cost: str, constraints: str | Mapping[str, Any], over: str, feasible: int) -> str:
    where = "in every conversation" if over == "all" else "on the mean over conversations"
    return f"The cheapest setting ({_named(cost)} summed over conversations) meeting {constraints!r} {where}; {feasible} setting(s) qualified."


def _named(column: str) -> str:
    """A metric column as a person reads it in a sentence: its catalogue label, then the column."""
    name = metric_label(column)
    return f"{name.lower()} ({column})" if name != column else column


def _knee(table: pd.DataFrame, cost: str, loss: str, nan: str) -> Recommendation:
    """The Pareto-front setting closest to the ideal corner, both axes scaled to [0, 1] over all settings."""
    front = pareto_front(table, cost=cost, loss=loss, nan=nan)
    if not len(front):
        raise NoFeasibleSetting(f"no complete setting in the results has both {cost} and {loss}")
    higher = _maximize(loss, None)
    keys = [c for c in SETTING_COLUMNS if c in front.columns]
    settings = _per_setting(_fill_nan(table, [loss], nan, {loss: higher}), keys)
    points = settings.groupby(keys, dropna=False, sort=False).agg(**{cost: (cost, "sum"), loss: (loss, "mean")})

    def scaled(column: str, best_is_high: bool) -> pd.Series:
        low, high = float(points[column].min()), float(points[column].max())
        share = (front[column].astype(float) - low) / (high - low) if high > low else front[column].astype(float) * 0.0
        return 1 - share if best_is_high else share

    distance = (scaled(cost, False) ** 2 + scaled(loss, higher) ** 2) ** 0.5
    chosen = front.assign(_distance=distance).sort_values(["_distance", cost, *keys], kind="mergesort").iloc[0]
    return Recommendation(
        summarizer=chosen.get("summarizer"),
        max_tokens=int(chosen["max_tokens"]),
        keep_recent_tokens=int(chosen["keep_recent_tokens"]),
        cost=float(chosen[cost]),
        cost_column=cost,
        values={loss: float(chosen[loss])},
        candidates=front,
        constraints=[],
        engine=chosen.get("engine", STOCK_ENGINE),
        rule=f"Per setting ({', '.join(keys)}), {_named(cost)} is summed and {_named(loss)} averaged over conversations; "
        f"the Pareto front holds the settings no other setting beats on both; the recommended one is the front point "
        f"closest to the ideal corner (lowest {cost}, {'highest' if higher else 'lowest'} {loss}) once both axes are "
        f"scaled to [0, 1] over all settings.",
    )
