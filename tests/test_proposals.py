"""Ask before saving (issue 15, part 1): a finished turn's change becomes a proposal.

Driven by a scripted OpenAI-compatible model over real HTTP and a real
database (SQLite and PostgreSQL): only a complete answer proposes; saving
goes through the locked commit with the stale-match rule, all or nothing;
a proposal is memory content (erase, export, retention, staff permission).
"""
import asyncio
import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from agentmemory import preferences, proposals, services, store
from agentmemory.models import Actor, MemoryEvent, MemoryProposal, Outcome
from agentmemory.rules import MemoryValidationError, Operation
from chat.models import Conversation
from chat.turns import TurnFailed, run_turn
from tests.chat_helpers import aseed, db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import dynamic, error, scripted_model, text, tool_call  # noqa: F401
from tests.test_telemetry_turns import spans  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The build runs on Debian bookworm"
ADD = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}


def ask(user) -> None:
    preferences.set_save_mode(user_id=user.pk, save_mode="ask")


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def proposal_count(user) -> int:
    return MemoryProposal.objects.filter(user=user).count()


def propose(user, operations) -> int:
    return proposals.create(user_id=user.pk, operations=operations)


# --- a turn in ask mode -------------------------------------------------------------------


async def test_a_finished_turn_proposes_instead_of_saving(user, scripted_model):
    await db(ask, user)
    scripted_model.push(tool_call(ADD), text("I proposed that."))

    frames = []

    async def emit(frame):
        frames.append(frame)

    result = await run_turn(user=user, content="our build runs on bookworm", emit=emit)

    assert result.memory.status == "proposed" and result.memory.proposal_id
    assert "nothing is saved until you choose Save" in result.memory.message
    # The person's tool note says the change waits for them, not that it will be saved.
    [note] = [frame["message"] for frame in frames if frame.get("type") == "tool"]
    assert note == "Memory: 1 change ready for you to save or discard when this reply completes."
    assert (await snapshot_of(user)).memory == ()
    [proposal] = await db(lambda: list(MemoryProposal.objects.filter(user=user)))
    assert proposal.pk == result.memory.proposal_id and proposal.operation_count == 1
    assert proposal.conversation_id == result.conversation_id and proposal.turn_id == result.turn_id
    assert await db(lambda: MemoryEvent.objects.filter(user=user, outcome=Outcome.PROPOSED).count()) == 1
    # The model was told the change is proposed, not saved.
    tool_reply = scripted_model.requests[1]["messages"][-1]
    told = tool_reply["role"] == "tool" and "proposed to them, not saved" in tool_reply["content"]
    assert told, "the tool reply must tell the model the change is only proposed"


async def test_the_deployment_default_can_be_ask(user, scripted_model, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "DEFAULT_SAVE_MODE": "ask"}
    scripted_model.push(tool_call(ADD), text("Proposed."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "proposed"
    assert (await db(preferences.load, user_id=user.pk)).save_mode == "ask"


@pytest.mark.parametrize("how", ["model_error", "incomplete"])
async def test_a_turn_that_does_not_finish_proposes_nothing(user, scripted_model, how):
    await db(ask, user)
    second = error(500) if how == "model_error" else text("Proposed, and", finish_reason="length")
    scripted_model.push(tool_call(ADD), second)

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm")

    assert failure.value.memory.status == "discarded"
    assert await db(proposal_count, user) == 0


async def test_a_cancelled_turn_proposes_nothing(user, scripted_model):
    await db(ask, user)
    cancel = threading.Event()

    def stop_then_answer(body):
        cancel.set()
        return text("Proposed.")

    scripted_model.push(tool_call(ADD), dynamic(stop_then_answer))

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="our build runs on bookworm", cancel_event=cancel)

    assert failure.value.code == "cancelled"
    assert await db(proposal_count, user) == 0


async def test_a_disconnect_mid_turn_proposes_nothing(user, scripted_model):
    await db(ask, user)
    scripted_model.push(tool_call(ADD), text("Proposed " * 50, delay=0.02))

    task = asyncio.ensure_future(run_turn(user=user, content="our build runs on bookworm"))
    while len(scripted_model.requests) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await db(proposal_count, user) == 0


async def test_switching_memory_off_mid_turn_proposes_nothing(user, scripted_model):
    await db(ask, user)

    def switch_off_then_answer(body):
        try:
            preferences.set_use_memory(user_id=user.pk, use_memory=False)
        finally:
            connection.close()
        return text("Proposed.")

    scripted_model.push(tool_call(ADD), dynamic(switch_off_then_answer))

    result = await run_turn(user=user, content="our build runs on bookworm")

    assert result.memory.status == "discarded" and result.memory.code == "switched_off"
    assert await db(proposal_count, user) == 0


# --- saving and discarding ------------------------------------------------------------


def test_saving_a_proposal_commits_it_once(user):
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])
    client = client_for(user)

    saved = client.post(f"/api/memory/proposals/{proposal_id}/save/", {}, format="json")
    again = client.post(f"/api/memory/proposals/{proposal_id}/save/", {}, format="json")

    assert saved.status_code == 200 and saved.json()["outcome"] == "committed"
    assert saved.json()["documents"]["memory"]["entries"] == [FACT]
    assert again.status_code == 404 and again.json()["code"] == "proposal_not_found"
    assert proposal_count(user) == 0
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED, actor=Actor.USER).count() == 1


