"""`manage.py memory_readiness`: prove the memory tables work, leave nothing.

Run after `migrate` and before turning AGENTMEMORY_ENABLED on. In one
transaction it creates a probe account, commits a probe entry through the
store (insert, with the owner lock and the event row), reads it back,
replaces it (update), reads again, and rolls everything back. Exit status 0
means the write path works on this database; anything else names the step
that failed and what to do.
"""
from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.migrations.executor import MigrationExecutor

from agentmemory import store
from agentmemory.models import Actor, MemoryDocument, MemoryEvent
from agentmemory.rules import Operation

PROBE_PREFIX = "agentmemory-readiness-probe-"
PROBE_ENTRY = "Readiness probe entry."
PROBE_UPDATE = "Readiness probe entry, updated."


class ProbeFailed(Exception):
    def __init__(self, step: str, advice: str, cause: BaseException | None = None) -> None:
        detail = f" ({type(cause).__name__}: {_first_line(cause)})" if cause is not None else ""
        super().__init__(f"Memory readiness probe failed at '{step}'{detail}. {advice}")


class _RollBack(Exception):
    """Raised at the end of a successful probe to undo it."""


class Command(BaseCommand):
    help = (
        "Check that the memory tables accept an insert, a read and an update, inside one "
        "transaction that is rolled back. Exit 0 on success."
    )

    def handle(self, *args, **options):
        vendor = connections[DEFAULT_DB_ALIAS].vendor
        try:
            run_probe()
        except ProbeFailed as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"Memory readiness probe passed on {vendor}: migrations applied; insert, read, update "
            "and rollback of a probe row succeeded; no probe data left."
        )


def run_probe() -> None:
    """Run the probe; raise ProbeFailed naming the step that failed."""
    _check_migrations()
    username = PROBE_PREFIX + uuid.uuid4().hex[:12]
    try:
        with transaction.atomic():
            _probe(username)
            raise _RollBack()
    except _RollBack:
        pass
    except ProbeFailed:
        raise
    except Exception as exc:
        raise ProbeFailed("transaction", "Check the database connection and permissions.", exc) from exc
    if get_user_model()._default_manager.filter(username=username).exists():
        raise ProbeFailed(
            "rollback",
            "The probe's rows survived the rollback: the connection may be in autocommit outside "
            "Django's control (check the database router and ATOMIC_REQUESTS settings), and delete "
            f"users named {PROBE_PREFIX}* by hand.",
        )


def _check_migrations() -> None:
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        targets = [node for node in executor.loader.graph.leaf_nodes() if node[0] == "agentmemory"]
        pending = executor.migration_plan(targets)
    except Exception as exc:
        raise ProbeFailed("migrations", "Check DATABASE_URL and that the database is up.", exc) from exc
    if pending:
        names = [f"{migration.app_label}.{migration.name}" for migration, _ in pending]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise ProbeFailed(
            "migrations", f"The memory tables need unapplied migrations ({shown}): run `python manage.py migrate`."
        )


def _probe(username: str) -> None:
    step = "create probe account"
    try:
        user = get_user_model()._default_manager.create(username=username, is_active=False)

        step = "insert"
        store.commit_operations(
            user_id=user.pk, operations=[Operation("memory", "add", content=PROBE_ENTRY)], actor=Actor.SYSTEM
        )
        step = "read"
        if store.load_snapshot(user_id=user.pk).memory != (PROBE_ENTRY,):
            raise ProbeFailed("read", "The probe entry read back differs from the one written.")

        step = "update"
        store.commit_operations(
            user_id=user.pk,
            operations=[Operation("memory", "replace", match=PROBE_ENTRY, content=PROBE_UPDATE)],
            actor=Actor.SYSTEM,
        )
        step = "read after update"
        if store.load_snapshot(user_id=user.pk).memory != (PROBE_UPDATE,):
            raise ProbeFailed("read after update", "The updated probe entry was not read back.")
        if MemoryDocument.objects.filter(user_id=user.pk).count() != 1:
            raise ProbeFailed("read after update", "The probe account owns more than one memory row.")

        step = "events"
        if MemoryEvent.objects.filter(user_id=user.pk).count() != 2:
            raise ProbeFailed("events", "Each probe commit should have written one metadata event.")
    except ProbeFailed:
        raise
    except Exception as exc:
        raise ProbeFailed(step, _advice(step), exc) from exc


def _advice(step: str) -> str:
    if step == "create probe account":
        return "The user table is not writable: check migrations and database permissions."
    return (
        "The memory tables are not usable: run `python manage.py migrate`, check database "
        "permissions and the AGENTMEMORY limits, then run this command again."
    )


def _first_line(exc: BaseException) -> str:
    # The probe writes only its own fixed text, so a database message here
    # cannot quote anyone's memory.
    text = str(exc).strip().split("\n", 1)[0]
    return text[:200] if text else "no message"
