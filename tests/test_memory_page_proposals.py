"""The memory page's "Ask before saving" parts without JavaScript (issue 15, part 1).

"Save changes" (save automatically / ask me before saving) is a form post to
/memory/save-mode/; "Waiting for you" lists pending proposals, each saved or
discarded by a form post to /memory/proposals/<id>/save/ or .../discard/,
redirected back to the page with an error beside the proposal and the
person's edits kept. The page's script gets JSON from the same views.
Page checks are bare booleans (`shown`), so no page text reaches a failure message.
"""
import re

import pytest
from django.test import Client

from agentmemory import preferences, proposals, store, words
from agentmemory.models import Actor, MemoryEvent, MemoryProposal, Outcome
from agentmemory.rules import Operation
from chat.demo_model import confirmation

from .memory_helpers import ATTRIBUTE_PAYLOAD, SCRIPT_ESCAPED, SCRIPT_PAYLOAD, entries_of, fresh_throttle, seed  # noqa: F401

pytestmark = pytest.mark.django_db

FACT = "Keeps the kettle at 80 degrees"
OLD = "Works in Berlin"
NEW = "Works in Lisbon"
JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture
def alice_client(user):
    client = Client()
    client.force_login(user)
    return client


def propose(user, *operations: Operation, conversation_id=None) -> int:
    return proposals.create(user_id=user.pk, operations=list(operations), conversation_id=conversation_id)


def add(text=FACT, target="memory") -> Operation:
    return Operation(target=target, action="add", content=text)


def block(html: str, proposal_id: int) -> str:
    found = re.search(rf'<li class="proposal[^"]*" id="proposal-{proposal_id}">.*?</li>\s*</ol>', html, flags=re.S)
    assert found is not None, "the proposal is not on the page"
    return found.group(0)


def follow(client, response) -> str:
    assert response.status_code == 302
    return client.get(response["Location"]).content.decode()


# --- "Save changes" ---------------------------------------------------------------------


def test_the_page_offers_save_changes_beside_the_switch(alice_client, user):
    html = alice_client.get("/memory/").content.decode()

    shown = "<legend>Save changes</legend>" in html
    assert shown
    shown = 'value="auto" checked' in html and 'value="ask">' in html
    assert shown
    assert html.index('id="memory-switch"') < html.index('id="save-mode"')
    shown = 'id="proposals"' not in html
    assert shown, "no 'Waiting for you' while saving automatically with nothing waiting"


def test_the_save_mode_form_asks_first_and_redirects_back(alice_client, user):
    response = alice_client.post("/memory/save-mode/", {"save_mode": "ask"})

    assert response.status_code == 302 and response["Location"] == "/memory/"
    assert preferences.load(user_id=user.pk).save_mode == "ask"
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.ASK_FIRST, actor=Actor.USER).count() == 1
    html = alice_client.get("/memory/").content.decode()
    shown = 'value="ask" checked' in html
    assert shown
    shown = "Waiting for you" in html and "Nothing is waiting for you." in html and "each waits 7 days" in html
    assert shown
    shown = "asks before saving" in html  # the success message
    assert shown

    alice_client.post("/memory/save-mode/", {"save_mode": "auto"})
    assert preferences.load(user_id=user.pk).save_mode == "auto"


def test_the_save_mode_form_refuses_anything_else_in_plain_words(alice_client, user):
    html = follow(alice_client, alice_client.post("/memory/save-mode/", {"save_mode": "never"}))

    shown = "Choose whether the assistant saves changes itself or asks you first." in html
    assert shown
    assert preferences.load(user_id=user.pk).save_mode == "auto"
    answer = alice_client.post("/memory/save-mode/", {"save_mode": "ask"}, **JSON).json()
    assert answer["ok"] is True and answer["save_mode"] == "ask"


def test_opening_the_new_form_addresses_directly_goes_to_the_page(alice_client, user):
    pk = propose(user, add())
    for path in ("/memory/save-mode/", f"/memory/proposals/{pk}/save/", f"/memory/proposals/{pk}/discard/"):
        response = alice_client.get(path)
        assert response.status_code == 302 and response["Location"] == "/memory/"
    assert MemoryProposal.objects.filter(pk=pk).exists()


