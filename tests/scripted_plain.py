"""The scripted model's non-streamed protocols, for code that does not stream.

`PlainScriptedModel` is a `tests.scripted_model.ScriptedModel` (the same
FIFO script, builders, `requests` and `errors`) that answers, over real
HTTP on 127.0.0.1, the two requests a non-streaming client sends:

- `POST /v1/chat/completions` without `stream`: one `chat.completion`
  object, the scripted chunks joined into one message (text, tool calls,
  the finish reason);
- `POST /v1/responses` without `stream` (the Responses API, and the OpenAI
  Agents SDK's default model): one `response` object, its text as an
  `output_text` message and each tool call as a `function_call` item;
  a `length` finish is status `incomplete`.

Streamed requests belong to ScriptedModel; scripts that only a stream can
play (`cut`, `endless`) answer 400 here. Nothing here prints a body.
"""
from __future__ import annotations

import json

from tests.scripted_model import Response, ScriptedModel, _Handler

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"


def _joined(response: Response, request_number: int) -> tuple[str, list[dict], str]:
    """The scripted chunks as one answer: (text, tool calls, finish reason)."""
    content, calls, finish = "", {}, None
    for delta, finish_reason in response.chunks:
        content += delta.get("content") or ""
        for part in delta.get("tool_calls") or ():
            call = calls.setdefault(part["index"], {"id": "", "name": "", "arguments": ""})
            call["id"] = part.get("id") or call["id"] or f"call_{request_number}_{part['index']}"
            function = part.get("function") or {}
            call["name"] += function.get("name") or ""
            call["arguments"] += function.get("arguments") or ""
        finish = finish_reason or finish
    return content, [calls[index] for index in sorted(calls)], finish or "stop"


def chat_completion(model: str, content: str, calls: list[dict], finish: str) -> dict:
    message: dict = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [{"id": call["id"], "type": "function",
                                  "function": {"name": call["name"], "arguments": call["arguments"]}}
                                 for call in calls]
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def responses_response(model: str, content: str, calls: list[dict], finish: str, number: int) -> dict:
    output: list[dict] = []
    if content:
        output.append({"type": "message", "id": f"msg_{number}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": content, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{number}_{index}", "call_id": call["id"], "name": call["name"],
                "arguments": call["arguments"], "status": "completed"} for index, call in enumerate(calls)]
    incomplete = finish == "length"
    return {
        "id": f"resp_{number}", "object": "response", "created_at": 0, "model": model,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "output": output, "error": None, "instructions": None, "metadata": {}, "parallel_tool_calls": True,
        "temperature": None, "top_p": None, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }


class _PlainHandler(_Handler):
    def do_GET(self) -> None:
        self._send_error(404, f"The scripted model serves only POST {CHAT} and {RESPONSES}, without stream.")

    def do_POST(self) -> None:
        length = self.headers.get("Content-Length")
        if length is None:
            self._send_error(411, "The scripted model needs a Content-Length.")
            return
        raw = self.rfile.read(int(length))
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in (CHAT, RESPONSES):
            self.do_GET()
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_error(400, "The request body is not JSON.")
            return
        model = self.server.model
        model.requests.append(body)
        if body.get("stream"):
            self._send_error(400, "This scripted model answers only requests without stream (see ScriptedModel).")
            return
        response = model._next(body)
        if response.status != 200:
            self._send_error(response.status, response.message)
            return
        if response.abort or response.endless_for:
            self._send_error(400, "A cut or endless script needs a stream (ScriptedModel).")
            return
        number = len(model.requests)
        content, calls, finish = _joined(response, number)
        name = str(body.get("model") or "scripted")
        payload = (chat_completion(name, content, calls, finish) if path == CHAT
                   else responses_response(name, content, calls, finish, number))
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


class PlainScriptedModel(ScriptedModel):
    """A ScriptedModel for non-streamed Chat Completions and Responses API requests."""

    handler = _PlainHandler
