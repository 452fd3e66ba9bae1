"""A person's own memory settings: the "Use memory in chats" switch.

The switch is the person's, beside the deployment's rollout flag
(AGENTMEMORY["ENABLED"]), which still wins: with the flag off nobody's turns
use memory. With the switch off, the person's turns neither read nor write
memory and the tool is not offered; what is stored is kept and stays
visible, editable and erasable on the memory page and the API.

The switch is written under the person's write lock (`store.lock_person`),
the lock every memory commit takes first; the agent's commit reads the
switch in its lock query. So a turn that staged a change before the person
switched memory off cannot save it afterwards. Each change of the switch is
an audit event (metadata only).
"""
from __future__ import annotations

import time

from django.db import DatabaseError, transaction

from .models import Actor, MemoryEvent, MemoryPreference, Outcome
from .store import MemoryUnavailable, bounded_wait, lock_person

DEFAULT_USE_MEMORY = True


def use_memory(*, user_id, timeout: float | None = None) -> bool:
    """Return whether the person's switch is on (no row: the default, on).

    With `timeout` (seconds) the read is bounded like the turn's memory read
    and raises MemoryUnavailable when it fails or runs out.
    """
    query = MemoryPreference.objects.filter(user_id=user_id).values_list("use_memory", flat=True)
    try:
        if timeout is None:
            value = query.first()
        else:
            with bounded_wait(timeout, statement=True):
                value = query.first()
    except DatabaseError as exc:
        raise MemoryUnavailable("The memory setting could not be read from the database.") from exc
    return DEFAULT_USE_MEMORY if value is None else bool(value)


def set_use_memory(*, user_id, use_memory: bool, actor: str = Actor.USER, staff=None) -> bool:
    """Turn the person's memory on or off; return True when the setting changed.

    A change is recorded as a `memory_on` / `memory_off` event; setting the
    value it already has records nothing. Raise store.UnknownUser when no
    account has this id.
    """
    started = time.monotonic()
    use_memory = bool(use_memory)
    with transaction.atomic():
        lock_person(user_id=user_id)
        preference = MemoryPreference.objects.filter(user_id=user_id).first()
        if preference is None:
            if use_memory == DEFAULT_USE_MEMORY:
                return False
            MemoryPreference.objects.create(user_id=user_id, use_memory=use_memory)
        elif preference.use_memory == use_memory:
            return False
        else:
            preference.use_memory = use_memory
            preference.save(update_fields=["use_memory", "updated_at"])
        MemoryEvent.objects.create(
            user_id=user_id, actor=actor, outcome=Outcome.MEMORY_ON if use_memory else Outcome.MEMORY_OFF,
            duration_ms=int((time.monotonic() - started) * 1000),
            staff=staff, staff_username=staff.get_username() if staff is not None else "",
        )
    return True
