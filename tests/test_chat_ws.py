"""The chat socket on the full ASGI stack (origin check, session auth, routing):
frames, one turn at a time, cancel and disconnect, memory_changed fan-out."""
import asyncio
import json

import pytest
from django.test import override_settings

from agentmemory.models import MemoryDocument, Outcome
from tests.chat_helpers import (  # noqa: F401
    aseed,
    connect,
    db,
    events_of,
    fresh_agents,
    receive_until,
    snapshot_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The staging database is called orbit"


async def send(communicator, frame) -> None:
    await communicator.send_to(text_data=json.dumps(frame))


async def test_anonymous_socket_is_closed_with_4401():
    socket = await connect(None)
    closing = await socket.receive_output(timeout=5)
    assert closing == {"type": "websocket.close", "code": 4401}
    await socket.wait()


async def test_cross_origin_socket_is_refused(user):
    from channels.testing import WebsocketCommunicator

    from config.asgi import application
    from tests.chat_helpers import session_cookie

    cookie = f"sessionid={await session_cookie(user)}".encode()
    socket = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://evil.example"), (b"cookie", cookie)]
    )
    connected, _ = await socket.connect()
    assert connected is False
    await socket.disconnect()


async def test_turn_streams_started_deltas_tool_and_completed(user):
    socket = await connect(user)
    await send(socket, {"type": "user_message", "content": f"remember: {FACT}", "conversation_id": None})
    frames = await receive_until(socket, "turn_completed")

    types = [frame["type"] for frame in frames]
    assert types[0] == "turn_started" and types[1] == "tool" and types[-1] == "turn_completed"
    assert "delta" in types
    tool = frames[1]
    assert tool["message"] == "Memory: 1 change ready, saved when this reply completes."
    assert FACT not in json.dumps(tool)  # metadata only
    completed = frames[-1]
    assert completed["memory"]["status"] == "committed"
    assert completed["conversation_id"] == frames[0]["conversation_id"]
    streamed = "".join(frame["text"] for frame in frames if frame["type"] == "delta")
    assert streamed.strip() == completed["message"]["content"]
    assert (await snapshot_of(user)).memory == (FACT,)
    await socket.disconnect()


@pytest.mark.parametrize(
    "raw, code",
    [
        ("{not json", "malformed_json"),
        ("[1, 2]", "malformed_frame"),
        (json.dumps({"type": "shout"}), "unknown_type"),
        (json.dumps({"type": "user_message", "content": ""}), "invalid_content"),
        (json.dumps({"type": "user_message", "content": "hi", "conversation_id": "7"}), "invalid_conversation_id"),
    ],
)
async def test_bad_frames_get_an_error_and_the_socket_stays_open(user, raw, code):
    socket = await connect(user)
    await socket.send_to(text_data=raw)
    frame = json.loads(await socket.receive_from(timeout=5))
    assert frame["type"] == "error" and frame["code"] == code

    await send(socket, {"type": "user_message", "content": "hello", "conversation_id": None})
    assert (await receive_until(socket, "turn_completed"))[-1]["type"] == "turn_completed"
    await socket.disconnect()


@override_settings(CHAT_MAX_MESSAGE_CHARS=100)
async def test_oversized_messages_get_an_error(user):
    socket = await connect(user)
    await send(socket, {"type": "user_message", "content": "x" * 101, "conversation_id": None})
    frame = json.loads(await socket.receive_from(timeout=5))
    assert (frame["type"], frame["code"]) == ("error", "message_too_long")

    await socket.send_to(text_data="y" * 100_000)
    frame = json.loads(await socket.receive_from(timeout=5))
    assert (frame["type"], frame["code"]) == ("error", "frame_too_large")
    assert await db(MemoryDocument.objects.count) == 0
    await socket.disconnect()


async def test_second_message_during_a_turn_gets_an_error(user):
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=50):
        await send(socket, {"type": "user_message", "content": "hello there", "conversation_id": None})
        await receive_until(socket, "turn_started")
        await send(socket, {"type": "user_message", "content": "and again", "conversation_id": None})
        frames = await receive_until(socket, "turn_completed")
    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [frame["code"] for frame in errors] == ["turn_in_progress"]
    await socket.disconnect()


