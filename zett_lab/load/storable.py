"""Text as every later stage needs it: each string encodable as UTF-8, and no NUL.

Recorded logs hold text that looks legal but breaks later stages: a lone surrogate (``"\\ud800"``
in JSON) cannot be encoded, so every summary request and every saved table would fail; a NUL ends
a C string; bytes that are not UTF-8 cannot be decoded at all. Readers decode with :func:`decode`
and :func:`loads`, which keep undecodable bytes as lone surrogates instead of failing, and
:func:`normalise` (run on every conversation a reader returns) replaces each such character with
U+FFFD and warns once per conversation, naming the file and the message indices.

Example::

    >>> loads(b'{"text": "caf\\xe9 \\\\ud800"}')["text"] == "caf\\udce9 \\ud800"
    True
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, TypeVar, cast

import orjson

from ..errors import InputError, warn
from ..records import JSONValue
from .conversation import Conversation

#: What replaces a character that cannot be stored.
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: How many message indices a warning lists before it says "and N more".
_LISTED = 10

T = TypeVar("T")


def decode(raw: bytes) -> str:
    """UTF-8 text (a leading byte-order mark dropped); bytes that are not UTF-8 become lone surrogates."""
    return raw.decode("utf-8-sig", "surrogateescape")


def loads(raw: bytes | str) -> JSONValue:
    """Parse JSON like :func:`json.loads`, but never fail on the encoding, and fail only with JSONDecodeError.

    Bytes are parsed as they are when they are plain UTF-8 JSON (:func:`loads_utf8`), else decoded
    in the encoding JSON allows (UTF-8, -16 or -32, detected as json.loads does) keeping
    undecodable bytes as lone surrogates. Input json.loads rejects with another
    exception (nesting deeper than Python's recursion limit, an integer with more digits than
    Python converts) raises :class:`json.JSONDecodeError` too, so every reader's handler for
    broken JSON covers it.
    """
    if isinstance(raw, bytes):
        try:
            return loads_utf8(raw)
        except json.JSONDecodeError:
            pass  # json below reads it, or says why not
    text = _json_text(raw) if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(f"nested too deeply; zett_lab reads at most {MAX_NESTING} levels", text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as error:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise json.JSONDecodeError(f"a number zett_lab cannot read ({error})", text, 0) from None


def not_json(path: object, error: json.JSONDecodeError, line: int | None = None) -> InputError:
    """The error for a file that is not valid JSON there: it names the line and column, and what is wrong.

    ``line`` is the file's line when one JSONL line was parsed on its own (the error counts from 1).
    """
    reason = error.msg.removesuffix(" at")  # json's "Invalid control character at" is followed by the position
    return InputError(path, f"line {line or error.lineno}, column {error.colno}", f"not valid JSON ({reason})")


def loads_utf8(raw: bytes) -> JSONValue:
    """Parse UTF-8 JSON bytes as they are, without first decoding them to one string of the whole text.

    That string would cost the file's size again, four times over once the file holds one character
    beyond U+FFFF (issue 30: a huge single-line log). Raises :class:`json.JSONDecodeError` for what
    orjson refuses and :func:`loads` still reads: bytes that are not UTF-8, a byte-order mark, a lone
    surrogate, NaN, nesting deeper than 1,024 levels, other encodings; and a run of 20 digits (19 after a
    minus), which orjson would read as a float where json reads an integer.
    """
    digits = raw.translate(_DIGITS)
    if b"0" * 20 in digits or b"-" + b"0" * 19 in digits:  # a number orjson would read as a float
        raise json.JSONDecodeError("an integer that may not fit in 64 bits", "", 0)
    del digits
    return orjson.loads(raw)


#: Each digit as ``0``, a minus sign as itself, any other byte as a space: where digit runs are, at C speed.
_DIGITS = bytes(48 if 48 <= byte <= 57 else 45 if byte == 45 else 32 for byte in range(256))


def _json_text(raw: bytes) -> str:
    """JSON bytes as text: UTF-16 or -32 when their byte pattern says so and they decode, else UTF-8."""
    encoding = json.detect_encoding(raw)
    if encoding.startswith("utf-8"):
        return raw.decode(encoding, "surrogateescape")
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError:
        return decode(raw)


def make_storable(value: T) -> tuple[T, int]:
    """``value`` with every unstorable character replaced, and how many were (the same object when none).

    Walks strings, lists, tuples, dicts (keys too) and dataclass instances such as zett-agent
    messages; anything else (numbers, bytes, enums) is returned as it is.
    """
    storable, replaced = _storable(value)
    return cast(T, storable), replaced


def _storable(value: Any) -> tuple[Any, int]:
    """:func:`make_storable` on a value of any type (each branch rebuilds the type it walks)."""
    if not _holds_unstorable(value):
        return value, 0
    if isinstance(value, str):
        return _UNSTORABLE.subn(REPLACEMENT, value)
    if type(value) in (list, tuple):
        items = [_storable(item) for item in value]
        return type(value)(item for item, _ in items), sum(n for _, n in items)
    if isinstance(value, dict):
        pairs = [(_storable(k), _storable(v)) for k, v in value.items()]
        return type(value)((k[0], v[0]) for k, v in pairs), sum(k[1] + v[1] for k, v in pairs)
    changes = {name: _storable(getattr(value, name)) for name in _field_names(type(value)) or ()}
    return dataclasses.replace(value, **{name: v for name, (v, n) in changes.items() if n}), sum(
        n for _, n in changes.values()
    )


_ATOMS = (type(None), bool, int, float, bytes)
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The field names of a dataclass type (cached: this runs for every object of every message), else None."""
    if kind not in _FIELDS:
        _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(kind)) if dataclasses.is_dataclass(kind) else None
    return _FIELDS[kind]


