"""Another person's memory can't be read or changed through any route, and every
session write needs a CSRF token."""
import pytest
from django.test import Client
from rest_framework.test import APIClient

from agentmemory.models import Outcome

from .memory_helpers import (  # noqa: F401  (fresh_throttle is an autouse fixture)
    csrf_token_for,
    document_count,
    entries_of,
    fresh_throttle,
    seed,
)

BOB_SECRET = "Bob-Marigold-8812"
BOB_ENTRY = f"{BOB_SECRET} is bob's profile"
BOB_NOTE = f"{BOB_SECRET} is bob's note"


@pytest.fixture
def alice(user, other_user):
    seed(user, user_entries=["Alice uses vim."], memory_entries=["Alice ships weekly."])
    seed(other_user, user_entries=[BOB_ENTRY], memory_entries=[BOB_NOTE])
    return user


@pytest.fixture
def bob(other_user):
    return other_user


@pytest.fixture
def alice_client(alice):
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def alice_api(alice):
    client = APIClient()
    client.force_login(alice)
    return client


def bob_untouched(bob):
    return entries_of(bob) == {"user": (BOB_ENTRY,), "memory": (BOB_NOTE,)}


# --- reads -------------------------------------------------------------------


READ_PATHS = ["/memory/", "/memory/export/", "/memory/erase/", "/api/memory/", "/api/memory/export/"]
FOREIGN_QUERIES = [{}, {"user_id": "{bob}"}, {"user": "{bob}"}, {"pk": "{bob}"}, {"id": "{bob}"},
                   {"username": "bob"}, {"owner": "{bob}"}]


def test_reads_show_only_the_callers_memory_whatever_the_parameters(alice_api, bob):
    checked = []
    for path in READ_PATHS:
        for query in FOREIGN_QUERIES:
            params = {key: value.format(bob=bob.pk) for key, value in query.items()}
            response = alice_api.get(path, params)
            body = response.content.decode()
            checked.append((path, params))

            assert response.status_code == 200, (path, params)
            assert BOB_SECRET not in body, (path, params)
            if path != "/memory/erase/":
                assert "Alice uses vim." in body, (path, params)
    assert len(checked) == len(READ_PATHS) * len(FOREIGN_QUERIES)


def test_no_route_takes_a_person_id(alice_api, bob):
    for path in ["/memory/{bob}/", "/memory/{bob}/export/", "/api/memory/{bob}/", "/api/memory/{bob}/export/",
                 "/api/memory/{bob}/operations/", "/api/users/{bob}/memory/", "/memory/export/{bob}/"]:
        response = alice_api.get(path.format(bob=bob.pk))

        assert response.status_code == 404, path
        assert BOB_SECRET not in response.content.decode(), path


def test_anonymous_visitors_get_nothing(alice):
    for path in ["/memory/", "/memory/export/", "/api/memory/", "/api/memory/export/",
                 "/admin/agentmemory/memorydocument/", "/admin/agentmemory/memoryevent/"]:
        response = Client().get(path)

        assert response.status_code in (302, 401, 403), path
        assert BOB_SECRET not in response.content.decode(), path


def test_people_who_are_not_staff_cannot_open_memory_in_the_admin(alice_client, bob):
    document = bob.memory_documents.first()
    paths = ["/admin/agentmemory/memorydocument/", f"/admin/agentmemory/memorydocument/{document.pk}/change/",
             "/admin/agentmemory/memoryevent/", f"/admin/agentmemory/memorydocument/{document.pk}/history/"]

    responses = [alice_client.get(path) for path in paths]

    assert all(r.status_code == 302 and "/admin/login/" in r["Location"] for r in responses)
    assert alice_client.post("/admin/agentmemory/memorydocument/", {
        "action": "erase_people", "_selected_action": [document.pk], "post": "yes",
    }).status_code == 302
    assert bob_untouched(bob)


# --- page writes ------------------------------------------------------------


def test_page_add_with_another_persons_id_changes_only_the_caller(alice_client, alice, bob):
    alice_client.post("/memory/add/", {"target": "user", "content": "Added by alice.", "user_id": bob.pk,
                                       "user": bob.pk, "owner": bob.pk})

    assert entries_of(alice)["user"] == ("Alice uses vim.", "Added by alice.")
    assert bob_untouched(bob)


@pytest.mark.parametrize("action", ["correct", "remove"])
def test_page_cannot_edit_another_persons_entry(alice_client, alice, bob, action):
    response = alice_client.post(f"/memory/{action}/", {
        "target": "user", "entry": BOB_ENTRY, "content": "hijacked", "user_id": bob.pk, "user": bob.pk,
    }, follow=True)

    # The refused post redirects back to the page, which says why.
    assert response.redirect_chain == [("/memory/#document-user", 302)]
    assert "changed or removed since the page was loaded" in response.content.decode()
    assert BOB_SECRET not in response.content.decode()
    assert bob_untouched(bob)
    assert entries_of(alice)["user"] == ("Alice uses vim.",)


