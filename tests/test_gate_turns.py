"""Trusted code decides, end to end: a scripted model over real HTTP proposes,
the turn (the service behind the socket and the REST API) commits, asks, or
refuses. On SQLite and on PostgreSQL.

- a secret seen in the person's message never reaches memory, whole or in part;
- an unlabelled high-entropy token is refused by the scan;
- each transient kind becomes a question (a proposal), not a commit;
- the person's explicit command is never diverted;
- an edit nobody asked for becomes a question showing the entry before and after;
- part doubted, part not: one transaction commits the rest and proposes the doubt;
- the gate switched off commits what it would have asked about.
"""
import json
import threading

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import gate, proposals
from agentmemory.models import MemoryProposal
from agentmemory.rules import Snapshot
from chat.turns import TurnFailed, run_turn
from tests.chat_helpers import aseed, db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def ops(*operations) -> dict:
    return {"operations": list(operations)}


def add(content, target="memory") -> dict:
    return {"target": target, "action": "add", "content": content}


def tool_reply(server, request: int = 1) -> dict:
    return json.loads(server.requests[request]["messages"][-1]["content"])


async def pending(user):
    return await db(proposals.pending, user_id=user.pk)


# --- no secret is ever stored ------------------------------------------------------------------


async def test_a_password_from_the_message_is_refused_even_as_a_fragment(user, scripted_model):
    scripted_model.push(tool_call(ops(add("Staging DB password starts with Tr0ub4dor"))),
                        text("I won't store passwords."))

    result = await run_turn(user=user, content="Remember the staging database password: Tr0ub4dor&3xyz")

    assert [event.code for event in result.tool_events] == ["threat_secret"]
    assert "Never store credentials" in tool_reply(scripted_model)["error"]
    assert result.memory.status == "nothing_to_commit"
    assert await snapshot_of(user) == Snapshot()
    assert await pending(user) == []


async def test_a_secret_given_earlier_is_refused_when_the_next_message_says_remember_it(user, scripted_model):
    scripted_model.push(text("Got it."))
    first = await run_turn(user=user, content="The VPN password is quokka-7-Lantern-92")
    scripted_model.push(tool_call(ops(add("VPN password: quokka-7-Lantern-92", "user"))), text("Sorry, no."))

    second = await run_turn(user=user, content="Remember it please.", conversation_id=first.conversation_id)

    assert [event.code for event in second.tool_events] == ["threat_secret"]
    assert await snapshot_of(user) == Snapshot()


async def test_an_unlabelled_high_entropy_key_is_refused(user, scripted_model):
    scripted_model.push(tool_call(ops(add("Deploy uses wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vLm2Tr"))), text("No."))

    result = await run_turn(user=user, content="Remember this for deploys: wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vLm2Tr")

    assert [event.code for event in result.tool_events] == ["threat_secret"]
    assert await snapshot_of(user) == Snapshot()


# --- unsure saves become a question ---------------------------------------------------------------


