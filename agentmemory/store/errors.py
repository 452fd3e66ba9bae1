"""What the store raises, and which database errors it retries or reads as a wait that ran out.

The exceptions' messages are written to be content-free (telemetry lets them
through unredacted), and they keep `agentmemory.store` as their module: that
qualified name is the one telemetry's content-free list, logs and spans
carry, and every caller imports them from there.
"""
from __future__ import annotations

import sqlite3
from collections.abc import Mapping

RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})
# lock_not_available (lock_timeout) and query_canceled (statement_timeout).
LOCK_TIMEOUT_SQLSTATES = frozenset({"55P03", "57014"})
_SQLITE_RETRYABLE = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class MemoryUnavailable(Exception):
    """Memory could not be read; the turn goes on without it and writes nothing."""


class SchemaVersionError(MemoryUnavailable):
    """A stored document has a schema_version this code cannot read."""


class CommitCancelled(Exception):
    """The caller went away; the transaction was rolled back."""


class UnknownUser(Exception):
    """No account has this id; memory belongs only to existing accounts."""


class InactiveUser(UnknownUser):
    """The account is deactivated: an agent's commit for it is refused."""


class MemoryTurnedOff(Exception):
    """The person turned memory off (their switch): an agent's commit is refused."""


class AlreadyCommitted(Exception):
    """A commit under this key already stands; nothing was committed now. `outcome` is the first one's.

    Raised by `idempotency.CommitGuard` under the person's lock, inside the
    store's commit; defined here, below both, so the store imports nothing
    from `agentmemory.idempotency`. Its public home stays
    `agentmemory.idempotency.AlreadyCommitted`.
    """

    def __init__(self, outcome: Mapping) -> None:
        super().__init__("a commit under this idempotency key already stands")
        self.outcome = dict(outcome)


AlreadyCommitted.__module__ = "agentmemory.idempotency"


class CommitOutcomeUnknown(Exception):
    """The connection failed at a COMMIT, after a change was written: whether it is stored is not known.

    `change_id` is the change's audit event id, written in the same
    transaction (INSERT ... RETURNING, before the COMMIT), so the database can
    be asked afterwards (`confirm()`, `store.confirm`). `result` is what the
    commit returns had it been confirmed. Never a DatabaseError: code that
    knows nothing of it must not read it as "nothing was saved".
    """

    def __init__(self, *, change_id: int, user_id, result=None, committed: tuple[dict, ...] = ()) -> None:
        super().__init__("the connection failed at COMMIT; whether the change is stored is not known yet")
        self.change_id = change_id
        self.user_id = user_id
        self.result = result
        # The `memory_committed` signal of each change written in the transaction (ids and counts): its
        # on_commit never ran, so `confirm` sends it when the database says the transaction committed.
        self.committed = committed

    def confirm(self, *, wait: float | None = None):
        """Ask the database, within `wait` seconds (COMMIT_CONFIRM_SECONDS): a `store.Confirmation`.

        When it answers COMMITTED, the changes' `memory_committed` signals are sent, once.
        """
        from .. import signals
        from ..models import MemoryDocument
        from .outcome import Confirmation, confirm

        truth = confirm(change_id=self.change_id, user_id=self.user_id, wait=wait)
        if truth is Confirmation.COMMITTED:
            committed, self.committed = self.committed, ()
            for sent in committed:
                signals.send_now(signals.memory_committed, MemoryDocument, **sent)
        return truth


# Their public home, which telemetry.CONTENT_FREE_EXCEPTIONS names.
for _exception in (MemoryUnavailable, SchemaVersionError, CommitCancelled, UnknownUser, InactiveUser,
                   MemoryTurnedOff, CommitOutcomeUnknown):
    _exception.__module__ = "agentmemory.store"
del _exception


def is_retryable(exc: BaseException) -> bool:
    """Return True for a deadlock or serialization failure, and nothing else."""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) in RETRYABLE_SQLSTATES or _sqlite_busy(cause)


def _sqlite_busy(cause: BaseException) -> bool:
    """Return True for SQLite's busy/locked errors (its lock wait ran out)."""
    if isinstance(cause, sqlite3.OperationalError):
        code = getattr(cause, "sqlite_errorcode", None)
        return code is not None and (code & 0xFF) in _SQLITE_RETRYABLE
    return False


# Errors after which the server may or may not have committed: no answer at
# all (the connection broke: no SQLSTATE), a connection exception (08), the
# server shutting down or cancelling (57), a system or internal error (58, XX).
# Any other SQLSTATE is the server's answer that the transaction did not commit.
_UNANSWERED_CLASSES = frozenset({"08", "57", "58", "XX"})


def outcome_unknown(exc: BaseException) -> bool:
    """Return True when an error at COMMIT leaves open whether the transaction committed."""
    cause = exc.__cause__ or exc
    sqlstate = getattr(cause, "sqlstate", None)
    return not sqlstate or str(sqlstate)[:2] in _UNANSWERED_CLASSES


def is_lock_timeout(exc: BaseException) -> bool:
    """Return True when a wait bounded by `bounded_wait` ran out."""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) in LOCK_TIMEOUT_SQLSTATES or _sqlite_busy(cause)
