"""Request-bound identity and the staging ledger of one turn.

The authenticated identity is bound here by trusted code (a view or a
consumer, from `request.user` / `scope["user"]`) and read by the tool. The
model never supplies it. A ContextVar is copied into each asyncio task and
into `asyncio.to_thread` workers, so a binding never leaks into a concurrent
request.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from .gate import TurnSources
from .rules import LIMITS, MAX_OPERATIONS, Applied, MemoryValidationError, Operation, Snapshot, apply_batch


@dataclass
class MemoryLedger:
    """What one turn has staged: the snapshot it sees and the batch to commit.

    `operations` are pinned (each replace/remove names the exact entry it
    matched here), so the commit can tell a stale edit from a fresh one.
    `failed_calls` counts consecutive rejected tool calls. `reasons`, one per
    staged operation, say why trusted code will ask the person instead of
    saving it (`gate`; "" = commit), judged against `start`, the snapshot
    the turn read.
    """

    snapshot: Snapshot
    operations: list[Operation] = field(default_factory=list)
    failed_calls: int = 0
    # Every memory_update call of the turn, refused or not: with none, trusted code may offer the person's
    # own lasting statements as a question (`gate.unsaved_statements`).
    calls: int = 0
    # A tool call was refused because the change would not fit (the chat's memory-full notice).
    capacity_refused: bool = False
    # (target, content) of the adds refused for capacity that the gate would let through: "make room" offers them.
    room_wanted: list[tuple[str, str]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    start: Snapshot | None = None

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.snapshot

    @property
    def operations_left(self) -> int:
        return MAX_OPERATIONS - len(self.operations)


def stage_operations(
    ledger: MemoryLedger,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
) -> Snapshot:
    """Apply a batch to the ledger's snapshot and record it for the commit.

    A rejected batch raises and leaves the ledger as it was.
    """
    return stage_batch(ledger, operations, limits).snapshot


def stage_batch(
    ledger: MemoryLedger,
    operations: Sequence[Operation],
    limits: Mapping[str, int] = LIMITS,
    *,
    accept: Callable[[Applied], bool] = lambda applied: True,
    forgive: bool = False,
    judge: Callable[[Operation], str] | None = None,
    today: str | None = None,
) -> Applied:
    """Stage like `stage_operations`; return what each operation did.

    A turn stages at most MAX_OPERATIONS operations in all, so a staged
    turn never fails at commit for its size. `accept` sees the result
    first: it may raise MemoryValidationError to refuse the batch, or return
    False to leave the ledger as it was (a batch that changes nothing).
    `forgive` is `apply_batch`'s (the model's tool). `judge` gives each
    staged operation its reason (`MemoryLedger.reasons`). `today` (the
    person's, ISO) refuses an expiry before it.
    """
    if len(operations) > ledger.operations_left:
        raise MemoryValidationError(
            f"A turn can stage at most {MAX_OPERATIONS} operations in all; {ledger.operations_left} "
            "remain: send fewer operations, or consolidate related facts.",
            code="turn_budget",
        )
    applied = apply_batch(ledger.snapshot, operations, limits, forgive=forgive, today=today)
    if accept(applied):
        ledger.snapshot = applied.snapshot
        ledger.operations.extend(applied.to_stage)
        ledger.reasons.extend(judge(operation) if judge else "" for operation in applied.to_stage)
    return applied


@dataclass(frozen=True)
class MemoryRequest:
    user_id: int | str
    writes_enabled: bool
    ledger: MemoryLedger | None = None
    limits: Mapping[str, int] = field(default_factory=lambda: dict(LIMITS))
    # The person reviews changes before they are saved ("ask before saving").
    ask_first: bool = False
    # What the turn's messages said, for trusted judgement of what is staged
    # (`gate.TurnSources`), read on first use (`sources`); None: the gate is off for this turn.
    read_sources: Callable[[], TurnSources | None] | None = None
    # The person's today (ISO date in their time zone): what an expiry phrase is read against.
    today: str | None = None

    @property
    def sources(self) -> TurnSources | None:
        """What the turn's messages said, read when the tool first needs it (a turn without a call never
        reads them: a tenth of a plain turn's CPU, docs/benchmarks.md). Not kept here: the reader keeps
        them (`MemoryTurn.sources`), and a tool result heard later in the attempt extends them."""
        if self.read_sources is None:
            return None
        return self.read_sources()


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
    ask_first: bool = False,
    sources: TurnSources | Callable[[], TurnSources | None] | None = None,
    today: str | None = None,
) -> Iterator[MemoryRequest]:
    """Bind one authenticated person's memory to the current context.

    `sources` (what the turn's messages said, for the gate) may be a
    function that reads them: it is called on first use only.

    Writes need the snapshot that was actually read: after a failed read
    there is nothing to stage against, so an empty writable snapshot is never
    invented (it could overwrite valid memory).
    """
    if writes_enabled and snapshot is None:
        raise ValueError("writes_enabled needs the snapshot that was read for this turn")
    request = MemoryRequest(
        user_id=user_id,
        writes_enabled=writes_enabled,
        ledger=MemoryLedger(snapshot=snapshot) if writes_enabled else None,  # type: ignore[arg-type]  # checked above
        limits=dict(limits or LIMITS),
        ask_first=ask_first,
        read_sources=sources if callable(sources) else (None if sources is None else lambda: sources),
        today=today,
    )
    token = current_memory_request.set(request)
    try:
        yield request
    finally:
        current_memory_request.reset(token)


def get_memory_request() -> MemoryRequest | None:
    """Return the memory binding of the current request, if any."""
    return current_memory_request.get()
