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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..formatting import cell, count, number
from ..measure.catalogue import label, labelled_html, metric
from ..records import JSONObject, JSONValue, plain, records
from .choose import (
    Constraint,
    ConstraintCheck,
    ConstraintSpec,
    NoFeasibleSetting,
    need_columns,
    parse_constraints,
    results_table,
)
from .grid import STOCK_ENGINE
from .ranking import (
    Alternative,
    HeldOut,
    Ranked,
    apply_rule,
    held_out,
    ranked_settings,
    ranking_table,
    setting_values,
    weighed_alternatives,
)
from .results import Sweep
from .verdict import caveats, rule_text, verdict

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


class RankedRecord(TypedDict):
    """A ranked setting as plain data (:meth:`Recommendation.record`)."""

    engine: str
    summarizer: str
    max_tokens: int
    keep_recent_tokens: int
    figures: JSONValue
    rank: int
    ruled_out_by: str | None


class AlternativeRecord(RankedRecord):
    """An alternative the verdict weighs, as plain data: the setting, why, and what changes against the chosen."""

    why: str
    changes: JSONValue


class RecommendationRecord(RankedRecord):
    """A recommendation as plain data (:meth:`Recommendation.record`): the chosen setting and how it was chosen."""

    objectives: list[str]
    constraints: list[JSONObject]
    over: str
    slack: float
    settings: int
    left_out: int
    alternatives: list[AlternativeRecord]
    held_out: JSONObject
    ranking: list[JSONObject]
    rule: str
    verdict: str
    caveats: list[str]


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
        caveats: what its figures cannot tell, one sentence each (:func:`~zett_lab.study.verdict.caveats`): the
            edge of the grid, settings it only ties with, how many conversations compact at it.
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
    caveats: tuple[str, ...] = ()
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

    def record(self, digits: int | None = None) -> RecommendationRecord:
        """The recommendation as JSON-ready plain data (what a report's document holds); ``digits`` rounds its
        figures (None: exact)."""

        def ranked(r: Ranked) -> RankedRecord:
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
            "caveats": list(self.caveats),
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
        texts = {str(c.constraint): c.text() for c in self.constraints}

        def ruled_out_by(value: object) -> str:
            """A constraint of the ranking in words, as the verdict writes it."""
            return texts.get(str(value), cell(value))

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
            + (f"<ul>{''.join(f'<li>{html.escape(c)}</li>' for c in self.caveats)}</ul>" if self.caveats else "")
            + f"<table><tr><th>per conversation</th><th>in sample</th><th>{held}</th></tr>{rows}</table>"
            f"<ul>{constraints}</ul>"
            f"<details><summary>{self.settings} settings ranked</summary>"
            f"{labelled_html(self.ranking, max_rows=30, formatters={'ruled_out_by': ruled_out_by})}"
            f"</details></div>"
        )


def recommend(
    results: Sweep | pd.DataFrame,
    constraints: ConstraintSpec | None = None,
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
    grid, left_out = setting_values(table, columns, nan)
    everything = np.ones(len(grid.conversations), dtype=bool)
    choice = apply_rule(grid, everything, checked, chosen_objectives, over, slack, full=True)
    if not choice.order:
        raise NoFeasibleSetting(f"no setting has a value of {', '.join(chosen_objectives)}")
    ranking = ranked_settings(grid, choice, columns, everything)
    chosen = choice.order[0]
    held = held_out(grid, chosen, columns, checked, chosen_objectives, over, slack, folds, seed)
    best = ranking[0]
    alternatives = weighed_alternatives(ranking, choice, chosen_objectives)
    engines = grid.setting_table["engine"].nunique() > 1 if "engine" in grid.setting_table else False
    rule = rule_text(chosen_objectives, objectives is None, over, slack, nan)
    return Recommendation(
        setting=best,
        objectives=tuple(chosen_objectives),
        constraints=tuple(choice.checks),
        settings=len(ranking),
        left_out=left_out,
        alternatives=tuple(alternatives),
        held_out=held,
        ranking=ranking_table(ranking, grid.keys),
        rule=rule,
        verdict=verdict(
            best, choice.checks, alternatives, held, chosen_objectives, len(ranking), left_out, engines, over
        ),
        caveats=tuple(caveats(table, best, ranking, chosen_objectives)),
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


def _constraints(table: pd.DataFrame, constraints: ConstraintSpec | None) -> list[tuple[Constraint, bool]]:
    """Yours, then the defaults on other columns present in the results; each with whether it is a default."""
    yours = parse_constraints(constraints) if constraints is not None and constraints != "" else []
    need_columns(table, *(c.column for c in yours))
    named = {c.column for c in yours}
    defaults = [c for c in DEFAULT_CONSTRAINTS if c.column not in named and c.column in table.columns]
    return [(c, False) for c in yours] + [(c, True) for c in defaults]
