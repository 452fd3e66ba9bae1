"""Issue 36, the person's side: a save trusted code doubts is a question under the answer.

A scripted model (real HTTP) stages task progress beside a lasting fact; the
chat, on a phone, shows "Save this to memory?" under the answer with the
doubted entry, the reason in plain words (no code), Save and Discard. The
lasting fact is saved at once; the doubted one only when the person presses
Save, and Discard keeps it out. Nothing scrolls sideways. An entry that
drops the person's "no" is asked beside their own sentence ("You said: …"),
shown as text. Checks on memory
text are bare booleans, so no memory content reaches test output.
"""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from agentmemory import gate
from agentmemory.models import MemoryProposal
from tests.scripted_model import text, tool_call

from .helpers import make_person, orm, send, sign_in, snapshot_of, wait_for_reply, wait_until_connected
from .ui_helpers import PHONE, context_at, sideways_overflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LASTING = "Deploys happen on Fridays"
DOUBTED = "Currently fixing the flaky deploy test"


def staged(*contents: str):
    return tool_call(json.dumps({"operations": [{"target": "memory", "action": "add", "content": c}
                                                for c in contents]}))


def phone_chat(scripted_context, name: str):
    person = make_person(name, f"pw-{name}-123")
    page = context_at(scripted_context, PHONE).new_page()
    sign_in(page, name, f"pw-{name}-123")
    wait_until_connected(page)
    return person, page


@pytest.mark.parametrize("choice", ["Save", "Discard"])
def test_a_doubted_save_is_a_question_under_the_answer_on_a_phone(scripted_context, scripted_site, choice):
    _, model = scripted_site
    person, page = phone_chat(scripted_context, f"gate-{choice.lower()}")
    model.push(staged(LASTING, DOUBTED), text("Noted the deploy day; I offered to remember the rest."))

    send(page, "We deploy on Fridays, and today I'm fixing the flaky deploy test.")
    reply = wait_for_reply(page)

    question = reply.locator(".chat-proposal")
    expect(question.locator(".proposal-question")).to_have_text("Save this to memory?")
    expect(question.locator(".proposal-why")).to_have_text(str(gate.REASONS[gate.TRANSIENT]))
    assert DOUBTED in question.locator(".proposal-line").inner_text()
    assert "transient" not in question.inner_text()  # the person reads sentences, never codes
    assert sideways_overflow(page) <= 0
    # The lasting fact is already saved; the doubted one waits.
    assert snapshot_of(person).memory == (LASTING,)

    question.get_by_role("button", name=choice).click()
    expect(question.locator(".proposal-result")).not_to_be_empty()
    memory = snapshot_of(person).memory
    assert memory == ((LASTING, DOUBTED) if choice == "Save" else (LASTING,))
    assert orm(lambda: MemoryProposal.objects.filter(user_id=person.pk).count()) == 0


NEGATED_MESSAGE = "I always want <i>tabs</i>, not spaces"


def test_an_entry_that_drops_the_persons_no_is_asked_beside_their_own_sentence(scripted_context, scripted_site):
    _, model = scripted_site
    person, page = phone_chat(scripted_context, "gate-negated")
    inverted = {"target": "user", "action": "add", "content": "Prefers spaces"}
    model.push(tool_call(json.dumps({"operations": [inverted]})), text("I offered to remember it."))

    send(page, NEGATED_MESSAGE)
    reply = wait_for_reply(page)

    question = reply.locator(".chat-proposal")
    expect(question.locator(".proposal-why")).to_have_text(str(gate.REASONS[gate.NEGATED]))
    # The person's own words, as text: the markup they typed is shown, never made into elements.
    expect(question.locator(".proposal-said")).to_have_text(f"You said: “{NEGATED_MESSAGE}”")
    assert question.locator(".proposal-said i").count() == 0
    assert sideways_overflow(page) <= 0
    assert snapshot_of(person).user == ()
