"""The store (agentmemory.store) on a real database: two rows a person at
most, one-query reads, a locked commit that reapplies the batch to the latest
rows, retries of deadlocks only, cancellation that rolls back at each
checkpoint, and events that never carry content.

Tests that use other connections (threads, the async worker) or that need
the commit to be the outermost transaction are transactional.
"""
import asyncio
import json
import sqlite3
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, OperationalError, connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.forms.models import model_to_dict
from django.test.utils import CaptureQueriesContext

from agentmemory import store
from agentmemory.models import SCHEMA_VERSION, MemoryDocument, MemoryEvent, MemoryVersion, Outcome
from agentmemory.rules import SEPARATOR, MemoryValidationError, Operation, Snapshot

SENTINEL = "SENTINEL-9d41-basalt-kestrel"
DOCUMENT_TABLE = MemoryDocument._meta.db_table
WRITERS = 8


def add(content, target="memory"):
    return Operation(target=target, action="add", content=content)


def replace(match, content, target="memory"):
    return Operation(target=target, action="replace", match=match, content=content)


def remove(match, target="memory"):
    return Operation(target=target, action="remove", match=match)


def rows_of(user):
    """Return {memory_type: (content, updated_at)} straight from the table."""
    return {
        row.memory_type: (row.content, row.updated_at)
        for row in MemoryDocument.objects.filter(user_id=user.pk)
    }


def seed(user, *, user_entries=(), memory_entries=()):
    operations = [add(e, "user") for e in user_entries] + [add(e, "memory") for e in memory_entries]
    return store.commit_operations(user_id=user.pk, operations=operations)


def document_writes(queries) -> int:
    """Count the statements that wrote the memory table (SQL is never printed)."""
    writes = 0
    for query in queries:
        sql = query["sql"].lstrip().upper()
        if sql.startswith(("INSERT", "UPDATE", "DELETE")) and DOCUMENT_TABLE.upper() in sql:
            writes += 1
    return writes


def cancel_on_call(n):
    calls = []

    def should_cancel():
        calls.append(1)
        return len(calls) == n

    should_cancel.calls = calls
    return should_cancel


# --- reads ----------------------------------------------------------------------


def test_load_snapshot_reads_both_rows_in_one_query(user):
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres", "deploys on friday"])
    with CaptureQueriesContext(connection) as queries:
        snapshot = store.load_snapshot(user_id=user.pk)
    assert len(queries.captured_queries) == 1
    assert snapshot == Snapshot(user=("likes tea",), memory=("uses postgres", "deploys on friday"))


def test_missing_rows_are_empty_memory(user):
    with CaptureQueriesContext(connection) as queries:
        assert store.load_snapshot(user_id=user.pk) == Snapshot()
    assert len(queries.captured_queries) == 1


def test_turn_read_is_one_statement_for_settings_and_memory(user):
    from agentmemory import preferences

    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    with CaptureQueriesContext(connection) as queries:
        row, snapshot = store.load_for_turn(user_id=user.pk)
    # No settings row: the defaults, and the memory as load_state reads it.
    assert row is None and preferences.from_row(row).use_memory is True
    read_back = snapshot == Snapshot(user=("likes tea",), memory=("uses postgres",))
    assert read_back  # a boolean: a failure never prints memory content
    as_stored = snapshot == store.load_state(user_id=user.pk).snapshot
    assert as_stored
    expected = 1 if connection.vendor == "postgresql" else 2
    assert len(queries.captured_queries) == expected

    preferences.set_save_mode(user_id=user.pk, save_mode="ask")
    row, snapshot = store.load_for_turn(user_id=user.pk)
    assert preferences.from_row(row).ask_first is True and preferences.from_row(row).use_memory is True
    same = snapshot.memory == ("uses postgres",)
    assert same


def test_turn_read_skips_the_documents_when_the_switch_is_off(user):
    from agentmemory import preferences

    seed(user, memory_entries=["uses postgres", "deploys on friday"])
    preferences.set_use_memory(user_id=user.pk, use_memory=False)
    row, snapshot = store.load_for_turn(user_id=user.pk)
    assert snapshot is None
    assert preferences.from_row(row).use_memory is False


