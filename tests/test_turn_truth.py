"""What the person is told is what is stored: the write path's edges, driven
by a scripted OpenAI-compatible model over real HTTP and a real database.

- Only a finished answer commits (finish_reason "stop"): a stream that ends
  early, `length`, `content_filter` or a cut connection discards the staged
  change and the turn fails with plain words.
- Once the commit returned, nothing later reports the memory as unsaved:
  a reply that cannot be stored, a NUL in the answer, a Stop while the reply
  is stored.
- A turn stages at most 20 operations in all, refused at staging.
- Reads and the commit's lock wait are bounded; account deletion and a
  commit serialise.
"""
import asyncio
import json
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import store
from agentmemory.models import MemoryDocument, MemoryEvent, Outcome
from agentmemory.rules import Operation
from agentmemory.tool import handle_memory_update
from agentmemory.turn import MemoryTurn
from chat.models import Conversation, Message
from chat.turns import REPLY_NOT_STORED, TurnFailed, run_turn
from tests.chat_helpers import aseed, connect, db, fresh_agents, receive_until, snapshot_of, wait_for  # noqa: F401
from tests.conftest import on_postgres
from tests.scripted_model import cut, dynamic, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The build runs on Debian bookworm"
CALL = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def rows(user) -> int:
    return MemoryDocument.objects.filter(user=user).count()


# --- only a finished answer commits -----------------------------------------------------------

UNFINISHED = {
    "no_finish_reason_no_done": dict(finish_reason=None, done=False),
    "length": dict(finish_reason="length"),
    "content_filter": dict(finish_reason="content_filter"),
}


@pytest.mark.parametrize("how", sorted(UNFINISHED))
async def test_an_unfinished_answer_commits_nothing(user, scripted_model, how):
    scripted_model.push(tool_call(CALL), text("Saved, and the build", **UNFINISHED[how]))

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm")

    assert failure.value.code == "model_incomplete"
    assert "nothing was saved" in failure.value.message
    if how == "length":  # the output cap: the person reads that the answer was cut off
        assert "cut off" in failure.value.message
    assert failure.value.memory.status == "discarded"
    assert await db(rows, user) == 0
    [event] = await db(lambda: list(MemoryEvent.objects.filter(user=user, outcome=Outcome.DISCARDED)))
    assert event.operation_count == 1


async def test_a_tool_round_that_ends_early_commits_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL, finish_reason=None, done=False))

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm")

    assert failure.value.code == "model_incomplete"
    assert await db(rows, user) == 0


async def test_a_cut_stream_after_staging_commits_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), cut("Saved, and"))

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm")

    assert failure.value.code in ("model_unreachable", "model_failed_after_staging")
    assert failure.value.memory.status == "discarded"
    assert await db(rows, user) == 0


async def test_over_the_socket_an_unfinished_answer_fails_in_plain_words(user, scripted_model):
    scripted_model.push(tool_call(CALL), text("Saved, and", finish_reason="length"))
    socket = await connect(user)
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "bookworm", "conversation_id": None}))

    frames = await receive_until(socket, "turn_failed")

    assert frames[-1]["code"] == "model_incomplete"
    assert frames[-1]["memory"]["status"] == "discarded"
    assert not any(f["type"] == "turn_completed" for f in frames)
    assert await db(rows, user) == 0
    await socket.disconnect()


@override_settings(CHAT_TURN_RATE="1000/min")
def test_over_rest_an_unfinished_answer_fails_and_commits_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), text("Saved, and", finish_reason="content_filter"))

    response = token_client(user).post("/api/chat/turns/", {"content": "bookworm", "conversation_id": None},
                                       format="json")

    assert response.status_code == 502
    assert response.json()["code"] == "model_incomplete"
    assert rows(user) == 0


# --- one outcome, never contradicted ----------------------------------------------------------


def _delete_conversations_then(answer):
    def respond(body):
        Conversation.objects.all().delete()  # the person deleted the chat in another tab
        connection.close()
        return text(answer)

    return dynamic(respond)


async def test_a_reply_that_cannot_be_stored_still_reports_the_commit(user, scripted_model):
    scripted_model.push(tool_call(CALL), _delete_conversations_then("Noted."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "committed"
    assert result.reply == "Noted."
    assert result.message_id is None
    assert result.notice == REPLY_NOT_STORED
    assert (await snapshot_of(user)).memory == (FACT,)


@override_settings(CHAT_TURN_RATE="1000/min")
def test_over_rest_a_reply_that_cannot_be_stored_answers_with_the_committed_outcome(user, scripted_model):
    scripted_model.push(tool_call(CALL), _delete_conversations_then("Noted."))

    response = token_client(user).post("/api/chat/turns/", {"content": "bookworm", "conversation_id": None},
                                       format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["memory"]["status"] == "committed"
    assert body["notice"] == REPLY_NOT_STORED
    assert body["message_id"] is None
    assert store.load_snapshot(user_id=user.pk).memory == (FACT,)


async def test_over_the_socket_a_reply_that_cannot_be_stored_reports_the_commit(user, scripted_model):
    scripted_model.push(tool_call(CALL), _delete_conversations_then("Noted."))
    socket = await connect(user)
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "bookworm", "conversation_id": None}))

    frames = await receive_until(socket, "turn_completed")

    assert frames[-1]["memory"]["status"] == "committed"
    assert frames[-1]["notice"] == REPLY_NOT_STORED
    assert not any(f["type"] == "turn_failed" for f in frames)
    await socket.disconnect()


