"""Secrets by value, on every path, through real chat turns: a scripted model over real HTTP proposes, the
turn refuses. On SQLite and on PostgreSQL.

- a password given in an earlier chat, found by conversation_search in a later turn and copied by the
  model into memory_update, is refused (every tool result of the turn is a source of secrets);
- a password given in French ("retiens que mon mot de passe du VPN est ...") is refused;
- a secret re-spelled by the model (separators changed, underscores, reversed, hex, base64, URL-encoded,
  digits spelled out) is refused;
- an SSN, a bank PIN, a vault code, a locker combination and a security answer are refused when the model
  stores them, and never offered by the unsaved-statement question: nothing of them reaches the proposal
  table;
- Tidy up's "make room" never offers such a value again.

Assertions are booleans and codes: no secret value is printed.
"""
import base64
import json

import pytest

from agentmemory import proposals, store, tidy
from agentmemory.models import Actor, MemoryProposal
from agentmemory.rules import Operation, Snapshot
from agentmemory.testing.model_server import Say, ScriptedServer
from chat.search import TOOL_NAME as SEARCH_TOOL
from chat.turns import run_turn
from tests.chat_helpers import db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def add(content, target="memory") -> dict:
    return {"operations": [{"target": target, "action": "add", "content": content}]}


def tool_replies(server) -> list[dict]:
    """The tool replies the model read on its last request, in order."""
    return [json.loads(message["content"]) for message in server.requests[-1]["messages"]
            if message.get("role") == "tool"]


async def nothing_kept(user, *values: str) -> bool:
    """Memory is empty, nothing is pending, and no proposal row holds any of the values."""
    rows = await db(lambda: [json.dumps(row, ensure_ascii=False) for row in
                             MemoryProposal.objects.filter(user=user).values_list("operations", flat=True)])
    pending = await db(proposals.pending, user_id=user.pk)
    return (await snapshot_of(user) == Snapshot() and pending == []
            and not any(value in row for value in values for row in rows))


async def test_a_password_found_by_conversation_search_and_copied_into_memory_is_refused(user, scripted_model):
    scripted_model.push(text("Noted, I won't keep it in memory."))
    await run_turn(user=user, content="Home wifi password is swordfish99")
    scripted_model.push(tool_call({"query": "home wifi password"}, name=SEARCH_TOOL),
                        tool_call(add("Home wifi: swordfish99", "user")), text("I can't store that."))

    later = await run_turn(user=user, content="What was my home wifi again? Save it in memory this time.")

    searched, saved = tool_replies(scripted_model)
    assert searched["status"] == "found" and searched["result_count"] >= 1
    assert saved["success"] is False and saved["code"] == "threat_secret"
    assert later.memory.status == "nothing_to_commit"
    assert await nothing_kept(user, "swordfish99")


async def test_a_password_given_in_french_is_refused(user, scripted_model):
    scripted_model.push(tool_call(add("Mot de passe du VPN : Prune-Orage-5518", "user")), text("Je ne peux pas."))

    result = await run_turn(user=user, content="retiens que mon mot de passe du VPN est Prune-Orage-5518")

    [saved] = tool_replies(scripted_model)
    assert saved["success"] is False and saved["code"] == "threat_secret"
    assert result.memory.status == "nothing_to_commit"
    assert await nothing_kept(user, "Prune-Orage-5518", "5518")


SECRET = "Prune-Orage-5518"
RESPELLINGS = {
    "separators changed": "Prune Orage 5518",
    "underscores": "prune_orage_5518",
    "reversed": SECRET[::-1],
    "hex": SECRET.encode().hex(),
    "base64": base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
    "url-encoded": "".join(f"%{byte:02X}" for byte in SECRET.encode()),
    "digits spelled out": "Prune Orage five five one eight",
}


@pytest.mark.parametrize("spelling", RESPELLINGS.values(), ids=RESPELLINGS.keys())
async def test_a_secret_the_model_re_spells_is_refused(user, scripted_model, spelling):
    scripted_model.push(tool_call(add(f"Staging VPN: {spelling}")), text("I can't keep that."))

    result = await run_turn(user=user, content=f"Remember: the staging VPN password is {SECRET}")

    [saved] = tool_replies(scripted_model)
    assert saved["success"] is False and saved["code"] == "threat_secret"
    assert result.memory.status == "nothing_to_commit"
    assert await nothing_kept(user, spelling, SECRET)


