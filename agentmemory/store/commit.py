"""The locked commit: an ordered batch applied to the latest stored memory of one person.

It takes the person's lock (`locks.py`), reloads, reapplies the batch with
the pure rules, writes only what changed with the hand-built statements
(`statements.py`), keeps versions and records the event, in one transaction.

Retries. Only deadlocks and serialization failures (SQLSTATE 40P01, 40001)
and SQLite's busy/locked errors are retried, by replaying the complete
transaction with a short jittered backoff, at most COMMIT_ATTEMPTS times.
Validation errors and unknown database errors are raised at once.

Cancellation. `should_cancel` is called before the query, before persisting,
and before leaving the transaction; a True raises `CommitCancelled` inside
the transaction, so the database rolls back.

Unknown outcome. When the COMMIT itself fails without the server's answer
(the connection broke), a commit that changed memory raises
`CommitOutcomeUnknown` with its change id, never retried; `outcome.confirm`
asks the database what happened. Inside a caller's transaction the change is
noted for the caller's `outcome.commit_watch`.

Idempotency. A commit under an idempotency key (`guard`, an
`idempotency.CommitGuard`) checks under the person's lock that no commit
under that key stands, and records its outcome in the same transaction, so
the key's commit happens once even across retries and processes. That
rarer path runs in Django's atomic block (the guard uses the ORM), not
psycopg's own transaction.
"""
from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.utils import timezone

from .. import provenance, signals
from ..conf import memory_settings
from ..models import SCHEMA_VERSION, Actor, ChangeKind, MemoryDocument, Outcome
from ..rules import (
    MemoryValidationError,
    Operation,
    Snapshot,
    apply_operations,
    changed_targets,
    render_document,
    summarize,
)
from ..telemetry import traced_commit
from ..workers import in_worker
from .errors import AlreadyCommitted, CommitCancelled, CommitOutcomeUnknown, is_retryable, outcome_unknown
from .events import agent_labels, elapsed_ms, event_params, record_event, record_outside
from .locks import lock_owner, lock_wait
from .outcome import note_written
from .reads import state_from_rows
from .statements import (
    Row,
    Statements,
    commit_cursor,
    json_param,
    prepared_statements_lost,
    vendor_statements,
)
from .versions import keep_versions


@dataclass(frozen=True)
class CommitResult:
    snapshot: Snapshot
    changed: tuple[str, ...]
    retry_count: int
    duration_ms: int
    outcome: str = Outcome.COMMITTED
    limits: Mapping[str, int] = field(default_factory=dict)
    # The change's audit event, which its versions name (`MemoryVersion.event`):
    # what "Undo" undoes. None when nothing changed.
    change_id: int | None = None


