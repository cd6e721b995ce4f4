"""The rule of a recommendation, applied to a sweep's means per conversation: constraints, then objectives.

:func:`setting_values` lays every measured setting's values out per conversation (:class:`SettingValues`);
:func:`apply_rule` applies the constraints in order and ranks the settings left by the objectives;
:func:`held_out` checks the rule out of sample (:class:`HeldOut`); :func:`ranked_settings` and
:func:`weighed_alternatives` are the ranking (:class:`Ranked`) and what the verdict weighs the recommended
setting against (:class:`Alternative`). :func:`~zett_lab.study.recommendation.recommend` puts them together.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..formatting import count
from ..measure.catalogue import label, metric
from .choose import (
    Constraint,
    ConstraintCheck,
    NoFeasibleSetting,
    constraint_text,
    fill_nan,
    need_columns,
    per_setting,
)
from .grid import SETTING_COLUMNS, STOCK_ENGINE

#: Alternatives the verdict weighs the recommendation against, at most.
ALTERNATIVES = 4


@dataclass(frozen=True)
class Ranked:
    """One setting of the ranking: the setting, its figures (means per conversation) and what ruled it out."""

    engine: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int
    figures: Mapping[str, float]
    #: 1 = recommended; settings ruled out rank after every setting that meets the constraints.
    rank: int
    #: The first applied constraint it fails (None: it meets them all).
    ruled_out_by: Constraint | None = None

    def setting_text(self, engines: bool = False) -> str:
        """``truncate at max_tokens=25,000, keep_recent_tokens=1,600``; when ``engines``, ``engine split-turn with
        summarizer truncate at ...``."""
        named = f"engine {self.engine} with summarizer {self.summarizer}" if engines else self.summarizer
        return f"{named} at max_tokens={count(self.max_tokens)}, keep_recent_tokens={count(self.keep_recent_tokens)}"


@dataclass(frozen=True)
class Alternative:
    """A setting the recommendation is weighed against, and how it differs.

    Attributes:
        setting: the alternative setting and its figures.
        why: why it is shown: ``"next in the ranking"``, ``"fewest <metric> that meets the constraints"``,
            or ``"ruled out by <constraint>"``.
        changes: per objective, its figure relative to the recommended one (``0.16``: 16 % more); None where
            the recommended figure is 0 (the difference is then in ``setting.figures``).
    """

    setting: Ranked
    why: str
    changes: Mapping[str, float | None]


@dataclass(frozen=True)
class HeldOut:
    """The out-of-sample check: settings chosen on part of the conversations, scored on the rest.

    Attributes:
        folds: the folds used (0: not checked).
        asked: the folds asked for.
        conversations: conversations checked.
        figures: per column, the mean per conversation of each conversation's value at the setting chosen
            without its fold (the held-out figures).
        in_sample: the same columns at the recommended setting over every conversation.
        chosen: per fold, ``(summarizer, max_tokens, keep_recent_tokens, engine)`` of the setting chosen
            without it (None: no setting has a value on the other conversations; the fold is not scored).
        agreement: folds whose choice is the recommended setting.
        note: how the folds were made, in one sentence.
        assignment: each conversation's fold (an index into ``chosen``).
    """

    folds: int
    asked: int
    conversations: int
    figures: Mapping[str, float]
    in_sample: Mapping[str, float]
    chosen: tuple[tuple[str, int, int, str] | None, ...]
    agreement: int
    note: str
    assignment: Mapping[str, int] = field(default_factory=dict)


class GridSetting(TypedDict):
    """One setting of a results table by its names and limits (:meth:`SettingValues.setting`)."""

    engine: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int


@dataclass(frozen=True)
class SettingValues:
    """Every measured setting's values per conversation: ``values[column]`` is settings × conversations."""

    keys: list[str]
    setting_table: pd.DataFrame
    conversations: np.ndarray
    values: dict[str, np.ndarray]
    present: np.ndarray

    def mean(self, column: str, conversations: np.ndarray) -> np.ndarray:
        """Per setting, the mean over ``conversations`` (a mask) of its defined values (NaN: none)."""
        values = self.values[column][:, conversations]
        defined = self.present[:, conversations] & ~np.isnan(values)
        n = defined.sum(axis=1)
        total = np.where(defined, values, 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, total / np.maximum(n, 1), np.nan)

    def judge(self, constraint: Constraint, over: str, conversations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per setting, whether it meets ``constraint`` over ``conversations`` and the value judged (its worst
        conversation with ``over="all"``, its mean with ``"mean"``)."""
        present = self.present[:, conversations]
        if over == "mean":
            mean = self.mean(constraint.column, conversations)
            return constraint.test(mean) & present.any(axis=1), mean
        values = self.values[constraint.column][:, conversations]
        meets = (constraint.test(values) | ~present).all(axis=1) & present.any(axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a setting with no defined value: NaN
            shown = np.where(present, values, np.nan)
            worst = np.nanmin(shown, axis=1) if constraint.higher_is_better else np.nanmax(shown, axis=1)
        return meets, worst

    def setting(self, index: int) -> GridSetting:
        """The engine, summarizer, ``max_tokens`` and ``keep_recent_tokens`` of setting ``index``."""
        row = self.setting_table.iloc[int(index)]
        return {
            "engine": str(row.get("engine", STOCK_ENGINE)),
            "summarizer": str(row.get("summarizer")),
            "max_tokens": int(row["max_tokens"]),
            "keep_recent_tokens": int(row["keep_recent_tokens"]),
        }


def setting_values(table: pd.DataFrame, columns: Sequence[str], nan: str) -> tuple[SettingValues, int]:
    """The values of ``columns`` per measured setting and conversation, and how many settings were left out."""
    keys = [c for c in SETTING_COLUMNS if c in table.columns]
    need_columns(table, "max_tokens", "keep_recent_tokens", "conversation_id")
    usable = per_setting(table, keys)
    all_settings = table[keys].drop_duplicates()
    left_out = len(all_settings) - len(usable[keys].drop_duplicates())
    if not len(usable):
        raise NoFeasibleSetting(
            "no setting can be recommended: every setting has a failed replay or a failed summary in some conversation"
        )
    higher = {c: metric(c).higher_is_better for c in columns if _is_metric(c)}
    filled = fill_nan(usable, list(columns), "best", higher) if nan == "best" else usable.copy()
    for column in columns:
        filled[column] = pd.to_numeric(filled[column], errors="coerce").astype(float)
    grouped = filled.groupby([*keys, "conversation_id"], dropna=False, sort=True)
    means = grouped[list(columns)].mean()
    sizes = grouped.size()
    present = sizes.unstack("conversation_id").notna()
    settings = present.index.to_frame(index=False)
    conversations = present.columns.to_numpy()
    values = {
        c: means[c].unstack("conversation_id").reindex(index=present.index, columns=present.columns).to_numpy(float)
        for c in columns
    }
    return SettingValues(keys, settings, conversations, values, present.to_numpy(bool)), left_out


def _is_metric(column: str) -> bool:
    try:
        metric(column)
    except SettingError:
        return False
    return True


@dataclass(frozen=True)
class Choice:
    """What the rule decides on some conversations: the settings in order, and how each constraint went."""

    order: list[int]
    checks: list[ConstraintCheck]
    ruled_out_by: dict[int, Constraint]


def apply_rule(
    grid: SettingValues,
    conversations: np.ndarray,
    constraints: Sequence[tuple[Constraint, bool]],
    objectives: Sequence[str],
    over: str,
    slack: float,
    full: bool,
) -> Choice:
    """Apply the constraints in order, then rank by the objectives (``full``: every setting; else the first only)."""
    alive = grid.present[:, conversations].any(axis=1)
    checks: list[ConstraintCheck] = []
    ruled_out_by: dict[int, Constraint] = {}
    for constraint, default in constraints:
        meets, judged = grid.judge(constraint, over, conversations)
        passing = alive & meets
        considered = judged[alive]
        best = (
            float(np.nanmax(considered) if constraint.higher_is_better else np.nanmin(considered))
            if np.isfinite(considered).any()
            else float("nan")
        )
        applied = bool(passing.any())
        checks.append(ConstraintCheck(constraint, default, int(alive.sum()), int(passing.sum()), applied, best))
        if applied:
            for index in np.flatnonzero(alive & ~meets):
                ruled_out_by[int(index)] = constraint
            alive = passing
    points = np.column_stack(
        [grid.mean(o, conversations) * (-1.0 if metric(o).higher_is_better else 1.0) for o in objectives]
    )
    order = _rank(points, np.flatnonzero(alive), slack, full)
    if full:
        ruled = np.array(sorted(ruled_out_by), dtype=int)
        order += _rank(points, ruled, slack, full=True)
    return Choice(order, checks, ruled_out_by)


def _rank(points: np.ndarray, candidates: np.ndarray, slack: float, full: bool) -> list[int]:
    """Candidates in order of the objectives (``points``: settings × objectives, lower is better): of those
    within ``slack`` of the best on the first objective, those within ``slack`` of the best on the second, ...,
    the best on the last; then again on the rest. Exact ties keep the settings' order."""
    remaining = [int(i) for i in candidates]
    order: list[int] = []
    while remaining:
        pool = np.array(remaining)
        for j in range(points.shape[1] - 1):
            column = points[pool, j]
            if np.isnan(column).all():
                continue
            best = float(np.nanmin(column))
            pool = pool[column <= best + slack * abs(best) + 1e-12]
        last = np.nan_to_num(points[pool, -1], nan=np.inf)
        pick = int(pool[np.lexsort((pool, last))][0])
        order.append(pick)
        remaining.remove(pick)
        if not full:
            break
    return order


def _folds(n: int, folds: int, seed: int) -> np.ndarray:
    """Each conversation's fold: a seeded shuffle dealt round-robin into ``min(folds, n)`` parts."""
    order = np.random.default_rng(seed).permutation(n)
    assignment = np.empty(n, dtype=int)
    assignment[order] = np.arange(n) % min(folds, n)
    return assignment


def held_out(
    grid: SettingValues,
    chosen: int,
    columns: Sequence[str],
    constraints: Sequence[tuple[Constraint, bool]],
    objectives: Sequence[str],
    over: str,
    slack: float,
    folds: int,
    seed: int,
) -> HeldOut:
    """The out-of-sample check of the rule that chose setting ``chosen`` (:class:`HeldOut`)."""
    n = len(grid.conversations)
    everything = np.ones(n, dtype=bool)
    in_sample = {c: float(grid.mean(c, everything)[chosen]) for c in columns}
    if n < 2:
        return HeldOut(
            0, folds, n, {}, in_sample, (), 0, "Not checked out of sample: it needs at least two conversations."
        )
    assignment = _folds(n, folds, seed)
    k = int(assignment.max()) + 1
    scores = {c: np.full(n, np.nan) for c in columns}
    picks: list[int | None] = []
    for fold in range(k):
        test = assignment == fold
        order = apply_rule(grid, ~test, constraints, objectives, over, slack, full=False).order
        pick = order[0] if order else None  # None: no setting has a value on the other conversations
        picks.append(pick)
        if pick is None:
            continue
        present = grid.present[pick] & test
        for column in columns:
            scores[column][present] = grid.values[column][pick, present]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        figures = {c: float(np.nanmean(v)) for c, v in scores.items()}
    if k < folds:
        how = f"leave-one-out over the {n} conversations (fewer conversations than the {folds} folds asked)"
    else:
        how = f"{k}-fold over the {n} conversations (a seeded shuffle, seed {seed})"
    note = (
        f"Out of sample: {how}; for each fold the rule chose a setting on the other conversations, and that "
        "setting was scored on the fold's conversations."
    )
    settings = tuple(_key(grid.setting(p)) if p is not None else None for p in picks)
    assignment_of = {str(c): int(f) for c, f in zip(grid.conversations, assignment, strict=True)}
    return HeldOut(k, folds, n, figures, in_sample, settings, sum(p == chosen for p in picks), note, assignment_of)


def _key(setting: GridSetting) -> tuple[str, int, int, str]:
    return (setting["summarizer"], setting["max_tokens"], setting["keep_recent_tokens"], setting["engine"])


def ranked_settings(
    grid: SettingValues, choice: Choice, columns: Sequence[str], conversations: np.ndarray
) -> list[Ranked]:
    """Every setting in the rule's order, with its figures (means over ``conversations``) and what ruled it out."""
    means = {c: grid.mean(c, conversations) for c in columns}
    return [
        Ranked(
            **grid.setting(index),
            figures={c: float(means[c][index]) for c in columns},
            rank=rank,
            ruled_out_by=choice.ruled_out_by.get(index),
        )
        for rank, index in enumerate(choice.order, start=1)
    ]


def ranking_table(ranking: Sequence[Ranked], keys: Sequence[str]) -> pd.DataFrame:
    """The ranking as a table: ``rank``, the setting columns ``keys``, the figures and ``ruled_out_by``."""
    rows = [
        {
            "rank": r.rank,
            **{k: getattr(r, k) for k in keys},
            **r.figures,
            "ruled_out_by": str(r.ruled_out_by) if r.ruled_out_by else None,
        }
        for r in ranking
    ]
    return pd.DataFrame(rows)


def weighed_alternatives(ranking: Sequence[Ranked], choice: Choice, objectives: Sequence[str]) -> list[Alternative]:
    """Up to :data:`ALTERNATIVES` settings to weigh the recommendation against: the next in the ranking whose
    figures differ, the best meeting the constraints on each later objective, and the first setting a constraint
    ruled out when it would otherwise have come first."""
    best = ranking[0]
    eligible = [r for r in ranking[1:] if r.ruled_out_by is None and _differs(r, best, objectives)]
    picked: list[tuple[Ranked, str]] = []
    if eligible:
        picked.append((eligible[0], "next in the ranking"))
    for objective in objectives[1:]:
        direction = -1.0 if metric(objective).higher_is_better else 1.0
        finite = [r for r in eligible if np.isfinite(r.figures[objective])]
        if not finite:
            continue
        top = min(finite, key=lambda r: (direction * r.figures[objective], r.rank))
        if direction * top.figures[objective] < direction * best.figures[objective]:
            picked.append(
                (
                    top,
                    f"{'fewest' if direction > 0 else 'highest'} {label(objective).lower()} of the settings not ruled "
                    "out",
                )
            )
    ruled = [r for r in ranking if r.ruled_out_by is not None]
    if ruled and ruled[0].ruled_out_by is not None and _ahead(ruled[0], best, objectives):
        picked.append((ruled[0], f"ruled out by {constraint_text(ruled[0].ruled_out_by).lower()}"))
    seen: set[int] = set()
    out = []
    for setting, why in picked:
        if setting.rank in seen:
            continue
        seen.add(setting.rank)
        out.append(Alternative(setting, why, {o: _change(setting.figures[o], best.figures[o]) for o in objectives}))
    return out[:ALTERNATIVES]


def _differs(a: Ranked, b: Ranked, objectives: Sequence[str]) -> bool:
    return any(not np.isclose(a.figures[o], b.figures[o], equal_nan=True) for o in objectives)


def _ahead(a: Ranked, b: Ranked, objectives: Sequence[str]) -> bool:
    """Whether ``a`` beats ``b`` on the first objective where they differ (what ranks it first without constraints)."""
    for objective in objectives:
        x, y = a.figures[objective], b.figures[objective]
        if np.isclose(x, y, equal_nan=True):
            continue
        return (x > y) if metric(objective).higher_is_better else (x < y)
    return False


def _change(value: float, base: float) -> float | None:
    if not (np.isfinite(value) and np.isfinite(base)) or base == 0:
        return None
    return (value - base) / abs(base)
