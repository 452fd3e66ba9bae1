"""Changes that people and staff make to memory outside a chat turn.

Each change is a batch for `store.commit_operations` (or `store.erase`), so it
obeys the same rules and takes the same per-person lock as the agent's
commit: a page edit and a chat turn queue and keep each other's changes.
After a change, every open chat page of the person hears `memory_changed`.

The memory page names an entry by its full text, so its batches pin each
replace or remove to that exact entry (the rule the agent's commit follows:
a whole-entry match selects that entry even inside longer ones, and a pinned
entry that changed meanwhile is a conflict). A precondition checked under
the lock turns that conflict into the page's own words.

Staff reads of a person's content in the admin are recorded here too
(`record_staff_views`): an event in the person's History, never the text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils.module_loading import import_string

from . import idempotency, preferences, proposals, signals, versions
from .conf import memory_settings
from .models import Actor, MemoryEvent, Outcome
from .notify import broadcast_memory_changed_sync, broadcast_settings_changed_sync
from .rules import MemoryValidationError, Operation, Snapshot, Target, normalize_text
from .store import CommitResult, Erased, commit_operations, erase, load_snapshot


def commit_batch(
    *,
    user_id,
    operations: Sequence[Operation],
    actor: str = Actor.USER,
    precondition: Callable[[Snapshot], None] | None = None,
    idempotency_key: str | None = None,
    today: str | None = None,
) -> CommitResult:
    """Commit a batch for one person and tell their open pages if it changed.

    With `idempotency_key`, the batch commits once per key: raise
    idempotency.AlreadyCommitted (nothing written) when a commit under it
    stands; its `outcome` is `batch_outcome` of the first commit.
    """
    guard = (idempotency.CommitGuard(user_id=user_id, key=idempotency_key, describe=batch_outcome)
             if idempotency_key is not None else None)
    result = commit_operations(
        user_id=user_id, operations=list(operations), actor=actor, precondition=precondition, guard=guard,
        today=today,
    )
    if result.changed:
        broadcast_memory_changed_sync(user_id, result.snapshot, result.limits)
    return result


def batch_outcome(*, outcome, changed, **facts) -> dict:
    """What an idempotency record keeps of a batch's commit: its outcome and the documents it changed."""
    return {"outcome": str(outcome), "changed": list(changed)}


def add_entry(*, user_id, target: Target, content: str) -> CommitResult:
    """Add one entry to a person's document (a duplicate is a no-op)."""
    return commit_batch(
        user_id=user_id, operations=[Operation(target=target, action="add", content=content)]
    )


def correct_entry(*, user_id, target: Target, entry: str, content: str) -> CommitResult:
    """Replace the entry whose full text is `entry` with `content`."""
    entry = normalize_text(entry)
    return commit_batch(
        user_id=user_id,
        operations=[Operation(target=target, action="replace", match=entry, content=content, entry=entry)],
        precondition=_exact_entry(target, entry),
    )


def set_expiry(*, user_id, target: Target, entry: str, expires: str, today: str) -> CommitResult:
    """Set, change or clear ("never") the expiry of the entry whose full text is `entry`.

    `expires` is a date or a phrase the person chose, resolved against
    `today` (the person's, `expiry.today_for`) by trusted code; the rules
    check the date.
    """
    from .expiry import resolve

    entry = normalize_text(entry)
    return commit_batch(
        user_id=user_id,
        operations=[Operation(target=target, action="replace", match=entry, entry=entry,
                              expires=resolve(expires, today))],
        precondition=_exact_entry(target, entry), today=today,
    )


def remove_entry(*, user_id, target: Target, entry: str) -> CommitResult:
    """Remove the entry whose full text is `entry`."""
    entry = normalize_text(entry)
    return commit_batch(
        user_id=user_id,
        operations=[Operation(target=target, action="remove", match=entry, entry=entry)],
        precondition=_exact_entry(target, entry),
    )


def erase_memory(*, user_id, actor: str, staff=None, with_chats: bool = False) -> Erased:
    """Erase the person's memory: documents, provenance, versions, proposals (audited); return the receipt.

    `with_chats` also erases their conversations, messages and search index
    in the same transaction, through the project's AGENTMEMORY["ERASE_CHATS"]
    callable (`chats_erasable()` says whether there is one). `staff`, the
    signed-in staff member of an admin erase, is named on the event in the
    same transaction as the erase.
    """
    also = _chat_eraser() if with_chats else None
    if with_chats and also is None:
        raise ImproperlyConfigured("Erasing chats needs AGENTMEMORY['ERASE_CHATS'] (a dotted path).")
    with transaction.atomic():
        receipt = erase(user_id=user_id, actor=actor, also=also)
        if staff is not None:
            _name_staff(user_id=user_id, actor=actor, staff=staff)
    broadcast_memory_changed_sync(user_id, Snapshot(), memory_settings().limits)
    return receipt


