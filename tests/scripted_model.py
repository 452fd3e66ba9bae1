"""A real OpenAI-compatible HTTP server for tests, answering from a script.

`ScriptedModel` listens on 127.0.0.1 (a free port, a background thread,
stdlib only) and serves `POST /v1/chat/completions` with `stream: true` as
Server-Sent Events over chunked transfer encoding, exactly as a hosted model
does. Each request takes the next response from a FIFO script:

    with ScriptedModel() as server:
        server.push(tool_call({"operations": [...]}), text("Done."))
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

Builders: `text`, `pieces` (text in the deltas given), `tool_call`, `tool_calls`, `error`, `cut` (text, then the
connection closes without the terminating chunk: a real protocol error in
the client), `endless` (a stream that never ends until the client hangs up;
`server.hangups` records when) and `dynamic` (a response chosen from the
request body). An
empty script answers HTTP 500 "script exhausted". Every decoded request body
lands in `server.requests`; nothing here prints a body or message content.

In Django tests, the `scripted_model` fixture points the chat's settings at
a fresh server (import it: `from tests.scripted_model import scripted_model
# noqa: F401`). A `dynamic` function that raises fails the test at teardown.
"""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

TOOL_NAME = "memory_update"
EXHAUSTED = "script exhausted"
_WORD = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class Response:
    """One scripted answer. Build it with the module's functions, not directly."""

    status: int = 200
    # Streamed chunks, each (delta, finish_reason); a delta's tool calls may
    # lack an id, filled in per request.
    chunks: tuple[tuple[dict, str | None], ...] = field(default=(), repr=False)
    done: bool = True  # send `data: [DONE]` after the chunks
    abort: bool = False  # close the connection instead of ending the chunked body
    delay: float = 0.0  # seconds between chunks
    message: str = field(default="", repr=False)  # the error message when status != 200
    fn: Callable[[dict], Response] | None = field(default=None, repr=False)
    endless_for: float = 0.0  # > 0: stream distinct words until the client hangs up, at most this long


# --- builders ---------------------------------------------------------------------


def text(
    content: str,
    *,
    finish_reason: str | None = "stop",
    done: bool = True,
    chunk_words: bool = True,
    delay: float = 0.0,
) -> Response:
    """Stream `content` (word by word), a `finish_reason` chunk unless None, then [DONE] if `done`."""
    chunks = _text_chunks(content, chunk_words=chunk_words)
    if finish_reason is not None:
        chunks.append(({}, finish_reason))
    return Response(chunks=tuple(chunks), done=done, delay=delay)


def pieces(
    parts: list[str], *, finish_reason: str | None = "stop", delay: float = 0.0
) -> Response:
    """Stream `parts` as they are, one delta each (a token stream split where the test wants)."""
    chunks = [({"content": part}, None) for part in parts] or [({"content": ""}, None)]
    chunks[0][0]["role"] = "assistant"
    if finish_reason is not None:
        chunks.append(({}, finish_reason))
    return Response(chunks=tuple(chunks), delay=delay)


def tool_call(
    arguments: dict | str,
    *,
    name: str = TOOL_NAME,
    call_id: str | None = None,
    finish_reason: str | None = "tool_calls",
    done: bool = True,
    text_before: str = "",
    delay: float = 0.0,
) -> Response:
    """Stream one tool call (arguments in fragments), after optional text."""
    chunks = _text_chunks(text_before) if text_before else []
    chunks += _call_chunks(0, name, arguments, call_id, first=not chunks)
    if finish_reason is not None:
        chunks.append(({}, finish_reason))
    return Response(chunks=tuple(chunks), done=done, delay=delay)


