"""The grid of a sweep: settings given as tokens or as fractions of a model's window, and its cells.

A cell is one conversation under one :class:`~zett_lab.replay.setting.Setting` (:class:`Cell`: its
engine, summarizer and limits are the grid's dimensions). Everything here only reads and checks what
the caller asked for; nothing is replayed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import numpy as np
from zett_agent.model import AgentModel
from zett_agent.storage import encode_messages

from ..errors import SettingError
from ..load import load_all
from ..load.conversation import Conversation
from ..replay.engine import EngineSpec, check_engine, engine_name
from ..replay.setting import Setting
from ..summarizers import OfflineSummarizer, summarizer_identity

#: Context windows (tokens) of common models, for settings given as fractions of a window.
#: Names follow ``zett_lab/data/prices.json``; a provider prefix (``openai:``) and a dated
#: suffix (``-2025-08-07``) are ignored. Pass an int for anything else.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-5-haiku": 200_000,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}

#: The setting columns that identify a cell (with ``conversation_id``).
SETTING_COLUMNS = ("engine", "summarizer", "max_tokens", "keep_recent_tokens")
#: The ``engine`` label of the stock ``CompactionExtension`` when a sweep is given no ``engines``.
STOCK_ENGINE = "stock"
#: Replay options a sweep passes through to :func:`zett_lab.replay`.
REPLAY_OPTIONS = (
    "reasoning_effort",
    "strict",
    "engine_timeout",
    "compact_at",
    "usage",
    "usage_overhead",
    "on_missing_usage",
    "count_tokens",
)

#: A grid value: tokens (int) or a fraction of the context window (float in (0, 1]).
GridValue = int | float


class Cell(NamedTuple):
    """One cell of a sweep: a conversation under a Setting (the grid's engine, summarizer and limits in it)."""

    conversation_id: str
    setting: Setting


def resolve_context_window(context_window: int | str | None) -> int | None:
    """Tokens of a context window given as an int or a model name from :data:`CONTEXT_WINDOWS`."""
    if context_window is None:
        return None
    if isinstance(context_window, bool):
        raise SettingError(f"context_window must be an int or a model name, got {context_window!r}")
    if isinstance(context_window, int):
        if context_window < 1:
            raise SettingError(f"context_window must be positive, got {context_window}")
        return context_window
    if not isinstance(context_window, str):
        raise SettingError(f"context_window must be an int or a model name, got {type(context_window).__name__}")
    name = re.sub(r"@\S*$", "", context_window.strip())
    name = name.split(":", 1)[1] if ":" in name else name
    name = name.split("/")[-1].lower()
    if name in CONTEXT_WINDOWS:
        return CONTEXT_WINDOWS[name]
    for key in sorted(CONTEXT_WINDOWS, key=len, reverse=True):
        if name.startswith(key) and re.fullmatch(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest|preview.*)", name[len(key) :]):
            return CONTEXT_WINDOWS[key]
    raise SettingError(
        f"unknown model {context_window!r} for context_window; known: {', '.join(sorted(CONTEXT_WINDOWS))} "
        "(or pass the window as an int)"
    )


def resolve_values(
    values: GridValue | Iterable[GridValue], name: str, window: int | None
) -> list[tuple[int, float | None]]:
    """``[(tokens, share of the window or None)]`` from ints and fractions, in order, without duplicates."""
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        values = [values]
    try:
        items = list(values)  # type: ignore[arg-type]
    except TypeError:
        raise SettingError(f"{name} must be a list of ints or fractions, got {values!r}") from None
    if not items:
        raise SettingError(f"{name} is empty: a sweep needs at least one value")
    resolved: list[tuple[int, float | None]] = []
    seen: set[int] = set()
    for value in items:
        tokens, share = _resolve_value(value, name, window)
        if tokens not in seen:
            seen.add(tokens)
            resolved.append((tokens, share))
    return resolved


def _resolve_value(value: object, name: str, window: int | None) -> tuple[int, float | None]:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SettingError(f"{name} entry {value!r} is not a number")
    if isinstance(value, (float, np.floating)):
        if not 0 < value <= 1:
            raise SettingError(
                f"{name} entry {value!r}: a float is a fraction of context_window in (0, 1]; use an int for tokens"
            )
        if window is None:
            raise SettingError(f"{name} entry {value!r} is a fraction: pass context_window= (an int or a model name)")
        return max(1, round(float(value) * window)), float(value)
    if int(value) < 1:
        raise SettingError(f"{name} entry {value!r} must be a positive number of tokens")
    return int(value), None


def conversations_of(
    conversations: Conversation | Iterable[Conversation] | str | os.PathLike[str],
) -> list[Conversation]:
    """The conversations of a sweep: one, a list, or a path for :func:`zett_lab.load_all`; ids unique."""
    if isinstance(conversations, Conversation):
        items = [conversations]
    elif isinstance(conversations, (str, os.PathLike)):
        items = load_all(Path(conversations))
    else:
        try:
            items = list(conversations)
        except TypeError:
            kind = type(conversations).__name__
            raise SettingError(f"conversations must be a Conversation, a list of them or a path, got {kind}") from None
    if not items:
        raise SettingError("conversations is empty: a sweep needs at least one conversation")
    ids: set[str] = set()
    for item in items:
        if not isinstance(item, Conversation):
            raise SettingError(f"conversations must hold Conversation objects, got {type(item).__name__}")
        if item.id in ids:
            raise SettingError(f"two conversations share the id {item.id!r}; ids must be unique within a sweep")
        ids.add(item.id)
    return items


def fingerprint(conversation: Conversation) -> str:
    """A content hash of what replay reads from a conversation (id, messages, usage)."""
    digest = hashlib.sha256()
    digest.update(conversation.id.encode())
    digest.update(json.dumps(encode_messages(conversation.messages), sort_keys=True, default=repr).encode())
    digest.update(
        json.dumps({str(k): asdict(v) for k, v in sorted(conversation.usage.items())}, sort_keys=True).encode()
    )
    return digest.hexdigest()


def summarizer_label(spec: str | AgentModel) -> str:
    """How a sweep names a summarizer: the spec string as given, else the model's identity."""
    return spec.strip() if isinstance(spec, str) else summarizer_identity(spec)


def is_offline(model: AgentModel) -> bool:
    """Whether a summary model runs in-process without a provider (one replay at a time is fastest)."""
    return isinstance(model, OfflineSummarizer)


def resolve_engines(engines: Mapping[str, EngineSpec] | None, in_process: bool) -> list[tuple[str, EngineSpec]]:
    """``[(label, engine)]`` checked up front: each a valid engine a worker process can receive."""
    if engines is None:
        return [(STOCK_ENGINE, None)]
    if not isinstance(engines, Mapping) or not engines:
        raise SettingError(
            "engines must be a non-empty dict {label: engine}, e.g. {'stock': None, 'mine': MyCompaction}"
        )
    items = []
    for label, engine in engines.items():
        if not isinstance(label, str) or not label.strip():
            raise SettingError(f"engine labels must be non-empty strings, got {label!r}")
        check_engine(engine)
        if not in_process and engine is not None:
            _check_shippable(label, engine)
        items.append((label.strip(), engine))
    return items


def _check_shippable(label: str, engine: EngineSpec) -> None:
    """A process executor re-imports an engine by name: refuse one that only exists in this interpreter."""
    target = engine.func if isinstance(engine, functools.partial) else engine
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    interactive = module is not None and module.__name__ == "__main__" and not hasattr(module, "__file__")
    try:
        pickle.loads(pickle.dumps(engine))
        problem = "it is defined in this notebook or interactive session" if interactive else None
    except Exception as error:  # noqa: BLE001 - reported as a setting error
        problem = f"{type(error).__name__}: {error}"
    if problem:
        raise SettingError(
            f"engine {label!r} ({engine_name(engine)}) cannot be sent to worker processes ({problem}); "
            "define it in an importable module or use executor='serial'"
        )
