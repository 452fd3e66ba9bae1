"""Issue 52, item 4: an entry that drops the person's "no" is asked, showing the person's own sentence.

Pure: the sentence `gate.negation` finds for an inverted entry (English and
German), its length bound, and `gate.said`, which shows no sentence that
holds a secret. Then real turns with a scripted model over real HTTP (make
test runs them on SQLite and PostgreSQL): the proposal stores the sentence
beside the reason, the proposals API gives it with the plain "You said: …"
sentence, the memory page shows it as text, a sentence holding a secret is
not shown, and neither logs nor spans nor the turn's event get it. Checks on
what reached logs are bare booleans, so no quoted text reaches test output.
"""
from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import translation
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import gate, proposals, words
from agentmemory.gate.negation import MAX_QUOTE, negated_sentence
from agentmemory.models import MemoryEvent, MemoryProposal
from agentmemory.rules import Operation, Snapshot
from agentmemory.store.erasure import erase
from tests.chat_helpers import fresh_agents  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401
from tests.test_telemetry_turns import RecordingHandler, debug_logs, spans  # noqa: F401

TABS = "I always want tabs, not spaces"
KOTLIN = "Ich nutze kein Java, nur Kotlin"


# --- pure: the sentence the negation rule read ----------------------------------------------------------


@pytest.mark.parametrize(("message", "entry", "code", "sentence"), [
    (TABS, "Prefers spaces", "en", TABS),
    (f"Thanks for the help earlier! {TABS}. Also, we deploy on Fridays.", "spaces", "en", f"{TABS}."),
    (KOTLIN, "Nutzt Java", "de", KOTLIN),
    (f"Hallo! {KOTLIN}. Danke.", "Programmiert in Java", "de", f"{KOTLIN}."),
    ("We use pytest, never unittest", "unittest tests in our project.", "en", "We use pytest, never unittest"),
])
def test_the_sentence_an_inverted_entry_drops_the_no_of(message, entry, code, sentence):
    assert negated_sentence(entry, message, code) == sentence


@pytest.mark.parametrize(("message", "entry", "code"), [
    (TABS, "Prefers tabs, not spaces", "en"),  # keeps the negation
    (TABS, "Prefers tabs over spaces", "en"),
    (KOTLIN, "Nutzt Kotlin statt Java", "de"),
    ("We deploy on Fridays", "Deploys on Fridays", "en"),  # nothing negated
])
def test_no_sentence_for_an_entry_that_keeps_what_the_person_said(message, entry, code):
    assert negated_sentence(entry, message, code) == ""


def test_a_long_sentence_is_cut_around_the_term():
    message = "Honestly, " + "after years of arguing about this in every team I was part of, " * 6 + \
        "I always want tabs, not spaces, " + "because my screen reader reads indentation better that way " * 4
    sentence = negated_sentence("Prefers spaces", message, "en")
    assert len(sentence) <= MAX_QUOTE
    assert "tabs, not spaces" in sentence and sentence.startswith("…") and sentence.endswith("…")


def sources_of(message: str) -> gate.TurnSources:
    return gate.TurnSources.from_messages([{"role": "user", "content": message}])


def test_said_quotes_only_for_a_negated_entry():
    sources = sources_of(TABS)
    inverted = Operation(target="user", action="add", content="Prefers spaces")
    assert gate.reason(inverted, start=Snapshot(), sources=sources) == gate.NEGATED
    assert gate.said(inverted, gate.NEGATED, sources) == TABS
    assert gate.said(inverted, gate.TRANSIENT, sources) == ""


@pytest.mark.parametrize("message", [
    "I always want tabs, not spaces, and my password is Kiefer-Nebel-2291",
    "I always want tabs, not spaces, my vault code is 48213579",
    "Ich will Tabs, keine Leerzeichen, mein Passwort ist Kiefer-Nebel-2291",
])
def test_said_shows_no_sentence_that_holds_a_secret(message):
    sources = sources_of(message)
    inverted = Operation(target="user", action="add", content="Prefers Leerzeichen" if "Ich" in message
                         else "Prefers spaces")
    assert negated_sentence(inverted.content, message, sources.language)  # the rule did read a sentence
    assert gate.said(inverted, gate.NEGATED, sources) == ""


def test_a_secret_in_another_sentence_leaves_the_quote_shown():
    message = f"{TABS}. My password is Kiefer-Nebel-2291"
    sources = sources_of(message)
    assert gate.said(Operation(target="user", action="add", content="Prefers spaces"), gate.NEGATED, sources) \
        == f"{TABS}."


def test_you_said_is_a_translated_sentence():
    assert words.you_said("") == ""
    assert words.you_said(TABS) == f"You said: “{TABS}”"
    with translation.override("de"):
        assert words.you_said(KOTLIN) == f"Sie sagten: „{KOTLIN}“"


# --- real turns over HTTP ---------------------------------------------------------------------------------


def adds(*entries: str) -> str:
    return json.dumps({"operations": [{"target": "user", "action": "add", "content": entry} for entry in entries]})


