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

A step is protocol-neutral:

- `Say(text)` answers (`finished=False`: cut off at the output limit:
  finish_reason "length", status "incomplete", stop_reason "max_tokens");
- `Call(name, arguments)` calls one tool (arguments a dict, or a JSON
  string sent as it is);
- `Answer(text, calls, finish=..., done=..., pace=...)` is the whole form
  that Say and Call shorten: text, then any number of `Call`s in one answer,
  ending with `finish` ("stop", "length", "tool_calls", "content_filter", or
  None: a stream with no finish reason; by default "tool_calls" after calls,
  else "stop"); a stream leaves out its `data: [DONE]` with `done=False`
  and waits `pace` seconds between chunks;
- `Fail(status, message)` answers an HTTP error in the protocol's shape;
- `Hang(seconds)` answers nothing until the server stops, the client hangs
  up or the time is up (then 503);
- `Cut(text)` sends the text, then closes the connection mid-body (a stream
  without its finish reason, `[DONE]` or terminating chunk; a JSON body
  shorter than its Content-Length): a protocol error in the client;
- `Endless(pace, at_most)` streams distinct words ("w1 w2 ...") with no end
  until the client hangs up or `at_most` seconds pass (then "stop"), as a
  model that never stops; not streamed, it is a `Hang(at_most)`;
- `Rule(fn)` picks the step from the request (`fn(seen: Seen) -> step`).

Text, in Say, Answer and Cut, is a string (streamed word by word) or a
sequence of pieces (streamed as given, one delta each). Every request lands
in `requests` as a `Seen` (protocol, the decoded body, and the neutral view
of it; a Seen also reads as its body: `seen["messages"]`, `"tools" in
seen`); `hangups` holds the `time.monotonic()` of each client that hung up
before its answer was whole; `errors` the script's own failures (a rule that
raised or returned no step), content-free. An empty script answers 500
"script exhausted". Nothing here prints or logs a body.

    with ScriptedServer() as server:
        server.push(Call("memory_update", {...}), Say("Noted."))
        AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0)
        AsyncAnthropic(base_url=server.anthropic_url, api_key="x", max_retries=0)
