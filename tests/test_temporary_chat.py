"""Temporary chats (issue 12 item 2): no memory read or written, nothing stored.

Over the real socket (the full ASGI application) and the REST route, with a
scripted OpenAI-compatible model over real HTTP: the model is offered no
memory and no tool, no conversation or message row is written, the chat's
earlier messages live in the socket only and go when it closes.
"""
import json

import pytest
from rest_framework.test import APIClient

from agentmemory.models import MemoryEvent
from chat.models import Conversation, Message
from tests.chat_helpers import aseed, connect, db, fresh_agents, receive_until, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

SENTINEL = "Keeps bees on the roof"
CALL = {"operations": [{"target": "memory", "action": "add", "content": "The build runs on Debian bookworm"}]}


def stored_rows(user) -> tuple[int, int]:
    return (Conversation.objects.filter(user=user).count(), Message.objects.filter(conversation__user=user).count())


async def send(communicator, **frame) -> None:
    await communicator.send_to(text_data=json.dumps({"type": "user_message", **frame}))


async def test_a_temporary_chat_uses_no_memory_and_stores_nothing(user, scripted_model):
    await aseed(user, user_entries=[SENTINEL])
    scripted_model.push(text("Hello there."), text("Still here."))
    communicator = await connect(user)

    await send(communicator, content="hello", temporary=True)
    first = await receive_until(communicator, "turn_completed")
    started, done = first[0], first[-1]
    await send(communicator, content="and again", temporary=True, temporary_id=done["temporary_id"])
    second = (await receive_until(communicator, "turn_completed"))[-1]
    await communicator.disconnect()

    assert started["type"] == "turn_started" and started["temporary"] is True
    assert started["conversation_id"] is None and started["temporary_id"] == done["temporary_id"]
    assert done["temporary"] is True and done["conversation_id"] is None and done["message"]["id"] is None
    assert done["memory"]["status"] == "disabled" and done["memory"]["code"] == "temporary"
    assert second["temporary_id"] == done["temporary_id"]
    for request in scripted_model.requests:
        assert "tools" not in request
        leaked = SENTINEL in request["messages"][0]["content"]
        assert not leaked, "memory reached a temporary chat's prompt"
    # The second turn saw the first one's messages, from the socket.
    assert [m["role"] for m in scripted_model.requests[1]["messages"]] == ["system", "user", "assistant", "user"]
    assert await db(stored_rows, user) == (0, 0)
    assert (await snapshot_of(user)).user == (SENTINEL,)
    assert await db(lambda: MemoryEvent.objects.filter(user=user).count()) == 1  # the seed only


async def test_a_temporary_chat_cannot_write_memory_even_if_the_model_calls_the_tool(user, scripted_model):
    scripted_model.push(tool_call(CALL), text("Saved."))
    communicator = await connect(user)

    await send(communicator, content="our build runs on bookworm", temporary=True)
    done = (await receive_until(communicator, "turn_completed"))[-1]
    await communicator.disconnect()

    assert done["memory"]["status"] == "disabled"
    assert (await snapshot_of(user)).memory == ()
    assert await db(stored_rows, user) == (0, 0)


async def test_a_temporary_chat_ends_with_its_socket(user, scripted_model):
    scripted_model.push(text("Hello."))
    first = await connect(user)
    await send(first, content="hello", temporary=True)
    temporary_id = (await receive_until(first, "turn_completed"))[-1]["temporary_id"]
    await first.disconnect()

    second = await connect(user)
    await send(second, content="do you remember?", temporary=True, temporary_id=temporary_id)
    [error] = await receive_until(second, "error")
    await second.disconnect()

    assert error["code"] == "temporary_chat_gone"
    assert "start a new one" in error["message"]
    assert len(scripted_model.requests) == 1  # nothing was sent to the model for the gone chat


async def test_a_new_temporary_chat_replaces_the_sockets_previous_one(user, scripted_model):
    scripted_model.push(text("One."), text("Two."))
    communicator = await connect(user)
    await send(communicator, content="first", temporary=True)
    old = (await receive_until(communicator, "turn_completed"))[-1]["temporary_id"]
    await send(communicator, content="second", temporary=True)
    new = (await receive_until(communicator, "turn_completed"))[-1]["temporary_id"]
    await send(communicator, content="back to the first", temporary=True, temporary_id=old)
    [error] = await receive_until(communicator, "error")
    await communicator.disconnect()

    assert new != old and error["code"] == "temporary_chat_gone"
    # The new chat started afresh: the model saw only its one message.
    assert [m["role"] for m in scripted_model.requests[1]["messages"]] == ["system", "user"]


@pytest.mark.parametrize("frame, code", [
    ({"temporary": True, "conversation_id": 1}, "invalid_conversation_id"),
    ({"temporary": "yes"}, "invalid_temporary"),
    ({"temporary": True, "temporary_id": 7}, "invalid_temporary_id"),
    ({"temporary": True, "temporary_id": "x" * 65}, "invalid_temporary_id"),
    ({"temporary_id": "abc"}, "invalid_temporary_id"),
])
async def test_bad_temporary_frames_are_refused_clearly(user, frame, code):
    communicator = await connect(user)

    await send(communicator, content="hello", **frame)
    [error] = await receive_until(communicator, "error")
    await communicator.disconnect()

    assert error["code"] == code and error["message"]
    assert await db(stored_rows, user) == (0, 0)


# --- REST ------------------------------------------------------------------------------


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_temporary_rest_turn_stores_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), text("Saved."))

    response = client_for(user).post("/api/chat/turns/", {"content": "hello", "temporary": True}, format="json")

    assert response.status_code == 200, response.json().get("code")
    body = response.json()
    assert body["temporary"] is True and body["conversation_id"] is None and body["message_id"] is None
    assert body["memory"]["status"] == "disabled" and body["memory"]["code"] == "temporary"
    assert stored_rows(user) == (0, 0)
    assert "tools" not in scripted_model.requests[0]


@pytest.mark.parametrize("extra", [{"temporary": True, "conversation_id": 1}, {"temporary": "yes"},
                                   {"temporary": 1}])
def test_a_bad_temporary_rest_turn_is_refused(user, scripted_model, extra):
    response = client_for(user).post("/api/chat/turns/", {"content": "hello", **extra}, format="json")

    assert response.status_code == 400
    assert stored_rows(user) == (0, 0) and scripted_model.requests == []
