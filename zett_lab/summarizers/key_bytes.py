"""The bytes a summary cache key hashes for a request's messages (:func:`message_bytes`): those of zett-agent's
storage codec, each message's part remembered by its value (:class:`_MessageEncodings` says why). A replay names
a summary's span by the same bytes of its first message."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import asdict, fields, is_dataclass
from typing import cast

from zett_agent.messages import AnyMessage
from zett_agent.storage import encode_messages


class _MessageEncodings:
    """Each message's part of a key's bytes, remembered by the message's value.

    The summary requests of a sweep hold fresh copies of the same messages (every replay
    rebuilds the runtime's state), and encoding them (``dataclasses.asdict`` of every message)
    was most of a key's cost. A message is looked up by :func:`_fingerprint`, built from its
    current values, so a message that differs in anything written, or was changed in place,
    is encoded afresh.
    """

    #: Encoded bytes kept before the memo is cleared.
    _MAX_BYTES = 64 * 2**20

    def __init__(self) -> None:
        self._by_value: dict[Hashable, bytes] = {}
        self._bytes = 0

    def encode(self, messages: Sequence[AnyMessage]) -> bytes:
        """The UTF-8 bytes of ``encode_messages(messages)``, from remembered per-message parts."""
        return b"[" + b", ".join([self._part(message) for message in messages]) + b"]"

    def _part(self, message: AnyMessage) -> bytes:
        try:
            fingerprint: Hashable | None = _fingerprint(message)
        except _NoFingerprint:
            fingerprint = None
        part = self._by_value.get(fingerprint) if fingerprint is not None else None
        if part is not None:
            return part
        # The codec writes a list as "[" + ", ".join(items) + "]", so one item is its own list without brackets.
        part = encode_messages([message])[1:-1].encode("utf-8")
        if fingerprint is not None:
            if self._bytes + len(part) > self._MAX_BYTES:
                self._by_value.clear()
                self._bytes = 0
            self._by_value[fingerprint] = part
            self._bytes += len(part)
        return part


class _NoFingerprint(Exception):
    """Internal: a value :func:`_fingerprint` cannot vouch for; its message is encoded every time."""


#: Field names per dataclass type, for :func:`_fingerprint`.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _fingerprint(value: object) -> Hashable:
    """A hashable value such that equal fingerprints are written alike by ``encode_messages``.

    Scalars by exact type and value (``True``, ``1`` and ``1.0`` differ), floats by ``repr``,
    bytes as they are, tuples and lists item by item, dataclasses field by field, plain dicts
    by their JSON text. Anything else raises :class:`_NoFingerprint`.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is bytes or value is None:
        return kind, value
    if kind is float:
        return kind, repr(value)
    if kind is tuple or kind is list:
        return kind, tuple([_fingerprint(item) for item in cast(Sequence[object], value)])
    if kind is dict:
        try:
            return kind, json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            raise _NoFingerprint from None
    names = _FIELD_NAMES.get(kind)
    if names is None:
        if not is_dataclass(value) or isinstance(value, type):
            raise _NoFingerprint
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(value))
    return kind, tuple([_fingerprint(getattr(value, name)) for name in names])


_ENCODINGS = _MessageEncodings()


def message_bytes(messages: Sequence[AnyMessage]) -> bytes:
    """The UTF-8 bytes of ``encode_messages(messages)``, from this process's remembered per-message parts.

    Messages with values the storage codec cannot write (or subclasses it does not know) are written as a stable
    JSON rendering of the same fields instead.
    """
    try:
        return _ENCODINGS.encode(messages)
    except (TypeError, ValueError, StopIteration):
        return json.dumps(
            [{"type": type(m).__name__, "data": asdict(m)} for m in messages], ensure_ascii=False, default=repr
        ).encode("utf-8")