@traced_commit
def commit_operations(
    *,
    user_id,
    operations: Sequence[Operation],
    should_cancel: Callable[[], bool] | None = None,
    actor: str = Actor.AGENT,
    limits: Mapping[str, int] | None = None,
    precondition: Callable[[Snapshot], None] | None = None,
    origin: Mapping | None = None,
    max_operations: int | None = None,
    guard=None,
    erasures: int | None = None,
    today: str | None = None,
) -> CommitResult:
    """Apply the ordered batch to the latest stored memory of one person.

    Every entry the batch writes records where it came from (`provenance`):
    the actor, now, and `origin`'s `conversation_id` / `turn_id` (and `by`,
    e.g. "agent" for a proposal the person saved; `restored` for an undo or a
    restore, whose `kind` the versions record); surviving entries keep theirs.
    `origin`'s `merges` (Tidy up: per document, each line's text and the
    entries it came from) keeps on such a line the sources of those entries.

    Each changed document keeps a version in the same transaction: what it
    held before, with its provenance, and what the batch left
    (`MemoryVersion`, linked to the change's event); the person's oldest
    versions past VERSIONS_KEPT changes or VERSION_RETENTION_DAYS go in the
    same transaction. `max_operations` lifts the batch-size cap for batches
    that trusted code derives from stored versions (undo, restore).

    Raise MemoryValidationError (nothing written) when the batch no longer
    fits the latest memory, CommitCancelled when `should_cancel` turned True.
    `precondition`, if given, sees the latest snapshot under the lock and may
    raise MemoryValidationError to reject the batch (the memory page uses it
    to insist that the exact entry a person saw is still there).
    With `guard` (an `idempotency.CommitGuard`), raise
    idempotency.AlreadyCommitted (nothing written) when a commit under its
    key already stands; otherwise its outcome is recorded with the commit.
    With `erasures` (the person's erase count a turn read with its memory),
    raise MemoryValidationError `erased` (nothing written) when the person
    erased their memory since: read in the lock query itself, so no race wins.
    `today` (ISO, the person's date) refuses an expiry before it (`rules.normalize_expiry`).
    """
    config = memory_settings()
    limits = limits or config.limits
    cancelled = should_cancel or (lambda: False)
    started = time.monotonic()
    summary = summarize(operations)
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself, not the proxy, on the hot path
    # Outermost: leaving the block below sends the COMMIT; inside a caller's transaction it releases a savepoint.
    outermost = not db.in_atomic_block
    attempts = max(1, config.commit_attempts) if outermost else 1
    retry_count = 0
    sql = vendor_statements(db)
    agent = actor == Actor.AGENT
    # The assistant's batch names its model and the policy in force (`agentmemory.review`'s figures).
    labels = agent_labels(actor, (origin or {}).get("model"), (origin or {}).get("source_intent", ""))

    def record(outcome: str, snapshot: Snapshot | None = None, error_code: str = "") -> None:
        record_event(
            user_id=user_id, actor=actor, outcome=outcome, summary=summary,
            snapshot=snapshot, retry_count=retry_count, started=started, error_code=error_code, **labels,
        )

    while True:
        change_id = None
        leaving = False
        try:
            # One transaction and one cursor: lock, reload, write, record the event.
            with (
                lock_wait(db, config.commit_lock_timeout),
                _transaction(db, plain=guard is not None) as direct,
                commit_cursor(db, sql, direct=bool(direct)) as cursor,
            ):
                if cancelled():
                    raise CommitCancelled()
                # Only the agent's commit needs a live account with memory switched
                # on; the person, staff, the system and the readiness probe may still
                # write for a deactivated account or one with memory off.
                owner = lock_owner(cursor, sql, user_id, agent=agent, lock_timeout=config.commit_lock_timeout,
                                    erasures=erasures)
                if guard is not None:
                    guard.check()
                cursor.execute(sql.select_rows, [owner])
                rows = {row[1]: Row(*row) for row in cursor.fetchall()}
                stored = state_from_rows(list(rows.values()))  # type: ignore[arg-type]  # rows read as documents
                current = stored.snapshot
                if precondition is not None:
                    precondition(current)
                updated = apply_operations(current, operations, limits, max_operations=max_operations, today=today)
                if cancelled():
                    raise CommitCancelled()
                changed = changed_targets(current, updated)
                moment = timezone.now()  # one moment: the rows' times, the sources' and the versions' cutoff
                now = sql.now(moment)
                source = _origin(actor, origin, moment)
                sources = provenance.set_expiry(
                    provenance.carry(current, stored.sources, updated, source, merges=(origin or {}).get("merges"),
                                     imported=(origin or {}).get("imported_entries")),
                    updated, source)
                _persist(cursor, sql, db, owner, rows, changed, updated, now, sources)
                outcome = Outcome.COMMITTED if changed else Outcome.UNCHANGED
                params = event_params(
                    sql, owner=owner, actor=actor, outcome=outcome, summary=summary, snapshot=updated,
                    retry_count=retry_count, started=started, error_code="", now=now, db=db, **labels,
                )
                change_id = None
                if changed:
                    cursor.execute(sql.insert_event_returning, params)
                    change_id = cursor.fetchone()[0]
                    keep_versions(cursor, sql, db, owner, change_id, stored, changed, updated, now, source,
                                   kind=(origin or {}).get("kind") or ChangeKind.CHANGE, config=config, sources=sources,
                                   moment=moment)
                else:
                    cursor.execute(sql.insert_event, params)
                if guard is not None:
                    guard.record(snapshot=updated, changed=changed, outcome=outcome, limits=limits, change_id=change_id)
                if cancelled():
                    raise CommitCancelled()
                leaving = True  # what fails from here on is the COMMIT (or the savepoint's release)
            break
        except CommitCancelled:
            record_outside(record, Outcome.CANCELLED)
            raise
        except MemoryValidationError as exc:
            record_outside(record, Outcome.REJECTED, exc.code)
            raise
        except DatabaseError as exc:
            if leaving and outermost and change_id is not None and outcome_unknown(exc):
                # The COMMIT was sent and no answer came: stored or not, only the database can say
                # (`outcome.confirm`). Never retried, never recorded as failed.
                raise CommitOutcomeUnknown(
                    change_id=change_id, user_id=user_id,
                    result=_result(updated, changed, retry_count, started, outcome, limits, change_id),
                    committed=(_signal(user_id, change_id, actor, changed, operations),),
                ) from exc
            lost = prepared_statements_lost(exc)  # e.g. PgBouncer in transaction mode: stop preparing
            if retry_count + 1 < attempts and (is_retryable(exc) or lost):
                retry_count += 1
                time.sleep(config.retry_backoff_seconds * retry_count * (1 + random.random()))
                continue
            record_outside(record, Outcome.FAILED, "database_error")
            raise

    result = _result(updated, changed, retry_count, started, outcome, limits, change_id)
    if change_id is not None:
        if not outermost:
            # For the caller's `commit_watch`.
            note_written(user_id=user_id, change_id=change_id, result=result,
                         signal=_signal(user_id, change_id, actor, changed, operations))
        # At once when this was the transaction; when the caller's commits, inside one (never on a rollback).
        signals.send_after_commit(signals.memory_committed, MemoryDocument,
                                  **_signal(user_id, change_id, actor, changed, operations))
    return result


