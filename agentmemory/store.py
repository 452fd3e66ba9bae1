"""The only code that reads or writes memory rows.

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

Retries. Only deadlocks and serialization failures (SQLSTATE 40P01, 40001)
and SQLite's busy/locked errors are retried, by replaying the complete
transaction with a short jittered backoff, at most COMMIT_ATTEMPTS times.
Validation errors and unknown database errors are raised at once.

Cancellation. `should_cancel` is called before the query, before persisting,
and before leaving the transaction; a True raises `CommitCancelled` inside
the transaction, so the database rolls back.

Idempotency. A commit under an idempotency key (`guard`, an
`idempotency.CommitGuard`) checks under the person's lock that no commit
under that key stands, and records its outcome in the same transaction, so
the key's commit happens once even across retries and processes. That
rarer path runs in Django's atomic block (the guard uses the ORM), not
psycopg's own transaction.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    connection,
    connections,
    transaction,
)
from django.dispatch import receiver
from django.utils import timezone

from .conf import memory_settings
from .idempotency import AlreadyCommitted
from .models import (
    SCHEMA_VERSION,
    Actor,
    ChangeKind,
    IdempotencyKey,
    MemoryDocument,
    MemoryEvent,
    MemoryPreference,
    MemoryProposal,
    MemoryVersion,
    Outcome,
)
from .rules import (
    TARGETS,
    MemoryValidationError,
    Operation,
    Snapshot,
    apply_operations,
    changed_targets,
    document_length,
    parse_document,
    render_document,
    summarize,
)
from . import provenance
from .telemetry import traced_commit
from .workers import in_worker

logger = logging.getLogger(__name__)

RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})
# invalid_sql_statement_name, duplicate_prepared_statement: a prepared statement
# the client made is not on the server connection it now talks to (a pooler
# in transaction mode that does not track them).
PREPARED_STATEMENT_SQLSTATES = frozenset({"26000", "42P05"})
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


@dataclass(frozen=True)
class StoredMemory:
    snapshot: Snapshot
    updated_at: Mapping[str, datetime | None]
    created_at: Mapping[str, datetime | None]
    # One `provenance.Source` (or None: unknown) per entry, aligned with the snapshot.
    sources: Mapping[str, tuple] = field(default_factory=dict)


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


# --- reads -------------------------------------------------------------------


def load_state(*, user_id, timeout: float | None = None) -> StoredMemory:
    """Return both documents of one person and their timestamps, in one query.

    With `timeout` (seconds) the read gives up when the query or a lock wait
    (a migration, a long transaction) takes longer, raising MemoryUnavailable.
    """
    sql = _statements()
    if sql.select_state:
        # PostgreSQL: one fixed statement, no ORM query to build (it ran on every turn).
        def query():
            with connection.cursor() as cursor:
                cursor.execute(sql.select_state, [sql.owner(user_id)])
                return [_Row(*row) for row in cursor.fetchall()]  # pk, type, content, version, sources, dates
    else:
        def query():
            return list(MemoryDocument.objects.filter(user_id=user_id).only(
                "memory_type", "content", "schema_version", "created_at", "updated_at", "provenance"
            ))
    try:
        if timeout is None:
            rows = query()
        else:
            with bounded_wait(timeout, statement=True):
                rows = query()
    except DatabaseError as exc:
        raise MemoryUnavailable("Memory could not be read from the database.") from exc
    return _state_from_rows(rows)


def load_for_turn(*, user_id, timeout: float | None = None) -> tuple[tuple | None, Snapshot | None]:
    """Return the person's settings row and, unless their switch is off, their memory's snapshot.

    The row is `(use_memory, save_mode)`, or None when they never changed a
    setting (the defaults). The snapshot is None when the switch is off: it is
    not even read. Only what a turn uses is read: the entries, not their
    timestamps or sources (`load_state` reads those). With `timeout`
    (seconds) the read gives up, as `bounded_wait` bounds it, when the query
    or a lock wait takes longer. Raise MemoryUnavailable.

    It runs on every turn, so on PostgreSQL it is one fixed statement; and
    with the timeout, outside a transaction and with Django's client-side
    binding, one round trip: the bounds and the read go as one query string,
    which PostgreSQL runs as one implicit transaction (the bounds apply to the
    read and end with it). Elsewhere: two ORM queries inside `bounded_wait`.
    """
    sql = _statements()
    if not sql.select_turn:
        try:
            with bounded_wait(timeout, statement=True) if timeout is not None else nullcontext():
                row = preference_row(user_id=user_id)
                if row is not None and not row[0]:
                    return row, None
                documents = MemoryDocument.objects.filter(user_id=user_id).values_list(
                    "memory_type", "content", "schema_version")
                return row, _snapshot_from_rows(list(documents))
        except DatabaseError as exc:
            raise MemoryUnavailable("Memory could not be read from the database.") from exc
    owner = sql.owner(user_id)
    try:
        if timeout is None:
            found = _fetch(sql.select_turn, [owner, owner])
        elif not connection.in_atomic_block and _client_side_binding():
            bound = f"{max(1, int(timeout * 1000))}ms"
            found = _fetch(sql.bounds_then_select_turn, [bound, bound, owner, owner], result=1)
        else:
            with bounded_wait(timeout, statement=True):
                found = _fetch(sql.select_turn, [owner, owner])
    except DatabaseError as exc:
        raise MemoryUnavailable("Memory could not be read from the database.") from exc
    # Always at least one row: the settings (NULL when there is no row) beside each document.
    row = None if found[0][0] is None else tuple(found[0][:2])
    if row is not None and not row[0]:
        return row, None
    return row, _snapshot_from_rows([each[2:] for each in found if each[2] is not None])


def preference_row(*, user_id) -> tuple | None:
    """Return the person's stored `(use_memory, save_mode)`, or None when they never changed a setting."""
    return MemoryPreference.objects.filter(user_id=user_id).values_list("use_memory", "save_mode").first()


