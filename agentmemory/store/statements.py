"""The hand-built SQL of the hot paths, and how its cursor binds and prepares it.

The fixed statements of the store's hot paths are built here, once per
database vendor; the reads, the commit, versions and events run them.
Nothing here decides what to write.

The locked path speaks SQL through Django's connection, not the ORM: it runs
while the person's lock is held, and building ORM queries cost more CPU than
the database spent answering them (bench/commit.py: 2.8x a hand-written
psycopg transaction with the ORM). The statements and the user model are
resolved once per database vendor; table and column names come from the
models' _meta, so the models and their migrations stay the one description.
The event row's parameters are built directly (a model instance and a
get_db_prep_save per field cost 20x more), in the column order checked
against the model when the statements are built.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.dispatch import receiver
from django.utils import timezone

from ..models import MemoryDocument, MemoryEvent, MemoryPreference, MemoryVersion

# One logger for the whole store, named as before it was a package.
logger = logging.getLogger("agentmemory.store")

# invalid_sql_statement_name, duplicate_prepared_statement: a prepared statement
# the client made is not on the server connection it now talks to (a pooler
# in transaction mode that does not track them).
PREPARED_STATEMENT_SQLSTATES = frozenset({"26000", "42P05"})


def fetch(statement: str, params: list, *, result: int = 0) -> list:
    """Run `statement` and return the rows of its `result`-th result set."""
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        for _ in range(result):
            cursor.nextset()
        return cursor.fetchall()


def client_side_binding() -> bool:
    """True when Django's PostgreSQL connection binds parameters client-side (its default),
    so a query string may hold several statements."""
    connection.ensure_connection()
    return _ClientCursor is not None and issubclass(connection.connection.cursor_factory, _ClientCursor)


@dataclass(frozen=True)
class Row:
    pk: int
    memory_type: str
    content: str
    schema_version: int
    provenance: object = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


# MemoryEvent's columns in the order `event_params` fills them. A model change
# that adds or renames a field falls back to the generic path (`_insert_event`)
# until this list and `event_params` follow it.
_EVENT_COLUMNS = (
    "user", "actor", "outcome", "operation_count", "targets", "actions", "user_characters",
    "memory_characters", "retry_count", "duration_ms", "error_code", "staff", "staff_username", "viewed",
    "model", "policy_version", "source_intent", "created_at",
)


# MemoryVersion's columns in the order `keep_versions` fills them.
_VERSION_COLUMNS = (
    "user", "event", "memory_type", "before", "before_provenance", "after", "after_provenance", "kind", "by",
    "conversation_id", "turn_id", "schema_version", "created_at",
)


@dataclass(frozen=True)
class Statements:
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
    # psycopg may prepare these statements (see `commit_cursor`), and the
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

    def now(self, moment: datetime | None = None):
        """`moment` (default: now) as this backend's timestamp parameter."""
        moment = moment or timezone.now()
        if self.now_as_is:
            return moment
        return self.now_field.get_db_prep_value(moment, connection)  # type: ignore[attr-defined]  # a DateTimeField


_STATEMENTS: dict[tuple[str, bool], Statements] = {}


def vendor_statements(db=None) -> Statements:
    """Return the statements for the current connection's vendor (or `db`'s), built once."""
    db = db or connections[DEFAULT_DB_ALIAS]
    key = (db.vendor, db.features.has_select_for_update)
    sql = _STATEMENTS.get(key)
    if sql is None:
        sql = _STATEMENTS[key] = _build_statements(*key)
    return sql


@receiver(setting_changed)
def _forget_statements(*, setting, **kwargs) -> None:
    if setting == "AUTH_USER_MODEL":
        _STATEMENTS.clear()


