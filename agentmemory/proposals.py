"""Ask before saving: a finished turn's change as a proposal the person saves or discards.

In "ask" mode (`preferences.save_mode`) the memory turn does not commit its
staged batch: `create` stores it as a `MemoryProposal`, at the same point
and under the same conditions as the commit (only after a complete answer,
under the person's lock, refused for a closed account or memory switched
off, rolled back by a cancel). A failed, cancelled or disconnected turn
never reaches that point, so it proposes nothing.

`save` commits a proposal through the same locked path as every other
change (`store.commit_operations`), with the same stale-match rule: its
replace and remove operations are pinned to the entries they matched, so if
the memory changed so that it no longer applies, the save is rejected with
the rule's code and nothing of it is written. Each proposal is
all-or-nothing; a person may change the text of an `add` before saving.
`discard` drops one; `expire` deletes those past their `expires_at` (the
`memory_expire_proposals` command, safe to run from cron).

A proposal is memory content: never logged or traced; erased with memory,
exported with it, and shown to staff only with the content permission.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from . import signals
from .conf import memory_settings
from .models import Actor, MemoryEvent, MemoryProposal, Outcome
from .rules import TARGETS, MemoryValidationError, Operation, Snapshot, normalize_text, summarize, validate_capacity
from .store import CommitCancelled, CommitResult, commit_operations, is_retryable, lock_person
from .store.events import agent_labels

# How many expired proposals one DELETE statement removes.
EXPIRE_BATCH = 1000
# The most operations an import's proposal holds (`passport.MAX_IMPORT_ITEMS`: checked in the tests).
MAX_IMPORT_OPERATIONS = 200
# The reason of a Tidy up's operations (`agentmemory.tidy`): its lines can be edited before saving.
TIDY = "tidy"
# The reason of an import's operations (`agentmemory.importing`): adds the person may route to the
# other document, or leave out ("skip"), before saving.
IMPORT = "import"
SKIP = "skip"


class ProposalGone(LookupError):
    """No pending proposal of this person has this id (saved, discarded, expired, or not theirs)."""


@dataclass(frozen=True)
class ProposedOperation:
    """One operation of a proposal, as the person reviews it (`entry`: the entry it changes)."""

    position: int
    target: str
    action: str
    content: str | None
    entry: str | None
    # Why trusted code asked instead of saving (`agentmemory.gate`: "transient",
    # "unasked_edit", ...); "" for a proposal made because the person asks first.
    reason: str = ""
    # Tidy up (reason "tidy"): the entries this line came from, as they were.
    merged_from: tuple[str, ...] = ()
    # The expiry the operation sets: an ISO date, "never" (cleared) or "" (none given).
    expires: str = ""
    # An import's add: the format it came from (`passport.FORMATS`), a code.
    imported: str = ""
    # The person's own sentence the question shows beside the entry (`gate.said`: the "no" it drops).
    said: str = ""

    @property
    def editable(self) -> bool:
        return self.action == "add" or (self.action == "replace" and self.reason == TIDY)


@dataclass(frozen=True)
class Proposal:
    id: int
    operations: tuple[ProposedOperation, ...]
    conversation_id: int | None
    turn_id: str
    created_at: datetime
    expires_at: datetime


# --- the stored form ----------------------------------------------------------------


def _to_json(operations: Sequence[Operation], reasons: Sequence[str] | None = None,
             merged_from: Sequence[Sequence[str]] | None = None, imported: str = "",
             first_imported: Sequence[tuple[str, str] | None] | None = None,
             quotes: Sequence[str] | None = None) -> list[dict]:
    reasons = list(reasons or ())
    quotes = list(quotes or ())
    first_imported = list(first_imported or ())
    merged_from = list(merged_from or ())
    stored = []
    for index, op in enumerate(operations):
        item: dict[str, Any] = {
            "target": op.target, "action": op.action, "match": op.match, "content": op.content, "entry": op.entry
        }
        if op.expires is not None:
            item["expires"] = op.expires  # the entry's last day (ISO), or "never"
        if index < len(reasons) and reasons[index]:
            item["reason"] = reasons[index]  # why trusted code asked (`gate.REASONS`), a code, no content
        if index < len(quotes) and quotes[index]:
            item["said"] = quotes[index]  # the person's sentence beside it (`gate.said`): content, like the entry
        if index < len(merged_from) and merged_from[index]:
            item["from"] = [str(entry) for entry in merged_from[index]]  # Tidy up: the entries this line came from
        if imported and op.action == "add":
            item["imported"] = imported  # an import's add: the format's code, no content
            if index < len(first_imported) and first_imported[index]:
                was, at = first_imported[index]  # type: ignore[misc]  # checked just above
                item["first_imported"] = {"from": was, "at": at}  # our export's note of an earlier import
        stored.append(item)
    return stored


def _from_json(data: Sequence[Mapping]) -> list[Operation]:
    return [
        Operation(target=item["target"], action=item["action"], match=item.get("match"),
                  content=item.get("content"), entry=item.get("entry"),
                  expires=item["expires"] if isinstance(item.get("expires"), str) else None)
        for item in data
    ]


def _view(row: MemoryProposal) -> Proposal:
    return Proposal(
        id=row.pk,
        operations=tuple(
            ProposedOperation(position=index, target=op.target, action=op.action, content=op.content, entry=op.entry,
                              reason=str(item.get("reason") or ""), merged_from=_merged_from(item),
                              expires=op.expires or "", imported=str(item.get("imported") or ""),
                              said=str(item.get("said") or ""))
            for index, (op, item) in enumerate(zip(_from_json(row.operations), row.operations), start=1)
        ),
        conversation_id=row.conversation_id,
        turn_id=row.turn_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


# --- the turn's side ----------------------------------------------------------------------


def create(
    *,
    user_id,
    operations: Sequence[Operation],
    conversation_id: int | None = None,
    turn_id: str = "",
    should_cancel: Callable[[], bool] | None = None,
    guard=None,
    reasons: Sequence[str] | None = None,
    erasures: int | None = None,
    merged_from: Sequence[Sequence[str]] | None = None,
    imported: str = "",
    model: str = "",
    first_imported: Sequence[tuple[str, str] | None] | None = None,
    quotes: Sequence[str] | None = None,
) -> int:
    """Store a finished turn's staged batch as a proposal; return its id.

    Raise store.InactiveUser / store.MemoryTurnedOff / store.UnknownUser as
    the agent's commit would, and CommitCancelled (nothing stored) when
    `should_cancel` turns True before the transaction ends. With `guard` (an
    `idempotency.CommitGuard`), raise idempotency.AlreadyCommitted (nothing
    stored) when a proposal or commit under its key already stands, and
    record this one's outcome (`proposal_id=`) in the same transaction.
    `reasons`, one per operation, say why trusted code asked (`gate`);
    `merged_from`, one per operation, the entries a Tidy up's line came from.
    `quotes`, one per operation, the person's sentence the question shows
    beside it (`gate.said`; "" = none): kept and erased with the proposal.
    `imported` (the person's import, `agentmemory.importing`): the format's
    code; the person asked for it, so it is stored with memory off too, and
    the event's actor is the person. `first_imported`, one per operation:
    an entry of our own export that was imported before, as (format, when),
    kept in what the save writes ("Imported from ChatGPT" stays so).
    With `erasures` (the erase count the turn read), raise
    MemoryValidationError `erased` (nothing stored) when the person erased
    their memory since.
    """
    cancelled = should_cancel or (lambda: False)
    started = time.monotonic()
    summary = summarize(operations)
    with transaction.atomic():
        if cancelled():
            raise CommitCancelled()
        lock_person(user_id=user_id, agent=not imported, erasures=erasures)
        if guard is not None:
            guard.check()
        proposal = MemoryProposal.objects.create(
            user_id=user_id, operations=_to_json(operations, reasons, merged_from, imported, first_imported, quotes),
            operation_count=len(operations),
            conversation_id=conversation_id,
            turn_id=turn_id[:64], expires_at=timezone.now() + timedelta(days=memory_settings().proposal_ttl_days),
        )
        MemoryEvent.objects.create(
            user_id=user_id, actor=Actor.USER if imported else Actor.AGENT, outcome=Outcome.PROPOSED,
            operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions, duration_ms=int((time.monotonic() - started) * 1000),
            **agent_labels(Actor.AGENT, model),
        )
        if guard is not None:
            guard.record(proposal_id=proposal.pk)
        if cancelled():
            raise CommitCancelled()
        signals.send_after_commit(signals.proposal_created, MemoryProposal, user_id=user_id, proposal_id=proposal.pk,
                                  operation_count=len(operations))
    return proposal.pk


def commit_and_propose(
    *,
    user_id,
    keep: Sequence[Operation],
    ask: Sequence[Operation],
    reasons: Sequence[str],
    conversation_id: int | None = None,
    turn_id: str = "",
    should_cancel: Callable[[], bool] | None = None,
    limits: Mapping[str, int] | None = None,
    guard=None,
    erasures: int | None = None,
    model: str = "",
    source_intent: str = "",
    quotes: Sequence[str] | None = None,
) -> tuple[CommitResult, int]:
    """Commit `keep` and store `ask` as one proposal, in one transaction; return (result, proposal_id).

    A turn whose batch trusted code partly doubts (`gate.split`): what it
    does not doubt is committed, the rest waits for the person. Both or
    neither: a cancel, a rejection or an error leaves no commit and no
    proposal. With `guard`, the key's outcome records both (`proposal_id=`
    beside the commit's facts). Deadlocks and serialization failures replay
    the whole transaction, as a commit's would.
    """
    held = _HeldGuard(guard) if guard is not None else None
    attempts = max(1, memory_settings().commit_attempts)
    for attempt in range(1, attempts + 1):
        try:
            with transaction.atomic():
                result = commit_operations(
                    user_id=user_id, operations=keep, should_cancel=should_cancel, limits=limits,
                    origin={"conversation_id": conversation_id, "turn_id": turn_id, "model": model,
                            "source_intent": source_intent}, guard=held,
                    erasures=erasures,
                )
                proposal_id = create(user_id=user_id, operations=ask, conversation_id=conversation_id,
                                     turn_id=turn_id, should_cancel=should_cancel, reasons=reasons, model=model,
                                     quotes=quotes)
                if held is not None:
                    guard.record(**held.facts, proposal_id=proposal_id)
            return result, proposal_id
        except DatabaseError as exc:
            if attempt < attempts and is_retryable(exc):
                time.sleep(memory_settings().retry_backoff_seconds * attempt * (1 + random.random()))
                continue
            raise
    raise AssertionError("unreachable")


class _HeldGuard:
    """A guard for the commit inside `commit_and_propose`: it checks the key as
    the commit takes the lock, and holds the commit's facts until the proposal exists."""

    def __init__(self, guard) -> None:
        self.guard = guard
        self.facts: dict = {}

    def check(self) -> None:
        self.guard.check()

    def record(self, **facts) -> None:
        self.facts = facts


# --- the person's side ----------------------------------------------------------------------


def pending(*, user_id) -> list[Proposal]:
    """Return the person's proposals that have not expired, newest first."""
    rows = MemoryProposal.objects.filter(user_id=user_id, expires_at__gt=timezone.now()).order_by("-created_at", "-id")
    return [_view(row) for row in rows]


def get(*, user_id, proposal_id) -> Proposal:
    row = MemoryProposal.objects.filter(pk=proposal_id, user_id=user_id, expires_at__gt=timezone.now()).first()
    if row is None:
        raise ProposalGone("No pending proposal of yours has this id.")
    return _view(row)


def save(*, user_id, proposal_id, edits: Mapping[int, str] | None = None,
         routes: Mapping[int, str] | None = None) -> CommitResult:
    """Commit one pending proposal, all or nothing; return the commit's result.

    `edits` maps the 1-based position of an `add` to the text the person
    wants instead. `routes` maps the position of an import's add to the
    document it goes to ("user", "memory") or "skip" (left out); an
    import's proposal may hold up to `passport.MAX_IMPORT_ITEMS` adds, and
    what it writes records the import's format in its provenance. Raise ProposalGone when there is no such pending
    proposal, and MemoryValidationError (nothing written, the proposal kept)
    when it no longer applies to the memory as it is now.
    """
    edits = dict(edits or {})
    rejection: MemoryValidationError | None = None
    with transaction.atomic():
        # The person's lock first, as every writer of memory takes it first
        # (an erase deleting proposals takes it too): no lock-order cycle.
        lock_person(user_id=user_id)
        row = (MemoryProposal.objects.select_for_update()
               .filter(pk=proposal_id, user_id=user_id, expires_at__gt=timezone.now()).first())
        if row is None:
            raise ProposalGone("No pending proposal of yours has this id.")
        operations = _with_edits(_from_json(row.operations), edits, row.operations)
        imported = _imported(row.operations)
        if imported:
            operations = _with_routes(operations, routes or {}, row.operations)
        elif routes:
            raise MemoryValidationError("Only an import's items can be moved or left out.", code="invalid_route")
        origin: dict[str, Any] = ({"by": "user", "imported": imported} if imported else
                                  {"by": "agent", "conversation_id": row.conversation_id, "turn_id": row.turn_id})
        if imported:
            # Entries our export says were imported earlier keep that origin (an edited one is the person's own).
            origin["imported_entries"] = {
                item["content"]: item["first_imported"] for position, item in enumerate(row.operations, start=1)
                if isinstance(item.get("first_imported"), Mapping) and position not in edits}
        merges = _merges(operations, row.operations)
        if merges:
            origin["merges"] = merges  # a Tidy up's lines keep the sources of the entries they came from
        try:  # commit_operations runs in a savepoint of this transaction and records a rejection in it
            result = commit_operations(
                user_id=user_id, operations=operations, actor=Actor.USER,
                # The entries come from the assistant (a chat, or Tidy up), or the person's import; the person
                # saved them.
                origin=origin, max_operations=MAX_IMPORT_OPERATIONS if imported else None,
                precondition=_fits_by_length(operations) if imported else None,
            )
        except MemoryValidationError as exc:
            rejection = exc  # the commit recorded the rejection; the proposal stays for the person to discard
        else:
            row.delete()
            signals.send_after_commit(signals.proposal_saved, MemoryProposal, user_id=user_id,
                                      proposal_id=proposal_id, change_id=result.change_id)
    if rejection is not None:
        raise rejection
    return result


def _fits_by_length(operations: Sequence[Operation]) -> Callable[[Snapshot], None]:
    """Refuse an import's save that cannot fit (`over_capacity`) on its lengths, before its items are scanned again.

    Up to 200 items of 1,000 characters take seconds of the worker to
    scan; a save refused for its size only would spend them on every try.
    The adds' lengths are a lower bound of what the rules then count
    (expiry notes only add), so this refuses only what they would refuse.
    """
    def check(current: Snapshot) -> None:
        documents = {target: list(current.entries(target)) for target in TARGETS}
        for operation in operations:
            if operation.action == "add" and isinstance(operation.content, str):
                entry = normalize_text(operation.content)
                if entry and entry not in documents[operation.target]:
                    documents[operation.target].append(entry)
        validate_capacity(Snapshot(user=tuple(documents["user"]), memory=tuple(documents["memory"])),
                          memory_settings().limits)

    return check


def discard(*, user_id, proposal_id) -> None:
    """Drop one pending proposal (recorded without content); raise ProposalGone if there is none.

    Takes the person's lock first, as `save` does: a discard queues with an
    account deletion and then raises store.UnknownUser, never writing an
    event for an account on its way out.
    """
    with transaction.atomic():
        lock_person(user_id=user_id)
        row = MemoryProposal.objects.select_for_update().filter(pk=proposal_id, user_id=user_id).first()
        if row is None:
            raise ProposalGone("No pending proposal of yours has this id.")
        summary = summarize(_from_json(row.operations))
        row.delete()
        MemoryEvent.objects.create(
            user_id=user_id, actor=Actor.USER, outcome=Outcome.DISCARDED, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions, error_code="proposal_discarded",
        )
        signals.send_after_commit(signals.proposal_discarded, MemoryProposal, user_id=user_id, proposal_id=proposal_id)


def expire(*, now: datetime | None = None) -> int:
    """Delete every proposal past its expiry, in batches; return how many went (idempotent)."""
    now = now or timezone.now()
    total = 0
    while True:
        ids = list(MemoryProposal.objects.filter(expires_at__lte=now).values_list("pk", flat=True)[:EXPIRE_BATCH])
        if not ids:
            return total
        deleted, _ = MemoryProposal.objects.filter(pk__in=ids, expires_at__lte=now).delete()
        total += deleted


def _with_edits(operations: list[Operation], edits: Mapping[int, str],
                stored: Sequence[Mapping] = ()) -> list[Operation]:
    for position, content in edits.items():
        if not isinstance(position, int) or not 1 <= position <= len(operations):
            raise MemoryValidationError(
                f"position {position!r} is not an operation of this proposal (1 to {len(operations)}).",
                code="invalid_edit",
            )
        operation = operations[position - 1]
        # A Tidy up's line (a replace pinned to its entry) can be edited too; it stays pinned.
        tidy_line = (operation.action == "replace" and position <= len(stored)
                     and stored[position - 1].get("reason") == TIDY)
        if operation.action != "add" and not tidy_line:
            raise MemoryValidationError(
                "Only the text of an added fact can be edited before saving.",
                code="invalid_edit", position=position, target=operation.target,
            )
        if not isinstance(content, str) or not normalize_text(content):
            raise MemoryValidationError("Write the fact itself before saving.", code="empty_entry",
                                        position=position, target=operation.target)
        operations[position - 1] = (replace(operation, content=content) if tidy_line
                                    else Operation(target=operation.target, action="add", content=content,
                                                   expires=operation.expires))
    return operations


def _imported(stored: Sequence[Mapping]) -> str:
    """The format of an import's proposal ("" for any other): every operation is an import's add."""
    kinds = {str(item.get("imported") or "") for item in stored}
    if len(kinds) == 1 and all(item.get("reason") == IMPORT and item.get("action") == "add" for item in stored):
        return kinds.pop()
    return ""


def _with_routes(operations: list[Operation], routes: Mapping[int, str], stored: Sequence[Mapping]) -> list[Operation]:
    """An import's adds with the person's routes: moved to the other document, or left out ("skip")."""
    routed: list[Operation | None] = list(operations)
    for position, target in routes.items():
        if not isinstance(position, int) or not 1 <= position <= len(operations):
            raise MemoryValidationError(
                f"position {position!r} is not an operation of this proposal (1 to {len(operations)}).",
                code="invalid_route")
        if target not in (*TARGETS, SKIP):
            raise MemoryValidationError("Choose the profile, the notes, or leave the item out.", code="invalid_route",
                                        position=position)
        routed[position - 1] = (None if target == SKIP
                                else replace(operations[position - 1], target="user" if target == "user" else "memory"))
    kept = [operation for operation in routed if operation is not None]
    if not kept:
        raise MemoryValidationError("Every item was left out; there is nothing to save.", code="import_all_skipped")
    return kept


def _merged_from(item: Mapping) -> tuple[str, ...]:
    came_from = item.get("from")
    return tuple(str(entry) for entry in came_from) if isinstance(came_from, list) else ()


def _merges(operations: Sequence[Operation], stored: Sequence[Mapping]) -> dict:
    """{target: {line: entries it came from}} of a Tidy up's lines, as saved (after the person's edits)."""
    merges: dict = {}
    for operation, item in zip(operations, stored):
        came_from = _merged_from(item)
        if came_from and operation.content is not None and normalize_text(operation.content):
            merges.setdefault(operation.target, {})[normalize_text(operation.content)] = came_from
    return merges
