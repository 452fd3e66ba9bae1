""""Remember this until Friday" from the chat (issue 54): when the person's latest message gives a time for the
fact being saved and the model's add sets no `expires`, trusted code sets it from the person's words, and the
answer's memory line says until when. A scripted model over real HTTP and the chat's REST turn; English and German;
the offline demo model shows it too."""
from datetime import date, timedelta

import pytest
from django.test import override_settings
from django.utils import translation
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import expiry, store, words
from agentmemory.expiry import asked_expiry
from chat.turns import run_turn
from tests.chat_helpers import db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def add(content, **extra):
    return {"operations": [{"target": "memory", "action": "add", "content": content, **extra}]}


def next_weekday(today: str, weekday: int) -> str:
    day = date.fromisoformat(today)
    return (day + timedelta(days=(weekday - day.weekday()) % 7 or 7)).isoformat()


def in_days(today: str, days: int) -> str:
    return (date.fromisoformat(today) + timedelta(days=days)).isoformat()


def token_client(user, language="en") -> APIClient:
    client = APIClient(HTTP_ACCEPT_LANGUAGE=language)
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@override_settings(CHAT_TURN_RATE="1000/min")
@pytest.mark.parametrize("language, message, fact, wanted", [
    ("en", "Remember until Friday: I'm in Lisbon", "I'm in Lisbon", lambda today: next_weekday(today, 4)),
    ("en", "I'm in Lisbon for two weeks, keep that in mind", "In Lisbon for two weeks",
     lambda today: in_days(today, 14)),
    ("de", "Merk dir bis Freitag: Ich bin in Lissabon", "Ich bin in Lissabon", lambda today: next_weekday(today, 4)),
    ("de", "Merk dir für zwei Wochen: Ich wohne bei Anna", "Ich wohne bei Anna", lambda today: in_days(today, 14)),
])
def test_a_time_in_the_persons_message_becomes_the_entrys_expiry_and_the_memory_line_says_it(
        user, scripted_model, language, message, fact, wanted):
    scripted_model.push(tool_call(add(fact)), text("Noted."))

    response = token_client(user, language).post("/api/chat/turns/", {"content": message, "conversation_id": None},
                                                  format="json")

    assert response.status_code == 200, response.json()
    day = wanted(expiry.today_for(user.pk))
    assert store.load_snapshot(user_id=user.pk).expiries("memory") == {fact: day}
    memory = response.json()["memory"]
    assert (memory["status"], memory["until"]) == ("committed", day)
    with translation.override(language):
        shown = words.expiry_day(day)  # "Fri 11 Dec" / "Fr, 11. Dez.": formatted for the language, not ISO
    assert shown and shown in memory["message"] and day not in memory["message"]
    assert memory["message"].startswith("Gedächtnis gespeichert" if language == "de" else "Memory saved")
    # The model was told what trusted code did.
    tool_reply = [item for item in scripted_model.requests[-1]["messages"] if item.get("role") == "tool"][-1]
    assert f"expires was set to {day}" in tool_reply["content"]


@override_settings(CHAT_TURN_RATE="1000/min")
def test_an_expiry_the_model_sent_is_kept(user, scripted_model):
    later = in_days(expiry.today_for(user.pk), 30)
    scripted_model.push(tool_call(add("Sister visits", expires=later)), text("Noted."))
    body = token_client(user).post("/api/chat/turns/", {"content": "My sister visits until Friday, remember that",
                                                        "conversation_id": None}, format="json").json()
    assert store.load_snapshot(user_id=user.pk).expiries("memory") == {"Sister visits": later}
    assert body["memory"]["until"] == later


@override_settings(CHAT_TURN_RATE="1000/min")
def test_a_message_without_a_time_sets_none(user, scripted_model):
    scripted_model.push(tool_call(add("Prefers green tea")), text("Noted."))
    body = token_client(user).post("/api/chat/turns/", {"content": "Remember that I prefer green tea",
                                                        "conversation_id": None}, format="json").json()
    snapshot = store.load_snapshot(user_id=user.pk)
    assert snapshot.user + snapshot.memory == ("Prefers green tea",)
    assert snapshot.expiries("user") == snapshot.expiries("memory") == {}
    assert body["memory"]["until"] is None and body["memory"]["message"] == "Memory saved."


@override_settings(CHAT_TURN_RATE="1000/min")
def test_two_facts_with_one_time_are_left_without_a_guess(user, scripted_model):
    two = {"operations": [{"target": "memory", "action": "add", "content": "In Lisbon"},
                          {"target": "memory", "action": "add", "content": "Hotel is near the river"}]}
    scripted_model.push(tool_call(two), text("Noted."))
    token_client(user).post("/api/chat/turns/", {"content": "Remember until Friday: I'm in Lisbon, hotel near the "
                                                 "river", "conversation_id": None}, format="json")
    snapshot = store.load_snapshot(user_id=user.pk)
    assert snapshot.memory == ("In Lisbon", "Hotel is near the river") and snapshot.expiries("memory") == {}


@pytest.mark.parametrize("message", [
    "I have been learning Rust for two weeks, remember that",
    "Remember that my flight is on Friday",
    "Remember this until I remove it: tabs over spaces",
])
def test_a_time_that_is_no_expiry_is_not_read_as_one(message):
    assert asked_expiry(message, "2026-12-06") is None


def test_a_time_said_of_something_else_is_not_given_to_the_fact():
    from agentmemory.expiry import with_asked_expiry

    batch = add("Is vegetarian")
    unchanged, day = with_asked_expiry(batch, "Remember I'm vegetarian. I'm away until Monday.", "2026-12-06")
    assert (unchanged, day) == (batch, "")
    dated, day = with_asked_expiry(add("Is in Lisbon"), "I'm in Lisbon until Friday.", "2026-12-06")
    assert day == "2026-12-11" and dated["operations"][0]["expires"] == "2026-12-11"


async def test_the_demo_model_remembers_until_friday(user):
    result = await run_turn(user=user, content="remember until Friday: I'm in Lisbon")
    today = await db(expiry.today_for, user.pk)
    assert result.memory.status == "committed" and result.memory.until == next_weekday(today, 4)
    assert (await snapshot_of(user)).expiries("memory") == {"I'm in Lisbon": next_weekday(today, 4)}
