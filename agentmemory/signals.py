"""Signals a host project can hook: sent after the transaction commits, carrying ids and counts, never content.

Like Django's own (`django.contrib.auth.signals`), this module only defines
them; the app's receivers of Django's signals live in `receivers.py`. Every
signal is sent with `send_robust` from `transaction.on_commit`: a change that
rolls back sends nothing (a change whose COMMIT's answer was lost sends
`memory_committed` once the database confirms it stored, and nothing when it
confirms it is not), and a receiver that raises is logged (its type
only) without undoing or failing what was committed. Receivers run in the
thread that committed (a request's, or a turn's worker thread); keep them
short, or hand the work to a queue.

| signal | sender | keyword arguments |
|---|---|---|
| `memory_committed` | `MemoryDocument` | `user_id`, `change_id`, `actor`, `changed` (documents touched: "user", "memory"), `operation_count` |
| `memory_erased` | `MemoryDocument` | `user_id`, `actor`, `removed` (kind -> count, the receipt) |
| `proposal_created` | `MemoryProposal` | `user_id`, `proposal_id`, `operation_count` |
| `proposal_saved` | `MemoryProposal` | `user_id`, `proposal_id`, `change_id` (None when nothing changed) |
| `proposal_discarded` | `MemoryProposal` | `user_id`, `proposal_id` |
| `memory_viewed_by_staff` | `MemoryEvent` | `user_ids`, `staff_id`, `viewed` (what kind of thing) |

docs/integration.md has an example receiver.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

memory_committed = Signal()
memory_erased = Signal()
proposal_created = Signal()
proposal_saved = Signal()
proposal_discarded = Signal()
memory_viewed_by_staff = Signal()


def send_after_commit(signal: Signal, sender, **kwargs) -> None:
    """Send `signal` once the current transaction commits (at once outside one); never with content."""
    if not signal.receivers or not signal.has_listeners(sender):
        return  # the common case on every commit: nobody listens, so nothing is registered
    transaction.on_commit(lambda: send_now(signal, sender, **kwargs))


def send_now(signal: Signal, sender, **kwargs) -> None:
    """Send `signal` at once, for what is known durable: a change whose COMMIT's answer was lost and the
    database then confirmed stored (`store.CommitOutcomeUnknown.confirm`); its on_commit never ran."""
    for receiver, response in signal.send_robust(sender=sender, **kwargs):
        if isinstance(response, Exception):
            logger.warning("agentmemory signal receiver %s failed: %s",
                           getattr(receiver, "__qualname__", "receiver"), type(response).__name__)
