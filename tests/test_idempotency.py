"""Idempotent turns (issue 26, section 3): a retried request runs, and commits, once.

`POST /api/chat/turns/` and `POST /api/memory/operations/` take an
`Idempotency-Key` header, and the memory turn API takes `idempotency_key=`
(`agentmemory/idempotency.py`). Turns run against a scripted
OpenAI-compatible model over real HTTP (tests/scripted_model.py) with the
real openai client; the database is real (SQLite, or PostgreSQL with
DATABASE_URL). "The first still running" is a model that holds its answer
until the test releases it.
"""
from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from asgiref.sync import async_to_sync
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import idempotency, store
from agentmemory.models import Actor, IdempotencyKey, MemoryEvent, MemoryProposal, Outcome
from agentmemory.rules import Operation
from agentmemory.tool import handle_memory_update
from agentmemory.turn import MemoryOutcome, MemoryTurn
from chat.agents import registry
from chat.models import Conversation, Message
from tests.chat_helpers import db, fresh_agents  # noqa: F401  (fresh agents, empty channel layer)
from tests.memory_helpers import entries_of, fresh_throttle, seed  # noqa: F401  (an unspent memory budget)
from tests.scripted_model import dynamic, error, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = "/api/chat/turns/"
OPERATIONS = "/api/memory/operations/"
FACT = "Invoices go out on the first Monday"
OTHER_FACT = "The staging server moved to Frankfurt"
CALL = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}
REPLY = "Noted: invoices on the first Monday."


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def post_turn(client, content: str, key: str | None = None, *, fresh: bool = True, **body):
    """POST one turn. The test client runs each request in an event loop of its own, and the model
    client (real HTTP) belongs to the loop that built it: `fresh` builds the agent anew for this one."""
    if fresh:
        async_to_sync(registry.aclose)()
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(TURNS, {"content": content, "conversation_id": None, **body}, format="json", **headers)


def post_operations(client, operations: list[dict], key: str | None = None):
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(OPERATIONS, {"operations": operations}, format="json", **headers)


def add(content: str, target: str = "memory") -> dict:
    return {"target": target, "action": "add", "content": content}


def commits_of(user) -> int:
    return MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).count()


def new_key() -> str:
    return str(uuid.uuid4())


