"""The memory API: the caller's own memory through the tool's operation contract."""
import json

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory.api import MemoryWriteThrottle
from agentmemory.models import Actor, MemoryEvent, Outcome

from .memory_helpers import (  # noqa: F401  (fresh_throttle is an autouse fixture)
    document_count,
    entries_of,
    event_values,
    fresh_throttle,
    seed,
)

SENTINEL = "Quetzal-5519 likes fennel"


@pytest.fixture
def api(user):
    client = APIClient()
    client.force_login(user)
    return client


def post_operations(api, *operations, **extra):
    return api.post("/api/memory/operations/", {"operations": list(operations), **extra}, format="json")


def test_read_returns_both_documents_with_usage_and_timestamps(api, user):
    seed(user, user_entries=["Prefers short code examples."], memory_entries=["Ships weekly.", "Uses Django."])

    response = api.get("/api/memory/")

    body = response.json()
    assert response.status_code == 200
    assert body["schema_version"] == 1 and body["agent_memory_enabled"] is True
    assert body["documents"]["user"]["entries"] == ["Prefers short code examples."]
    assert body["documents"]["memory"]["entries"] == ["Ships weekly.", "Uses Django."]
    memory_usage = body["documents"]["memory"]["usage"]
    assert memory_usage == {"used": len("Ships weekly.\n§\nUses Django."), "limit": 2200, "percent": 1,
                            "entries": 2, "label": "1% — 28/2,200 chars", "level": "ok"}
    assert body["documents"]["memory"]["updated_at"] is not None
    assert body["documents"]["user"]["created_at"] is not None


def test_read_of_empty_memory_has_empty_documents(api):
    body = api.get("/api/memory/").json()

    assert body["documents"]["user"]["entries"] == [] and body["documents"]["user"]["updated_at"] is None
    assert body["documents"]["memory"]["usage"]["used"] == 0


def test_ordered_batch_commits_as_the_person_and_returns_the_new_state(api, user):
    seed(user, memory_entries=["Runs PostgreSQL 15.", "Old staging server at 10.0.0.4."])

    response = post_operations(
        api,
        {"target": "memory", "action": "replace", "match": "PostgreSQL 15", "content": "Runs PostgreSQL 16."},
        {"target": "memory", "action": "remove", "match": "Old staging"},
        {"target": "user", "action": "add", "content": "Prefers short answers."},
    )

    body = response.json()
    assert response.status_code == 200
    assert body["outcome"] == "committed" and body["changed"] == ["user", "memory"]
    assert body["documents"]["memory"]["entries"] == ["Runs PostgreSQL 16."]
    assert body["documents"]["user"]["entries"] == ["Prefers short answers."]
    event = MemoryEvent.objects.filter(user=user).first()
    assert (event.actor, event.outcome) == (Actor.USER, Outcome.COMMITTED)
    assert event.actions == {"replace": 1, "remove": 1, "add": 1}


def test_duplicate_add_is_unchanged(api, user):
    seed(user, user_entries=["Uses vim."])

    body = post_operations(api, {"target": "user", "action": "add", "content": "Uses vim."}).json()

    assert body["outcome"] == "unchanged" and body["changed"] == []


def test_rejected_batch_returns_code_position_and_detail_and_writes_nothing(api, user):
    seed(user, memory_entries=["Uses Django.", "Uses Django REST framework."])

    response = post_operations(
        api,
        {"target": "user", "action": "add", "content": SENTINEL},
        {"target": "memory", "action": "remove", "match": "Uses Django"},
    )

    body = response.json()
    assert response.status_code == 400
    assert set(body) == {"code", "position", "detail"}
    assert (body["code"], body["position"]) == ("ambiguous_match", 2)
    assert "longer substring" in body["detail"]
    assert SENTINEL not in response.content.decode()
    assert entries_of(user) == {"user": (), "memory": ("Uses Django.", "Uses Django REST framework.")}
    assert MemoryEvent.objects.filter(user=user).first().outcome == Outcome.REJECTED
    assert all(SENTINEL not in value for value in event_values(user))


@pytest.mark.parametrize(
    ("body", "code", "position"),
    [
        ({"operations": []}, "batch_size", None),
        ({"operations": [{"target": "user", "action": "add"}]}, "add_without_content", 1),
        ({"operations": [{"target": "user", "action": "add", "content": "x" * 1400}]}, "over_capacity", None),
        ({"operations": [{"target": "user", "action": "add", "content": "a\n§\nb"}]}, "delimiter_in_entry", 1),
        ({"ops": []}, "unknown_argument", None),
        ({"operations": "add"}, "invalid_arguments", None),
        ([1, 2], "invalid_arguments", None),
    ],
)
def test_invalid_bodies_get_the_rules_error(api, user, body, code, position):
    response = api.post("/api/memory/operations/", body, format="json")

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["position"]) == (code, position)
    assert document_count(user) == 0


