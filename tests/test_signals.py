"""Signals a host project hooks (issue 41): sent after the commit, with ids and counts, never content.

On SQLite and PostgreSQL, with real transactions (so `on_commit` runs as in
production): each signal once per change, nothing for a change rolled back,
a receiver that raises neither fails nor undoes the commit, and no argument
carries the text of memory.
"""
from contextlib import contextmanager

import pytest
from django.db import transaction

from agentmemory import proposals, services, signals
from agentmemory.models import Actor, MemoryDocument, MemoryEvent, MemoryProposal, Viewed
from agentmemory.rules import Operation

pytestmark = pytest.mark.django_db(transaction=True)

SECRETLESS = "Deploys with Helm to the staging namespace."


@contextmanager
def received(signal):
    calls = []

    def receiver(sender, **kwargs):
        kwargs.pop("signal", None)
        calls.append((sender, kwargs))

    signal.connect(receiver, weak=False)
    try:
        yield calls
    finally:
        signal.disconnect(receiver)


def no_content(calls) -> bool:
    return all(SECRETLESS not in repr(kwargs) and "Helm" not in repr(kwargs) for _, kwargs in calls)


def test_memory_committed_names_the_change_and_never_its_text(user):
    with received(signals.memory_committed) as calls:
        result = services.add_entry(user_id=user.pk, target="memory", content=SECRETLESS)
        services.add_entry(user_id=user.pk, target="memory", content=SECRETLESS)  # unchanged: no change, no signal

    assert calls == [(MemoryDocument, {"user_id": user.pk, "change_id": result.change_id, "actor": Actor.USER,
                                       "changed": ("memory",), "operation_count": 1})]
    assert result.change_id is not None and no_content(calls)


def test_a_commit_rolled_back_sends_nothing(user):
    with received(signals.memory_committed) as calls, pytest.raises(RuntimeError):
        with transaction.atomic():
            services.add_entry(user_id=user.pk, target="memory", content=SECRETLESS)
            assert calls == [], "not before the outer transaction commits"
            raise RuntimeError("the caller's transaction fails")

    assert calls == []
    assert not MemoryDocument.objects.filter(user=user).exists()


def test_a_receiver_that_raises_neither_fails_nor_undoes_the_commit(user, caplog):
    def broken(sender, **kwargs):
        raise ValueError("a host's bug")

    signals.memory_committed.connect(broken, weak=False)
    try:
        result = services.add_entry(user_id=user.pk, target="memory", content=SECRETLESS)
    finally:
        signals.memory_committed.disconnect(broken)

    assert list(result.changed) == ["memory"]
    assert MemoryDocument.objects.filter(user=user).exists()
    assert "ValueError" in caplog.text and "Helm" not in caplog.text


def test_memory_erased_carries_the_receipt(user):
    services.add_entry(user_id=user.pk, target="memory", content=SECRETLESS)
    with received(signals.memory_erased) as calls:
        receipt = services.erase_memory(user_id=user.pk, actor=Actor.USER)

    assert calls == [(MemoryDocument, {"user_id": user.pk, "actor": Actor.USER, "removed": dict(receipt.removed)})]
    assert calls[0][1]["removed"]["notes_entries"] == 1 and no_content(calls)


def test_proposals_signal_created_saved_and_discarded(user):
    operation = Operation(target="memory", action="add", content=SECRETLESS)
    with (received(signals.proposal_created) as created, received(signals.proposal_saved) as saved,
          received(signals.proposal_discarded) as discarded, received(signals.memory_committed) as committed):
        first = proposals.create(user_id=user.pk, operations=[operation])
        second = proposals.create(user_id=user.pk, operations=[operation])
        result = proposals.save(user_id=user.pk, proposal_id=first)
        proposals.discard(user_id=user.pk, proposal_id=second)

    assert created == [(MemoryProposal, {"user_id": user.pk, "proposal_id": first, "operation_count": 1}),
                       (MemoryProposal, {"user_id": user.pk, "proposal_id": second, "operation_count": 1})]
    assert saved == [(MemoryProposal, {"user_id": user.pk, "proposal_id": first, "change_id": result.change_id})]
    assert discarded == [(MemoryProposal, {"user_id": user.pk, "proposal_id": second})]
    assert [kwargs["change_id"] for _, kwargs in committed] == [result.change_id]
    assert no_content(created + saved + discarded + committed)


def test_a_proposal_save_that_no_longer_applies_signals_nothing(user):
    proposal_id = proposals.create(user_id=user.pk, operations=[
        Operation(target="memory", action="remove", match=SECRETLESS, entry=SECRETLESS)])
    with received(signals.proposal_saved) as saved, received(signals.memory_committed) as committed:
        with pytest.raises(Exception):
            proposals.save(user_id=user.pk, proposal_id=proposal_id)

    assert saved == [] and committed == []


def test_memory_viewed_by_staff(user, other_user):
    with received(signals.memory_viewed_by_staff) as calls:
        services.record_staff_views(user_ids=[user.pk, None, user.pk], staff=other_user, viewed=Viewed.MEMORY)

    assert calls == [(MemoryEvent, {"user_ids": (user.pk,), "staff_id": other_user.pk, "viewed": Viewed.MEMORY})]