def test_turn_read_of_a_person_with_no_memory(user):
    row, snapshot = store.load_for_turn(user_id=user.pk)
    assert row is None
    assert snapshot == Snapshot()


def test_rows_hold_the_rendered_document(user):
    seed(user, memory_entries=["one", "two\nlines"])
    content, _ = rows_of(user)["memory"]
    assert content == "one" + SEPARATOR + "two\nlines"


def test_unknown_schema_version_is_refused_not_parsed(user):
    MemoryDocument.objects.create(user=user, memory_type="memory", content=SENTINEL, schema_version=SCHEMA_VERSION + 1)
    with pytest.raises(store.SchemaVersionError) as info:
        store.load_snapshot(user_id=user.pk)
    assert isinstance(info.value, store.MemoryUnavailable)
    assert SENTINEL not in str(info.value)
    assert "schema_version" in str(info.value)
    # The turn's own read (entries only) refuses it the same way.
    with pytest.raises(store.SchemaVersionError):
        store.load_for_turn(user_id=user.pk)

    # A commit refuses it too and leaves the row alone.
    before = rows_of(user)
    with pytest.raises(store.SchemaVersionError):
        store.commit_operations(user_id=user.pk, operations=[add("new fact")])
    assert rows_of(user) == before


# --- the two-row table -------------------------------------------------------------


def test_removing_the_last_entry_deletes_the_row(user):
    seed(user, user_entries=["likes tea"], memory_entries=["only note"])
    result = store.commit_operations(user_id=user.pk, operations=[remove("only note")])
    assert result.changed == ("memory",)
    assert set(rows_of(user)) == {"user"}
    assert store.load_snapshot(user_id=user.pk) == Snapshot(user=("likes tea",))


def test_a_row_never_holds_empty_content(user):
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryDocument.objects.create(user=user, memory_type="user", content="")
    assert not MemoryDocument.objects.filter(user=user).exists()


def test_memory_type_outside_user_and_memory_is_rejected_by_the_database(user):
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryDocument.objects.create(user=user, memory_type="diary", content="x")
    assert not MemoryDocument.objects.filter(user=user).exists()


def test_one_row_per_person_and_memory_type(user):
    MemoryDocument.objects.create(user=user, memory_type="memory", content="a")
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryDocument.objects.create(user=user, memory_type="memory", content="b")
    assert MemoryDocument.objects.filter(user=user).count() == 1


def test_deleting_the_account_deletes_its_memory(user, other_user):
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    seed(other_user, memory_entries=["bob's note"])
    user_id = user.pk
    user.delete()
    assert not MemoryDocument.objects.filter(user_id=user_id).exists()
    assert not MemoryEvent.objects.filter(user_id=user_id).exists()
    assert store.load_snapshot(user_id=other_user.pk) == Snapshot(memory=("bob's note",))


def test_erase_removes_both_rows_and_leaves_other_people_alone(user, other_user):
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    seed(other_user, memory_entries=["bob's note"])
    receipt = store.erase(user_id=user.pk)
    assert receipt.removed == {"profile_entries": 1, "notes_entries": 1, "versions": 2, "proposals": 0}
    assert rows_of(user) == {}
    assert not MemoryVersion.objects.filter(user=user).exists()
    assert store.load_snapshot(user_id=other_user.pk) == Snapshot(memory=("bob's note",))
    assert MemoryVersion.objects.filter(user=other_user).count() == 1
    event = MemoryEvent.objects.get(user=user, outcome=Outcome.ERASED)
    assert event.actions == receipt.removed and event.created_at == receipt.at


