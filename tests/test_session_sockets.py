"""Sockets end with the session: logout, password change, "sign out
everywhere", deactivation and deletion close the person's open sockets
(chat/signals.py over the channel layer), the socket re-reads its session
before each turn, and a turn re-reads it and checks that the account is
active before it commits (so a lost message still commits nothing)."""
import json

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client, override_settings

from agentmemory.models import MemoryDocument, Outcome
from chat.consumers import CLOSE_UNAUTHENTICATED
from chat.models import Conversation
from chat.turns import TurnFailed, run_turn
from tests.chat_helpers import connect, db, events_of, fresh_agents, receive_until  # noqa: F401
from tests.scripted_model import dynamic, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The deploy key rotates monthly"


async def _send(socket, content: str) -> None:
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": content, "conversation_id": None}))


async def assert_closed_for_session(socket) -> None:
    frame = json.loads(await socket.receive_from(timeout=5))
    assert (frame["type"], frame["code"]) == ("socket_closed", "session_ended")
    assert await socket.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}


def logout_elsewhere(user) -> int:
    client = Client()
    client.force_login(user)
    return client.post("/accounts/logout/").status_code


def change_password(user) -> None:
    user.set_password("a-brand-new-password-42")
    user.save()


def deactivate(user) -> None:
    user.is_active = False
    user.save()


def sign_out_everywhere(user) -> None:
    client = Client()
    client.force_login(user)
    assert client.post("/accounts/sign-out-everywhere/", {"password": "pw-alice-123"}).status_code == 302


# Signals run in a sync_to_async thread, as in a real request, so the in-memory layer's loop is the test's.
@pytest.mark.parametrize("action", [logout_elsewhere, change_password, sign_out_everywhere, deactivate,
                                    lambda user: user.delete()],
                         ids=["logout", "password_change", "sign_out_everywhere", "deactivation", "deletion"])
async def test_session_end_closes_every_socket_of_the_person_and_no_other(user, other_user, action):
    mine = [await connect(user), await connect(user)]
    theirs = await connect(other_user)
    await database_sync_to_async(action)(user)
    for socket in mine:
        await assert_closed_for_session(socket)
    assert await theirs.receive_nothing(timeout=0.2)
    await _send(theirs, "hello")
    assert (await receive_until(theirs, "turn_completed"))[-1]["type"] == "turn_completed"
    await theirs.disconnect()


async def test_an_unrelated_save_keeps_the_sockets_open(user):
    socket = await connect(user)

    def rename():
        user.first_name = "Alice"
        user.save()

    await database_sync_to_async(rename)()
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()


async def test_a_running_turn_stops_and_saves_nothing_when_the_session_ends(user):
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=200):
        await _send(socket, f"remember: {FACT}")
        await receive_until(socket, "tool")  # staged
        await database_sync_to_async(logout_elsewhere)(user)
        frames = []
        while True:
            message = await socket.receive_output(timeout=5)
            if message["type"] == "websocket.close":
                assert message["code"] == CLOSE_UNAUTHENTICATED
                break
            frames.append(json.loads(message["text"]))
    kinds = [(frame["type"], frame.get("code")) for frame in frames]
    assert kinds[-1] == ("socket_closed", "session_ended")
    assert ("turn_failed", "cancelled") in kinds
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    assert await events_of(user, Outcome.COMMITTED) == []


async def test_a_session_gone_without_a_message_stops_the_next_turn(user):
    """No signal (the session row expired or was deleted by hand): the socket re-reads it before a turn."""
    socket = await connect(user)
    await db(lambda: Session.objects.all().delete())
    conversations = await db(Conversation.objects.count)
    await _send(socket, "hello")
    await assert_closed_for_session(socket)
    assert await db(Conversation.objects.count) == conversations


async def test_deactivated_without_a_message_the_next_turn_is_refused(user):
    socket = await connect(user)
    await db(lambda: get_user_model().objects.filter(pk=user.pk).update(is_active=False))  # no signal
    await _send(socket, "hello")
    await assert_closed_for_session(socket)


async def test_a_turn_rechecks_the_account_before_it_commits(user):
    """Deactivated while the answer streams (no signal reaches the socket): the staged change is discarded."""
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=100):
        await _send(socket, f"remember: {FACT}")
        await receive_until(socket, "tool")
        await db(lambda: get_user_model().objects.filter(pk=user.pk).update(is_active=False))
        failed = (await receive_until(socket, "turn_failed"))[-1]
    assert failed["code"] == "session_ended"
    assert failed["memory"]["status"] == "discarded"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    # The turn's re-read of its session sees the account closed first (the commit's lock would too).
    assert [event.error_code for event in await events_of(user, Outcome.DISCARDED)] == ["session_ended"]
    await socket.disconnect()


async def test_without_a_credential_check_the_commit_still_refuses_a_closed_account(user, scripted_model):
    """The commit's lock reads whether the account is active: a turn run without a transport's check."""

    def deactivate_then_answer(body):
        try:
            get_user_model().objects.filter(pk=user.pk).update(is_active=False)
        finally:
            connection.close()
        return text("Saved.")

    scripted_model.push(tool_call({"operations": [{"target": "memory", "action": "add", "content": FACT}]}),
                        dynamic(deactivate_then_answer))
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="the deploy key rotates monthly")
    assert failure.value.code == "session_ended"
    assert failure.value.memory.code == "account_closed"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0


async def test_a_turn_rechecks_its_session_before_it_commits(user, monkeypatch):
    """The password changed while the answer streams and the channel layer lost the message."""
    monkeypatch.setattr("chat.signals.close_sockets", lambda user_id, reason: False)
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=100):
        await _send(socket, f"remember: {FACT}")
        await receive_until(socket, "tool")
        await database_sync_to_async(change_password)(user)
        failed = (await receive_until(socket, "turn_failed"))[-1]
    assert failed["code"] == "session_ended"
    assert failed["memory"]["status"] == "discarded"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    assert [event.error_code for event in await events_of(user, Outcome.DISCARDED)] == ["session_ended"]
    await socket.disconnect()