def tool_calls(
    calls: list[tuple[str, dict | str]],
    *,
    finish_reason: str | None = "tool_calls",
    done: bool = True,
    delay: float = 0.0,
) -> Response:
    """Stream several (name, arguments) calls in one round, each by its index."""
    chunks: list[tuple[dict, str | None]] = []
    for index, (name, arguments) in enumerate(calls):
        chunks += _call_chunks(index, name, arguments, None, first=not chunks)
    if finish_reason is not None:
        chunks.append(({}, finish_reason))
    return Response(chunks=tuple(chunks), done=done, delay=delay)


def error(status: int, message: str = "scripted failure") -> Response:
    """Answer HTTP `status` with a JSON error body shaped like OpenAI's."""
    if status < 400:
        raise ValueError("error() needs a 4xx or 5xx status")
    return Response(status=status, message=message)


def cut(content: str = "partial answer", *, delay: float = 0.0) -> Response:
    """Stream some text, then close the connection mid-body: no finish_reason, no [DONE]."""
    return Response(chunks=tuple(_text_chunks(content)), done=False, abort=True, delay=delay)


def endless(*, delay: float = 0.02, at_most: float = 15.0) -> Response:
    """Stream distinct words ("w1 w2 ...") with no end, as a model that never stops.

    It stops when the client hangs up (the time lands in `server.hangups`),
    or after `at_most` seconds, so a test of a deadline that fails still ends.
    """
    return Response(delay=delay, endless_for=at_most)


def dynamic(fn: Callable[[dict], Response]) -> Response:
    """Answer with `fn(body)`, a response chosen from the decoded request body."""
    return Response(fn=fn)


def _text_chunks(content: str, *, chunk_words: bool = True) -> list[tuple[dict, str | None]]:
    pieces = (_WORD.findall(content) if chunk_words else [content]) or [""]
    chunks = [({"content": piece}, None) for piece in pieces]
    chunks[0][0]["role"] = "assistant"
    return chunks


