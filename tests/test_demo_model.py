"""The offline demo model speaks the streaming Chat Completions protocol to the
real openai client: commands, tool-call fragments, confirmations that reflect
the tool result, deliberate failures, and word-by-word streaming."""
import time

import httpx2
import pytest
from django.test import override_settings

from agentmemory.prompt import compile_memory_prompt
from agentmemory.rules import Operation, Snapshot
from agentmemory.scope import memory_scope
from chat.agents import chat_agent
from chat.demo_model import Command, parse_command, parse_memory_block
from chat.turns import run_turn
from tests.chat_helpers import aseed, demo, fresh_agents, snapshot_of  # noqa: F401

SEEN = parse_memory_block(compile_memory_prompt(snapshot=Snapshot(user=("Works in Berlin",), memory=("Uses tea",))))


@pytest.mark.parametrize(
    "text, command",
    [
        ("remember: Deploys on Fridays", Command("memory", "add", content="Deploys on Fridays")),
        ("Remember About Me: prefers tabs", Command("user", "add", content="prefers tabs")),
        ("forget: tea", Command("memory", "remove", match="tea")),
        ("forget: Berlin", Command("user", "remove", match="Berlin")),
        ("correct: Berlin => Lisbon", Command("user", "replace", match="Berlin", content="Works in Lisbon")),
        ("correct: nowhere => somewhere", Command("memory", "replace", match="nowhere", content="somewhere")),
        ("remember:   ", None),
        ("hello there", None),
    ],
)
def test_commands_are_parsed_against_the_memory_the_model_sees(text, command):
    assert parse_command(text, SEEN) == command


def test_the_demo_reads_back_the_block_the_prompt_compiles():
    snapshot = Snapshot(user=("line one\nline two", "second"), memory=("note",))
    seen = parse_memory_block(compile_memory_prompt(snapshot=snapshot))
    assert (seen.status, seen.user, seen.memory) == ("available", snapshot.user, snapshot.memory)
    unavailable = parse_memory_block(compile_memory_prompt(snapshot=None))
    assert (unavailable.status, unavailable.user, unavailable.memory) == ("unavailable", (), ())
    assert parse_memory_block("You are a helpful assistant.") is None


async def test_tool_call_fragments_are_assembled_into_one_staged_operation():
    agent = await chat_agent()
    request_agent = agent.for_request(memory_prompt=compile_memory_prompt(snapshot=Snapshot()))
    emitted = []

    async def emit(frame):
        emitted.append(frame)

    with memory_scope(1, True, snapshot=Snapshot()) as scope:
        result = await request_agent.run_attempt(
            model=agent.models[0], history=[{"role": "user", "content": "remember about me: prefers tabs"}], emit=emit
        )
        assert scope.ledger.operations == [Operation("user", "add", content="prefers tabs")]
    assert [event.status for event in result.tool_events] == ["staged"]
    assert result.text.startswith("Done: I added that to your profile.")
    assert [call.round for call in (await demo()).calls] == [0, 1]


@pytest.mark.django_db(transaction=True)
async def test_correct_and_forget_change_the_entry_they_name(user):
    await aseed(user, user_entries=["Works in Berlin"], memory_entries=["Uses tea breaks"])
    corrected = await run_turn(user=user, content="correct: Berlin => Lisbon")
    forgotten = await run_turn(user=user, content="forget: tea")

    assert (corrected.memory.status, forgotten.memory.status) == ("committed", "committed")
    assert await snapshot_of(user) == Snapshot(user=("Works in Lisbon",), memory=())


@pytest.mark.django_db(transaction=True)
async def test_confirmation_reflects_a_rejected_tool_call_in_plain_words(user):
    await aseed(user, memory_entries=["Uses tea breaks"])
    result = await run_turn(user=user, content="forget: coffee")

    assert [event.code for event in result.tool_events] == ["no_match"]
    # The person reads a sentence, never the tool's model-facing error.
    assert result.reply == "I could not find that in my notes, so nothing changed."
    assert result.memory.status == "nothing_to_commit"


@pytest.mark.django_db(transaction=True)
async def test_forgetting_from_an_empty_memory_is_nothing_to_remove(user):
    result = await run_turn(user=user, content="forget: something never stored")

    assert [event.status for event in result.tool_events] == ["unchanged"]
    assert result.reply == "There was nothing like that in my memory, so nothing changed."
    assert result.memory.status == "nothing_to_commit"


@pytest.mark.django_db(transaction=True)
async def test_fail_marker_fails_the_round_after_the_tool_call(user):
    from chat.turns import TurnFailed

    with pytest.raises(TurnFailed):
        await run_turn(user=user, content="remember: x [[fail]]")
    assert [(call.round, call.status) for call in (await demo()).calls] == [(0, 200), (1, 500)]


@pytest.mark.django_db(transaction=True)
async def test_replies_stream_word_by_word_with_the_configured_delay(user):
    frames = []

    async def emit(frame):
        frames.append(frame)

    with override_settings(DEMO_MODEL_DELAY_MS=40):
        started = time.monotonic()
        result = await run_turn(user=user, content="hello", emit=emit)
        elapsed = time.monotonic() - started
    deltas = [frame["text"] for frame in frames if frame["type"] == "delta"]
    words = result.reply.split()
    assert len(deltas) == len(words) and "".join(deltas).strip() == result.reply
    assert elapsed >= (len(words) - 1) * 0.040


async def test_the_demo_serves_only_chat_completions():
    model = await demo()
    response = await model.handle(httpx2.Request("GET", "http://demo-model.invalid/v1/models"))
    assert response.status_code == 404
