"""Changes that people and staff make to memory outside a chat turn.

Each change is a batch for `store.commit_operations` (or `store.erase`), so it
obeys the same rules and takes the same per-person lock as the agent's
commit: a page edit and a chat turn queue and keep each other's changes.
After a change, every open chat page of the person hears `memory_changed`.

The memory page names an entry by its full text. Substring matching alone
could then pick a longer entry that contains it (after the entry itself was
changed elsewhere), so the page's batches carry a precondition the store
checks under the lock: the exact entry must still be there and be the only
one containing that text.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from .conf import memory_settings
from .models import Actor
from .notify import broadcast_memory_changed_sync
from .rules import MemoryValidationError, Operation, Snapshot, normalize_text
from .store import CommitResult, commit_operations, erase


def commit_batch(
    *,
    user_id,
    operations: Sequence[Operation],
    actor: str = Actor.USER,
    precondition: Callable[[Snapshot], None] | None = None,
) -> CommitResult:
    """Commit a batch for one person and tell their open pages if it changed."""
    result = commit_operations(
        user_id=user_id, operations=list(operations), actor=actor, precondition=precondition
    )
    if result.changed:
        broadcast_memory_changed_sync(user_id, result.snapshot, result.limits)
    return result


def add_entry(*, user_id, target: str, content: str) -> CommitResult:
    """Add one entry to a person's document (a duplicate is a no-op)."""
    return commit_batch(
        user_id=user_id, operations=[Operation(target=target, action="add", content=content)]
    )


def correct_entry(*, user_id, target: str, entry: str, content: str) -> CommitResult:
    """Replace the entry whose full text is `entry` with `content`."""
    entry = normalize_text(entry)
    return commit_batch(
        user_id=user_id,
        operations=[Operation(target=target, action="replace", match=entry, content=content)],
        precondition=_exact_entry(target, entry),
    )


def remove_entry(*, user_id, target: str, entry: str) -> CommitResult:
    """Remove the entry whose full text is `entry`."""
    entry = normalize_text(entry)
    return commit_batch(
        user_id=user_id,
        operations=[Operation(target=target, action="remove", match=entry)],
        precondition=_exact_entry(target, entry),
    )


def erase_memory(*, user_id, actor: str) -> int:
    """Delete both documents of one person (audited); return the rows removed."""
    deleted = erase(user_id=user_id, actor=actor)
    broadcast_memory_changed_sync(user_id, Snapshot(), memory_settings().limits)
    return deleted


def _exact_entry(target: str, entry: str) -> Callable[[Snapshot], None]:
    def check(current: Snapshot) -> None:
        entries = current.entries(target)
        if entry not in entries:
            raise MemoryValidationError(
                "This entry was changed or removed since the page was loaded; nothing was saved. "
                "Reload the page to see the current memory.",
                code="entry_changed", position=1, target=target,
            )
        if sum(entry in other for other in entries) > 1:
            raise MemoryValidationError(
                "This entry's text is also part of a longer entry, so it cannot be picked out "
                "on its own; nothing was saved. Correct or remove the longer entry first.",
                code="entry_not_unique", position=1, target=target,
            )

    return check
