"""Gold probes: parsing their JSON form and checking them against a conversation.

:func:`parse_probes` is the one parser (it lives in :mod:`zett_lab.load.conversation`
so readers can use it without importing the metrics package) and is re-exported
here. :func:`check_probes` validates probes attached to an in-memory
conversation, which :func:`zett_lab.measure.measure` calls before using them.

Example::

    >>> parse_probes([{"question": "Port?", "answer": "6543", "type": "recall", "message_index": 3}], "p.json", 10)
    [Probe(question='Port?', answer='6543', type='recall', message_index=3)]
"""

from __future__ import annotations

from ..errors import InputError
from ..load.conversation import PROBE_TYPES, Conversation, Probe, parse_probes

__all__ = ["PROBE_TYPES", "Probe", "check_probes", "covers_probe", "parse_probes"]


def covers_probe(probe: Probe, span_start: int, span_end: int) -> bool:
    """Whether ``messages[span_start:span_end]`` holds a probe's fact (an update probe: its old and its
    current value)."""
    start = (
        probe.superseded_index if probe.type == "update" and probe.superseded_index is not None else probe.message_index
    )
    return span_start <= start and probe.message_index < span_end


def check_probes(conversation: Conversation) -> list[Probe]:
    """The conversation's probes, after checking each points at an existing message and is well formed.

    Raises :class:`~zett_lab.errors.InputError` naming the conversation (its source
    file when it has one) and the probe (number and question).
    """
    where = conversation.source or f"conversation {conversation.id!r}"
    n_messages = len(conversation.messages)
    for n, probe in enumerate(conversation.probes):
        place = f"conversation {conversation.id!r}, probe {n} ({_short(getattr(probe, 'question', ''))!r})"
        if not isinstance(probe, Probe):
            raise InputError(where, place, f"expected a Probe, got {type(probe).__name__}")
        index = probe.message_index
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_messages:
            raise InputError(
                where, place, f"message_index {index!r} is not a message of this conversation (0..{n_messages - 1})"
            )
        if not isinstance(probe.answer, str) or not probe.answer.strip():
            raise InputError(where, place, "the probe has an empty answer")
        if probe.type not in PROBE_TYPES:
            raise InputError(where, place, f"unknown probe type {probe.type!r} (expected {', '.join(PROBE_TYPES)})")
        if probe.type == "update":
            earlier = probe.superseded_index
            if not isinstance(probe.superseded_answer, str) or not probe.superseded_answer.strip():
                raise InputError(where, place, "an update probe needs its superseded answer")
            if isinstance(earlier, bool) or not isinstance(earlier, int) or not 0 <= earlier < index:
                raise InputError(
                    where, place, f"superseded_index {earlier!r} must be a message before message_index {index}"
                )
    return list(conversation.probes)


def _short(text: object, limit: int = 60) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