def _fetch(statement: str, params: list, *, result: int = 0) -> list:
    """Run `statement` and return the rows of its `result`-th result set."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        for _ in range(result):
            cursor.nextset()
        return cursor.fetchall()


def _client_side_binding() -> bool:
    """True when Django's PostgreSQL connection binds parameters client-side (its default),
    so a query string may hold several statements."""
    connection.ensure_connection()
    return _ClientCursor is not None and issubclass(connection.connection.cursor_factory, _ClientCursor)


def load_snapshot(*, user_id, timeout: float | None = None) -> Snapshot:
    """Return the snapshot of one person's memory; raise MemoryUnavailable."""
    return load_state(user_id=user_id, timeout=timeout).snapshot


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


def is_lock_timeout(exc: BaseException) -> bool:
    """Return True when a wait bounded by `bounded_wait` ran out."""
    cause = exc.__cause__ or exc
    return getattr(cause, "sqlstate", None) in LOCK_TIMEOUT_SQLSTATES or _sqlite_busy(cause)


def _check_version(schema_version: int) -> None:
    if schema_version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"A memory document has schema_version {schema_version}; this release reads "
            f"version {SCHEMA_VERSION} only. Migrate the content before enabling memory."
        )


def _snapshot_from_rows(rows: Sequence[tuple[str, str, int]]) -> Snapshot:
    """The snapshot from `(memory_type, content, schema_version)` rows (a turn's read)."""
    documents: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
    for memory_type, content, schema_version in rows:
        _check_version(schema_version)
        documents[memory_type] = parse_document(content)
    return Snapshot(user=documents["user"], memory=documents["memory"])


def _state_from_rows(rows: Sequence[MemoryDocument]) -> StoredMemory:
    documents: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
    updated: dict[str, datetime | None] = {target: None for target in TARGETS}
    created: dict[str, datetime | None] = {target: None for target in TARGETS}
    sources: dict[str, tuple] = {target: () for target in TARGETS}
    for row in rows:
        _check_version(row.schema_version)
        documents[row.memory_type] = parse_document(row.content)
        updated[row.memory_type] = row.updated_at
        created[row.memory_type] = row.created_at
        stored = row.provenance
        if isinstance(stored, str):  # raw SQL reads the column undecoded (SQLite's text, a jsonb loader's str)
            stored = json.loads(stored)
        sources[row.memory_type] = provenance.aligned(documents[row.memory_type], stored)
    return StoredMemory(
        snapshot=Snapshot(user=documents["user"], memory=documents["memory"]),
        updated_at=updated,
        created_at=created,
        sources=sources,
    )


