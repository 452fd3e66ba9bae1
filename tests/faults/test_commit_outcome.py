"""Commits whose outcome is unknown (issue 37, section 2): the connection cut at COMMIT.

Every connection this test process opens to PostgreSQL goes through a proxy
in the test (`tests/faults/pg_commit_cut.py`, 127.0.0.1 only) that reads the
wire protocol and, when armed, cuts the connection at the COMMIT of the
transaction that wrote a memory change (its audit event's INSERT ...
RETURNING, the change id):

- deliver: the COMMIT reaches PostgreSQL, which commits; its answer is lost.
  The person must be told it was saved.
- drop: the COMMIT never arrives; PostgreSQL rolls back. The person must be
  told nothing was saved.
- deliver or drop, then the database unreachable past the wait
  (AGENTMEMORY COMMIT_CONFIRM_SECONDS, 1 s here): the person must be told it
  could not be confirmed, with its own code; once the database answers,
  History shows the truth, and a retry with the same Idempotency-Key answers
  the true outcome without a second change.

Never the wrong one: every case compares what the person was told with what
the database holds afterwards. Through every writer that tells a person: the
memory API (`POST /api/memory/operations/`), the memory page's forms, undo
and restore (API and page), and a chat turn's memory (`MemoryTurn`).

PostgreSQL only: SQLite is a file in this process, with no connection to cut
(its COMMIT cannot be lost in transit), so these tests skip there.
"""
from __future__ import annotations

import time

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from agentmemory import store, versions, words
from agentmemory.models import Actor, IdempotencyKey, MemoryEvent
from agentmemory.rules import Operation
from agentmemory.tool import handle_memory_update
from agentmemory.turn import MemoryTurn
from tests.faults.pg_commit_cut import PgCommitCut
from tests.multiprocess.servers import orm, postgres_address

pytestmark = [pytest.mark.django_db(transaction=True)]

FACT = "Deploys go through the heron-7741 pipeline"
OTHER = "The staging cluster is called larch"
WAIT = 1.0  # COMMIT_CONFIRM_SECONDS in these tests
# What the person is told, as (HTTP status, code) of the memory API.
TOLD = {"deliver": (200, "committed"), "drop": (503, "connection_lost"), "unreachable": (503, "unconfirmed")}
MODES = ("deliver", "drop", "unreachable")


@pytest.fixture
def cut(postgres_only, transactional_db, settings):
    """Every new connection of this process reaches PostgreSQL through the proxy while the test runs."""
    warm_up()
    marker = f"INSERT INTO {connection.ops.quote_name(MemoryEvent._meta.db_table)}".encode()
    proxy = PgCommitCut(postgres_address(), marker=marker).start()
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "COMMIT_CONFIRM_SECONDS": WAIT}
    database = connection.settings_dict  # shared by every thread's connection of the default alias
    saved = database.get("HOST"), database.get("PORT")
    connection.close()
    database["HOST"], database["PORT"] = "127.0.0.1", proxy.port
    try:
        yield proxy
    finally:
        proxy.disarm()
        proxy.restore()
        connection.close()
        database["HOST"], database["PORT"] = saved
        proxy.close()


def warm_up() -> None:
    """The process's first requests import the views, the API and its schema (seconds): not part of a timing."""
    from django.test import Client

    Client().get("/memory/")
    APIClient().post("/api/memory/operations/", {}, format="json")
    APIClient().post("/api/memory/changes/1/undo/")


def arm(proxy: PgCommitCut, mode: str, committed: bool = True) -> None:
    """`mode` as the test names it; "unreachable" delivers (or drops) the COMMIT, then refuses every connection."""
    if mode == "unreachable":
        proxy.arm("deliver" if committed else "drop", refuse=True)
    else:
        proxy.arm(mode)


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def page_for(user):
    from django.test import Client

    page = Client()
    page.force_login(user)
    return page


def add(content: str, target: str = "memory") -> Operation:
    return Operation(target=target, action="add", content=content)


def memory_of(user) -> tuple[str, ...]:
    return store.load_snapshot(user_id=user.pk).entries("memory")


def history_of(user) -> list[int]:
    return [change.id for change in versions.changes(user_id=user.pk)]


def timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