def test_the_new_forms_need_a_signed_in_person(client, user):
    pk = propose(user, add())
    response = client.post(f"/memory/proposals/{pk}/save/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert MemoryProposal.objects.filter(pk=pk).exists() and entries_of(user)["memory"] == ()


# --- "Waiting for you" ----------------------------------------------------------------------------


def test_pending_proposals_are_listed_in_plain_words(alice_client, user):
    seed(user, user_entries=[OLD], memory_entries=["Uses tea breaks"])
    first = propose(user, add(), conversation_id=None)
    second = propose(user, Operation(target="user", action="replace", match="Berlin", entry=OLD, content=NEW),
                     Operation(target="memory", action="remove", match="tea", entry="Uses tea breaks"))

    html = alice_client.get("/memory/").content.decode()

    shown = "Waiting for you" in html
    assert shown
    assert html.index(f'id="proposal-{second}"') < html.index(f'id="proposal-{first}"'), "newest first"
    one = block(html, first)
    shown = "Add to your notes:" in one and f"“{FACT}”" in one
    assert shown
    shown = 'name="content-1"' in one and "Edit" in one
    assert shown
    shown = 'action="/memory/proposals/%d/save/"' % first in one
    assert shown
    two = html[html.index(f'id="proposal-{second}"'):html.index(f'id="proposal-{first}"')]
    shown = "Change in your profile:" in two and f'“{OLD}”</span> → <span class="proposal-text">“{NEW}”' in two
    assert shown
    shown = "Remove from your notes:" in two and "“Uses tea breaks”" in two
    assert shown
    shown = 'name="content-' not in two
    assert shown, "only an added fact can be edited"
    shown = 'action="/memory/proposals/%d/discard/"' % second in two
    assert shown


def test_proposal_text_is_escaped(alice_client, user):
    propose(user, add(SCRIPT_PAYLOAD), add(ATTRIBUTE_PAYLOAD))
    html = alice_client.get("/memory/").content.decode()
    shown = SCRIPT_PAYLOAD not in html and SCRIPT_ESCAPED in html
    assert shown
    shown = ATTRIBUTE_PAYLOAD not in html
    assert shown


def test_saving_a_proposal_without_javascript(alice_client, user):
    pk = propose(user, add())

    html = follow(alice_client, alice_client.post(f"/memory/proposals/{pk}/save/", {"content-1": FACT}))

    assert entries_of(user)["memory"] == (FACT,)
    assert not MemoryProposal.objects.filter(pk=pk).exists()
    shown = "Saved to your memory." in html and f'id="proposal-{pk}"' not in html
    assert shown


def test_an_edited_fact_is_saved_as_edited(alice_client, user):
    pk = propose(user, add())
    response = alice_client.post(f"/memory/proposals/{pk}/save/", {"content-1": "Keeps the kettle at 85 degrees"})
    assert response.status_code == 302
    assert entries_of(user)["memory"] == ("Keeps the kettle at 85 degrees",)


def test_an_emptied_fact_is_refused_beside_the_proposal_and_keeps_the_draft(alice_client, user):
    pk = propose(user, add())
    response = alice_client.post(f"/memory/proposals/{pk}/save/", {"content-1": "   "})

    assert response.status_code == 302 and response["Location"] == f"/memory/#proposal-{pk}"
    html = alice_client.get("/memory/").content.decode()
    one = block(html, pk)
    shown = "Write the fact itself before saving." in one and 'role="alert"' in one
    assert shown
    shown = "<details" in one and " open>" in one
    assert shown, "the edit box stays open with what was typed"
    assert entries_of(user)["memory"] == () and MemoryProposal.objects.filter(pk=pk).exists()
    # Shown once.
    shown = "Write the fact itself" not in alice_client.get("/memory/").content.decode()
    assert shown


def test_a_stale_proposal_says_so_in_plain_words_and_saves_nothing(alice_client, user):
    seed(user, user_entries=[OLD])
    pk = propose(user, Operation(target="user", action="replace", match="Berlin", entry=OLD, content=NEW))
    store.commit_operations(user_id=user.pk, actor=Actor.USER,
                            operations=[Operation(target="user", action="replace", match="Berlin",
                                                  content="Works in Berlin-Mitte")])

    html = follow(alice_client, alice_client.post(f"/memory/proposals/{pk}/save/"))

    shown = str(words.PROPOSAL_STALE) in block(html, pk)
    assert shown
    shown = entries_of(user)["user"] == ("Works in Berlin-Mitte",)
    assert shown
    assert MemoryProposal.objects.filter(pk=pk).exists(), "kept for the person to discard"
    for code in ("conflict", "no_match", "entry_changed"):
        shown = code not in block(html, pk)
        assert shown


def test_discarding_a_proposal_without_javascript(alice_client, user):
    pk = propose(user, add())

    html = follow(alice_client, alice_client.post(f"/memory/proposals/{pk}/discard/"))

    shown = "Discarded; nothing was saved." in html
    assert shown
    assert not MemoryProposal.objects.filter(pk=pk).exists() and entries_of(user)["memory"] == ()


def test_a_proposal_no_longer_waiting_is_said_plainly(alice_client, user):
    pk = propose(user, add())
    proposals.discard(user_id=user.pk, proposal_id=pk)

    for action in ("save", "discard"):
        html = follow(alice_client, alice_client.post(f"/memory/proposals/{pk}/{action}/"))
        shown = str(words.PROPOSAL_GONE) in html
        assert shown
    assert entries_of(user)["memory"] == ()


def test_another_persons_proposal_cannot_be_saved_or_discarded(alice_client, user, other_user):
    pk = propose(other_user, add())
    for action in ("save", "discard"):
        response = alice_client.post(f"/memory/proposals/{pk}/{action}/", **JSON)
        assert response.status_code == 404 and response.json()["message"] == words.PROPOSAL_GONE
    assert MemoryProposal.objects.filter(pk=pk).exists() and entries_of(other_user)["memory"] == ()
    shown = f'id="proposal-{pk}"' not in alice_client.get("/memory/").content.decode()
    assert shown


def test_the_script_gets_json_from_the_proposal_forms(alice_client, user):
    seed(user, user_entries=[OLD])
    saved = propose(user, add())
    stale = propose(user, Operation(target="user", action="remove", match="Berlin", entry=OLD))
    dropped = propose(user, add("Another fact"))
    store.commit_operations(user_id=user.pk, actor=Actor.USER,
                            operations=[Operation(target="user", action="remove", match="Berlin")])

    ok = alice_client.post(f"/memory/proposals/{saved}/save/", **JSON)
    refused = alice_client.post(f"/memory/proposals/{stale}/save/", **JSON)
    gone = alice_client.post(f"/memory/proposals/{dropped}/discard/", **JSON)

    assert ok.status_code == 200 and ok.json() == {"ok": True, "changed": True, "message": "Saved to your memory."}
    assert refused.status_code == 400 and refused.json() == {"ok": False, "message": words.PROPOSAL_STALE}
    assert gone.status_code == 200 and gone.json()["message"] == "Discarded; nothing was saved."


def test_the_demo_model_says_proposed_not_saved_when_asked_first():
    staged = {"success": True, "status": "staged", "usage": {"memory": "10% — 220/2,200"},
              "message": "Staged 1 operation. This person reviews memory changes before they are saved: when this "
                         "turn completes the change is proposed to them, not saved."}
    said = confirmation(staged, {"target": "memory", "action": "add"})
    shown = said.startswith("I proposed adding that to your notes.") and "saved when" not in said
    assert shown
    plain = confirmation({**staged, "message": "Staged 1 operation; saved when this turn completes."},
                         {"target": "user", "action": "replace"})
    shown = plain.startswith("Done: I corrected that in your profile.")
    assert shown
