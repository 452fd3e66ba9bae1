"""Persistent connections and prepared statements (issue 14).

- The PostgreSQL defaults: connections kept for CONN_MAX_AGE=60 seconds with
  health checks, and a prepare threshold for the memory commit's statements
  (off behind PgBouncer's default port, or when DATABASE_PREPARE_THRESHOLD
  says off).
- With those defaults a turn's worker-thread calls (the memory read and the
  conversation log at the start, the memory commit and the reply at the end)
  reuse the thread's connection: several turns that each commit a memory
  change open no new connection after the first. The count comes from
  Django's connection_created signal, in every thread.

The suite itself runs with CONN_MAX_AGE=0 (tests/env_defaults.py), so
pooled threads do not keep the test database open; these tests turn
persistent connections on for themselves, on a private one-thread executor
whose connection they close at the end.
"""
from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.db.backends.signals import connection_created

from chat.turns import run_turn
from tests.chat_helpers import fresh_agents  # noqa: F401
from tests.test_deploy_settings import run_with

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS_PROBE = (
    "import django, json; django.setup(); from django.conf import settings; d = settings.DATABASES['default']; "
    "print(json.dumps([d.get('CONN_MAX_AGE'), d.get('CONN_HEALTH_CHECKS'), d['OPTIONS'].get('prepare_threshold')]))"
)


def database_settings(url: str, **env) -> list:
    result = run_with({"DATABASE_URL": url, **env}, "-c", SETTINGS_PROBE)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_postgresql_defaults_keep_connections_with_health_checks_and_prepare():
    url = "postgres://u@db.example:5432/app"
    assert database_settings(url) == [60, True, 5]
    assert database_settings(url, CONN_MAX_AGE="0", DATABASE_PREPARE_THRESHOLD="off") == [0, True, None]
    assert database_settings(url, DATABASE_PREPARE_THRESHOLD="0") == [60, True, 0]


def test_pgbouncer_default_port_turns_prepared_statements_off_unless_asked():
    url = "postgres://u@pool.example:6432/app"
    assert database_settings(url)[2] is None
    assert database_settings(url, DATABASE_PREPARE_THRESHOLD="5")[2] == 5


class Opens:
    """Count new database connections in any thread."""

    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()

    def __call__(self, sender, connection, **kwargs):
        with self.lock:
            self.count += 1


async def turns_opening(user, *, conn_max_age: int, turns: int) -> tuple[int, list[str]]:
    """Run a warm-up turn, then `turns` turns that each commit; return new connections and outcomes."""
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn-db")
    loop.set_default_executor(executor)
    shared = connections.settings["default"]  # every thread's DatabaseWrapper reads this dict
    saved = shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"]
    shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"] = conn_max_age, True
    opens = Opens()
    outcomes = []
    try:
        first = await run_turn(user=user, content="remember: warm-up fact")
        outcomes.append(first.memory.status)
        connection_created.connect(opens)
        for number in range(turns):
            result = await run_turn(user=user, content=f"remember: fact number {number}",
                                    conversation_id=first.conversation_id)
            outcomes.append(result.memory.status)
    finally:
        connection_created.disconnect(opens)
        shared["CONN_MAX_AGE"], shared["CONN_HEALTH_CHECKS"] = saved
        await loop.run_in_executor(executor, connections.close_all)
        executor.shutdown(wait=True)
    return opens.count, outcomes


async def test_turns_that_commit_reuse_the_threads_connection(user):
    opens, outcomes = await turns_opening(user, conn_max_age=60, turns=4)
    assert outcomes == ["committed"] * 5
    assert opens == 0, "a turn (its log writes and its memory commit) opened a new connection"