def _signal(user_id, change_id, actor, changed, operations) -> dict:
    """`memory_committed`'s keyword arguments: ids and counts, never content."""
    return {"user_id": user_id, "change_id": change_id, "actor": actor, "changed": tuple(changed),
            "operation_count": len(operations)}


def _result(updated, changed, retry_count, started, outcome, limits, change_id) -> CommitResult:
    return CommitResult(
        snapshot=updated,
        changed=changed,
        retry_count=retry_count,
        duration_ms=elapsed_ms(started),
        outcome=outcome,
        limits=dict(limits),
        change_id=change_id,
    )


def _transaction(db, *, plain: bool = False):
    """The commit's transaction: psycopg's own on PostgreSQL, Django's atomic otherwise.

    On a PostgreSQL connection in autocommit mode and outside any atomic
    block, psycopg's `transaction()` sends the same BEGIN and COMMIT (or
    ROLLBACK on an exception) without Django's atomic bookkeeping, which cost
    a tenth of the commit's client CPU (bench/commit.py). The commit
    registers no on_commit hooks and runs no ORM query inside, and errors
    are translated as Django's would be. Inside a caller's atomic block (or
    on SQLite, whose BEGIN IMMEDIATE Django issues) it is Django's atomic,
    and so it is for a `plain` one, which runs ORM queries inside.
    """
    if plain or db.vendor != "postgresql" or db.in_atomic_block:
        return transaction.atomic()  # enters as None: Django's cursor inside
    return _PsycopgTransaction(db)