def _call_chunks(index: int, name: str, arguments: dict | str, call_id: str | None, *, first: bool):
    """A header fragment (id, name, empty arguments), then the arguments in two halves."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    header = {"index": index, "type": "function", "function": {"name": name, "arguments": ""}}
    if call_id is not None:
        header["id"] = call_id
    delta: dict = {"tool_calls": [header]}
    if first:
        delta = {"role": "assistant", "content": None, **delta}
    middle = max(1, len(raw) // 2)
    pieces = [raw[:middle], raw[middle:]] if len(raw) > 1 else [raw]
    return [(delta, None)] + [({"tool_calls": [{"index": index, "function": {"arguments": p}}]}, None) for p in pieces]


# --- the server -------------------------------------------------------------------


class ScriptedModel:
    """An OpenAI-compatible server on 127.0.0.1 that answers from a FIFO script."""

    def __init__(self) -> None:
        self.base_url = ""
        self.requests: list[dict] = []
        self.errors: list[str] = []  # failures of the script itself (a raising `dynamic`), content-free
        # time.monotonic() of each client that hung up while a response still streamed.
        self.hangups: list[float] = []
        self._script: deque[Response] = deque()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"<ScriptedModel {self.base_url or 'stopped'} requests={len(self.requests)} pending={self.pending}>"

    @property
    def pending(self) -> int:
        """How many scripted responses no request has taken yet."""
        return len(self._script)

    def reset(self) -> None:
        """Forget the script, the requests and the hang-ups (a server shared by several tests)."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.errors.clear()
            self.hangups.clear()

    def push(self, *responses: Response) -> None:
        """Queue responses; each answers one request, in order."""
        for response in responses:
            if not isinstance(response, Response):
                raise TypeError(f"push() takes Response objects, not {type(response).__name__}")
        with self._lock:
            self._script.extend(responses)

    # The request handler class; None is the streamed one (_Handler). A
    # subclass serving other protocols names its own (tests/scripted_plain.py).
    handler: type | None = None

    def start(self) -> ScriptedModel:
        if self._server is None:
            self._server = _Server(self, self.handler)
            host, port = self._server.server_address[:2]
            self.base_url = f"http://{host}:{port}/v1"
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                name="scripted-model", daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _next(self, body: dict) -> Response:
        with self._lock:
            response = self._script.popleft() if self._script else None
        if response is None:
            return error(500, EXHAUSTED)
        while response.fn is not None:
            try:
                response = response.fn(body)
            except Exception as exc:
                self.errors.append(f"dynamic response raised {type(exc).__name__}")
                return error(500, f"scripted dynamic response raised {type(exc).__name__}")
            if not isinstance(response, Response):
                self.errors.append(f"dynamic response returned {type(response).__name__}, not a Response")
                return error(500, "scripted dynamic response returned no Response")
        return response


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ScriptedModel, handler: type | None = None) -> None:
        self.model = model
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler or _Handler)

    def close_connections(self) -> None:
        """Unblock handler threads waiting on kept-alive connections."""
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:
        # A client that hung up mid-stream is routine here; print nothing.
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format, *args) -> None:
        pass

    def do_GET(self) -> None:
        self._send_error(404, "The scripted model serves only POST /v1/chat/completions.")

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None:
            self._send_error(411, "The scripted model needs a Content-Length.")
            return
        raw = self.rfile.read(int(length))
        if self.path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
            self._send_error(404, "The scripted model serves only POST /v1/chat/completions.")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_error(400, "The request body is not JSON.")
            return
        model = self.server.model
        model.requests.append(body)
        if body.get("stream") is not True:
            self._send_error(400, "The scripted model answers only stream: true requests.")
            return
        response = model._next(body)
        if response.status != 200:
            self._send_error(response.status, response.message)
            return
        try:
            self._stream(response, body, request_number=len(model.requests))
        except OSError:  # the client hung up
            model.hangups.append(time.monotonic())
            self.close_connection = True

    def _stream(self, response: Response, body: dict, *, request_number: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        model = str(body.get("model") or "scripted")
        if response.endless_for:
            self._stream_endless(model, response)
            return
        for number, (delta, finish_reason) in enumerate(response.chunks):
            if number and response.delay:
                time.sleep(response.delay)
            self._write_chunk(_sse(_chunk(model, _with_ids(delta, request_number), finish_reason)))
        if response.abort:
            # Close mid-body: without the terminating `0` chunk the client sees a broken stream.
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if response.done:
            self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream_endless(self, model: str, response: Response) -> None:
        ends = time.monotonic() + response.endless_for
        number = 0
        while time.monotonic() < ends:
            number += 1
            delta = {"content": f"w{number} "} if number > 1 else {"role": "assistant", "content": "w1 "}
            self._write_chunk(_sse(_chunk(model, delta, None)))
            time.sleep(response.delay)
        self._write_chunk(_sse(_chunk(model, {}, "stop")))
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _send_error(self, status: int, message: str) -> None:
        kind = "server_error" if status >= 500 else "invalid_request_error"
        payload = json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


def _with_ids(delta: dict, request_number: int) -> dict:
    """Give tool-call headers without an id a stable one: call_<request>_<index>."""
    calls = delta.get("tool_calls")
    if not calls or all("id" in call or "type" not in call for call in calls):
        return delta
    filled = [
        {**call, "id": f"call_{request_number}_{call['index']}"} if "type" in call and "id" not in call else call
        for call in calls
    ]
    return {**delta, "tool_calls": filled}


def _chunk(model: str, delta: dict, finish_reason: str | None) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


# --- the fixture ------------------------------------------------------------------


@pytest.fixture
def scripted_model(settings):
    """Yield a started ScriptedModel with the chat's model settings pointing at it."""
    server = ScriptedModel().start()
    settings.OPENAI_API_KEY = "scripted"
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_MODEL = "scripted-primary"
    settings.OPENAI_FALLBACK_MODEL = ""
    settings.OPENAI_MAX_RETRIES = 0
    settings.OPENAI_TIMEOUT = 10
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        pytest.fail("the scripted model's script failed: " + "; ".join(server.errors), pytrace=False)
