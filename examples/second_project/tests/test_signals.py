"""The helpdesk hears agentmemory's `memory_committed`, installed from the wheel.

HelpdeskConfig.ready() connects helpdesk/receivers.py, as docs/integration.md
tells a host to; the receiver keeps one MemoryChange row per committed change
(ids and counts, never content). A change made through the helpdesk's own
path (POST /ask/, its agent turn) is recorded once, after the commit, with
the person, the change, the actor and the documents; a turn that fails and a
change that rolls back record nothing.
"""
import pytest
from asgiref.sync import sync_to_async
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import AsyncClient

from agentmemory import store
from agentmemory.models import MemoryDocument
from agentmemory.rules import Operation
from agentmemory.signals import memory_committed
from helpdesk.apps import HelpdeskConfig
from helpdesk.models import MemoryChange

FACT = "Prefers answers in French"
UID = "helpdesk_record_memory_change"


def recorded() -> list[dict]:
    return list(MemoryChange.objects.values("user_id", "change_id", "actor", "documents", "operation_count"))


async def signed_in(username: str):
    user = await sync_to_async(get_user_model().objects.create_user)(username, password=f"{username}-pass-123")
    client = AsyncClient()
    await client.aforce_login(user)
    return user, client


def test_the_app_config_connects_the_receiver():
    # This module does not import helpdesk.receivers: only HelpdeskConfig.ready() can have connected it.
    assert isinstance(apps.get_app_config("helpdesk"), HelpdeskConfig)
    # Connected once, under the receiver's dispatch_uid (disconnect says whether it was there).
    assert memory_committed.disconnect(dispatch_uid=UID)
    try:
        assert not memory_committed.disconnect(dispatch_uid=UID)
    finally:
        from helpdesk.receivers import record_memory_change

        memory_committed.connect(record_memory_change, dispatch_uid=UID)


@pytest.mark.django_db(transaction=True)
async def test_a_turn_that_commits_is_recorded_once_with_ids_and_counts_only():
    user, client = await signed_in("marie")
    other, _ = await signed_in("jean")

    response = await client.post("/ask/", {"question": f"remember: {FACT}", "user_id": other.pk},
                                 content_type="application/json")

    assert response.status_code == 200, response.status_code
    memory = response.json()["memory"]
    assert memory["status"] == "committed" and memory["change_id"] is not None
    rows = await sync_to_async(recorded)()
    assert rows == [{"user_id": user.pk, "change_id": memory["change_id"], "actor": "agent",
                     "documents": ["user"], "operation_count": 1}]
    assert FACT not in repr(rows) and "French" not in repr(rows)

    # A turn that changes nothing sends nothing.
    response = await client.post("/ask/", {"question": "What do you know?"}, content_type="application/json")
    assert response.json()["memory"]["status"] == "nothing_to_commit"
    assert len(await sync_to_async(recorded)()) == 1


@pytest.mark.django_db(transaction=True)
async def test_a_turn_that_fails_records_nothing():
    user, client = await signed_in("marie")

    response = await client.post("/ask/", {"question": f"[[fail]] remember: {FACT}"},
                                 content_type="application/json")

    assert response.status_code == 502
    assert not await MemoryDocument.objects.filter(user_id=user.pk).aexists()
    assert await sync_to_async(recorded)() == []


@pytest.mark.django_db(transaction=True)
def test_a_change_rolled_back_records_nothing():
    user = get_user_model().objects.create_user("marie", password="marie-pass-123")

    with pytest.raises(RuntimeError), transaction.atomic():
        store.commit_operations(user_id=user.pk, operations=[Operation(target="user", action="add", content=FACT)])
        assert recorded() == [], "not before the outer transaction commits"
        raise RuntimeError("the caller's transaction fails")

    assert recorded() == []
    assert not MemoryDocument.objects.filter(user_id=user.pk).exists()

    # The same change, committed: recorded once, after the commit.
    with transaction.atomic():
        result = store.commit_operations(user_id=user.pk, operations=[
            Operation(target="user", action="add", content=FACT)])
        assert recorded() == []
    assert recorded() == [{"user_id": user.pk, "change_id": result.change_id, "actor": "agent",
                           "documents": ["user"], "operation_count": 1}]
