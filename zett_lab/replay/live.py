"""Recording a live agent's compactions: the same trace as a replay, written while the agent runs.

``zett_lab.instrument(extension, path)`` takes a configured ``CompactionExtension`` (stock or a
subclass) and returns a copy with the probe of :mod:`zett_lab.replay.engine` in front of its
class. The copy decides exactly as the original would; it appends to ``path`` (JSON lines):

- ``start``: once per process that opens the file: the engine, its limits, the summarizer;
- ``message``: every new message of a session as it is appended (zett-agent's encoding), with
  the provider usage of assistant messages;
- ``compaction``: every summary attempt as it ends: the same columns as a replay's
  compaction table, with the real summary text, usage and latency;
- ``step``: every model step as it ends: the same columns as a replay's step table, plus
  the request id, the provider's real usage and latency, and the raw-log sequence numbers
  ``SQLiteSessionExtension`` gave the messages (when the agent has one).

The records of one step are written together, in whole lines, with one ``write`` to a file opened
for appending when the step ends. What reaches the operating system survives the process, so a
killed process (an exception, ``kill -9``, an out-of-memory kill) loses at most the step in flight.
A crash of the machine itself (power loss, kernel panic) may also lose what the OS had not yet
written to disk; ``instrument(..., fsync=True)`` flushes every step to disk before the agent goes
on, so even then at most the step in flight is lost, at the price of one disk flush per step.
When a restarted process starts its first request of a session, the trace is compared with the
session storage's raw log (:meth:`LiveRecorder.reconcile`): the messages a killed process's storage kept
but its trace never got are written then (``recovered``), so every index follows ``zett_lab.load``'s
numbering of the database; a disagreement it cannot mend is a ``gap`` record ``Trace.load`` warns about.
Requests are kept apart by their run context, sessions by their id, so one shared Agent
serving concurrent requests writes one trace per session. ``Trace.load(path, session=...)``
reads the file (:func:`~zett_lab.replay.live_reader.read_live_session`), also while an agent is still writing it: a line
not yet finished is left out and reported in ``trace.settings.live.in_flight``.

Example::

    extension = zett_lab.instrument(CompactionExtension(model, max_tokens=128_000), "compactions.jsonl")
    agent = await Agent.create(model, extensions=[SQLiteSessionExtension("sessions.sqlite"), extension])
    ...
    trace = zett_lab.Trace.load("compactions.jsonl", session="my-session")
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
import uuid
import weakref
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import zett_agent
from zett_agent.agent import AgentRunContext
from zett_agent.extensions.compaction import CompactionExtension
from zett_agent.extensions.events import CompactionEvent
from zett_agent.messages import AnyMessage, SystemMessage
from zett_agent.model import ModelResponse, ModelUsage
from zett_agent.storage import encode_messages

from ..errors import OutputError, SettingError
from ..load.conversation import starts_turn
from ..load.zett import keep_first_system_prompt
from ..records import JSONObject
from ..tokens import MemoizingCounter, TokenCounter
from .engine import (
    LiveProbe,
    counts_with_engine_estimator,
    engine_name,
    graft,
    record_live,
    storage_sequences,
    stored_raw_log,
)
from .live_reader import LIVE_FORMAT, LIVE_VERSION, SessionState, first_line, message_digest, session_states
from .recorder import PassRecord, Recording
from .setting import Setting, TraceSettings

#: Distinct texts the live recorder's token counter remembers (a long-running agent must not grow without bound).
COUNTER_TEXTS = 65_536


def instrument(extension: CompactionExtension, path: str | Path, *, fsync: bool = False) -> CompactionExtension:
    """A copy of ``extension`` that records every compaction decision to ``path`` as the agent runs.

    Put the result in ``Agent.create(..., extensions=[...])`` instead of ``extension``. It
    decides exactly as ``extension`` would (same events, checkpoints and context sent);
    failures are recorded and then raised as they would be without it.

    Args:
        extension: A configured ``CompactionExtension`` or subclass (left untouched).
        path: The trace file (JSON lines). A new file, or one this function wrote before
            (new records are appended); anything else is refused.
        fsync: Also flush every step to disk before the agent goes on. Without it (the
            default) a killed process still loses at most the step in flight, but a crash of
            the machine may lose the steps the OS had not yet written to disk; with it, one disk
            flush per step (about 0.5 ms on a local disk, more on a network one).

    Raises:
        SettingError: ``extension`` is not a CompactionExtension.
        OutputError: ``path`` exists and is not a live trace, or its folder does not exist.
    """
    if not isinstance(extension, CompactionExtension):
        raise SettingError(f"instrument() takes a configured CompactionExtension, got {type(extension).__name__}")
    recorder = LiveRecorder(TraceLog(path, fsync=fsync), extension)
    instrumented = graft(extension, LiveProbe)
    record_live(instrumented, recorder, recorder.counter)
    return instrumented


class TraceLog:
    """An append-only JSON-lines file written in whole lines.

    Records of a step (its new messages, its compaction attempt, the step itself) are
    collected and written with one ``os.write`` when the step ends (then, with ``fsync``,
    flushed to disk); so a killed process loses at most the step in flight, and a step
    costs one system call.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        if not self.path.parent.is_dir():
            raise OutputError(self.path, None, f"folder {str(self.path.parent)!r} does not exist")
        torn = False
        if self.path.exists() and self.path.stat().st_size:
            head = first_line(self.path)
            if not (isinstance(head, dict) and head.get("format") == LIVE_FORMAT):
                raise OutputError(
                    self.path,
                    None,
                    "exists and is not a zett_lab live trace; zett_lab appends only to its own "
                    "trace files (choose a new path)",
                )
            with self.path.open("rb") as handle:
                handle.seek(-1, os.SEEK_END)
                torn = handle.read(1) != b"\n"
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        weakref.finalize(self, _close, self._fd, self._pending)
        if torn:  # a process was killed mid-record: end that line so the next record starts clean
            self._pending.append(b"\n")

    def write(self, record: JSONObject, *, flush: bool = False) -> None:
        """Add a record; with ``flush``, write everything pending (and fsync when configured)."""
        line = (_ENCODER.encode(record) + "\n").encode("utf-8")
        with self._lock:
            self._pending.append(line)
            if not flush:
                return
            view = memoryview(b"".join(self._pending))
            self._pending.clear()
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(self._fd)


