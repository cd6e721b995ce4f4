"""zett_lab: study zett-agent's context compaction on recorded conversations.

Data flows one way: load -> summarizers -> replay -> measure -> study -> report -> show.

Example::

    import zett_lab
    conversations = zett_lab.load_all("fixtures/")
    trace = zett_lab.replay(conversations[0], zett_lab.Setting(max_tokens=20_000, keep_recent_tokens=5_000))
    trace.steps                     # one row per model step
    trace.compactions               # one row per summary attempt
    losses = zett_lab.measure(trace)
    losses.conversation             # budget figures and loss metrics
"""

from typing import Any

from .errors import InputError, SettingError, ZettLabError
from .load import load, load_all
from .load.conversation import Conversation, NativeCompaction, Probe, Turn
from .measure import Losses, measure
from .replay.engine import EngineError
from .replay.live import instrument
from .replay.policies import ObservationMaskingCompaction, SplitTurnCompaction
from .replay.run import ReplayError, replay
from .replay.setting import ReplayOptions, Setting
from .replay.trace import Trace
from .study import Sweep, compare, decision_boundaries, pareto_front, recommend, sweep
from .summarizers import DEFAULT_SUMMARIZER, SummaryCache, summarizer
from .tokens import (
    ApproxCounter,
    MemoizingCounter,
    approx_count_tokens,
    count_tokens,
    provision_o200k,
)
from .version import __version__ as __version__


def __getattr__(name: str) -> Any:
    """``zett_lab.Report`` on first use: reports pull in plots and templates."""
    if name == "Report":
        from .show.report import Report

        return Report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SUMMARIZER",
    "EngineError",
    "ObservationMaskingCompaction",
    "SplitTurnCompaction",
    "instrument",
    "ApproxCounter",
    "Conversation",
    "InputError",
    "Losses",
    "MemoizingCounter",
    "NativeCompaction",
    "Probe",
    "ReplayError",
    "ReplayOptions",
    "Setting",
    "SettingError",
    "SummaryCache",
    "Trace",
    "Turn",
    "ZettLabError",
    "approx_count_tokens",
    "compare",
    "count_tokens",
    "load",
    "load_all",
    "measure",
    "provision_o200k",
    "replay",
    "summarizer",
    "Report",
    "Sweep",
    "decision_boundaries",
    "pareto_front",
    "recommend",
    "sweep",
]
