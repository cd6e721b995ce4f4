"""A live trace through kills at any point: real agent processes, real ``kill -9``, the database as the judge.

The agent stores its session in SQLite (``SQLiteSessionExtension``) and records its compactions with
``zett_lab.instrument``. After kills at random moments and a restart, the trace holds every message the
database holds, numbered as ``zett_lab.load`` numbers them, and every index in its rows agrees.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zett_lab
from tests.helpers import CountingSummarizer
from tests.replay.test_live import LIMITS
from zett_lab.errors import InputError, ZettLabWarning
from zett_lab.load.conversation import starts_turn
from zett_lab.tokens import engine_payload

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import asyncio, os, sys, time
    sys.path.insert(0, {root!r})
    from zett_agent.extensions.compaction import CompactionExtension
    from zett_agent.extensions.sqlite import SQLiteSessionExtension
    import zett_lab
    from tests.helpers import CountingSummarizer, ScriptedAgentModel
    from tests.replay.test_live import LIMITS, run_agent

    class Slow(ScriptedAgentModel):
        async def stream(self, request):
            await asyncio.sleep(0.01)
            async for event in super().stream(request):
                yield event

    class SlowSummarizer(CountingSummarizer):
        '''Takes its time: a kill often lands while a summary is in flight; says so in a marker file.'''

        async def stream(self, request):
            marker = os.environ.get("SUMMARY_MARKER")
            if marker:
                with open(marker, "a") as handle:
                    handle.write("in flight\\n")
            await asyncio.sleep(float(os.environ.get("SUMMARY_SECONDS", "0.05")))
            async for event in super().stream(request):
                yield event

    extension = zett_lab.instrument(CompactionExtension(SlowSummarizer(), **LIMITS), sys.argv[1])
    history = SQLiteSessionExtension(sys.argv[2])
    asyncio.run(run_agent(extension, turns=int(sys.argv[3]), steps=4, model=Slow(4), history=history))
    """
)


