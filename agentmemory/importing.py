"""The memory passport's import (issue 39, part 2): what another assistant kept becomes ONE proposal.

`propose` reads what the person pasted or uploaded (`passport.read`: the
format detected, the whole import refused on a bad file, bounded in size and
count), checks each item with the rules of every write against the memory
as it is now, and stores the items that may be added as ONE pending
proposal (`proposals.create`, reason "import"): never a direct write.

One proposal per import, not one per document: the person reviews the
import as a whole, may move any item to the other document (or leave it
out) before saving, and the save is all or nothing, so an import is either
in memory as reviewed or not at all. Proposals of one document each could
be half saved, and an item moved between them would have to change proposal.

Each item:
- goes to the profile or the notes as `passport.route` says (the person's
  `routes` may say otherwise, or "skip");
- is refused, with a reason the person can read, when the rules refuse it
  (the threat scan, the secret rules, reserved text), when memory already
  holds it, when the import repeats it, or when its expiry has passed;
- the items kept are checked together too (an instruction split across two
  items), and a document they would not fit in is named in
  `over_capacity`: the review says so and offers Tidy up; the save then
  refuses (`over_capacity`) until the person makes room or moves items.

Saving (`proposals.save` with `routes`) writes each item with the import's
format in its provenance ("Imported from ChatGPT, 3 Dec"). Nothing of an
import's content is ever logged: only its format, counts and codes.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from . import expiry, passport, proposals, store
from .conf import memory_settings
from .rules import (
    TARGETS,
    MemoryValidationError,
    Operation,
    apply_batch,
    document_length,
    normalize_entry,
    normalize_expiry,
)

logger = logging.getLogger(__name__)

SKIP = proposals.SKIP
ROUTES = (*TARGETS, SKIP)
ALREADY_STORED, REPEATED, NOTHING_NEW = "already_stored", "repeated", "import_nothing_new"
# A refused item whose text is not shown back to the person (it would repeat a secret on the page).
_NOT_SHOWN = ("threat_secret",)
# The rules' capacity is checked apart: an import that does not fit is still proposed, and says so.
_UNBOUNDED: dict[str, int] = {target: 10**9 for target in TARGETS}


@dataclass(frozen=True)
class ImportItem:
    """One add of the proposal: its position there (1-based), document, text and expiry ("" none)."""

    position: int
    target: str
    content: str
    expires: str = ""


@dataclass(frozen=True)
class RefusedItem:
    """An item not proposed: its text ("" when it is not shown back) and the reason's code."""

    content: str
    code: str


@dataclass(frozen=True)
class ImportResult:
    format: str
    proposal_id: int | None  # None: nothing could be added, nothing was stored
    items: tuple[ImportItem, ...]
    refused: tuple[RefusedItem, ...]
    over_capacity: tuple[str, ...]  # documents the items would not fit in, as routed


def propose(*, user_id, data: bytes | str, routes: Mapping[int, str] | None = None) -> ImportResult:
    """Read an import and store its items as one pending proposal; return what was proposed and refused.

    `routes` maps an item's number in the import (1-based, as read) to
    "user", "memory" or "skip". Raise passport.ImportRefused (nothing
    stored) for a bad file; MemoryValidationError `invalid_route` for a
    route that is no document; store.MemoryUnavailable when memory cannot
    be read; store.UnknownUser when the account went meanwhile.
    """
    found = passport.read(data)
    routes = dict(routes or {})
    for number, target in routes.items():
        if not isinstance(number, int) or not 1 <= number <= len(found.items) or target not in ROUTES:
            raise MemoryValidationError("Each route names an item of the import and 'user', 'memory' or 'skip'.",
                                        code="invalid_route")
    today = expiry.today_for(user_id)
    snapshot = store.load_snapshot(user_id=user_id)
    stored = {entry for target in TARGETS for entry in snapshot.entries(target)}
    refused: list[RefusedItem] = []
    kept: list[Operation] = []
    seen: set[str] = set()
    for number, item in enumerate(found.items, start=1):
        target = routes.get(number, item.target)
        if target == SKIP:
            continue
        try:
            content = normalize_entry(item.content)
            expires = normalize_expiry(item.expires, today=today) if item.expires else None
        except MemoryValidationError as exc:
            refused.append(_refused(item.content, exc.code))
            continue
        if content in stored:
            refused.append(_refused(content, ALREADY_STORED))
        elif content in seen:
            refused.append(_refused(content, REPEATED))
        else:
            seen.add(content)
            kept.append(Operation(target=target, action="add", content=content, expires=expires))  # type: ignore[arg-type]  # a checked route
    refused += [_refused(item.content, REPEATED) for item in found.repeated]
    # The items together: the batch scan (an instruction split across two items) drops the item it names.
    applied = None
    while kept:
        try:
            applied = apply_batch(snapshot, kept, _UNBOUNDED, max_operations=proposals.MAX_IMPORT_OPERATIONS,
                                  today=today)
            break
        except MemoryValidationError as exc:
            if exc.position is None or not 1 <= exc.position <= len(kept):
                raise
            dropped = kept.pop(exc.position - 1)
            refused.append(_refused(dropped.content or "", exc.code))
    if not kept or applied is None:
        logger.info("memory import proposed nothing", extra={
            "user_id": user_id, "import_format": found.format, "refused_count": len(refused)})
        return ImportResult(found.format, None, (), tuple(refused), ())
    limits = memory_settings().limits
    over = tuple(target for target in TARGETS
                 if document_length(applied.snapshot.entries(target)) > limits[target]
                 and any(op.target == target for op in kept))
    proposal_id = proposals.create(user_id=user_id, operations=kept, reasons=[proposals.IMPORT] * len(kept),
                                   imported=found.format)
    logger.info("memory import proposed", extra={
        "user_id": user_id, "import_format": found.format, "operation_count": len(kept),
        "refused_count": len(refused), "over_capacity": list(over)})
    items = tuple(ImportItem(position, op.target, op.content or "", op.expires or "")
                  for position, op in enumerate(kept, start=1))
    return ImportResult(found.format, proposal_id, items, tuple(refused), over)


def over_capacity(*, user_id, proposal: proposals.Proposal, routes: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """The documents an import's proposal would not fit in now, with `routes` applied (for the review screen)."""
    routes = routes or {}
    snapshot = store.load_snapshot(user_id=user_id)
    operations = [Operation(target=routes.get(op.position, op.target), action="add", content=op.content)  # type: ignore[arg-type]
                  for op in proposal.operations if routes.get(op.position) != SKIP and op.action == "add"]
    try:
        applied = apply_batch(snapshot, operations, _UNBOUNDED, max_operations=proposals.MAX_IMPORT_OPERATIONS)
    except MemoryValidationError:
        return ()  # the save will say what no longer applies
    limits = memory_settings().limits
    return tuple(target for target in TARGETS if document_length(applied.snapshot.entries(target)) > limits[target]
                 and any(op.target == target for op in operations))


def is_import(proposal: proposals.Proposal) -> bool:
    return bool(proposal.operations) and all(op.imported and op.action == "add" for op in proposal.operations)


def _refused(content: str, code: str) -> RefusedItem:
    return RefusedItem("" if code in _NOT_SHOWN else content, code)