class Held:
    """A model answer that waits until the test releases it: "the first still running"."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.reached = threading.Event()
        self.release = threading.Event()

    def response(self):
        def hold(body):
            self.reached.set()
            assert self.release.wait(20), "the test never released the held answer"
            return self.answer

        return dynamic(hold)


def in_thread(function, *args, **kwargs):
    """Run `function` in a thread with its own database connection; return (thread, results)."""
    results: list = []

    def run():
        try:
            results.append(function(*args, **kwargs))
        except BaseException as exc:  # reported by the test, by type
            results.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, results


# --- the REST turn ------------------------------------------------------------------------


def test_a_retried_turn_after_the_first_finished_gets_the_first_answer_and_runs_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), text(REPLY))
    client, key = token_client(user), new_key()

    first = post_turn(client, f"remember: {FACT}", key)
    again = post_turn(client, f"remember: {FACT}", key)

    assert first.status_code == 200, first.content
    assert first.json()["memory"]["status"] == "committed" and first.json()["reply"] == REPLY
    assert idempotency.REPLAYED_HEADER not in first
    assert again.status_code == 200 and again[idempotency.REPLAYED_HEADER] == "true"
    assert again.json() == first.json()
    # One run: two model requests (the tool round and the answer), one message pair, one commit.
    assert len(scripted_model.requests) == 2
    assert list(Message.objects.values_list("role", flat=True)) == ["user", "assistant"]
    assert commits_of(user) == 1
    assert entries_of(user)["memory"] == (FACT,)


def test_a_retry_while_the_first_turn_runs_is_a_409_and_then_gets_the_first_answer(user, scripted_model):
    held = Held(tool_call(CALL))
    scripted_model.push(held.response(), text(REPLY))
    key = new_key()

    thread, results = in_thread(post_turn, token_client(user), f"remember: {FACT}", key)
    try:
        assert held.reached.wait(10), "the first turn never reached the model"
        busy = post_turn(token_client(user), f"remember: {FACT}", key, fresh=False)
    finally:
        held.release.set()
        thread.join(30)
    (first,) = results

    assert busy.status_code == 409
    assert busy.json()["code"] == "idempotency_key_in_use"
    assert 1 <= int(busy["Retry-After"]) <= idempotency.RETRY_AFTER_SECONDS
    assert busy.json()["retry_after"] == int(busy["Retry-After"])
    assert first.status_code == 200, first.content
    later = post_turn(token_client(user), f"remember: {FACT}", key, fresh=False)
    assert later.status_code == 200 and later[idempotency.REPLAYED_HEADER] == "true"
    assert later.json() == first.json()
    assert len(scripted_model.requests) == 2 and commits_of(user) == 1
    assert Message.objects.count() == 2


def _concurrent_duplicate_turns(user, server, copies: int) -> list:
    held = Held(tool_call(CALL))
    server.push(held.response(), text(REPLY))
    key = new_key()
    barrier = threading.Barrier(copies, timeout=20)

    client = token_client(user)
    async_to_sync(registry.aclose)()

    def send():
        barrier.wait()
        return post_turn(client, f"remember: {FACT}", key, fresh=False)

    runs = [in_thread(send) for _ in range(copies)]
    try:
        # Every copy but the one that runs is answered while the model still holds its answer.
        assert wait_until(lambda: sum(len(results) for _, results in runs) >= copies - 1)
    finally:
        held.release.set()
        for thread, _ in runs:
            thread.join(30)
    return [results[0] for _, results in runs]


def wait_until(predicate, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_concurrent_duplicate_turns_on_postgresql_run_once_and_commit_once(postgres_only, user, scripted_model):
    responses = _concurrent_duplicate_turns(user, scripted_model, copies=4)

    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409], [type(r).__name__ for r in responses]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"idempotency_key_in_use"}
    assert len(scripted_model.requests) == 2
    assert commits_of(user) == 1 and Message.objects.count() == 2
    assert IdempotencyKey.objects.get(user=user).state == "done"


def test_concurrent_duplicate_turns_on_sqlite_queue_and_run_once(user, scripted_model):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant is the test above")
    responses = _concurrent_duplicate_turns(user, scripted_model, copies=3)

    assert sorted(r.status_code for r in responses) == [200, 409, 409]
    assert len(scripted_model.requests) == 2 and commits_of(user) == 1 and Message.objects.count() == 2


def test_concurrent_claims_of_one_key_give_exactly_one_run(user):
    """Insert-first on the unique constraint: eight processes' worth of claims at once, one wins."""
    barrier = threading.Barrier(8, timeout=20)
    request = idempotency.fingerprint("POST", TURNS, {"content": "hi"})

    def claim():
        barrier.wait()
        return idempotency.claim(user_id=user.pk, key="one-key", fingerprint=request, lease_seconds=60)

    runs = [in_thread(claim) for _ in range(8)]
    for thread, _ in runs:
        thread.join(30)
    outcomes = [results[0] for _, results in runs]

    assert sorted(type(o).__name__ for o in outcomes) == ["Claim"] + ["InProgress"] * 7
    assert IdempotencyKey.objects.filter(user=user).count() == 1


def test_a_key_reused_with_another_body_is_a_422_and_runs_nothing(user, scripted_model):
    scripted_model.push(tool_call(CALL), text(REPLY))
    client, key = token_client(user), new_key()
    assert post_turn(client, f"remember: {FACT}", key).status_code == 200

    reused = post_turn(client, f"remember: {OTHER_FACT}", key)

    assert reused.status_code == 422
    assert reused.json()["code"] == "idempotency_key_reused"
    assert reused.json()["detail"].startswith("This Idempotency-Key was already used for a different request.")
    assert len(scripted_model.requests) == 2 and Message.objects.count() == 2
    assert entries_of(user)["memory"] == (FACT,)


def test_a_key_of_another_person_runs_their_own_turn(user, other_user, scripted_model):
    scripted_model.push(tool_call(CALL), text(REPLY), text("Hello Bob."))
    key = new_key()
    alice = post_turn(token_client(user), f"remember: {FACT}", key)

    bob = post_turn(token_client(other_user), f"remember: {FACT}", key)

    assert alice.status_code == bob.status_code == 200
    assert idempotency.REPLAYED_HEADER not in bob
    assert bob.json()["reply"] == "Hello Bob." and bob.json()["conversation_id"] != alice.json()["conversation_id"]
    assert Conversation.objects.get(pk=bob.json()["conversation_id"]).user == other_user
    assert len(scripted_model.requests) == 3
    assert IdempotencyKey.objects.filter(user=user).count() == IdempotencyKey.objects.filter(user=other_user).count() == 1
    # Alice's retry still gets her own answer.
    assert post_turn(token_client(user), f"remember: {FACT}", key).json() == alice.json()