def test_commit_for_an_unknown_account_writes_nothing(db):
    missing = (get_user_model().objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1000
    with pytest.raises(store.UnknownUser):
        store.commit_operations(user_id=missing, operations=[add("orphan")])
    assert not MemoryDocument.objects.filter(user_id=missing).exists()


# --- commits ------------------------------------------------------------------------


def test_commit_writes_only_the_rows_that_changed(user):
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    before = rows_of(user)
    with CaptureQueriesContext(connection) as queries:
        result = store.commit_operations(user_id=user.pk, operations=[add("deploys on friday")])
    assert result.changed == ("memory",)
    assert result.outcome == Outcome.COMMITTED
    assert document_writes(queries.captured_queries) == 1
    after = rows_of(user)
    assert after["user"] == before["user"]  # content and updated_at untouched
    assert after["memory"][1] >= before["memory"][1]
    assert after["memory"][0] == "uses postgres" + SEPARATOR + "deploys on friday"


def test_a_batch_that_changes_nothing_writes_no_row(user):
    seed(user, memory_entries=["uses postgres"])
    before = rows_of(user)
    with CaptureQueriesContext(connection) as queries:
        result = store.commit_operations(user_id=user.pk, operations=[add("uses postgres")])
    assert result.changed == ()
    assert result.outcome == Outcome.UNCHANGED
    assert document_writes(queries.captured_queries) == 0
    assert rows_of(user) == before


def test_first_write_creates_only_the_rows_it_needs(user):
    result = store.commit_operations(user_id=user.pk, operations=[add("likes tea", "user")])
    assert result.changed == ("user",)
    assert set(rows_of(user)) == {"user"}


def test_a_failed_batch_commits_nothing(user):
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    before = rows_of(user)
    batch = [add("a new user fact", "user"), remove("uses postgres"), replace("no such entry", "x")]
    with pytest.raises(MemoryValidationError) as info:
        store.commit_operations(user_id=user.pk, operations=batch)
    assert info.value.position == 3
    assert rows_of(user) == before
    event = MemoryEvent.objects.filter(user=user).first()
    assert (event.outcome, event.error_code, event.retry_count) == (Outcome.REJECTED, "no_match", 0)


def test_an_over_capacity_batch_commits_nothing(user):
    seed(user, memory_entries=["n" * 2_000])
    before = rows_of(user)
    with pytest.raises(MemoryValidationError) as info:
        store.commit_operations(user_id=user.pk, operations=[add("m" * 300)])
    assert info.value.code == "over_capacity"
    assert rows_of(user) == before


def test_commit_reapplies_the_batch_to_the_latest_rows(user):
    # The turn staged against an empty snapshot; meanwhile another commit landed.
    staged_against = store.load_snapshot(user_id=user.pk)
    seed(user, memory_entries=["written meanwhile"])
    result = store.commit_operations(user_id=user.pk, operations=[add("staged fact")])
    assert staged_against == Snapshot()
    assert result.snapshot.memory == ("written meanwhile", "staged fact")
    assert store.load_snapshot(user_id=user.pk) == result.snapshot


def test_commit_rejects_a_batch_that_no_longer_fits_the_latest_rows(user):
    seed(user, memory_entries=["old fact"])
    # Someone else removed the entry the turn wanted to replace.
    store.commit_operations(user_id=user.pk, operations=[remove("old fact")])
    with pytest.raises(MemoryValidationError) as info:
        store.commit_operations(user_id=user.pk, operations=[replace("old fact", "new fact")])
    assert info.value.code == "no_match"
    assert rows_of(user) == {}


def test_commit_uses_the_limits_from_settings(user, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "MEMORY_LIMIT": 10}
    with pytest.raises(MemoryValidationError):
        store.commit_operations(user_id=user.pk, operations=[add("x" * 11)])
    result = store.commit_operations(user_id=user.pk, operations=[add("x" * 10)])
    assert result.limits["memory"] == 10


# --- cancellation -----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("checkpoint", [1, 2, 3], ids=["before-query", "before-persisting", "before-exit"])
def test_cancel_at_each_checkpoint_commits_nothing(make_user, checkpoint):
    user = make_user("carol")
    seed(user, user_entries=["likes tea"], memory_entries=["uses postgres"])
    before = rows_of(user)
    should_cancel = cancel_on_call(checkpoint)
    with pytest.raises(store.CommitCancelled):
        store.commit_operations(
            user_id=user.pk,
            operations=[add("a new fact"), remove("uses postgres"), add("prefers green tea", "user")],
            should_cancel=should_cancel,
        )
    assert len(should_cancel.calls) == checkpoint
    assert rows_of(user) == before
    outcomes = list(MemoryEvent.objects.filter(user=user).values_list("outcome", flat=True))
    assert outcomes == [Outcome.CANCELLED, Outcome.COMMITTED]  # newest first: the seed, then the cancel


@pytest.mark.django_db(transaction=True)
def test_commit_calls_should_cancel_three_times(make_user):
    user = make_user("carol")
    should_cancel = cancel_on_call(0)
    store.commit_operations(user_id=user.pk, operations=[add("fact")], should_cancel=should_cancel)
    assert len(should_cancel.calls) == 3


class GatedEvent(threading.Event):
    """A cancel event whose second check (before persisting, lock held) waits
    until the event is set, so a test can cancel while the worker is inside
    the transaction."""

    def __init__(self):
        super().__init__()
        self.checks = 0
        self.inside_transaction = threading.Event()

    def is_set(self):
        self.checks += 1
        if self.checks == 2:
            self.inside_transaction.set()
            self.wait(10)
        return super().is_set()


@pytest.mark.django_db(transaction=True)
def test_cancelled_commit_in_worker_sets_the_event_and_rolls_back(make_user):
    user = make_user("carol")
    seed(user, memory_entries=["uses postgres"])
    before = rows_of(user)
    event = GatedEvent()

    async def scenario():
        task = asyncio.create_task(
            store.commit_in_worker(user_id=user.pk, operations=[add("half-saved fact")], cancel_event=event)
        )
        assert await asyncio.to_thread(event.inside_transaction.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The worker made its decision before the caller saw the cancel.
        return event.checks

    checks = asyncio.run(scenario())
    assert event.is_set()
    assert checks == 2
    assert rows_of(user) == before
    assert MemoryEvent.objects.filter(user=user).first().outcome == Outcome.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_commit_in_worker_commits_when_not_cancelled(make_user):
    user = make_user("carol")
    result = asyncio.run(store.commit_in_worker(user_id=user.pk, operations=[add("saved fact")]))
    assert result.outcome == Outcome.COMMITTED
    assert store.load_snapshot(user_id=user.pk) == Snapshot(memory=("saved fact",))


# --- retries --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_injected_deadlock_replays_the_whole_transaction(postgres_only, make_user):
    user = make_user("carol")
    seed(user, memory_entries=["counter: 1"])
    calls = []

    def should_cancel():
        calls.append(1)
        if len(calls) == 2:  # first attempt, lock held, batch applied, not yet persisted
            with connection.cursor() as cursor:
                cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40P01'; END $$")
        return False

    result = store.commit_operations(
        user_id=user.pk,
        operations=[replace("counter: 1", "counter: 2"), add("added once")],
        should_cancel=should_cancel,
    )
    assert result.retry_count == 1
    assert len(calls) == 2 + 3  # the failed attempt, then a complete replay
    assert result.snapshot == Snapshot(memory=("counter: 2", "added once"))
    assert store.load_snapshot(user_id=user.pk) == result.snapshot
    events = list(MemoryEvent.objects.filter(user=user).values_list("outcome", "retry_count"))
    assert events == [(Outcome.COMMITTED, 1), (Outcome.COMMITTED, 0)]


@pytest.mark.django_db(transaction=True)
def test_injected_serialization_failure_is_retried(postgres_only, make_user):
    user = make_user("carol")
    calls = []

    def should_cancel():
        calls.append(1)
        if len(calls) in (1, 4):  # first and second attempts; the third succeeds
            with connection.cursor() as cursor:
                cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40001'; END $$")
        return False

    result = store.commit_operations(user_id=user.pk, operations=[add("fact")], should_cancel=should_cancel)
    assert result.retry_count == 2
    assert store.load_snapshot(user_id=user.pk) == Snapshot(memory=("fact",))


@pytest.mark.django_db(transaction=True)
def test_retries_stop_after_the_attempt_limit(postgres_only, make_user):
    user = make_user("carol")
    calls = []

    def should_cancel():
        calls.append(1)
        if len(calls) % 2 == 0:  # every attempt fails before persisting
            with connection.cursor() as cursor:
                cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40P01'; END $$")
        return False

    with pytest.raises(OperationalError):
        store.commit_operations(user_id=user.pk, operations=[add("never saved")], should_cancel=should_cancel)
    assert len(calls) == 2 * 3
    assert rows_of(user) == {}
    event = MemoryEvent.objects.get(user=user)
    assert (event.outcome, event.retry_count, event.error_code) == (Outcome.FAILED, 2, "database_error")


@pytest.mark.django_db(transaction=True)
def test_a_validation_error_is_not_retried(make_user):
    user = make_user("carol")
    should_cancel = cancel_on_call(0)
    with pytest.raises(MemoryValidationError):
        store.commit_operations(user_id=user.pk, operations=[remove("nothing here")], should_cancel=should_cancel)
    assert len(should_cancel.calls) == 1  # one attempt, stopped by the rules
    event = MemoryEvent.objects.get(user=user)
    assert (event.outcome, event.retry_count) == (Outcome.REJECTED, 0)


@pytest.mark.django_db(transaction=True)
def test_an_unknown_database_error_is_not_retried(make_user):
    user = make_user("carol")
    calls = []
    failing_sql = (
        "DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '22012'; END $$"
        if connection.vendor == "postgresql"
        else "SELECT * FROM agentmemory_no_such_table"
    )

    def should_cancel():
        calls.append(1)
        if len(calls) == 2:
            with connection.cursor() as cursor:
                cursor.execute(failing_sql)
        return False

    with pytest.raises(DatabaseError) as info:
        store.commit_operations(user_id=user.pk, operations=[add("fact")], should_cancel=should_cancel)
    assert not store.is_retryable(info.value)
    assert len(calls) == 2
    assert rows_of(user) == {}
    event = MemoryEvent.objects.get(user=user)
    assert (event.outcome, event.retry_count) == (Outcome.FAILED, 0)


def _locked_sqlite_error(tmp_path) -> sqlite3.OperationalError:
    path = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        waiter.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return exc
    finally:
        waiter.close()
        holder.close()
    raise AssertionError("the second connection was not locked out")


def test_sqlite_database_is_locked_is_classified_retryable(tmp_path):
    error = _locked_sqlite_error(tmp_path)
    assert "database is locked" in str(error)
    assert store.is_retryable(error)
    # As Django raises it: its own OperationalError caused by the driver's.
    try:
        raise OperationalError(*error.args) from error
    except OperationalError as wrapped:
        assert store.is_retryable(wrapped)


def test_other_sqlite_errors_are_not_retryable(tmp_path):
    database = sqlite3.connect(tmp_path / "plain.sqlite3")
    with pytest.raises(sqlite3.OperationalError) as missing_table:
        database.execute("SELECT * FROM missing")
    database.execute("CREATE TABLE t (x UNIQUE)")
    database.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.IntegrityError) as duplicate:
        database.execute("INSERT INTO t VALUES (1)")
    database.close()
    assert not store.is_retryable(missing_table.value)
    assert not store.is_retryable(duplicate.value)
    assert not store.is_retryable(MemoryValidationError("x", code="no_match"))
    assert not store.is_retryable(RuntimeError("x"))


@pytest.mark.django_db(transaction=True)
def test_locked_sqlite_database_is_retried_end_to_end(make_user, settings, monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's own lock; PostgreSQL has the deadlock tests above")
    from agentmemory.store import commit as commit_module

    user = make_user("carol")
    # The commit's lock wait is bounded (COMMIT_LOCK_TIMEOUT_SECONDS): fail at once here.
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "RETRY_BACKOFF_SECONDS": 0.01, "COMMIT_LOCK_TIMEOUT_SECONDS": 0.001}
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    backoffs = []

    def release_then_sleep(seconds):
        # The store backs off only after an attempt was refused with "database is
        # locked": the lock goes then, and not on a timer, so the test holds on
        # a loaded machine too.
        backoffs.append(seconds)
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        time.sleep(seconds)

    monkeypatch.setattr(commit_module, "time", _TimeWithSleep(release_then_sleep))
    try:
        result = store.commit_operations(user_id=user.pk, operations=[add("fact")])
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
        connection.close()
    assert len(backoffs) == 1
    assert result.retry_count == 1
    assert store.load_snapshot(user_id=user.pk) == Snapshot(memory=("fact",))


class _TimeWithSleep:
    """The time module, with sleep replaced (the store calls time.sleep between attempts)."""

    def __init__(self, sleep):
        self.sleep = sleep

    def __getattr__(self, name):
        return getattr(time, name)


# --- concurrent writers -------------------------------------------------------------


def _run_writers(user_id, batches) -> list:
    """Commit each batch from its own thread and connection, all at once."""
    barrier = threading.Barrier(len(batches), timeout=30)
    outcomes = [None] * len(batches)

    def writer(index, batch):
        try:
            barrier.wait()
            outcomes[index] = store.commit_operations(user_id=user_id, operations=batch)
        except BaseException as exc:  # reported below, by type only
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(i, b)) for i, b in enumerate(batches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a writer hung"
    failures = [type(o).__name__ for o in outcomes if not isinstance(o, store.CommitResult)]
    assert failures == [], f"writers failed: {failures}"
    return outcomes


def _check_concurrent_writers_keep_every_change(user):
    # Round one: the first write to a person with no rows, eight at once.
    assert rows_of(user) == {}
    _run_writers(user.pk, [[add(f"fact from writer {i}")] for i in range(WRITERS)])
    snapshot = store.load_snapshot(user_id=user.pk)
    assert sorted(snapshot.memory) == sorted(f"fact from writer {i}" for i in range(WRITERS))
    assert MemoryDocument.objects.filter(user=user).count() == 1

    # Round two: every writer edits its own entry and adds to the profile.
    _run_writers(
        user.pk,
        [
            [replace(f"fact from writer {i}", f"fact from writer {i}, revised"), add(f"profile note {i}", "user")]
            for i in range(WRITERS)
        ],
    )
    snapshot = store.load_snapshot(user_id=user.pk)
    assert sorted(snapshot.memory) == sorted(f"fact from writer {i}, revised" for i in range(WRITERS))
    assert sorted(snapshot.user) == sorted(f"profile note {i}" for i in range(WRITERS))
    committed = MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).count()
    assert committed == 2 * WRITERS


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_keep_every_valid_change(postgres_only, make_user):
    _check_concurrent_writers_keep_every_change(make_user("carol"))


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_on_sqlite_queue_and_keep_every_change(make_user):
    if connection.vendor != "sqlite":
        pytest.skip("the PostgreSQL variant is the test above")
    _check_concurrent_writers_keep_every_change(make_user("carol"))