async def test_disconnected_stream_commits_nothing(user):
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=300):
        await send(socket, {"type": "user_message", "content": f"remember: {FACT}", "conversation_id": None})
        await receive_until(socket, "tool")  # staged; the confirmation is still streaming
        # Returns once the consumer has finished, i.e. after the turn was cancelled.
        await socket.disconnect(timeout=5)
    discarded = await events_of(user, Outcome.DISCARDED)
    assert [event.error_code for event in discarded] == ["cancelled"]
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    assert await events_of(user, Outcome.COMMITTED) == []


async def test_cancel_frame_stops_the_turn_and_commits_nothing(user):
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=300):
        await send(socket, {"type": "user_message", "content": f"remember: {FACT}", "conversation_id": None})
        await receive_until(socket, "tool")
        await send(socket, {"type": "cancel"})
        failed = (await receive_until(socket, "turn_failed"))[-1]
    assert failed["code"] == "cancelled"
    assert failed["memory"]["status"] == "discarded"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0

    # The socket stays usable after a cancel.
    await send(socket, {"type": "user_message", "content": "hello", "conversation_id": failed["conversation_id"]})
    assert (await receive_until(socket, "turn_completed"))[-1]["type"] == "turn_completed"
    await socket.disconnect()


async def test_failed_turn_over_the_socket_commits_nothing(user):
    socket = await connect(user)
    await send(socket, {"type": "user_message", "content": f"remember: {FACT} [[fail]]", "conversation_id": None})
    failed = (await receive_until(socket, "turn_failed"))[-1]
    assert failed["code"] == "model_failed_after_staging"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    await socket.disconnect()


async def test_memory_changed_reaches_a_second_connection_of_the_same_user(user, other_user):
    first = await connect(user)
    second = await connect(user)
    stranger = await connect(other_user)

    await send(first, {"type": "user_message", "content": f"remember: {FACT}", "conversation_id": None})
    await receive_until(first, "turn_completed")
    changed = json.loads(await second.receive_from(timeout=5))

    assert changed["type"] == "memory_changed"
    assert changed["usage"]["memory"]["used"] == len(FACT)
    assert FACT not in json.dumps(changed)  # usage only
    assert await stranger.receive_nothing(timeout=0.3)
    for socket in (first, second, stranger):
        await socket.disconnect()


async def test_conversation_of_another_user_gets_an_error(user, other_user):
    theirs = await connect(other_user)
    await send(theirs, {"type": "user_message", "content": "hello", "conversation_id": None})
    conversation_id = (await receive_until(theirs, "turn_completed"))[-1]["conversation_id"]

    mine = await connect(user)
    await send(mine, {"type": "user_message", "content": "hello", "conversation_id": conversation_id})
    frame = json.loads(await mine.receive_from(timeout=5))
    assert (frame["type"], frame["code"]) == ("error", "conversation_not_found")
    for socket in (theirs, mine):
        await socket.disconnect()


async def test_socket_turns_of_two_users_run_concurrently_and_stay_apart(user, other_user):
    await aseed(user, memory_entries=["ALICE-ONLY-5d1e"])
    await aseed(other_user, memory_entries=["BOB-ONLY-c47b"])
    alice, bob = await connect(user), await connect(other_user)
    with override_settings(DEMO_MODEL_DELAY_MS=5):
        for socket in (alice, bob):
            await send(socket, {"type": "user_message", "content": "what do you know?", "conversation_id": None})
        alice_frames, bob_frames = await asyncio.gather(
            receive_until(alice, "turn_completed"), receive_until(bob, "turn_completed")
        )
    alice_reply = alice_frames[-1]["message"]["content"]
    bob_reply = bob_frames[-1]["message"]["content"]
    assert "ALICE-ONLY-5d1e" in alice_reply and "BOB-ONLY-c47b" not in alice_reply
    assert "BOB-ONLY-c47b" in bob_reply and "ALICE-ONLY-5d1e" not in bob_reply
    for socket in (alice, bob):
        await socket.disconnect()
