"""The scripted model server against the real openai client (no database).

There is one scripted model server, the package's
(`agentmemory.testing.model_server.ScriptedServer`, which other projects
test with and the contract suite drives); `tests.scripted_model` only names
its steps for this project's streamed tests.
"""
from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import httpx2
import openai
import pytest

import tests.scripted_model
from agentmemory.testing import model_server
from agentmemory.testing.model_server import Answer, Call, Cut, Endless, Hang, Say, ScriptedServer
from tests.scripted_model import ScriptedModel, cut, dynamic, endless, error, pieces, text, tool_call, tool_calls

ROOT = Path(__file__).resolve().parent.parent
SERVER_BASES = {"HTTPServer", "ThreadingHTTPServer", "BaseHTTPRequestHandler", "SimpleHTTPRequestHandler",
                "StreamRequestHandler", "BaseRequestHandler", "TCPServer", "ThreadingTCPServer"}
# HTTP servers in the tests that are not a scripted model.
NOT_A_SCRIPTED_MODEL = {
    "tests/test_telemetry.py": "an OTLP collector that receives the exported spans",
    "tests/test_telemetry_turns.py": "an OTLP collector that receives the exported spans",
    "tests/test_sse.py": "a malformed stream, one event that never ends, written byte by byte",
}


@pytest.fixture
async def server():
    with ScriptedModel() as model:
        yield model


@pytest.fixture
async def client(server):
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=5)
    yield client
    await client.close()


async def round_of(client, *, model="m") -> tuple[str, dict, list]:
    """Run one streamed round; return (text, tool calls by index, finish reasons)."""
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True,
        tools=[{"type": "function", "function": {"name": "memory_update", "parameters": {"type": "object"}}}],
    )
    content, calls, finishes = [], {}, []
    async for chunk in stream:
        choice = chunk.choices[0]
        content.append(choice.delta.content or "")
        for fragment in choice.delta.tool_calls or ():
            call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += fragment.id or ""
            call["name"] += fragment.function.name or ""
            call["arguments"] += fragment.function.arguments or ""
        if choice.finish_reason:
            finishes.append(choice.finish_reason)
    return "".join(content), calls, finishes


async def test_text_streams_word_by_word_and_ends_with_stop(server, client):
    server.push(text("Hello there, friend."), text("Again."))
    assert await round_of(client, model="first") == ("Hello there, friend.", {}, ["stop"])
    # The kept-alive connection serves the next round.
    assert await round_of(client) == ("Again.", {}, ["stop"])
    assert [body["model"] for body in server.requests] == ["first", "m"]
    assert all(body["stream"] is True and body["tools"] for body in server.requests)


async def test_tool_calls_assemble_from_fragments(server, client):
    server.push(
        tool_call({"operations": [{"target": "memory", "action": "add", "content": "x"}]}, text_before="Saving. "),
        tool_calls([("memory_update", {"a": 1}), ("other", '{"b": 2}')]),
    )
    content, calls, finishes = await round_of(client)
    assert (content, finishes) == ("Saving. ", ["tool_calls"])
    assert calls[0]["name"] == "memory_update" and calls[0]["id"] == "call_1_0"
    assert calls[0]["arguments"] == '{"operations": [{"target": "memory", "action": "add", "content": "x"}]}'
    _, calls, _ = await round_of(client)
    assert [(c["id"], c["name"], c["arguments"]) for c in calls.values()] == [
        ("call_2_0", "memory_update", '{"a": 1}'), ("call_2_1", "other", '{"b": 2}'),
    ]


async def test_a_stream_may_end_without_finish_reason_or_done(server, client):
    server.push(text("No ending.", finish_reason=None, done=False))
    assert await round_of(client) == ("No ending.", {}, [])


async def test_a_cut_stream_is_a_connection_error_after_the_partial_text(server, client):
    server.push(cut("partial answer"))
    stream = await client.chat.completions.create(model="m", messages=[], stream=True)
    seen = []
    with pytest.raises(openai.APIConnectionError) as caught:
        async for chunk in stream:
            seen.append(chunk.choices[0].delta.content)
    assert "".join(seen) == "partial answer"
    assert isinstance(caught.value.__cause__, httpx2.RemoteProtocolError)


async def test_errors_and_an_exhausted_script_are_http_statuses(server, client):
    server.push(error(500), error(429, "slow down"), dynamic(lambda body: text(body["model"])))
    for status in (500, 429):
        with pytest.raises(openai.APIStatusError) as caught:
            await round_of(client)
        assert caught.value.status_code == status
    assert await round_of(client, model="echoed") == ("echoed", {}, ["stop"])
    with pytest.raises(openai.InternalServerError, match="script exhausted"):
        await round_of(client)
    assert len(server.requests) == 4 and server.pending == 0 and not server.errors


# --- one server -----------------------------------------------------------------------