OFFERS = {
    "ssn": ("My SSN is 078-05-1120.", "SSN: 078-05-1120", "078-05-1120"),
    "bank pin": ("I keep my bank PIN as 4821.", "Keeps their bank PIN as 4821", "4821"),
    "vault code": ("My vault code is 48213579.", "Vault code 48213579", "48213579"),
    "locker combination": ("My locker combination is 12-34-56.", "Locker combination: 12-34-56", "12-34-56"),
    "security answer": ("My security answer is Fluffy.", "Security answer: Fluffy", "Fluffy"),
}


@pytest.mark.parametrize(("message", "entry", "value"), OFFERS.values(), ids=OFFERS.keys())
async def test_a_sensitive_value_is_never_offered_by_the_unsaved_statement_question(
        user, scripted_model, message, entry, value):
    scripted_model.push(text("Thanks for telling me."))  # no memory call: trusted code would offer the statement

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "nothing_to_commit" and result.memory.proposal_id is None
    assert await nothing_kept(user, value)


@pytest.mark.parametrize(("message", "entry", "value"), OFFERS.values(), ids=OFFERS.keys())
async def test_a_sensitive_value_the_model_stores_is_refused(user, scripted_model, message, entry, value):
    scripted_model.push(tool_call(add(entry, "user")), text("I won't keep that."))

    result = await run_turn(user=user, content=message)

    [saved] = tool_replies(scripted_model)
    assert saved["success"] is False and saved["code"] == "threat_secret"
    assert result.memory.status == "nothing_to_commit"
    assert await nothing_kept(user, value)


@pytest.fixture
def tidy_model(settings):
    with ScriptedServer() as server:
        settings.OPENAI_API_KEY = "scripted"
        settings.OPENAI_BASE_URL = server.openai_url
        settings.OPENAI_MODEL = "scripted-primary"
        settings.OPENAI_FALLBACK_MODEL = ""
        settings.OPENAI_MAX_RETRIES = 0
        yield server
    assert server.errors == []


def test_make_room_never_offers_a_sensitive_value_again(user, tidy_model):
    store.commit_operations(user_id=user.pk, actor=Actor.USER, operations=[
        Operation(target="memory", action="add", content=entry)
        for entry in ("Uses vim for everything.", "uses VIM for everything", "Deploys to staging on Fridays.")])
    tidy_model.push(Say("Uses vim for all editing. [1,2]\nDeploys to staging on Fridays. [3]"))

    proposal_id = tidy.propose(user_id=user.pk, target="memory",
                               pending=["Vault code 48213579", "Uses Neovim as the editor."])

    [proposal] = [p for p in proposals.pending(user_id=user.pk) if p.id == proposal_id]
    assert [op.content for op in proposal.operations if op.action == "add"] == ["Uses Neovim as the editor."]
    assert not MemoryProposal.objects.filter(user=user, operations__icontains="48213579").exists()


def test_an_import_refuses_an_item_that_re_spells_a_secret_another_item_gave(user):
    from agentmemory import importing

    data = "Prefers tea.\nWifi password: swordfish99\nWifi backup: SWORDFISH_99\nGuest wifi: 99hsifdrows\n"

    result = importing.propose(user_id=user.pk, data=data)

    assert [item.content for item in result.items] == ["Prefers tea."]
    assert [item.code for item in result.refused] == ["threat_secret"] * 3
    assert all(item.content == "" for item in result.refused)  # no secret is shown back
    assert not MemoryProposal.objects.filter(user=user, operations__icontains="swordfish").exists()


async def test_a_german_request_to_remember_a_password_offers_nothing(user, scripted_model):
    scripted_model.push(text("Das speichere ich nicht."))  # no memory call: a command to remember would be offered

    result = await run_turn(user=user, content="Merk dir bitte mein VPN-Passwort: Kiefer-Nebel-2291")

    assert result.memory.proposal_id is None
    assert await nothing_kept(user, "Kiefer-Nebel-2291", "2291")