def api_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def turn(client, message: str) -> dict:
    response = client.post("/api/chat/turns/", {"content": message}, format="json")
    assert response.status_code == 200, response.status_code
    return response.json()["memory"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("message", "inverted", "kept", "quote"), [
    (TABS, "Prefers spaces", "Prefers tabs, not spaces", TABS),
    (f"{KOTLIN}. Danke!", "Nutzt Java", "Nutzt Kotlin, kein Java", f"{KOTLIN}."),
])
def test_the_question_shows_the_persons_own_sentence(user, scripted_model, message, inverted, kept, quote):
    client = api_client(user)
    scripted_model.push(tool_call(adds(inverted, kept)), text("Got it."))

    memory = turn(client, message)

    assert memory["status"] == "committed" and memory["code"] == "partly_asked"
    (stored,) = MemoryProposal.objects.get(user=user).operations
    assert (stored["reason"], stored["said"]) == (gate.NEGATED, quote)  # next to the reason
    (proposal,) = proposals.pending(user_id=user.pk)
    assert proposal.operations[0].said == quote
    (operation,) = client.get(f"/api/memory/proposals/{memory['proposal_id']}/").json()["operations"]
    assert operation["content"] == inverted and operation["reason"] == gate.NEGATED
    assert operation["said"] == quote and operation["you_said"] == f"You said: “{quote}”"
    with translation.override("de"):
        german = client.get(f"/api/memory/proposals/{memory['proposal_id']}/", HTTP_ACCEPT_LANGUAGE="de").json()
    assert german["operations"][0]["you_said"] == f"Sie sagten: „{quote}“"

    page = Client()
    page.force_login(user)
    html = page.get("/memory/").content.decode()
    shown = f'<span class="proposal-said">You said: “{quote}”</span>' in html
    assert shown


@pytest.mark.django_db(transaction=True)
def test_a_sentence_holding_a_secret_is_not_quoted(user, scripted_model):
    client = api_client(user)
    scripted_model.push(tool_call(adds("Prefers spaces")), text("Got it; I won't keep passwords."))

    memory = turn(client, "I always want tabs, not spaces, and my password is Kiefer-Nebel-2291")

    assert memory["status"] == "proposed" and memory["code"] == "asked"
    (stored,) = MemoryProposal.objects.get(user=user).operations
    assert stored["reason"] == gate.NEGATED and "said" not in stored
    leaked = "Kiefer-Nebel-2291" in json.dumps(stored)
    assert not leaked
    (operation,) = client.get(f"/api/memory/proposals/{memory['proposal_id']}/").json()["operations"]
    assert operation["said"] is None and operation["you_said"] is None


# Distinctive, made of words and a number the scans let through, only in the person's negated sentence.
SENTINEL = "zq8-kestrel-4471-plum"


@pytest.mark.django_db(transaction=True)
def test_the_quote_reaches_no_log_span_or_event(user, scripted_model, debug_logs, spans):  # noqa: F811
    client = api_client(user)
    scripted_model.push(tool_call(adds("Prefers spaces")), text("Got it."))
    message = f"I always want tabs, not spaces, in the {SENTINEL} repository"

    memory = turn(client, message)

    (stored,) = MemoryProposal.objects.get(user=user).operations
    quoted = SENTINEL in stored.get("said", "")
    assert quoted  # the quote really was made and stored
    assert memory["proposal_id"] is not None
    assert debug_logs.has("INSERT agentmemory_proposal [statement and parameters redacted]"), "no SQL log"
    logged = SENTINEL in debug_logs.written() or any(
        SENTINEL in record for handler in RecordingHandler.instances for _, record in handler.records)
    assert not logged
    traced = any(SENTINEL in span.to_json(indent=None) for span in [*spans.exported(), *spans.ours_raw()])
    assert not traced
    recorded = any(SENTINEL in repr(vars(event)) for event in MemoryEvent.objects.filter(user=user))
    assert not recorded


@pytest.mark.django_db
def test_the_memory_page_shows_the_quote_as_text(user):
    payload = 'tabs <script>alert(1)</script>, not "spaces" & <b>more</b>'
    proposals.create(user_id=user.pk, operations=[Operation(target="user", action="add", content="Prefers spaces")],
                     reasons=[gate.NEGATED], quotes=[payload])
    page = Client()
    page.force_login(user)

    html = page.get("/memory/").content.decode()

    escaped = ("You said: “tabs &lt;script&gt;alert(1)&lt;/script&gt;, not &quot;spaces&quot; &amp; "
               "&lt;b&gt;more&lt;/b&gt;”") in html
    assert escaped and "<script>alert(1)" not in html and "<b>more</b>" not in html


@pytest.mark.django_db
def test_erasing_memory_erases_the_quote(user):
    proposals.create(user_id=user.pk, operations=[Operation(target="user", action="add", content="Prefers spaces")],
                     reasons=[gate.NEGATED], quotes=[TABS])

    erase(user_id=user.pk)

    assert not MemoryProposal.objects.filter(user=user).exists()