def _close(fd: int, pending: list[bytes]) -> None:
    """Write what is still pending (a clean exit loses nothing), then close the file."""
    try:
        if pending:
            os.write(fd, b"".join(pending))
    finally:
        os.close(fd)


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)


#: One encoder for every record (``json.dumps`` with options builds a new one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_json_default, separators=(",", ":"))


@dataclass
class _Session:
    """What the recorder knows about one session: its message count and its trace rows so far.

    Not frozen: it follows the session as the live agent runs (messages, turns, digests).
    """

    recording: Recording
    n_messages: int = 0
    turns: int = 0
    has_system: bool = False
    #: Digests of the messages the trace already held when this process resumed it (until reconciled).
    digests: list[str] = field(default_factory=list)
    #: Whether the session's stored messages were compared with the trace (once per process).
    reconciled: bool = False


@dataclass
class _Request:
    """One request (one run context): its session, the pass in progress and the messages it appended.

    Not frozen: it follows the request's pass and step as the live agent runs.
    """

    session: _Session
    request_id: str
    current: PassRecord | None = None
    step_pass: PassRecord | None = None
    step_compaction: dict[str, Any] | None = None
    model_started: float = 0.0
    appended: dict[int, int] = field(default_factory=dict)


class LiveRecorder:
    """The live side of the probe: per-session recordings written to one :class:`TraceLog`."""

    def __init__(self, log: TraceLog, extension: CompactionExtension) -> None:
        self.log = log
        self.run = uuid.uuid4().hex
        custom = not counts_with_engine_estimator(extension)
        self.counter: TokenCounter = extension.count_tokens if custom else MemoizingCounter(max_texts=COUNTER_TEXTS)
        self.settings = live_settings(extension, self.counter)
        self._sessions: dict[str, _Session] = {}
        self._requests: weakref.WeakKeyDictionary[AgentRunContext, _Request] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._resumed = session_states(log.path) if log.path.stat().st_size else {}
        log.write(
            {
                "record": "start",
                "format": LIVE_FORMAT,
                "version": LIVE_VERSION,
                "run": self.run,
                "pid": os.getpid(),
                "started_at": datetime.now(timezone.utc).isoformat(),
                "settings": self.settings.record(),
            },
            flush=True,
        )

    @property
    def setting(self) -> Setting:
        """The Setting the live engine runs with."""
        assert self.settings.setting is not None  # a live engine always has its limits
        return self.settings.setting

    # --- sessions and requests -------------------------------------------------------------------------

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                recording = Recording(
                    conversation_id=session_id,
                    setting=self.setting,
                    keep_rows=False,
                    write=functools.partial(self._write_row, session_id),
                )
                session = self._sessions[session_id] = _Session(recording)
                state = self._resumed.pop(session_id, None)
                if state is not None:
                    _resume(session, state)
            return session

    def _request(self, context: AgentRunContext) -> _Request:
        request = self._requests.get(context)
        if request is None:
            request_id = context.config.request_id or uuid.uuid4().hex
            request = self._requests[context] = _Request(self._session(context.session_id), request_id)
        return request

    def _write_row(self, session_id: str, kind: str, row: dict[str, Any]) -> None:
        # A step ends the unit a crash may lose; so does a failed or manual pass (no step follows it).
        flush = kind == "step" or row.get("error") is not None or row.get("trigger") == "manual"
        self.log.write({"record": kind, "run": self.run, "session_id": session_id, "row": row}, flush=flush)

    # --- what the probe reports ------------------------------------------------------------------------

    def pass_of(self, context: AgentRunContext) -> PassRecord | None:
        request = self._requests.get(context)
        return request.current if request is not None else None

    def message(self, context: AgentRunContext, message: AnyMessage, usage: ModelUsage | None) -> None:
        """A message appended to the context: a new message of the session, as the raw log stores it."""
        if not message.persist:
            return
        request = self._request(context)
        index = self._append(context.session_id, request.session, message, usage)
        if index is not None:
            request.appended[id(message)] = index

    def _append(
        self, session_id: str, session: _Session, message: AnyMessage, usage: ModelUsage | None, recovered: bool = False
    ) -> int | None:
        """Number a new message of the session as ``zett_lab.load`` numbers the raw log, and write its record."""
        if isinstance(message, SystemMessage):
            if session.has_system or session.n_messages:
                return None  # the raw log re-stores the prompt at every request; a conversation keeps the first
            session.has_system = True
        index = session.n_messages
        session.n_messages += 1
        if starts_turn(message):
            session.turns += 1
            session.recording.turn, session.recording.turn_step = session.turns - 1, 0
        if not isinstance(message, SystemMessage) and index == (1 if session.has_system else 0):
            session.recording.span_start = index  # summaries stand for everything from the first dialogue message
        record: JSONObject = {
            "record": "message",
            "run": self.run,
            "session_id": session_id,
            "index": index,
            "message": encode_messages([message]),
            "usage": asdict(usage) if usage is not None else None,
        }
        if recovered:
            record["recovered"] = True
        self.log.write(record)
        return index

    async def reconcile(self, context: AgentRunContext) -> None:
        """Make the trace hold every message the session storage holds, numbered as ``zett_lab.load`` numbers them.

        Once per session and process, when its first request starts: a process killed after the storage
        kept a message but before the trace did (a step in flight, a record cut off), or a trace begun on
        a session with history, would otherwise number every later message differently from the
        database. Messages the storage holds beyond the trace are written now (``recovered``); a
        disagreement the trace cannot mend is written as a ``gap`` record that ``Trace.load`` warns about.
        """
        session = self._session(context.session_id)
        if session.reconciled:
            return
        session.reconciled = True
        digests, session.digests = session.digests, []
        stored = await stored_raw_log(context)
        if stored is None:
            return
        kept, sequences, _ = keep_first_system_prompt([m for _, m, _ in stored], [s for s, _, _ in stored])
        usage = {s: u for s, _, u in stored if u is not None}
        problem = None
        for index, (digest, message) in enumerate(zip(digests, kept, strict=False)):
            if digest != message_digest(encode_messages([message])):
                problem = f"message {index} differs from the session storage's (sequence {sequences[index]})"
                break
        if problem is None and len(digests) > len(kept):
            problem = f"the trace holds {len(digests)} messages, the session storage {len(kept)}"
        if problem is not None:
            self.log.write(
                {
                    "record": "gap",
                    "run": self.run,
                    "session_id": context.session_id,
                    "at": min(len(digests), len(kept)),
                    "text": f"{problem}: later message indices may not follow the database's numbering",
                },
                flush=True,
            )
            return
        recovered: JSONObject = {}
        for message, sequence in zip(kept[len(digests) :], sequences[len(digests) :], strict=True):
            appended = self._append(context.session_id, session, message, usage.get(sequence), recovered=True)
            if appended is not None:
                recovered[str(appended)] = sequence
        if recovered:
            self.log.write(
                {"record": "sequences", "run": self.run, "session_id": context.session_id, "sequences": recovered},
                flush=True,
            )

    def begin_pass(self, context: AgentRunContext, trigger: str | None) -> None:
        request = self._request(context)
        request.current = PassRecord(trigger=trigger, n_recorded=request.session.n_messages)

    def end_pass(self, context: AgentRunContext, *, manual: bool = False) -> None:
        request = self._request(context)
        state, request.current = request.current, None
        recording = request.session.recording
        sequences = storage_sequences(context) if state is not None and state.applied else None
        through = sequences[0] if sequences else None
        compaction = recording.finish_pass(
            state,
            recording.steps,
            session_id=context.session_id,
            request_id=request.request_id,
            compacted_through_sequence=through,
        )
        if not manual:
            request.step_pass, request.step_compaction = state, compaction
            request.model_started = time.perf_counter()

    def step(self, context: AgentRunContext, response: ModelResponse) -> None:
        """A model step ended: its row (what the pass decided, what was sent) and the raw-log sequences."""
        request = self._request(context)
        session, state = request.session, request.step_pass
        latency = time.perf_counter() - request.model_started if request.model_started else None
        messages = context.state.messages
        end = next((i for i in range(len(messages) - 1, -1, -1) if messages[i] is response.message), len(messages))
        sent = messages[:end]
        n_recorded = state.n_recorded if state is not None else session.n_messages - 1
        recording = session.recording
        row = recording.step_row(recording.steps, n_recorded, state, request.step_compaction, sent, response.message)
        sequences = storage_sequences(context)
        known = (
            {
                request.appended[id(m)]: s
                # the storage may map fewer positions than the context holds
                for m, s in zip((m for m in messages if not isinstance(m, SystemMessage)), sequences, strict=False)
                if id(m) in request.appended and s is not None
            }
            if sequences
            else {}
        )
        usage = response.usage
        row.update(
            session_id=context.session_id,
            request_id=request.request_id,
            usage_input_tokens=usage.input_tokens or None,
            usage_output_tokens=usage.output_tokens or None,
            model_latency_s=latency,
            sequence=known.get(request.appended.get(id(response.message), -1)),
        )
        request.step_pass = request.step_compaction = None
        request.model_started = 0.0
        if known:
            self.log.write(
                {
                    "record": "sequences",
                    "run": self.run,
                    "session_id": context.session_id,
                    "sequences": {str(k): v for k, v in known.items()},
                }
            )
        recording.add_step(row)

    def event(self, context: AgentRunContext, event: CompactionEvent) -> None:
        """An applied compaction as the engine published it (the cross-check of its compaction row)."""
        recording = self._request(context).session.recording
        self.log.write(
            {
                "record": "event",
                "run": self.run,
                "session_id": context.session_id,
                "event": {
                    "step": recording.steps,
                    "applied": True,
                    "compressed_to": event.compressed_to,
                    "kept_to": event.kept_to,
                    "summary": event.summary,
                },
            }
        )


