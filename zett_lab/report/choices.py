"""What a report picks out of its results: the recommended setting, the timelines it draws, the explorer's conversation.

The recommendation is :func:`~zett_lab.study.recommendation.recommend` with the report's constraints and
objectives; a setting with a failed replay or summary is never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..errors import SettingError
from ..load.conversation import Conversation
from ..study.choose import ConstraintSpec, NoFeasibleSetting
from ..study.recommendation import Recommendation, RecommendationRecord, recommend
from .tables import DIGITS

#: Context timelines a report draws at most (:func:`timeline_conversations`).
TIMELINES_SHOWN = 24

#: The cost and the loss of the report's Pareto front.
RECOMMEND_COST = "total_input_tokens"
RECOMMEND_LOSS = "lost_but_needed"


def recommend_report_setting(
    results: pd.DataFrame,
    constraints: ConstraintSpec | None = None,
    objectives: str | Sequence[str] | None = None,
) -> RecommendationRecord | None:
    """The recommended setting of a report, as plain data (:meth:`~zett_lab.study.recommendation.Recommendation.record`).

    :func:`~zett_lab.study.recommendation.recommend` with the report's constraints and objectives (default: stay
    within budget, then fewest needed-anchor losses, then fewest tokens). A setting with a failed replay or a
    failed summary in ``results`` (:func:`~zett_lab.study.choose.measured_cells`) is never chosen. None when
    nothing can be recommended.
    """
    chosen = recommended_setting(results, constraints, objectives)
    return chosen.record(DIGITS) if chosen is not None else None


def recommended_setting(
    results: pd.DataFrame, constraints: ConstraintSpec | None, objectives: str | Sequence[str] | None
) -> Recommendation | None:
    """The :class:`~zett_lab.study.recommendation.Recommendation` :func:`recommend_report_setting` records; None
    when nothing can be recommended."""
    if results is None or not len(results):
        return None
    try:
        return recommend(results, constraints, objectives=objectives)
    except NoFeasibleSetting:
        return None


def _rows_at(results: pd.DataFrame, summarizer: str | None, max_tokens: int, keep_recent_tokens: int) -> pd.DataFrame:
    """The results rows of one summarizer at one setting."""
    return results[
        (results["summarizer"] == summarizer)
        & (results["max_tokens"] == max_tokens)
        & (results["keep_recent_tokens"] == keep_recent_tokens)
    ]


def timeline_conversations(
    results: pd.DataFrame, recommendation: RecommendationRecord | None, conversations: list[Conversation]
) -> list[str]:
    """The conversations whose timeline a report draws, in report order: every one, or with more than
    :data:`TIMELINES_SHOWN`, those whose replay at the recommended setting applied the most compactions
    (then sent the most steps over budget). A page over a year of sessions stays one a reader can scroll."""
    ids = [c.id for c in conversations]
    if recommendation is None or len(ids) <= TIMELINES_SHOWN:
        return ids
    at = _rows_at(
        results, recommendation["summarizer"], recommendation["max_tokens"], recommendation["keep_recent_tokens"]
    )
    busiest = at.sort_values(
        ["compactions_applied", "steps_over_budget", "conversation_id"], ascending=[False, False, True], kind="stable"
    )
    chosen = set(busiest["conversation_id"].head(TIMELINES_SHOWN))
    return [i for i in ids if i in chosen]


def explore_conversation(results: pd.DataFrame, conversations: list[Conversation], explore: str | None) -> str:
    """The conversation the explorer shows: the one asked for, else the one with the most applied compactions."""
    if explore is not None:
        ids = [c.id for c in conversations]
        if explore not in ids:
            raise SettingError(f"explore={explore!r} is not a conversation of this report; have: {', '.join(ids[:20])}")
        return explore
    if not len(results):
        return conversations[0].id
    totals = results.groupby("conversation_id", sort=True)["compactions_applied"].sum()
    steps = results.groupby("conversation_id", sort=True)["steps"].max()
    return sorted(totals.index, key=lambda cid: (-int(totals[cid]), int(steps[cid]), str(cid)))[0]