def test_page_erase_with_another_persons_id_erases_only_the_caller(alice_client, alice, bob):
    alice_client.post("/memory/erase/", {"user_id": bob.pk, "user": bob.pk})

    assert document_count(alice) == 0
    assert bob_untouched(bob)
    assert not bob.memory_events.filter(outcome=Outcome.ERASED).exists()


# --- API writes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"operations": [{"target": "user", "action": "add", "content": "x"}], "user_id": "{bob}"},
         "unknown_argument"),
        ({"operations": [{"target": "user", "action": "add", "content": "x"}], "user": "{bob}"},
         "unknown_argument"),
        ({"operations": [{"target": "user", "action": "add", "content": "x", "user_id": "{bob}"}]},
         "unknown_field"),
        ({"operations": [{"target": "user", "action": "remove", "match": BOB_SECRET}]}, "no_match"),
        ({"operations": [{"target": "user", "action": "replace", "match": BOB_SECRET, "content": "x"}]},
         "no_match"),
    ],
)
def test_api_batches_cannot_reach_another_person(alice_api, alice, bob, body, code):
    def fill(value):
        if isinstance(value, dict):
            return {key: fill(item) for key, item in value.items()}
        if isinstance(value, list):
            return [fill(item) for item in value]
        return int(value.format(bob=bob.pk)) if value == "{bob}" else value

    response = alice_api.post("/api/memory/operations/", fill(body), format="json")

    assert response.status_code == 400
    assert response.json()["code"] == code
    assert BOB_SECRET not in response.content.decode()
    assert bob_untouched(bob)
    assert entries_of(alice) == {"user": ("Alice uses vim.",), "memory": ("Alice ships weekly.",)}


@pytest.mark.parametrize("query", ["", "?user_id={bob}", "?user={bob}"])
def test_api_erase_with_another_persons_id_erases_only_the_caller(alice_api, alice, bob, query):
    response = alice_api.delete("/api/memory/" + query.format(bob=bob.pk), {"user_id": bob.pk}, format="json")

    assert response.status_code == 200
    assert document_count(alice) == 0
    assert bob_untouched(bob)


def test_api_operations_with_query_parameters_change_only_the_caller(alice_api, alice, bob):
    response = alice_api.post(f"/api/memory/operations/?user_id={bob.pk}&user={bob.pk}", {
        "operations": [{"target": "memory", "action": "add", "content": "Alice's new note."}],
    }, format="json")

    assert response.status_code == 200
    assert entries_of(alice)["memory"] == ("Alice ships weekly.", "Alice's new note.")
    assert bob_untouched(bob)


# --- CSRF --------------------------------------------------------------------


PAGE_WRITES = [
    ("/memory/add/", {"target": "user", "content": "Added."}),
    ("/memory/correct/", {"target": "user", "entry": "Alice uses vim.", "content": "Alice uses helix."}),
    ("/memory/remove/", {"target": "user", "entry": "Alice uses vim."}),
    ("/memory/erase/", {}),
]


@pytest.mark.parametrize(("path", "data"), PAGE_WRITES)
def test_every_page_form_needs_a_csrf_token(alice, path, data):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    before = entries_of(alice)

    refused = client.post(path, data)

    assert refused.status_code == 403
    assert entries_of(alice) == before
    token = csrf_token_for(client)
    accepted = client.post(path, {**data, "csrfmiddlewaretoken": token})
    assert accepted.status_code == 302
    assert entries_of(alice) != before


def test_session_api_writes_need_a_csrf_token(alice):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    body = {"operations": [{"target": "user", "action": "add", "content": "Added."}]}

    assert client.post("/api/memory/operations/", body, format="json").status_code == 403
    assert client.delete("/api/memory/").status_code == 403
    assert document_count(alice) == 2 and entries_of(alice)["user"] == ("Alice uses vim.",)

    token = csrf_token_for(client)
    assert client.post("/api/memory/operations/", body, format="json", HTTP_X_CSRFTOKEN=token).status_code == 200
    assert client.delete("/api/memory/", HTTP_X_CSRFTOKEN=token).status_code == 200
    assert document_count(alice) == 0


def test_admin_erase_action_needs_a_csrf_token(alice, bob, make_user):
    from django.contrib.auth.models import Permission

    staff_member = make_user("eraser", is_staff=True)
    staff_member.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="agentmemory", codename__in=["view_memorydocument", "erase_memory"]))
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_member)
    documents = [d.pk for d in bob.memory_documents.all()]

    response = client.post("/admin/agentmemory/memorydocument/",
                           {"action": "erase_people", "_selected_action": documents, "post": "yes"})

    assert response.status_code == 403
    assert bob_untouched(bob)
