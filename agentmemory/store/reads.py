"""Reading one person's memory: both documents, their dates and sources, or a turn's snapshot.

Reads never lock and never write; a read that cannot be answered raises
MemoryUnavailable and the turn goes on without memory.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError, connection

from .. import provenance
from ..models import SCHEMA_VERSION, MemoryDocument, MemoryPreference
from ..rules import TARGETS, Snapshot, parse_document, with_expiry
from .errors import MemoryUnavailable, SchemaVersionError
from .locks import bounded_wait
from .statements import Row, client_side_binding, fetch, vendor_statements


@dataclass(frozen=True)
class StoredMemory:
    snapshot: Snapshot
    updated_at: Mapping[str, datetime | None]
    created_at: Mapping[str, datetime | None]
    # One `provenance.Source` (or None: unknown) per entry, aligned with the snapshot.
    sources: Mapping[str, tuple] = field(default_factory=dict)


def load_state(*, user_id, timeout: float | None = None) -> StoredMemory:
    """Return both documents of one person and their timestamps, in one query.

    With `timeout` (seconds) the read gives up when the query or a lock wait
    (a migration, a long transaction) takes longer, raising MemoryUnavailable.
    """
    sql = vendor_statements()
    if sql.select_state:
        # PostgreSQL: one fixed statement, no ORM query to build (it ran on every turn).
        def query():
            with connection.cursor() as cursor:
                cursor.execute(sql.select_state, [sql.owner(user_id)])
                return [Row(*row) for row in cursor.fetchall()]  # pk, type, content, version, sources, dates
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
    return state_from_rows(rows)


def load_for_turn(*, user_id, timeout: float | None = None) -> tuple[tuple | None, Snapshot | None]:
    """Return the person's settings row and, unless their switch is off, their memory's snapshot.

    The row is `(use_memory, save_mode, erasures, time_zone)`, or None when they never changed a
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
    sql = vendor_statements()
    if not sql.select_turn:
        try:
            with bounded_wait(timeout, statement=True) if timeout is not None else nullcontext():
                row = MemoryPreference.objects.filter(user_id=user_id).values_list(
                    "use_memory", "save_mode", "erasures", "time_zone").first()
                if row is not None and not row[0]:
                    return row, None
                documents = MemoryDocument.objects.filter(user_id=user_id).values_list(
                    "memory_type", "content", "schema_version", "provenance")
                return row, _snapshot_from_rows(list(documents))
        except DatabaseError as exc:
            raise MemoryUnavailable("Memory could not be read from the database.") from exc
    owner = sql.owner(user_id)
    try:
        if timeout is None:
            found = fetch(sql.select_turn, [owner, owner])
        elif not connection.in_atomic_block and client_side_binding():
            bound = f"{max(1, int(timeout * 1000))}ms"
            found = fetch(sql.bounds_then_select_turn, [bound, bound, owner, owner], result=1)
        else:
            with bounded_wait(timeout, statement=True):
                found = fetch(sql.select_turn, [owner, owner])
    except DatabaseError as exc:
        raise MemoryUnavailable("Memory could not be read from the database.") from exc
    # Always at least one row: the settings (NULL when there is no row) beside each document.
    row = None if found[0][0] is None else tuple(found[0][:4])
    if row is not None and not row[0]:
        return row, None
    return row, _snapshot_from_rows([each[4:] for each in found if each[4] is not None])


def preference_row(*, user_id) -> tuple | None:
    """Return the person's stored `(use_memory, save_mode)`, or None when they never changed a setting."""
    return MemoryPreference.objects.filter(user_id=user_id).values_list("use_memory", "save_mode").first()


def erase_count(*, user_id) -> int:
    """How many times the person erased their memory: read before a write that must not outlive an erase.

    Pass it to the write (`erasures=`): under the person's lock it is
    compared again, and a write read before an erase is refused (`erased`).
    """
    try:
        return MemoryPreference.objects.filter(user_id=user_id).values_list("erasures", flat=True).first() or 0
    except DatabaseError as exc:
        raise MemoryUnavailable("Memory could not be read from the database.") from exc


def load_snapshot(*, user_id, timeout: float | None = None) -> Snapshot:
    """Return the snapshot of one person's memory; raise MemoryUnavailable."""
    return load_state(user_id=user_id, timeout=timeout).snapshot


def _check_version(schema_version: int) -> None:
    if schema_version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"A memory document has schema_version {schema_version}; this release reads "
            f"version {SCHEMA_VERSION} only. Migrate the content before enabling memory."
        )


def _snapshot_from_rows(rows: Sequence[tuple]) -> Snapshot:
    """The snapshot, with its expiries, from `(memory_type, content, schema_version, provenance)` rows.

    A turn's read.
    """
    documents: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
    found: dict[str, dict[str, str]] = {}
    for memory_type, content, schema_version, stored in rows:
        _check_version(schema_version)
        documents[memory_type] = parse_document(content)
        found[memory_type] = _expiries(documents[memory_type], stored)
    snapshot = Snapshot(user=documents["user"], memory=documents["memory"])
    return with_expiry(snapshot, found) if any(found.values()) else snapshot


def _expiries(entries: tuple[str, ...], stored) -> dict[str, str]:
    """`{entry: date}` for the entries whose stored source says they expire.

    A turn needs only the expiries, not each entry's `Source`. Sources as
    JSON text (PostgreSQL's read) that never name "expires", even escaped,
    are not decoded at all: decoding and building every source cost about
    6 us an entry on every turn.
    """
    if isinstance(stored, str) and '"expires"' not in stored and "\\" not in stored:
        return {}
    return provenance.expiries(entries, provenance.aligned(entries, _decoded(stored)))


def _decoded(stored):
    # Raw SQL reads the column undecoded (SQLite's text, a jsonb loader's str).
    return json.loads(stored) if isinstance(stored, str) else stored


def state_from_rows(rows: Sequence[MemoryDocument]) -> StoredMemory:
    documents: dict[str, tuple[str, ...]] = {target: () for target in TARGETS}
    updated: dict[str, datetime | None] = {target: None for target in TARGETS}
    created: dict[str, datetime | None] = {target: None for target in TARGETS}
    sources: dict[str, tuple] = {target: () for target in TARGETS}
    for row in rows:
        _check_version(row.schema_version)
        documents[row.memory_type] = parse_document(row.content)
        updated[row.memory_type] = row.updated_at
        created[row.memory_type] = row.created_at
        sources[row.memory_type] = provenance.aligned(documents[row.memory_type], _decoded(row.provenance))
    return StoredMemory(
        snapshot=provenance.snapshot_with_expiry(Snapshot(user=documents["user"], memory=documents["memory"]),
                                                 sources),
        updated_at=updated,
        created_at=created,
        sources=sources,
    )