def test_a_stale_proposal_is_rejected_clearly_and_changes_nothing(user):
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM,
                            operations=[Operation(target="memory", action="add", content="Deploys on Fridays.")])
    proposal_id = propose(user, [
        Operation(target="memory", action="add", content="Uses Django 5.2."),
        Operation(target="memory", action="replace", match="Fridays", content="Deploys on Mondays.",
                  entry="Deploys on Fridays."),
    ])
    # The person corrects the entry on the memory page before saving the proposal.
    services.correct_entry(user_id=user.pk, target="memory", entry="Deploys on Fridays.",
                           content="Deploys on Thursdays.")

    response = client_for(user).post(f"/api/memory/proposals/{proposal_id}/save/", {}, format="json")

    assert response.status_code == 400 and response.json()["code"] == "conflict"
    # Nothing half-applied: not even the add that came first.
    assert store.load_snapshot(user_id=user.pk).memory == ("Deploys on Thursdays.",)
    assert proposal_count(user) == 1  # kept, for the person to discard
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.REJECTED, error_code="conflict").count() == 1


def test_a_person_can_edit_an_added_fact_before_saving(user):
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])

    response = client_for(user).post(f"/api/memory/proposals/{proposal_id}/save/",
                                     {"edits": [{"position": 1, "content": "The build runs on Debian trixie"}]},
                                     format="json")

    assert response.status_code == 200
    assert store.load_snapshot(user_id=user.pk).memory == ("The build runs on Debian trixie",)


@pytest.mark.parametrize("body, code", [
    ({"edits": [{"position": 2, "content": "x"}]}, "invalid_edit"),
    ({"edits": [{"position": 1, "content": "   "}]}, "empty_entry"),
    ({"edits": [{"position": "1", "content": "x"}]}, "invalid_edit"),
    ({"edits": "x"}, "invalid_edit"),
    ({"user_id": 1}, "unknown_argument"),
    ([], "invalid_body"),
])
def test_bad_edits_are_refused_and_change_nothing(user, body, code):
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])

    response = client_for(user).post(f"/api/memory/proposals/{proposal_id}/save/", body, format="json")

    assert response.status_code == 400 and response.json()["code"] == code
    assert store.load_snapshot(user_id=user.pk).memory == () and proposal_count(user) == 1


def test_only_an_added_fact_can_be_edited(user):
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM,
                            operations=[Operation(target="memory", action="add", content="Deploys on Fridays.")])
    proposal_id = propose(user, [Operation(target="memory", action="remove", match="Fridays",
                                           entry="Deploys on Fridays.")])

    response = client_for(user).post(f"/api/memory/proposals/{proposal_id}/save/",
                                     {"edits": [{"position": 1, "content": "x"}]}, format="json")

    assert response.status_code == 400 and response.json()["code"] == "invalid_edit"
    assert store.load_snapshot(user_id=user.pk).memory == ("Deploys on Fridays.",)


def test_discarding_drops_it_without_saving(user):
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])
    client = client_for(user)

    assert client.delete(f"/api/memory/proposals/{proposal_id}/").status_code == 204
    assert client.delete(f"/api/memory/proposals/{proposal_id}/").status_code == 404
    assert proposal_count(user) == 0 and store.load_snapshot(user_id=user.pk).memory == ()
    event = MemoryEvent.objects.get(user=user, outcome=Outcome.DISCARDED)
    assert event.actor == Actor.USER and event.error_code == "proposal_discarded"


def test_one_persons_proposals_are_invisible_to_another(user, other_user):
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])
    bob = client_for(other_user)

    assert bob.get("/api/memory/proposals/").json() == {"proposals": []}
    assert bob.get(f"/api/memory/proposals/{proposal_id}/").status_code == 404
    assert bob.post(f"/api/memory/proposals/{proposal_id}/save/", {}, format="json").status_code == 404
    assert bob.delete(f"/api/memory/proposals/{proposal_id}/").status_code == 404
    assert proposal_count(user) == 1 and store.load_snapshot(user_id=other_user.pk).memory == ()