# --- writes ------------------------------------------------------------------


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
) -> CommitResult:
    """Apply the ordered batch to the latest stored memory of one person.

    Every entry the batch writes records where it came from (`provenance`):
    the actor, now, and `origin`'s `conversation_id` / `turn_id` (and `by`,
    e.g. "agent" for a proposal the person saved; `restored` for an undo or a
    restore, whose `kind` the versions record); surviving entries keep theirs.

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
    """
    config = memory_settings()
    limits = limits or config.limits
    cancelled = should_cancel or (lambda: False)
    started = time.monotonic()
    summary = summarize(operations)
    db = connections[DEFAULT_DB_ALIAS]  # the connection itself, not the proxy, on the hot path
    attempts = 1 if db.in_atomic_block else max(1, config.commit_attempts)
    retry_count = 0
    sql = _statements()
    agent = actor == Actor.AGENT

    def record(outcome: str, snapshot: Snapshot | None = None, error_code: str = "") -> None:
        _record_event(
            user_id=user_id, actor=actor, outcome=outcome, summary=summary,
            snapshot=snapshot, retry_count=retry_count, started=started, error_code=error_code,
        )

    while True:
        try:
            # One transaction and one cursor: lock, reload, write, record the event.
            with (
                _lock_wait(db, config.commit_lock_timeout),
                _transaction(db, plain=guard is not None) as direct,
                _commit_cursor(db, sql, direct=bool(direct)) as cursor,
            ):
                if cancelled():
                    raise CommitCancelled()
                # Only the agent's commit needs a live account with memory switched
                # on; the person, staff, the system and the readiness probe may still
                # write for a deactivated account or one with memory off.
                owner = _lock_owner(cursor, sql, user_id, agent=agent, lock_timeout=config.commit_lock_timeout)
                if guard is not None:
                    guard.check()
                cursor.execute(sql.select_rows, [owner])
                rows = {row[1]: _Row(*row) for row in cursor.fetchall()}
                stored = _state_from_rows(list(rows.values()))
                current = stored.snapshot
                if precondition is not None:
                    precondition(current)
                updated = apply_operations(current, operations, limits, max_operations=max_operations)
                if cancelled():
                    raise CommitCancelled()
                changed = changed_targets(current, updated)
                now = sql.now()
                source = _origin(actor, origin)
                sources = provenance.carry(current, stored.sources, updated, source)
                _persist(cursor, sql, owner, rows, changed, updated, now, sources)
                outcome = Outcome.COMMITTED if changed else Outcome.UNCHANGED
                params = _event_params(
                    sql, owner=owner, actor=actor, outcome=outcome, summary=summary, snapshot=updated,
                    retry_count=retry_count, started=started, error_code="", now=now,
                )
                change_id = None
                if changed:
                    cursor.execute(sql.insert_event_returning, params)
                    change_id = cursor.fetchone()[0]
                    _keep_versions(cursor, sql, owner, change_id, stored, changed, updated, now, source,
                                   kind=(origin or {}).get("kind") or ChangeKind.CHANGE, config=config)
                else:
                    cursor.execute(sql.insert_event, params)
                if guard is not None:
                    guard.record(snapshot=updated, changed=changed, outcome=outcome, limits=limits, change_id=change_id)
                if cancelled():
                    raise CommitCancelled()
            break
        except CommitCancelled:
            _record_outside(record, Outcome.CANCELLED)
            raise
        except MemoryValidationError as exc:
            _record_outside(record, Outcome.REJECTED, exc.code)
            raise
        except DatabaseError as exc:
            lost = _prepared_statements_lost(exc)  # e.g. PgBouncer in transaction mode: stop preparing
            if retry_count + 1 < attempts and (is_retryable(exc) or lost):
                retry_count += 1
                time.sleep(config.retry_backoff_seconds * retry_count * (1 + random.random()))
                continue
            _record_outside(record, Outcome.FAILED, "database_error")
            raise

    return CommitResult(
        snapshot=updated,
        changed=changed,
        retry_count=retry_count,
        duration_ms=_elapsed_ms(started),
        outcome=outcome,
        limits=dict(limits),
        change_id=change_id,
    )


def _keep_versions(cursor, sql: _Statements, owner, change_id: int, stored: StoredMemory, targets, updated: Snapshot,
                   now, source: provenance.Source, *, kind: str, config) -> None:
    """Record each changed document's version for this change, then prune the person's oldest ones."""
    for target in targets:
        before = stored.snapshot.entries(target)
        before_sources = _SOURCES_FIELD.get_db_prep_save(
            provenance.to_json(stored.sources.get(target) or ()) if before else None, connection)
        cursor.execute(sql.insert_version, [
            owner, change_id, target, render_document(before), before_sources,
            render_document(updated.entries(target)), str(kind), source.by, source.conversation_id,
            source.turn_id, SCHEMA_VERSION, now,
        ])
    cutoff = timezone.now() - timedelta(days=config.version_retention_days)
    cutoff = cutoff if sql.now_as_is else sql.now_field.get_db_prep_value(cutoff, connection)
    cursor.execute(sql.prune_versions, [owner, cutoff, owner, max(1, config.versions_kept)])


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


def _lock_wait(db, seconds: float):
    """Bound SQLite's wait for its write lock (taken by BEGIN IMMEDIATE, before
    the transaction's first statement); PostgreSQL's is set in the transaction."""
    return bounded_wait(seconds) if db.vendor == "sqlite" else nullcontext()