#: The summarizer a live trace names when the engine summarizes with the agent's own (request) model.
REQUEST_MODEL = "request model"


def live_settings(extension: CompactionExtension, counter: TokenCounter) -> TraceSettings:
    """What a live trace keeps of its engine: the Setting it runs with and the engine's version.

    The live agent's usage baseline is the provider's own, so its Setting has ``usage="recorded"``: a
    replay of the recorded session with that Setting decides as the agent did.
    """
    from ..summarizers import summarizer_identity

    model = extension.model
    summary = summarizer_identity(model) if model is not None else REQUEST_MODEL
    setting = Setting(
        max_tokens=extension.max_tokens,
        keep_recent_tokens=extension.keep_recent_tokens,
        summarizer=summary,
        engine=engine_name(type(extension)),
        counter=counter,
        reasoning_effort=getattr(extension.reasoning_effort, "value", str(extension.reasoning_effort)),
        usage="recorded",
    )
    return TraceSettings(
        setting=setting,
        summarizer=summary,
        counter=setting.counter_name,
        zett_agent_version=zett_agent.__version__,
    )


def _resume(session: _Session, state: SessionState) -> None:
    session.n_messages, session.turns, session.has_system = state["n_messages"], state["turns"], state["has_system"]
    session.digests = state["digests"]
    recording = session.recording
    recording.steps, recording.compactions, recording.checkpoint_id = (
        state["steps"],
        state["compactions"],
        state["checkpoint_id"],
    )
    recording.turn = max(0, state["turns"] - 1)
    recording.span_start = 1 if state["has_system"] else 0
