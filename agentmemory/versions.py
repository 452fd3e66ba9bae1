"""A person's memory versions: what each change did, and undoing or restoring it.

Every committed change keeps, per document it changed, what the document
held before and what the change left (`MemoryVersion`, written by
`agentmemory.store` in the change's own transaction). A change is named by
its audit event's id (`change_id`), which the chat's "Memory saved" line,
the memory page's History and the API use.

- `changes` / `change` read them, as entry-by-entry differences
  (`diff.entry_changes`).
- `undo` commits the change's inverse, `restore` brings back the documents
  as that change left them. Both are pinned batches (`diff`) through the
  same locked commit as every other change, so an entry that changed since
  is never overwritten: the batch is refused as a `conflict` and nothing of
  it is applied. Capacity and the threat scan hold as for any edit. Each is
  itself a change (provenance "Restored by you", kind undo or restore), so
  it can be undone in turn. An undo or restore is the person's own edit:
  like every change on the memory page it works whatever the "Use memory
  in chats" switch says (the switch governs the assistant).
- `prune` deletes versions past AGENTMEMORY VERSIONS_KEPT changes or
  VERSION_RETENTION_DAYS, in batches (the `memory_prune_versions` command;
  each commit also prunes its own person's).

Versions are memory content: never logged, traced or put in an event.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from . import provenance
from .conf import memory_settings
from .diff import EntryChange, entry_changes, operations_towards
from .expiry import today_for
from .models import Actor, ChangeKind, MemoryEvent, MemoryVersion
from .rules import CLEAR_EXPIRY, TARGETS, MemoryValidationError, Operation, Snapshot, parse_document
from .store import CommitResult, commit_operations, load_snapshot, lock_person

PRUNE_BATCH = 1000
# A restore may rewrite a whole document: every entry removed and added back.
MAX_DERIVED_OPERATIONS = 1000


class ChangeGone(LookupError):
    """No kept change of this person has this id (pruned, erased, never a change, or not theirs)."""


@dataclass(frozen=True)
class DocumentChange:
    """One document's version in a change: its entries before and after, and what differs."""

    target: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    before_sources: tuple
    entries: tuple[EntryChange, ...]
    after_sources: tuple = ()
    # Entries in both before and after whose expiry the change set, changed or cleared: (entry, before, after),
    # each date ISO or "".
    expiry_changes: tuple[tuple[str, str, str], ...] = ()

    @property
    def before_expiry(self) -> dict[str, str]:
        return provenance.expiries(self.before, self.before_sources)

    @property
    def after_expiry(self) -> dict[str, str]:
        return provenance.expiries(self.after, self.after_sources)


@dataclass(frozen=True)
class Change:
    """One committed change of a person's memory: who made it, where from, and what it did to each document."""

    id: int
    created_at: datetime
    actor: str
    kind: str
    by: str
    conversation_id: int | None
    turn_id: str
    documents: tuple[DocumentChange, ...]

    def document(self, target: str) -> DocumentChange | None:
        return next((document for document in self.documents if document.target == target), None)


def changes(*, user_id, event_ids: Iterable[int] | None = None) -> list[Change]:
    """Return the person's kept changes, newest first (only those of `event_ids` when given)."""
    versions = (
        MemoryVersion.objects.filter(user_id=user_id).select_related("event").order_by("-event_id", "memory_type")
    )
    if event_ids is not None:
        versions = versions.filter(event_id__in=list(event_ids))
    grouped: dict[int, list[MemoryVersion]] = {}
    for version in versions:
        grouped.setdefault(version.event_id, []).append(version)
    return [_change(rows) for rows in grouped.values()]


def change(*, user_id, change_id) -> Change:
    """Return one kept change of the person; raise ChangeGone."""
    found = changes(user_id=user_id, event_ids=[_id(change_id)])
    if not found:
        raise ChangeGone("No kept change of yours has this id.")
    return found[0]


def undo(*, user_id, change_id) -> CommitResult:
    """Commit the inverse of one change, for the person; raise ChangeGone or MemoryValidationError.

    The entries the change wrote must still be there as it wrote them
    (pinned); entries it removed come back at the end of their document.
    The change is read under the person's lock, in the commit's
    transaction: after an erase there is no change to undo (ChangeGone).
    """
    def derive():
        found = change(user_id=user_id, change_id=change_id)
        current = load_snapshot(user_id=user_id)
        today = today_for(user_id)
        return [op for document in found.documents
                for op in _with_expiry(operations_towards(document.target, document.after, document.before),
                                       document, current, document.before_expiry, today,
                                       touched=_touched(document))]

    result = _locked_commit(user_id, derive, ChangeKind.UNDO, nothing="nothing_to_undo")
    if not result.changed:  # e.g. a removed entry that is already back: nothing to undo (409, as documented)
        raise MemoryValidationError("Memory already holds what this would bring back.", code="nothing_to_undo")
    return result


def restore(*, user_id, change_id) -> CommitResult:
    """Bring back the documents this change touched as it left them, in order; raise ChangeGone or
    MemoryValidationError (a `conflict` when the memory changed between the read and the commit)."""
    def derive():
        found = change(user_id=user_id, change_id=change_id)
        current = load_snapshot(user_id=user_id)
        today = today_for(user_id)
        return [op for document in found.documents
                for op in _with_expiry(operations_towards(document.target, current.entries(document.target),
                                                          document.after, exact_order=True),
                                       document, current, document.after_expiry, today,
                                       touched=set(document.after))]

    return _locked_commit(user_id, derive, ChangeKind.RESTORE, nothing="already_restored")


