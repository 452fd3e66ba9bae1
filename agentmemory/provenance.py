"""Where each stored entry came from: "why do you remember this?".

Each document keeps, next to its entries, one source per entry, in the same
order: who last set the entry's text (the assistant in a conversation and
turn, the person, support staff, the system) and when. A source holds no
content and no hash of content, only ids, a role and a time.

Alignment is by the entry's text within one document, computed in memory
and never stored: entries of a document are unique (an add of an existing
entry is a no-op, a replace into another entry's text is refused), so an
entry whose text survives a batch keeps its source and every entry whose
text is new (added, or written by a replace or a consolidation) gets the
batch's source. That holds for any ordered batch, and again when the commit
reapplies the batch under the lock to the latest memory. Removed entries
take their source with them.

Pure functions only; `agentmemory.store` reads and writes the sources with
the documents.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .rules import TARGETS, Snapshot

AGENT, USER, STAFF, SYSTEM = "agent", "user", "staff", "system"
ROLES = (AGENT, USER, STAFF, SYSTEM)


@dataclass(frozen=True)
class Source:
    """Who last set an entry, and when; ids only."""

    by: str
    at: str  # ISO 8601
    conversation_id: int | None = None
    turn_id: str = ""
    # Put back by an undo or a restore of an earlier version ("Restored by you").
    restored: bool = False

    def as_json(self) -> dict:
        data: dict = {"by": self.by, "at": self.at}
        if self.conversation_id is not None:
            data["conversation_id"] = self.conversation_id
        if self.turn_id:
            data["turn_id"] = self.turn_id
        if self.restored:
            data["restored"] = True
        return data

    @classmethod
    def from_json(cls, data) -> Source | None:
        if not isinstance(data, Mapping) or data.get("by") not in ROLES or not isinstance(data.get("at"), str):
            return None
        conversation = data.get("conversation_id")
        return cls(
            by=data["by"], at=data["at"],
            conversation_id=conversation if isinstance(conversation, int) and not isinstance(conversation, bool)
            else None,
            turn_id=str(data.get("turn_id") or "")[:64],
            restored=data.get("restored") is True,
        )


def source(by: str, at: datetime, *, conversation_id: int | None = None, turn_id: str = "",
           restored: bool = False) -> Source:
    if by not in ROLES:
        raise ValueError(f"unknown source role {by!r}")
    return Source(by=by, at=at.isoformat(), conversation_id=conversation_id, turn_id=turn_id[:64], restored=restored)


Sources = Mapping[str, Sequence["Source | None"]]


def aligned(entries: Sequence[str], stored: Sequence | None) -> tuple[Source | None, ...]:
    """Return one source per entry from a stored list (None where unknown, e.g. rows older than provenance)."""
    stored = list(stored or [])
    if len(stored) != len(entries):
        return (None,) * len(entries)  # never guess which source belongs to which entry
    return tuple(item if isinstance(item, Source) or item is None else Source.from_json(item) for item in stored)


def carry(before: Snapshot, before_sources: Sources, after: Snapshot, new: Source) -> dict[str, tuple]:
    """Return the sources of `after`'s entries: kept where the text survived, `new` where it is new."""
    result = {}
    for target in TARGETS:
        old_entries = before.entries(target)
        old = dict(zip(old_entries, aligned(old_entries, before_sources.get(target))))
        result[target] = tuple(old[entry] if entry in old else new for entry in after.entries(target))
    return result


def to_json(sources: Sequence[Source | None]) -> list:
    return [item.as_json() if item is not None else None for item in sources]


def without_conversation(sources: Sequence[Source | None], conversation_id: int) -> tuple[tuple, bool]:
    """Return the sources with links to `conversation_id` dropped (the entries stay), and whether any changed."""
    changed = False
    kept = []
    for item in sources:
        if item is not None and item.conversation_id == conversation_id:
            item = Source(by=item.by, at=item.at, restored=item.restored)
            changed = True
        kept.append(item)
    return tuple(kept), changed
