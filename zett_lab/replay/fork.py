"""Forked replays: resume a replay at a turn where another one left the engine in the same state.

Between two requests zett-agent's runtime keeps a session's history in its history
extension (:class:`~zett_agent.extensions.memory.InMemoryMessageAccumulator`: the dialogue
it restores at the start of every request, checkpoint included); the stock compaction
engine keeps nothing (its usage baseline belongs to one request). So at the start of a turn
the whole state of a replay is that dialogue and what zett_lab recorded so far. A
:class:`TurnMark` writes it down: the accumulator's own ``messages(session_id)``, the
lengths of the recording's append-only lists and where the cursor is.

A later replay whose settings provably take the same decisions up to that turn (the proof
is :func:`zett_lab.study.regions.prefix_regions`, made for the stock engine and applied
to a user engine only along the limits it declares in ``zett_lab_reuse``) starts from the
mark: a new accumulator remembers the marked dialogue, the recorded rows are the earlier
replay's with only the columns that name the setting changed, and the runtime builds the
next request's context from the accumulator as it does for every request. From there the
real engine decides everything, as in a fresh replay; ``tests/replay/test_fork.py`` checks that a
forked trace equals the fresh replay of its setting on every fixture across a grid.

A fork is refused (:class:`~zett_lab.errors.SettingError`) for another engine or
conversation than the run it comes from, and for another summarizer after the run's first
summary attempt: the proof says nothing about those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AnyMessage

from ..errors import SettingError
from .engine import remembering
from .playback import ReplayCursor
from .schema import TraceRow


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

    @classmethod
    def at(cls, turn: int, history: InMemoryMessageAccumulator, cursor: ReplayCursor) -> TurnMark:
        """The state of the replay ``cursor`` drives, at the start of ``turn``."""
        recording = cursor.recording
        return cls(
            turn=turn,
            dialogue=history.messages(recording.conversation_id),
            steps=len(recording.step_rows),
            compactions=len(recording.compaction_rows),
            events=len(recording.engine_events),
            interrupted=len(cursor.interrupted_turns),
            cursor=cursor.cursor,
            checkpoint_id=recording.checkpoint_id,
        )


@dataclass(frozen=True, slots=True)
class ForkableRun:
    """What a finished replay leaves for later replays to fork from."""

    #: Who made it: forks are only taken by replays of the same conversation, engine and summarizer.
    conversation_id: str
    engine: str
    summarizer: str
    step_rows: list[TraceRow]
    compaction_rows: list[TraceRow]
    engine_events: list[TraceRow]
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

    def check(self, conversation_id: str, engine: str, summarizer: str) -> None:
        """Refuse a fork into a replay the run's proof does not cover.

        Another summarizer is covered only before the run's first summary attempt (no compaction
        row yet): until then the summarizer was never asked, so nothing recorded depends on it.
        """
        run = self.run
        theirs, ours = (run.conversation_id, run.engine, run.summarizer), (conversation_id, engine, summarizer)
        if theirs[:2] != ours[:2] or (run.summarizer != summarizer and self.mark.compactions):
            raise SettingError(
                f"a replay of {ours} cannot fork from a replay of {theirs} at turn {self.mark.turn}: "
                "its decisions were proven for that one only"
            )

    def history(self, session_id: str) -> InMemoryMessageAccumulator:
        """zett-agent's history extension, remembering the marked dialogue of ``session_id``."""
        return remembering(session_id, self.mark.dialogue)

    def resume(self, cursor: ReplayCursor) -> list[TurnMark]:
        """Put a new replay's recording and cursor where the run was at the mark, for the new setting.

        Returns the run's marks up to this one: the new replay shares them.
        """
        run, mark, recording = self.run, self.mark, cursor.recording
        recording.step_rows = [
            {
                **row,
                "max_tokens": recording.max_tokens,
                "keep_recent_tokens": recording.keep_recent_tokens,
                "over_budget_after": cast(int, row["context_tokens_after"])
                > recording.max_tokens,  # the recorder's int
            }
            for row in run.step_rows[: mark.steps]
        ]
        recording.compaction_rows = run.compaction_rows[: mark.compactions]
        recording.engine_events = run.engine_events[: mark.events]
        recording.steps, recording.compactions = mark.steps, mark.compactions
        recording.checkpoint_id = mark.checkpoint_id
        cursor.interrupted_turns = run.interrupted_turns[: mark.interrupted]
        cursor.cursor = mark.cursor
        return [m for m in run.marks if m.turn <= mark.turn]