def assert_bounded(mode: str, took: float, caplog) -> None:
    """The confirmation waited out its budget exactly when the database could not be reached.

    Not a wall-clock bound on the answered modes: a loaded machine may take longer than WAIT to serve the
    request, but the confirmation itself must not have run out of time (store.outcome logs when it does).
    """
    ran_out = [r for r in caplog.records if r.getMessage().startswith("memory commit outcome unconfirmed")]
    if mode == "unreachable":
        assert ran_out and WAIT <= took < WAIT + 2.5, took  # the wait, and no longer than a last connection attempt
    else:
        assert not ran_out  # the database answered: the confirmation did not wait out its budget


def report(name: str, mode: str, took: float, told) -> None:
    print(f"\n{name} [{mode}]: told {told} in {took * 1000:.0f} ms")


# --- the memory API ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_operations_api_tells_the_truth_when_the_connection_is_cut_at_commit(user, cut, mode, caplog):
    api = api_for(user)
    arm(cut, mode)
    response, took = timed(lambda: api.post("/api/memory/operations/",
                                            {"operations": [{"target": "memory", "action": "add", "content": FACT}]},
                                            format="json"))
    assert cut.fired.is_set()
    body = response.json()
    told = (response.status_code, body.get("outcome") or body.get("code"))
    report("operations API", mode, took, told)
    assert told == TOLD[mode]
    assert_bounded(mode, took, caplog)
    if mode == "unreachable":
        assert body["detail"] == words.COMMIT_UNCONFIRMED
        cut.restore()
    # The truth, read afterwards: stored exactly when the person was told so (or could not be told).
    assert memory_of(user) == ((FACT,) if mode in ("deliver", "unreachable") else ())
    assert len(history_of(user)) == (0 if mode == "drop" else 1)
    if mode == "deliver":
        assert body["changed"] == ["memory"] and body["documents"]["memory"]["entries"] == [FACT]
    if mode == "drop":
        assert body["detail"] == words.COMMIT_NOT_STORED


@pytest.mark.parametrize("committed", [True, False], ids=["stored", "not-stored"])
def test_an_idempotency_key_retry_of_an_unconfirmed_change_answers_the_truth(user, cut, committed, monkeypatch):
    from agentmemory.api import memory as memory_api

    monkeypatch.setattr(memory_api, "OPERATIONS_LEASE_SECONDS", 1)  # the first attempt's claim ends sooner
    api = api_for(user)
    payload = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}
    arm(cut, "unreachable", committed=committed)
    first, took = timed(lambda: api.post("/api/memory/operations/", payload, format="json",
                                         HTTP_IDEMPOTENCY_KEY="retry-me-1"))
    report("operations API with a key", "stored" if committed else "not stored", took, first.json()["code"])
    assert (first.status_code, first.json()["code"]) == (503, "unconfirmed")
    cut.restore()

    # History shows the truth once the database answers.
    assert len(history_of(user)) == (1 if committed else 0)
    # The retry, once the first attempt's lease has ended, answers the true outcome and changes nothing twice.
    record = IdempotencyKey.objects.get(user=user)
    if record.locked_until is not None:
        time.sleep(max(0.0, min(1.5, (record.locked_until - timezone.now()).total_seconds())))
    retry = api.post("/api/memory/operations/", payload, format="json", HTTP_IDEMPOTENCY_KEY="retry-me-1")
    assert retry.status_code == 200
    assert retry.json()["outcome"] == "committed" and retry.json()["changed"] == ["memory"]
    assert memory_of(user) == (FACT,)
    assert len(history_of(user)) == 1  # one change, whether the first stored it or the retry did
    again = api.post("/api/memory/operations/", payload, format="json", HTTP_IDEMPOTENCY_KEY="retry-me-1")
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert len(history_of(user)) == 1


# --- the memory page's forms ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_page_add_form_tells_the_truth(user, cut, mode, caplog):
    page = page_for(user)
    arm(cut, mode)
    response, took = timed(lambda: page.post("/memory/add/", {"target": "memory", "content": FACT},
                                             HTTP_ACCEPT="application/json"))
    assert cut.fired.is_set()
    body = response.json()
    report("page add", mode, took, (response.status_code, body.get("code"), body["message"]))
    if mode == "deliver":
        assert (response.status_code, body["ok"], body["message"]) == (200, True, "Added.")
    elif mode == "drop":
        assert (response.status_code, body["code"], body["message"]) == (503, "connection_lost", words.COMMIT_NOT_STORED)
    else:
        assert (response.status_code, body["code"], body["message"]) == (503, "unconfirmed", words.COMMIT_UNCONFIRMED)
        cut.restore()
    assert_bounded(mode, took, caplog)
    assert memory_of(user) == (() if mode == "drop" else (FACT,))


