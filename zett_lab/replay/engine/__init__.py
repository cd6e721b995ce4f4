"""Every touch point with zett-agent's internals: the instrumented engine and what drives it.

No other module of zett_lab reaches into zett-agent's private names; this package does, one concept a module:

- :mod:`~zett_lab.replay.engine.probe`: :class:`EngineProbe` is a mixin placed in front of an engine class
  (the stock ``CompactionExtension`` or a user's subclass): it writes down what the engine's own methods
  computed (estimate, window, checkpoint, outcome) and always returns what they returned, so the engine
  decides exactly as it would alone. :class:`ReplayProbe` and :class:`LiveProbe` add where a pass begins
  and ends in a replay and in a live agent.
- :mod:`~zett_lab.replay.engine.build`: which engine (:data:`EngineSpec`), its name, the limits it may be
  reused along, and the instrumented instance.
- :mod:`~zett_lab.replay.engine.summary_channel`: :class:`SummaryChannel` wraps the summary model (the
  engine calls it directly, so its usage and latency are visible nowhere else) and serves the summary cache.
- :mod:`~zett_lab.replay.engine.span`: :func:`summarize_span` runs the engine's own summary step on one
  given span; :func:`summary_frame` reads the messages that step puts around a span.
- :mod:`~zett_lab.replay.engine.estimator` and :mod:`~zett_lab.replay.engine.storage`: the engine's own
  token estimator, and what the history extensions keep (:func:`remembering` gives the in-memory one a
  dialogue, :func:`storage_sequences` reads a session storage's).

The replay model and tools that play a recording back through the runtime (public interfaces
only) are in :mod:`zett_lab.replay.playback`.

Nothing here re-implements the engine; :mod:`zett_lab.replay.explain` holds the only
re-implemented logic (why a stock window was not found), checked against the engine in tests.
"""

from .build import (
    REUSE_ATTRIBUTE,
    STOCK_REUSE,
    EngineError,
    EngineSpec,
    build_engine,
    check_engine,
    engine_name,
    engine_reuse,
    graft,
)
from .estimator import counts_with_engine_estimator, engine_count_tokens
from .probe import EngineProbe, LiveProbe, ReplayProbe, drive_replay, limit_passes, record_live, stock_window
from .span import summarize_span, summary_frame
from .storage import remembering, storage_sequences, stored_raw_log
from .summary_channel import (
    REPLAY_FAILED_REQUESTS,
    SPAN_ATTEMPTS,
    SummaryChannel,
    SummaryNotAsked,
    UnfinishedSummary,
    effort_identity,
)

__all__ = [
    "REPLAY_FAILED_REQUESTS",
    "REUSE_ATTRIBUTE",
    "SPAN_ATTEMPTS",
    "STOCK_REUSE",
    "EngineError",
    "EngineProbe",
    "EngineSpec",
    "LiveProbe",
    "ReplayProbe",
    "SummaryChannel",
    "SummaryNotAsked",
    "UnfinishedSummary",
    "build_engine",
    "check_engine",
    "counts_with_engine_estimator",
    "drive_replay",
    "effort_identity",
    "engine_count_tokens",
    "engine_name",
    "engine_reuse",
    "graft",
    "limit_passes",
    "record_live",
    "remembering",
    "stock_window",
    "storage_sequences",
    "stored_raw_log",
    "summarize_span",
    "summary_frame",
]