@pytest.mark.parametrize("header", ["", "  ", "x" * 256, "two words", "a,b", 'say "hi"', "back\\slash", "ünïcode",
                                    "tab\there", '"unclosed'])
def test_a_malformed_key_is_a_400_with_a_code_and_runs_nothing(user, scripted_model, header):
    turn = post_turn(token_client(user), "hello", header)
    batch = post_operations(token_client(user), [add(FACT)], header)

    assert turn.status_code == batch.status_code == 400
    assert turn.json()["code"] == batch.json()["code"] == "invalid_idempotency_key"
    assert turn.json()["detail"] == batch.json()["detail"] == idempotency.INVALID_KEY_MESSAGE
    assert scripted_model.requests == [] and Message.objects.count() == 0
    assert entries_of(user)["memory"] == () and not IdempotencyKey.objects.exists()


def test_a_key_in_double_quotes_is_the_same_key(user, scripted_model):
    scripted_model.push(text("Hi."))
    client = token_client(user)
    first = post_turn(client, "hello", "k-255-" + "x" * 249)  # 255 characters: the longest key
    quoted = post_turn(client, "hello", '"k-255-' + "x" * 249 + '"')

    assert first.status_code == 200 and quoted[idempotency.REPLAYED_HEADER] == "true"
    assert quoted.json() == first.json() and len(scripted_model.requests) == 1


def test_a_temporary_turn_with_a_key_is_a_400(user, scripted_model):
    response = post_turn(token_client(user), "hello", new_key(), temporary=True)

    assert response.status_code == 400 and response.json()["code"] == "idempotency_key_temporary"
    assert scripted_model.requests == []


def test_a_failed_turn_releases_the_key_so_a_retry_runs(user, scripted_model):
    scripted_model.push(tool_call(CALL), error(500), tool_call(CALL), text(REPLY))
    client, key = token_client(user), new_key()

    failed = post_turn(client, f"remember: {FACT}", key)
    assert failed.status_code == 502 and failed.json()["memory"]["status"] == "discarded"
    assert not IdempotencyKey.objects.exists()  # released: nothing stood

    retried = post_turn(client, f"remember: {FACT}", key)
    assert retried.status_code == 200 and idempotency.REPLAYED_HEADER not in retried
    assert retried.json()["memory"]["status"] == "committed" and commits_of(user) == 1


async def test_a_turn_cancelled_by_a_disconnect_releases_the_key_so_a_retry_runs(user, scripted_model):
    """Django cancels the view when the client goes; the turn commits nothing, so the key is free again."""
    import asyncio

    from config.asgi import application
    from tests.chat_helpers import asgi_post

    held = Held(tool_call(CALL))
    scripted_model.push(held.response(), text(REPLY))
    token = (await db(Token.objects.create, user=user)).key
    key = new_key()
    gone, sent = asyncio.Event(), []
    scope, receive, send = asgi_post(TURNS, {"content": f"remember: {FACT}", "conversation_id": None},
                                     authorization=f"Token {token}", gone=gone, sent=sent,
                                     headers=((b"idempotency-key", key.encode()),))
    request = asyncio.create_task(application(scope, receive, send))
    try:
        await asyncio.wait_for(asyncio.to_thread(held.reached.wait, 10), timeout=15)
        assert await db(IdempotencyKey.objects.filter(user=user, state="running").count) == 1
        gone.set()
        await asyncio.wait_for(request, timeout=15)
    finally:
        held.release.set()
    assert not any(message["type"] == "http.response.start" for message in sent)
    assert await db(IdempotencyKey.objects.count) == 0 and await db(commits_of, user) == 0

    scripted_model.reset()
    scripted_model.push(tool_call(CALL), text(REPLY))
    retried = await db(lambda: post_turn(token_client(user), f"remember: {FACT}", key))
    assert retried.status_code == 200 and idempotency.REPLAYED_HEADER not in retried
    assert await db(commits_of, user) == 1


