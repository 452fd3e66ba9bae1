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

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from .rules import ISO_DATE, TARGETS, Snapshot, with_expiry

AGENT, USER, STAFF, SYSTEM, EXPIRY = "agent", "user", "staff", "system", "expiry"
ROLES = (AGENT, USER, STAFF, SYSTEM, EXPIRY)
# The most sources one tidied line keeps of the entries it came from (the oldest first).
MAX_MERGED = 20
# An imported entry's format code (`passport.FORMATS`): a short name, never content.
_IMPORTED = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True)
class Source:
    """Who last set an entry, and when; ids only."""

    by: str
    at: str  # ISO 8601
    conversation_id: int | None = None
    turn_id: str = ""
    # Put back by an undo or a restore of an earlier version ("Restored by you").
    restored: bool = False
    # Written by Tidy up from one or more entries, whose sources `merged` keeps (one level deep).
    tidied: bool = False
    merged: tuple[Source, ...] = ()
    # The entry's last day (ISO date, the person's time zone); "" for an entry that never expires.
    # Metadata of the entry, not of who wrote it: set by the commit from the snapshot's expiries.
    expires: str = ""
    # Brought in by the person's import (`agentmemory.importing`): the format's code ("chatgpt", "mem0", ...).
    imported: str = ""

    def as_json(self) -> dict:
        data: dict = {"by": self.by, "at": self.at}
        if self.conversation_id is not None:
            data["conversation_id"] = self.conversation_id
        if self.turn_id:
            data["turn_id"] = self.turn_id
        if self.restored:
            data["restored"] = True
        if self.tidied:
            data["tidied"] = True
        if self.merged:
            data["merged"] = [item.as_json() for item in self.merged]
        if self.expires:
            data["expires"] = self.expires
        if self.imported:
            data["imported"] = self.imported
        return data

    @classmethod
    def from_json(cls, data, *, nested: bool = True) -> Source | None:
        if not isinstance(data, Mapping) or data.get("by") not in ROLES or not isinstance(data.get("at"), str):
            return None
        conversation = data.get("conversation_id")
        merged = data.get("merged") if nested else None
        return cls(
            by=data["by"], at=data["at"],
            conversation_id=conversation if isinstance(conversation, int) and not isinstance(conversation, bool)
            else None,
            turn_id=str(data.get("turn_id") or "")[:64],
            restored=data.get("restored") is True,
            tidied=data.get("tidied") is True,
            merged=tuple(item for item in (cls.from_json(one, nested=False) for one in merged[:MAX_MERGED])
                         if item is not None) if isinstance(merged, list) else (),
            expires=expires if nested and isinstance(expires := data.get("expires"), str)
            and ISO_DATE.fullmatch(expires) else "",
            imported=imported if isinstance(imported := data.get("imported"), str)
            and _IMPORTED.fullmatch(imported) else "",
        )

    def origins(self) -> tuple[Source, ...]:
        """The sources this one stands for: those it merged, else itself."""
        return self.merged or (self,)


def source(by: str, at: datetime, *, conversation_id: int | None = None, turn_id: str = "",
           restored: bool = False, imported: str = "") -> Source:
    if by not in ROLES:
        raise ValueError(f"unknown source role {by!r}")
    return Source(by=by, at=at.isoformat(), conversation_id=conversation_id, turn_id=turn_id[:64], restored=restored,
                  imported=imported if _IMPORTED.fullmatch(imported or "") else "")


Sources = Mapping[str, Sequence["Source | None"]]


def aligned(entries: Sequence[str], stored: Sequence | None) -> tuple[Source | None, ...]:
    """Return one source per entry from a stored list (None where unknown, e.g. rows older than provenance)."""
    stored = list(stored or [])
    if len(stored) != len(entries):
        return (None,) * len(entries)  # never guess which source belongs to which entry
    return tuple(item if isinstance(item, Source) or item is None else Source.from_json(item) for item in stored)


Merges = Mapping[str, Mapping[str, Sequence[str]]]


def carry(before: Snapshot, before_sources: Sources, after: Snapshot, new: Source,
          merges: Merges | None = None, imported: Mapping[str, Mapping] | None = None) -> dict[str, tuple]:
    """Return the sources of `after`'s entries: kept where the text survived, `new` where it is new.

    `merges` (Tidy up) names, per document, lines of `after` and the entries
    of `before` each came from: such a line gets `new`, marked tidied, with
    the sources of all those entries (a line that is one entry unchanged
    keeps that entry's source). `imported` ({entry: {"from", "at"}}, an
    import of our own export) names new entries imported before: such an
    entry gets `new` with that format and time, when both are well formed
    and the time is not after `new`'s.
    """
    imported = imported or {}
    result: dict[str, tuple[Any, ...]] = {}
    for target in TARGETS:
        old_entries = before.entries(target)
        old = dict(zip(old_entries, aligned(old_entries, before_sources.get(target))))
        tidied = (merges or {}).get(target) or {}
        result[target] = tuple(
            _merged(entry, tidied[entry], old, new) if entry in tidied
            else old[entry] if entry in old else _first_imported(new, imported.get(entry))
            for entry in after.entries(target)
        )
    return result