def test_the_list_shows_what_each_proposal_would_change(user):
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM,
                            operations=[Operation(target="user", action="add", content="Uses vim.")])
    propose(user, [Operation(target="user", action="replace", match="vim", content="Uses helix.", entry="Uses vim.")])

    [item] = client_for(user).get("/api/memory/proposals/").json()["proposals"]

    assert item["operations"] == [{"position": 1, "target": "user", "action": "replace",
                                   "content": "Uses helix.", "entry": "Uses vim.", "reason": "", "why": "",
                                   "expires": None, "said": None, "you_said": None}]
    assert item["expires_at"] > item["created_at"]


def test_two_proposals_saved_one_after_another_keep_both_valid_changes(user):
    first = propose(user, [Operation(target="memory", action="add", content="Uses Django 5.2.")])
    second = propose(user, [Operation(target="memory", action="add", content="Ships weekly.")])

    proposals.save(user_id=user.pk, proposal_id=first)
    proposals.save(user_id=user.pk, proposal_id=second)

    assert store.load_snapshot(user_id=user.pk).memory == ("Uses Django 5.2.", "Ships weekly.")


def test_two_proposals_saved_concurrently_keep_both_or_reject_one_clearly(user, postgres_only):
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM,
                            operations=[Operation(target="memory", action="add", content="Deploys on Fridays.")])
    edits = [propose(user, [Operation(target="memory", action="replace", match="Fridays", content=f"Deploys on {day}.",
                                      entry="Deploys on Fridays.")]) for day in ("Mondays", "Tuesdays")]
    adds = [propose(user, [Operation(target="memory", action="add", content=f"Fact {n}.")]) for n in range(4)]
    barrier = threading.Barrier(len(edits) + len(adds))
    outcomes = {}

    def save(proposal_id):
        barrier.wait()
        try:
            proposals.save(user_id=user.pk, proposal_id=proposal_id)
            outcomes[proposal_id] = "saved"
        except MemoryValidationError as exc:
            outcomes[proposal_id] = exc.code
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(pid,)) for pid in edits + adds]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    memory = store.load_snapshot(user_id=user.pk).memory
    assert all(outcomes[pid] == "saved" for pid in adds)
    assert all(f"Fact {n}." in memory for n in range(4))
    assert sorted(outcomes[pid] for pid in edits) == ["conflict", "saved"]
    assert sum(entry in memory for entry in ("Deploys on Mondays.", "Deploys on Tuesdays.")) == 1
    assert "Deploys on Fridays." not in memory
    assert proposal_count(user) == 1  # the rejected one stays for the person


# --- memory content: expiry, erase, export, deletion ------------------------------------


def test_expired_proposals_cannot_be_saved_and_the_command_deletes_only_them(user, capsys):
    old = propose(user, [Operation(target="memory", action="add", content="Old fact.")])
    fresh = propose(user, [Operation(target="memory", action="add", content=FACT)])
    MemoryProposal.objects.filter(pk=old).update(expires_at=timezone.now() - timedelta(seconds=1))
    client = client_for(user)

    assert [p["id"] for p in client.get("/api/memory/proposals/").json()["proposals"]] == [fresh]
    assert client.post(f"/api/memory/proposals/{old}/save/", {}, format="json").status_code == 404
    call_command("memory_expire_proposals")
    call_command("memory_expire_proposals")  # safe to run again

    assert list(MemoryProposal.objects.values_list("pk", flat=True)) == [fresh]
    out = capsys.readouterr().out
    assert "Deleted 1 expired memory proposal." in out and "Deleted 0 expired memory proposals." in out
    assert FACT not in out


def test_the_ttl_setting_sets_the_expiry(user):
    with override_settings(AGENTMEMORY={"ENABLED": True, "PROPOSAL_TTL_DAYS": 2}):
        proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])
    proposal = MemoryProposal.objects.get(pk=proposal_id)

    assert timedelta(days=2) - (proposal.expires_at - proposal.created_at) < timedelta(seconds=5)


def test_erase_deletes_pending_proposals(user):
    propose(user, [Operation(target="memory", action="add", content=FACT)])

    assert client_for(user).delete("/api/memory/").status_code == 200

    assert proposal_count(user) == 0


def test_the_export_includes_pending_proposals(user):
    propose(user, [Operation(target="memory", action="add", content=FACT)])

    body = client_for(user).get("/api/memory/export/").json()

    [item] = body["proposals"]
    assert item["operations"][0]["content"] == FACT


