"""Summary models for replay: offline baselines, zett-agent providers, and a persistent cache.

Example::

    from zett_lab.summarizers import summarizer, SummaryCache, DEFAULT_SUMMARIZER

    offline = summarizer(DEFAULT_SUMMARIZER)              # no network, deterministic
    masked = summarizer("mask")                            # observation masking baseline
    gpt = summarizer("openai:gpt-5-mini", max_concurrency=4)  # key from OPENAI_API_KEY
    local = summarizer("openai-compatible:qwen3@http://127.0.0.1:8000/v1")
    offline.identity                                       # 'anchors(budget=0.1)'

Every summarizer is a zett-agent ``AgentModel``: the engine calls ``stream(request)`` with
``[SystemMessage(instructions), *older, UserMessage("Produce the checkpoint now.")]``.
"""

from .breaker import BREAKER_COOLDOWN_S, BREAKER_THRESHOLD, SummarizerConnectionError, reset_endpoint_breakers
from .cache import CachedSummary, CacheError, CacheSpec, SummaryCache, default_cache_path, resolve_cache
from .concurrency import LimitedModel
from .identity import summarizer_identity
from .offline import (
    OFFLINE_SUMMARIZERS,
    Anchors,
    Extractive,
    Mask,
    OfflineSummarizer,
    Truncate,
    lexrank,
    parse_budget,
)
from .providers import (
    PROVIDERS,
    VALID_FORMS,
    ProviderSummarizer,
    scored_against_itself,
    selects_by_anchors,
    spec_of,
    summarizer,
)
from .transcript import render, segments, span_of

#: The summarizer ``make report`` uses: keeps the lines with exact anchors (paths, errors,
#: commands, constraints, decisions) within 10% of the span. Offline, deterministic, and its
#: summary is at most a tenth of the span, so the engine applies it.
DEFAULT_SUMMARIZER = "anchors:0.1"

__all__ = [
    "BREAKER_COOLDOWN_S",
    "BREAKER_THRESHOLD",
    "DEFAULT_SUMMARIZER",
    "OFFLINE_SUMMARIZERS",
    "PROVIDERS",
    "VALID_FORMS",
    "Anchors",
    "CacheError",
    "CacheSpec",
    "CachedSummary",
    "Extractive",
    "LimitedModel",
    "Mask",
    "OfflineSummarizer",
    "ProviderSummarizer",
    "SummarizerConnectionError",
    "SummaryCache",
    "Truncate",
    "default_cache_path",
    "lexrank",
    "parse_budget",
    "render",
    "reset_endpoint_breakers",
    "resolve_cache",
    "segments",
    "span_of",
    "scored_against_itself",
    "selects_by_anchors",
    "spec_of",
    "summarizer",
    "summarizer_identity",
]
