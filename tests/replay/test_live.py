"""Live instrumentation: the same trace as a replay, recorded while a real zett-agent Agent runs."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from zett_agent.agent import Agent, AgentRunConfig
from zett_agent.events import AgentEventType
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.memory import InMemoryMessageAccumulator
from zett_agent.extensions.sqlite import SQLiteSessionExtension
from zett_agent.messages import UserMessage

import zett_lab
from tests.helpers import BadSummarizer, CountingSummarizer, ScriptedAgentModel, read_agent_tool
from tests.loopback import LoopbackServer
from zett_lab.replay.live_reader import live_sessions
from zett_lab.replay.policies import SplitTurnCompaction
from zett_lab.replay.schema import COMPACTION_COLUMNS, LIVE_COMPACTION_COLUMNS, LIVE_STEP_COLUMNS, STEP_COLUMNS
from zett_lab.tokens import engine_payload

ROOT = Path(__file__).resolve().parents[2]
LIMITS = {"max_tokens": 2_500, "keep_recent_tokens": 700}
#: What the engine decided at each step: equal between a live run and its replay.
DECISIONS = [
    "step",
    "turn",
    "n_recorded",
    "estimate",
    "estimate_source",
    "triggered",
    "skip_reason",
    "cutoff_index",
    "applied",
    "context_tokens_after",
    "over_budget_after",
    "kept_from",
    "checkpoint_id",
]


async def run_agent(extension, *, turns=3, steps=4, history=None, model=None):
    """Drive an Agent (session ``live``) with a deterministic primary model; return its model, events and errors."""
    model = model or ScriptedAgentModel(steps)
    config = AgentRunConfig(session_id="live")
    agent = await Agent.create(
        model,
        config=config,
        system_prompt="You read files and report.",
        tools=[read_agent_tool()],
        extensions=[history or InMemoryMessageAccumulator(), extension],
        parallel_tool_call=False,
        max_iterations=1_000,
    )
    events: dict[str, list] = {"live": []}
    errors: list[BaseException] = []
    try:
        for turn in range(turns):
            try:
                async for event in agent.stream(
                    UserMessage(content=f"live turn {turn}: read the files."), config=config
                ):
                    events["live"].append(event)
            except Exception as error:  # noqa: BLE001 - compared between runs
                errors.append(error)
    finally:
        if history is not None:
            await history.close()
    return model, events, errors


def _observable(events: list) -> list:
    """What a caller sees of compaction: the engine's events with their fields."""
    out = []
    for event in events:
        if event.type.value.startswith("compaction"):
            compaction = event.compaction
            out.append(
                (
                    event.type,
                    event.applied,
                    compaction and (compaction.compressed_to, compaction.kept_to, compaction.summary),
                )
            )
    return out


@pytest.mark.parametrize("engine", [CompactionExtension, SplitTurnCompaction])
def test_an_instrumented_extension_decides_exactly_as_the_original(tmp_path, engine):
    plain_model, plain_events, _ = asyncio.run(run_agent(engine(CountingSummarizer(), **LIMITS)))
    original = engine(CountingSummarizer(), **LIMITS)
    live_model, live_events, _ = asyncio.run(run_agent(zett_lab.instrument(original, tmp_path / "trace.jsonl")))
    assert type(original) is engine  # the user's extension is left as it was
    assert any(e.applied for e in plain_events["live"] if e.type is AgentEventType.COMPACTION_COMPLETED)
    assert _observable(live_events["live"]) == _observable(plain_events["live"])
    assert [[engine_payload(m) for m in c] for c in live_model.contexts] == [
        [engine_payload(m) for m in c] for c in plain_model.contexts
    ]
    trace = zett_lab.Trace.load(tmp_path / "trace.jsonl")
    assert len(trace.steps) == len(live_model.contexts)
    assert trace.setting.engine_name.endswith(engine.__name__) and trace.settings.live is not None


def test_a_failing_summary_fails_the_request_as_it_would_uninstrumented_and_is_recorded(tmp_path):
    _, _, plain_errors = asyncio.run(run_agent(CompactionExtension(BadSummarizer("empty"), **LIMITS), turns=2))
    _, _, live_errors = asyncio.run(
        run_agent(
            zett_lab.instrument(CompactionExtension(BadSummarizer("empty"), **LIMITS), tmp_path / "t.jsonl"), turns=2
        )
    )
    assert plain_errors and [repr(e) for e in live_errors] == [repr(e) for e in plain_errors]
    trace = zett_lab.Trace.load(tmp_path / "t.jsonl")
    failed = trace.compactions[trace.compactions["skip_reason"] == "summary failed"]
    assert len(failed) == len(plain_errors) and (failed["error_kind"] == "empty_summary").all()


