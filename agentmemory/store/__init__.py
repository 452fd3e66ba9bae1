"""The only code that reads or writes memory rows.

Import from here (`from agentmemory import store`, `from agentmemory.store
import commit_operations`): this package's API is what it re-exports below.
Each module keeps one concern:

- `reads.py`: both documents of a person, their dates and sources; a turn's read.
- `locks.py`: the per-person write lock every writer takes first (and why a
  lock, not SERIALIZABLE); how long a wait may last.
- `commit.py`: the locked commit of an ordered batch, its retries,
  cancellation and idempotency; its async boundary.
- `statements.py`: the hand-built SQL of those paths, and how its cursor
  binds and prepares it (and stops preparing behind a pooler).
- `versions.py`: the versions a commit keeps, and their pruning.
- `events.py`: the audit event of every commit attempt.
- `erasure.py`: an erase, a deleted conversation's links, a deleted account.
- `errors.py`: what the store raises; which database errors are retried.
- `outcome.py`: a commit whose COMMIT failed unanswered (`CommitOutcomeUnknown`),
  and asking the database what became of it (`confirm`, `commit_watch`).
"""
from .commit import CommitResult, commit_in_worker, commit_operations
from .erasure import Erased, erase, forget_conversation, lock_owner_for_deletion
from .errors import (
    LOCK_TIMEOUT_SQLSTATES,
    RETRYABLE_SQLSTATES,
    CommitCancelled,
    CommitOutcomeUnknown,
    InactiveUser,
    MemoryTurnedOff,
    MemoryUnavailable,
    SchemaVersionError,
    UnknownUser,
    is_lock_timeout,
    is_retryable,
    outcome_unknown,
)
from .events import record_discarded
from .locks import bounded_wait, lock_person
from .outcome import CommitNotStored, CommitUnconfirmed, Confirmation, commit_confirmed, commit_watch, confirm
from .reads import StoredMemory, erase_count, load_for_turn, load_snapshot, load_state, preference_row
from .statements import PREPARED_STATEMENT_SQLSTATES

__all__ = [
    "LOCK_TIMEOUT_SQLSTATES",
    "PREPARED_STATEMENT_SQLSTATES",
    "RETRYABLE_SQLSTATES",
    "CommitCancelled",
    "CommitNotStored",
    "CommitOutcomeUnknown",
    "CommitResult",
    "CommitUnconfirmed",
    "Confirmation",
    "Erased",
    "InactiveUser",
    "MemoryTurnedOff",
    "MemoryUnavailable",
    "SchemaVersionError",
    "StoredMemory",
    "UnknownUser",
    "bounded_wait",
    "commit_confirmed",
    "commit_in_worker",
    "commit_operations",
    "commit_watch",
    "confirm",
    "erase",
    "erase_count",
    "forget_conversation",
    "is_lock_timeout",
    "is_retryable",
    "load_for_turn",
    "load_snapshot",
    "load_state",
    "lock_owner_for_deletion",
    "lock_person",
    "outcome_unknown",
    "preference_row",
    "record_discarded",
]
