"""The agent's streamed round reads chunks as plain JSON through the openai client.

`chat.llm.LLM.stream_chat` sends the request with the SDK's public
`client.post(..., stream=True, stream_cls=ChunkStream)` (the SDK's stream
class with a lean byte decoder, chat/sse.py): the client
still owns auth, the base URL, retries, timeouts and errors, but the body is
our JSON as built and each chunk is the decoded object. These tests hold it
to what `chat.completions.create` did, shape by shape: text, tool calls in
pieces, several calls, errors, retries, cut streams, an error event inside
the stream, missing finish reasons, and the looser shapes some
OpenAI-compatible servers send. No database.
"""
from __future__ import annotations

import json

import httpx2
import openai
import pytest

from chat.agent import Agent, ModelError
from chat.llm import LLM
from tests.scripted_model import ScriptedModel, cut, error, text, tool_call, tool_calls

TOOL = {"type": "function", "function": {"name": "memory_update", "parameters": {"type": "object"}}}
HISTORY = [
    {"role": "user", "content": "first"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "memory_update", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"success\": true}"},
    {"role": "user", "content": "second"},
]


class Frames:
    def __init__(self):
        self.frames: list[dict] = []

    async def __call__(self, frame: dict) -> None:
        self.frames.append(frame)

    @property
    def shown(self) -> str:
        return "".join(frame["text"] for frame in self.frames if frame["type"] == "delta")


@pytest.fixture
async def server():
    with ScriptedModel() as model:
        yield model


def agent_for(client: openai.AsyncOpenAI):
    agent = Agent(name="t", llm=LLM(client=client, model="m"), memory_tool=True)
    request_agent = agent.for_request(memory_prompt="memory block")
    assert request_agent.tools, "the memory tool is offered"
    return request_agent


async def round_on(request_agent, *, tools: bool = True):
    emit = Frames()
    reply = await request_agent._stream_round(model="m", messages=list(HISTORY), emit=emit, tools=tools)
    return reply, emit


@pytest.fixture
async def scripted(server):
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    yield agent_for(client)
    await client.close()


# --- shapes over real HTTP ------------------------------------------------------------


async def test_chunks_arrive_as_plain_json_objects(server):
    server.push(text("Hello there."))
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    try:
        stream = await LLM(client=client, model="m").stream_chat(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
        async with stream:
            chunks = [chunk async for chunk in stream]
    finally:
        await client.close()
    assert chunks and all(type(chunk) is dict for chunk in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Hello there."
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_text_streams_and_finishes(server, scripted):
    server.push(text("Hello there, friend."))
    reply, emit = await round_on(scripted)
    assert (reply.text, reply.calls, reply.finish_reason) == ("Hello there, friend.", [], "stop")
    assert emit.shown == "Hello there, friend."


async def test_a_tool_call_in_pieces_after_text(server, scripted):
    arguments = {"operations": [{"target": "memory", "action": "add", "content": "x"}]}
    server.push(tool_call(arguments, text_before="Saving. "))
    reply, _ = await round_on(scripted)
    assert reply.text == "Saving. " and reply.finish_reason == "tool_calls"
    (call,) = reply.calls
    assert call["id"] == "call_1_0" and call["type"] == "function"
    assert call["function"]["name"] == "memory_update"
    assert json.loads(call["function"]["arguments"]) == arguments


async def test_several_calls_keep_their_index_order(server, scripted):
    server.push(tool_calls([("memory_update", {"a": 1}), ("other", '{"b": 2}')]))
    reply, _ = await round_on(scripted)
    assert [c["function"]["name"] for c in reply.calls] == ["memory_update", "other"]
    assert [json.loads(c["function"]["arguments"]) for c in reply.calls] == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("finish", [None, "length", "content_filter"])
async def test_finish_reasons_are_reported_as_sent(server, scripted, finish):
    server.push(text("Partial", finish_reason=finish))
    reply, _ = await round_on(scripted)
    assert reply.finish_reason == finish and reply.text == "Partial"


@pytest.mark.parametrize(("status", "code"), [(400, "model_error"), (429, "model_error"), (500, "model_error")])
async def test_http_errors_are_model_errors(server, scripted, status, code):
    server.push(error(status))
    with pytest.raises(ModelError) as failure:
        await round_on(scripted)
    assert failure.value.code == code
    assert isinstance(failure.value.__cause__, openai.APIStatusError)


async def test_a_cut_stream_is_unreachable(server, scripted):
    server.push(cut("partial answer"))
    with pytest.raises(ModelError) as failure:
        await round_on(scripted)
    assert failure.value.code == "model_unreachable"


async def test_the_client_still_retries(server):
    server.push(error(500), text("Second try."))
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=1, timeout=5)
    try:
        reply, _ = await round_on(agent_for(client))
    finally:
        await client.close()
    assert reply.text == "Second try." and len(server.requests) == 2


async def test_the_body_is_what_the_typed_create_sent(server):
    """The same request through `chat.completions.create` and through `stream_chat`."""
    server.push(text("a"), text("b"))
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0, timeout=5)
    try:
        typed = await client.chat.completions.create(model="m", messages=HISTORY, tools=[TOOL], stream=True,
                                                     max_tokens=1024)
        async for _ in typed:
            pass
        raw = await LLM(client=client, model="m").stream_chat(
            {"model": "m", "messages": HISTORY, "stream": True, "tools": [TOOL]})
        async with raw:
            async for _ in raw:
                pass
    finally:
        await client.close()
    # stream_chat adds the output cap to every body (LLM.max_tokens, 1024 by default).
    assert server.requests[0] == server.requests[1]