def chats_erasable() -> bool:
    """True when the project can erase a person's chats with their memory (AGENTMEMORY["ERASE_CHATS"])."""
    return bool(memory_settings().erase_chats)


def _chat_eraser():
    path = memory_settings().erase_chats
    return import_string(path) if path else None


def set_use_memory(*, user_id, use_memory: bool, actor: str = Actor.USER, staff=None) -> bool:
    """Turn the person's "Use memory in chats" switch on or off (audited).

    Return True when it changed; every open chat page of the person then
    hears `memory_settings`. See `agentmemory.preferences`.
    """
    changed = preferences.set_use_memory(user_id=user_id, use_memory=use_memory, actor=actor, staff=staff)
    if changed:
        broadcast_settings_changed_sync(user_id, use_memory=bool(use_memory))
    return changed


def set_save_mode(*, user_id, save_mode: str, actor: str = Actor.USER) -> bool:
    """Choose "auto" or "ask" (ask before saving) for the person; return True when it changed."""
    return preferences.set_save_mode(user_id=user_id, save_mode=save_mode, actor=actor)


def save_proposal(*, user_id, proposal_id, edits=None, routes=None) -> CommitResult:
    """Save one pending proposal of the person (all or nothing) and tell their open pages.

    `routes` (an import's proposal): each item's document, or "skip".
    """
    result = proposals.save(user_id=user_id, proposal_id=proposal_id, edits=edits, routes=routes)
    if result.changed:
        broadcast_memory_changed_sync(user_id, result.snapshot, result.limits)
    return result


def discard_proposal(*, user_id, proposal_id) -> None:
    """Drop one pending proposal of the person; their open pages refresh (usage only on the wire)."""
    proposals.discard(user_id=user_id, proposal_id=proposal_id)
    broadcast_memory_changed_sync(user_id, load_snapshot(user_id=user_id), memory_settings().limits)


def undo_change(*, user_id, change_id) -> CommitResult:
    """Undo one of the person's changes (`versions.undo`) and tell their open pages."""
    result = versions.undo(user_id=user_id, change_id=change_id)
    if result.changed:
        broadcast_memory_changed_sync(user_id, result.snapshot, result.limits)
    return result


def restore_change(*, user_id, change_id) -> CommitResult:
    """Restore the documents as one of the person's changes left them (`versions.restore`); tell their pages."""
    result = versions.restore(user_id=user_id, change_id=change_id)
    if result.changed:
        broadcast_memory_changed_sync(user_id, result.snapshot, result.limits)
    return result


def record_staff_views(*, user_ids, staff, viewed: str, targets=None) -> int:
    """Record that `staff` saw these people's content in the admin; return how many people.

    One event per person (actor staff, outcome "viewed", `viewed` the kind
    of thing, `targets` the document), naming the staff member as erase
    does; no text, no search term. The admin calls it before it sends the
    page, so a read that cannot be recorded is not shown.
    """
    people = sorted({user_id for user_id in user_ids if user_id is not None})
    MemoryEvent.objects.bulk_create([
        MemoryEvent(user_id=user_id, actor=Actor.STAFF, outcome=Outcome.VIEWED, viewed=viewed,
                    targets=dict(targets or {}), staff=staff, staff_username=staff.get_username())
        for user_id in people
    ])
    signals.send_after_commit(signals.memory_viewed_by_staff, MemoryEvent, user_ids=tuple(people), staff_id=staff.pk,
                              viewed=viewed)
    return len(people)


def _name_staff(*, user_id, actor: str, staff) -> None:
    # `store.erase` wrote the event while holding the person's lock, which
    # this transaction still holds: the newest erase event of the person is it.
    event_id = (
        MemoryEvent.objects.filter(user_id=user_id, outcome=Outcome.ERASED, actor=actor)
        .order_by("-id").values_list("pk", flat=True).first()
    )
    MemoryEvent.objects.filter(pk=event_id).update(  # type: ignore[misc]  # None (no erase) updates nothing
        staff=staff, staff_username=staff.get_username()
    )


def _exact_entry(target: str, entry: str) -> Callable[[Snapshot], None]:
    def check(current: Snapshot) -> None:
        entries = current.entries(target)
        if entry not in entries:
            raise MemoryValidationError(
                "This entry was changed or removed since the page was loaded; nothing was saved. "
                "Reload the page to see the current memory.",
                code="entry_changed", position=1, target=target,
            )

    return check