def _merged(entry: str, came_from: Sequence[str], old: Mapping, new: Source) -> Source | None:
    """The source of a tidied line: `new`, tidied, keeping the sources of the entries it came from."""
    came_from = [text for text in dict.fromkeys(came_from) if text in old]
    if came_from == [entry]:
        return old[entry]  # one entry, its text unchanged: nothing was tidied
    origins: list[Source] = []
    for text in came_from:
        source = old[text]
        for origin in source.origins() if source is not None else ():
            if origin not in origins:
                origins.append(Source(by=origin.by, at=origin.at, conversation_id=origin.conversation_id,
                                      turn_id=origin.turn_id, restored=origin.restored, imported=origin.imported))
    return Source(by=new.by, at=new.at, conversation_id=new.conversation_id, turn_id=new.turn_id,
                  restored=new.restored, tidied=True, merged=tuple(origins[:MAX_MERGED]))


def _first_imported(new: Source, earlier) -> Source:
    if not isinstance(earlier, Mapping) or not new.imported:
        return new
    code, at = earlier.get("from"), earlier.get("at")
    if not (isinstance(code, str) and _IMPORTED.fullmatch(code) and isinstance(at, str)):
        return new
    try:
        when = datetime.fromisoformat(at)
        if when.tzinfo is None or when > datetime.fromisoformat(new.at):
            return new  # a time to come, or one without its zone, is no import that happened
    except (TypeError, ValueError):
        return new
    return replace(new, imported=code, at=when.isoformat())


def expiries(entries: Sequence[str], sources: Sequence[Source | None]) -> dict[str, str]:
    """Return `{entry: date}` for the entries whose source says they expire."""
    return {entry: item.expires for entry, item in zip(entries, sources) if item is not None and item.expires}


def snapshot_with_expiry(snapshot: Snapshot, sources: Sources) -> Snapshot:
    """Return `snapshot` with its entries' expiries read from their sources."""
    found: dict[str, dict[str, str]] = {
        target: expiries(snapshot.entries(target), aligned(snapshot.entries(target), sources.get(target)))
        for target in TARGETS}
    if not snapshot.expiry and not any(found.values()):
        return snapshot  # the common case: nothing expires (every commit and every turn's read)
    return with_expiry(snapshot, found)


def set_expiry(sources: Mapping[str, Sequence[Source | None]], snapshot: Snapshot, new: Source) -> dict[str, tuple]:
    """Return the sources with each entry's `expires` as `snapshot` says (an unknown source becomes `new`)."""
    result: dict[str, tuple] = {}
    if not snapshot.expiry and not any(item is not None and item.expires
                                       for target in TARGETS for item in sources.get(target) or ()):
        # Nothing expires, as usual: the same sources, one per entry, as the loop below would leave them.
        return {target: tuple(sources.get(target) or ())[:len(snapshot.entries(target))] for target in TARGETS}
    for target in TARGETS:
        wanted = snapshot.expiries(target)
        kept = []
        for entry, item in zip(snapshot.entries(target), sources.get(target) or ()):
            date = wanted.get(entry, "")
            if item is None and date:
                item = new
            if item is not None and item.expires != date:
                item = replace(item, expires=date)
            kept.append(item)
        result[target] = tuple(kept)
    return result


def to_json(sources: Sequence[Source | None]) -> list:
    return [item.as_json() if item is not None else None for item in sources]


def without_conversation(sources: Sequence[Source | None], conversation_id: int) -> tuple[tuple, bool]:
    """Return the sources with links to `conversation_id` dropped (the entries stay), and whether any changed."""
    changed = False
    kept = []
    for item in sources:
        if item is not None:
            unlinked = _unlinked(item, conversation_id)
            changed = changed or unlinked != item
            item = unlinked
        kept.append(item)
    return tuple(kept), changed


def _unlinked(item: Source, conversation_id: int) -> Source:
    merged = tuple(_unlinked(origin, conversation_id) for origin in item.merged)
    if item.conversation_id == conversation_id:
        return Source(by=item.by, at=item.at, restored=item.restored, tidied=item.tidied, merged=merged,
                      expires=item.expires, imported=item.imported)
    return item if merged == item.merged else replace(item, merged=merged)
