"""German everywhere a person reads the API (issue 54): numbers grouped as the language writes them ("8.001
Zeichen", not "8,001"), and every error's `detail` in the request's language with a `code`."""
import json

import pytest
from django.test import override_settings
from django.utils import translation
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.frames import FrameError, parse_client_frame


def client_for(user, language) -> APIClient:
    client = APIClient(HTTP_ACCEPT_LANGUAGE=language)
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def both(user, call):
    """The response in English and in German."""
    return call(client_for(user, "en")), call(client_for(user, "de"))


@override_settings(CHAT_MAX_MESSAGE_CHARS=8000, CHAT_TURN_RATE="1000/min")
def test_a_too_long_message_counts_in_german_digits(user):
    english, german = both(user, lambda client: client.post(
        "/api/chat/turns/", {"content": "x" * 8001, "conversation_id": None}, format="json"))
    assert english.status_code == german.status_code == 400
    assert "8,001" in json.dumps(english.json()) and "8,000" in json.dumps(english.json())
    assert "8.001" in json.dumps(german.json(), ensure_ascii=False)
    assert "8.000" in json.dumps(german.json(), ensure_ascii=False)
    assert "8,001" not in json.dumps(german.json())


def test_a_frame_too_large_says_its_limit_in_german_digits():
    with translation.override("de"), pytest.raises(FrameError) as refused:
        parse_client_frame("x" * 200_000, max_chars=8000)
    assert "8.000" in str(refused.value.message) and "8,000" not in str(refused.value.message)


@pytest.mark.parametrize("call, status, code", [
    (lambda client: client.get("/api/conversations/99999/"), 404, "not_found"),
    (lambda client: client.delete("/api/conversations/99999/"), 404, "not_found"),
    (lambda client: client.get("/api/conversations/99999/messages/"), 404, "not_found"),
    (lambda client: client.post("/api/chat/turns/", "{not json", content_type="application/json"), 400,
     "invalid_json"),
    (lambda client: client.put("/api/conversations/"), 405, "method_not_allowed"),
])
def test_every_error_detail_is_translated_and_carries_a_code(user, call, status, code):
    english, german = both(user, call)
    assert english.status_code == german.status_code == status
    assert english.json()["code"] == german.json()["code"] == code
    assert english.json()["detail"] and german.json()["detail"] != english.json()["detail"]
    assert "No Conversation matches" not in english.json()["detail"]


def test_not_signed_in_is_translated_with_a_code(db):
    english, german = both(None, lambda client: client.get("/api/memory/"))
    assert english.status_code == german.status_code
    assert english.json()["code"] == german.json()["code"] == "not_authenticated"
    assert german.json()["detail"] != english.json()["detail"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2048)
def test_a_body_too_large_is_german_with_german_digits(user):
    body = json.dumps({"operations": [{"target": "memory", "action": "add", "content": "y" * 5000}]})
    english, german = both(user, lambda client: client.post("/api/memory/operations/", body,
                                                            content_type="application/json"))
    assert english.json()["code"] == german.json()["code"] == "body_too_large"
    assert "2,048" in english.json()["detail"]
    assert "2.048" in german.json()["detail"] and german.json()["detail"] != english.json()["detail"]


DEEP = "[" * 40 + "]" * 40


@pytest.mark.parametrize("call, code", [
    (lambda client: client.put("/api/memory/settings/", {"use_memory": "yes"}, format="json"), "invalid_use_memory"),
    (lambda client: client.put("/api/memory/settings/", {"save_mode": "never"}, format="json"), "invalid_save_mode"),
    (lambda client: client.put("/api/memory/settings/", {"colour": 1}, format="json"), "unknown_argument"),
    (lambda client: client.put("/api/memory/settings/", [], format="json"), "invalid_body"),
    (lambda client: client.delete("/api/memory/?include=everything"), "invalid_include"),
    (lambda client: client.post("/api/memory/tidy/", {"target": "diary"}, format="json"), "invalid_target"),
    (lambda client: client.post("/api/memory/tidy/", {"target": "user", "x": 1}, format="json"), "unknown_argument"),
    (lambda client: client.post("/api/memory/import/", [], format="json"), "invalid_body"),
    (lambda client: client.post("/api/memory/operations/", "{oops", content_type="application/json"),
     "invalid_json"),
    (lambda client: client.post("/api/memory/operations/", DEEP, content_type="application/json"),
     "json_too_deep"),
    (lambda client: client.post("/api/chat/turns/", DEEP, content_type="application/json"), "json_too_deep"),
])
def test_the_memory_apis_own_refusals_are_translated(user, call, code):
    english, german = both(user, call)
    assert english.status_code == german.status_code == 400
    assert english.json()["code"] == german.json()["code"] == code
    assert german.json()["detail"] != english.json()["detail"], german.json()["detail"]


