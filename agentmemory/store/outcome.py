"""Commits whose outcome is unknown, and finding out what became of them.

When the connection fails during or right after COMMIT (the server is
killed, a pooler drops the connection, the network cuts), the application
cannot tell whether the change is durable: the COMMIT may have reached the
server and committed, with only its answer lost, or it may never have
arrived. Nobody may then be told "saved" or "nothing was saved" on a guess.

Every commit that changes memory writes its change id in its own
transaction: the audit event's id, which INSERT ... RETURNING gives back
before the COMMIT. Sequence values are never handed out twice, so after the
failure that id names exactly one transaction's row: it is in the database if
and only if that transaction committed.

- `commit_operations` raises `CommitOutcomeUnknown` (with the change id and
  the result it would have returned) when its own COMMIT fails that way. An
  unchanged commit has no change id and changed nothing either way: its error
  stays a DatabaseError.
- `commit_watch()` does the same for a caller's own transaction around a
  commit (undo and restore, a proposal's save, a turn that commits and
  proposes in one transaction): a failure that may hide its COMMIT, after a
  change was written in it, raises `CommitOutcomeUnknown`.
- `confirm(change_id=, user_id=, wait=)` reconnects within a bounded wait
  (AGENTMEMORY COMMIT_CONFIRM_SECONDS, default 10) and answers
  `Confirmation.COMMITTED`, `NOT_COMMITTED`, or `UNKNOWN` when the database
  did not answer in time.

Why `confirm` takes a lock before it looks. Right after the failure the
transaction may still be alive on the server: a COMMIT still in flight, or
a backend that has not yet noticed its client is gone. Looking then could
find no row for a change that commits a moment later. Every writer holds the
person's lock (their user row, FOR NO KEY UPDATE) from before it writes the
change id until its transaction ends, so `confirm` first takes a lock that
conflicts with it (FOR SHARE, bounded by the remaining wait): once it has it,
that transaction has ended, committed or rolled back, and the lookup is
the truth. A server that never notices the lost client holds the lock until
its TCP keepalive or `idle_in_transaction_session_timeout` ends the session;
until then the answer is UNKNOWN, never a guess.

Each attempt is a new connection, whatever the caller's connection is doing,
with its connect timeout cut to the time left (libpq's minimum is 2 s, so the
last attempt may end up to 2 s past the wait). Its lock and statement timeouts
are local to its one read-only transaction, which is rolled back.
"""
from __future__ import annotations

import contextvars
import logging
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from ..conf import memory_settings
from ..models import MemoryEvent
from .errors import CommitOutcomeUnknown, outcome_unknown

logger = logging.getLogger("agentmemory.store")

# Between two attempts to reach the database.
RETRY_PAUSE_SECONDS = 0.2
# libpq's (and psycopg's) smallest connect timeout.
MIN_CONNECT_TIMEOUT = 2


class Confirmation(str, Enum):
    """What the database says about a change whose COMMIT failed."""

    COMMITTED = "committed"  # the change is stored
    NOT_COMMITTED = "not_committed"  # it is not, and never will be
    UNKNOWN = "unknown"  # the database did not answer within the wait


def confirm(*, change_id: int, user_id, wait: float | None = None) -> Confirmation:
    """Find out whether the change `change_id` of `user_id` committed, within `wait` seconds.

    Never raises for a database that cannot be reached: that is UNKNOWN.
    """
    wait = memory_settings().commit_confirm_seconds if wait is None else wait
    deadline = time.monotonic() + max(0.0, float(wait))
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor != "postgresql":
        # SQLite is a file in this process: no connection to lose, nothing to reconnect.
        try:
            return _look(db, change_id, user_id, lock_seconds=None)
        except DatabaseError:
            return Confirmation.UNKNOWN
    if not db.in_atomic_block:
        # The connection that failed is of no further use; the caller's next query reconnects.
        try:
            db.close()
        except DatabaseError:
            pass
    attempts = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            logger.warning("memory commit outcome unconfirmed: the database did not answer in time",
                           extra={"attempts": attempts})
            return Confirmation.UNKNOWN
        attempts += 1
        try:
            found = _look_on_new_connection(db, change_id, user_id, remaining)
        except DatabaseError as exc:  # unreachable, or the lock wait ran out: try again while time is left
            logger.info("memory commit outcome not confirmed yet: %s", type(exc).__name__)
            time.sleep(min(RETRY_PAUSE_SECONDS, max(0.0, deadline - time.monotonic())))
            continue
        logger.warning("memory commit outcome confirmed after its connection failed",
                       extra={"outcome": found.value, "attempts": attempts})
        return found


def _look_on_new_connection(db, change_id, user_id, remaining: float) -> Confirmation:
    settings_dict = dict(db.settings_dict)
    options = dict(settings_dict.get("OPTIONS") or {})
    configured = options.get("connect_timeout")
    timeout = max(MIN_CONNECT_TIMEOUT, math.ceil(remaining))
    options["connect_timeout"] = min(int(configured), timeout) if configured else timeout
    settings_dict["OPTIONS"] = options
    probe = type(db)(settings_dict, alias=db.alias)
    try:
        probe.set_autocommit(False)
        found = _look(probe, change_id, user_id, lock_seconds=remaining)
        try:
            probe.rollback()  # read-only: its local timeouts and its lock end here
        except DatabaseError:
            pass  # the answer stands; closing ends the transaction too
        return found
    finally:
        try:
            probe.close()
        except DatabaseError:
            pass