@pytest.mark.django_db(transaction=True)
def test_concurrent_conflicting_writers_keep_one_and_reject_the_other_clearly(make_user):
    user = make_user("carol")
    seed(user, memory_entries=["editor: vim"])
    batches = [[replace("editor: vim", f"editor: choice {i}")] for i in range(4)]
    barrier = threading.Barrier(len(batches), timeout=30)
    outcomes = []

    def writer(batch):
        try:
            barrier.wait()
            store.commit_operations(user_id=user.pk, operations=batch)
            outcomes.append("committed")
        except MemoryValidationError as exc:
            outcomes.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(b,)) for b in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["committed"] + ["no_match"] * 3
    (entry,) = store.load_snapshot(user_id=user.pk).memory
    assert entry.startswith("editor: choice ")


# --- events -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_events_carry_no_memory_content(make_user):
    user = make_user("carol")
    store.commit_operations(user_id=user.pk, operations=[add(f"{SENTINEL} one"), add(f"{SENTINEL} two", "user")])
    store.commit_operations(user_id=user.pk, operations=[add(f"{SENTINEL} one")])  # unchanged
    with pytest.raises(MemoryValidationError):
        store.commit_operations(user_id=user.pk, operations=[remove(f"{SENTINEL} missing")])
    with pytest.raises(MemoryValidationError):
        store.commit_operations(user_id=user.pk, operations=[add(f"{SENTINEL}\x00")])
    with pytest.raises(store.CommitCancelled):
        store.commit_operations(
            user_id=user.pk, operations=[add(f"{SENTINEL} three")], should_cancel=cancel_on_call(3)
        )
    store.record_discarded(user_id=user.pk, operations=[add(f"{SENTINEL} four")], reason="turn_failed")
    store.erase(user_id=user.pk)

    events = list(MemoryEvent.objects.filter(user=user))
    outcomes = {event.outcome for event in events}
    assert outcomes >= {Outcome.COMMITTED, Outcome.UNCHANGED, Outcome.REJECTED, Outcome.CANCELLED, Outcome.ERASED}
    for event in events:
        values = model_to_dict(event)
        values.update(created_at=event.created_at, id=event.pk)
        dumped = json.dumps(values, default=str)
        assert "SENTINEL" not in dumped, f"a {event.outcome} event carries content"


