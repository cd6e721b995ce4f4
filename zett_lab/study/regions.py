"""Which settings provably give the same replay: the proof a sweep's reuse and forks rest on.

The engine consults its two limits in exactly two places:

- ``max_tokens`` only in ``estimate > max_tokens`` (once per automatic pass, before every
  model step);
- ``keep_recent_tokens`` only in the first walk of ``_select_compaction_window``:
  ``while cutoff > 0 and count(dialogue[cutoff:]) < keep_recent_tokens: cutoff -= 1``,
  after which the cutoff snaps back to a turn start that does not depend on the limit.

Everything else a replay does is a function of the conversation, the summarizer, the
counter and the decisions taken so far. So two settings give the same replay (same steps,
same compactions, same summaries) exactly when every pass takes the same decisions, and by
induction over the passes of one replay that is the case for every ``(max_tokens,
keep_recent_tokens)`` in a rectangle read off that replay:

- a pass with estimate ``e`` that did not trigger needs ``max_tokens >= e``; one that did
  needs ``max_tokens <= e - 1``;
- a pass that looked for a window and settled on the turn start ``b`` of the dialogue ``d``
  (``b = 0``: no window) settles there again for every ``keep_recent_tokens`` in
  ``(S(nb), S(b)]``, where ``S(i) = count(d[i:])`` and ``nb`` is the next turn start after
  ``b`` (``S(len(d)) = 0``; ``S(0)`` is unbounded when ``b = 0``).

:func:`region` computes that rectangle from a trace (re-counting only the suffix sums, with
the same counter, and cross-checking each reconstructed context against what the trace
recorded; a mismatch shrinks the region to the single setting replayed). :func:`derive`
produces the trace of another setting in the region: only the columns that *name* the
setting change (``max_tokens``, ``keep_recent_tokens``, ``over_budget_after``, and the
settings dict). Summaries are the summarizer's answers to identical requests, so this
holds for deterministic summarizers (every offline one) and for any summarizer served by
the summary cache.

:func:`same_replay` says where two traces of one setting differ. :mod:`zett_lab.study.boundaries` walks these
regions along one axis to find every value where the decisions change.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd
from zett_agent.extensions.compaction import CompactedMessage
from zett_agent.messages import AnyMessage, SystemMessage

from ..errors import SettingError
from ..load.conversation import starts_turn
from ..records import is_missing
from ..replay.deadline import TIMEOUT_KIND
from ..replay.engine import STOCK_REUSE, engine_name, stock_window
from ..replay.explain import walk_cutoff
from ..replay.setting import TraceSettings
from ..replay.trace import Trace, checkpoint_message
from ..tokens import TokenCounter
from ..tokens import count_tokens as default_counter

#: Compaction columns that describe how this run got a summary (cache or call), not what the engine did.
SUMMARY_FETCH_COLUMNS = ("cache_hit", "latency_s")


@dataclass(frozen=True)
class Region:
    """Settings for which a replay is provably identical to the one it was read from.

    ``max_tokens`` in ``[m_lo, m_hi]`` and ``keep_recent_tokens`` in ``[k_lo, k_hi]``
    (inclusive; ``None`` = unbounded above). ``reason`` says why a region was shrunk to
    the replayed point (None when it is the full proven rectangle).
    """

    max_tokens: int
    keep_recent_tokens: int
    m_lo: int
    m_hi: int | None
    k_lo: int
    k_hi: int | None
    reason: str | None = None

    def contains(self, max_tokens: int, keep_recent_tokens: int) -> bool:
        return (
            self.m_lo <= max_tokens
            and (self.m_hi is None or max_tokens <= self.m_hi)
            and self.k_lo <= keep_recent_tokens
            and (self.k_hi is None or keep_recent_tokens <= self.k_hi)
        )

    @classmethod
    def point(cls, max_tokens: int, keep_recent_tokens: int, reason: str) -> Region:
        return cls(
            max_tokens, keep_recent_tokens, max_tokens, max_tokens, keep_recent_tokens, keep_recent_tokens, reason
        )


def _suffix_sums(dialogue: Sequence[AnyMessage], counter: TokenCounter) -> list[int]:
    """``S[i] = counter(dialogue[i:])`` for i in 0..len (the counter is additive per message)."""
    sums = [0] * (len(dialogue) + 1)
    for i in range(len(dialogue) - 1, -1, -1):
        sums[i] = sums[i + 1] + counter([dialogue[i]])
    return sums


def _keep_interval(dialogue: Sequence[AnyMessage], b: int, sums: list[int]) -> tuple[int, int | None]:
    """``keep_recent_tokens`` values (``lo < K <= hi``) for which the window walk settles on ``b``."""
    nb = next((i for i in range(b + 1, len(dialogue)) if starts_turn(dialogue[i])), len(dialogue))
    return sums[nb], (None if b == 0 else sums[b])


def region(
    trace: Trace, *, count_tokens: TokenCounter | None = None, verify: bool = False, limits: Sequence[str] | None = None
) -> Region:
    """The rectangle of settings proven to give exactly ``trace`` (see the module docstring).

    ``count_tokens`` must be the counter the replay used (None: zett_lab's exact counter).
    Runs in O(steps + messages) using prefix sums of per-message counts (the counter is
    additive per message). ``verify=True`` also rebuilds every context that found no
    window and re-runs the engine's own walk on it, checking the arithmetic (slow; tests).

    The proof holds for the stock engine. ``limits`` says along which limits it may be used
    for the engine that made the trace (``engine_reuse(engine)``: what a user engine declares);
    None reads it from the trace: both for the stock engine, none for any other.
    """
    return prefix_regions(trace, [len(trace.steps)], count_tokens=count_tokens, verify=verify, limits=limits)[0]


def trace_limits(trace: Trace) -> tuple[str, ...]:
    """The limits a trace's proof may be used along when nobody says: both for a stock replay, none otherwise."""
    settings = trace.settings
    stock = settings.engine == engine_name(None) and settings.live is None
    return STOCK_REUSE if stock else ()


#: One step's row as :class:`_DecisionWalk` reads it: the columns it needs, the values ``itertuples`` gives
#: (iterating only these spares converting the rest of the table).
_WalkRow = namedtuple(
    "_WalkRow",
    "step n_recorded n_messages estimate estimator_tokens triggered recent_messages recent_tokens cutoff_index "
    "compaction_id checkpoint_id kept_from",
)


def prefix_regions(
    trace: Trace,
    step_counts: Sequence[int],
    *,
    count_tokens: TokenCounter | None = None,
    verify: bool = False,
    limits: Sequence[str] | None = None,
) -> list[Region]:
    """For each ``n`` of ``step_counts`` (ascending), the settings proven to take the decisions of ``trace``'s first ``n`` steps.

    The same induction as :func:`region`, stopped after ``n`` steps: a replay under any
    setting of the rectangle reaches the start of step ``n`` in exactly the state ``trace``
    did, which is what lets :mod:`zett_lab.replay.fork` start it there. The rectangles are
    nested (each later one inside the earlier); ``region(trace)`` is the one for every step.
    ``limits`` as for :func:`region`: for an engine that declares none, every rectangle is
    the replayed point, so nothing is shared with it, not even a prefix.
    """
    counter = count_tokens or default_counter
    setting = trace.setting
    max_tokens, keep = setting.max_tokens, setting.keep_recent_tokens
    limits = trace_limits(trace) if limits is None else tuple(limits)
    if not limits:
        reason = f"engine {setting.engine_name} declares no proven reuse"
        return [Region.point(max_tokens, keep, reason)] * len(step_counts)
    manual = bool(setting.compact_at) or (len(trace.compactions) and (trace.compactions["trigger"] != "auto").any())
    if manual:
        return [Region.point(max_tokens, keep, "manual compaction passes")] * len(step_counts)
    walk = _DecisionWalk(trace, counter, verify, limits)
    regions: list[Region] = []
    wanted = iter(step_counts)
    target = next(wanted, None)
    steps = trace.steps
    rows = map(_WalkRow._make, zip(*(steps[column] for column in _WalkRow._fields), strict=True))
    done = 0
    while target is not None:
        if done == target or walk.failed is not None:
            regions.append(walk.rectangle())
            target = next(wanted, None)
            continue
        row = next(rows, None)
        if row is None:  # a count past the last step: the whole trace
            regions.append(walk.rectangle())
            target = next(wanted, None)
            continue
        walk.step(row)
        done += 1
    return regions


#: Conversation layouts kept per process (a sweep proves regions for many replays of one conversation).
_LAYOUTS: dict[tuple[int, int], tuple[Sequence[AnyMessage], TokenCounter, _Layout]] = {}


_LAYOUTS_KEPT = 4


#: ``(prefix sums of per-message counts, next turn start at or after i, last turn start at or before i, first system message)``.
_Layout = tuple[list[int], list[int], list[int], int | None]


def _layout(messages: Sequence[AnyMessage], counter: TokenCounter) -> _Layout:
    """Where a conversation's tokens and turns are, computed once per process for the last few conversations."""
    key = (id(messages), id(counter))
    entry = _LAYOUTS.get(key)
    if entry is not None and entry[0] is messages and entry[1] is counter and len(entry[2][0]) == len(messages) + 1:
        return entry[2]
    n_all = len(messages)
    prefix = [0] * (n_all + 1)
    for i, message in enumerate(messages):
        prefix[i + 1] = prefix[i] + counter([message])
    next_start = [n_all] * (n_all + 1)
    prev_start = [-1] * n_all
    for i in range(n_all - 1, -1, -1):
        next_start[i] = i if starts_turn(messages[i]) else next_start[i + 1]
    last = -1
    for i in range(n_all):
        last = i if starts_turn(messages[i]) else last
        prev_start[i] = last
    first_system = next((i for i, m in enumerate(messages) if isinstance(m, SystemMessage)), None)
    layout = (prefix, next_start, prev_start, first_system)
    _LAYOUTS[key] = (messages, counter, layout)  # holding both keeps their ids from being reused
    while len(_LAYOUTS) > _LAYOUTS_KEPT:
        _LAYOUTS.pop(next(iter(_LAYOUTS)))
    return layout


class _DecisionWalk:
    """The rectangle of settings that take a trace's decisions so far, narrowed one step at a time."""

    def __init__(self, trace: Trace, counter: TokenCounter, verify: bool, limits: Sequence[str]) -> None:
        self.trace, self.counter, self.verify, self.limits = trace, counter, verify, limits
        self.max_tokens, self.keep = trace.setting.max_tokens, trace.setting.keep_recent_tokens
        self.messages = messages = trace.conversation.messages
        self.prefix, self.next_start, self.prev_start, self.first_system = _layout(messages, counter)
        #: Per compaction with a summary, its text; counted as a checkpoint message only when a step without a
        #: window reads it (:meth:`_checkpoint_tokens`): a long trace's summaries are megabytes, and a walk reads
        #: fewer than half of them (558 of 1,284 in a long session's report).
        self.summaries: dict[int, str] = {}
        self.checkpoints: dict[int, int] = {}
        #: Passes that ran over engine_timeout: how long a pass takes is a matter of time, not of the setting.
        self.timed_out: set[int] = set()
        if len(trace.compactions):
            for cid, text in zip(trace.compactions["compaction_id"], trace.compactions["summary_text"], strict=True):
                if isinstance(text, str):
                    self.summaries[int(cid)] = text
            timed_out = trace.compactions["error_kind"].eq(TIMEOUT_KIND).fillna(False)
            self.timed_out = {int(cid) for cid in trace.compactions.loc[timed_out, "compaction_id"]}
        self.m_lo, self.k_lo = 1, 1
        self.m_hi: int | None = None
        self.k_hi: int | None = None
        self.failed: str | None = None

    def rectangle(self) -> Region:
        if self.failed is not None:
            return Region.point(self.max_tokens, self.keep, self.failed)
        m_lo, m_hi = (self.m_lo, self.m_hi) if "max_tokens" in self.limits else (self.max_tokens, self.max_tokens)
        k_lo, k_hi = (self.k_lo, self.k_hi) if "keep_recent_tokens" in self.limits else (self.keep, self.keep)
        result = Region(self.max_tokens, self.keep, m_lo, m_hi, k_lo, k_hi)
        if not result.contains(self.max_tokens, self.keep):  # cannot happen unless the trace is inconsistent
            return Region.point(self.max_tokens, self.keep, "inconsistent trace")
        return result

    def step(self, row: Any) -> None:
        """Narrow the rectangle by one step's pass (or record why it cannot be read)."""
        step = int(row.step)
        if not is_missing(row.compaction_id) and int(row.compaction_id) in self.timed_out:
            self.failed = f"step {step}: its pass timed out (a matter of time, not of the setting)"
            return
        estimate = row.estimate
        if is_missing(estimate):
            self.failed = f"step {step} has no estimate"
            return
        estimate = int(estimate)
        triggered = bool(row.triggered)
        if triggered != (estimate > self.max_tokens):
            self.failed = f"step {step}: trigger does not match its estimate"
            return
        if not triggered:
            self.m_lo = max(self.m_lo, estimate)
            return
        self.m_hi = estimate - 1 if self.m_hi is None else min(self.m_hi, estimate - 1)
        if "keep_recent_tokens" not in self.limits:
            return  # the window walk is the engine's own: nothing is proven along keep_recent_tokens
        interval = (
            self._window_interval(row, step)
            if not is_missing(row.cutoff_index)
            else self._no_window_interval(row, step)
        )
        if interval is None:
            return
        lo, hi = interval
        self.k_lo = max(self.k_lo, lo + 1)
        if hi is not None:
            self.k_hi = hi if self.k_hi is None else min(self.k_hi, hi)

    def _checkpoint_tokens(self, compaction_id: int) -> int | None:
        """Compaction ``compaction_id``'s checkpoint message counted (once), None when it has no summary."""
        if compaction_id not in self.checkpoints and compaction_id in self.summaries:
            self.checkpoints[compaction_id] = self.counter([checkpoint_message(self.summaries[compaction_id])])
        return self.checkpoints.get(compaction_id)

    def _window_interval(self, row: Any, step: int) -> tuple[int, int | None] | None:
        """A window was found: the dialogue ends with messages[cutoff:n] verbatim, starting a turn."""
        prefix, n, cutoff = self.prefix, int(row.n_recorded), int(row.cutoff_index)
        if n - cutoff != row.recent_messages or prefix[n] - prefix[cutoff] != row.recent_tokens:
            self.failed = f"step {step}: kept window does not re-count"
            return None
        nb = min(self.next_start[cutoff + 1], n) if cutoff + 1 <= n else n
        return prefix[n] - prefix[nb], prefix[n] - prefix[cutoff]

    def _no_window_interval(self, row: Any, step: int) -> tuple[int, int | None] | None:
        """No window: nothing changed, so the context sent is the one the walk saw.

        That context is [system] + [checkpoint] + messages[kept_from:n] (docs/trace-schema.md).
        """
        prefix, messages, keep = self.prefix, self.messages, self.keep
        n, kept_from = int(row.n_recorded), int(row.kept_from)
        has_checkpoint = not is_missing(row.checkpoint_id)
        off = 1 if has_checkpoint else 0
        ckpt = self._checkpoint_tokens(int(row.checkpoint_id)) if has_checkpoint else 0
        first_system = self.first_system
        system, system_tokens = 0, 0
        if first_system is not None and first_system < n:
            system, system_tokens = 1, prefix[first_system + 1] - prefix[first_system]
        if (
            ckpt is None
            or system + off + (n - kept_from) != row.n_messages
            or (system_tokens + ckpt + prefix[n] - prefix[kept_from] != row.estimator_tokens)
        ):
            self.failed = f"step {step}: context does not re-count"
            return None
        length = off + n - kept_from  # dialogue d = [checkpoint] + messages[kept_from:n]
        suffix = partial(
            _dialogue_suffix, length=length, checkpoint=ckpt, off=off, prefix=prefix, n=n, kept_from=kept_from
        )

        # First walk: the largest c with S(c) >= keep (S is non-increasing), else 0.
        j = bisect.bisect_right(prefix, prefix[n] - keep, kept_from, n + 1) - 1
        c1 = j - kept_from + off if j >= kept_from else 0
        # Snap back to a turn start; dialogue index 0 is never taken.
        b = 0
        if c1 >= off and c1 > 0:
            start = self.prev_start[kept_from + c1 - off] if kept_from + c1 - off < len(messages) else -1
            if start >= kept_from and start - kept_from + off > 0:
                b = start - kept_from + off
        if b > 0 and not all(isinstance(m, CompactedMessage) for m in messages[kept_from : kept_from + b - off]):
            # The engine found no window, so everything older than b must be checkpoints.
            self.failed = f"step {step}: walk finds a window the engine did not"
            return None
        first_after = kept_from + (b - off) + 1 if b >= off else kept_from
        nb = (min(self.next_start[first_after], n) - kept_from + off) if first_after <= n else length
        lo, hi = suffix(nb), (None if b == 0 else suffix(b))
        if b == 0:
            # The recorded reason tells the two ways of finding no turn start apart:
            # the first walk reaching the start (K > S(1)) or only the snap reaching it.
            lo, hi = (suffix(1), None) if keep > suffix(1) else (lo, suffix(1))
        if self.verify:
            _verify_pass(self.trace, step, keep, self.counter, b, lo, hi)
        return lo, hi


def _dialogue_suffix(
    c: int, *, length: int, checkpoint: int, off: int, prefix: list[int], n: int, kept_from: int
) -> int:
    """``S(c) = count(d[c:])`` for the dialogue ``d = [checkpoint] * off + messages[kept_from:n]``."""
    if c >= length:
        return 0
    return (checkpoint if c == 0 and off else 0) + prefix[n] - prefix[kept_from + max(c - off, 0)]


def _verify_pass(trace: Trace, step: int, keep: int, counter: TokenCounter, b: int, lo: int, hi: int | None) -> None:
    """Re-derive one no-window pass the slow way (rebuilt context, the engine's walk)."""
    from ..replay.explain import RECENT_COVERS_ALL, window_skip_reason

    context = trace.context_at(step)
    dialogue = [m for m in context if not isinstance(m, SystemMessage)]
    walked = walk_cutoff(dialogue, keep_recent_tokens=keep, count_tokens=counter)[1]
    sums = _suffix_sums(dialogue, counter)
    slow_lo, slow_hi = _keep_interval(dialogue, walked, sums)
    if walked == 0:
        covers = window_skip_reason(context, keep_recent_tokens=keep, count_tokens=counter) == RECENT_COVERS_ALL
        slow_lo, slow_hi = (sums[1] if len(sums) > 1 else 0, None) if covers else (slow_lo, sums[1])
    engine = stock_window(context, keep, counter)
    if engine is not None or (walked, slow_lo, slow_hi) != (b, lo, hi):
        raise AssertionError(
            f"step {step}: fast region ({b}, {lo}, {hi}) != slow ({walked}, {slow_lo}, {slow_hi}); engine window "
            f"{engine is not None}"
        )


def derive(trace: Trace, max_tokens: int, keep_recent_tokens: int, where: Region | None = None) -> Trace:
    """The trace ``replay`` gives at another setting of ``trace``'s proven region.

    Raises :class:`SettingError` when ``where`` is given and does not contain the setting.
    """
    if where is not None and not where.contains(max_tokens, keep_recent_tokens):
        raise SettingError(f"max_tokens={max_tokens}, keep_recent_tokens={keep_recent_tokens} is outside {where}")
    steps = trace.steps.copy()
    steps["max_tokens"] = pd.array([max_tokens] * len(steps), dtype="Int64")
    steps["keep_recent_tokens"] = pd.array([keep_recent_tokens] * len(steps), dtype="Int64")
    steps["over_budget_after"] = pd.array((steps["context_tokens_after"] > max_tokens).tolist(), dtype="boolean")
    return Trace(
        conversation=trace.conversation,
        steps=steps,
        compactions=trace.compactions.copy(),
        settings=trace.settings.derive(trace.setting.with_limits(max_tokens, keep_recent_tokens)),
        engine_events=copy.deepcopy(trace.engine_events),
    )


def same_replay(a: Trace, b: Trace) -> list[str]:
    """Differences between two traces of one setting (empty when they are the same replay).

    Compares the step and compaction tables cell by cell (``cache_hit`` and ``latency_s``
    excepted: they say how this run got the summary, not what the engine did; with a warm
    summary cache ``latency_s`` is the cached call's and matches too), the engine's events, and the
    settings except the run's bookkeeping (``replay_seconds``, ``cache``, ``derived_from``).
    """
    problems = []
    if not a.steps.equals(b.steps):
        problems.append("steps differ")
    ca, cb = (t.compactions.drop(columns=list(SUMMARY_FETCH_COLUMNS)) for t in (a, b))
    if not ca.equals(cb):
        problems.append("compactions differ")
    if a.engine_events != b.engine_events:
        problems.append("engine events differ")
    sa, sb = (_decisive(t.settings) for t in (a, b))
    if sa != sb:
        differ = sorted(f.name for f in dataclasses.fields(TraceSettings) if getattr(sa, f.name) != getattr(sb, f.name))
        problems.append(f"settings differ: {differ}")
    return problems


def _decisive(settings: TraceSettings) -> TraceSettings:
    """Settings without the run's bookkeeping (how long it took, the cache, what it was derived from)."""
    return dataclasses.replace(settings, replay_seconds=None, cache=None, derived_from=None)