def test_replays_and_conflicts_spend_no_turn_budget(user, scripted_model, monkeypatch):
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "2/min"})
    scripted_model.push(text("Hi."), text("Hello."))
    client, key = token_client(user), new_key()

    statuses = [post_turn(client, "hello", key).status_code for _ in range(4)]
    statuses.append(post_turn(client, "another message", key).status_code)  # 422: not a turn either
    statuses += [post_turn(client, "hello", new_key()).status_code for _ in range(2)]

    assert statuses == [200, 200, 200, 200, 422, 200, 429]


def test_the_window_must_be_positive():
    from agentmemory.checks import check_limits

    with override_settings(AGENTMEMORY={"IDEMPOTENCY_WINDOW_HOURS": 0}):
        (error_,) = check_limits()
    assert error_.id == "agentmemory.E003" and "number of hours above 0" in error_.msg


def test_a_conversation_that_is_not_yours_releases_the_key(user, other_user, scripted_model):
    scripted_model.push(text("Hi Bob."))
    theirs = post_turn(token_client(other_user), "hello").json()["conversation_id"]
    response = post_turn(token_client(user), "hello", new_key(), conversation_id=theirs)

    assert response.status_code == 404 and not IdempotencyKey.objects.filter(user=user).exists()


def test_a_crashed_attempt_is_a_409_until_its_lease_ends_then_a_retry_runs_but_never_commits_again(
        user, scripted_model):
    """The first attempt claimed the key and committed, then its process died before it answered."""
    key = new_key()
    body = {"content": f"remember: {FACT}", "conversation_id": None}
    claimed = idempotency.claim(user_id=user.pk, key=key, lease_seconds=180,
                                fingerprint=idempotency.fingerprint("POST", TURNS, body))
    first = async_commit(user, key, [Operation("memory", "add", content=FACT)])
    assert first.status == "committed"

    busy = post_turn(token_client(user), f"remember: {FACT}", key)
    assert busy.status_code == 409 and scripted_model.requests == []

    IdempotencyKey.objects.filter(pk=claimed.record_id).update(locked_until=timezone.now() - timedelta(seconds=1))
    # The retry runs the model again, which this time stages something else: it must not commit.
    scripted_model.push(tool_call({"operations": [add(OTHER_FACT)]}), text(REPLY))
    taken_over = post_turn(token_client(user), f"remember: {FACT}", key)

    assert taken_over.status_code == 200, taken_over.content
    assert taken_over.json()["memory"]["status"] == "committed"
    assert taken_over.json()["memory"]["changed"] == ["memory"]  # the first commit's outcome
    assert entries_of(user)["memory"] == (FACT,) and commits_of(user) == 1
    again = post_turn(token_client(user), f"remember: {FACT}", key)
    assert again[idempotency.REPLAYED_HEADER] == "true" and again.json() == taken_over.json()


def test_an_expired_key_is_ignored_and_pruned(user, scripted_model):
    scripted_model.push(text("Hi."), text("Hi again."))
    client, key = token_client(user), new_key()
    first = post_turn(client, "hello", key)
    IdempotencyKey.objects.filter(user=user).update(expires_at=timezone.now() - timedelta(seconds=1))

    second = post_turn(client, "hello", key)

    assert second.status_code == 200 and idempotency.REPLAYED_HEADER not in second
    assert second.json()["reply"] == "Hi again." and second.json()["turn_id"] != first.json()["turn_id"]
    assert IdempotencyKey.objects.filter(user=user).count() == 1  # the expired record made way


def test_the_window_is_a_setting(user):
    with override_settings(AGENTMEMORY={"ENABLED": True, "IDEMPOTENCY_WINDOW_HOURS": 2}):
        claimed = idempotency.claim(user_id=user.pk, key="k", fingerprint="f", lease_seconds=60)
    row = IdempotencyKey.objects.get(pk=claimed.record_id)
    assert abs((row.expires_at - row.created_at) - timedelta(hours=2)) < timedelta(seconds=1)