def http_servers(path: Path) -> list[str]:
    """The classes in `path` built on the standard library's HTTP or socket servers."""
    source = path.read_text()
    if "http.server" not in source and "socketserver" not in source:
        return []
    tree = ast.parse(source, filename=str(path))
    return [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            and any((base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")) in SERVER_BASES
                    for base in node.bases)]


def test_the_project_scripts_the_packages_server_and_defines_none_of_its_own():
    assert issubclass(ScriptedModel, ScriptedServer)
    assert ScriptedModel.__mro__[1] is ScriptedServer, "a thin name over the package's server, nothing between"
    assert set(vars(ScriptedModel)) <= {"__module__", "__doc__", "__firstlineno__", "__static_attributes__",
                                        "base_url"}
    assert http_servers(Path(tests.scripted_model.__file__)) == []
    assert not (ROOT / "tests" / "scripted_plain.py").exists()
    # The builders return the package's steps, so the contract suite and our tests script the same behaviours.
    steps = [text("a"), pieces(["a"]), tool_call({}), tool_calls([("t", {})]), error(500), cut(), endless(),
             dynamic(lambda body: text("a"))]
    assert all(isinstance(step, model_server.STEPS) for step in steps)
    # The package's module is the one model server of the tests; the others serve what no script can.
    servers = {path.relative_to(ROOT).as_posix() for path in (*ROOT.glob("tests/**/*.py"),
                                                               *ROOT.glob("agentmemory/testing/*.py"))
               if http_servers(path)}
    assert "agentmemory/testing/model_server.py" in servers
    assert servers <= {"agentmemory/testing/model_server.py", *NOT_A_SCRIPTED_MODEL}, (
        "a second server in the tests: script the package's ScriptedServer (or say here why it cannot)")


# --- what the project's tests need of it, on the other protocols too -------------------------


async def test_a_seen_request_reads_as_its_decoded_body(server, client):
    server.push(text("a"))
    await round_of(client, model="x")
    (seen,) = server.requests
    assert seen["model"] == "x" and seen.get("stream") is True and "tools" in seen and "nothing" not in seen
    assert seen == seen and dict(seen) == seen.body


async def test_pieces_stream_as_given(server, client):
    server.push(pieces(["He", "llo wo", "rld"]), pieces([]))
    stream = await client.chat.completions.create(model="m", messages=[], stream=True)
    assert [chunk.choices[0].delta.content async for chunk in stream if chunk.choices[0].delta.content] == [
        "He", "llo wo", "rld"]
    assert await round_of(client) == ("", {}, ["stop"])


async def test_an_endless_stream_ends_when_the_client_hangs_up_and_says_when(server, client):
    server.push(endless(delay=0.01))
    stream = await client.chat.completions.create(model="m", messages=[], stream=True)
    words = []
    async for chunk in stream:
        words.append(chunk.choices[0].delta.content)
        if len(words) == 3:
            break
    await stream.close()
    hung_up = time.monotonic()
    for _ in range(100):
        if server.hangups:
            break
        await asyncio.sleep(0.02)
    assert words == ["w1 ", "w2 ", "w3 "]
    assert len(server.hangups) == 1 and server.hangups[0] - hung_up < 1


async def test_a_hang_ends_when_the_client_hangs_up():
    with ScriptedServer() as server:
        server.push(Hang(10))
        async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0, timeout=0.3) as c:
            with pytest.raises(openai.APITimeoutError):
                await c.chat.completions.create(model="m", messages=[])
        for _ in range(100):
            if server.hangups:
                break
            await asyncio.sleep(0.02)
        assert len(server.hangups) == 1


async def test_one_script_answers_every_protocol_unstreamed():
    with ScriptedServer() as server:
        calls = (Call("memory_update", {"a": 1}), Call("other", '{"b": 2}'))
        server.push(Answer("Saving. ", calls), Answer("", calls), Say("Cut short", finished=False),
                    Answer("Filtered", finish="content_filter"))
        async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0, timeout=5) as c:
            done = await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            answered = await c.responses.create(model="m", input="hi")
            cut_short = await c.responses.create(model="m", input="hi")
            filtered = await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    message = done.choices[0].message
    assert (message.content, done.choices[0].finish_reason) == ("Saving. ", "tool_calls")
    assert [(t.id, t.function.name, t.function.arguments) for t in message.tool_calls] == [
        ("call_1_0", "memory_update", '{"a": 1}'), ("call_1_1", "other", '{"b": 2}')]
    assert [(item.type, item.call_id, item.name) for item in answered.output] == [
        ("function_call", "call_2_0", "memory_update"), ("function_call", "call_2_1", "other")]
    assert (cut_short.status, cut_short.incomplete_details.reason) == ("incomplete", "max_output_tokens")
    assert filtered.choices[0].finish_reason == "content_filter"


async def test_a_cut_unstreamed_answer_is_a_connection_error():
    with ScriptedServer() as server:
        server.push(Cut("partial answer"))
        async with openai.AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0, timeout=5) as c:
            with pytest.raises(openai.APIConnectionError):
                await c.chat.completions.create(model="m", messages=[])


def test_steps_refuse_what_is_not_a_step():
    with pytest.raises(TypeError):
        Answer("x", ("not a call",))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ScriptedServer().push("text")  # type: ignore[arg-type]
    assert Endless().at_most == 15.0 and Cut().text == "partial answer"