# The locked path speaks SQL through Django's connection, not the ORM: it runs
# while the person's lock is held, and building ORM queries cost more CPU than
# the database spent answering them (bench/commit.py: 2.8x a hand-written
# psycopg transaction with the ORM). The statements and the user model are
# resolved once per database vendor; table and column names come from the
# models' _meta, so the models and their migrations stay the one description.
# The event row's parameters are built directly (a model instance and a
# get_db_prep_save per field cost 20x more), in the column order checked
# against the model when the statements are built.


@dataclass(frozen=True)
class _Row:
    pk: int
    memory_type: str
    content: str
    schema_version: int
    provenance: object = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


_ROLE_OF_ACTOR = {Actor.AGENT: provenance.AGENT, Actor.USER: provenance.USER, Actor.STAFF: provenance.STAFF,
                  Actor.SYSTEM: provenance.SYSTEM}


def _origin(actor: str, origin: Mapping | None) -> provenance.Source:
    """The source of what this commit writes: who, now, and which conversation and turn (ids only)."""
    origin = origin or {}
    conversation_id = origin.get("conversation_id")
    return provenance.source(
        origin.get("by") or _ROLE_OF_ACTOR.get(actor, provenance.SYSTEM), timezone.now(),
        conversation_id=conversation_id if isinstance(conversation_id, int) else None,
        turn_id=str(origin.get("turn_id") or ""),
        restored=bool(origin.get("restored")),
    )


# MemoryEvent's columns in the order `_event_params` fills them. A model change
# that adds or renames a field falls back to the generic path (`_insert_event`)
# until this list and `_event_params` follow it.
_EVENT_COLUMNS = (
    "user", "actor", "outcome", "operation_count", "targets", "actions", "user_characters",
    "memory_characters", "retry_count", "duration_ms", "error_code", "staff", "staff_username", "viewed",
    "created_at",
)


# MemoryVersion's columns in the order `_keep_versions` fills them.
_VERSION_COLUMNS = (
    "user", "event", "memory_type", "before", "before_provenance", "after", "kind", "by", "conversation_id",
    "turn_id", "schema_version", "created_at",
)


@dataclass(frozen=True)
class _Statements:
    lock_owner: str
    select_rows: str
    insert_row: str
    update_row: str
    delete_row: str
    insert_event: str
    insert_event_returning: str
    insert_version: str
    prune_versions: str
    event_fields: tuple
    owner_field: object = None  # the user model's primary key field
    # PostgreSQL on psycopg 3: Django's server-side binding cursor class, so
    # psycopg may prepare these statements (see `_commit_cursor`), and the
    # same binding that never prepares, for when prepared statements are off.
    binding_cursor: type | None = None
    unprepared_cursor: type | None = None
    # The commit's lock query: on PostgreSQL it also sets the transaction's
    # lock_timeout, in the same statement (one round trip, not two).
    lock_owner_bounded: str = ""
    bounded_with_timeout: bool = False
    direct_event: bool = False  # the event columns match _EVENT_COLUMNS
    now_field: object = None  # MemoryDocument.updated_at, to adapt "now" once per commit
    # PostgreSQL: both documents with their timestamps (which come back aware, as the ORM's do).
    select_state: str = ""
    # PostgreSQL: the person's settings and (switch on) both documents, for a turn's read;
    # and the same after the read's lock and statement timeouts, as one query string.
    select_turn: str = ""
    bounds_then_select_turn: str = ""

    int_owner: bool = False  # the user model's key is an integer: an int needs no preparing
    now_as_is: bool = False  # the backend takes an aware datetime as it is (PostgreSQL)

    def owner(self, user_id):
        if self.int_owner and type(user_id) is int:
            return user_id
        return self.owner_field.get_db_prep_value(user_id, connection)

    def now(self):
        if self.now_as_is:
            return timezone.now()
        return self.now_field.get_db_prep_value(timezone.now(), connection)


_STATEMENTS: dict[tuple[str, bool], _Statements] = {}


def _statements() -> _Statements:
    """Return the statements for the current connection's vendor, built once."""
    db = connections[DEFAULT_DB_ALIAS]
    key = (db.vendor, db.features.has_select_for_update)
    sql = _STATEMENTS.get(key)
    if sql is None:
        sql = _STATEMENTS[key] = _build_statements(*key)
    return sql


@receiver(setting_changed)
def _forget_statements(*, setting, **kwargs) -> None:
    if setting == "AUTH_USER_MODEL":
        _STATEMENTS.clear()