def test_the_expiry_command_deletes_only_expired_records_and_prints_no_key(user, other_user, capsys):
    now = timezone.now()
    for person, name, expires in ((user, "old-key", now - timedelta(minutes=1)),
                                  (other_user, "old-too", now - timedelta(hours=1)),
                                  (user, "live-key", now + timedelta(hours=1))):
        IdempotencyKey.objects.create(user=person, key_digest=idempotency.key_digest(name), fingerprint="f",
                                      state="done", status_code=200, response={}, expires_at=expires)

    call_command("memory_expire_idempotency_keys")
    call_command("memory_expire_idempotency_keys")

    printed = capsys.readouterr().out
    assert printed == "Deleted 2 expired idempotency records.\nDeleted 0 expired idempotency records.\n"
    assert list(IdempotencyKey.objects.values_list("key_digest", flat=True)) == [idempotency.key_digest("live-key")]


def test_the_record_holds_no_key_no_body_and_no_reply(user, scripted_model):
    scripted_model.push(tool_call(CALL), text(REPLY))
    key = "client-key-" + new_key()
    response = post_turn(token_client(user), f"remember: {FACT}", key)

    (row,) = IdempotencyKey.objects.filter(user=user).values()
    stored = json.dumps(row, default=str)
    for secret in (key, FACT, REPLY, "remember"):
        assert secret not in stored
    assert row["key_digest"] == idempotency.key_digest(key) and len(row["fingerprint"]) == 64
    assert row["response"]["message_id"] == response.json()["message_id"] and "reply" not in row["response"]
    assert row["conversation_id"] == response.json()["conversation_id"]


def test_a_replay_reads_the_reply_from_the_conversation(user, scripted_model):
    scripted_model.push(text(REPLY))
    client, key = token_client(user), new_key()
    first = post_turn(client, "hello", key).json()
    Message.objects.filter(pk=first["message_id"]).delete()  # e.g. a reply the log could not keep

    replay = post_turn(client, "hello", key).json()

    assert replay["reply"] == "" and replay["notice"].startswith("This reply is not in your conversation history")
    assert replay["memory"] == first["memory"] and len(scripted_model.requests) == 1


# --- erased with the person -------------------------------------------------------------------


def test_an_erase_keeps_the_content_free_records_so_a_retry_answers_the_first_and_commits_nothing(user, scripted_model):
    scripted_model.push(tool_call({"operations": [{"target": "memory", "action": "add", "content": FACT}]}),
                        text("Noted."))
    client, key = token_client(user), new_key()
    first = post_turn(client, f"remember: {FACT}", key)
    assert first.status_code == 200 and first.json()["memory"]["status"] == "committed"

    assert client.delete("/api/memory/").status_code == 200
    retried = post_turn(client, f"remember: {FACT}", key)

    assert retried.status_code == 200 and retried.headers[idempotency.REPLAYED_HEADER] == "true"
    assert retried.json()["memory"] == first.json()["memory"]
    assert len(scripted_model.requests) == 2  # the model ran for the first request only
    assert store.load_snapshot(user_id=user.pk).memory == ()  # the erased fact did not come back
    assert IdempotencyKey.objects.filter(user=user).count() == 1


def test_deleting_a_conversation_removes_the_records_of_its_turns(user, scripted_model):
    scripted_model.push(text("One."), text("Two."), text("Three."))
    client = token_client(user)
    one = post_turn(client, "first", "key-1").json()["conversation_id"]
    post_turn(client, "second", "key-2")
    post_turn(client, "third", "key-3")

    assert client.delete(f"/api/conversations/{one}/").status_code == 204
    assert sorted(IdempotencyKey.objects.values_list("key_digest", flat=True)) == sorted(
        idempotency.key_digest(k) for k in ("key-2", "key-3"))
    assert client.delete("/api/conversations/").status_code == 200
    assert not IdempotencyKey.objects.exists()
    # A retry after the deletion runs afresh (and the model answers again).
    scripted_model.push(text("Once more."))
    assert post_turn(client, "first", "key-1").json()["reply"] == "Once more."


def test_deleting_the_account_removes_its_records(user, other_user):
    idempotency.claim(user_id=user.pk, key="k", fingerprint="f", lease_seconds=60)
    idempotency.claim(user_id=other_user.pk, key="k", fingerprint="f", lease_seconds=60)

    get_user_model().objects.get(pk=user.pk).delete()

    assert list(IdempotencyKey.objects.values_list("user_id", flat=True)) == [other_user.pk]


def test_the_account_deletion_removes_a_record_written_after_its_cascade_query(user):
    """Django collects the cascade before its transaction; a commit under a key may write a record in between."""
    with transaction.atomic():
        IdempotencyKey.objects.create(user=user, key_digest=idempotency.key_digest("late"), state="done",
                                      outcome={"status": "committed"}, expires_at=timezone.now() + timedelta(hours=1))
        store.lock_owner_for_deletion(user_id=user.pk)
        assert not IdempotencyKey.objects.filter(user=user).exists()