# --- the migration --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_migration_applies_and_reverses():
    tables = {MemoryDocument._meta.db_table, MemoryEvent._meta.db_table}
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    assert tables <= set(connection.introspection.table_names())

    executor.migrate([("agentmemory", None)])
    assert not tables & set(connection.introspection.table_names())

    executor = MigrationExecutor(connection)
    executor.migrate(leaves)
    assert tables <= set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, MemoryDocument._meta.db_table)
    assert {"agentmemory_one_row_per_type", "agentmemory_memory_type_valid", "agentmemory_content_not_empty"} <= set(
        constraints
    )
    # The re-created table works and keeps its constraints.
    user = get_user_model().objects.create_user(username="after-migration", password="pw-x-123456")
    store.commit_operations(user_id=user.pk, operations=[add("fact")])
    assert store.load_snapshot(user_id=user.pk) == Snapshot(memory=("fact",))
    with pytest.raises(IntegrityError), transaction.atomic():
        MemoryDocument.objects.create(user=user, memory_type="user", content="")


def test_an_agent_commit_for_a_deactivated_account_is_refused_under_the_lock(make_user):
    from agentmemory.models import Actor

    person = make_user("dana", is_active=False)
    with pytest.raises(store.InactiveUser):
        store.commit_operations(user_id=person.pk, operations=[add("fact")], actor=Actor.AGENT)
    assert store.load_snapshot(user_id=person.pk) == Snapshot()
    # Staff and the system may still write (and erase) for a deactivated account.
    store.commit_operations(user_id=person.pk, operations=[add("fact")], actor=Actor.SYSTEM)
    assert store.load_snapshot(user_id=person.pk) == Snapshot(memory=("fact",))