@pytest.mark.parametrize("mode", ["drop", "unreachable"])
def test_the_page_form_without_script_tells_the_truth(user, cut, mode):
    page = page_for(user)
    arm(cut, mode)
    response = page.post("/memory/add/", {"target": "memory", "content": FACT})
    if mode == "drop":  # the database answers: back to the page, which says so beside the form
        assert response.status_code == 302
        shown = page.get(response["Location"]).content.decode()
        assert "has since confirmed that nothing was saved" in shown
        assert memory_of(user) == ()
        return
    # The database does not answer, so nothing can be kept in the session for the next page: a page of its own.
    assert response.status_code == 503
    assert "We could not confirm whether this was saved" in response.content.decode()
    cut.restore()
    assert memory_of(user) == (FACT,)


# --- undo and restore -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_undo_through_the_api_tells_the_truth(user, cut, mode, caplog):
    change = store.commit_operations(user_id=user.pk, operations=[add(FACT)], actor=Actor.USER).change_id
    api = api_for(user)
    arm(cut, mode)
    response, took = timed(lambda: api.post(f"/api/memory/changes/{change}/undo/"))
    assert cut.fired.is_set()
    body = response.json()
    told = (response.status_code, body.get("outcome") or body.get("code"))
    report("undo API", mode, took, told)
    assert told == TOLD[mode]
    assert_bounded(mode, took, caplog)
    if mode == "unreachable":
        cut.restore()
    assert memory_of(user) == ((FACT,) if mode == "drop" else ())
    assert len(history_of(user)) == (1 if mode == "drop" else 2)
    if mode == "deliver":
        assert body["change_id"] == history_of(user)[0]


@pytest.mark.parametrize("mode", MODES)
def test_restore_from_the_page_tells_the_truth(user, cut, mode, caplog):
    first = store.commit_operations(user_id=user.pk, operations=[add(FACT)], actor=Actor.USER).change_id
    store.commit_operations(user_id=user.pk, operations=[add(OTHER)], actor=Actor.USER)
    page = page_for(user)
    arm(cut, mode)
    response, took = timed(lambda: page.post(f"/memory/changes/{first}/restore/", HTTP_ACCEPT="application/json"))
    assert cut.fired.is_set()
    body = response.json()
    report("restore page", mode, took, (response.status_code, body.get("code"), body["message"]))
    expected = {"deliver": (200, None, words.RESTORED), "drop": (503, "connection_lost", words.COMMIT_NOT_STORED),
                "unreachable": (503, "unconfirmed", words.COMMIT_UNCONFIRMED)}[mode]
    assert (response.status_code, body.get("code"), body["message"]) == expected
    assert_bounded(mode, took, caplog)
    if mode == "unreachable":
        cut.restore()
    assert memory_of(user) == ((FACT, OTHER) if mode == "drop" else (FACT,))
    assert len(history_of(user)) == (2 if mode == "drop" else 3)


# --- a chat turn's memory --------------------------------------------------------------------------


async def run_turn(user, *, key: str | None = None):
    memory = MemoryTurn(user_id=user.pk, enabled=True, idempotency_key=key)
    await memory.load()
    memory.heard([{"role": "user", "content": f"Please remember this: {FACT}."}])
    with memory.attempt():
        reply = handle_memory_update({"operations": [{"target": "memory", "action": "add", "content": FACT}]})
    assert reply.get("status") != "error", reply
    return await memory.commit()


@pytest.mark.parametrize("mode", MODES)
async def test_a_turn_tells_the_truth(user, cut, mode):
    arm(cut, mode)
    started = time.monotonic()
    outcome = await run_turn(user)
    took = time.monotonic() - started
    assert cut.fired.is_set()
    report("turn", mode, took, (outcome.status, outcome.code))
    expected = {"deliver": ("committed", ""), "drop": ("discarded", "connection_lost"),
                "unreachable": ("unconfirmed", "unconfirmed")}[mode]
    assert (outcome.status, outcome.code) == expected
    assert outcome.saved is (mode == "deliver")
    if mode == "unreachable":
        assert outcome.message == words.COMMIT_UNCONFIRMED
        assert WAIT <= took < WAIT + 3.5
        cut.restore()
    if mode == "deliver":
        assert outcome.change_id is not None and outcome.changed == ("memory",)
    assert await orm(memory_of, user) == (() if mode == "drop" else (FACT,))


