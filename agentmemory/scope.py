"""Request-bound identity and the staging ledger of one turn.

The authenticated identity is bound here by trusted code (a view or a
consumer, from `request.user` / `scope["user"]`) and read by the tool. The
model never supplies it. A ContextVar is copied into each asyncio task and
into `asyncio.to_thread` workers, so a binding never leaks into a concurrent
request.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .rules import LIMITS, Operation, Snapshot, apply_operations


@dataclass
class MemoryLedger:
    """What one turn has staged: the snapshot it sees and the batch to commit."""

    snapshot: Snapshot
    operations: list[Operation] = field(default_factory=list)
    failed_calls: int = 0


def stage_operations(
    ledger: MemoryLedger,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
) -> Snapshot:
    """Apply a batch to the ledger's snapshot and record it for the commit.

    A rejected batch raises and leaves the ledger as it was.
    """
    updated = apply_operations(ledger.snapshot, operations, limits)
    ledger.snapshot = updated
    ledger.operations.extend(operations)
    return updated


@dataclass(frozen=True)
class MemoryRequest:
    user_id: int | str
    writes_enabled: bool
    ledger: MemoryLedger | None = None
    limits: Mapping[str, int] = field(default_factory=lambda: dict(LIMITS))


current_memory_request: ContextVar[MemoryRequest | None] = ContextVar(
    "current_memory_request", default=None
)


@contextmanager
def memory_scope(
    user_id: int | str,
    writes_enabled: bool,
    *,
    snapshot: Snapshot | None = None,
    limits: Mapping[str, int] | None = None,
) -> Iterator[MemoryRequest]:
    """Bind one authenticated person's memory to the current context.

    Writes need the snapshot that was actually read: after a failed read
    there is nothing to stage against, so an empty writable snapshot is never
    invented (it could overwrite valid memory).
    """
    if writes_enabled and snapshot is None:
        raise ValueError("writes_enabled needs the snapshot that was read for this turn")
    request = MemoryRequest(
        user_id=user_id,
        writes_enabled=writes_enabled,
        ledger=MemoryLedger(snapshot=snapshot) if writes_enabled else None,
        limits=dict(limits or LIMITS),
    )
    token = current_memory_request.set(request)
    try:
        yield request
    finally:
        current_memory_request.reset(token)


def get_memory_request() -> MemoryRequest | None:
    """Return the memory binding of the current request, if any."""
    return current_memory_request.get()
