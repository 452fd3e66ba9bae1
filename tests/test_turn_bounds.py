"""Every turn ends: the output cap, the turn deadline and the loop guard.

Driven by a scripted OpenAI-compatible model over real HTTP
(tests/scripted_model.py) with the real openai client, through the turn
service, the chat socket, the REST API and the eval route.

- Every request to the model carries the output cap (OPENAI_MAX_TOKENS), in
  the field the endpoint reads; reaching it is a cut-off answer that commits
  nothing.
- One deadline (CHAT_TURN_TIMEOUT_SECONDS) covers the turn's model work, a
  fallback included: at the deadline the model's stream is closed, staged
  changes are discarded, the person reads a plain sentence, and their next
  turn starts at once.
- A stream that repeats itself is stopped early as incomplete.
"""
import asyncio
import json
import time

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from chat.llm import ModelSettings
from chat.repetition import RepetitionGuard
from chat.turns import TURN_TIMEOUT_MESSAGE, TurnFailed, run_turn
from tests.chat_helpers import connect, db, demo, fresh_agents, receive_until, snapshot_of, wait_for  # noqa: F401
from tests.scripted_model import endless, error, scripted_model, text, tool_call  # noqa: F401
from tests.test_turn_truth import rows, token_client

FACT = "The build runs on Debian bookworm"
CALL = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}
DEADLINE = 1.0


def caps(server, field="max_tokens") -> list:
    return [body.get(field) for body in server.requests]


async def send(socket, content: str) -> None:
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": content, "conversation_id": None}))


# --- the output cap -----------------------------------------------------------------------------


def test_the_cap_field_follows_the_endpoint():
    def cap_field(base_url: str, field: str = "auto") -> str:
        return ModelSettings(api_key="k", base_url=base_url, model="m", fallback_model="", timeout=1,
                             max_retries=0, max_tokens=10, max_tokens_field=field).cap_field

    assert cap_field("") == "max_completion_tokens"  # the SDK's default endpoint is OpenAI's
    assert cap_field("https://api.openai.com/v1") == "max_completion_tokens"
    assert cap_field("http://127.0.0.1:8080/v1") == "max_tokens"
    assert cap_field("https://example-resource.openai.azure.com/openai/v1") == "max_tokens"
    assert cap_field("https://api.openai.com/v1", "max_tokens") == "max_tokens"
    assert cap_field("http://127.0.0.1:8080/v1", "max_completion_tokens") == "max_completion_tokens"


@pytest.mark.django_db(transaction=True)
async def test_every_request_of_a_turn_carries_the_cap(user, scripted_model, settings):
    settings.OPENAI_MAX_TOKENS = 77
    scripted_model.push(tool_call(CALL), text("Noted."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "committed"
    assert caps(scripted_model) == [77, 77]


@pytest.mark.django_db(transaction=True)
async def test_the_cap_goes_in_the_configured_field(user, scripted_model, settings):
    settings.OPENAI_MAX_TOKENS_FIELD = "max_completion_tokens"
    scripted_model.push(text("Hello."))

    await run_turn(user=user, content="hi")

    assert caps(scripted_model, "max_completion_tokens") == [1024]
    assert caps(scripted_model) == [None]


@pytest.mark.django_db(transaction=True)
async def test_the_socket_sends_the_cap(user, scripted_model, settings):
    settings.OPENAI_MAX_TOKENS = 55
    scripted_model.push(text("Hello."))
    socket = await connect(user)
    await send(socket, "hi")

    assert (await receive_until(socket, "turn_completed"))[-1]["message"]["content"] == "Hello."
    assert caps(scripted_model) == [55]
    await socket.disconnect()


# One request per test: each sync test-client call runs the async view in an event loop of its own.
@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_TURN_RATE="1000/min", OPENAI_MAX_TOKENS=66)
def test_rest_sends_the_cap(user, scripted_model):
    scripted_model.push(text("One."))

    chat = token_client(user).post("/api/chat/turns/", {"content": "hi", "conversation_id": None}, format="json")

    assert chat.status_code == 200
    assert caps(scripted_model) == [66]


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_TURN_RATE="1000/min", OPENAI_MAX_TOKENS=66, EVAL_SERVICE_TOKEN="eval-token")
def test_the_eval_route_sends_the_cap(scripted_model):
    scripted_model.push(text("Two."))

    evaluation = APIClient().post("/api/eval/turns/", {"content": "hi"}, format="json",
                                  HTTP_AUTHORIZATION="Bearer eval-token")

    assert evaluation.status_code == 200
    assert caps(scripted_model) == [66]


@pytest.mark.django_db(transaction=True)
async def test_an_answer_cut_at_the_cap_is_shown_as_cut_off_and_commits_nothing(user, settings):
    settings.OPENAI_MAX_TOKENS = 3  # the demo model counts a word as a token
    frames = []

    async def emit(frame):
        frames.append(frame)

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content=f"remember: {FACT}", emit=emit)

    assert failure.value.code == "model_incomplete"
    assert "cut off" in failure.value.message and "nothing was saved" in failure.value.message
    assert failure.value.memory.status == "discarded"
    assert "".join(f["text"] for f in frames if f["type"] == "delta") == "Done: I added "
    assert frames[-1]["type"] == "turn_failed"
    assert [call.max_tokens for call in (await demo()).calls] == [3, 3]
    assert await db(rows, user) == 0


