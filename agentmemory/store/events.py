"""The audit event every commit attempt leaves: its row, and recording it outside a failed commit.

Events hold counts, codes and targets, never content. A commit writes its
event on its own cursor, in its transaction (`commit.py`); the paths here
write one after a rollback, or for a batch that was never committed.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from django.db import connection

from ..conf import memory_settings
from ..models import Actor, MemoryEvent, Outcome, SourceIntent
from ..rules import Operation, rendered_length, summarize
from .locks import bounded_wait
from .statements import Statements, vendor_statements

# One logger for the whole store, named as before it was a package.
logger = logging.getLogger("agentmemory.store")


def record_event(*, user_id, actor, outcome, summary, snapshot, retry_count, started, error_code="",
                 model="", policy_version="", source_intent=""):
    """Insert one event row in its own statement (the paths outside a commit's cursor)."""
    sql = vendor_statements()
    if not sql.direct_event:
        _insert_event(
            user_id=user_id, actor=actor, outcome=outcome, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions,
            user_characters=rendered_length(snapshot, "user") if snapshot else None,
            memory_characters=rendered_length(snapshot, "memory") if snapshot else None,
            retry_count=retry_count, duration_ms=elapsed_ms(started), error_code=error_code,
            model=model, policy_version=policy_version, source_intent=source_intent,
        )
        return
    params = event_params(
        sql, owner=sql.owner(user_id), actor=actor, outcome=outcome, summary=summary, snapshot=snapshot,
        retry_count=retry_count, started=started, error_code=error_code, now=sql.now(),
        model=model, policy_version=policy_version, source_intent=source_intent,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.insert_event, params)


def event_params(sql: Statements, *, owner, actor, outcome, summary, snapshot, retry_count, started,
                  error_code, now, model="", policy_version="", source_intent="", db=None) -> list:
    """Return the event INSERT's parameters, in `_EVENT_COLUMNS` order (for `db`, default the connection)."""
    db = db or connection
    if not sql.direct_event:  # the model changed: let every field prepare its own value
        event = MemoryEvent(
            user_id=owner, actor=actor, outcome=outcome, operation_count=summary.operation_count,
            targets=summary.targets, actions=summary.actions,
            user_characters=rendered_length(snapshot, "user") if snapshot else None,
            memory_characters=rendered_length(snapshot, "memory") if snapshot else None,
            retry_count=retry_count, duration_ms=elapsed_ms(started), error_code=error_code,
            model=model, policy_version=policy_version, source_intent=source_intent,
        )
        return [field.get_db_prep_save(field.pre_save(event, add=True), db) for field in sql.event_fields]
    adapt_json = db.ops.adapt_json_value
    return [
        owner, str(actor), str(outcome), summary.operation_count,
        adapt_json(summary.targets, None), adapt_json(summary.actions, None),
        rendered_length(snapshot, "user") if snapshot else None,
        rendered_length(snapshot, "memory") if snapshot else None,
        retry_count, elapsed_ms(started), error_code, None, "", "", model, policy_version, source_intent, now,
    ]


def _insert_event(**values) -> None:
    """INSERT the row `MemoryEvent.objects.create(**values)` would, without the ORM."""
    event = MemoryEvent(**values)
    sql = vendor_statements()
    params = [field.get_db_prep_save(field.pre_save(event, add=True), connection) for field in sql.event_fields]
    with connection.cursor() as cursor:
        cursor.execute(sql.insert_event, params)


def record_outside(record: Callable[..., None], outcome: str, error_code: str = "") -> None:
    """Write an event for a rolled-back commit; never mask the original error."""
    if connection.in_atomic_block and connection.needs_rollback:
        return
    try:
        # Bounded like the commit: whoever holds the person's lock also blocks
        # this row's foreign-key check, and an audit row must not hang a turn.
        with bounded_wait(memory_settings().commit_lock_timeout):
            record(outcome, None, error_code)
    except Exception:  # the database may be the reason the commit failed
        logger.warning("memory event not recorded", extra={"outcome": outcome})


def record_discarded(*, user_id, operations: Sequence[Operation], reason: str, model: str = "") -> None:
    """Record that a turn's staged batch was dropped without a commit."""
    record_outside(
        lambda outcome, snapshot, code: record_event(
            user_id=user_id, actor=Actor.AGENT, outcome=outcome, summary=summarize(operations),
            snapshot=None, retry_count=0, started=time.monotonic(), error_code=code,
            **agent_labels(Actor.AGENT, model),
        ),
        Outcome.DISCARDED,
        reason,
    )


def elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def agent_labels(actor, model, source_intent="") -> dict:
    """The assistant's batch's model, memory policy version and source message's intent, for its event.

    All "" for other actors; an intent that is not a `SourceIntent` is recorded as "" (never free text).
    """
    if actor != Actor.AGENT:
        return {"model": "", "policy_version": "", "source_intent": ""}
    return {"model": str(model or "")[:100], "policy_version": memory_settings().policy_version[:16],
            "source_intent": source_intent if source_intent in _SOURCE_INTENTS else ""}


_SOURCE_INTENTS = frozenset(SourceIntent.values)  # `Choices.values` builds its list anew on each read
