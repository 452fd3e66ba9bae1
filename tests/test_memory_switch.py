"""The person's own memory switch ("Use memory in chats", issue 12 item 1).

Off: the person's turns neither read nor write memory and the model is not
offered the tool; what is stored is kept, visible and editable; each change
of the switch is an audit event; the deployment flag still wins. A switch
turned off while a turn runs saves nothing of that turn (the commit reads it
under the person's lock). Driven by a scripted OpenAI-compatible model over
real HTTP and a real database.
"""
import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from agentmemory import preferences, services, store
from agentmemory.models import Actor, MemoryEvent, MemoryPreference, Outcome
from agentmemory.rules import Operation
from agentmemory.words import event_changes, event_reason, outcome_name
from chat.turns import run_turn
from tests.chat_helpers import aseed, db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import dynamic, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = "/api/memory/settings/"
SENTINEL = "Keeps bees on the roof"
CALL = {"operations": [{"target": "memory", "action": "add", "content": "The build runs on Debian bookworm"}]}


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def switch_events(user) -> list[str]:
    return list(MemoryEvent.objects.filter(user=user, outcome__in=[Outcome.MEMORY_ON, Outcome.MEMORY_OFF])
                .order_by("id").values_list("outcome", flat=True))


# --- the API ----------------------------------------------------------------------------


def test_memory_is_on_by_default_and_the_deployment_flag_is_reported(user):
    response = client_for(user).get(SETTINGS)

    assert response.status_code == 200
    assert response.json() == {"use_memory": True, "save_mode": "auto", "agent_memory_enabled": True}
    with override_settings(AGENTMEMORY={"ENABLED": False}):
        assert client_for(user).get(SETTINGS).json() == {"use_memory": True, "save_mode": "auto",
                                                         "agent_memory_enabled": False}


def test_turning_memory_off_and_on_is_audited_once_per_change(user):
    client = client_for(user)

    off = client.put(SETTINGS, {"use_memory": False}, format="json")
    again = client.put(SETTINGS, {"use_memory": False}, format="json")
    on = client.put(SETTINGS, {"use_memory": True}, format="json")

    assert off.status_code == again.status_code == on.status_code == 200
    assert off.json()["use_memory"] is False and on.json()["use_memory"] is True
    assert switch_events(user) == [Outcome.MEMORY_OFF, Outcome.MEMORY_ON]
    event = MemoryEvent.objects.filter(user=user, outcome=Outcome.MEMORY_OFF).get()
    assert event.actor == Actor.USER and event.operation_count == 0
    # History reads it in plain words.
    assert outcome_name(event.outcome) == "Setting changed"
    assert "Use memory in chats" in event_changes(event.outcome, event.actions, event.targets)
    assert event_reason(event.outcome, event.error_code) == ""


