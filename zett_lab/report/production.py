"""The report's "Production summaries": recorded native compactions beside the baselines on the same span.

:func:`production_entries` turns :func:`zett_lab.study.production.production_summaries` rows into the
entries the report shows and writes under ``native`` in JSON: one per native compaction (when it
happened, the agent's own token figure beside zett-agent's estimate, the span it replaced), with
every summarizer's metrics on that span under ``summarizers`` and what the production summary
dropped that was used again later. A compaction whose log lost the summary text stays listed
(``summary_missing``). :func:`report_production` picks the baselines for a report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from ..load.conversation import Conversation
from ..records import plain
from ..study.production import PRODUCTION_COLUMNS, production_summaries
from ..study.session import SummarizerSpec
from ..summarizers import spec_of
from .tables import DIGITS

#: Facts of one native compaction (the columns that do not depend on the summarizer).
_FACTS = (
    "conversation_id",
    "subject",
    "native_id",
    "kind",
    "trigger",
    "position",
    "tokens_before",
    "estimate_before",
    "span_start",
    "span_end",
    "span_tokens",
)


def production_entries(rows: pd.DataFrame) -> list[dict[str, object]]:
    """One JSON-ready entry per native compaction: its facts, then ``summarizers`` (the native one first)."""
    metrics = [c for c in rows.columns if c not in PRODUCTION_COLUMNS and c != "lost"]
    per_summarizer = ("status", "summary_tokens", *metrics, "lost")
    out: list[dict[str, Any]] = []
    for _, group in rows.groupby(["conversation_id", "subject", "native_id"], sort=False):
        first = group.iloc[0]
        entry = {name: plain(first[name], DIGITS) for name in _FACTS}
        entry["summary_missing"] = bool((group["status"] == "summary missing from log").any())
        entry["summarizers"] = {
            str(row["summarizer"]): {name: plain(row[name], DIGITS) for name in per_summarizer}
            for _, row in group.iterrows()
        }
        out.append(entry)
    return out


def report_production(
    conversations: Sequence[Conversation],
    identities: Mapping[str, str],
    baselines: Sequence[str] | Mapping[str, SummarizerSpec] | None = None,
) -> tuple[list[dict[str, object]], list[str]]:
    """(entries, summarizers left out) for a report's conversations.

    The baselines are ``baselines`` when given (specs, or label -> spec or model: what the user named
    on this run), else the offline summarizers among the report's own, rebuilt from their identities
    (``identities``: label -> identity; :func:`zett_lab.summarizers.spec_of`). A provider named only by
    an identity in saved results is never called (a file does not decide where requests go), nor is a
    model known only by its identity: both are left out and named, never dropped silently.
    """
    if not any(c.native_compactions for c in conversations):
        return [], []
    skipped: list[str] = []
    named: dict[str, SummarizerSpec] = {}
    if isinstance(baselines, Mapping):
        named = dict(baselines)
    elif baselines is not None:
        named = {str(spec): str(spec) for spec in baselines}
    else:
        for name, identity in identities.items():
            spec = spec_of(identity) or spec_of(name)
            if spec is None:
                skipped.append(name)
            else:
                named[name] = spec  # shown under the report's own label
    return production_entries(production_summaries(conversations, named)), skipped