async def test_without_tools_no_tools_key_is_sent(server, scripted):
    server.push(text("Plain."))
    await round_on(scripted, tools=False)
    assert "tools" not in server.requests[0] and server.requests[0]["stream"] is True


# --- transport details and looser servers (a mock transport) ---------------------------


def sse(*payloads) -> bytes:
    return b"".join(
        b"data: " + (p if isinstance(p, bytes) else json.dumps(p).encode()) + b"\n\n" for p in payloads
    )


def mock_agent(body: bytes, seen: list):
    def handle(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = openai.AsyncOpenAI(
        base_url="http://model.invalid/v1/", api_key="secret-key", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )
    return client, agent_for(client)


def chunk(delta: dict | None = None, finish: str | None = None, **extra) -> dict:
    choice = {"index": 0, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    return {"id": "x", "object": "chat.completion.chunk", "choices": [choice], **extra}


async def test_auth_and_base_url_come_from_the_client():
    seen: list = []
    client, request_agent = mock_agent(sse(chunk({"content": "hi"}, "stop"), b"[DONE]"), seen)
    try:
        reply, _ = await round_on(request_agent)
    finally:
        await client.close()
    assert reply.text == "hi"
    (request,) = seen
    assert str(request.url) == "http://model.invalid/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer secret-key"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content)["stream"] is True


async def test_an_error_event_inside_the_stream_is_unreachable():
    client, request_agent = mock_agent(
        sse(chunk({"content": "hi"}), {"error": {"message": "overloaded", "type": "server_error"}}), [])
    try:
        with pytest.raises(ModelError) as failure:
            await round_on(request_agent)
    finally:
        await client.close()
    assert failure.value.code == "model_unreachable"


async def test_looser_shapes_are_read():
    """Chunks with no choices (usage), no delta, a call without index, arguments as an object."""
    body = sse(
        {"id": "x", "object": "chat.completion.chunk", "choices": []},
        chunk(None),
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"id": "a", "type": "function", "function": {"name": "memory_update"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": {"operations": []}}}]}),
        chunk({}, "tool_calls"),
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        b"[DONE]",
    )
    client, request_agent = mock_agent(body, [])
    try:
        reply, emit = await round_on(request_agent)
    finally:
        await client.close()
    assert reply.finish_reason == "tool_calls" and emit.frames == []
    (call,) = reply.calls
    assert call["id"] == "a" and call["function"] == {"name": "memory_update", "arguments": '{"operations": []}'}


async def test_a_stream_without_done_still_ends():
    client, request_agent = mock_agent(sse(chunk({"content": "ok"}, "stop")), [])
    try:
        reply, _ = await round_on(request_agent)
    finally:
        await client.close()
    assert (reply.text, reply.finish_reason) == ("ok", "stop")
