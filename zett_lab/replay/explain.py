"""Explanations of engine decisions the engine itself does not report.

zett-agent's ``_select_compaction_window`` returns None for three different
reasons. :func:`window_skip_reason` says which, by following the same two
walks; ``tests/replay/test_explain.py`` checks it agrees with the engine on every case.
"""

from __future__ import annotations

from collections.abc import Sequence

from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, SystemMessage

from ..load.conversation import starts_turn
from ..tokens import TokenCounter, message_counter
from .schema import NO_TURN_BOUNDARY, ONLY_CHECKPOINTS, RECENT_COVERS_ALL


def walk_cutoff(
    dialogue: Sequence[AnyMessage], *, keep_recent_tokens: int, count_tokens: TokenCounter
) -> tuple[int, int]:
    """The engine's two walks over the non-system dialogue.

    Returns where the budget walk stops (the only place ``keep_recent_tokens`` is
    read) and the turn start it then snaps back to (0: none). With one of zett_lab's own
    counters (:func:`~zett_lab.tokens.message_counter`) the budget walk adds per-message
    counts instead of recounting the window at every candidate cutoff.
    """
    cutoff = len(dialogue)
    count_message = message_counter(count_tokens)
    if count_message is None:
        while cutoff > 0 and count_tokens(dialogue[cutoff:]) < keep_recent_tokens:
            cutoff -= 1
    else:
        # One of zett_lab's counters, a sum of per-message counts: the same walk on a running
        # sum, where ``recent`` is count_tokens(dialogue[cutoff:]) at every test.
        recent = 0
        while cutoff > 0 and recent < keep_recent_tokens:
            cutoff -= 1
            recent += count_message(dialogue[cutoff])
    walked = cutoff
    while cutoff > 0 and not starts_turn(dialogue[cutoff]):
        cutoff -= 1
    return walked, cutoff


def window_skip_reason(
    messages: Sequence[AnyMessage], *, keep_recent_tokens: int, count_tokens: TokenCounter
) -> str | None:
    """Why the engine finds no window to compact, or None when it finds one.

    - ``recent budget covers everything``: the whole dialogue is under ``keep_recent_tokens``.
    - ``no whole-turn boundary``: walking back to the start of a turn reaches the
      first message (one oversized turn, e.g. an autonomous run).
    - ``only earlier checkpoints``: everything older than the kept turns is checkpoints.
    """
    dialogue = [m for m in messages if not isinstance(m, SystemMessage)]
    walked, cutoff = walk_cutoff(dialogue, keep_recent_tokens=keep_recent_tokens, count_tokens=count_tokens)
    if walked == 0:
        return RECENT_COVERS_ALL
    if cutoff == 0:
        return NO_TURN_BOUNDARY
    if all(isinstance(m, CompactedMessage) for m in dialogue[:cutoff]):
        return ONLY_CHECKPOINTS
    return None