async def test_without_persistent_connections_every_worker_call_connects(user):
    # The control: the count above would see reconnects if there were any.
    opens, outcomes = await turns_opening(user, conn_max_age=0, turns=2)
    assert outcomes == ["committed"] * 3
    # Per turn: the read and log, the commit, the reply (on SQLite the file is opened as often).
    assert opens >= 2 * 3


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_the_commit_statements_are_prepared_on_postgresql(user):
    from agentmemory import store
    from agentmemory.rules import Operation

    connection.ensure_connection()
    if connection.connection.prepare_threshold is None:
        pytest.skip("DATABASE_PREPARE_THRESHOLD is off in this environment")
    for number in range(connection.connection.prepare_threshold + 2):
        store.commit_operations(user_id=user.pk, operations=[Operation("memory", "add", content=f"fact {number}")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("FOR NO KEY UPDATE" in statement and "lock_timeout" in statement for statement in prepared)
    assert any(statement.startswith("INSERT INTO \"agentmemory_event\"") for statement in prepared)


def our_prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall() if "agentmemory_" in row[0] or "lock_timeout" in row[0]]


@pytest.fixture
def prepare_threshold():
    """Set the connection's prepare threshold for one test; a fresh connection after.

    Closing it also drops psycopg's record of statements the test made the
    server forget, so later tests start from a clean connection.
    """
    connection.ensure_connection()

    def set_to(value):
        connection.connection.prepare_threshold = value

    yield set_to
    connection.close()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_with_prepared_statements_off_the_commit_still_binds_server_side_and_prepares_nothing(
        user, prepare_threshold):
    from django.test.utils import CaptureQueriesContext

    from agentmemory import store
    from agentmemory.rules import Operation

    prepare_threshold(None)  # DATABASE_PREPARE_THRESHOLD=off, as behind PgBouncer in transaction mode
    with CaptureQueriesContext(connection) as queries:
        for number in range(8):
            store.commit_operations(user_id=user.pk, operations=[Operation("memory", "add", content=f"fact {number}")])
    assert our_prepared_statements() == []
    lock = [q["sql"] for q in queries.captured_queries if "lock_timeout" in q["sql"]]
    # Server-side binding: the statement goes with placeholders and its values apart
    # (a client-bound one would carry the quoted values in its text).
    assert len(lock) == 8 and all("$1" in sql and "'3000ms'" not in sql for sql in lock)
    assert len(store.load_snapshot(user_id=user.pk).memory) == 8


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's")
def test_a_server_that_loses_a_prepared_statement_turns_preparing_off_and_the_commit_is_retried(
        user, prepare_threshold, monkeypatch, caplog):
    from agentmemory import store
    from agentmemory.rules import Operation
    from agentmemory.store import statements

    # The flag lives where the cursor reads it (agentmemory/store/statements.py).
    monkeypatch.setattr(statements, "_prepared_statements_off", False)
    prepare_threshold(1)
    add = [Operation("memory", "add", content="first fact")]
    for _ in range(3):
        store.commit_operations(user_id=user.pk, operations=add + [Operation("memory", "remove", match="first fact")])
    assert our_prepared_statements(), "the commit's statements were prepared"
    # What a pooler in transaction mode does: the next statement lands on a server
    # connection that never saw them. DEALLOCATE inside DO, so psycopg still thinks they exist.
    with connection.cursor() as cursor:
        cursor.execute("DO $$ BEGIN EXECUTE 'DEALLOCATE ALL'; END $$")
    assert our_prepared_statements() == []
    with caplog.at_level("WARNING", logger="agentmemory.store"):
        result = store.commit_operations(user_id=user.pk, operations=add)
        store.commit_operations(user_id=user.pk, operations=[Operation("memory", "add", content="second fact")])
    assert result.outcome == "committed" and result.retry_count == 1
    kept_both = store.load_snapshot(user_id=user.pk).memory == ("first fact", "second fact")
    assert kept_both  # a boolean: a failure never prints what was stored
    warnings = [r for r in caplog.records if "refused a prepared statement" in r.getMessage()]
    assert len(warnings) == 1  # once per process, not per commit
    assert statements._prepared_statements_off is True
    assert our_prepared_statements() == []  # nothing prepared again in this process



async def test_worker_calls_leave_no_connection_open_without_persistent_connections(user):
    """With CONN_MAX_AGE=0 every worker-thread call closes the connection it opened, inside the
    call's own context (agentmemory.workers). The socket's admit check used channels'
    DatabaseSyncToAsync, which closes outside that context: when the admit was a thread's last call
    (here: a message on a socket whose session has ended), its connection stayed open."""
    from django.contrib.sessions.models import Session

    from tests.chat_helpers import connect, receive_until

    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="socket-db")
    loop.set_default_executor(executor)
    assert connections.settings["default"]["CONN_MAX_AGE"] == 0  # the suite's setting (tests/env_defaults.py)

    def other_sessions() -> int | None:
        """Sessions on the test database besides this probe's own (PostgreSQL)."""
        if connection.vendor != "postgresql":
            return None
        probe = connections.create_connection("default")
        try:
            with probe.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                               "AND pid <> pg_backend_pid()")
                return cursor.fetchone()[0]
        finally:
            probe.close()

    def end_sessions() -> None:
        try:
            Session.objects.all().delete()
        finally:
            connection.close()

    def thread_connection_open() -> bool:
        return connections["default"].connection is not None

    try:
        before = await asyncio.to_thread(other_sessions)  # the test's own (it created the person), if open
        socket = await connect(user)
        connected = await asyncio.to_thread(other_sessions)
        await loop.run_in_executor(executor, end_sessions)
        await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "hello", "conversation_id": None}))
        frames = await receive_until(socket, "socket_closed")
        await socket.disconnect()
        left_open = await loop.run_in_executor(executor, thread_connection_open)
        after = await asyncio.to_thread(other_sessions)
    finally:
        await loop.run_in_executor(executor, connections.close_all)
        executor.shutdown(wait=True)
    assert frames[-1]["code"] == "session_ended"
    assert left_open is False, "the admit check left its database connection open in the worker thread"
    assert connected == before, f"{connected} database sessions once the socket was signed in, {before} before"
    assert after == before, f"{after} database sessions after the refused message, {before} before it"