async def test_an_answer_with_nul_and_lone_surrogates_is_stored_clean(user, scripted_model):
    scripted_model.push(tool_call(CALL), text("Noted\x00 the build \ud800 host."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "committed"
    assert result.reply == "Noted the build \ufffd host."
    stored = await db(lambda: list(Message.objects.filter(role="assistant").values_list("content", flat=True)))
    assert stored == ["Noted the build \ufffd host."]


async def test_a_stop_while_the_reply_is_stored_keeps_the_committed_outcome(user, scripted_model, postgres_only):
    """PostgreSQL: the reply's INSERT waits on a row lock another session holds
    on the conversation, so Stop lands exactly while the reply is being stored."""
    release = threading.Event()
    locked = threading.Event()

    def hold_conversation_lock(conversation_id):
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute("SELECT 1 FROM chat_conversation WHERE id = %s FOR UPDATE", [conversation_id])
                locked.set()
                release.wait(20)
                cursor.execute("ROLLBACK")
        finally:
            other.close()

    def respond(body):
        conversation_id = Conversation.objects.get(user=user).pk
        connection.close()
        threading.Thread(target=hold_conversation_lock, args=(conversation_id,), daemon=True).start()
        locked.wait(10)
        return text("Noted.")

    scripted_model.push(tool_call(CALL), dynamic(respond))
    socket = await connect(user)
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "bookworm", "conversation_id": None}))
    await wait_for(lambda: locked.is_set())
    # Wait for the commit (memory row present), then press Stop while the reply waits for the lock.
    for _ in range(500):
        if await db(rows, user):
            break
        await asyncio.sleep(0.01)
    await socket.send_to(text_data=json.dumps({"type": "cancel"}))
    await asyncio.sleep(0.2)
    release.set()

    frames = await receive_until(socket, "turn_completed")

    assert frames[-1]["memory"]["status"] == "committed"
    assert not any(f["type"] == "turn_failed" for f in frames)
    outcomes = await db(lambda: list(Message.objects.filter(conversation__user=user).values_list(
        "memory_outcome", flat=True)))
    assert outcomes == ["committed", "committed"]  # one outcome per turn, recorded once
    assert (await snapshot_of(user)).memory == (FACT,)
    await socket.disconnect()


# --- staging tells the truth ------------------------------------------------------------------


def _adds(prefix: str, count: int) -> dict:
    return {"operations": [{"target": "memory", "action": "add", "content": f"{prefix} fact {n}"}
                           for n in range(count)]}


async def test_a_turn_stages_at_most_twenty_operations_across_calls(user, scripted_model):
    scripted_model.push(tool_call(_adds("First", 15)), tool_call(_adds("Second", 15)), text("Saved the first batch."))

    result = await run_turn(user=user, content="remember all of these")

    second_reply = json.loads(scripted_model.requests[2]["messages"][-1]["content"])
    assert second_reply["code"] == "turn_budget"
    assert "5 remain" in second_reply["error"]
    assert result.memory.status == "committed"
    assert result.memory.operation_count == 15
    assert len((await snapshot_of(user)).memory) == 15