def _build_statements(vendor: str, for_update: bool) -> _Statements:
    quote = connection.ops.quote_name

    def names(model, *fields):
        return [quote(model._meta.db_table)] + [quote(model._meta.get_field(f).column) for f in fields]

    user_model = get_user_model()
    users, user_pk = names(user_model, user_model._meta.pk.name)
    has_active = any(f.name == "is_active" for f in user_model._meta.concrete_fields)
    active = quote(user_model._meta.get_field("is_active").column) if has_active else "1"
    preferences, preference_user, use_memory, save_mode = names(MemoryPreference, "user", "use_memory", "save_mode")
    table, pk, user, memory_type, content, version, created, modified, sources = names(
        MemoryDocument, "id", "user", "memory_type", "content", "schema_version", "created_at", "updated_at",
        "provenance",
    )
    versions, version_user, version_event, version_created = names(MemoryVersion, "user", "event", "created_at")
    version_columns = [quote(MemoryVersion._meta.get_field(f).column) for f in _VERSION_COLUMNS]
    model_fields = tuple(f for f in MemoryEvent._meta.concrete_fields if not f.primary_key)
    direct_event = sorted(f.name for f in model_fields) == sorted(_EVENT_COLUMNS)
    event_fields = tuple(MemoryEvent._meta.get_field(n) for n in _EVENT_COLUMNS) if direct_event else model_fields
    insert_event = (f"INSERT INTO {quote(MemoryEvent._meta.db_table)} "
                    f"({', '.join(quote(f.column) for f in event_fields)}) "
                    f"VALUES ({', '.join(['%s'] * len(event_fields))})")
    # The lock query also reads whether the account is active and whether
    # the person's memory switch is on (no preference row: on), so an
    # agent's commit for an account deactivated or switched off mid-turn
    # is refused under the lock, in the same statement.
    #
    # PostgreSQL locks the row FOR NO KEY UPDATE: it queues every writer of
    # the person (and an account deletion, whose DELETE needs the stronger
    # lock) exactly like FOR UPDATE, but not the foreign-key checks of rows
    # that merely reference the person (a new chat message and its search
    # index row), so a writer holding the lock never stalls the chat's log.
    strength = "FOR NO KEY UPDATE" if vendor == "postgresql" else "FOR UPDATE"
    lock_from = (
        f"{users} LEFT JOIN {preferences} ON {preferences}.{preference_user} = {users}.{user_pk} "
        f"WHERE {users}.{user_pk} = %s" + (f" {strength} OF {users}" if for_update else "")
    )
    lock_owner = f"SELECT {users}.{active}, {preferences}.{use_memory} FROM {lock_from}"
    bounded = vendor == "postgresql"
    binding = _server_binding_cursor() if vendor == "postgresql" else None
    # One row at least (the settings, NULL without a row), one per document
    # when the switch is on: no preference row means on, as in the lock query.
    # Only what a turn uses: the entries, not their timestamps or sources.
    turn_read = (
        f"SELECT {preferences}.{use_memory}, {preferences}.{save_mode}, {table}.{memory_type}, "
        f"{table}.{content}, {table}.{version} "
        f"FROM (SELECT 1) AS person LEFT JOIN {preferences} ON {preferences}.{preference_user} = %s "
        f"LEFT JOIN {table} ON {table}.{user} = %s AND {preferences}.{use_memory} IS NOT FALSE"
        if vendor == "postgresql" else ""
    )
    return _Statements(
        lock_owner=lock_owner,
        # PostgreSQL evaluates the FROM list (and so set_config) before its
        # LockRows step waits for the row lock: the timeout, local to the
        # commit's transaction, bounds that wait.
        lock_owner_bounded=(
            f"SELECT {users}.{active}, {preferences}.{use_memory} "
            f"FROM (SELECT set_config('lock_timeout', %s, true)) AS lock_wait, {lock_from}"
            if bounded else lock_owner
        ),
        bounded_with_timeout=bounded,
        select_rows=f"SELECT {pk}, {memory_type}, {content}, {version}, {sources} FROM {table} WHERE {user} = %s",
        select_state=(
            f"SELECT {pk}, {memory_type}, {content}, {version}, {sources}, {created}, {modified} FROM {table} "
            f"WHERE {user} = %s"
            if vendor == "postgresql" and settings.USE_TZ else ""
        ),
        select_turn=turn_read,
        bounds_then_select_turn=(
            f"SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true); {turn_read}"
            if turn_read else ""
        ),
        insert_row=f"INSERT INTO {table} ({user}, {memory_type}, {content}, {version}, {sources}, {created}, "
        f"{modified}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        update_row=f"UPDATE {table} SET {content} = %s, {version} = %s, {sources} = %s, {modified} = %s "
        f"WHERE {pk} = %s",
        delete_row=f"DELETE FROM {table} WHERE {pk} = %s",
        insert_event=insert_event,
        insert_event_returning=f"{insert_event} RETURNING {quote(MemoryEvent._meta.pk.column)}",
        insert_version=f"INSERT INTO {versions} ({', '.join(version_columns)}) "
        f"VALUES ({', '.join(['%s'] * len(version_columns))})",
        # A person's versions past the newest VERSIONS_KEPT changes, or older
        # than the retention, in one statement (the subquery is NULL, and
        # keeps everything, while the person has fewer changes).
        prune_versions=f"DELETE FROM {versions} WHERE {version_user} = %s AND ({version_created} < %s OR "
        f"{version_event} <= (SELECT DISTINCT {version_event} FROM {versions} WHERE {version_user} = %s "
        f"ORDER BY {version_event} DESC LIMIT 1 OFFSET %s))",
        event_fields=event_fields,
        owner_field=user_model._meta.pk,
        direct_event=direct_event,
        now_field=MemoryDocument._meta.get_field("updated_at"),
        binding_cursor=binding,
        unprepared_cursor=_never_preparing(binding) if binding is not None else None,
        int_owner=user_model._meta.pk.get_internal_type() in _INTEGER_KEYS,
        now_as_is=vendor == "postgresql" and settings.USE_TZ,
    )