def _look(db, change_id, user_id, *, lock_seconds: float | None) -> Confirmation:
    """Wait for the writer that held the person's lock to end, then look the change id up."""
    quote = db.ops.quote_name
    user_model = get_user_model()
    users, user_pk = quote(user_model._meta.db_table), quote(user_model._meta.pk.column)
    events = quote(MemoryEvent._meta.db_table)
    event_pk, event_user = quote(MemoryEvent._meta.pk.column), quote(MemoryEvent._meta.get_field("user").column)
    owner = user_model._meta.pk.get_db_prep_value(user_id, db)
    with db.cursor() as cursor:
        if lock_seconds is not None and db.vendor == "postgresql":
            milliseconds = f"{max(1, int(lock_seconds * 1000))}ms"
            cursor.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                           [milliseconds, milliseconds])
            # FOR SHARE conflicts with the writer's FOR NO KEY UPDATE: granted once that transaction ended.
            cursor.execute(f"SELECT 1 FROM {users} WHERE {user_pk} = %s FOR SHARE", [owner])
            cursor.fetchall()
        cursor.execute(f"SELECT 1 FROM {events} WHERE {event_pk} = %s AND {event_user} = %s", [change_id, owner])
        return Confirmation.COMMITTED if cursor.fetchone() is not None else Confirmation.NOT_COMMITTED


# --- callers that tell a person ---------------------------------------------------------------------


class CommitNotStored(Exception):
    """The connection failed at the COMMIT and the database then confirmed the change is not stored."""


class CommitUnconfirmed(Exception):
    """The connection failed at the COMMIT and the database did not answer within the wait: not known."""

    def __init__(self, unknown: CommitOutcomeUnknown) -> None:
        super().__init__("whether the change is stored could not be confirmed in time")
        self.change_id = unknown.change_id


for _exception in (CommitNotStored, CommitUnconfirmed):
    _exception.__module__ = "agentmemory.store"
del _exception


def commit_confirmed(commit, /, *args, announce=None, wait: float | None = None, **kwargs):
    """Run `commit(*args, **kwargs)`, a write of memory that returns a CommitResult; return its result.

    If the connection failed at its COMMIT (its own, or that of a transaction
    around it: `commit_watch`), ask the database (`confirm`): the result when
    the change is stored, after `announce(result)` (e.g. telling the person's
    open pages, which the failed write did not); CommitNotStored when it is
    not; CommitUnconfirmed when the database did not answer within `wait`.
    """
    try:
        with commit_watch():
            return commit(*args, **kwargs)
    except CommitOutcomeUnknown as unknown:
        truth = unknown.confirm(wait=wait)
        if truth is Confirmation.COMMITTED:
            if announce is not None and unknown.result is not None:
                announce(unknown.result)
            return unknown.result
        if truth is Confirmation.NOT_COMMITTED:
            raise CommitNotStored("the database confirmed the change is not stored") from unknown
        raise CommitUnconfirmed(unknown) from unknown


# --- a caller's own transaction around a commit ---------------------------------------------------


@dataclass
class _Written:
    user_id: object
    change_id: int
    result: object
    signal: dict
    committed: bool = False

    def mark_committed(self) -> None:
        self.committed = True


_watched: contextvars.ContextVar[list[_Written] | None] = contextvars.ContextVar("agentmemory_commit_watch",
                                                                                  default=None)


@contextmanager
def commit_watch():
    """Around a caller's transaction that holds a commit: raise CommitOutcomeUnknown when its COMMIT may have failed.

    `commit_operations` inside an outer transaction notes the change it
    wrote; when that outer transaction commits, the note is marked done. A
    DatabaseError leaving this block while the last change noted is not known
    committed, of a kind that may hide a COMMIT (`errors.outcome_unknown`),
    becomes CommitOutcomeUnknown. Also usable as a decorator. Nested watches
    leave it to the outermost.
    """
    if _watched.get() is not None:
        yield
        return
    written: list[_Written] = []
    token = _watched.set(written)
    try:
        yield
    except DatabaseError as exc:
        last = written[-1] if written else None
        if last is not None and not last.committed and outcome_unknown(exc):
            # Every change written in that transaction stands or falls with it: their signals go with it.
            pending = tuple(noted.signal for noted in written if not noted.committed)
            raise CommitOutcomeUnknown(change_id=last.change_id, user_id=last.user_id, result=last.result,
                                       committed=pending) from exc
        raise
    finally:
        _watched.reset(token)


def note_written(*, user_id, change_id: int, result, signal: dict) -> None:
    """Note a change written inside a caller's transaction (see `commit_watch`); nothing without a watch."""
    written = _watched.get()
    if written is None:
        return
    noted = _Written(user_id=user_id, change_id=change_id, result=result, signal=signal)
    written.append(noted)
    transaction.on_commit(noted.mark_committed)