def _start(trace: Path, database: Path, turns: int, **env: str) -> subprocess.Popen:
    script = WRITER.format(root=str(ROOT))
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.Popen(
        [sys.executable, "-c", script, str(trace), str(database), str(turns)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


def _finish(trace: Path, database: Path) -> None:
    """A clean restart: one more turn, to its end."""
    process = _start(trace, database, 1)
    assert process.wait(timeout=180) == 0


def _check_against_the_database(trace_path: Path, database: Path) -> zett_lab.Trace:
    """The trace holds the database's messages, in its numbering, and every index in its rows agrees."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZettLabWarning)  # cut-off lines are reported; they are checked here
        trace = zett_lab.Trace.load(trace_path)
    stored = zett_lab.load(database, session="live")
    assert [engine_payload(m) for m in trace.conversation.messages] == [engine_payload(m) for m in stored.messages]
    assert trace.settings.live is not None and trace.settings.live.gaps == ()
    recorded = trace.conversation.metadata["sequences"]
    assert all(s is None or s == stored.metadata["sequences"][i] for i, s in enumerate(recorded))
    starts = [starts_turn(m) for m in stored.messages]
    steps = trace.steps
    for row in steps.itertuples(index=False):
        assert 0 < row.n_recorded <= len(stored.messages)
        assert row.turn == sum(starts[: row.n_recorded]) - 1, "the step's turn follows the database's numbering"
        assert row.kept_from <= row.n_recorded
        if not pd.isna(row.cutoff_index):
            assert row.cutoff_index <= row.n_recorded
    for row in trace.compactions.itertuples(index=False):
        assert row.n_recorded <= len(stored.messages)
        if not pd.isna(row.span_end):
            assert row.span_start <= row.span_end <= row.n_recorded
    return trace


def test_a_kill_during_a_summary_call_then_a_restart_keeps_the_trace_in_the_databases_numbering(tmp_path):
    """The issue's case: ``kill -9`` while a compaction's summary call is in flight, then a restart."""
    trace, database, marker = tmp_path / "live.jsonl", tmp_path / "sessions.sqlite", tmp_path / "marker"
    process = _start(trace, database, 200, SUMMARY_MARKER=str(marker), SUMMARY_SECONDS="30")
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the agent never asked for a summary"
        time.sleep(0.2)
    finally:
        _kill(process)
    stored_before = len(zett_lab.load(database, session="live").messages)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZettLabWarning)
        killed = zett_lab.Trace.load(trace)
    assert len(killed.conversation.messages) < stored_before  # the killed request's messages never reached it
    _finish(trace, database)
    resumed = _check_against_the_database(trace, database)
    assert resumed.settings.live.recovered_messages  # written by the restarted agent, from the storage
    # The trace's own conversation replays as the database does (same estimates, same summaries).
    limits = {"max_tokens": LIMITS["max_tokens"], "keep_recent_tokens": LIMITS["keep_recent_tokens"]}
    from_trace, from_database = (
        zett_lab.replay(conversation, **limits, summarizer=CountingSummarizer(), usage="recorded", cache=False)
        for conversation in (resumed.conversation, zett_lab.load(database, session="live"))
    )
    assert from_trace.steps.drop(columns="conversation_id").equals(from_database.steps.drop(columns="conversation_id"))
    assert from_trace.compactions["summary_text"].tolist() == from_database.compactions["summary_text"].tolist()


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kills=st.lists(st.floats(min_value=0.0, max_value=3.0), min_size=1, max_size=3))
def test_kills_at_random_points_never_break_the_trace(tmp_path_factory, kills):
    folder = tmp_path_factory.mktemp("kills")
    trace, database = folder / "live.jsonl", folder / "sessions.sqlite"
    for delay in kills:
        process = _start(trace, database, 200, SUMMARY_SECONDS="0.2")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None and not database.exists():
            time.sleep(0.02)  # the agent has started (its database exists): from here on, kill at a random point
        time.sleep(delay)
        _kill(process)
    _finish(trace, database)
    _check_against_the_database(trace, database)


# -- lines a live trace must not hold -------------------------------------------------------------------------


@pytest.fixture()
def recorded(tmp_path):
    """A short live trace written by a real agent run."""
    trace, database = tmp_path / "live.jsonl", tmp_path / "sessions.sqlite"
    _finish(trace, database)
    return trace


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"record":"step","run":"x"}', "a 'step' record needs 'session_id' (str), found missing"),
        ('{"record":"message","run":"x","session_id":"live","index":"3","message":"[]"}', "needs 'index' (int)"),
        ('{"record":"party"}', "unknown record kind 'party'"),
        ("[1, 2]", "a live trace record is a JSON object, not list"),
    ],
)
def test_a_line_of_the_wrong_shape_is_one_clear_error(recorded, line, problem):
    lines = recorded.read_text().splitlines(keepends=True)
    lines.insert(3, line + "\n")
    recorded.write_text("".join(lines))
    with pytest.raises(InputError) as error:
        zett_lab.Trace.load(recorded)
    assert str(error.value).startswith(f"{recorded}: line 4: ") and problem in str(error.value)


def test_a_line_torn_in_the_middle_of_the_file_is_reported_with_its_number(recorded):
    lines = recorded.read_bytes().splitlines(keepends=True)
    number = next(n for n, line in enumerate(lines, start=1) if b'"record":"step"' in line and n > 3)
    lines[number - 1] = lines[number - 1][:25] + b"\n"  # a record cut off, then the file went on
    recorded.write_bytes(b"".join(lines))
    with pytest.warns(ZettLabWarning, match=rf"line\(s\) {number} cut off"):
        trace = zett_lab.Trace.load(recorded)
    assert trace.settings.live.torn_records == (number,)
    assert json.loads(lines[0])["format"] == "zett-lab-live-trace"