def test_a_live_trace_has_the_replay_columns_real_usage_and_summary_calls(tmp_path):
    model, _, _ = asyncio.run(
        run_agent(zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), tmp_path / "t.jsonl"))
    )
    trace = zett_lab.Trace.load(tmp_path / "t.jsonl", session="live")
    assert list(trace.steps.columns) == STEP_COLUMNS + LIVE_STEP_COLUMNS
    assert list(trace.compactions.columns) == COMPACTION_COLUMNS + LIVE_COMPACTION_COLUMNS
    reported = [CompactionExtension._count_tokens(c) for c in model.contexts]  # the scripted provider's input usage
    assert trace.steps["usage_input_tokens"].tolist() == reported
    assert (trace.steps["context_tokens_after"] == trace.steps["usage_input_tokens"]).all()
    assert trace.steps["model_latency_s"].notna().all() and trace.steps["request_id"].nunique() == 3
    applied = trace.compactions[trace.compactions["applied"]]
    assert len(applied) >= 1 and applied["summary_text"].str.fullmatch(r"Summary of \d+ messages\.").all()
    assert (applied["summary_input_tokens"] == 50).all() and applied["latency_s"].notna().all()
    assert (trace.steps["estimate_source"] == "usage").any()
    assert zett_lab.measure(trace).conversation["compactions"].iloc[0] == len(applied)
    from zett_lab.measure.cost import add_costs

    _, priced = add_costs(trace.steps, trace.compactions, primary_model="gpt-4o-mini", summary_model="gpt-4o-mini")
    calls = priced[priced["applied"]]
    assert (calls["summary_call_input_tokens"] == 50).all() and not calls["summary_tokens_estimated"].any()
    assert (calls["summary_cost_usd"] > 0).all()  # money from the provider's real usage of each summary call


#: Columns that time a run (step and summary latency): the only ones a concurrent run may differ in from a run alone.
STEP_TIMINGS, COMPACTION_TIMINGS = ["model_latency_s"], ["latency_s"]


async def serve_sessions(path, sessions, *, turns=3, compact_after=1, intrude=None):
    """One shared Agent serving ``sessions`` concurrently, each request with its own request id.

    Every session runs ``turns`` requests in order and asks for a manual compaction (``Agent.compact``)
    after request ``compact_after``. With ``intrude``, a second request for that session is started while
    its first one is running; zett-agent refuses it, and the refusal is returned.
    """
    model = _PerSessionModel(4)
    agent = await Agent.create(
        model,
        config=AgentRunConfig(session_id=sessions[0]),
        system_prompt="You read files and report.",
        tools=[read_agent_tool()],
        extensions=[
            InMemoryMessageAccumulator(),
            zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), path),
        ],
        parallel_tool_call=False,
        max_iterations=1_000,
    )
    running = asyncio.Event()
    refused: list[BaseException] = []

    async def session(session_id: str) -> None:
        for turn in range(turns):
            config = AgentRunConfig(session_id=session_id, request_id=f"{session_id}-request-{turn}")
            async for event in agent.stream(
                UserMessage(content=f"{session_id} turn {turn}: read the files."), config=config
            ):
                if session_id == intrude and event.type is AgentEventType.MODEL_STARTED:
                    running.set()
            if turn == compact_after:
                async for _ in agent.compact(
                    config=AgentRunConfig(session_id=session_id, request_id=f"{session_id}-compact")
                ):
                    pass

    async def intruder() -> None:
        await running.wait()
        config = AgentRunConfig(session_id=intrude, request_id=f"{intrude}-intruder")
        try:
            async for _ in agent.stream(UserMessage(content=f"{intrude} intruder: read the files."), config=config):
                pass
        except Exception as error:  # noqa: BLE001 - the refusal is what the test looks at
            refused.append(error)

    await asyncio.gather(*(session(s) for s in sessions), *([intruder()] if intrude else []))
    return refused


