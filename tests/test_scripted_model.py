"""The scripted model server against the real openai client (no database)."""
from __future__ import annotations

import httpx2
import openai
import pytest

from tests.scripted_model import ScriptedModel, cut, dynamic, error, text, tool_call, tool_calls


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