async def test_a_turn_retried_under_its_idempotency_key_answers_the_truth(user, cut):
    arm(cut, "unreachable")
    first = await run_turn(user, key="turn-key-1")
    assert first.status == "unconfirmed"
    cut.restore()
    assert await orm(history_of, user) != []  # History shows it once the database answers

    retried = await run_turn(user, key="turn-key-1")
    assert retried.status == "committed" and retried.changed == ("memory",)
    assert await orm(lambda: len(history_of(user))) == 1  # the first commit's outcome, not a second commit


# --- the store on its own ---------------------------------------------------------------------------


def test_confirm_waits_for_the_writer_to_end_before_it_looks(user, cut):
    """A writer still open on the server (its COMMIT not arrived) holds the person's lock: confirm does not
    read "absent" then, it waits; it is UNKNOWN when the writer outlives the wait."""
    import threading

    from django.db import connections

    written = threading.Event()
    finish = threading.Event()
    outcome: dict = {}

    def writer():
        from django.db import transaction

        try:
            with transaction.atomic():
                outcome["change"] = store.commit_operations(user_id=user.pk, operations=[add(FACT)],
                                                            actor=Actor.USER).change_id
                written.set()
                finish.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert written.wait(10)
        answer, took = timed(lambda: store.confirm(change_id=outcome["change"], user_id=user.pk, wait=0.5))
        assert answer is store.Confirmation.UNKNOWN and took >= 0.5
        finish.set()
        thread.join(10)
        assert store.confirm(change_id=outcome["change"], user_id=user.pk, wait=1) is store.Confirmation.COMMITTED
        assert store.confirm(change_id=outcome["change"] + 1000, user_id=user.pk,
                             wait=1) is store.Confirmation.NOT_COMMITTED
    finally:
        finish.set()
        thread.join(10)


# --- on either database: the lookup and which errors leave the outcome open -----------------------------


def test_confirm_looks_the_change_id_up(user):
    change = store.commit_operations(user_id=user.pk, operations=[add(FACT)], actor=Actor.USER).change_id
    assert store.confirm(change_id=change, user_id=user.pk, wait=1) is store.Confirmation.COMMITTED
    assert store.confirm(change_id=change + 1000, user_id=user.pk, wait=1) is store.Confirmation.NOT_COMMITTED
    # Another person's change id is never theirs.
    from django.contrib.auth import get_user_model

    other = get_user_model().objects.create_user(username="bob", password="pw-bob-123")
    assert store.confirm(change_id=change, user_id=other.pk, wait=1) is store.Confirmation.NOT_COMMITTED


def test_which_errors_at_commit_leave_the_outcome_open():
    class Answered(Exception):
        def __init__(self, sqlstate):
            self.sqlstate = sqlstate

    assert store.outcome_unknown(Exception("server closed the connection unexpectedly"))  # no answer at all
    for sqlstate in ("08006", "08003", "57P01", "XX000"):  # the connection broke, the server went down
        assert store.outcome_unknown(Answered(sqlstate))
    for sqlstate in ("23505", "40001", "40P01", "25P02"):  # the server answered: it rolled back
        assert not store.outcome_unknown(Answered(sqlstate))


# --- the host's signal -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ("deliver", "drop"))
@pytest.mark.parametrize("writer", ("operations", "undo"))
def test_memory_committed_is_sent_once_the_database_confirms_the_change(user, cut, mode, writer):
    """A change whose COMMIT's answer was lost: its on_commit never ran, so the signal goes when the database
    confirms it stored (once, with its change id), and never when it confirms it is not. Through the commit's
    own transaction (operations) and a caller's transaction around it (undo, `commit_watch`)."""
    from agentmemory import signals
    from agentmemory.models import MemoryDocument

    change = store.commit_operations(user_id=user.pk, operations=[add(FACT)], actor=Actor.USER).change_id
    received: list[dict] = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    signals.memory_committed.connect(receiver, sender=MemoryDocument)
    try:
        api = api_for(user)
        arm(cut, mode)
        if writer == "operations":
            response = api.post("/api/memory/operations/",
                                {"operations": [{"target": "memory", "action": "add", "content": OTHER}]},
                                format="json")
        else:
            response = api.post(f"/api/memory/changes/{change}/undo/")
        assert cut.fired.is_set()
    finally:
        signals.memory_committed.disconnect(receiver, sender=MemoryDocument)
    if mode == "drop":
        assert response.status_code == 503 and received == []
        return
    assert response.status_code == 200
    stored = history_of(user)[0]  # newest first: the change the database confirmed
    assert stored != change
    assert [(sent["user_id"], sent["change_id"], sent["actor"], sent["changed"]) for sent in received] == [
        (user.pk, stored, Actor.USER, ("memory",))]