def test_concurrent_requests_of_several_sessions_on_one_agent_are_kept_apart_exactly(tmp_path):
    sessions = ("alpha", "beta", "gamma")
    shared = tmp_path / "shared.jsonl"
    refused = asyncio.run(serve_sessions(shared, sessions, intrude="beta"))
    # zett-agent runs one request per session at a time: a second one for a busy session is refused.
    assert [type(e).__name__ for e in refused] == ["AgentProtocolError"]
    assert "cannot start a new request" in str(refused[0])
    assert b"intruder" not in shared.read_bytes()  # the refused request left nothing in the trace
    assert sorted(live_sessions(shared)) == sorted(sessions)
    order = [r["session_id"] for r in _records(shared) if r["record"] == "step"]
    assert set(order[: len(order) // 3]) == set(sessions)  # the sessions' steps were written interleaved

    for session in sessions:
        trace = zett_lab.Trace.load(shared, session=session)
        alone_path = tmp_path / f"{session}-alone.jsonl"
        asyncio.run(serve_sessions(alone_path, (session,)))
        alone = zett_lab.Trace.load(alone_path)
        # Read back exactly as the session would have been recorded alone: every row, every message.
        pd.testing.assert_frame_equal(trace.steps.drop(columns=STEP_TIMINGS), alone.steps.drop(columns=STEP_TIMINGS))
        pd.testing.assert_frame_equal(
            trace.compactions.drop(columns=COMPACTION_TIMINGS), alone.compactions.drop(columns=COMPACTION_TIMINGS)
        )
        assert [engine_payload(m) for m in trace.conversation.messages] == [
            engine_payload(m) for m in alone.conversation.messages
        ]
        assert trace.engine_events == alone.engine_events
        # Each request's steps together, in request order, numbered without gaps; its session's own turns.
        steps = trace.steps
        assert steps["session_id"].eq(session).all() and steps["step"].tolist() == list(range(len(steps)))
        requests = steps["request_id"].tolist()
        assert list(dict.fromkeys(requests)) == [f"{session}-request-{t}" for t in range(3)]
        assert requests == sorted(requests) and steps["turn"].tolist() == [int(r[-1]) for r in requests]
        manual = trace.compactions[trace.compactions["trigger"] == "manual"]
        assert manual["request_id"].tolist() == [f"{session}-compact"]
        assert (manual["step"] == steps.loc[steps["turn"] == 2, "step"].min()).all()  # between requests 1 and 2
        assert (trace.compactions["session_id"] == session).all()
        users = [m.content for m in trace.conversation.messages if type(m) is UserMessage]
        assert users == [f"{session} turn {t}: read the files." for t in range(3)]
    with pytest.raises(zett_lab.InputError, match="holds 3 sessions"):
        zett_lab.Trace.load(shared)


def _records(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_bytes().splitlines()]


class _PerSessionModel(ScriptedAgentModel):
    """The scripted model with one call counter per session, so concurrent sessions get the same script."""

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self._per_session: dict[str, ScriptedAgentModel] = {}

    async def stream(self, request):
        session = next(str(m.content).split()[0] for m in request.messages if type(m) is UserMessage)
        inner = self._per_session.setdefault(session, ScriptedAgentModel(self.steps))
        await asyncio.sleep(0.001)  # let the other sessions' requests interleave
        async for event in inner.stream(request):
            yield event


def test_a_live_run_with_zett_storage_replays_to_identical_decisions(tmp_path):
    database, path = tmp_path / "sessions.sqlite", tmp_path / "live.jsonl"
    with LoopbackServer() as server:
        spec = f"openai-compatible:fake-summarizer@{server.openai_url}"
        extension = zett_lab.instrument(CompactionExtension(zett_lab.summarizer(spec), **LIMITS), path)
        asyncio.run(run_agent(extension, turns=4, steps=4, history=SQLiteSessionExtension(database)))
        live = zett_lab.Trace.load(path)
        calls = server.count("/v1/chat/completions")
        conversation = zett_lab.load(database, session="live")
        replayed = zett_lab.replay(conversation, **LIMITS, summarizer=spec, usage="recorded", cache=False)
    assert calls == len(live.compactions) >= 2
    assert [engine_payload(m) for m in live.conversation.messages] == [engine_payload(m) for m in conversation.messages]
    assert replayed.steps[DECISIONS].equals(live.steps[DECISIONS])
    columns = [
        "step",
        "span_start",
        "span_end",
        "older_tokens",
        "summary_tokens",
        "applied",
        "skip_reason",
        "summary_text",
    ]
    assert replayed.compactions[columns].equals(live.compactions[columns])
    assert (live.compactions["summary_input_tokens"] > 0).all()  # the provider's real usage of each summary call
    stored = conversation.metadata["sequences"]
    recorded = live.conversation.metadata["sequences"]
    assert [s for s in recorded if s is not None] and all(s is None or s == stored[i] for i, s in enumerate(recorded))
    through = live.compactions.loc[live.compactions["applied"], "compacted_through_sequence"]
    assert through.notna().all() and through.is_monotonic_increasing


@pytest.mark.parametrize("fsync", [False, True])
def test_every_step_is_one_write_and_fsync_is_the_callers_choice(tmp_path, monkeypatch, fsync):
    from zett_lab.replay import live

    calls: list[str] = []
    real_write, real_fsync = os.write, os.fsync
    path = tmp_path / "t.jsonl"
    extension = zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), path, fsync=fsync)
    fd = extension._live.log._fd
    monkeypatch.setattr(
        live.os, "write", lambda f, data: (calls.append("write") if f == fd else None, real_write(f, data))[1]
    )
    monkeypatch.setattr(live.os, "fsync", lambda f: (calls.append("fsync") if f == fd else None, real_fsync(f))[1])
    model, _, _ = asyncio.run(run_agent(extension))
    steps = len(model.contexts)
    assert steps == len(zett_lab.Trace.load(path).steps) > 0
    assert calls == ["write", "fsync"] * steps if fsync else calls == ["write"] * steps