_INTEGER_KEYS = frozenset({"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField"})


def _server_binding_cursor() -> type | None:
    global _ClientCursor
    try:
        from django.db.backends.postgresql.base import ServerBindingCursor, is_psycopg3
    except ImportError:  # pragma: no cover - another driver
        return None
    if not is_psycopg3:
        return None
    import psycopg

    _ClientCursor = psycopg.ClientCursor
    return ServerBindingCursor


def _never_preparing(binding: type) -> type:
    class UnpreparedCursor(binding):
        """Server-side binding that never prepares: each statement goes as an unnamed one
        (parse, bind, execute in one round trip), which a pooler in transaction mode serves."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=False, binary=binary)

    return UnpreparedCursor


_ClientCursor = None


# Set when the server refused one of our prepared statements: this process
# stops preparing (see PREPARED_STATEMENT_SQLSTATES).
_prepared_statements_off = False


def _commit_cursor(db, sql: _Statements, *, direct: bool = False):
    """Return the commit's one cursor.

    On PostgreSQL the commit's few fixed statements bind their parameters
    server-side, on the same connection and transaction as the ORM (whose
    own queries keep Django's client-side binding). With a prepare threshold
    (DATABASES OPTIONS "prepare_threshold", config/settings.py) psycopg
    prepares each after it ran that many times, and later runs skip parsing
    and planning. With prepared statements off (the threshold off, as behind
    PgBouncer in transaction mode, or after the server refused one) they
    still bind server-side, as unnamed statements that are never prepared:
    about a tenth less client CPU than binding them client-side
    (bench/commit.py).

    Inside psycopg's own transaction (`direct`, which translates errors)
    the cursor is psycopg's, unwrapped, unless something watches Django's
    cursors (the query log, an execute wrapper): then it is wrapped like
    Django's own.
    """
    if sql.binding_cursor is None:
        return db.cursor()
    if not direct:
        db.close_if_health_check_failed()
        db.ensure_connection()
    unprepared = _prepared_statements_off or db.connection.prepare_threshold is None
    cursor_class = sql.unprepared_cursor if unprepared else sql.binding_cursor
    if direct and not db.queries_logged and not db.execute_wrappers:
        return cursor_class(db.connection)
    db.validate_thread_sharing()
    with db.wrap_database_errors:
        raw = cursor_class(db.connection)
    return db.make_debug_cursor(raw) if db.queries_logged else db.make_cursor(raw)


def _prepared_statements_lost(exc: BaseException) -> bool:
    """Return True (and stop preparing) when the server lost a prepared statement."""
    global _prepared_statements_off
    cause = exc.__cause__ or exc
    if getattr(cause, "sqlstate", None) not in PREPARED_STATEMENT_SQLSTATES:
        return False
    if not _prepared_statements_off:
        _prepared_statements_off = True
        logger.warning(
            "the database refused a prepared statement (a pooler in transaction mode?): memory commits "
            "stop preparing statements in this process; set DATABASE_PREPARE_THRESHOLD=off to silence this"
        )
    return True


def _lock_owner(cursor, sql: _Statements, user_id, *, agent: bool = False, lock_timeout: float | None = None):
    """Lock the owner's row in the user table (the per-person write lock).

    Return the id as the database stores it; raise UnknownUser if no account
    has it. For the agent's commit (`agent`), raise InactiveUser if the
    account is deactivated and MemoryTurnedOff if the person switched memory off.
    With `lock_timeout` (seconds) the wait for the lock is bounded (PostgreSQL;
    SQLite's wait is bounded before the transaction begins).
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
    return owner


def lock_person(*, user_id, agent: bool = False):
    """Take the person's write lock inside the caller's transaction; return the stored id.

    For writers beside the memory rows (the memory switch, proposals) that
    must queue with commits. Raise UnknownUser if no account has this id;
    with `agent`, also InactiveUser and MemoryTurnedOff, as for the agent's commit.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("lock_person must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        return _lock_owner(cursor, _statements(), user_id, agent=agent,
                           lock_timeout=memory_settings().commit_lock_timeout)


def _persist(cursor, sql: _Statements, owner, rows: Mapping[str, _Row], targets, updated: Snapshot, now,
             sources: Mapping[str, Sequence]) -> None:
    """Write the changed documents with their sources: update, create, or delete an emptied one."""
    for target in targets:
        entries = updated.entries(target)
        row = rows.get(target)
        if not entries:
            if row is not None:
                cursor.execute(sql.delete_row, [row.pk])
            continue
        stored_sources = _SOURCES_FIELD.get_db_prep_save(provenance.to_json(sources[target]), connection)
        if row is None:
            cursor.execute(sql.insert_row, [owner, target, render_document(entries), SCHEMA_VERSION, stored_sources,
                                            now, now])
        else:
            cursor.execute(sql.update_row, [render_document(entries), SCHEMA_VERSION, stored_sources, now, row.pk])


_SOURCES_FIELD = MemoryDocument._meta.get_field("provenance")


def forget_conversation(*, user_id, conversation_id: int) -> int:
    """Drop the links to a deleted conversation from the person's entries and versions (the text stays).

    Return how many rows changed.
    """
    changed_rows = 0
    with transaction.atomic():
        lock_person(user_id=user_id)
        for row in MemoryDocument.objects.filter(user_id=user_id).only("memory_type", "content", "provenance"):
            sources, changed = provenance.without_conversation(
                provenance.aligned(parse_document(row.content), row.provenance), conversation_id)
            if changed:
                MemoryDocument.objects.filter(pk=row.pk).update(provenance=provenance.to_json(sources))
                changed_rows += 1
        changed_rows += MemoryVersion.objects.filter(user_id=user_id, conversation_id=conversation_id).update(
            conversation_id=None, turn_id="")
        for version in MemoryVersion.objects.filter(user_id=user_id).exclude(before="").only(
                "before", "before_provenance"):
            sources, changed = provenance.without_conversation(
                provenance.aligned(parse_document(version.before), version.before_provenance), conversation_id)
            if changed:
                MemoryVersion.objects.filter(pk=version.pk).update(before_provenance=provenance.to_json(sources))
                changed_rows += 1
    return changed_rows


@dataclass(frozen=True)
class Erased:
    """What an erase removed, by kind, with counts and the time: the receipt (never content).

    `removed` counts the person's profile entries and notes entries, the
    versions and the pending proposals, and whatever `also` erased with them
    (the chat's conversations, messages and search index rows).
    """

    removed: Mapping[str, int]
    at: datetime


def erase(*, user_id, actor: str = Actor.USER, also: Callable[[object], Mapping[str, int]] | None = None) -> Erased:
    """Delete everything the person's memory holds, in one transaction under their lock; return the receipt.

    Both documents (and with them every entry's provenance), every version and
    every pending proposal; `also(user_id)`, when given, erases more in the
    same transaction and returns its own counts. The receipt is kept as the
    erase's audit event (counts only). Raise UnknownUser for no account.
    """
    started = time.monotonic()
    with transaction.atomic():
        with connection.cursor() as cursor:
            _lock_owner(cursor, _statements(), user_id)
        entries = {"user": 0, "memory": 0}
        for memory_type, content in MemoryDocument.objects.filter(user_id=user_id).values_list(
                "memory_type", "content"):
            entries[memory_type] = len(parse_document(content))
        MemoryDocument.objects.filter(user_id=user_id).delete()
        # Idempotency records name what the person's requests did; an erase forgets them too.
        IdempotencyKey.objects.filter(user_id=user_id).delete()
        removed = {
            "profile_entries": entries["user"],
            "notes_entries": entries["memory"],
            "versions": MemoryVersion.objects.filter(user_id=user_id).delete()[0],
            "proposals": MemoryProposal.objects.filter(user_id=user_id).delete()[0],
        }
        if also is not None:
            removed.update({str(kind): int(count) for kind, count in also(user_id).items()})
        event = MemoryEvent.objects.create(
            user_id=user_id, actor=actor, outcome=Outcome.ERASED, actions=removed,
            user_characters=0, memory_characters=0, duration_ms=_elapsed_ms(started),
        )
    return Erased(removed=removed, at=event.created_at)


def lock_owner_for_deletion(*, user_id) -> None:
    """Take the person's write lock inside an account deletion's transaction.

    Django collects the rows to cascade before its delete transaction; a
    memory commit that locks the person and inserts a first row in between
    would make the user row's DELETE fail on the foreign key. Taking the same
    lock first (from `pre_delete`, before any row is deleted) makes a commit
    either finish before the cascade's statements run, or wait and then find
    no account.
    """
    if not connection.in_atomic_block:
        return  # no transaction to hold the lock in: nothing to serialise with
    with connection.cursor() as cursor:
        sql = _statements()
        cursor.execute(sql.lock_owner, [sql.owner(user_id)])
    # The cascade's own query ran before the lock: delete what a writer wrote since.
    MemoryVersion.objects.filter(user_id=user_id).delete()
    MemoryDocument.objects.filter(user_id=user_id).delete()
    MemoryEvent.objects.filter(user_id=user_id).delete()
    MemoryProposal.objects.filter(user_id=user_id).delete()
    MemoryPreference.objects.filter(user_id=user_id).delete()
    IdempotencyKey.objects.filter(user_id=user_id).delete()


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


# --- events ------------------------------------------------------------------


def _record_event(*, user_id, actor, outcome, summary, snapshot, retry_count, started, error_code=""):
    """Insert one event row in its own statement (the paths outside a commit's cursor)."""
    sql = _statements()
    if not sql.direct_event:
        _insert_event(
            user_id=user_id, actor=actor, outcome=outcome, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions,
            user_characters=document_length(snapshot.user) if snapshot else None,
            memory_characters=document_length(snapshot.memory) if snapshot else None,
            retry_count=retry_count, duration_ms=_elapsed_ms(started), error_code=error_code,
        )
        return
    params = _event_params(
        sql, owner=sql.owner(user_id), actor=actor, outcome=outcome, summary=summary, snapshot=snapshot,
        retry_count=retry_count, started=started, error_code=error_code, now=sql.now(),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.insert_event, params)


def _event_params(sql: _Statements, *, owner, actor, outcome, summary, snapshot, retry_count, started,
                  error_code, now) -> list:
    """Return the event INSERT's parameters, in `_EVENT_COLUMNS` order."""
    if not sql.direct_event:  # the model changed: let every field prepare its own value
        event = MemoryEvent(
            user_id=owner, actor=actor, outcome=outcome, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions,
            user_characters=document_length(snapshot.user) if snapshot else None,
            memory_characters=document_length(snapshot.memory) if snapshot else None,
            retry_count=retry_count, duration_ms=_elapsed_ms(started), error_code=error_code,
        )
        return [field.get_db_prep_save(field.pre_save(event, add=True), connection) for field in sql.event_fields]
    adapt_json = connection.ops.adapt_json_value
    return [
        owner, str(actor), str(outcome), summary.operation_count,
        adapt_json(summary.targets, None), adapt_json(summary.actions, None),
        document_length(snapshot.user) if snapshot else None,
        document_length(snapshot.memory) if snapshot else None,
        retry_count, _elapsed_ms(started), error_code, None, "", "", now,
    ]


def _insert_event(**values) -> None:
    """INSERT the row `MemoryEvent.objects.create(**values)` would, without the ORM."""
    event = MemoryEvent(**values)
    sql = _statements()
    params = [field.get_db_prep_save(field.pre_save(event, add=True), connection) for field in sql.event_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql.insert_event, params)


def _record_outside(record: Callable[..., None], outcome: str, error_code: str = "") -> None:
    """Write an event for a rolled-back commit; never mask the original error."""
    if connection.in_atomic_block and connection.needs_rollback:
        return
    try:
        # Bounded like the commit: whoever holds the person's lock also blocks
        # this row's foreign-key check, and an audit row must not hang a turn.
        with bounded_wait(memory_settings().commit_lock_timeout):
            record(outcome, None, error_code)
    except Exception:  # the database may be the reason the commit failed
        logger.warning("memory event not recorded", extra={"outcome": outcome})


def record_discarded(*, user_id, operations: Sequence[Operation], reason: str) -> None:
    """Record that a turn's staged batch was dropped without a commit."""
    _record_outside(
        lambda outcome, snapshot, code: _record_event(
            user_id=user_id, actor=Actor.AGENT, outcome=outcome, summary=summarize(operations),
            snapshot=None, retry_count=0, started=time.monotonic(), error_code=code,
        ),
        Outcome.DISCARDED,
        reason,
    )


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# --- the async boundary ------------------------------------------------------


async def commit_in_worker(
    *,
    user_id,
    operations: Sequence[Operation],
    cancel_event: threading.Event | None = None,
    actor: str = Actor.AGENT,
    limits: Mapping[str, int] | None = None,
    origin: Mapping | None = None,
    guard=None,
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
        )
    )
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        event.set()
        try:
            await worker
        except (CommitCancelled, MemoryValidationError, DatabaseError, AlreadyCommitted):
            pass
        raise