async def test_a_duplicate_add_says_nothing_changed_and_stages_nothing(user, scripted_model):
    await aseed(user, memory_entries=[FACT])
    scripted_model.push(tool_call(CALL), text("I already knew that."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    reply = json.loads(scripted_model.requests[1]["messages"][-1]["content"])
    assert reply["status"] == "unchanged" and "Nothing changed" in reply["message"]
    assert result.memory.status == "nothing_to_commit"


async def test_a_replace_names_the_entry_it_replaced(user, scripted_model):
    await aseed(user, memory_entries=["Uses Python 3.11 everywhere"])
    scripted_model.push(
        tool_call({"operations": [{"target": "memory", "action": "replace", "match": "Python",
                                   "content": "Uses Python 3.12 everywhere"}]}),
        text("Updated."),
    )

    await run_turn(user=user, content="we moved to 3.12")

    reply = json.loads(scripted_model.requests[1]["messages"][-1]["content"])
    assert reply["results"] == ["replaced: Uses Python 3.11 everywhere"]


# --- bounded waits ----------------------------------------------------------------------------


def _hold_lock(statements, ready: threading.Event, release: threading.Event):
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            ready.set()
            release.wait(30)
            cursor.execute("ROLLBACK")
    finally:
        other.close()


@override_settings(AGENTMEMORY={"ENABLED": True, "READ_TIMEOUT_SECONDS": 0.3})
async def test_a_locked_memory_table_fails_the_read_open_instead_of_waiting(user, scripted_model):
    await aseed(user, memory_entries=[FACT])
    if on_postgres():
        statements = ["BEGIN", "LOCK TABLE agentmemory_document IN ACCESS EXCLUSIVE MODE"]
    else:
        statements = ["BEGIN EXCLUSIVE"]
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(statements, ready, release), daemon=True)
    holder.start()
    ready.wait(10)
    memory = MemoryTurn(user_id=user.pk)
    try:
        # Bounded: the read gives up while the lock is still held.
        snapshot = await asyncio.wait_for(memory.load(), timeout=20)
        assert snapshot is None
        assert memory.status == "unavailable" and memory.writes_enabled is False
    finally:
        release.set()
        holder.join(10)


def _lock_statements(user) -> list[str]:
    """Hold the person's write lock from another session, as a memory writer does (SQLite: the database's)."""
    if on_postgres():
        return ["BEGIN", f"SELECT 1 FROM {get_user_model()._meta.db_table} WHERE id = {user.pk} FOR NO KEY UPDATE"]
    return ["BEGIN IMMEDIATE"]


@override_settings(AGENTMEMORY={"ENABLED": True, "COMMIT_LOCK_TIMEOUT_SECONDS": 0.3, "COMMIT_ATTEMPTS": 1})
async def test_a_commit_that_cannot_get_the_lock_gives_up_and_says_memory_was_busy(user):
    memory = MemoryTurn(user_id=user.pk)
    await memory.load()
    with memory.attempt():
        assert handle_memory_update(json.dumps(CALL))["status"] == "staged"
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_lock, args=(_lock_statements(user), ready, release), daemon=True)
    holder.start()
    ready.wait(10)
    try:
        outcome = await asyncio.wait_for(memory.commit(), timeout=20)
    finally:
        release.set()
        holder.join(10)

    assert outcome.status == "discarded" and outcome.code == "memory_busy"
    assert "busy" in outcome.message and "not saved" in outcome.message
    assert await db(rows, user) == 0


@override_settings(AGENTMEMORY={"ENABLED": True, "COMMIT_LOCK_TIMEOUT_SECONDS": 0.3, "COMMIT_ATTEMPTS": 1})
async def test_a_commit_that_cannot_get_the_lock_fails_the_write_not_the_answer(user, scripted_model, postgres_only):
    ready, release = threading.Event(), threading.Event()

    def respond(body):
        threading.Thread(target=_hold_lock, args=(_lock_statements(user), ready, release), daemon=True).start()
        ready.wait(10)
        return text("Noted.")

    scripted_model.push(tool_call(CALL), dynamic(respond))
    try:
        result = await asyncio.wait_for(run_turn(user=user, content="bookworm"), timeout=30)
    finally:
        release.set()

    assert result.reply == "Noted."
    assert result.message_id is not None  # the reply was stored; only the memory write gave up
    assert result.memory.status == "discarded" and result.memory.code == "memory_busy"
    assert await db(rows, user) == 0


def test_deleting_an_account_while_its_first_commit_runs_serialises(make_user, postgres_only):
    person = make_user("carol")
    inside, resume = threading.Event(), threading.Event()
    checks = iter(range(100))

    def pause_before_the_commit_ends():
        # The third check is just before the transaction ends, after the first row's INSERT.
        if next(checks) == 2:
            inside.set()
            resume.wait(20)
        return False

    results = {}

    def commit():
        try:
            store.commit_operations(user_id=person.pk, operations=[Operation("memory", "add", content=FACT)],
                                    should_cancel=pause_before_the_commit_ends)
            results["commit"] = "committed"
        except Exception as exc:
            results["commit"] = type(exc).__name__
        finally:
            connection.close()

    def delete():
        try:
            get_user_model().objects.get(pk=person.pk).delete()
            results["delete"] = "deleted"
        except Exception as exc:
            results["delete"] = type(exc).__name__
        finally:
            connection.close()

    committer = threading.Thread(target=commit)
    committer.start()
    assert inside.wait(10)
    deleter = threading.Thread(target=delete)
    deleter.start()
    deleter.join(0.5)
    assert deleter.is_alive()  # the deletion waits for the person's lock
    resume.set()
    committer.join(20)
    deleter.join(20)

    assert results == {"commit": "committed", "delete": "deleted"}
    assert not get_user_model().objects.filter(pk=person.pk).exists()
    assert MemoryDocument.objects.filter(user_id=person.pk).count() == 0
