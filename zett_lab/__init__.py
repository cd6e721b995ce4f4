"""zett_lab: study zett-agent's context compaction on recorded conversations.

Data flows one way: load -> replay -> measure -> show.

Example::

    import zett_lab
    conversations = zett_lab.load_all("fixtures/")
    trace = zett_lab.replay(conversations[0], max_tokens=20_000, keep_recent_tokens=5_000)
    trace.steps          # one row per model step
    trace.compactions    # one row per summary attempt
"""

from .conversations import Conversation, NativeCompaction, Probe, Turn
from .errors import InputError, SettingError, ZettLabError
from .readers import load, load_all
from .tokens import ApproxCounter, MemoizingCounter, approx_count_tokens, count_tokens, provision_o200k

__all__ = [
    "ApproxCounter",
    "Conversation",
    "InputError",
    "MemoizingCounter",
    "NativeCompaction",
    "Probe",
    "SettingError",
    "Turn",
    "ZettLabError",
    "approx_count_tokens",
    "count_tokens",
    "load",
    "load_all",
    "provision_o200k",
]