def test_bad_targets_are_refused_and_never_touched(tmp_path):
    with pytest.raises(zett_lab.SettingError, match="configured CompactionExtension"):
        zett_lab.instrument(CountingSummarizer(), tmp_path / "t.jsonl")
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"mine": 1}\n')
    with pytest.raises(zett_lab.InputError, match="not a zett_lab live trace"):
        zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), notes)
    assert notes.read_text() == '{"mine": 1}\n'
    with pytest.raises(zett_lab.InputError, match="does not exist"):
        zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), tmp_path / "missing" / "t.jsonl")


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {root!r})
    from zett_agent.extensions.compaction import CompactionExtension
    from zett_agent.extensions.sqlite import SQLiteSessionExtension
    import zett_lab
    from tests.helpers import CountingSummarizer, ScriptedAgentModel
    from tests.replay.test_live import LIMITS, run_agent

    class Slow(ScriptedAgentModel):
        async def stream(self, request):
            await asyncio.sleep(0.02)
            async for event in super().stream(request):
                yield event

    extension = zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), sys.argv[1])
    history = SQLiteSessionExtension(sys.argv[2])
    asyncio.run(run_agent(extension, turns=int(sys.argv[3]), steps=4, model=Slow(4), history=history))
    """
)


def _steps_written(path: Path) -> int:
    return path.read_bytes().count(b'"record":"step"') if path.exists() else 0


def test_a_killed_agent_loses_at_most_the_step_in_flight_and_a_restart_continues_the_trace(tmp_path):
    path, database = tmp_path / "live.jsonl", tmp_path / "sessions.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = WRITER.format(root=str(ROOT))
    process = subprocess.Popen([sys.executable, "-c", script, str(path), str(database), "200"], env=env)
    try:
        deadline = time.monotonic() + 120
        while _steps_written(path) < 12 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        during = zett_lab.Trace.load(path)  # read while the agent is still writing
        assert len(during.steps) >= 12
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    after = zett_lab.Trace.load(path)
    assert len(after.steps) == _steps_written(path) >= len(during.steps)
    assert after.steps["step"].tolist() == list(range(len(after.steps)))
    assert (after.steps["n_recorded"] <= len(after.conversation.messages)).all()

    restarted = subprocess.run([sys.executable, "-c", script, str(path), str(database), "1"], env=env, timeout=120)
    assert restarted.returncode == 0
    resumed = zett_lab.Trace.load(path)
    assert len(resumed.settings.live.runs) == 2 and not resumed.settings.live.in_flight
    assert resumed.steps["step"].tolist() == list(range(len(resumed.steps))) and len(resumed.steps) > len(after.steps)
    assert resumed.steps["turn"].iloc[-1] == after.steps["turn"].iloc[-1] + 1


def test_the_explorer_draws_the_live_decisions_beside_the_what_if_replay(tmp_path):
    from zett_lab.show.widgets import Explorer

    path = tmp_path / "live.jsonl"
    asyncio.run(run_agent(zett_lab.instrument(CompactionExtension(CountingSummarizer(), **LIMITS), path), turns=3))
    live = zett_lab.Trace.load(path)
    explorer = Explorer(None, summarizers=[CountingSummarizer()], live=[live])
    assert explorer.live_trace is live and explorer.settings()["usage"] == "recorded"
    assert (explorer.max_tokens.value, explorer.keep_recent_tokens.value) == (
        LIMITS["max_tokens"],
        LIMITS["keep_recent_tokens"],
    )
    assert explorer.trace.steps[DECISIONS].equals(live.steps[DECISIONS])  # at the live setting: the live decisions
    titles = [axis.get_title(loc="left") for axis in explorer.figure.axes]
    assert titles[0].startswith("live: CompactionExtension, max_tokens=2,500") and titles[1].startswith("what-if")
    assert "<b>live</b>" in explorer.summary_area.value
    explorer.set(max_tokens=6_000)
    assert explorer.live_trace is live and explorer.trace.setting.max_tokens == 6_000
    assert explorer.trace.summary()["compactions_applied"] < live.summary()["compactions_applied"]
    with pytest.raises(zett_lab.SettingError, match="live= takes traces a live agent recorded"):
        Explorer(None, live=[zett_lab.replay(live.conversation, **LIMITS)])
