"""A person's own memory settings: the "Use memory in chats" switch and
whether the assistant saves changes or asks first (`save_mode`).

The switch is the person's, beside the deployment's rollout flag
(AGENTMEMORY["ENABLED"]), which still wins: with the flag off nobody's turns
use memory. With the switch off, the person's turns neither read nor write
memory and the tool is not offered; what is stored is kept and stays
visible, editable and erasable on the memory page and the API.

The switch is written under the person's write lock (`store.lock_person`),
the lock every memory commit takes first; the agent's commit reads the
switch in its lock query. So a turn that staged a change before the person
switched memory off cannot save it afterwards. Each change of a setting is
an audit event (metadata only).

`save_mode` "ask" turns a finished turn's change into a proposal
(`agentmemory.proposals`) instead of a commit; "" (no choice made) follows
AGENTMEMORY["DEFAULT_SAVE_MODE"].
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import DatabaseError, transaction

from .conf import memory_settings
from .models import Actor, MemoryEvent, MemoryPreference, Outcome, SaveMode
from .store import MemoryUnavailable, bounded_wait, lock_person, preference_row

DEFAULT_USE_MEMORY = True
SAVE_MODES = tuple(SaveMode.values)


@dataclass(frozen=True)
class Preferences:
    use_memory: bool
    save_mode: str  # "auto" or "ask", the deployment default applied

    @property
    def ask_first(self) -> bool:
        return self.save_mode == SaveMode.ASK


def load(*, user_id, timeout: float | None = None) -> Preferences:
    """Return the person's settings (no row: the defaults), in one query.

    With `timeout` (seconds) the read is bounded like the turn's memory read
    and raises MemoryUnavailable when it fails or runs out.
    """
    try:
        if timeout is None:
            row = preference_row(user_id=user_id)
        else:
            with bounded_wait(timeout, statement=True):
                row = preference_row(user_id=user_id)
    except DatabaseError as exc:
        raise MemoryUnavailable("The memory settings could not be read from the database.") from exc
    return from_row(row)


def from_row(row: tuple | None) -> Preferences:
    """Return the settings a stored `(use_memory, save_mode)` row means (None: the defaults)."""
    use, mode = row[:2] if row is not None else (DEFAULT_USE_MEMORY, "")
    return Preferences(use_memory=bool(use), save_mode=mode or default_save_mode())


def default_save_mode() -> str:
    mode = memory_settings().default_save_mode
    return mode if mode in SAVE_MODES else SaveMode.AUTO


def use_memory(*, user_id, timeout: float | None = None) -> bool:
    """Return whether the person's switch is on (see `load`)."""
    return load(user_id=user_id, timeout=timeout).use_memory


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


def set_save_mode(*, user_id, save_mode: str, actor: str = Actor.USER, staff=None) -> bool:
    """Choose "auto" or "ask" for the person; return True when it changed (audited)."""
    if save_mode not in SAVE_MODES:
        raise ValueError(f"save_mode must be one of {', '.join(SAVE_MODES)}")
    started = time.monotonic()
    with transaction.atomic():
        lock_person(user_id=user_id)
        preference, _ = MemoryPreference.objects.get_or_create(user_id=user_id)
        if preference.save_mode == save_mode:
            return False
        previous = preference.save_mode or default_save_mode()
        preference.save_mode = save_mode
        preference.save(update_fields=["save_mode", "updated_at"])
        if previous == save_mode:
            return False  # the default made explicit: nothing a person would call a change
        MemoryEvent.objects.create(
            user_id=user_id, actor=actor, outcome=Outcome.ASK_FIRST if save_mode == SaveMode.ASK else Outcome.AUTO_SAVE,
            duration_ms=int((time.monotonic() - started) * 1000),
            staff=staff, staff_username=staff.get_username() if staff is not None else "",
        )
    return True