def test_malformed_json_gets_a_plain_error(api, user):
    response = api.post("/api/memory/operations/", "{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_json"


def test_form_encoded_body_is_refused(api, user):
    response = api.post("/api/memory/operations/", {"operations": "x"})

    assert response.status_code == 415
    assert set(response.json()) == {"code", "position", "detail"}


def test_erase_deletes_everything_answers_a_receipt_and_records_it_without_content(api, user):
    seed(user, user_entries=[SENTINEL], memory_entries=[f"{SENTINEL} notes", "another note"])

    response = api.delete("/api/memory/")

    assert response.status_code == 200
    receipt = response.json()
    assert receipt["removed"] == {"profile_entries": 1, "notes_entries": 2, "versions": 2, "proposals": 0}
    assert receipt["summary"] == "Erased 1 profile entry, 2 notes entries and 2 earlier versions."
    assert receipt["erased_at"] and SENTINEL not in response.content.decode()
    assert document_count(user) == 0
    event = MemoryEvent.objects.get(user=user, outcome=Outcome.ERASED)
    assert event.actor == Actor.USER and event.actions == receipt["removed"]
    assert all(SENTINEL not in value for value in event_values(user))


def test_erase_refuses_an_unknown_include_and_changes_nothing(api, user):
    seed(user, memory_entries=["kept"])
    response = api.delete("/api/memory/?include=everything")
    assert response.status_code == 400 and response.json()["code"] == "invalid_include"
    assert document_count(user) == 1


def test_export_holds_entries_limits_schema_version_and_timestamps(api, user):
    seed(user, user_entries=["Uses vim."], memory_entries=["Ships weekly."])

    response = api.get("/api/memory/export/")

    body = response.json()
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert body["format"] == "agentmemory-export" and body["schema_version"] == 1
    assert body["limits"] == {"user": 1375, "memory": 2200}
    assert body["documents"]["user"]["entries"] == ["Uses vim."]
    assert body["documents"]["memory"]["characters"] == len("Ships weekly.")
    assert body["documents"]["memory"]["updated_at"] and body["exported_at"]


def test_export_round_trips_through_erase_and_reimport(api, user):
    seed(
        user,
        user_entries=["Prefers short code examples.", "Multi-line\nentry about tooling.", "Uses <b>bold</b> & ünïcode."],
        memory_entries=[f"Fact {n} about the project." for n in range(22)],
    )
    before = entries_of(user)
    exported = json.loads(api.get("/api/memory/export/").content)

    assert api.delete("/api/memory/").status_code == 200
    assert entries_of(user) == {"user": (), "memory": ()}
    operations = [
        {"target": target, "action": "add", "content": entry}
        for target in ("user", "memory")
        for entry in exported["documents"][target]["entries"]
    ]
    for start in range(0, len(operations), 20):  # a batch holds at most 20 operations
        assert post_operations(api, *operations[start:start + 20]).status_code == 200

    assert entries_of(user) == before
    again = json.loads(api.get("/api/memory/export/").content)
    assert again["documents"]["user"]["entries"] == exported["documents"]["user"]["entries"]
    assert again["documents"]["memory"]["entries"] == exported["documents"]["memory"]["entries"]


def test_page_export_matches_the_api_export(api, user):
    seed(user, user_entries=["Uses vim."], memory_entries=["Ships weekly."])

    page = json.loads(api.get("/memory/export/").content)
    route = api.get("/api/memory/export/").json()

    assert page["documents"] == route["documents"] and page["limits"] == route["limits"]


def test_writes_are_throttled_and_reads_are_not(api, user, monkeypatch):
    monkeypatch.setattr(MemoryWriteThrottle, "THROTTLE_RATES", {"memory_writes": "2/min"})

    writes = [post_operations(api, {"target": "user", "action": "add", "content": f"Fact {n}."}).status_code
              for n in range(2)]
    writes.append(api.delete("/api/memory/").status_code)
    reads = [api.get("/api/memory/").status_code for _ in range(5)]

    assert writes == [200, 200, 429]
    assert reads == [200] * 5
    assert entries_of(user)["user"] == ("Fact 0.", "Fact 1.")


def test_token_authentication_needs_no_csrf_token(user):
    token = Token.objects.create(user=user)
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")

    response = post_operations(client, {"target": "user", "action": "add", "content": "Uses vim."})

    assert response.status_code == 200
    assert entries_of(user)["user"] == ("Uses vim.",)


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "/api/memory/"), ("delete", "/api/memory/"), ("post", "/api/memory/operations/"),
     ("get", "/api/memory/export/")],
)
def test_anonymous_callers_are_refused(db, method, path):
    response = getattr(APIClient(), method)(path, {"operations": []}, format="json")

    assert response.status_code in (401, 403)


@override_settings(AGENTMEMORY={"ENABLED": False})
def test_api_works_with_memory_switched_off(api, user):
    response = post_operations(api, {"target": "user", "action": "add", "content": "Uses vim."})

    assert response.status_code == 200
    assert response.json()["agent_memory_enabled"] is False
    assert api.delete("/api/memory/").status_code == 200


def test_schema_documents_the_memory_routes_with_examples(client):
    response = client.get("/api/schema/", {"format": "json"})

    schema = json.loads(response.content)
    paths = schema["paths"]
    assert {"get", "delete"} <= set(paths["/api/memory/"])
    assert "get" in paths["/api/memory/export/"]
    apply = paths["/api/memory/operations/"]["post"]
    assert apply["operationId"] == "memory_apply_operations"
    assert apply["requestBody"]["content"]["application/json"]["examples"]
    assert apply["responses"]["200"]["content"]["application/json"]["examples"]
    assert apply["responses"]["400"]["content"]["application/json"]["examples"]
    assert paths["/api/memory/"]["get"]["responses"]["200"]["content"]["application/json"]["examples"]
    assert "user_id" not in json.dumps(paths["/api/memory/operations/"]["post"]["requestBody"])


@pytest.mark.parametrize("operation, code", [
    ({"target": "memory", "action": "add", "match": "Go", "content": "Uses Go"}, "add_with_match"),
    ({"target": "memory", "action": "replace", "match": "Go", "content": "Uses Go"}, "no_match"),
    ({"target": "memory", "action": "remove", "match": "Go"}, "no_match"),
])
def test_the_api_does_not_forgive_what_the_models_tool_forgives(api, user, operation, code):
    # The model's tool accepts these slips (docs/chat.md); a program calling the API gets the rule.
    response = post_operations(api, operation)

    assert response.status_code == 400 and response.json()["code"] == code
    assert document_count(user) == 0