# --- the turn's deadline ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_stream_that_never_ends_stops_at_the_deadline_and_commits_nothing(user, scripted_model, settings):
    settings.CHAT_TURN_TIMEOUT_SECONDS = DEADLINE
    scripted_model.push(tool_call(CALL), endless())
    shown = []

    async def emit(frame):
        shown.append(frame)

    started = time.monotonic()
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm", emit=emit)
    ended = time.monotonic()

    assert DEADLINE <= ended - started < DEADLINE + 1.5
    assert failure.value.code == "turn_timeout"
    assert failure.value.message == TURN_TIMEOUT_MESSAGE
    assert failure.value.memory.status == "discarded"
    # What streamed before the deadline was shown; the failure frame ends it.
    assert any(f["type"] == "delta" and f["text"] for f in shown) and shown[-1]["type"] == "turn_failed"
    # The model's connection was closed, so the server stopped generating.
    await wait_for(lambda: scripted_model.hangups, timeout=3)
    assert scripted_model.hangups[0] - started < DEADLINE + 1.5
    assert await db(rows, user) == 0
    assert (await snapshot_of(user)).memory == ()


@pytest.mark.django_db(transaction=True)
async def test_the_deadline_covers_a_fallback_model(user, scripted_model, settings):
    settings.CHAT_TURN_TIMEOUT_SECONDS = DEADLINE
    settings.OPENAI_FALLBACK_MODEL = "scripted-fallback"
    scripted_model.push(error(500), endless())

    started = time.monotonic()
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="hi")

    assert failure.value.code == "turn_timeout"
    assert time.monotonic() - started < DEADLINE + 1.5
    assert [body["model"] for body in scripted_model.requests] == ["scripted-primary", "scripted-fallback"]


@pytest.mark.django_db(transaction=True)
async def test_over_the_socket_the_next_turn_starts_at_once_after_the_deadline(user, scripted_model, settings):
    settings.CHAT_TURN_TIMEOUT_SECONDS = DEADLINE
    scripted_model.push(tool_call(CALL), endless(), text("Hello again."))
    socket = await connect(user)
    await send(socket, "our build runs on bookworm")

    frames = await receive_until(socket, "turn_failed")
    failed = frames[-1]
    assert failed["code"] == "turn_timeout" and failed["message"] == TURN_TIMEOUT_MESSAGE
    assert failed["memory"]["status"] == "discarded"
    assert any(frame["type"] == "delta" for frame in frames)

    # The turn slot is free: the next message is a turn, not "a turn is already running".
    await send(socket, "hello?")
    frames = await receive_until(socket, "turn_completed", timeout=5)
    assert frames[0]["type"] == "turn_started"
    assert frames[-1]["message"]["content"] == "Hello again."
    assert await db(rows, user) == 0
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_TURN_RATE="1000/min", CHAT_TURN_TIMEOUT_SECONDS=DEADLINE)
def test_over_rest_the_deadline_answers_504_and_commits_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), endless())

    chat = token_client(user).post("/api/chat/turns/", {"content": "bookworm", "conversation_id": None},
                                   format="json")

    assert chat.status_code == 504
    assert chat.json()["code"] == "turn_timeout" and chat.json()["detail"] == TURN_TIMEOUT_MESSAGE
    assert chat.json()["memory"]["status"] == "discarded"
    assert rows(user) == 0


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_TURN_RATE="1000/min", CHAT_TURN_TIMEOUT_SECONDS=DEADLINE, EVAL_SERVICE_TOKEN="eval-token")
def test_on_the_eval_route_the_deadline_answers_504(scripted_model):
    scripted_model.push(endless())

    evaluation = APIClient().post("/api/eval/turns/", {"content": "hi"}, format="json",
                                  HTTP_AUTHORIZATION="Bearer eval-token")

    assert evaluation.status_code == 504 and evaluation.json()["code"] == "turn_timeout"
    assert evaluation.json()["detail"] == TURN_TIMEOUT_MESSAGE


# --- a stream that repeats itself ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_repeating_stream_is_stopped_early_as_incomplete(user, scripted_model):
    loop = "Here is how you can do it with a list comprehension. " * 200
    scripted_model.push(tool_call(CALL), text(loop, delay=0.002))
    shown = []

    async def emit(frame):
        shown.append(frame)

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm", emit=emit)

    assert failure.value.code == "model_incomplete"
    assert "repeating itself" in failure.value.message
    assert failure.value.memory.status == "discarded"
    streamed = "".join(f["text"] for f in shown if f["type"] == "delta")
    assert streamed.count("list comprehension") < 20  # stopped long before the 200 repeats
    await wait_for(lambda: scripted_model.hangups, timeout=3)
    assert await db(rows, user) == 0


def test_the_loop_guard_counts_long_units_only():
    code = "```c\nint main() {\n" + "    }\n" * 40 + "    return 0;\n" * 3 + "```\n"
    guard = RepetitionGuard()
    assert not guard.feed(code)

    cycle = RepetitionGuard()
    lines = "The first line of the cycle.\nThe second line of the cycle.\n"
    assert not cycle.feed(lines * 11)
    assert cycle.feed(lines)  # the 12th time round

    prose = RepetitionGuard()
    # Split across chunks anywhere, case and spacing aside, it is the same sentence.
    answer = "I am sorry about that.  i AM sorry about that. " * 6  # 12 times
    looped = [prose.feed(answer[i:i + 7]) for i in range(0, len(answer), 7)]
    assert looped[-1] and not any(looped[:-1])


def test_a_long_answer_without_repeats_is_not_a_loop():
    guard = RepetitionGuard()
    answer = "".join(f"Step {n}: run the command for part {n} of the build.\n" for n in range(300))
    assert not guard.feed(answer)
