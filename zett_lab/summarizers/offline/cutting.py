"""Offline summarizers that keep the transcript in order and cut it: :class:`Truncate` and :class:`Mask`."""

from __future__ import annotations

import math

from zett_agent.messages import AnyMessage

from ...errors import SettingError
from ...tokens import count_text_tokens
from ..transcript import segments
from .base import CLASS_DEFAULT, Budget, OfflineSummarizer, cut_prefix, cut_suffix


def head_tail(text: str, limit: int, head: float = 0.5) -> str:
    """Keep the head and the tail of ``text`` within ``limit`` tokens, marking the cut.

    Whole lines are kept where possible; the line at each cut is shortened by characters
    to use the remaining budget. The marker says how many tokens were left out.
    """
    total = count_text_tokens(text)
    if total <= limit:
        return text
    lines = text.split("\n")
    costs: list[int | None] = [None] * len(lines)

    def cost(i: int) -> int:
        """Line ``i``'s count with its line break, counted when a cut first reaches it (the middle never is)."""
        held = costs[i]
        if held is None:
            held = costs[i] = count_text_tokens(lines[i] + "\n")
        return held

    marker_cost = count_text_tokens(f"\n[... {total:,} tokens omitted ...]\n")
    room = limit - marker_cost
    if room <= 0:
        return cut_prefix(text, limit)
    head_room = math.floor(room * head)
    for _ in range(8):
        tail_room = room - head_room
        head_lines, used = [], 0
        i = 0
        while i < len(lines) and used + cost(i) <= head_room:
            head_lines.append(lines[i])
            used += cost(i)
            i += 1
        if i < len(lines) and head_room - used > 8:
            partial = cut_prefix(lines[i], head_room - used - 1)
            if partial:
                head_lines.append(partial + "…")
        tail_lines: list[str] = []  # from the last line back
        used_tail = 0
        j = len(lines) - 1
        while j > i and used_tail + cost(j) <= tail_room:
            tail_lines.append(lines[j])
            used_tail += cost(j)
            j -= 1
        if j > i and tail_room - used_tail > 8:
            partial = cut_suffix(lines[j], tail_room - used_tail - 1)
            if partial:
                tail_lines.append("…" + partial)
        head_text = "\n".join(head_lines)
        tail_text = "\n".join(reversed(tail_lines))
        omitted = max(0, total - count_text_tokens(head_text) - count_text_tokens(tail_text))
        pieces = [p for p in (head_text, f"[... {omitted:,} tokens omitted ...]", tail_text) if p]
        result = "\n".join(pieces)
        excess = count_text_tokens(result) - limit
        if excess <= 0:
            return result
        room -= excess + 2
        head_room = math.floor(room * head)
        if room <= 0:
            break
    return cut_prefix(text, limit)


# -- truncate ---------------------------------------------------------------------------------------


class Truncate(OfflineSummarizer):
    """Keep the head and the tail of the span's transcript within the budget.

    Keeps: the first ``head`` share of the budget from the start of the transcript (usually the
    task statement), the rest from the end (the latest state), whole lines where possible,
    and a marker ``[... N tokens omitted ...]`` in between. Everything in the middle is lost.
    """

    name = "truncate"

    def __init__(self, budget: Budget = CLASS_DEFAULT, *, head: float = 0.5) -> None:
        super().__init__(budget)
        if isinstance(head, bool) or not isinstance(head, (int, float)) or not 0 <= head <= 1:
            raise SettingError(f"truncate: head must be a share in [0, 1], got {head!r}")
        self.head = float(head)

    def _options(self) -> dict[str, object]:
        return {} if self.head == 0.5 else {"head": self.head}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        text = "\n".join(s.render() for s in segments(messages))
        return text if limit is None else head_tail(text, limit, self.head)


# -- mask -------------------------------------------------------------------------------------------


def omitted_output(tokens: int) -> str:
    """The placeholder observation masking puts where a tool output of ``tokens`` tokens was."""
    return f"[tool output omitted: {tokens:,} {'token' if tokens == 1 else 'tokens'}]"


class Mask(OfflineSummarizer):
    """Observation masking (JetBrains, "The Complexity Trap", arXiv 2508.21433).

    Keeps: the whole transcript (user and agent messages, assistant text and reasoning, every
    tool call with its arguments, earlier summaries) with every tool output replaced by
    ``[tool output omitted: 1,234 tokens]`` (the engine's count of that tool message). Tool
    outputs of at most ``keep_output_tokens`` tokens are kept verbatim. With no budget
    (the default) nothing else is cut, so a span with few tool outputs gives a "summary" that
    is not smaller, which the engine discards; with a budget, the masked transcript is cut to
    its head and tail like :class:`Truncate`.
    """

    name = "mask"
    default_budget = None
    allows_unbounded = True

    def __init__(self, budget: Budget = CLASS_DEFAULT, *, keep_output_tokens: int = 0) -> None:
        super().__init__(budget)
        if isinstance(keep_output_tokens, bool) or not isinstance(keep_output_tokens, int) or keep_output_tokens < 0:
            raise SettingError(f"mask: keep_output_tokens must be a non-negative int, got {keep_output_tokens!r}")
        self.keep_output_tokens = keep_output_tokens

    def _options(self) -> dict[str, object]:
        return {"keep_output_tokens": self.keep_output_tokens} if self.keep_output_tokens else {}

    def _summarize(self, messages: list[AnyMessage], limit: int | None) -> str:
        lines = []
        for segment in segments(messages):
            if segment.kind == "tool_result" and segment.tokens > self.keep_output_tokens:
                lines.append(f"[{segment.label}] {omitted_output(segment.tokens)}")
            else:
                lines.append(segment.render())
        text = "\n".join(lines)
        return text if limit is None else head_tail(text, limit)
