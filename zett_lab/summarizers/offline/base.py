"""What every offline summarizer shares: budgets, the base class (a zett-agent model), text cut to a budget."""

from __future__ import annotations

import math
import numbers
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

from zett_agent.messages import AnyMessage, AssistantMessage
from zett_agent.model import ModelEvent, ModelRequest, ModelResponse, RetryOptions

from ...collector import collector_paused
from ...errors import SettingError
from ...tokens import count_text_tokens, count_tokens
from ..transcript import segments, span_of

Budget = int | float | None

#: Default of ``budget=``: the summarizer class's own :attr:`~OfflineSummarizer.default_budget`.
CLASS_DEFAULT: Any = object()


def parse_budget(value: object, *, allow_none: bool = False, owner: str = "summarizer") -> Budget:
    """Validate a budget: tokens (int > 0) or a share of the span (float in (0, 1]).

    Strings are accepted as written in a spec (``"2000"``, ``"0.1"``). Raises
    :class:`~zett_lab.errors.SettingError` for anything else.
    """
    if value is None:
        if allow_none:
            return None
        raise SettingError(f"{owner}: a budget is required (tokens as an int, or a share of the span in (0, 1])")
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            value = float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            raise SettingError(
                f"{owner}: budget {value!r} is not a number (tokens as an int, or a share of the span in (0, 1])"
            ) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SettingError(f"{owner}: budget must be an int (tokens) or a float in (0, 1], not {value!r}")
    # numpy scalars (budgets taken from a grid) count as the Python numbers they are.
    value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(value, float):
        if not math.isfinite(value) or value <= 0 or value > 1:
            raise SettingError(
                f"{owner}: budget {value!r} must be a share of the span in (0, 1] (use an int for a number of tokens)"
            )
        return float(value)
    if value <= 0:
        raise SettingError(f"{owner}: budget must be positive, got {value}")
    return int(value)


def budget_tokens(budget: Budget, span_tokens: int) -> int | None:
    """The budget in tokens for a span of ``span_tokens`` (None: no limit)."""
    if budget is None:
        return None
    if isinstance(budget, float):
        return max(1, math.floor(budget * span_tokens))
    return budget


class OfflineSummarizer:
    """Base class: a deterministic summarizer usable as a zett-agent AgentModel.

    Subclasses implement :meth:`_summarize`. ``summarize(messages)`` is the synchronous entry
    point (handy in notebooks); ``stream(request)`` is what the engine calls.
    """

    #: Short name used in specs (``"truncate:0.1"``) and identities.
    name: ClassVar[str] = "offline"
    #: Budget used when none is given.
    default_budget: ClassVar[Budget] = 0.1
    #: Whether ``budget=None`` (no limit) is allowed.
    allows_unbounded: ClassVar[bool] = False
    #: Picks what to keep with the anchor extractor the anchor metrics count (:mod:`zett_lab.load.anchors`): on
    #: those metrics (``Metric.anchor_based``) it partly scores the metric against itself.
    selects_by_anchors: ClassVar[bool] = False
    #: Offline summarizers never fail transiently.
    retry = RetryOptions(max_retries=0)

    def __init__(self, budget: Budget = CLASS_DEFAULT) -> None:
        if budget is CLASS_DEFAULT:
            budget = self.default_budget
        self.budget = parse_budget(budget, allow_none=self.allows_unbounded, owner=self.name)

    # -- identity -------------------------------------------------------------------------------

    def _options(self) -> dict[str, object]:
        """Options besides the budget that change the output (shown in the identity)."""
        return {}

    @property
    def identity(self) -> str:
        """Stable description used as cache key and in traces, e.g. ``truncate(budget=0.1)``."""
        parts = [f"budget={self.budget!r}"]
        parts += [f"{key}={value!r}" for key, value in sorted(self._options().items())]
        return f"{self.name}({','.join(parts)})"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity}>"

    # -- summarizing ------------------------------------------------------------------------------

    def summarize(self, messages: Sequence[AnyMessage]) -> str:
        """Summarize a span of messages (no instructions, no closing request); never empty.

        The cyclic garbage collector is paused meanwhile: a summary of a long span makes hundreds of thousands of
        lines, tuples and dicts in no cycle, and the full collections they set off walk every object the replay
        holds (over a quarter of the CPU of a long session's cold anchors replays)."""
        messages = list(messages)
        with collector_paused():
            limit = budget_tokens(self.budget, count_tokens(messages))
            text = self._summarize(messages, limit).strip()
            if not text:
                text = _fallback(messages, limit)
        return text

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:  # pragma: no cover
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer one engine summary request: one text delta, then the terminal response."""
        text = self.summarize(span_of(request))
        yield ModelEvent.text(text)
        yield ModelEvent.completed(ModelResponse(AssistantMessage(content=text), finish_reason="stop"))


# -- shared helpers -----------------------------------------------------------------------------


def _fallback(messages: Sequence[AnyMessage], limit: int | None) -> str:
    """Something non-empty: the head of the transcript that fits, or a count of messages."""
    text = "\n".join(s.render() for s in segments(messages)).strip()
    if text and limit is not None:
        text = cut_prefix(text, limit)
    if not text.strip():
        text = f"[{len(messages)} messages with no text]"
    return text


def cut_prefix(text: str, limit: int) -> str:
    """The longest prefix of ``text`` with at most ``limit`` tokens (binary search on characters)."""
    if count_text_tokens(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_text_tokens(text[:middle]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def cut_suffix(text: str, limit: int) -> str:
    """The longest suffix of ``text`` with at most ``limit`` tokens."""
    if count_text_tokens(text) <= limit:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count_text_tokens(text[len(text) - middle :]) <= limit:
            low = middle
        else:
            high = middle - 1
    return text[len(text) - low :] if low else ""
