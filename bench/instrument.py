"""Overhead of zett_lab.instrument on a live agent: the same run with and without instrumentation.

A zett-agent Agent replays the largest fixture live (a model that answers with the recorded
assistant messages and their recorded usage, tools that answer with the recorded results),
with the stock CompactionExtension as an application configures it (zett-agent's own counter,
an offline summary model), once plain, once through ``zett_lab.instrument`` writing a trace (one
write per step, the default) and once with ``fsync=True`` (every step also flushed to disk). Runs alternate; the medians give the overhead as a
share of the step time (wall and CPU time: the machine may be shared), and the runs' contexts
sent are checked to be identical.

Run: .venv/bin/python bench/instrument.py [runs] [max_tokens keep_recent_tokens]
"""

from __future__ import annotations

import asyncio
import copy
import statistics
import sys
import tempfile
import time
from collections import defaultdict, deque
from pathlib import Path

from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.messages import AssistantMessage, ToolMessage
from zett_agent.model import ModelEvent, ModelResponse, ModelUsage, RetryOptions
from zett_agent.tools.base import AgentTool, current_tool_call_id

import zett_lab
from zett_lab.tokens import engine_payload

ROOT = Path(__file__).resolve().parent.parent


class RecordedPlayer:
    """The primary model of the run: the recorded assistant messages, in order, with their usage."""

    retry = RetryOptions(max_retries=0)

    def __init__(self, conversation: zett_lab.Conversation) -> None:
        self.replies = deque((i, m) for i, m in enumerate(conversation.messages) if isinstance(m, AssistantMessage))
        self.usage = conversation.usage
        self.contexts: list[list] = []

    async def stream(self, request):
        self.contexts.append([engine_payload(m) for m in request.messages])
        index, message = self.replies.popleft()
        yield ModelEvent.completed(ModelResponse(copy.deepcopy(message), usage=self.usage.get(index, ModelUsage())))


def recorded_tools(conversation: zett_lab.Conversation) -> list[AgentTool]:
    results: dict[str, deque] = defaultdict(deque)
    names = set()
    for message in conversation.messages:
        if isinstance(message, ToolMessage):
            results[message.tool_call_id].append(message)
        elif isinstance(message, AssistantMessage):
            names.update(call.name for call in message.tool_calls)

    async def answer(**_):
        return copy.deepcopy(results[current_tool_call_id()].popleft().content)

    return [
        AgentTool(name=n, description=n, parameters={"type": "object"}, handler=answer, guidelines=())
        for n in sorted(names)
    ]


async def run(
    conversation: zett_lab.Conversation, extension: CompactionExtension
) -> tuple[float, float, RecordedPlayer]:
    player = RecordedPlayer(conversation)
    config = AgentRunConfig(session_id=conversation.id)
    agent = await Agent.create(
        player,
        config=config,
        system_prompt=conversation.system_prompt or "",
        tools=recorded_tools(conversation),
        extensions=[InMemoryMessageAccumulator(), extension],
        parallel_tool_call=False,
        max_iterations=10_000,
    )
    started, cpu = time.perf_counter(), time.process_time()
    for turn in conversation.turns:
        async for _ in agent.stream(copy.deepcopy(conversation.messages[turn.start]), config=config):
            pass
    return time.perf_counter() - started, time.process_time() - cpu, player


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    max_tokens, keep = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) == 4 else (30_000, 8_000)
    conversation = max(zett_lab.load_all(ROOT / "fixtures"), key=lambda c: len(c.messages))
    summary_model = zett_lab.summarizer("anchors:0.1")

    def engine() -> CompactionExtension:
        return CompactionExtension(summary_model, max_tokens=max_tokens, keep_recent_tokens=keep)

    names = ("uninstrumented", "instrumented", "instrumented, fsync=True")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(conversation, engine()))  # warm imports, the tokenizer and the summarizer
        for n in range(runs):
            seconds, cpu_seconds, plain = asyncio.run(run(conversation, engine()))
            times["uninstrumented"].append(seconds)
            cpu["uninstrumented"].append(cpu_seconds)
            for name, fsync in (("instrumented", False), ("instrumented, fsync=True", True)):
                path = Path(folder) / f"trace-{n}-{fsync}.jsonl"
                seconds, cpu_seconds, live = asyncio.run(
                    run(conversation, zett_lab.instrument(engine(), path, fsync=fsync))
                )
                times[name].append(seconds)
                cpu[name].append(cpu_seconds)
                assert live.contexts == plain.contexts, "the instrumented run sent other contexts"
        trace = zett_lab.Trace.load(path)
    steps = len(trace.steps)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    base, cpu_base = medians["uninstrumented"], cpu_medians["uninstrumented"]
    applied = int(trace.compactions["applied"].sum())
    print(f"conversation: {conversation.id} ({len(conversation.messages)} messages), ", end="")
    print(f"max_tokens={max_tokens} keep_recent_tokens={keep}")
    print(f"steps per run: {steps}; compactions applied: {applied}; runs: {runs} each, alternating")
    print("identical contexts sent: true")
    for name, median in medians.items():
        share, per_step = 100 * (median / base - 1), 1000 * (median - base) / steps
        extra = (
            ""
            if name == "uninstrumented"
            else (f"; overhead {share:+.1f}% of the step time ({per_step:+.2f} ms per step)")
        )
        print(f"{name}: median {median:.3f} s ({1000 * median / steps:.2f} ms per step){extra}")
    for name in names[1:]:
        print(
            f"{name}, CPU time: overhead {100 * (cpu_medians[name] / cpu_base - 1):+.1f}% "
            f"({1000 * (cpu_medians[name] - cpu_base) / steps:+.2f} ms per step)"
        )


if __name__ == "__main__":
    main()
