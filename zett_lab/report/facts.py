"""What a report says was studied, and what failed: plain, JSON-ready facts of its replays.

:func:`study_facts` is the "What was studied" section (conversations and their sizes, engine, counter,
summarizers, settings, input files that could not be read; the document adds the date, the zett-lab version and the user's notes);
:func:`failure_figures` is the failures banner's counts. Nothing here reads the environment: settings
shown are an explicit allow-list of a trace's settings and source files are shown by name only (never a
full path).
"""

from __future__ import annotations

from pathlib import PurePath

import pandas as pd

from ..load.conversation import Conversation
from ..records import plain, records
from ..replay.schema import FAILURE_COLUMNS
from ..tokens import EXACT_COUNTER, count_tokens
from .replays import Replays
from .tables import DIGITS


def study_facts(replays: Replays) -> dict[str, object]:
    """What was studied: conversations, sizes, engine, counter, what was compared (the engines when a sweep compared
    them, the summarizers), settings, failed replays, and the input files that could not be read (by name, with
    why)."""
    traces = [trace for _, trace in replays.entries]
    first = traces[0].settings
    engines = sorted({str(t.settings.zett_agent_version) for t in traces})
    counters = sorted({t.settings.counter for t in traces})
    setting = first.setting
    chosen: dict[str, object] = (
        {}
        if setting is None
        else {
            "usage": setting.usage,
            "usage_overhead": setting.usage_overhead,
            "reasoning_effort": setting.reasoning_effort,
        }
    )
    if first.strict is not None:
        chosen["strict"] = first.strict
    return {
        "engine": "zett-agent " + ", ".join(engines),
        "zett_agent_version": engines[0] if len(engines) == 1 else engines,
        "counter": counters[0] if len(counters) == 1 else counters,
        "counter_note": "o200k_base, exact and memoized (the engine's default counter)"
        if counters == [EXACT_COUNTER]
        else None,
        "settings": {key: plain(value, DIGITS) for key, value in chosen.items()},
        "compared": replays.arms.by,
        "counted": replays.arms.counted,
        "engines": list(replays.arms.engines) if replays.arms.by != "summarizer" else [],
        "summarizers": list(replays.arms.summarizers if replays.arms.by != "summarizer" else replays.summarizers),
        "grid": replays.grid,
        "replays": len(traces),
        "conversations": [_conversation_facts(c) for c in replays.conversations],
        "failures": [
            {
                "conversation_id": f.conversation_id,
                "summarizer": f.summarizer,
                "max_tokens": f.max_tokens,
                "keep_recent_tokens": f.keep_recent_tokens,
                "error": f.error,
            }
            for f in replays.failures
        ],
        "skipped_files": [{"file": PurePath(f["path"]).name, "reason": f["reason"]} for f in replays.skipped_files],
    }


def _conversation_facts(conversation: Conversation) -> dict[str, object]:
    """One conversation's row of "What was studied": its title, file name (never its path), format and sizes."""
    messages = conversation.messages
    title = conversation.metadata.get("title") if isinstance(conversation.metadata, dict) else None
    return {
        "id": conversation.id,
        "title": title if isinstance(title, str) else None,
        "file": PurePath(str(conversation.source)).name if conversation.source else None,
        "format": conversation.format,
        "messages": len(messages),
        "turns": len(conversation.turns),
        "model_steps": sum(1 for m in messages if getattr(m, "role", None) == "assistant"),
        "tokens": int(count_tokens(messages)),
        "probes": len(conversation.probes),
    }


def failure_figures(replays: Replays) -> dict[str, object]:
    """What failed (the report's banner): counts per cause, how many replays are no measurement, and how many
    input files could not be read."""
    counts: pd.DataFrame = replays.failure_counts
    attempted = len(replays.attempted)
    return {
        "summary_calls": int(counts.loc[counts["what"] == "summary call", "count"].sum()),
        "cells": int(counts.loc[counts["what"] == "sweep cell", "count"].sum()),
        "replays": attempted,
        "unmeasured_replays": attempted - len(replays.results),
        "settings_left_out": len(replays.unmeasured_settings),
        "skipped_files": len(replays.skipped_files),
        "causes": records(counts, FAILURE_COLUMNS),
    }