@pytest.mark.django_db(transaction=True)
def test_the_turn_read_outside_a_transaction_is_one_bounded_round_trip(user):
    seed(user, memory_entries=["uses postgres"])
    with CaptureQueriesContext(connection) as queries:
        row, snapshot = store.load_for_turn(user_id=user.pk, timeout=1.0)
    same = snapshot.memory == ("uses postgres",)
    assert row is None and same
    if connection.vendor == "postgresql":
        assert len(queries.captured_queries) == 1  # the bounds and the read in one query string
        with connection.cursor() as cursor:  # the bounds ended with it
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone()[0] == "0"
        assert connection.connection.info.transaction_status == 0  # idle, no transaction left open


@pytest.mark.django_db(transaction=True)
def test_the_turn_read_gives_up_on_a_locked_table_within_its_bound(user):
    seed(user, memory_entries=["uses postgres"])
    statements = (["BEGIN", f"LOCK TABLE {DOCUMENT_TABLE} IN ACCESS EXCLUSIVE MODE"]
                  if connection.vendor == "postgresql" else ["BEGIN EXCLUSIVE"])
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
            started = time.monotonic()
            with pytest.raises(store.MemoryUnavailable) as info:
                store.load_for_turn(user_id=user.pk, timeout=0.3)
            waited = time.monotonic() - started
            cursor.execute("ROLLBACK")
    finally:
        other.close()
    assert store.is_lock_timeout(info.value.__cause__)  # the lock wait ran out, not some other error
    assert waited < 2.0  # the database's bound, not a caller's wait, ended it
    # The connection is usable at once: the next read answers.
    answered = store.load_for_turn(user_id=user.pk, timeout=0.3)[1].memory == ("uses postgres",)
    assert answered