def _unstorable_text(text: str) -> bool:
    """Whether text holds a NUL or a lone surrogate: isascii() is O(1) in CPython, ``in`` is a memchr and
    encoding is C-speed, all several times faster than a regex search over every character."""
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _holds_unstorable(value: Any) -> bool:
    """Whether any string in ``value`` holds an unstorable character (the fast check every load runs)."""
    kind = type(value)
    if kind is str:
        return _unstorable_text(value)
    if kind in _ATOMS:
        return False
    if kind is list or kind is tuple:
        return any(map(_holds_unstorable, value))
    if isinstance(value, str):
        return _unstorable_text(value)
    if isinstance(value, dict):
        return any(map(_holds_unstorable, value)) or any(map(_holds_unstorable, value.values()))
    names = _field_names(kind)
    return names is not None and any(_holds_unstorable(getattr(value, name)) for name in names)


#: How deep nested data (a tool call's arguments, metadata) may be. Python walks nested data
#: recursively (zett_lab's code, zett-agent's and the engine's own ``json.dumps`` alike) and stops at
#: about 1,000 frames; real tool arguments are a few levels deep.
MAX_NESTING = 200


def nesting(value: object, limit: int = MAX_NESTING) -> int:
    """How deeply lists, tuples and dicts nest in ``value`` (walked without recursion; stops past ``limit``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif type(item) in (list, tuple):
            children = item
        else:
            names = _field_names(type(item))  # a dataclass (a native compaction, a probe): its fields, same level
            if names is not None:
                stack.extend((getattr(item, name), depth) for name in names)
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((child, depth) for child in children if not isinstance(child, _ATOMS + (str,)))
    return deepest


def check_nesting(conversation: Conversation) -> None:
    """Raise :class:`InputError` naming the message and field that nests deeper than :data:`MAX_NESTING`."""
    where = conversation.source or f"conversation {conversation.id!r}"
    too_deep = f"nested more than {MAX_NESTING} levels deep; zett_lab reads at most {MAX_NESTING} levels"
    for index, message in enumerate(conversation.messages):
        for call in getattr(message, "tool_calls", None) or ():
            if nesting(call.arguments) > MAX_NESTING:
                raise InputError(where, f"message {index}, tool call {call.name!r}, arguments", too_deep)
    for name in ("metadata", "native_compactions", "probes"):
        if nesting(getattr(conversation, name)) > MAX_NESTING:
            raise InputError(where, f"conversation {conversation.id!r}, {name.replace('_', ' ')}", too_deep)


def normalise(conversation: Conversation) -> Conversation:
    """The conversation with unstorable characters replaced everywhere (a copy when any was); warn once naming
    the places.

    Data nested deeper than :data:`MAX_NESTING` is refused first (:func:`check_nesting`).
    """
    check_nesting(conversation)
    places: list[str] = []
    replaced = 0
    for index, message in enumerate(conversation.messages):
        cleaned, count = make_storable(message)
        if count:
            conversation.messages[index] = cleaned
            places.append(f"message {index}")
            replaced += count
    fields: dict[str, Any] = {}  # the changed fields, each of its own type
    for name in ("id", "metadata", "native_compactions", "probes"):
        cleaned, count = make_storable(getattr(conversation, name))
        if count:
            fields[name] = cleaned
            places.append(name.replace("_", " "))
            replaced += count
    if places:
        listed = ", ".join(places[:_LISTED]) + (f" and {len(places) - _LISTED} more" if len(places) > _LISTED else "")
        warn(
            f"{conversation.source or 'conversation'}: conversation {conversation.id!r}, {listed}: replaced {replaced} "
            f"character(s) that cannot be stored as text (lone surrogate, NUL or byte that is not UTF-8) with U+FFFD",
            stacklevel=3,
        )
    return dataclasses.replace(conversation, **fields) if fields else conversation
