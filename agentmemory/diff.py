"""What one change did to a document, entry by entry, and the batches that undo or restore it.

Pure functions over entry tuples, like `rules`: no Django, no database.

`entry_changes(before, after)` lines the two entry lists up (difflib's
matching, so an entry edited in place reads as "changed", not as one
removed and one added) and returns what was added, removed and changed.

`operations_towards(target, current, wanted)` is the batch that turns
`current` into `wanted` with pinned operations only: each replace or remove
names the exact entry it expects (`Operation.entry`), so when the batch is
reapplied under the person's lock to memory that changed meanwhile, an entry
that changed since is never overwritten; the commit refuses the whole batch
as a `conflict` instead. Adds append, so an entry put back by an undo comes
back at the end of its document; a restore that must also put entries back
in their order (`exact_order`) rewrites the document.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from .rules import Action, Operation, Snapshot, Target, apply_operations

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


@dataclass(frozen=True)
class EntryChange:
    """One entry's change: `added` (after only), `removed` (before only) or `changed` (before -> after)."""

    kind: str
    before: str | None = None
    after: str | None = None


def entry_changes(before: Sequence[str], after: Sequence[str]) -> tuple[EntryChange, ...]:
    """Return what turned `before` into `after`, in document order; () when they are equal."""
    changes: list[EntryChange] = []
    matcher = SequenceMatcher(None, list(before), list(after), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old, new = list(before[i1:i2]), list(after[j1:j2])
        paired = min(len(old), len(new)) if tag == "replace" else 0
        changes.extend(EntryChange(CHANGED, old[k], new[k]) for k in range(paired))
        changes.extend(EntryChange(REMOVED, before=entry) for entry in old[paired:])
        changes.extend(EntryChange(ADDED, after=entry) for entry in new[paired:])
    return tuple(changes)


def operations_towards(
    target: Target, current: Sequence[str], wanted: Sequence[str], *, exact_order: bool = False
) -> list[Operation]:
    """Return pinned operations that turn `current` into `wanted` ([] when they hold the same entries).

    Removes come first, then replaces, then adds, so no step ever makes two
    entries equal on the way. With `exact_order`, when those operations
    would leave the entries in another order than `wanted` (an entry put
    back lands at the end), the batch removes every current entry and adds
    `wanted` in its order instead: the same entries, every one pinned.
    """
    changes = entry_changes(current, wanted)
    removes = [_pinned(target, "remove", change.before) for change in changes if change.kind == REMOVED]
    replaces = [_pinned(target, "replace", change.before, change.after) for change in changes if change.kind == CHANGED]
    adds = [Operation(target=target, action="add", content=change.after) for change in changes if change.kind == ADDED]
    operations = removes + replaces + adds
    if not exact_order or not operations or _result(target, current, operations) == tuple(wanted):
        return operations
    return ([_pinned(target, "remove", entry) for entry in current]
            + [Operation(target=target, action="add", content=entry) for entry in wanted])


def _pinned(target: Target, action: Action, entry: str | None, content: str | None = None) -> Operation:
    return Operation(target=target, action=action, match=entry, content=content, entry=entry)


def _result(target: Target, current: Sequence[str], operations: Sequence[Operation]) -> tuple[str, ...] | None:
    """The entries the batch leaves (None when the rules refuse it: the commit will say why)."""
    try:
        after = apply_operations(Snapshot(**{target: tuple(current)}), operations,  # type: ignore[arg-type]  # user or memory {"user": 10**9, "memory": 10**9},
                                 max_operations=len(operations))
    except ValueError:
        return None
    return after.entries(target)
