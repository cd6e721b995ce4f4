"""One recommended setting from a sweep: constraints first, then the user's order of objectives, checked out of sample.

:func:`recommend` applies one rule, and the :class:`Recommendation` states it in words:

1. A setting with a failed replay or a failed summary in any conversation is no measurement: it is
   never recommended (:func:`~zett_lab.study.choose.measured_cells`).
2. Constraints rule settings out, one after the other: the user's first, then
   :data:`DEFAULT_CONSTRAINTS` (stay within ``max_tokens``; carry a superseded value for at most one
   changed item in ten). A constraint that no setting still in the running meets rules nothing out,
   and the recommendation says so (:attr:`ConstraintCheck.applied`).
3. The settings left are ranked by the objectives, in the user's order (default
   :data:`DEFAULT_OBJECTIVES`: steps over budget, then lost-but-needed items, then total input
   tokens), each a mean per conversation: of the settings within ``slack`` (10 %) of the best value of
   the first objective, those within ``slack`` of the best of the second, and so on; the last objective
   picks the first.
4. The rule is checked out of sample (:class:`HeldOut`): the conversations are split into ``folds``
   parts; for each part, the rule chooses a setting on the other parts and that setting is scored on
   this part. The held-out figures are those scores, beside the in-sample figures of the recommended
   setting.

A conversation where a metric is undefined (nothing compacted: no recall to measure) counts as the
metric's best value (``nan="best"``) or fails every constraint on it (``nan="drop"``). Directions and
labels come from the metric catalogue (:mod:`zett_lab.measure.catalogue`).

Example::

    >>> choice = recommend(grid)                                        # doctest: +SKIP
    >>> choice.verdict                                                  # doctest: +SKIP
    'Recommended: truncate at max_tokens=25,000, keep_recent_tokens=1,600. ...'
    >>> recommend(grid, "needed_anchor_recall >= 0.8", objectives=["total_input_tokens"])  # doctest: +SKIP
"""

from __future__ import annotations

import html
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..formatting import count, frame_html, number, percent
from ..measure.catalogue import label, metric
from ..records import plain, records
from .choose import (
    Constraint,
    NoFeasibleSetting,
    fill_nan,
    need_columns,
    operator_text,
    parse_constraints,
    per_setting,
    results_table,
)
from .grid import SETTING_COLUMNS, STOCK_ENGINE
from .results import Sweep

#: What the default recommendation puts first, second and third (each a mean per conversation).
DEFAULT_OBJECTIVES: tuple[str, ...] = ("steps_over_budget", "lost_but_needed", "total_input_tokens")

#: Constraints every recommendation honours unless no setting meets them (a constraint of yours on the same
#: column replaces the default): no model step sent over ``max_tokens``; a superseded value carried for at most
#: one changed item in ten (a stale value is an error, worse than dropping it).
DEFAULT_CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint("steps_over_budget", "<=", 0.0),
    Constraint("superseded_rate", "<=", 0.1),
)

#: Folds of the out-of-sample check (fewer conversations: one fold per conversation).
DEFAULT_FOLDS = 5

#: Values within this share of the best count as equal, for every objective but the last.
DEFAULT_SLACK = 0.1

#: Alternatives the verdict weighs the recommendation against, at most.
ALTERNATIVES = 4