@override_settings(CHAT_TURN_RATE="1000/min")
@pytest.mark.parametrize("path, body", [
    ("/api/chat/turns/", {"content": "hello", "conversation_id": None}),
    ("/api/memory/operations/", {"operations": [{"target": "memory", "action": "add", "content": "Uses tea"}]}),
])
def test_an_idempotency_key_refused_is_said_in_german(user, path, body):
    english, german = both(user, lambda client: client.post(path, body, format="json",
                                                            HTTP_IDEMPOTENCY_KEY="no spaces allowed"))
    assert english.status_code == german.status_code == 400
    assert english.json()["code"] == german.json()["code"] == "invalid_idempotency_key"
    assert "Idempotency-Key" in german.json()["detail"] and german.json()["detail"] != english.json()["detail"]


def test_a_broken_rule_is_said_in_german_with_its_code_and_position(user):
    batch = {"operations": [{"target": "memory", "action": "add", "content": "Uses tea"},
                            {"target": "memory", "action": "remove", "match": "coffee"}]}
    english, german = both(user, lambda client: client.post("/api/memory/operations/", batch, format="json"))
    assert english.status_code == german.status_code == 400
    assert english.json()["code"] == german.json()["code"] == "no_match"
    assert english.json()["position"] == german.json()["position"] == 2
    assert german.json()["detail"] != english.json()["detail"]
    with translation.override("de"):
        from agentmemory import words

        assert german.json()["detail"] == words.rule_message("no_match", target="memory")


def test_the_usage_label_a_person_reads_is_in_their_language(user):
    from agentmemory import store as memory_store
    from agentmemory.rules import Operation

    memory_store.commit_operations(user_id=user.pk, operations=[
        Operation(target="memory", action="add", content="x" * 1200)], actor="user")
    english, german = both(user, lambda client: client.get("/api/memory/"))
    assert english.json()["documents"]["memory"]["usage"]["label"] == "54% — 1,200/2,200 chars"
    assert german.json()["documents"]["memory"]["usage"]["label"] == "54 % — 1.200/2.200 Zeichen"
    # The chat page's memory line and the socket's memory_changed carry the same label.
    from agentmemory.conf import memory_settings
    from agentmemory.notify import usage_payload

    with translation.override("de"):
        shown = usage_payload(memory_store.load_snapshot(user_id=user.pk), memory_settings().limits)
    assert shown["memory"]["label"] == "54 % — 1.200/2.200 Zeichen"


@override_settings(CHAT_TURN_RATE="1000/min")
@pytest.mark.parametrize("body, code, field", [
    ({}, "invalid_content", "content"),
    ({"content": "   "}, "invalid_content", "content"),
    ({"content": "hi", "conversation_id": "seven"}, "invalid_conversation_id", "conversation_id"),
    ({"content": "hi", "temporary": "yes"}, "invalid_temporary", "temporary"),
])
def test_a_refused_turn_body_names_its_field_and_carries_the_sockets_code_and_sentence(user, body, code, field):
    english, german = both(user, lambda client: client.post("/api/chat/turns/", body, format="json"))
    assert english.status_code == german.status_code == 400
    assert english.json()["code"] == german.json()["code"] == code
    assert field in english.json() and field in german.json()
    assert german.json()["detail"] != english.json()["detail"]
    with translation.override("de"):
        assert german.json()["detail"] == refusal_sentence(body)


def refusal_sentence(body):
    from chat.frames import refusal
    from chat.serializers import TurnRequestSerializer

    serializer = TurnRequestSerializer(data=body)
    assert not serializer.is_valid()
    return str(refusal(serializer.errors).message)


@override_settings(EVAL_SERVICE_TOKEN="eval-secret-token")
def test_a_serializers_field_errors_carry_a_code_and_a_translated_detail(db):
    def post(client):
        client.credentials(HTTP_AUTHORIZATION="Bearer eval-secret-token")
        return client.post("/api/eval/turns/", {}, format="json")

    english, german = both(None, post)
    assert english.status_code == german.status_code == 400
    assert english.json()["code"] == german.json()["code"] == "invalid_body"
    assert "content" in german.json() and german.json()["detail"].startswith("content: ")
    assert german.json()["detail"] != english.json()["detail"]