@pytest.mark.parametrize(("message", "entry", "reason"), [
    ("I'm fixing the login bug in our app, the form now submits.", "Currently fixing the login bug; the form submits",
     gate.TRANSIENT),
    ("I got ModuleNotFoundError for yaml, so I installed pyyaml.",
     "Hit ModuleNotFoundError: No module named 'yaml' and had to pip install pyyaml", gate.TRANSIENT),
    ("Our build log ended up at /tmp/build-7/out.log.", "Build log is at /tmp/build-7/out.log", gate.TRANSIENT),
    ("I think we covered a lot about Django signals.", "The user asked about Django signals and we discussed receivers",
     gate.CHAT_SUMMARY),
    ("I like how you explained that.", "I explained Django signals to the user", gate.ASSISTANT_NOTE),
])
async def test_each_transient_kind_becomes_a_question(user, scripted_model, message, entry, reason):
    scripted_model.push(tool_call(ops(add(entry))), text("Offered to remember that."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "proposed" and result.memory.code == "asked"
    assert "Save" in result.memory.message and "asked" not in result.memory.message
    assert tool_reply(scripted_model)["asked"] == [{"position": 1, "reason": reason}]
    assert await snapshot_of(user) == Snapshot()
    (proposal,) = await pending(user)
    assert proposal.id == result.memory.proposal_id
    assert [(op.content, op.reason) for op in proposal.operations] == [(entry, reason)]


async def test_an_explicit_command_is_never_diverted(user, scripted_model):
    scripted_model.push(tool_call(ops(add("Currently migrating the billing service to Go"))), text("Saved."))

    result = await run_turn(user=user, content="remember: I'm currently migrating the billing service to Go")

    assert result.memory.status == "committed" and result.memory.proposal_id is None
    assert (await snapshot_of(user)).memory == ("Currently migrating the billing service to Go",)


async def test_an_edit_on_a_question_becomes_a_question_with_before_and_after(user, scripted_model):
    await aseed(user, user_entries=["Prefers Python for data work and Go for services"])
    scripted_model.push(
        tool_call(ops({"target": "user", "action": "replace", "match": "Python", "content": "Python for data"})),
        text("You prefer Python for data work."),
    )

    result = await run_turn(user=user, content="Which language do I prefer for data work?")

    assert result.memory.status == "proposed" and result.memory.code == "asked"
    assert (await snapshot_of(user)).user == ("Prefers Python for data work and Go for services",)
    (proposal,) = await pending(user)
    (operation,) = proposal.operations
    assert (operation.entry, operation.content, operation.reason) == (
        "Prefers Python for data work and Go for services", "Python for data", gate.UNASKED_EDIT)


async def test_a_correction_the_person_asked_for_commits(user, scripted_model):
    await aseed(user, user_entries=["Writes services in Go"])
    scripted_model.push(
        tool_call(ops({"target": "user", "action": "replace", "match": "Go", "content": "Writes services in Rust"})),
        text("Updated."),
    )

    result = await run_turn(user=user, content="Actually I write services in Rust now.")

    assert result.memory.status == "committed" and result.memory.proposal_id is None
    assert (await snapshot_of(user)).user == ("Writes services in Rust",)


async def test_an_add_on_a_question_that_states_nothing_is_refused(user, scripted_model):
    scripted_model.push(tool_call(ops(add("Uses Python", "user"))), text("Use reversed() or slicing."))

    result = await run_turn(user=user, content="How do I reverse a list in Python?")

    assert [event.code for event in result.tool_events] == ["not_stated"]
    assert result.memory.status == "nothing_to_commit"
    assert await snapshot_of(user) == Snapshot() and await pending(user) == []


async def test_part_doubted_commits_the_rest_and_proposes_the_doubt_in_one_turn(user, scripted_model):
    scripted_model.push(
        tool_call(ops(add("Deploys happen on Fridays"), add("Currently fixing the flaky deploy test"))),
        text("Noted."),
    )

    result = await run_turn(user=user, content="We deploy on Fridays; I'm fixing the flaky deploy test today.")

    assert result.memory.status == "committed" and result.memory.code == "partly_asked"
    assert result.memory.change_id is not None and result.memory.proposal_id is not None
    assert (await snapshot_of(user)).memory == ("Deploys happen on Fridays",)
    (proposal,) = await pending(user)
    assert [op.content for op in proposal.operations] == ["Currently fixing the flaky deploy test"]
    # Saved by the person's hand, it joins memory.
    await db(proposals.save, user_id=user.pk, proposal_id=proposal.id)
    assert (await snapshot_of(user)).memory == ("Deploys happen on Fridays", "Currently fixing the flaky deploy test")


async def test_a_cancelled_commit_leaves_neither_the_commit_nor_the_question(user, scripted_model, monkeypatch):
    cancel = threading.Event()
    scripted_model.push(
        tool_call(ops(add("Deploys happen on Fridays"), add("Currently fixing the flaky deploy test"))),
        text("Noted."),
    )
    original = proposals.create

    def create_then_cancel(**kwargs):  # the cancel arrives inside the transaction, after the commit's writes
        cancel.set()
        return original(**kwargs)

    monkeypatch.setattr(proposals, "create", create_then_cancel)
    with pytest.raises(TurnFailed) as failed:
        await run_turn(user=user, content="We deploy on Fridays; I'm fixing the flaky deploy test today.",
                       cancel_event=cancel)
    assert failed.value.code == "cancelled"
    assert await snapshot_of(user) == Snapshot()
    assert await db(MemoryProposal.objects.filter(user=user).count) == 0


async def test_with_the_gate_off_the_change_commits(user, scripted_model, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "GATE": False}
    scripted_model.push(tool_call(ops(add("Currently fixing the login bug"))), text("Noted."))

    result = await run_turn(user=user, content="I'm fixing the login bug.")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == ("Currently fixing the login bug",)


# --- over the REST API: the question the chat shows ------------------------------------------------


def test_the_rest_turn_answers_the_question_and_its_plain_reason(user, scripted_model):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    scripted_model.push(tool_call(ops(add("Currently working on the CSV importer"))), text("Offered."))

    response = client.post("/api/chat/turns/", {"content": "I'm working on the CSV importer."}, format="json")

    assert response.status_code == 200, response.status_code
    memory = response.json()["memory"]
    assert memory["status"] == "proposed" and memory["code"] == "asked"
    proposal = client.get(f"/api/memory/proposals/{memory['proposal_id']}/").json()
    (operation,) = proposal["operations"]
    assert operation["reason"] == gate.TRANSIENT
    assert operation["why"] == gate.REASONS[gate.TRANSIENT]
    saved = client.post(f"/api/memory/proposals/{proposal['id']}/save/", {}, format="json")
    assert saved.status_code == 200, saved.status_code
    assert MemoryProposal.objects.filter(user=user).count() == 0