@dataclass(frozen=True)
class ConstraintCheck:
    """How one constraint was honoured.

    Attributes:
        constraint: ``(column, op, value)``.
        default: one of :data:`DEFAULT_CONSTRAINTS` (not one you gave).
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
        """``truncate at max_tokens=25,000, keep_recent_tokens=1,600`` (the engine first when ``engines``)."""
        engine = f"engine {self.engine}, " if engines else ""
        return (
            f"{engine}{self.summarizer} at max_tokens={count(self.max_tokens)}, "
            f"keep_recent_tokens={count(self.keep_recent_tokens)}"
        )


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


@dataclass(frozen=True, eq=False)
class Recommendation:
    """The recommended setting, the rule that chose it, and the evidence, as typed data.

    Attributes:
        setting: the recommended setting (rank 1) and its figures, means per conversation, of the objectives then
            the constrained columns; ``engine``, ``summarizer``, ``max_tokens``, ``keep_recent_tokens`` and
            ``figures`` read it.
        objectives: the objectives in order (metric names).
        constraints: how each constraint was honoured, in the order applied.
        settings: settings ranked (every measured one); ``left_out``: settings never ranked because a replay or
            a summary failed.
        alternatives: the settings the verdict weighs it against.
        held_out: the out-of-sample check.
        ranking: every ranked setting as a table (setting columns, figures, ``rank``, ``ruled_out_by``).
        rule: the rule, in words.
        verdict: one paragraph: the setting, why, the trade-off against the alternatives in numbers, and how it
            held out of sample.
    """

    setting: Ranked
    objectives: tuple[str, ...]
    constraints: tuple[ConstraintCheck, ...]
    settings: int
    left_out: int
    alternatives: tuple[Alternative, ...]
    held_out: HeldOut
    ranking: pd.DataFrame = field(repr=False)
    rule: str
    verdict: str
    over: str = "all"
    slack: float = DEFAULT_SLACK

    @property
    def engine(self) -> str:
        return self.setting.engine

    @property
    def summarizer(self) -> str:
        return self.setting.summarizer

    @property
    def max_tokens(self) -> int:
        return self.setting.max_tokens

    @property
    def keep_recent_tokens(self) -> int:
        return self.setting.keep_recent_tokens

    @property
    def figures(self) -> Mapping[str, float]:
        return self.setting.figures

    @property
    def unmet(self) -> tuple[ConstraintCheck, ...]:
        """The constraints no setting met (they ruled nothing out)."""
        return tuple(c for c in self.constraints if not c.applied)

    def record(self, digits: int | None = None) -> dict[str, Any]:
        """The recommendation as JSON-ready plain data (what a report's document holds); ``digits`` rounds its
        figures (None: exact)."""

        def ranked(r: Ranked) -> dict[str, Any]:
            return {
                "engine": r.engine,
                "summarizer": r.summarizer,
                "max_tokens": r.max_tokens,
                "keep_recent_tokens": r.keep_recent_tokens,
                "figures": plain(dict(r.figures), digits),
                "rank": r.rank,
                "ruled_out_by": str(r.ruled_out_by) if r.ruled_out_by else None,
            }

        held = self.held_out
        return {
            **ranked(self.setting),
            "objectives": list(self.objectives),
            "constraints": [
                {
                    "constraint": str(c.constraint),
                    "text": c.text(),
                    "default": c.default,
                    "judged": c.judged,
                    "met": c.met,
                    "applied": c.applied,
                    "best": plain(c.best, digits),
                }
                for c in self.constraints
            ],
            "over": self.over,
            "slack": self.slack,
            "settings": self.settings,
            "left_out": self.left_out,
            "alternatives": [
                {**ranked(a.setting), "why": a.why, "changes": plain(dict(a.changes), digits)}
                for a in self.alternatives
            ],
            "held_out": {
                "folds": held.folds,
                "asked": held.asked,
                "conversations": held.conversations,
                "figures": plain(dict(held.figures), digits),
                "in_sample": plain(dict(held.in_sample), digits),
                "chosen": [list(c) if c is not None else None for c in held.chosen],
                "agreement": held.agreement,
                "note": held.note,
                "assignment": dict(held.assignment),
            },
            "ranking": records(self.ranking, digits=digits),
            "rule": self.rule,
            "verdict": self.verdict,
        }

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={number(v)}" for k, v in self.figures.items())
        engine = f"engine={self.engine!r}, " if self.engine != STOCK_ENGINE else ""
        return (
            f"Recommendation({engine}summarizer={self.summarizer!r}, max_tokens={count(self.max_tokens)}, "
            f"keep_recent_tokens={count(self.keep_recent_tokens)}; {figures} per conversation; "
            f"{self.settings} settings ranked)"
        )

    def _repr_html_(self) -> str:
        """The verdict, the in-sample and held-out figures side by side, the constraints, and the ranking."""
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(label(c))}</th>"
            f"<td style='text-align:right'>{html.escape(number(self.figures.get(c)))}</td>"
            f"<td style='text-align:right'>{html.escape(number(self.held_out.figures.get(c)))}</td></tr>"
            for c in self.figures
        )
        held = "held out" if self.held_out.folds else "held out (not checked)"
        constraints = "".join(
            f"<li>{html.escape(c.text())}{' (default)' if c.default else ''}: "
            + (
                f"met by {c.met} of {c.judged} settings"
                if c.applied
                else f"met by no setting (best reached {html.escape(number(c.best))}); it ruled nothing out"
            )
            + "</li>"
            for c in self.constraints
        )
        return (
            f"<div><h4>Recommended: <code>{html.escape(self.summarizer)}</code> at max_tokens="
            f"{count(self.max_tokens)}, keep_recent_tokens={count(self.keep_recent_tokens)}"
            f"{f' · engine <code>{html.escape(self.engine)}</code>' if self.engine != STOCK_ENGINE else ''}</h4>"
            f"<p>{html.escape(self.verdict)}</p>"
            f"<table><tr><th>per conversation</th><th>in sample</th><th>{held}</th></tr>{rows}</table>"
            f"<ul>{constraints}</ul>"
            f"<details><summary>{self.settings} settings ranked</summary>{frame_html(self.ranking, max_rows=30)}"
            f"</details></div>"
        )


# --- the figures of every setting, per conversation --------------------------------------------------------------


@dataclass(frozen=True)
class _Grid:
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

    def setting(self, index: int) -> dict[str, Any]:
        row = self.setting_table.iloc[int(index)]
        return {
            "engine": str(row.get("engine", STOCK_ENGINE)),
            "summarizer": str(row.get("summarizer")),
            "max_tokens": int(row["max_tokens"]),
            "keep_recent_tokens": int(row["keep_recent_tokens"]),
        }


def _grid(table: pd.DataFrame, columns: Sequence[str], nan: str) -> tuple[_Grid, int]:
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
    return _Grid(keys, settings, conversations, values, present.to_numpy(bool)), left_out


def _is_metric(column: str) -> bool:
    try:
        metric(column)
    except SettingError:
        return False
    return True


# --- the rule -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    """What the rule decides on some conversations: the settings in order, and how each constraint went."""

    order: list[int]
    checks: list[ConstraintCheck]
    ruled_out_by: dict[int, Constraint]


def _choose(
    grid: _Grid,
    conversations: np.ndarray,
    constraints: Sequence[tuple[Constraint, bool]],
    objectives: Sequence[str],
    over: str,
    slack: float,
    full: bool,
) -> _Choice:
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
    return _Choice(order, checks, ruled_out_by)


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


# --- the out-of-sample check ----------------------------------------------------------------------------------


def _folds(n: int, folds: int, seed: int) -> np.ndarray:
    """Each conversation's fold: a seeded shuffle dealt round-robin into ``min(folds, n)`` parts."""
    order = np.random.default_rng(seed).permutation(n)
    assignment = np.empty(n, dtype=int)
    assignment[order] = np.arange(n) % min(folds, n)
    return assignment


def _held_out(
    grid: _Grid,
    chosen: int,
    columns: Sequence[str],
    constraints: Sequence[tuple[Constraint, bool]],
    objectives: Sequence[str],
    over: str,
    slack: float,
    folds: int,
    seed: int,
) -> HeldOut:
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
        order = _choose(grid, ~test, constraints, objectives, over, slack, full=False).order
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


def _key(setting: Mapping[str, Any]) -> tuple[str, int, int, str]:
    return (setting["summarizer"], setting["max_tokens"], setting["keep_recent_tokens"], setting["engine"])


# --- the entry point ------------------------------------------------------------------------------------------


def recommend(
    results: Sweep | pd.DataFrame,
    constraints: str | Mapping[str, Any] | Sequence[Constraint] | None = None,
    *,
    objectives: str | Sequence[str] | None = None,
    over: str = "all",
    nan: str = "best",
    slack: float = DEFAULT_SLACK,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> Recommendation:
    """The recommended setting: constraints first, then the objectives in order, checked out of sample.

    Args:
        results: a :class:`Sweep` or its results table (one row per conversation and setting).
        constraints: yours, checked before :data:`DEFAULT_CONSTRAINTS` (one of yours on the same column replaces
            the default): ``"needed_anchor_recall >= 0.8 and steps_over_budget <= 0"`` or
            ``{"needed_anchor_recall": (">=", 0.8)}``. A constraint no setting still in the running meets rules
            nothing out; the recommendation says so.
        objectives: metric names of the catalogue, most important first (or one comma-separated string);
            default :data:`DEFAULT_OBJECTIVES` (a default one missing from ``results`` is skipped). Each is a
            mean per conversation; directions are the catalogue's.
        over: ``"all"``: a constraint holds when every conversation meets it (its worst value counts);
            ``"mean"``: when the mean over conversations does.
        nan: a metric a conversation leaves undefined (nothing compacted) counts as its best value (``"best"``)
            or fails every constraint on it (``"drop"``).
        slack: for every objective but the last, values within this share of the best count as equal.
        folds: folds of the out-of-sample check (fewer conversations: one fold per conversation; one
            conversation: no check).
        seed: the shuffle that deals conversations into folds.

    Raises:
        NoFeasibleSetting: no setting is a measurement in every conversation (each has a failed replay or summary).
        SettingError: an objective outside the metric catalogue; a column of yours missing from ``results``.
    """
    table = results_table(results)
    if over not in ("all", "mean"):
        raise SettingError(f"over must be 'all' or 'mean', got {over!r}")
    if nan not in ("best", "drop"):
        raise SettingError(f"nan must be 'best' or 'drop', got {nan!r}")
    if isinstance(slack, bool) or not isinstance(slack, (int, float)) or not 0 <= slack < 1:
        raise SettingError(f"slack must be a share in [0, 1), got {slack!r}")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise SettingError(f"folds must be an int of at least 2, got {folds!r}")
    chosen_objectives = _objectives(table, objectives)
    checked = _constraints(table, constraints)
    columns = list(dict.fromkeys([*chosen_objectives, *(c.column for c, _ in checked)]))
    grid, left_out = _grid(table, columns, nan)
    everything = np.ones(len(grid.conversations), dtype=bool)
    choice = _choose(grid, everything, checked, chosen_objectives, over, slack, full=True)
    if not choice.order:
        raise NoFeasibleSetting(f"no setting has a value of {', '.join(chosen_objectives)}")
    ranking = _ranking(grid, choice, columns, everything)
    chosen = choice.order[0]
    held = _held_out(grid, chosen, columns, checked, chosen_objectives, over, slack, folds, seed)
    best = ranking[0]
    alternatives = _alternatives(ranking, choice, chosen_objectives)
    engines = grid.setting_table["engine"].nunique() > 1 if "engine" in grid.setting_table else False
    rule = _rule(chosen_objectives, objectives is None, over, slack, nan)
    return Recommendation(
        setting=best,
        objectives=tuple(chosen_objectives),
        constraints=tuple(choice.checks),
        settings=len(ranking),
        left_out=left_out,
        alternatives=tuple(alternatives),
        held_out=held,
        ranking=_ranking_table(ranking, grid.keys),
        rule=rule,
        verdict=_verdict(
            best, choice.checks, alternatives, held, chosen_objectives, len(ranking), left_out, engines, over
        ),
        over=over,
        slack=float(slack),
    )


def parse_objectives(objectives: str | Sequence[str]) -> list[str]:
    """Objectives as metric names, most important first, from a list or one comma-separated string; each must be a
    metric of the catalogue (a column without a direction is never guessed), none twice."""
    names = [o.strip() for o in objectives.split(",")] if isinstance(objectives, str) else [str(o) for o in objectives]
    names = [o for o in names if o]
    if not names:
        raise SettingError("objectives must name at least one metric")
    if len(set(names)) != len(names):
        raise SettingError(f"objectives name a metric twice: {', '.join(names)}")
    for name in names:
        metric(name)
    return names


def _objectives(table: pd.DataFrame, objectives: str | Sequence[str] | None) -> list[str]:
    """The objectives asked for, each a catalogue metric present in the results (defaults missing are skipped)."""
    if objectives is None:
        present = [o for o in DEFAULT_OBJECTIVES if o in table.columns]
        if not present:
            raise SettingError(f"the results have none of the default objectives {', '.join(DEFAULT_OBJECTIVES)}")
        return present
    names = parse_objectives(objectives)
    need_columns(table, *names)
    return names


def _constraints(
    table: pd.DataFrame, constraints: str | Mapping[str, Any] | Sequence[Constraint] | None
) -> list[tuple[Constraint, bool]]:
    """Yours, then the defaults on other columns present in the results; each with whether it is a default."""
    yours = parse_constraints(constraints) if constraints is not None and constraints != "" else []
    need_columns(table, *(c.column for c in yours))
    named = {c.column for c in yours}
    defaults = [c for c in DEFAULT_CONSTRAINTS if c.column not in named and c.column in table.columns]
    return [(c, False) for c in yours] + [(c, True) for c in defaults]


def _ranking(grid: _Grid, choice: _Choice, columns: Sequence[str], conversations: np.ndarray) -> list[Ranked]:
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


def _ranking_table(ranking: Sequence[Ranked], keys: Sequence[str]) -> pd.DataFrame:
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


def _alternatives(ranking: Sequence[Ranked], choice: _Choice, objectives: Sequence[str]) -> list[Alternative]:
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


def constraint_text(constraint: Constraint) -> str:
    """A constraint in words, its column by its catalogue label: ``Superseded-only rate ≤ 0.1``."""
    value = number(constraint.value)
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return f"{label(constraint.column)} {operator_text(constraint.op)} {value}"


# --- in words -------------------------------------------------------------------------------------------------


def _rule(objectives: Sequence[str], default: bool, over: str, slack: float, nan: str) -> str:
    where = "in every conversation" if over == "all" else "on the mean over conversations"
    ordered = ", then ".join(label(o).lower() for o in objectives)
    equal = f"; for all but the last, values within {percent(slack, 0)} of the best count as equal" if slack > 0 else ""
    undefined = (
        "A conversation where a metric is undefined (nothing compacted) counts as its best value."
        if nan == "best"
        else "A conversation where a metric is undefined fails every constraint on it."
    )
    return (
        "Settings with a failed replay or summary are never recommended. Constraints (yours, then the defaults) rule "
        f"settings out one after the other, judged {where}; a constraint no remaining setting meets rules nothing "
        f"out. The settings left are ranked by {ordered} (means per conversation{equal}"
        f"{'' if not default else '; the default order'}). {undefined}"
    )


def _figure(column: str, value: float) -> str:
    return f"{number(value)} {label(column).lower()}"


def _change_text(objective: str, alternative: Ranked, best: Ranked, change: float | None) -> str:
    name = label(objective).lower()
    if change is None:
        a, b = alternative.figures[objective], best.figures[objective]
        if not (np.isfinite(a) and np.isfinite(b)) or np.isclose(a, b):
            return f"same {name}"
        return f"{number(a)} {name} (against {number(b)})"
    if abs(change) < 0.005:
        return f"same {name}"
    if change >= 2:  # three times or more: a factor reads better than +8,900%
        return f"{number(1 + change, 2)}× {name}"
    sign = "+" if change > 0 else "−"
    return f"{sign}{percent(abs(change), 0)} {name}"


def _verdict(
    best: Ranked,
    checks: Sequence[ConstraintCheck],
    alternatives: Sequence[Alternative],
    held: HeldOut,
    objectives: Sequence[str],
    settings: int,
    left_out: int,
    engines: bool,
    over: str,
) -> str:
    """One paragraph: the setting, why, what could not be met, the trade-offs in numbers, and the held-out check."""
    parts = [f"Recommended: {best.setting_text(engines)}."]
    applied = [c for c in checks if c.applied]
    why = f"Of the {settings} settings measured"
    if left_out:
        why += f" ({left_out} more left out: a replay or summary failed)"
    if applied:
        passing = applied[-1].met
        why += f", {passing} meet {'; '.join(c.text().lower() for c in applied)}"
    ordered = ", then ".join(label(o).lower() for o in objectives)
    figures = ", ".join(_figure(o, best.figures[o]) for o in objectives)
    parts.append(f"{why}{';' if applied else ','} ranked by {ordered}, it comes first with {figures} per conversation.")
    for check in checks:
        if not check.applied:
            reached = (
                f"in every conversation (at best {number(check.best)} in a setting's worst conversation)"
                if over == "all"
                else f"on the mean over conversations (the best mean is {number(check.best)})"
            )
            parts.append(f"No setting meets {check.text().lower()} {reached}, so that constraint rules nothing out.")
    if alternatives:
        weighed = "; ".join(
            f"{a.setting.setting_text(engines)} ({a.why}): "
            + ", ".join(_change_text(o, a.setting, best, a.changes[o]) for o in objectives)
            for a in alternatives
        )
        parts.append(f"Against the next-best alternatives: {weighed}.")
    if held.folds:
        shown = [o for o in objectives if o in held.figures]
        parts.append(
            f"Out of sample ({held.folds} folds over {held.conversations} conversations: chosen on the others, "
            f"scored on each fold): {', '.join(_figure(o, held.figures[o]) for o in shown)} per conversation, "
            f"against {', '.join(number(held.in_sample[o]) for o in shown)} in sample; "
            f"{held.agreement} of {held.folds} folds chose this setting."
        )
    else:
        parts.append(held.note)
    return " ".join(parts)