def _build_statements(vendor: str, for_update: bool) -> Statements:
    quote = connection.ops.quote_name

    def names(model, *fields):
        return [quote(model._meta.db_table)] + [quote(model._meta.get_field(f).column) for f in fields]

    user_model = get_user_model()
    users, user_pk = names(user_model, user_model._meta.pk.name)
    has_active = any(f.name == "is_active" for f in user_model._meta.concrete_fields)
    active = quote(user_model._meta.get_field("is_active").column) if has_active else "1"
    preferences, preference_user, use_memory, save_mode, erasures, time_zone = names(
        MemoryPreference, "user", "use_memory", "save_mode", "erasures", "time_zone")
    table, pk, user, memory_type, content, version, created, modified, sources = names(
        MemoryDocument, "id", "user", "memory_type", "content", "schema_version", "created_at", "updated_at",
        "provenance",
    )
    versions, version_user, version_event, version_created = names(MemoryVersion, "user", "event", "created_at")
    version_columns = [quote(MemoryVersion._meta.get_field(f).column) for f in _VERSION_COLUMNS]  # type: ignore[union-attr,arg-type]  # concrete fields
    model_fields = tuple(f for f in MemoryEvent._meta.concrete_fields if not f.primary_key)
    direct_event = sorted(f.name for f in model_fields) == sorted(_EVENT_COLUMNS)
    event_fields = tuple(MemoryEvent._meta.get_field(n) for n in _EVENT_COLUMNS) if direct_event else model_fields
    insert_event = (f"INSERT INTO {quote(MemoryEvent._meta.db_table)} "
                    f"({', '.join(quote(f.column) for f in event_fields)}) "  # type: ignore[union-attr,arg-type]
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
    lock_owner = f"SELECT {users}.{active}, {preferences}.{use_memory}, {preferences}.{erasures} FROM {lock_from}"
    bounded = vendor == "postgresql"
    binding = _server_binding_cursor() if vendor == "postgresql" else None
    # One row at least (the settings, NULL without a row), one per document
    # when the switch is on: no preference row means on, as in the lock query.
    # Only what a turn uses: the entries and their sources (expiries), not their timestamps.
    turn_read = (
        f"SELECT {preferences}.{use_memory}, {preferences}.{save_mode}, {preferences}.{erasures}, "
        f"{preferences}.{time_zone}, {table}.{memory_type}, "
        f"{table}.{content}, {table}.{version}, {table}.{sources} "
        f"FROM (SELECT 1) AS person LEFT JOIN {preferences} ON {preferences}.{preference_user} = %s "
        f"LEFT JOIN {table} ON {table}.{user} = %s AND {preferences}.{use_memory} IS NOT FALSE"
        if vendor == "postgresql" else ""
    )
    return Statements(
        lock_owner=lock_owner,
        # PostgreSQL evaluates the FROM list (and so set_config) before its
        # LockRows step waits for the row lock: the timeout, local to the
        # commit's transaction, bounds that wait.
        lock_owner_bounded=(
            f"SELECT {users}.{active}, {preferences}.{use_memory}, {preferences}.{erasures} "
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
        from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]  # not in django-stubs
            ServerBindingCursor,
            is_psycopg3,
        )
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


def commit_cursor(db, sql: Statements, *, direct: bool = False):
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
        return cursor_class(db.connection)  # type: ignore[misc]  # set on PostgreSQL, the one caller
    db.validate_thread_sharing()
    with db.wrap_database_errors:
        raw = cursor_class(db.connection)  # type: ignore[misc]  # as above
    return db.make_debug_cursor(raw) if db.queries_logged else db.make_cursor(raw)


def prepared_statements_lost(exc: BaseException) -> bool:
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


SOURCES_FIELD = MemoryDocument._meta.get_field("provenance")


def json_param(db, value):
    """A JSON column's parameter, bound as the ORM binds it (`JSONField.get_db_prep_save`: None stays SQL
    NULL), without the field's per-call lookups: a commit binds one to three of them."""
    return None if value is None else db.ops.adapt_json_value(value, SOURCES_FIELD.encoder)