@pytest.mark.parametrize("body, code", [
    ({}, "invalid_use_memory"),
    ({"use_memory": "false"}, "invalid_use_memory"),
    ({"use_memory": 0}, "invalid_use_memory"),
    ({"use_memory": None}, "invalid_use_memory"),
    ({"use_memory": False, "user_id": 2}, "unknown_argument"),
    ([False], "invalid_body"),
])
def test_a_bad_settings_body_is_refused_clearly_and_changes_nothing(user, body, code):
    response = client_for(user).put(SETTINGS, body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == code and response.json()["detail"]
    assert preferences.use_memory(user_id=user.pk) is True
    assert not MemoryPreference.objects.filter(user=user).exists() and switch_events(user) == []


def test_settings_need_a_signed_in_person(db):
    assert APIClient().get(SETTINGS).status_code == 403
    assert APIClient().put(SETTINGS, {"use_memory": False}, format="json").status_code == 403


def test_one_persons_switch_is_theirs_alone(user, other_user):
    client_for(user).put(SETTINGS, {"use_memory": False}, format="json")

    assert client_for(other_user).get(SETTINGS).json()["use_memory"] is True
    assert preferences.use_memory(user_id=other_user.pk) is True


def test_stored_memory_stays_readable_and_editable_with_the_switch_off(user):
    services.set_use_memory(user_id=user.pk, use_memory=False)
    client = client_for(user)

    added = client.post("/api/memory/operations/",
                        {"operations": [{"target": "user", "action": "add", "content": SENTINEL}]}, format="json")

    assert added.status_code == 200
    assert client.get("/api/memory/").json()["documents"]["user"]["entries"] == [SENTINEL]
    assert client.delete("/api/memory/").status_code == 200


# --- turns ------------------------------------------------------------------------------


async def test_a_turn_with_the_switch_off_neither_reads_nor_writes_and_offers_no_tool(user, scripted_model):
    await aseed(user, user_entries=[SENTINEL])
    await db(services.set_use_memory, user_id=user.pk, use_memory=False)
    scripted_model.push(text("Hello."))

    result = await run_turn(user=user, content="hello")

    assert result.memory.status == "disabled" and result.memory.code == "memory_off"
    assert "off in your settings" in result.memory.message
    [request] = scripted_model.requests
    assert "tools" not in request
    system = request["messages"][0]["content"]
    leaked = SENTINEL in system or "USER PROFILE" in system
    assert not leaked, "memory reached the prompt with the switch off"
    assert (await snapshot_of(user)).user == (SENTINEL,)


async def test_a_call_written_as_text_cannot_write_with_the_switch_off(user, scripted_model):
    await db(services.set_use_memory, user_id=user.pk, use_memory=False)
    scripted_model.push(tool_call(CALL), text("Noted."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "disabled"
    assert (await snapshot_of(user)).memory == ()


async def test_turning_memory_back_on_restores_reads_and_the_tool(user, scripted_model):
    await aseed(user, user_entries=[SENTINEL])
    await db(services.set_use_memory, user_id=user.pk, use_memory=False)
    await db(services.set_use_memory, user_id=user.pk, use_memory=True)
    scripted_model.push(tool_call(CALL), text("Saved."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "committed"
    first = scripted_model.requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == ["memory_update", "conversation_search"]
    shown = SENTINEL in first["messages"][0]["content"]
    assert shown, "memory is in the prompt again"


async def test_switching_off_while_a_turn_runs_saves_nothing_of_it(user, scripted_model):
    def switch_off_then_answer(body):
        try:
            preferences.set_use_memory(user_id=user.pk, use_memory=False)
        finally:
            connection.close()
        return text("Saved.")

    scripted_model.push(tool_call(CALL), dynamic(switch_off_then_answer))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "discarded" and result.memory.code == "switched_off"
    assert result.memory.message == "Memory was turned off during this reply, so its change was not saved."
    assert (await snapshot_of(user)).memory == ()
    [event] = await db(lambda: list(MemoryEvent.objects.filter(user=user, outcome=Outcome.DISCARDED)))
    assert event.error_code == "switched_off" and event.operation_count == 1
    assert event_reason(event.outcome, event.error_code) == result.memory.message


async def test_the_deployment_flag_wins_over_the_switch(user, scripted_model, settings):
    settings.AGENTMEMORY = {**getattr(settings, "AGENTMEMORY", {}), "ENABLED": False}
    scripted_model.push(text("Hello."))

    result = await run_turn(user=user, content="hello")

    assert result.memory.status == "disabled" and result.memory.code == ""
    assert "tools" not in scripted_model.requests[0]


# --- the commit's lock reads the switch ------------------------------------------------


def test_only_the_agents_commit_is_refused_with_the_switch_off(user):
    preferences.set_use_memory(user_id=user.pk, use_memory=False)
    add = [Operation(target="memory", action="add", content="Ships weekly.")]

    with pytest.raises(store.MemoryTurnedOff):
        store.commit_operations(user_id=user.pk, operations=add, actor=Actor.AGENT)
    assert store.load_snapshot(user_id=user.pk).memory == ()

    for actor in (Actor.USER, Actor.STAFF, Actor.SYSTEM):
        store.commit_operations(user_id=user.pk, operations=add, actor=actor)
    assert store.load_snapshot(user_id=user.pk).memory == ("Ships weekly.",)


def test_the_switch_of_an_unknown_account_cannot_be_set(db):
    with pytest.raises(store.UnknownUser):
        preferences.set_use_memory(user_id=987654, use_memory=False)
    assert not MemoryPreference.objects.exists()


def test_the_switch_goes_with_the_account(user):
    preferences.set_use_memory(user_id=user.pk, use_memory=False)

    user.delete()

    assert not MemoryPreference.objects.exists()


# --- the chat page ---------------------------------------------------------------------


def test_the_chat_page_shows_the_switch_and_usage_from_load(user, client):
    store.commit_operations(user_id=user.pk, operations=[Operation(target="user", action="add", content="x" * 1300)],
                            actor=Actor.SYSTEM)
    preferences.set_use_memory(user_id=user.pk, use_memory=False)
    client.force_login(user)

    response = client.get("/")

    assert response.context["use_memory"] is False
    usage = response.context["memory_usage"]
    assert usage["user"]["level"] == "full" and usage["memory"]["level"] == "ok"
    assert usage["user"]["percent"] >= 90 and usage["memory"]["percent"] == 0
