"""Replay: a recorded conversation through zett-agent's real runtime, instrumented.

:func:`replay` returns a :class:`Trace` (one row per model step, one per summary attempt). Every
touch point with zett-agent's internals lives in this stage; the engine is never re-implemented.
"""

from .engine import EngineError
from .live import instrument
from .live_reader import live_sessions
from .policies import ObservationMaskingCompaction, SplitTurnCompaction
from .run import ReplayError, SummaryError, replay
from .setting import ReplayOptions, Setting, TraceSettings
from .trace import Trace

__all__ = [
    "EngineError",
    "ObservationMaskingCompaction",
    "ReplayError",
    "ReplayOptions",
    "Setting",
    "SplitTurnCompaction",
    "SummaryError",
    "Trace",
    "TraceSettings",
    "instrument",
    "live_sessions",
    "replay",
]
