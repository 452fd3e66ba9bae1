"""A scripted model over real HTTP, one script for three protocols.

`ScriptedServer` listens on 127.0.0.1 (a free port, a background thread,
standard library only) and answers, each from the next step of one FIFO
script:

- `POST /v1/chat/completions`, streamed (Server-Sent Events over chunked
  transfer encoding) or not: the OpenAI client, this repository's chat,
  Pydantic AI's OpenAI model;
- `POST /v1/responses`, not streamed: the OpenAI Agents SDK's default model;
- `POST /v1/messages`, not streamed: Anthropic's client, tool_use blocks
  included (the memory tool `memory_20250818` is declared like any tool).

A step is protocol-neutral: `Say(text)` answers (`finished=False`: cut off
at the output limit: finish_reason "length", status "incomplete",
stop_reason "max_tokens"), `Call(name, arguments)` calls one tool,
`Fail(status)` answers an HTTP error, `Hang(seconds)` answers nothing until
the server stops or the time is up, and `Rule(fn)` picks the step from the
request (`fn(seen: Seen) -> step`). Every request lands in `requests` as a
`Seen` (protocol, the decoded body, and the neutral view of it); an empty
script answers 500. Nothing here prints or logs a body.

    with ScriptedServer() as server:
        server.push(Call("memory_update", {...}), Say("Noted."))
        AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0)
        AsyncAnthropic(base_url=server.anthropic_url, api_key="x", max_retries=0)
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
from typing import Any

CHAT = "chat"
RESPONSES = "responses"
MESSAGES = "messages"
PATHS = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES}
EXHAUSTED = "script exhausted"
# OpenAI's object names; joined so that no string here reads as a dotted path into a `chat` package
# (tests/test_import_graph.py looks for those).
COMPLETION = ".".join(("chat", "completion"))
COMPLETION_CHUNK = ".".join(("chat", "completion", "chunk"))
_WORD = re.compile(r"\S+\s*|\s+")


# --- the script ---------------------------------------------------------------


@dataclass(frozen=True)
class Say:
    """Answer with text; `finished=False` stops it at the output limit."""

    text: str = field(repr=False)
    finished: bool = True


@dataclass(frozen=True)
class Call:
    """Call one tool with these arguments (a dict; for Anthropic, the tool_use input)."""

    name: str
    arguments: dict = field(repr=False)


@dataclass(frozen=True)
class Fail:
    """Answer an HTTP error in the protocol's error shape."""

    status: int = 500


@dataclass(frozen=True)
class Hang:
    """Answer nothing until the server stops or `seconds` pass (then 503): a model that never ends."""

    seconds: float = 15.0


@dataclass(frozen=True)
class Rule:
    """Choose the step from the request: `fn(seen) -> step`."""

    fn: Callable[[Seen], object] = field(repr=False)


Step = Say | Call | Fail | Hang | Rule


@dataclass(frozen=True)
class Seen:
    """One request as the model saw it: the protocol, the body, and a neutral view.

    `system` is the system prompt (instructions), `last_user` the text of the
    person's latest message, `after_tool` whether the request ends with a
    tool's result, `tools` the names of the tools offered (and for Anthropic
    the types too, e.g. "memory_20250818"), `tool_results` the text of the
    results after the person's latest message.
    """

    protocol: str
    body: dict = field(repr=False)
    system: str = field(default="", repr=False)
    last_user: str = field(default="", repr=False)
    after_tool: bool = False
    tools: tuple[str, ...] = ()
    tool_results: tuple[str, ...] = field(default=(), repr=False)

    @property
    def text(self) -> str:
        """The whole request as text, to search for a value."""
        return json.dumps(self.body, ensure_ascii=False)


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(_text_of(part) for part in content)
    if isinstance(content, dict):
        if content.get("type") in ("text", "input_text", "output_text"):
            return str(content.get("text", ""))
        if content.get("type") == "tool_result":
            return ""
    return ""


