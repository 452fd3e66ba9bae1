"""Through PgBouncer in transaction mode (issue 37, section 2): nothing one transaction sets outlives it.

A pooler in transaction mode hands one server connection to one client
transaction after another, so anything the application sets at session
level (a SET, a session set_config, a prepared statement, an advisory lock,
a LISTEN) would reach the next person's transaction on that connection. The
rules: the lock and statement timeouts are local to their transaction
(`set_config(..., true)`), prepared statements follow
DATABASE_PREPARE_THRESHOLD (off behind a pooler without prepared-statement
support), and no advisory lock or LISTEN is used at all.

This test starts a real PgBouncer (the Debian package's binary) with a
generated configuration in a directory of its own: transaction pooling, one
server connection per database and user (`default_pool_size = 1`), listening
on a free port of 127.0.0.1, trust authentication, in front of the test's
PostgreSQL. Every connection of this test process then goes through it (with
prepared statements off, as the deployment sets them there), and two people's
commits and reads, in turn and at once, run through Django on that one server
connection. Before and inside each transaction the other person's side reads,
through PgBouncer, `SHOW lock_timeout` and `SHOW statement_timeout`, every
setting whose source is the session, the prepared statements, advisory locks
and LISTEN channels: none of one person's transaction is seen by the next.
A control proves the check sees a leak: a session-level SET does show up.

Skipped when the pgbouncer binary is missing (CI installs it and sets
REQUIRE_PGBOUNCER=1, which makes that a failure), and on SQLite. PgBouncer is
stopped by its process id when the test ends.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, connections, transaction
from django.db.backends.signals import connection_created

from agentmemory import store
from agentmemory.models import Actor
from agentmemory.rules import Operation
from tests.multiprocess.servers import free_port, postgres_address

pytestmark = [pytest.mark.django_db(transaction=True)]

START_SECONDS = 10
STOP_SECONDS = 5
ROUNDS = 6
# Parameters PgBouncer itself keeps per client and sets again on the server connection it hands over
# (its "tracked" parameters): a client's own value, never another's.
TRACKED_BY_PGBOUNCER = {"client_encoding", "DateStyle", "TimeZone", "standard_conforming_strings",
                        "application_name", "IntervalStyle"}


def pgbouncer_binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(path, os.X_OK)), None)


@pytest.fixture
def pgbouncer(postgres_only, transactional_db):
    """A PgBouncer in transaction mode with one server connection; yields its port."""
    binary = pgbouncer_binary()
    if binary is None:
        if os.environ.get("REQUIRE_PGBOUNCER") == "1":
            pytest.fail("REQUIRE_PGBOUNCER=1 but the pgbouncer binary is not installed (apt-get install pgbouncer)")
        pytest.skip("needs the pgbouncer binary (Debian package pgbouncer)")
    host, port = postgres_address()
    user = connection.settings_dict.get("USER") or "postgres"
    listen = free_port()
    directory = Path(tempfile.mkdtemp(prefix="pgbouncer-test-"))
    (directory / "userlist.txt").write_text(f'"{user}" ""\n')
    (directory / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={host} port={port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {directory / 'userlist.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 1\nmin_pool_size = 0\nreserve_pool_size = 0\n"
        "max_client_conn = 50\nserver_reset_query =\nignore_startup_parameters = extra_float_digits\n"
    )
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    # PgBouncer refuses to run as root; as root it drops to the postgres account (-u).
    command = [binary, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(directory / "pgbouncer.ini")]
    log = open(directory / "pgbouncer.log", "wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", listen), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("pgbouncer did not start: " + (directory / "pgbouncer.log").read_text()[-2000:])
                time.sleep(0.05)
        yield listen
    finally:
        connections.close_all()
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_SECONDS)
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def through_pgbouncer(pgbouncer):
    """Every new connection of this process goes through PgBouncer, prepared statements off (as deployed there).

    The test process's own session-level SET (tests/fast_database.py) is left out meanwhile: through a
    pooler it would be exactly the leak this test looks for.
    """
    database = connection.settings_dict  # shared by every thread's connection of the default alias
    saved = database.get("HOST"), database.get("PORT"), database.get("OPTIONS")
    connections.close_all()
    connection_created.disconnect(dispatch_uid="tests_fast_database")
    database["HOST"], database["PORT"] = "127.0.0.1", pgbouncer
    database["OPTIONS"] = {**(saved[2] or {}), "prepare_threshold": None}
    try:
        yield pgbouncer
    finally:
        connections.close_all()
        database["HOST"], database["PORT"], database["OPTIONS"] = saved
        from tests.fast_database import commit_without_waiting_for_the_disk

        connection_created.connect(commit_without_waiting_for_the_disk, dispatch_uid="tests_fast_database")


SEEN = (
    "SELECT pg_backend_pid(), current_setting('lock_timeout'), current_setting('statement_timeout'), "
    "(SELECT coalesce(string_agg(name, ',' ORDER BY name), '') FROM pg_settings WHERE source = 'session'), "
    "(SELECT count(*) FROM pg_prepared_statements), "
    "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), "
    "(SELECT count(*) FROM pg_listening_channels())"
)


def seen() -> dict:
    """What this transaction finds on its server connection, through PgBouncer."""
    with connection.cursor() as cursor:
        cursor.execute(SEEN)
        pid, lock, statement, session, prepared, advisory, listening = cursor.fetchone()
        cursor.execute("SHOW lock_timeout")
        assert cursor.fetchone()[0] == lock
    names = {name for name in session.split(",") if name} - {name.lower() for name in TRACKED_BY_PGBOUNCER}
    names -= TRACKED_BY_PGBOUNCER
    return {"pid": pid, "lock_timeout": lock, "statement_timeout": statement, "session_settings": sorted(names),
            "prepared": prepared, "advisory": advisory, "listening": listening}


def clean(defaults: dict) -> dict:
    return {**defaults, "session_settings": [], "prepared": 0, "advisory": 0, "listening": 0}


def server_defaults() -> dict:
    """lock_timeout and statement_timeout as the server gives them to a new session (read directly)."""
    import psycopg

    host, port = postgres_address()
    settings_dict = connection.settings_dict
    with psycopg.connect(host=host, port=port, user=settings_dict.get("USER") or "postgres",
                         password=settings_dict.get("PASSWORD") or None, dbname=settings_dict["NAME"],
                         autocommit=True) as direct:
        lock, statement = direct.execute(
            "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')").fetchone()
    return {"lock_timeout": lock, "statement_timeout": statement}


def a_persons_work(user, round_: int) -> dict:
    """One person's memory work: a turn's bounded read, a commit (psycopg's own transaction), a commit
    under an idempotency key (Django's), a lock taken inside a caller's transaction; what it saw inside."""
    inside = {}
    store.load_for_turn(user_id=user.pk, timeout=0.7)
    store.commit_operations(user_id=user.pk, actor=Actor.USER,
                            operations=[Operation(target="memory", action="add", content=f"Round {round_} note")])
    with store.bounded_wait(0.9, statement=True):
        inside["bounded"] = seen()  # the local timeouts in force inside the transaction that set them
    with transaction.atomic():
        store.lock_person(user_id=user.pk)
        inside["locked"] = seen()
    return inside


def test_nothing_one_transaction_sets_is_seen_by_the_next_through_pgbouncer(user, other_user, through_pgbouncer):
    defaults = server_defaults()

    # The control: a session-level SET does reach the next transaction on the one server connection.
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '4321ms'")
    leaked = seen()
    assert leaked["lock_timeout"] == "4321ms"
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")
    assert seen()["lock_timeout"] == defaults["lock_timeout"]

    # In turn: alice's work, then bob's transaction on the same server connection, and the other way round.
    pids = set()
    started = time.monotonic()
    for round_ in range(ROUNDS):
        inside = a_persons_work(user, round_)
        assert inside["bounded"]["lock_timeout"] == "900ms" and inside["bounded"]["statement_timeout"] == "900ms"
        with transaction.atomic():
            after = seen()
        assert {k: v for k, v in after.items() if k != "pid"} == clean(defaults), after
        store.commit_operations(user_id=other_user.pk, actor=Actor.USER,
                                operations=[Operation(target="user", action="add", content=f"Bob {round_}")])
        with transaction.atomic():
            assert {k: v for k, v in seen().items() if k != "pid"} == clean(defaults)
        pids |= {inside["bounded"]["pid"], inside["locked"]["pid"], after["pid"]}
    assert len(pids) == 1, pids  # one server connection served every transaction
    in_turn = time.monotonic() - started

    # At once: two people's threads, each checking what it finds as its transactions begin.
    problems: list = []
    barrier = threading.Barrier(2)

    def person(owner, name):
        try:
            barrier.wait(5)
            for round_ in range(ROUNDS):
                with transaction.atomic():
                    first = seen()  # the first statement of a transaction this person begins
                if {k: v for k, v in first.items() if k != "pid"} != clean(defaults):
                    problems.append((name, round_, first))
                pids.add(first["pid"])
                a_persons_work(owner, ROUNDS + round_)
        except Exception as exc:  # reported below, with the thread's name
            problems.append((name, type(exc).__name__, str(exc)[:200]))
        finally:
            connections.close_all()

    started = time.monotonic()
    threads = [threading.Thread(target=person, args=(owner, name)) for owner, name in
               ((user, "alice"), (other_user, "bob"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    at_once = time.monotonic() - started
    assert problems == []
    assert len(pids) == 1, pids
    assert store.load_snapshot(user_id=user.pk).entries("memory")[-1] == f"Round {2 * ROUNDS - 1} note"
    print(f"\nthrough PgBouncer (transaction mode, 1 server connection): {ROUNDS} rounds in turn in "
          f"{in_turn * 1000:.0f} ms, {ROUNDS} rounds of two people at once in {at_once * 1000:.0f} ms; "
          f"server backends seen: {len(pids)}; settings seen by another transaction: none")
