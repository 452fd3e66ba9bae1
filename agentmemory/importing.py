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
  (the threat scan, the secret rules, reserved text), when it holds a value
  the import's text presents as a secret (a password labelled on the line
  before, or in a heading: `threats.secret_values` over `passport`'s
  passages), when memory already holds it, when the import repeats it, or
  when its expiry has passed; a refused item's text is never sent back when
  any secret rule fires on it, whatever the reason given;
- is read with the item its document ends with so far (an instruction
  split across two items, `threats.pair_category`): each item is scanned
  once and each pair read once, so an import costs time linear in its
  length; more than `MAX_SPLIT_PAIRS` such pairs refuse the import whole
  (`import_split_phrases`), since an exported file holds none;
- a document the kept items would not fit in is named in `over_capacity`
  (lengths only): the review says so and offers Tidy up; the save then
  refuses (`over_capacity`) until the person makes room or moves items.

The proposal is stored under the erase fence a turn uses: an erase after
the import read memory refuses it (`erased`), so nothing read before an
erase is proposed after it.

Saving (`proposals.save` with `routes`) writes each item with the import's
format in its provenance ("Imported from ChatGPT, 3 Dec"). Nothing of an
import's content is ever logged: only its format, counts and codes.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from . import expiry, gate, passport, proposals, store
from .conf import memory_settings
from .rules import (
    TARGETS,
    MemoryValidationError,
    Operation,
    check_batch_size,
    document_length,
    normalize_entry,
    normalize_expiry,
)
from .threats import is_blocked, pair_category, secret_values

logger = logging.getLogger(__name__)

SKIP = proposals.SKIP
ROUTES = (*TARGETS, SKIP)
ALREADY_STORED, REPEATED, NOTHING_NEW = "already_stored", "repeated", "import_nothing_new"
SECRET = "threat_secret"
# The page's review of an import, in the person's session (`agentmemory.views`); an erase drops it (page and API).
REVIEW_SESSION_KEY = "agentmemory.import_review"
# More pairs of items than this read as one instruction, and the import is refused whole: a file someone
# exported holds none, and reading on would only spend the worker's time for whoever crafted it.
MAX_SPLIT_PAIRS = 3
SPLIT_REFUSED = "import_split_phrases"
# A refused item whose text is not shown back to the person (it would repeat a secret on the page).
_NOT_SHOWN = (SECRET,)


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
    # The erase fence a turn uses: an erase after this read refuses the proposal (`erased`), so no import
    # read before an erase is stored after it.
    erasures = store.erase_count(user_id=user_id)
    today = expiry.today_for(user_id)
    snapshot = store.load_snapshot(user_id=user_id)
    stored = {entry for target in TARGETS for entry in snapshot.entries(target)}
    presented = _presented_secrets(found.passages)
    refused: list[RefusedItem] = []
    kept: list[Operation] = []
    seen: set[str] = set()
    earlier: dict[str, tuple[str, str]] = {}  # our own export's entries imported before: from where, when
    # The entry each document ends with so far: an item is read with it (an instruction split across two
    # items), once, as it is kept. A stored entry the scan now blocks is not read with its neighbour.
    last: dict[str, str | None] = {target: _readable_last(snapshot.entries(target)) for target in TARGETS}
    split = 0
    for number, item in enumerate(found.items, start=1):
        target = routes.get(number, item.target)
        if target == SKIP:
            continue
        try:
            content = normalize_entry(item.content)  # the threat scan: once an item
            expires = normalize_expiry(item.expires, today=today) if item.expires else None
        except MemoryValidationError as exc:
            refused.append(_refused(item.content, exc.code, presented))
            continue
        if presented is not None and gate.secret_in(content, presented):
            refused.append(_refused(content, SECRET, presented))
        elif content in stored:
            refused.append(_refused(content, ALREADY_STORED, presented))
        elif content in seen:
            refused.append(_refused(content, REPEATED, presented))
        elif (before := last[target]) is not None and (category := pair_category(before, content)) is not None:
            refused.append(_refused(content, f"threat_{category}", presented))
            split += 1
            if split > MAX_SPLIT_PAIRS:
                logger.info("memory import refused: split instructions", extra={
                    "user_id": user_id, "import_format": found.format, "split_count": split})
                raise passport.ImportRefused("The import holds more than a few instructions split across items.",
                                             code=SPLIT_REFUSED)
        else:
            seen.add(content)
            last[target] = content
            kept.append(Operation(target=target, action="add", content=content, expires=expires))  # type: ignore[arg-type]  # a checked route
            if item.imported:
                earlier[content] = (item.imported, item.at)
    refused += [_refused(item.content, REPEATED, presented) for item in found.repeated]
    if not kept:
        logger.info("memory import proposed nothing", extra={
            "user_id": user_id, "import_format": found.format, "refused_count": len(refused)})
        return ImportResult(found.format, None, (), tuple(refused), ())
    check_batch_size(len(kept), proposals.MAX_IMPORT_OPERATIONS)
    over = _over_capacity(snapshot, kept)
    proposal_id = proposals.create(user_id=user_id, operations=kept, reasons=[proposals.IMPORT] * len(kept),
                                   imported=found.format, erasures=erasures,
                                   first_imported=[earlier.get(op.content or "") for op in kept])
    logger.info("memory import proposed", extra={
        "user_id": user_id, "import_format": found.format, "operation_count": len(kept),
        "refused_count": len(refused), "over_capacity": list(over)})
    items = tuple(ImportItem(position, op.target, op.content or "", op.expires or "")
                  for position, op in enumerate(kept, start=1))
    return ImportResult(found.format, proposal_id, items, tuple(refused), over)


def over_capacity(*, user_id, proposal: proposals.Proposal, routes: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """The documents an import's proposal would not fit in now, with `routes` applied (for the review screen).

    Lengths only: the items were scanned when the import was read, and the
    save applies the rules again; a view of the review reads no item twice.
    """
    routes = routes or {}
    snapshot = store.load_snapshot(user_id=user_id)
    operations = [Operation(target=target, action="add", content=op.content)
                  for op in proposal.operations
                  if op.action == "add" and (target := routes.get(op.position, op.target)) in TARGETS]
    return _over_capacity(snapshot, operations)


def _over_capacity(snapshot, operations) -> tuple[str, ...]:
    limits = memory_settings().limits
    over = []
    for target in TARGETS:
        entries = list(snapshot.entries(target))
        present = set(entries)
        added = [op.content for op in operations if op.target == target and op.content not in present]
        if added and document_length([*entries, *dict.fromkeys(added)]) > limits[target]:
            over.append(target)
    return tuple(over)


def _readable_last(entries: tuple[str, ...]) -> str | None:
    return entries[-1] if entries and is_blocked(entries[-1]) is None else None


def _presented_secrets(passages: tuple[str, ...]) -> gate.TurnSources | None:
    """The values the import's texts present as secrets (None: none), matched in every spelling by the gate's
    own check (`gate.secret_in`, as for the model's writes)."""
    values = tuple(dict.fromkeys(value for passage in passages for value in secret_values(passage)))
    return gate.TurnSources(secrets=values) if values else None


def is_import(proposal: proposals.Proposal) -> bool:
    return bool(proposal.operations) and all(op.imported and op.action == "add" for op in proposal.operations)


def _refused(content: str, code: str, presented: gate.TurnSources | None = None) -> RefusedItem:
    """A refused item; its text is not sent back when any secret rule fires on it, whatever the reason given."""
    secret = (code in _NOT_SHOWN or secret_values(content)
              or (presented is not None and gate.secret_in(content, presented)))
    return RefusedItem("" if secret else content, code)