def _touched(document: DocumentChange) -> set[str]:
    """The entries of `before` whose expiry the change set, changed or cleared (an undo puts it back)."""
    return {entry for entry, _before, _after in document.expiry_changes}


def _with_expiry(operations: list[Operation], document: DocumentChange, current: Snapshot,
                 wanted: dict[str, str], today: str, *, touched: set[str]) -> list[Operation]:
    """The text batch with each entry it writes given its wanted expiry, plus expiry-only replaces.

    An entry brought back whose date has passed (an undo of its removal on
    expiry) comes back without one: undoing the expiry keeps the entry.
    """
    def date_of(entry: str) -> str:
        date = wanted.get(entry, "")
        return date if date and date >= today else ""

    result = []
    written = set()
    for op in operations:
        if op.action == "add" and op.content is not None:
            written.add(op.content)
            op = replace(op, expires=date_of(op.content) or None)
        elif op.action == "replace" and op.content is not None:
            written.add(op.content)
            op = replace(op, expires=date_of(op.content) or CLEAR_EXPIRY)
        result.append(op)
    removed = {op.entry for op in operations if op.action == "remove"}
    have = current.expiries(document.target)
    for entry in current.entries(document.target):
        if entry in touched and entry not in written and entry not in removed and have.get(entry, "") != date_of(entry):
            result.append(Operation(target=document.target, action="replace", match=entry, entry=entry,  # type: ignore[arg-type]
                                    expires=date_of(entry) or CLEAR_EXPIRY))
    return result


def prune(*, now: datetime | None = None) -> int:
    """Delete versions past the retention and past each person's VERSIONS_KEPT changes; return how many."""
    config = memory_settings()
    now = now or timezone.now()
    cutoff = now - timedelta(days=config.version_retention_days)
    total = _delete_in_batches(MemoryVersion.objects.filter(created_at__lt=cutoff))
    kept = max(1, config.versions_kept)
    crowded = (MemoryVersion.objects.values("user_id").annotate(changes=Count("event_id", distinct=True))
               .filter(changes__gt=kept).values_list("user_id", flat=True))
    for user_id in crowded.iterator():
        newest = (MemoryVersion.objects.filter(user_id=user_id).values_list("event_id", flat=True)
                  .distinct().order_by("-event_id"))
        oldest_kept = list(newest[kept - 1:kept])
        if oldest_kept:
            total += _delete_in_batches(MemoryVersion.objects.filter(user_id=user_id, event_id__lt=oldest_kept[0]))
    return total


def _delete_in_batches(queryset) -> int:
    total = 0
    while True:
        ids = list(queryset.values_list("pk", flat=True)[:PRUNE_BATCH])
        if not ids:
            return total
        total += MemoryVersion.objects.filter(pk__in=ids).delete()[0]


def _locked_commit(user_id, derive, kind: str, *, nothing: str) -> CommitResult:
    """Read the change and commit what `derive()` makes of it in one transaction, under the person's lock.

    An erase takes the same lock, so it either came first (the change is
    gone: ChangeGone) or waits for this commit and erases its result too:
    never erased content brought back. A refusal keeps its audit event
    (the commit's savepoint rolls back, the event stays) and is raised after.
    """
    refused: MemoryValidationError | None = None
    with transaction.atomic():
        lock_person(user_id=user_id)
        operations = derive()
        try:
            result = _commit(user_id, operations, kind, nothing=nothing)
        except MemoryValidationError as exc:
            refused = exc
    if refused is not None:
        raise refused
    return result


def _commit(user_id, operations, kind: str, *, nothing: str) -> CommitResult:
    if not operations:
        raise MemoryValidationError("Memory already holds what this would bring back.", code=nothing)
    return commit_operations(
        user_id=user_id, operations=operations, actor=Actor.USER,
        origin={"by": provenance.USER, "restored": True, "kind": kind},
        max_operations=MAX_DERIVED_OPERATIONS,
    )


def _id(value) -> int:
    text = str(value)
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise ChangeGone("No kept change of yours has this id.")
    return int(text)


def _change(rows: list[MemoryVersion]) -> Change:
    event: MemoryEvent = rows[0].event
    documents = []
    for row in sorted(rows, key=lambda row: TARGETS.index(row.memory_type)):
        before, after = parse_document(row.before), parse_document(row.after)
        before_sources = provenance.aligned(before, row.before_provenance)
        after_sources = provenance.aligned(after, row.after_provenance) if row.after_provenance is not None else ()
        was, now = provenance.expiries(before, before_sources), provenance.expiries(after, after_sources)
        documents.append(DocumentChange(
            target=row.memory_type, before=before, after=after,
            before_sources=before_sources,
            entries=entry_changes(before, after),
            after_sources=after_sources,
            expiry_changes=tuple((entry, was.get(entry, ""), now.get(entry, "")) for entry in after
                                 if entry in before and row.after_provenance is not None
                                 and was.get(entry, "") != now.get(entry, "")),
        ))
    first = rows[0]
    return Change(
        id=first.event_id, created_at=first.created_at, actor=event.actor, kind=first.kind, by=first.by,
        conversation_id=first.conversation_id, turn_id=first.turn_id, documents=tuple(documents),
    )
