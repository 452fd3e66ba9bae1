"""The test process's own database work, made cheaper without changing what it stores.

1. On PostgreSQL the test process empties its tables with DELETE, not TRUNCATE.
Each transactional test (pytest-django's `transactional_db`: live servers,
sockets, locks) ends with Django's flush, which on PostgreSQL is one
`TRUNCATE` of every table. For tables holding a test's few rows that took
about 120 ms here (a new file for every table and index, unlinked and synced
at commit), 500 times per PostgreSQL run; `DELETE FROM` of the same tables in
the same transaction took about 15 ms. It is what Django's flush does on
SQLite.

The result is the same empty tables. Django's foreign keys on PostgreSQL are
DEFERRABLE INITIALLY DEFERRED and the flush runs in one transaction, so the
order of the deletes does not matter (SET CONSTRAINTS ALL DEFERRED covers any
other); row triggers (the conversation search index's) fire as they do in use;
sequences are not reset, as TRUNCATE without RESTART IDENTITY does not reset
them. A flush that asks for RESTART IDENTITY or CASCADE keeps Django's own
TRUNCATE. Only this test process is changed: the application, its live
servers and `manage.py flush` use Django's operations unchanged.

2. The test process's commits do not wait for the disk: SQLite's
`synchronous = OFF`, PostgreSQL's `synchronous_commit = off` on its own
connections. A commit here waited about a millisecond for fsync (0.13 ms
without), tens of thousands of times a run. What a commit makes visible to
other connections and processes, and when, is unchanged; only a crash of the
machine or of the database server could lose the last commits, and no test
crashes either (the fault tests kill the application's servers, whose own
connections keep the defaults).
"""
from __future__ import annotations

from django.db.backends.postgresql.operations import DatabaseOperations
from django.db.backends.signals import connection_created

_django_sql_flush = DatabaseOperations.sql_flush


def sql_flush_by_delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if not tables or reset_sequences or allow_cascade:
        return _django_sql_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    return [f"{style.SQL_KEYWORD('SET CONSTRAINTS ALL DEFERRED')};"] + [
        f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};" for table in tables]


def commit_without_waiting_for_the_disk(sender, connection, **kwargs) -> None:
    statement = {"sqlite": "PRAGMA synchronous = OFF", "postgresql": "SET synchronous_commit = off"}.get(
        connection.vendor)
    if statement:
        with connection.cursor() as cursor:
            cursor.execute(statement)


def install() -> None:
    DatabaseOperations.sql_flush = sql_flush_by_delete
    connection_created.connect(commit_without_waiting_for_the_disk, dispatch_uid="tests_fast_database")