# --- POST /api/memory/operations/ ----------------------------------------------------------------


def test_a_retried_batch_commits_once_and_answers_the_first_outcome_with_memory_as_it_is_now(user):
    client, key = token_client(user), new_key()
    first = post_operations(client, [add(FACT)], key)
    seed(user, memory_entries=[OTHER_FACT])  # memory changes between the first answer and the retry

    again = post_operations(client, [add(FACT)], key)

    assert first.status_code == again.status_code == 200
    assert again[idempotency.REPLAYED_HEADER] == "true" and idempotency.REPLAYED_HEADER not in first
    assert (again.json()["outcome"], again.json()["changed"]) == (first.json()["outcome"], first.json()["changed"]) \
        == ("committed", ["memory"])
    assert again.json()["documents"]["memory"]["entries"] == [FACT, OTHER_FACT]  # now, not a stored copy
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED, actor=Actor.USER).count() == 1
    stored = json.dumps(list(IdempotencyKey.objects.filter(user=user).values()), default=str)
    assert FACT not in stored and key not in stored


def test_a_batch_retried_while_the_first_runs_is_a_409(user):
    client, key = token_client(user), new_key()
    body = {"operations": [add(FACT)]}
    idempotency.claim(user_id=user.pk, key=key, lease_seconds=60,
                      fingerprint=idempotency.fingerprint("POST", OPERATIONS, body))  # the first, in flight

    busy = post_operations(client, [add(FACT)], key)

    assert busy.status_code == 409 and busy.json()["code"] == "idempotency_key_in_use"
    assert busy.json()["position"] is None and int(busy["Retry-After"]) >= 1
    assert entries_of(user)["memory"] == ()


def test_a_batch_key_reused_with_another_body_is_a_422_and_commits_nothing(user):
    client, key = token_client(user), new_key()
    assert post_operations(client, [add(FACT)], key).status_code == 200

    reused = post_operations(client, [add(OTHER_FACT)], key)

    assert reused.status_code == 422 and reused.json()["code"] == "idempotency_key_reused"
    assert entries_of(user)["memory"] == (FACT,)


def test_a_batch_key_of_another_person_commits_their_own_batch(user, other_user):
    key = new_key()
    post_operations(token_client(user), [add(FACT)], key)

    theirs = post_operations(token_client(other_user), [add(FACT)], key)

    assert theirs.status_code == 200 and idempotency.REPLAYED_HEADER not in theirs
    assert entries_of(other_user)["memory"] == (FACT,)
    assert MemoryEvent.objects.filter(user=other_user, outcome=Outcome.COMMITTED).count() == 1


def test_a_batch_the_rules_refused_is_its_result_and_is_answered_again(user):
    client, key = token_client(user), new_key()
    remove = [{"target": "memory", "action": "remove", "match": "Frankfurt"}]
    refused = post_operations(client, remove, key)
    seed(user, memory_entries=[OTHER_FACT])  # now the batch would apply

    again = post_operations(client, remove, key)

    assert refused.status_code == again.status_code == 400 and refused.json()["code"] == "no_match"
    assert again.json() == refused.json() and again[idempotency.REPLAYED_HEADER] == "true"
    assert entries_of(user)["memory"] == (OTHER_FACT,)  # the retry committed nothing


@override_settings(AGENTMEMORY={"ENABLED": True, "COMMIT_LOCK_TIMEOUT_SECONDS": 0.3, "COMMIT_ATTEMPTS": 1})
def test_a_batch_that_found_the_database_busy_releases_the_key(postgres_only, user):
    """Another session holds the person's write lock past the commit's wait: 503, and the key is free again."""
    client, key = token_client(user), new_key()
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_person_lock, args=(user, ready, release), daemon=True)
    holder.start()
    assert ready.wait(10)
    try:
        busy = post_operations(client, [add(FACT)], key)
    finally:
        release.set()
        holder.join(10)
    assert busy.status_code == 503 and not IdempotencyKey.objects.exists()

    retried = post_operations(client, [add(FACT)], key)
    assert retried.status_code == 200 and idempotency.REPLAYED_HEADER not in retried
    assert entries_of(user)["memory"] == (FACT,)