def test_deleting_the_conversation_keeps_the_proposal_and_drops_the_link(user):
    conversation = Conversation.objects.create(user=user, title="Trip planning")
    proposal_id = proposals.create(user_id=user.pk, conversation_id=conversation.pk, turn_id="t1",
                                   operations=[Operation(target="memory", action="add", content=FACT)])

    client_for(user).delete(f"/api/conversations/{conversation.pk}/")

    proposal = MemoryProposal.objects.get(pk=proposal_id)
    assert proposal.conversation_id is None and proposal.operations[0]["content"] == FACT


def test_an_account_deletion_takes_its_proposals(user):
    propose(user, [Operation(target="memory", action="add", content=FACT)])

    user.delete()

    assert not MemoryProposal.objects.exists()


def test_no_proposal_for_a_deactivated_account(user):
    user.is_active = False
    user.save()

    with pytest.raises(store.InactiveUser):
        propose(user, [Operation(target="memory", action="add", content=FACT)])
    assert proposal_count(user) == 0


# --- settings ------------------------------------------------------------------------------


def test_save_mode_through_the_settings_api(user):
    client = client_for(user)

    assert client.get("/api/memory/settings/").json()["save_mode"] == "auto"
    changed = client.put("/api/memory/settings/", {"save_mode": "ask"}, format="json")
    bad = client.put("/api/memory/settings/", {"save_mode": "sometimes"}, format="json")

    assert changed.status_code == 200 and changed.json()["save_mode"] == "ask"
    assert changed.json()["use_memory"] is True
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_save_mode"
    assert preferences.load(user_id=user.pk).save_mode == "ask"
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.ASK_FIRST).count() == 1


# --- staff --------------------------------------------------------------------------------


def test_staff_without_the_content_permission_never_see_a_proposals_text(user, make_user, client):
    from django.contrib.auth.models import Permission

    staff = make_user("support", "pw-support-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_memoryproposal"))
    proposal_id = propose(user, [Operation(target="memory", action="add", content=FACT)])
    client.force_login(staff)

    pages = [client.get("/admin/agentmemory/memoryproposal/"),
             client.get(f"/admin/agentmemory/memoryproposal/{proposal_id}/change/"),
             client.get("/admin/agentmemory/memoryproposal/?q=alice")]

    assert all(page.status_code == 200 for page in pages)
    leaked = any(b"bookworm" in page.content for page in pages)
    assert not leaked, "a proposal's text reached staff without the content permission"
    assert b"alice" in pages[0].content
    # With the content permission the same page shows it (so the check above can fail).
    staff.user_permissions.add(Permission.objects.get(codename="view_memory_content"))
    client.force_login(make_user("support2", "pw-support-123", is_staff=True))
    reviewer = type(staff).objects.get(username="support2")
    reviewer.user_permissions.add(*Permission.objects.filter(codename__in=["view_memoryproposal", "view_memory_content"]))
    shown = client.get(f"/admin/agentmemory/memoryproposal/{proposal_id}/change/")
    assert shown.status_code == 200 and b"bookworm" in shown.content


async def test_open_pages_hear_of_a_new_or_discarded_proposal(user, scripted_model):
    from tests.chat_helpers import connect, receive_until

    await db(ask, user)
    page = await connect(user)
    scripted_model.push(tool_call(ADD), text("Proposed."))

    result = await run_turn(user=user, content="our build runs on bookworm")
    created = await receive_until(page, "memory_changed")
    await db(services.discard_proposal, user_id=user.pk, proposal_id=result.memory.proposal_id)
    discarded = await receive_until(page, "memory_changed")
    await page.disconnect()

    assert created[-1]["usage"]["memory"]["entries"] == 0 and discarded[-1]["type"] == "memory_changed"
    assert not any("bookworm" in str(frame) for frame in created + discarded)


async def test_a_proposal_never_reaches_logs_or_spans(user, scripted_model, caplog, spans):
    import logging

    sentinel = "Sentinel-proposal-7731"
    await db(ask, user)
    caplog.set_level(logging.DEBUG)
    scripted_model.push(tool_call({"operations": [{"target": "memory", "action": "add", "content": sentinel}]}),
                        text("Proposed."))

    result = await run_turn(user=user, content="remember the sentinel")
    await db(services.save_proposal, user_id=user.pk, proposal_id=result.memory.proposal_id)

    assert result.memory.status == "proposed" and caplog.records
    logged = any(sentinel in record.getMessage() or sentinel in str(record.__dict__) for record in caplog.records)
    assert not logged, "a proposal's text reached the logs"
    traced = any(sentinel in span.to_json(indent=None) for span in spans.exported())
    assert not traced, "a proposal's text reached a span"
    assert spans.named("memory.turn"), "the turn was traced (so the check above looked at real spans)"