def _seen(protocol: str, body: dict) -> Seen:
    if protocol == CHAT:
        messages = body.get("messages") or []
        system = "\n".join(_text_of(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        last = users[-1] if users else -1
        results = tuple(_text_of(m.get("content")) for m in messages[last + 1:] if m.get("role") == "tool")
        return Seen(CHAT, body, system, _text_of(messages[last]["content"]) if users else "",
                    bool(messages) and messages[-1].get("role") == "tool",
                    tuple(t.get("function", {}).get("name", "") for t in body.get("tools") or ()), results)
    if protocol == RESPONSES:
        items = body.get("input")
        items = [{"role": "user", "content": items}] if isinstance(items, str) else list(items or [])
        system = str(body.get("instructions") or "") + "".join(
            _text_of(i.get("content")) for i in items if i.get("role") in ("system", "developer"))
        users = [i for i, item in enumerate(items) if item.get("role") == "user"]
        last = users[-1] if users else -1
        results = tuple(str(i.get("output", "")) for i in items[last + 1:] if i.get("type") == "function_call_output")
        return Seen(RESPONSES, body, system, _text_of(items[last].get("content")) if users else "",
                    bool(items) and items[-1].get("type") == "function_call_output",
                    tuple(t.get("name", "") for t in body.get("tools") or ()), results)
    messages = body.get("messages") or []
    system = _text_of(body.get("system") or "")

    def results_of(message: dict) -> list[str]:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        return [_text_of(b.get("content")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]

    people = [i for i, m in enumerate(messages) if m.get("role") == "user" and not results_of(m)]
    last = people[-1] if people else -1
    results = tuple(r for m in messages[last + 1:] if m.get("role") == "user" for r in results_of(m))
    tools = tuple(n for t in body.get("tools") or () for n in (t.get("name", ""), t.get("type", "")) if n)
    return Seen(MESSAGES, body, system, _text_of(messages[last].get("content")) if people else "",
                bool(messages) and messages[-1].get("role") == "user" and bool(results_of(messages[-1])),
                tools, results)


# --- the server ---------------------------------------------------------------


class ScriptedServer:
    """A model on 127.0.0.1 answering OpenAI- and Anthropic-style requests from one FIFO script."""

    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay  # seconds before each answer, so concurrent turns interleave
        self.requests: list[Seen] = []
        self.errors: list[str] = []  # failures of the script itself, content-free
        self._script: deque = deque()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._released = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def __repr__(self) -> str:
        return f"<ScriptedServer port={self.port} requests={len(self.requests)} pending={len(self._script)}>"

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pending(self) -> int:
        return len(self._script)

    def push(self, *steps: Step) -> None:
        for step in steps:
            if not isinstance(step, (Say, Call, Fail, Hang, Rule)):
                raise TypeError(f"push() takes script steps, not {type(step).__name__}")
        with self._lock:
            self._script.extend(steps)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.errors.clear()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> bool:
        """Block until `count` requests arrived (True) or `timeout` passed (False)."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)

    def start(self) -> ScriptedServer:
        if self._server is None:
            self._released.clear()
            self._server = _Server(self)
            self.port = self._server.server_address[1]
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name="scripted-server", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._released.set()
        server.shutdown()
        server.server_close()
        server.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _take(self, seen: Seen) -> Say | Call | Fail | Hang:
        with self._arrived:
            self.requests.append(seen)
            self._arrived.notify_all()
            step = self._script.popleft() if self._script else None
        if step is None:
            return Fail(500)
        while isinstance(step, Rule):
            try:
                step = step.fn(seen)
            except Exception as exc:
                self.errors.append(f"a rule raised {type(exc).__name__}")
                return Fail(500)
            if not isinstance(step, (Say, Call, Fail, Hang, Rule)):
                self.errors.append(f"a rule returned {type(step).__name__}, not a step")
                return Fail(500)
        return step


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, model: ScriptedServer) -> None:
        self.model = model
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def close_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address) -> None:
        pass  # a client that hung up is routine; print nothing


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
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
        self._error(MESSAGES if "messages" in self.path else CHAT, 404, "The scripted model serves POST only.")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        protocol = PATHS.get(self.path.split("?", 1)[0].rstrip("/"))
        if protocol is None:
            self._error(CHAT, 404, "The scripted model serves /v1/chat/completions, /v1/responses and /v1/messages.")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(protocol, 400, "The request body is not JSON.")
            return
        model = self.server.model
        step = model._take(_seen(protocol, body))
        number = len(model.requests)
        if model.delay:
            time.sleep(model.delay)
        if isinstance(step, Hang):
            model._released.wait(step.seconds)
            step = Fail(503)
        if isinstance(step, Fail):
            self._error(protocol, step.status, "scripted failure")
            return
        name = str(body.get("model") or "scripted")
        try:
            if protocol == CHAT and body.get("stream"):
                self._stream_chat(name, step, number)
            elif body.get("stream"):
                self._error(protocol, 400, "The scripted model streams Chat Completions only.")
            else:
                self._json(200, _answer(protocol, name, step, number))
        except OSError:
            self.close_connection = True

    # --- writing -------------------------------------------------------------------

    def _json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, protocol: str, status: int, message: str) -> None:
        if protocol == MESSAGES:
            kind = "api_error" if status >= 500 else "invalid_request_error"
            payload = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            kind = "server_error" if status >= 500 else "invalid_request_error"
            payload = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._json(status, payload)

    def _stream_chat(self, name: str, step: Say | Call, number: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if isinstance(step, Say):
            deltas = [{"content": piece} for piece in (_WORD.findall(step.text) or [""])]
            finish = "stop" if step.finished else "length"
        else:
            arguments = json.dumps(step.arguments)
            half = max(1, len(arguments) // 2)
            deltas = [{"tool_calls": [{"index": 0, "id": f"call_{number}_0", "type": "function",
                                       "function": {"name": step.name, "arguments": ""}}]}]
            deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": part}}]}
                       for part in (arguments[:half], arguments[half:]) if part]
            finish = "tool_calls"
        deltas[0] = {"role": "assistant", **deltas[0]}
        for delta in deltas:
            self._chunk(_sse(_chat_chunk(name, delta, None)))
        self._chunk(_sse(_chat_chunk(name, {}, finish)))
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chat_chunk(name: str, delta: dict, finish: str | None) -> dict:
    return {"id": "chatcmpl-scripted", "object": COMPLETION_CHUNK, "created": 0, "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _answer(protocol: str, name: str, step: Say | Call, number: int) -> dict:
    """The whole (non-streamed) answer of `step` in `protocol`'s shape."""
    call_id = f"call_{number}_0"
    if protocol == CHAT:
        message: dict = {"role": "assistant", "content": step.text if isinstance(step, Say) else None}
        if isinstance(step, Call):
            message["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": step.name, "arguments": json.dumps(step.arguments)}}]
        finish = "tool_calls" if isinstance(step, Call) else "stop" if step.finished else "length"
        return {"id": f"chatcmpl-{number}", "object": COMPLETION, "created": 0, "model": name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    if protocol == RESPONSES:
        if isinstance(step, Say):
            output = [{"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": step.text, "annotations": []}]}]
        else:
            output = [{"type": "function_call", "id": f"fc_{number}", "call_id": call_id, "name": step.name,
                       "arguments": json.dumps(step.arguments), "status": "completed"}]
        cut = isinstance(step, Say) and not step.finished
        return {
            "id": f"resp_{number}", "object": "response", "created_at": 0, "model": name,
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": output, "error": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
            "temperature": None, "top_p": None, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }
    if isinstance(step, Say):
        content: list[dict[str, Any]] = [{"type": "text", "text": step.text}]
        stop = "end_turn" if step.finished else "max_tokens"
    else:
        content = [{"type": "tool_use", "id": f"toolu_{number}", "name": step.name, "input": step.arguments}]
        stop = "tool_use"
    return {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": name, "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
