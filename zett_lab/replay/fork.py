"""Forked replays: resume a replay at a turn where another one left the engine in the same state.

Between two requests zett-agent's runtime keeps a session's history in its history
extension (:class:`~zett_agent.extensions.memory.InMemoryMessageAccumulator`: the dialogue
it restores at the start of every request, checkpoint included); the compaction engine keeps
nothing (its usage baseline belongs to one request). So at the start of a turn the whole
state of a replay is that dialogue and what zett_lab recorded so far. A :class:`TurnMark`
writes it down: the accumulator's own ``messages(session_id)`` and the lengths of the
recorder's append-only lists.

A later replay whose settings provably take the same decisions up to that turn (the proof
is :func:`zett_lab.study.boundaries.prefix_regions`) starts from the mark: a new accumulator
remembers the marked dialogue, the recorded rows are the earlier replay's with only the
columns that name the setting changed, and the runtime builds the next request's context
from the accumulator as it does for every request. From there the real engine decides
everything, as in a fresh replay; ``tests/test_fork.py`` checks that a forked trace equals
the fresh replay of its setting on every fixture across a grid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AnyMessage


@dataclass(frozen=True, slots=True)
class TurnMark:
    """A replay's whole state at the start of one turn."""

    turn: int
    #: The dialogue the runtime's history extension remembers (what the next request starts from).
    dialogue: tuple[AnyMessage, ...]
    #: Rows recorded so far (steps, summary attempts, engine events, interrupted turns).
    steps: int
    compactions: int
    events: int
    interrupted: int
    #: Recorded assistant messages played so far, and the checkpoint in the context.
    cursor: int
    checkpoint_id: int | None


@dataclass(slots=True)
class ForkableRun:
    """What a finished replay leaves for later replays to fork from."""

    step_rows: list[dict[str, Any]]
    compaction_rows: list[dict[str, Any]]
    engine_events: list[dict[str, Any]]
    interrupted_turns: list[int]
    marks: list[TurnMark] = field(default_factory=list)

    def size(self) -> int:
        """Step rows held (what a bounded store of runs counts)."""
        return len(self.step_rows)


@dataclass(frozen=True, slots=True)
class Fork:
    """Where to start a replay: one mark of a finished run."""

    run: ForkableRun
    mark: TurnMark

    def history(self, session_id: str) -> InMemoryMessageAccumulator:
        """zett-agent's history extension, remembering the marked dialogue of ``session_id``."""
        history = InMemoryMessageAccumulator()
        # The extension's one store of remembered dialogue (it has no public setter).
        history._sessions[session_id] = list(self.mark.dialogue)
        return history

    def step_rows(self, max_tokens: int, keep_recent_tokens: int) -> list[dict[str, Any]]:
        """The run's step rows before the mark, for another setting (only the columns naming it change)."""
        return [
            {
                **row,
                "max_tokens": max_tokens,
                "keep_recent_tokens": keep_recent_tokens,
                "over_budget_after": row["context_tokens_after"] > max_tokens,
            }
            for row in self.run.step_rows[: self.mark.steps]
        ]

    def marks(self) -> list[TurnMark]:
        """The run's marks up to and including this one (the forked replay shares them)."""
        return [m for m in self.run.marks if m.turn <= self.mark.turn]
