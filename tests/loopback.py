"""A fake model provider on 127.0.0.1 for tests: OpenAI chat-completions SSE and Ollama /api/chat NDJSON.

It speaks exactly what zett-agent's providers send and read, so the real client code
(``OpenAIProvider`` / ``OpenAICompatibleProvider`` / ``DeepSeekProvider`` through the OpenAI SDK,
``OllamaProvider`` through the ollama client) runs end to end with no internet:

* ``POST {prefix}/chat/completions`` (any prefix, e.g. ``/v1``): ``text/event-stream`` of
  ``data: {chat.completion.chunk}`` lines, a usage chunk when ``stream_options.include_usage``
  is set, then ``data: [DONE]``. Errors are ``{"error": {"message", "type", "code"}}`` JSON.
* ``POST /api/chat``: ``application/x-ndjson`` lines ``{"message": {...}, "done": false}``,
  then a ``done: true`` line with ``prompt_eval_count`` / ``eval_count``. Errors are
  ``{"error": "..."}`` JSON.

Responses are chunked HTTP/1.1 with keep-alive. Behaviour is set at construction or with
:meth:`LoopbackServer.configure`:

* ``summary``: the text to answer (a string, or ``callable(messages) -> str``; default: a
  short deterministic checkpoint naming the number of messages and the first user request);
* ``delay``: seconds before the response headers (a slow or silent provider);
  ``chunk_delay``: seconds between streamed chunks;
* ``fail_status`` with ``fail_times``: answer that HTTP status N times, then succeed
  (``fail_times=None``: always fail);
* ``empty=True``: an empty summary; ``tool_call=True``: a tool call instead of text;
* ``reasoning``: reasoning text streamed before the answer;
* ``drop=True``: accept every connection and close it at once, without a response (an endpoint
  that cannot be talked to; the client sees a failed connection);
* ``cut=True`` (OpenAI protocol): send one content chunk, then half an event, then close the
  connection, with no ``finish_reason`` and no ``[DONE]`` (a body ended by the connection's close, so
  the client sees a clean end of stream: what a proxy that drops a response mid-way looks like);
* ``finish``: the ``finish_reason`` of the last chunk (default ``"stop"``; ``"length"``: cut by the
  output limit).

Every request is recorded (:attr:`LoopbackServer.requests`): method, path, headers and JSON body;
every accepted connection is counted (:attr:`LoopbackServer.connections`).

Example::

    with LoopbackServer(summary="All done.") as server:
        model = summarizer(f"openai-compatible:fake@{server.openai_url}")
        ...
        assert server.count("/v1/chat/completions") == 1
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "RecordedRequest", "default_summary"]


@dataclass
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    status: int | None = None  # the status answered
    received_at: float = field(default_factory=time.monotonic)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def default_summary(messages: list[dict[str, Any]]) -> str:
    """A short deterministic checkpoint: message count and the first user request (trimmed)."""
    dialogue = [m for m in messages if m.get("role") != "system"]
    users = [_text_of(m.get("content")) for m in dialogue if m.get("role") == "user"]
    # The last user message is the engine's "Produce the checkpoint now."
    first = users[0] if len(users) > 1 else ""
    first = " ".join(first.split()[:12])
    return f"Checkpoint of {max(0, len(dialogue) - 1)} messages. First request: {first}".strip()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence the default logging
        pass

    # -- plumbing ---------------------------------------------------------------------------------

    def _record(self) -> RecordedRequest:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        record = RecordedRequest(self.command, self.path, {k: v for k, v in self.headers.items()}, body, parsed)
        self.server.owner._append(record)
        return record

    def _send_json(self, status: int, payload: Any, record: RecordedRequest) -> None:
        data = json.dumps(payload).encode()
        record.status = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self, content_type: str, record: RecordedRequest) -> None:
        record.status = 200
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        if self.server.owner.cut:
            self.send_header("Connection", "close")  # the body ends where the connection closes
            self.close_connection = True
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        owner = self.server.owner
        if owner.chunk_delay:
            owner._sleep(owner.chunk_delay)
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    # -- routes ---------------------------------------------------------------------------------------

    def do_POST(self) -> None:  # http.server naming
        owner = self.server.owner
        owner._enter()
        try:
            self._post()
        finally:
            owner._leave()

    def _post(self) -> None:
        record = self._record()
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            protocol = "openai"
        elif path == "/api/chat":
            protocol = "ollama"
        else:
            self._send_json(404, {"error": {"message": f"no route {path}", "type": "not_found"}}, record)
            return
        if owner.delay:
            owner._sleep(owner.delay)
        failure = owner._take_failure()
        if failure is not None:
            if protocol == "openai":
                payload: Any = {
                    "error": {
                        "message": f"loopback says {failure}",
                        "type": "rate_limit_error" if failure == 429 else "server_error",
                        "code": str(failure),
                    }
                }
            else:
                payload = {"error": f"loopback says {failure}"}
            self._send_json(failure, payload, record)
            return
        body = record.json if isinstance(record.json, dict) else {}
        messages = body.get("messages") or []
        text = "" if owner.empty else owner._summary_for(messages)
        try:
            if protocol == "openai":
                self._openai(body, messages, text, record)
            else:
                self._ollama(body, messages, text, record)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            self.close_connection = True

    def do_GET(self) -> None:
        record = self._record()
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}}, record)

    # -- protocols ----------------------------------------------------------------------------------

    def _openai(self, body: dict[str, Any], messages: list[dict[str, Any]], text: str, record: RecordedRequest) -> None:
        owner = self.server.owner
        model = body.get("model", "loopback")
        self._start_stream("text/event-stream; charset=utf-8", record)

        def event(delta: dict[str, Any], finish: str | None = None) -> None:
            self._chunk(b"data: " + json.dumps(_chunk_of(model, delta, finish)).encode() + b"\n\n")

        event({"role": "assistant", "content": ""})
        if owner.cut:
            self.wfile.write(
                b"data: " + json.dumps(_chunk_of(model, {"content": text[: max(1, len(text) // 2)]})).encode()
            )
            self.wfile.write(b'\n\ndata: {"choices":[{"delta":{"con')
            self.wfile.flush()
            return
        if owner.reasoning:
            event({"reasoning_content": owner.reasoning})
        if owner.tool_call:
            event(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_loopback",
                            "type": "function",
                            "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})},
                        }
                    ]
                }
            )
            event({}, "tool_calls")
        else:
            for piece in _pieces(text):
                event({"content": piece})
            event({}, owner.finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            prompt = _prompt_tokens(messages)
            usage = {"prompt_tokens": prompt, "completion_tokens": _words(text), "total_tokens": prompt + _words(text)}
            chunk = {
                "id": "chatcmpl-loopback",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            self._chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._end_stream()

    def _ollama(self, body: dict[str, Any], messages: list[dict[str, Any]], text: str, record: RecordedRequest) -> None:
        owner = self.server.owner
        model = body.get("model", "loopback")
        self._start_stream("application/x-ndjson", record)

        def line(payload: dict[str, Any]) -> None:
            self._chunk(json.dumps({"model": model, "created_at": "2026-01-01T00:00:00Z", **payload}).encode() + b"\n")

        if owner.reasoning:
            line({"message": {"role": "assistant", "content": "", "thinking": owner.reasoning}, "done": False})
        if owner.tool_call:
            line(
                {
                    "message": {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [{"function": {"name": "bash", "arguments": {"command": "ls"}}}],
                    },
                    "done": False,
                }
            )
        else:
            for piece in _pieces(text):
                line({"message": {"role": "assistant", "content": piece}, "done": False})
        line(
            {
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": _prompt_tokens(messages),
                "eval_count": _words(text),
            }
        )
        self._end_stream()


def _chunk_of(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str) -> list[str]:
    """Split ``text`` into about three streamed pieces (concatenating back to ``text``)."""
    if not text:
        return []
    size = max(1, len(text) // 3)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _words(text: str) -> int:
    return len(text.split())


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(_text_of(m.get("content")).split()) + 4 for m in messages)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: LoopbackServer

    def verify_request(self, request: Any, client_address: Any) -> bool:
        """Count the connection; with ``drop`` refuse to serve it (socketserver then closes it)."""
        return self.owner._connected()


class LoopbackServer:
    """A fake provider on 127.0.0.1 (random free port), served from a daemon thread.

    Attributes:
        url: ``http://127.0.0.1:PORT`` (the Ollama base URL).
        openai_url: ``http://127.0.0.1:PORT/v1`` (the OpenAI-compatible base URL).
        requests: every request received, in order.
        max_in_flight: the most POST requests answered at the same time.
    """

    def __init__(self, **behaviour: Any) -> None:
        """Start with the behaviour :meth:`configure` takes (defaults: a deterministic summary, no failures)."""
        self.requests: list[RecordedRequest] = []
        #: Connections accepted (also those dropped without a response).
        self.connections = 0
        #: POST requests being answered right now, and the most at any one time.
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.configure(**behaviour)

    def configure(
        self,
        *,
        summary: str | Callable[[list[dict[str, Any]]], str] | None = None,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
        fail_status: int | None = None,
        fail_times: int | None = None,
        empty: bool = False,
        tool_call: bool = False,
        reasoning: str | None = None,
        drop: bool = False,
        cut: bool = False,
        finish: str = "stop",
    ) -> LoopbackServer:
        """Set the behaviour for the following requests (resets the failure counter)."""
        with self._lock:
            self.summary = summary
            self.delay = delay
            self.chunk_delay = chunk_delay
            self.fail_status = fail_status
            self._failures_left = fail_times  # None: always
            self.empty = empty
            self.tool_call = tool_call
            self.reasoning = reasoning
            self.drop = drop
            self.cut = cut
            self.finish = finish
        return self

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        if self._server is not None:
            return self
        self._stop.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses ----------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("LoopbackServer is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    # -- inspection -----------------------------------------------------------------------------------------

    def count(self, path: str | None = None) -> int:
        """Requests received (to ``path`` only, when given)."""
        with self._lock:
            return sum(1 for r in self.requests if path is None or r.path.split("?", 1)[0] == path)

    def reset(self) -> None:
        """Forget recorded requests and connections (and the in-flight maximum)."""
        with self._lock:
            self.requests.clear()
            self.connections = 0
            self.max_in_flight = self.in_flight

    # -- internals used by the handler --------------------------------------------------------------------

    def _connected(self) -> bool:
        with self._lock:
            self.connections += 1
            return not self.drop

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _append(self, record: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(record)

    def _take_failure(self) -> int | None:
        with self._lock:
            if self.fail_status is None:
                return None
            if self._failures_left is None:
                return self.fail_status
            if self._failures_left > 0:
                self._failures_left -= 1
                return self.fail_status
            return None

    def _summary_for(self, messages: list[dict[str, Any]]) -> str:
        summary = self.summary
        if summary is None:
            return default_summary(messages)
        if callable(summary):
            return summary(messages)
        return summary

    def _sleep(self, seconds: float) -> None:
        """Sleep, but wake up when the server is closing."""
        self._stop.wait(seconds)
