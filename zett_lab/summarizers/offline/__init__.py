"""Offline summarizers: deterministic, no network, no key.

Each one is a zett-agent :class:`~zett_agent.model.AgentModel`: give it to the engine as the
compaction model and it answers the engine's summary request with a text built from the span
(``request.messages[1:-1]``, rendered as in :mod:`zett_lab.summarizers.transcript`).

============  ==============================================================================
name          keeps
============  ==============================================================================
extractive    the most central lines/sentences of the transcript (continuous LexRank over
              TF-IDF vectors), as many as fit the budget, in original order
anchors       the lines carrying exact items a coding agent needs later: user constraints,
              errors, decisions, tool-call commands, earlier summaries, file paths, URLs,
              identifiers, commit SHAs, numbers with units; greedy weighted coverage per token
truncate      the head and the tail of the transcript, with a marker for what was cut
mask          the whole transcript with every tool output replaced by
              ``[tool output omitted: 1,234 tokens]`` (observation masking)
============  ==============================================================================

Budgets: an ``int`` is a number of tokens; a ``float`` in (0, 1] is a share of the span's
tokens (the engine's count of the span). The budget bounds the summary *text*; the engine
adds its own ~13-token checkpoint prefix. A summary is never empty: when nothing fits, the
first characters of the transcript that fit are returned.

Example::

    >>> from zett_lab.summarizers import summarizer
    >>> model = summarizer("truncate:0.1")
    >>> model.identity
    'truncate(budget=0.1)'

The base class and budgets are in :mod:`.base`, :class:`Truncate` and :class:`Mask` in
:mod:`.cutting`, :class:`Extractive` and :class:`Anchors` in :mod:`.selection`; every name is
importable from here.
"""

from __future__ import annotations

from .base import Budget, OfflineSummarizer, budget_tokens, cut_prefix, cut_suffix, parse_budget
from .cutting import Mask, Truncate, head_tail, omitted_output
from .selection import ANCHOR_WEIGHTS, TOOL_OUTPUT_WEIGHT, Anchors, Extractive, anchor_items, lexrank, line_units

#: Offline summarizers by spec name.
OFFLINE_SUMMARIZERS: dict[str, type[OfflineSummarizer]] = {
    "extractive": Extractive,
    "anchors": Anchors,
    "truncate": Truncate,
    "mask": Mask,
}

__all__ = [
    "ANCHOR_WEIGHTS",
    "OFFLINE_SUMMARIZERS",
    "TOOL_OUTPUT_WEIGHT",
    "Anchors",
    "Budget",
    "Extractive",
    "Mask",
    "OfflineSummarizer",
    "Truncate",
    "anchor_items",
    "budget_tokens",
    "cut_prefix",
    "cut_suffix",
    "head_tail",
    "lexrank",
    "line_units",
    "omitted_output",
    "parse_budget",
]
