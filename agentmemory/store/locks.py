"""The per-person write lock every writer of memory takes first, and how long any wait may last.

This module owns the lock query's use and the bounds on waiting; the commit,
an erase, the memory switch and proposals take the lock through it.

Locking. `commit_operations` and `erase` first lock the owner's row in the
user table (`SELECT ... FOR NO KEY UPDATE` on PostgreSQL), then reload the memory rows, reapply the
whole ordered batch with the pure rules and write only what changed. Every
writer of memory takes that one lock first, so on PostgreSQL two writers for
one person queue: at READ COMMITTED each statement after the lock sees the
latest committed rows, so no update is lost. The lock is on the user row, not
on memory rows, because a person with no memory has no memory row to lock and
two first writes would both insert. We chose the lock over SERIALIZABLE
because SERIALIZABLE makes contending writers fail with 40001 and retry,
which under eight concurrent writers exhausts a small attempt limit; the lock
queues them and keeps every valid change. Deleting the account also locks the
user row, so it cannot interleave with a commit.

On SQLite the connection opens every transaction with BEGIN IMMEDIATE
(config/settings.py), which takes the database's single write lock, so
commits are serialised there too; FOR UPDATE is a no-op on SQLite.
"""
from __future__ import annotations

from contextlib import contextmanager, nullcontext

from django.db import connection, transaction

from ..conf import memory_settings
from ..rules import MemoryValidationError
from .errors import InactiveUser, MemoryTurnedOff, UnknownUser
from .statements import Statements, vendor_statements


@contextmanager
def bounded_wait(seconds: float, *, statement: bool = False):
    """Bound how long the database work inside may wait for locks (and run).

    PostgreSQL: `lock_timeout` (and `statement_timeout` with `statement`),
    set local to a transaction, so nothing outlives the block. SQLite: the
    connection's busy timeout, restored afterwards. A wait past the bound
    raises a DatabaseError that `is_lock_timeout` recognises.
    """
    milliseconds = max(1, int(seconds * 1000))
    if connection.vendor == "postgresql":
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                    [f"{milliseconds}ms", f"{milliseconds}ms" if statement else "0"],
                )
            yield
        return
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            previous = cursor.fetchone()[0]
            cursor.execute(f"PRAGMA busy_timeout = {milliseconds}")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"PRAGMA busy_timeout = {int(previous)}")
        return
    yield


def lock_wait(db, seconds: float):
    """Bound SQLite's wait for its write lock (taken by BEGIN IMMEDIATE, before
    the transaction's first statement); PostgreSQL's is set in the transaction."""
    return bounded_wait(seconds) if db.vendor == "sqlite" else nullcontext()


ERASED_MESSAGE = "The person erased their memory while this turn ran; nothing staged before the erase is saved."


def lock_owner(cursor, sql: Statements, user_id, *, agent: bool = False, lock_timeout: float | None = None,
                erasures: int | None = None):
    """Lock the owner's row in the user table (the per-person write lock).

    Return the id as the database stores it; raise UnknownUser if no account
    has it. For the agent's commit (`agent`), raise InactiveUser if the
    account is deactivated and MemoryTurnedOff if the person switched memory off.
    With `lock_timeout` (seconds) the wait for the lock is bounded (PostgreSQL;
    SQLite's wait is bounded before the transaction begins). With `erasures`
    (the erase count a turn read), raise MemoryValidationError `erased` when
    the person erased their memory since.
    """
    owner = sql.owner(user_id)
    if lock_timeout is not None and sql.bounded_with_timeout:
        cursor.execute(sql.lock_owner_bounded, [f"{max(1, int(lock_timeout * 1000))}ms", owner])
    else:
        cursor.execute(sql.lock_owner, [owner])
    row = cursor.fetchone()
    if row is None:
        raise UnknownUser("No account has this id; memory belongs only to existing accounts.")
    if agent and not row[0]:
        raise InactiveUser("The account is deactivated; its memory takes no new changes.")
    if agent and row[1] is not None and not row[1]:
        raise MemoryTurnedOff("The person turned memory off; the assistant's changes are not saved.")
    if erasures is not None and connection.vendor == "postgresql":
        # At READ COMMITTED the lock statement read the settings row before it waited for the lock: an erase
        # that held the lock and committed meanwhile is not in that read. The same statement again, the
        # lock held, reads the count the erase left (no wait: the lock is ours).
        cursor.execute(sql.lock_owner, [owner])
        row = cursor.fetchone()
    if erasures is not None and (row[2] or 0) != erasures:
        raise MemoryValidationError(ERASED_MESSAGE, code="erased")
    return owner


def lock_person(*, user_id, agent: bool = False, erasures: int | None = None):
    """Take the person's write lock inside the caller's transaction; return the stored id.

    For writers beside the memory rows (the memory switch, proposals) that
    must queue with commits. Raise UnknownUser if no account has this id;
    with `agent`, also InactiveUser and MemoryTurnedOff, as for the agent's commit.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("lock_person must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        return lock_owner(cursor, vendor_statements(), user_id, agent=agent,
                           lock_timeout=memory_settings().commit_lock_timeout, erasures=erasures)
