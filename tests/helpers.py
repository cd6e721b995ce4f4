"""Small hand-made conversations and models shared by tests."""

from __future__ import annotations

import re

from zett_agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from zett_agent.model import (
    ModelEvent,
    ModelResponse,
    ModelUsage,
    RetryOptions,
    ToolCallDelta,
)

from zett_lab import Conversation
from zett_lab.replay.setting import TraceSettings
from zett_lab.replay.trace import Trace


def as_words(key: tuple[str, str], text: str) -> bool:
    """Whether ``text`` holds a path's or identifier's components in order as whole words, in any case,
    separated by ``.``, ``/``, ``\\`` or a space, or a keyed number's value standing alone on a line with its key
    as a word on that line or within ``KEY_LINES`` lines of it (a plain re-reading of what the anchor index calls
    shown as words: :class:`~zett_lab.measure.spellings.Words`). Give it one message's text: a key in another
    message is not beside the value."""
    from zett_lab.load.anchor_forms import NAME_TYPES, spellings
    from zett_lab.measure.spellings import KEY_LINES

    lowered = text.lower()
    if key[0] == "number" and (keyed := re.fullmatch(r"([a-z_][a-z0-9_]*) (\d+(?:\.\d+)?)", key[1].lower())):
        name, value = keyed.groups()
        lines = lowered.splitlines()
        return any(
            re.search(r"(?<![\w.])" + re.escape(value) + r"(?!\w|\.\d)", line)
            and any(
                name in re.findall(r"[a-z0-9_]+", near) for near in lines[max(0, at - KEY_LINES) : at + KEY_LINES + 1]
            )
            for at, line in enumerate(lines)
        )
    if key[0] not in NAME_TYPES:
        return False
    parts = spellings(key).canonical.removeprefix("name:").split("/")
    separated = r"[./\\ ]".join(map(re.escape, parts))
    return bool(re.search(r"(?<![a-z0-9_])" + separated + r"(?![a-z0-9_])", lowered))


def span_trace(conversation: Conversation, spans: list[tuple[int, int, int]]) -> Trace:
    """One applied compaction per ``(span_start, span_end, n_recorded)``, each with a summary holding no anchor:
    every span anchor is lost, so ``needed_later`` is ``lost_but_needed``."""
    rows = [
        {
            "compaction_id": k,
            "conversation_id": conversation.id,
            "step": k,
            "turn": 0,
            "trigger": "auto",
            "span_start": start,
            "span_end": end,
            "n_recorded": n_recorded,
            "older_messages": end - start,
            "older_tokens": None,
            "recent_messages": n_recorded - end,
            "recent_tokens": None,
            "summary_tokens": 10,
            "applied": True,
            "skip_reason": None,
            "summary_text": "(summary)",
            "summarizer": "labels",
        }
        for k, (start, end, n_recorded) in enumerate(spans)
    ]
    return Trace.from_rows(
        conversation, [], rows, TraceSettings(setting=None, summarizer="labels", counter="o200k"), []
    )


def coding_conversation(
    turns: int = 6, tools_per_turn: int = 2, output_lines: int = 100, cid: str = "hand-made"
) -> Conversation:
    """A multi-turn coding session: each turn reads files (one failing) and answers."""
    messages = [SystemMessage(content="You are a coding agent working in /srv/app.")]
    for t in range(turns):
        messages.append(
            UserMessage(content=f"Turn {t}: please fix module_{t}.py and never touch migrations/. " + "context " * 40)
        )
        for k in range(tools_per_turn):
            call_id = f"call-{t}-{k}"
            messages.append(
                AssistantMessage(
                    content="",
                    tool_calls=(ToolCall(id=call_id, name="read_file", arguments={"path": f"src/module_{t}_{k}.py"}),),
                )
            )
            messages.append(
                ToolMessage(
                    tool_call_id=call_id,
                    name="read_file",
                    content=f"def f_{t}_{k}():\n" + "    pass\n" * output_lines,
                    success=k == 0,
                )
            )
        messages.append(AssistantMessage(content=f"Fixed module_{t}.py; tests pass."))
    return Conversation(id=cid, messages=messages)


class CountingSummarizer:
    """Deterministic summary model: says how many messages it summarized."""

    retry = RetryOptions(max_retries=0)
    identity = "counting-summarizer"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request):
        self.calls += 1
        text = f"Summary of {len(request.messages) - 2} messages."
        yield ModelEvent.text(text)
        yield ModelEvent.completed(
            ModelResponse(AssistantMessage(content=text), usage=ModelUsage(input_tokens=50, output_tokens=7))
        )


class BadSummarizer:
    """A summary model that answers with nothing, a tool call, or a huge text."""

    retry = RetryOptions(max_retries=0)

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.identity = f"bad-summarizer({mode})"

    async def stream(self, request):
        if self.mode == "empty":
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="   ")))
        elif self.mode == "tool_call":
            yield ModelEvent.tool_call(ToolCallDelta(index=0, id_delta="x", name_delta="bash", arguments_delta="{}"))
            yield ModelEvent.completed(
                ModelResponse(AssistantMessage(content="", tool_calls=(ToolCall(id="x", name="bash"),)))
            )
        elif self.mode == "huge":
            yield ModelEvent.completed(ModelResponse(AssistantMessage(content="very long summary " * 5000)))
        else:
            raise RuntimeError("provider exploded")


class ScriptedAgentModel:
    """A deterministic primary model: ``steps`` tool calls to ``read`` (one per step), then an answer.

    Reports usage like a provider (``input_tokens`` = the engine's count of the request, plus
    ``overhead``), and keeps every context it was sent in :attr:`contexts`.
    """

    retry = RetryOptions(max_retries=0)

    def __init__(self, steps: int, *, overhead: int = 0, usage: bool = True) -> None:
        self.steps = steps
        self.overhead = overhead
        self.usage = usage
        self.calls = 0
        self.contexts: list[list] = []

    async def stream(self, request):
        from zett_agent.extensions.compaction import CompactionExtension

        self.contexts.append(list(request.messages))
        self.calls += 1
        previous_user = [m for m in request.messages if type(m) is UserMessage]
        turn = previous_user[-1].content if previous_user else ""
        if self.calls % (self.steps + 1):
            call = ToolCall(id=f"call-{self.calls}", name="read", arguments={"path": f"src/file_{self.calls}.py"})
            message = AssistantMessage(content="", tool_calls=(call,))
        else:
            message = AssistantMessage(content=f"Done with: {turn[:40]}")
        usage = ModelUsage()
        if self.usage:
            usage = ModelUsage(
                input_tokens=CompactionExtension._count_tokens(request.messages) + self.overhead,
                output_tokens=CompactionExtension._count_tokens([message]),
            )
        yield ModelEvent.completed(ModelResponse(message, usage=usage))


async def read_tool(path: str = "") -> str:
    """The ``read`` tool of :class:`ScriptedAgentModel`: a long, deterministic file listing."""
    return f"# {path}\n" + "".join(f"line {n} of {path}: value_{n} = compute({n})\n" for n in range(60))


def read_agent_tool():
    from zett_agent.tools.base import AgentTool

    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    return AgentTool(name="read", description="Read a file.", parameters=parameters, handler=read_tool, guidelines=())
