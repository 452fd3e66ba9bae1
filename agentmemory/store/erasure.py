"""Removing what memory holds: an erase, the links to a deleted conversation, a deleted account.

Each runs under the person's lock, so none interleaves with a commit; an
erase's receipt (counts only) is kept as its audit event.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F

from .. import provenance, signals
from ..models import (
    Actor,
    IdempotencyKey,
    MemoryDocument,
    MemoryEvent,
    MemoryPreference,
    MemoryProposal,
    MemoryVersion,
    Outcome,
    WriteReview,
)
from ..rules import parse_document
from .events import elapsed_ms
from .locks import lock_owner, lock_person
from .statements import vendor_statements


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
            lock_owner(cursor, vendor_statements(), user_id)
        entries = {"user": 0, "memory": 0}
        for memory_type, content in MemoryDocument.objects.filter(user_id=user_id).values_list(
                "memory_type", "content"):
            entries[memory_type] = len(parse_document(content))
        MemoryDocument.objects.filter(user_id=user_id).delete()
        # Idempotency records stay: they hold no content (a key's digest, a fingerprint, a
        # content-free outcome), and a retry after the erase must answer what the first
        # request answered rather than run, and commit, again.
        removed = {
            "profile_entries": entries["user"],
            "notes_entries": entries["memory"],
            "versions": MemoryVersion.objects.filter(user_id=user_id).delete()[0],
            "proposals": MemoryProposal.objects.filter(user_id=user_id).delete()[0],
        }
        # Nothing a running turn staged before this erase may be saved after it: its commit
        # compares the count it read with this one, under the same lock.
        # Support staff's verdicts on what the assistant saved go too (metadata, not in the receipt):
        # the figures then no longer count them, and no notice points at an erased entry.
        WriteReview.objects.filter(user_id=user_id).delete()
        if not MemoryPreference.objects.filter(user_id=user_id).update(erasures=F("erasures") + 1):
            MemoryPreference.objects.create(user_id=user_id, erasures=1)
        if also is not None:
            removed.update({str(kind): int(count) for kind, count in also(user_id).items()})
        event = MemoryEvent.objects.create(
            user_id=user_id, actor=actor, outcome=Outcome.ERASED, actions=removed,
            user_characters=0, memory_characters=0, duration_ms=elapsed_ms(started),
        )
        signals.send_after_commit(signals.memory_erased, MemoryDocument, user_id=user_id, actor=actor,
                                  removed=dict(removed))
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
        sql = vendor_statements()
        cursor.execute(sql.lock_owner, [sql.owner(user_id)])
    # The cascade's own query ran before the lock: delete what a writer wrote since.
    MemoryVersion.objects.filter(user_id=user_id).delete()
    MemoryDocument.objects.filter(user_id=user_id).delete()
    WriteReview.objects.filter(user_id=user_id).delete()
    MemoryEvent.objects.filter(user_id=user_id).delete()
    MemoryProposal.objects.filter(user_id=user_id).delete()
    MemoryPreference.objects.filter(user_id=user_id).delete()
    IdempotencyKey.objects.filter(user_id=user_id).delete()