def _hold_person_lock(user, ready: threading.Event, release: threading.Event) -> None:
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT 1 FROM {get_user_model()._meta.db_table} WHERE id = %s FOR NO KEY UPDATE",
                           [user.pk])
            ready.set()
            release.wait(30)
            cursor.execute("ROLLBACK")
    finally:
        other.close()


def test_concurrent_duplicate_batches_commit_once(user):
    key, copies = new_key(), 4
    barrier = threading.Barrier(copies, timeout=20)

    def send():
        barrier.wait()
        return post_operations(token_client(user), [add(FACT)], key)

    runs = [in_thread(send) for _ in range(copies)]
    for thread, _ in runs:
        thread.join(30)
    responses = [results[0] for _, results in runs]

    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(200) >= 1 and set(statuses) <= {200, 409}, statuses
    assert sum(1 for r in responses if r.status_code == 200 and idempotency.REPLAYED_HEADER not in r) == 1
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).count() == 1


# --- the memory turn API (a host loop) ------------------------------------------------------------


def async_commit(user, key, operations: list[Operation], **turn) -> MemoryOutcome:
    """One host-loop turn whose model calls memory_update with `operations`, committed under `key`."""
    async def run():
        memory = MemoryTurn(user_id=user.pk, enabled=True, idempotency_key=key, **turn)
        await memory.load()
        with memory.attempt():
            if operations:
                call = {"operations": [{"target": op.target, "action": op.action, "content": op.content}
                                       for op in operations]}
                assert handle_memory_update(json.dumps(call))["success"] is True
        return await memory.commit(), memory

    outcome, memory = async_to_sync(run)()
    async_commit.last = memory
    return outcome


def test_the_memory_turn_commits_once_per_key(user):
    first = async_commit(user, "host-key", [Operation("memory", "add", content=FACT)])
    assert first.status == "committed" and async_commit.last.replayed is False

    # The host loop's retry: its model staged something else this time.
    second = async_commit(user, "host-key", [Operation("memory", "add", content=OTHER_FACT)])

    assert async_commit.last.replayed is True
    assert second == first
    assert store.load_snapshot(user_id=user.pk).memory == (FACT,)
    assert commits_of(user) == 1


def test_the_memory_turn_replays_even_when_the_retry_stages_nothing(user):
    first = async_commit(user, "host-key", [Operation("memory", "add", content=FACT)])
    assert async_commit(user, "host-key", []) == first and async_commit.last.replayed


def test_the_memory_turn_key_of_another_person_is_theirs(user, other_user):
    async_commit(user, "host-key", [Operation("memory", "add", content=FACT)])
    theirs = async_commit(other_user, "host-key", [Operation("memory", "add", content=OTHER_FACT)])

    assert theirs.status == "committed" and not async_commit.last.replayed
    assert store.load_snapshot(user_id=other_user.pk).memory == (OTHER_FACT,)


def test_the_memory_turn_proposes_once_per_key(user):
    from agentmemory import preferences

    preferences.set_save_mode(user_id=user.pk, save_mode="ask", actor=Actor.USER)
    first = async_commit(user, "host-key", [Operation("memory", "add", content=FACT)])
    second = async_commit(user, "host-key", [Operation("memory", "add", content=OTHER_FACT)])

    assert first.status == "proposed" and second == first
    assert list(MemoryProposal.objects.filter(user=user).values_list("pk", flat=True)) == [first.proposal_id]


def test_a_memory_turn_without_a_key_keeps_no_record(user):
    async_commit(user, None, [Operation("memory", "add", content=FACT)])
    assert not IdempotencyKey.objects.exists()


# --- OpenAPI ---------------------------------------------------------------------------------------


def test_the_schema_documents_the_header_and_its_answers_on_both_operations():
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in (TURNS, OPERATIONS):
        operation = schema["paths"][path]["post"]
        (header,) = [p for p in operation["parameters"] if p["name"] == "Idempotency-Key"]
        assert header["in"] == "header" and header.get("required", False) is False
        assert header["schema"]["pattern"] == idempotency.KEY_PATTERN
        assert {"409", "422"} <= set(operation["responses"])
        assert "Retry-After" in operation["responses"]["409"]["headers"]
        assert "Idempotent-Replayed" in operation["responses"]["200"]["headers"]