"""
from __future__ import annotations

import json
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT = "chat"
RESPONSES = "responses"
MESSAGES = "messages"
PATHS = {"/v1/chat/completions": CHAT, "/v1/responses": RESPONSES, "/v1/messages": MESSAGES}
EXHAUSTED = "script exhausted"
AUTO = "auto"  # Answer.finish: "tool_calls" after calls, else "stop"
# OpenAI's object names; joined so that no string here reads as a dotted path into a `chat` package
# (tests/test_import_graph.py looks for those).
COMPLETION = ".".join(("chat", "completion"))
COMPLETION_CHUNK = ".".join(("chat", "completion", "chunk"))
_WORD = re.compile(r"\S+\s*|\s+")
# How each finish reads in the Responses API (status incomplete) and in Anthropic's Messages API.
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}

Text = str | Sequence[str]  # a string (streamed word by word) or its pieces (streamed as given)


# --- the script ---------------------------------------------------------------


def _text(text: Text) -> str | tuple[str, ...]:
    return text if isinstance(text, str) else tuple(text)


@dataclass(frozen=True)
class Say:
    """Answer with text; `finished=False` stops it at the output limit."""

    text: Text = field(repr=False)
    finished: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", _text(self.text))


@dataclass(frozen=True)
class Call:
    """Call one tool with these arguments (a dict, or a JSON string sent as it is; for Anthropic, the input)."""

    name: str
    arguments: dict | str = field(repr=False)


@dataclass(frozen=True)
class Answer:
    """One whole answer: text, then `calls`, ending with `finish` (see the module's docstring)."""

    text: Text = field(default="", repr=False)
    calls: Sequence[Call] = ()
    finish: str | None = AUTO
    done: bool = True  # a stream ends with `data: [DONE]`
    pace: float = 0.0  # seconds between streamed chunks

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", _text(self.text))
        object.__setattr__(self, "calls", tuple(self.calls))
        for call in self.calls:
            if not isinstance(call, Call):
                raise TypeError(f"Answer(calls=...) takes Call steps, not {type(call).__name__}")


@dataclass(frozen=True)
class Fail:
    """Answer an HTTP error in the protocol's error shape."""

    status: int = 500
    message: str = "scripted failure"


@dataclass(frozen=True)
class Hang:
    """Answer nothing until the server stops, the client hangs up or `seconds` pass (then 503)."""

    seconds: float = 15.0


@dataclass(frozen=True)
class Cut:
    """Send `text`, then close the connection mid-body: a protocol error in the client."""

    text: Text = field(default="partial answer", repr=False)
    pace: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", _text(self.text))


@dataclass(frozen=True)
class Endless:
    """Stream distinct words until the client hangs up or `at_most` seconds pass: a model that never stops."""

    pace: float = 0.02
    at_most: float = 15.0


@dataclass(frozen=True)
class Rule:
    """Choose the step from the request: `fn(seen) -> step`."""

    fn: Callable[[Seen], object] = field(repr=False)


Step = Say | Call | Answer | Fail | Hang | Cut | Endless | Rule
STEPS = (Say, Call, Answer, Fail, Hang, Cut, Endless, Rule)


@dataclass(frozen=True)
class Seen(Mapping[str, Any]):
    """One request as the model saw it: the protocol, the body, and a neutral view.

    `system` is the system prompt (instructions), `last_user` the text of the
    person's latest message, `after_tool` whether the request ends with a
    tool's result, `tools` the names of the tools offered (and for Anthropic
    the types too, e.g. "memory_20250818"), `tool_results` the text of the
    results after the person's latest message. A Seen also reads as its
    decoded body (`seen["messages"]`, `seen.get("tools")`, `"tools" in seen`).
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

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.body)

    def __len__(self) -> int:
        return len(self.body)


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
        self.hangups: list[float] = []  # time.monotonic() of each client that hung up before its answer was whole
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
            if not isinstance(step, STEPS):
                raise TypeError(f"push() takes script steps, not {type(step).__name__}")
        with self._lock:
            self._script.extend(steps)

    def reset(self) -> None:
        """Forget the script, the requests, the errors and the hang-ups (a server shared by several tests)."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.errors.clear()
            self.hangups.clear()

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

    def _take(self, seen: Seen) -> tuple[Say | Call | Answer | Fail | Hang | Cut | Endless, int]:
        """Record the request; return its step and its number (1 for the first request)."""
        with self._arrived:
            self.requests.append(seen)
            number = len(self.requests)
            self._arrived.notify_all()
            step = self._script.popleft() if self._script else None
        if step is None:
            return Fail(500, EXHAUSTED), number
        while isinstance(step, Rule):
            try:
                step = step.fn(seen)
            except Exception as exc:
                self.errors.append(f"a rule raised {type(exc).__name__}")
                return Fail(500, "a scripted rule raised"), number
            if not isinstance(step, STEPS):
                self.errors.append(f"a rule returned {type(step).__name__}, not a step")
                return Fail(500, "a scripted rule returned no step"), number
        return step, number

    def _hung_up(self) -> None:
        if not self._released.is_set():  # a stopping server closes connections itself
            with self._lock:
                self.hangups.append(time.monotonic())


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
            body = None
        if not isinstance(body, dict):
            self._error(protocol, 400, "The request body is not a JSON object.")
            return
        model = self.server.model
        step, number = model._take(_seen(protocol, body))
        if model.delay:
            time.sleep(model.delay)
        try:
            self._play(protocol, body, step, number)
        except OSError:
            model._hung_up()
            self.close_connection = True

    def _play(self, protocol: str, body: dict, step: Say | Call | Answer | Fail | Hang | Cut | Endless,
              number: int) -> None:
        streamed = bool(body.get("stream"))
        if isinstance(step, Endless) and not (streamed and protocol == CHAT):
            step = Hang(step.at_most)
        if isinstance(step, Hang):
            if self._hold(step.seconds):
                return
            step = Fail(503)
        if isinstance(step, Fail):
            self._error(protocol, step.status, step.message)
            return
        if streamed and protocol != CHAT:
            self._error(protocol, 400, "The scripted model streams Chat Completions only.")
            return
        name = str(body.get("model") or "scripted")
        if isinstance(step, Endless):
            self._stream_endless(name, step)
        elif isinstance(step, Cut):
            self._cut(protocol, name, step, number, streamed)
        elif streamed:
            self._stream_chat(name, _whole(step), number)
        else:
            try:
                payload = _answer(protocol, name, _whole(step), number)
            except ValueError:
                self.server.model.errors.append("a call's arguments are not a JSON object")
                self._error(protocol, 500, "scripted arguments are not a JSON object")
                return
            self._json(200, payload)

    def _hold(self, seconds: float) -> bool:
        """Wait until the server stops, `seconds` pass, or the client hangs up (True, recorded)."""
        model = self.server.model
        ends = time.monotonic() + seconds
        while not model._released.is_set():
            left = ends - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable:
                try:
                    gone = self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    gone = True
                if gone:
                    model._hung_up()
                    self.close_connection = True
                    return True
                model._released.wait(min(left, 0.05))  # a request sent ahead on the connection: keep waiting
        return False

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

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _deltas(self, name: str, deltas: list[dict], pace: float) -> None:
        for index, delta in enumerate(deltas):
            if index and pace:
                time.sleep(pace)
            self._chunk(_sse(_chat_chunk(name, delta, None)))

    def _end_stream(self, name: str, finish: str | None, done: bool) -> None:
        if finish is not None:
            self._chunk(_sse(_chat_chunk(name, {}, finish)))
        if done:
            self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _stream_chat(self, name: str, answer: Answer, number: int) -> None:
        self._start_stream()
        self._deltas(name, _chat_deltas(answer, number), answer.pace)
        self._end_stream(name, _finish(answer), answer.done)

    def _stream_endless(self, name: str, step: Endless) -> None:
        self._start_stream()
        released = self.server.model._released
        ends = time.monotonic() + step.at_most
        number = 0
        while time.monotonic() < ends:
            if released.is_set():
                self.close_connection = True
                return
            number += 1
            delta = {"role": "assistant", "content": "w1 "} if number == 1 else {"content": f"w{number} "}
            self._chunk(_sse(_chat_chunk(name, delta, None)))
            time.sleep(step.pace)
        self._end_stream(name, "stop", True)

    def _cut(self, protocol: str, name: str, step: Cut, number: int, streamed: bool) -> None:
        if streamed:
            self._start_stream()
            self._deltas(name, _chat_deltas(Answer(step.text), number), step.pace)
        else:
            data = json.dumps(_answer(protocol, name, Answer(step.text), number)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
        # Close mid-body: without the rest (a stream's terminating chunk) the client sees a broken answer.
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


# --- the answers ----------------------------------------------------------------


def _whole(step: Say | Call | Answer) -> Answer:
    if isinstance(step, Say):
        return Answer(step.text, finish="stop" if step.finished else "length")
    if isinstance(step, Call):
        return Answer(calls=(step,))
    return step


def _finish(answer: Answer) -> str | None:
    if answer.finish == AUTO:
        return "tool_calls" if answer.calls else "stop"
    return answer.finish


def _joined(text: Text) -> str:
    return text if isinstance(text, str) else "".join(text)


def _has_text(answer: Answer) -> bool:
    """Whether the answer carries a text part: any text, or no calls (then an empty text)."""
    return bool(answer.text) or not answer.calls


def _raw(arguments: dict | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _input(arguments: dict | str) -> dict:
    """A call's arguments as Anthropic's tool_use input; ValueError if they are no JSON object."""
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _chat_deltas(answer: Answer, number: int) -> list[dict]:
    """The streamed deltas: the text in its pieces, then each call (a header, then its arguments in halves)."""
    deltas: list[dict] = []
    if _has_text(answer):
        pieces = _WORD.findall(answer.text) if isinstance(answer.text, str) else list(answer.text)
        deltas = [{"content": piece} for piece in pieces or [""]]
    for index, call in enumerate(answer.calls):
        header: dict = {"tool_calls": [{"index": index, "id": f"call_{number}_{index}", "type": "function",
                                        "function": {"name": call.name, "arguments": ""}}]}
        deltas.append(header if deltas else {"content": None, **header})
        raw = _raw(call.arguments)
        half = max(1, len(raw) // 2)
        deltas += [{"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                   for part in ([raw[:half], raw[half:]] if len(raw) > 1 else [raw])]
    deltas[0] = {"role": "assistant", **deltas[0]}
    return deltas


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _chat_chunk(name: str, delta: dict, finish: str | None) -> dict:
    return {"id": "chatcmpl-scripted", "object": COMPLETION_CHUNK, "created": 0, "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _answer(protocol: str, name: str, answer: Answer, number: int) -> dict:
    """The whole (non-streamed) answer in `protocol`'s shape."""
    text, finish = _joined(answer.text), _finish(answer)
    if protocol == CHAT:
        message: dict = {"role": "assistant", "content": text if _has_text(answer) else None}
        if answer.calls:
            message["tool_calls"] = [{"id": f"call_{number}_{index}", "type": "function",
                                      "function": {"name": call.name, "arguments": _raw(call.arguments)}}
                                     for index, call in enumerate(answer.calls)]
        return {"id": f"chatcmpl-{number}", "object": COMPLETION, "created": 0, "model": name,
                "choices": [{"index": 0, "message": message, "finish_reason": finish or "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
    if protocol == RESPONSES:
        output: list[dict] = []
        if _has_text(answer):
            output.append({"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                           "content": [{"type": "output_text", "text": text, "annotations": []}]})
        output += [{"type": "function_call", "id": f"fc_{number}_{index}", "call_id": f"call_{number}_{index}",
                    "name": call.name, "arguments": _raw(call.arguments), "status": "completed"}
                   for index, call in enumerate(answer.calls)]
        reason = _INCOMPLETE.get(finish or "")
        return {
            "id": f"resp_{number}", "object": "response", "created_at": 0, "model": name,
            "status": "incomplete" if reason else "completed",
            "incomplete_details": {"reason": reason} if reason else None,
            "output": output, "error": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
            "temperature": None, "top_p": None, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
        }
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if _has_text(answer) else []
    content += [{"type": "tool_use", "id": f"toolu_{number}_{index}", "name": call.name,
                 "input": _input(call.arguments)} for index, call in enumerate(answer.calls)]
    return {"id": f"msg_{number}", "type": "message", "role": "assistant", "model": name, "content": content,
            "stop_reason": _STOP_REASONS.get(finish or "stop", "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}
