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

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from .conf import memory_settings
from .models import Actor, MemoryEvent, MemoryProposal, Outcome
from .rules import MemoryValidationError, Operation, normalize_text, summarize
from .store import CommitCancelled, CommitResult, commit_operations, lock_person

# How many expired proposals one DELETE statement removes.
EXPIRE_BATCH = 1000


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

    @property
    def editable(self) -> bool:
        return self.action == "add"


@dataclass(frozen=True)
class Proposal:
    id: int
    operations: tuple[ProposedOperation, ...]
    conversation_id: int | None
    turn_id: str
    created_at: datetime
    expires_at: datetime


# --- the stored form ----------------------------------------------------------------


def _to_json(operations: Sequence[Operation]) -> list[dict]:
    return [
        {"target": op.target, "action": op.action, "match": op.match, "content": op.content, "entry": op.entry}
        for op in operations
    ]


def _from_json(data: Sequence[Mapping]) -> list[Operation]:
    return [
        Operation(target=item["target"], action=item["action"], match=item.get("match"),
                  content=item.get("content"), entry=item.get("entry"))
        for item in data
    ]


def _view(row: MemoryProposal) -> Proposal:
    return Proposal(
        id=row.pk,
        operations=tuple(
            ProposedOperation(position=index, target=op.target, action=op.action, content=op.content, entry=op.entry)
            for index, op in enumerate(_from_json(row.operations), start=1)
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
) -> int:
    """Store a finished turn's staged batch as a proposal; return its id.

    Raise store.InactiveUser / store.MemoryTurnedOff / store.UnknownUser as
    the agent's commit would, and CommitCancelled (nothing stored) when
    `should_cancel` turns True before the transaction ends. With `guard` (an
    `idempotency.CommitGuard`), raise idempotency.AlreadyCommitted (nothing
    stored) when a proposal or commit under its key already stands, and
    record this one's outcome (`proposal_id=`) in the same transaction.
    """
    cancelled = should_cancel or (lambda: False)
    started = time.monotonic()
    summary = summarize(operations)
    with transaction.atomic():
        if cancelled():
            raise CommitCancelled()
        lock_person(user_id=user_id, agent=True)
        if guard is not None:
            guard.check()
        proposal = MemoryProposal.objects.create(
            user_id=user_id, operations=_to_json(operations), operation_count=len(operations),
            conversation_id=conversation_id,
            turn_id=turn_id[:64], expires_at=timezone.now() + timedelta(days=memory_settings().proposal_ttl_days),
        )
        MemoryEvent.objects.create(
            user_id=user_id, actor=Actor.AGENT, outcome=Outcome.PROPOSED, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions, duration_ms=int((time.monotonic() - started) * 1000),
        )
        if guard is not None:
            guard.record(proposal_id=proposal.pk)
        if cancelled():
            raise CommitCancelled()
    return proposal.pk


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


def save(*, user_id, proposal_id, edits: Mapping[int, str] | None = None) -> CommitResult:
    """Commit one pending proposal, all or nothing; return the commit's result.

    `edits` maps the 1-based position of an `add` to the text the person
    wants instead. Raise ProposalGone when there is no such pending
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
        operations = _with_edits(_from_json(row.operations), edits)
        try:  # commit_operations runs in a savepoint of this transaction and records a rejection in it
            result = commit_operations(
                user_id=user_id, operations=operations, actor=Actor.USER,
                # The entries come from the assistant's chat; the person saved them.
                origin={"by": "agent", "conversation_id": row.conversation_id, "turn_id": row.turn_id},
            )
        except MemoryValidationError as exc:
            rejection = exc  # the commit recorded the rejection; the proposal stays for the person to discard
        else:
            row.delete()
    if rejection is not None:
        raise rejection
    return result


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


def _with_edits(operations: list[Operation], edits: Mapping[int, str]) -> list[Operation]:
    for position, content in edits.items():
        if not isinstance(position, int) or not 1 <= position <= len(operations):
            raise MemoryValidationError(
                f"position {position!r} is not an operation of this proposal (1 to {len(operations)}).",
                code="invalid_edit",
            )
        operation = operations[position - 1]
        if operation.action != "add":
            raise MemoryValidationError(
                "Only the text of an added fact can be edited before saving.",
                code="invalid_edit", position=position, target=operation.target,
            )
        if not isinstance(content, str) or not normalize_text(content):
            raise MemoryValidationError("Write the fact itself before saving.", code="empty_entry",
                                        position=position, target=operation.target)
        operations[position - 1] = Operation(target=operation.target, action="add", content=content)
    return operations