class _PsycopgTransaction:
    """psycopg's transaction on Django's connection; enters as True (errors translated here)."""

    def __init__(self, db) -> None:
        self.db = db

    def __enter__(self):
        db = self.db
        db.close_if_health_check_failed()
        db.ensure_connection()
        if not db.get_autocommit():  # someone turned autocommit off: let Django manage it
            self.inner = transaction.atomic()
            self.inner.__enter__()
            return False
        self.errors = db.wrap_database_errors
        self.inner = db.connection.transaction()
        try:
            self.inner.__enter__()
        except BaseException as exc:
            self.errors.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return True

    def __exit__(self, exc_type, exc, traceback):
        if isinstance(self.inner, transaction.Atomic):
            return self.inner.__exit__(exc_type, exc, traceback)
        try:
            self.inner.__exit__(exc_type, exc, traceback)
        except BaseException as error:  # COMMIT or ROLLBACK failed
            with self.errors:
                raise error
            raise
        if exc is not None:
            self.errors.__exit__(exc_type, exc, traceback)  # re-raises a psycopg error as Django's
        return False


_ROLE_OF_ACTOR = {Actor.AGENT: provenance.AGENT, Actor.USER: provenance.USER, Actor.STAFF: provenance.STAFF,
                  Actor.SYSTEM: provenance.SYSTEM, Actor.EXPIRY: provenance.EXPIRY}


def _origin(actor: str, origin: Mapping | None, moment) -> provenance.Source:
    """The source of what this commit writes: who, when (`moment`), and which conversation and turn (ids only)."""
    origin = origin or {}
    conversation_id = origin.get("conversation_id")
    return provenance.source(
        origin.get("by") or _ROLE_OF_ACTOR.get(actor, provenance.SYSTEM),  # type: ignore[call-overload]  # Actor is a str enum
        moment,
        conversation_id=conversation_id if isinstance(conversation_id, int) else None,
        turn_id=str(origin.get("turn_id") or ""),
        restored=bool(origin.get("restored")),
        imported=str(origin.get("imported") or ""),
    )


def _persist(cursor, sql: Statements, db, owner, rows: Mapping[str, Row], targets, updated: Snapshot, now,
             sources: Mapping[str, Sequence]) -> None:
    """Write the changed documents with their sources: update, create, or delete an emptied one."""
    for target in targets:
        entries = updated.entries(target)
        row = rows.get(target)
        if not entries:
            if row is not None:
                cursor.execute(sql.delete_row, [row.pk])
            continue
        stored_sources = json_param(db, provenance.to_json(sources[target]))
        if row is None:
            cursor.execute(sql.insert_row, [owner, target, render_document(entries), SCHEMA_VERSION, stored_sources,
                                            now, now])
        else:
            cursor.execute(sql.update_row, [render_document(entries), SCHEMA_VERSION, stored_sources, now, row.pk])


async def commit_in_worker(
    *,
    user_id,
    operations: Sequence[Operation],
    cancel_event: threading.Event | None = None,
    actor: str = Actor.AGENT,
    limits: Mapping[str, int] | None = None,
    origin: Mapping | None = None,
    guard=None,
    erasures: int | None = None,
) -> CommitResult:
    """Run `commit_operations` in a worker thread that a cancel can still stop.

    Cancelling the awaiting task sets the event and waits for the worker, so
    the rollback decision is made inside the transaction, never abandoned.
    """
    event = cancel_event or threading.Event()
    worker = asyncio.ensure_future(
        in_worker(
            commit_operations,
            user_id=user_id,
            operations=list(operations),
            should_cancel=event.is_set,
            actor=actor,
            limits=limits,
            origin=origin,
            guard=guard,
            erasures=erasures,
        )
    )
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        event.set()
        try:
            await worker
        except (CommitCancelled, MemoryValidationError, DatabaseError, AlreadyCommitted, CommitOutcomeUnknown):
            pass
        raise
