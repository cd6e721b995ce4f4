"""What zett-agent's history extensions keep: the dialogue the in-memory one remembers (given for a fork), and a
session storage's raw-log sequence numbers and raw log."""

from __future__ import annotations

from collections.abc import Sequence

from zett_agent.agent import AgentRunContext
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.persistence import BaseSessionPersistenceExtension
from zett_agent.messages import AnyMessage
from zett_agent.model import ModelUsage


def remembering(session_id: str, dialogue: Sequence[AnyMessage]) -> InMemoryMessageAccumulator:
    """zett-agent's in-memory history extension remembering ``dialogue`` for ``session_id`` (what it restores at the
    start of the session's next request: a fork resumes from it). Set in its one store of remembered dialogue,
    which has no public setter."""
    history = InMemoryMessageAccumulator()
    history._sessions[session_id] = list(dialogue)
    return history


def storage_sequences(context: AgentRunContext) -> list[int | None] | None:
    """Raw-log sequence numbers of the context's non-system messages, from a session storage extension.

    ``SQLiteSessionExtension`` (any ``BaseSessionPersistenceExtension``) keeps one sequence per
    non-system context position (the checkpoint stands for ``compacted_through_sequence``);
    None when the agent has no session storage.
    """
    for extension in context.extensions:
        if isinstance(extension, BaseSessionPersistenceExtension):
            request = extension._requests.get(context)
            return list(request.context_sequences) if request is not None else None
    return None


async def stored_raw_log(context: AgentRunContext) -> list[tuple[int, AnyMessage, ModelUsage | None]] | None:
    """Every message the session storage's raw log holds for the context's session: (sequence, message, usage).

    Read through the storage's own ``list_raw_messages`` (zett-agent's SQL storages, SQLite among
    them), so the agent's own connection answers; None when the agent has no such storage.
    """
    for extension in context.extensions:
        if isinstance(extension, BaseSessionPersistenceExtension):
            listing = getattr(getattr(extension, "storage", None), "list_raw_messages", None)
            if listing is None:
                return None
            records: list[tuple[int, AnyMessage, ModelUsage | None]] = []
            while True:
                page = await listing(context.session_id, after_sequence=records[-1][0] if records else 0, limit=5_000)
                for record in page:
                    usage = None
                    if record.input_tokens is not None:
                        usage = ModelUsage(
                            input_tokens=record.input_tokens,
                            output_tokens=record.output_tokens or 0,
                            cache_read_tokens=record.cache_read_tokens or 0,
                            cache_write_tokens=record.cache_write_tokens or 0,
                            reasoning_tokens=record.reasoning_tokens or 0,
                        )
                    records.append((record.sequence, record.message, usage))
                if len(page) < 5_000:
                    return records
    return None
