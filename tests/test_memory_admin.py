"""Staff review in the admin: read-only, content only with its permission, audited erase."""

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from agentmemory.models import Actor, MemoryDocument, MemoryEvent, Outcome

from .memory_helpers import (  # noqa: F401  (fresh_throttle is an autouse fixture)
    crawl,
    ATTRIBUTE_ESCAPED,
    ATTRIBUTE_PAYLOAD,
    ATTRIBUTE_RAW,
    SCRIPT_ESCAPED,
    SCRIPT_PAYLOAD,
    document_count,
    entries_of,
    fresh_throttle,
    seed,
)

SENTINEL = "Zanzibar-4402"
CHANGELIST = "/admin/agentmemory/memorydocument/"
EVENTS = "/admin/agentmemory/memoryevent/"
VIEW_PERMISSIONS = ("view_memorydocument", "view_memoryevent")


def staff(make_user, name, *codenames):
    person = make_user(name, f"pw-{name}-123", is_staff=True)
    person.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="agentmemory", codename__in=codenames)
    )
    client = Client()
    client.force_login(person)
    return person, client


@pytest.fixture
def people(user, other_user):
    seed(user, user_entries=[f"{SENTINEL} alice profile"], memory_entries=[f"{SENTINEL} alice notes"])
    seed(other_user, user_entries=[f"{SENTINEL} bob profile"])
    return user, other_user


@pytest.fixture
def viewer(make_user):
    return staff(make_user, "viewer", *VIEW_PERMISSIONS)[1]


@pytest.fixture
def reader(make_user):
    return staff(make_user, "reader", *VIEW_PERMISSIONS, "view_memory_content")[1]


@pytest.fixture
def eraser(make_user):
    return staff(make_user, "eraser", *VIEW_PERMISSIONS, "erase_memory")


def action_post(client, action, documents, **extra):
    return client.post(CHANGELIST, {"action": action, "_selected_action": [d.pk for d in documents], **extra})


def test_list_shows_user_type_usage_schema_version_and_update_time_without_content(people, viewer):
    alice, _ = people

    html = viewer.get(CHANGELIST).content.decode()

    assert "alice" in html and "bob" in html and "User profile" in html and "Agent memory" in html
    used = len(f"{SENTINEL} alice profile")
    assert f"{used * 100 // 1375}% of 1,375" in html
    assert 'class="field-schema_version">1<' in html and "field-updated_at" in html
    assert SENTINEL not in html


def test_search_finds_documents_by_username(people, viewer):
    html = viewer.get(CHANGELIST, {"q": "bob"}).content.decode()

    assert ">bob<" in html and ">alice<" not in html


def test_near_full_filter_lists_documents_at_or_above_ninety_percent(make_user, viewer):
    full, almost = make_user("full"), make_user("almost")
    seed(full, user_entries=["f" * 1238])  # 1238 * 100 // 1375 == 90
    seed(almost, user_entries=["a" * 1237])  # 89 %

    near = viewer.get(CHANGELIST, {"near_full": "yes"}).content.decode()
    below = viewer.get(CHANGELIST, {"near_full": "no"}).content.decode()

    assert ">full<" in near and ">almost<" not in near
    assert ">almost<" in below and ">full<" not in below


def test_staff_without_content_permission_never_receive_content(people, viewer, reader):
    alice, bob = people
    responses = crawl(viewer)
    documents = MemoryDocument.objects.all()
    probes = [
        *(f"{CHANGELIST}{d.pk}/change/" for d in documents),
        *(f"{CHANGELIST}{d.pk}/history/" for d in documents),
        *(f"{CHANGELIST}{d.pk}/delete/" for d in documents),
        f"{CHANGELIST}?near_full=yes", f"{CHANGELIST}?q=alice", f"{CHANGELIST}?o=3.-2",
        f"{EVENTS}?outcome__exact=committed", f"{EVENTS}?actor__exact=system",
    ]
    responses.update({url: viewer.get(url) for url in probes})

    assert len(responses) > 15
    assert any(url.endswith("/change/") and r.status_code == 200 for url, r in responses.items())
    leaks = [url for url, r in responses.items() if SENTINEL.encode() in r.content]
    assert leaks == []
    # The same view page does show content to staff who hold the permission.
    assert SENTINEL in reader.get(f"{CHANGELIST}{alice.memory_documents.first().pk}/change/").content.decode()


def test_search_never_matches_content(people, viewer):
    html = viewer.get(CHANGELIST, {"q": SENTINEL}).content.decode()

    assert ">alice<" not in html and ">bob<" not in html


@pytest.mark.parametrize("lookup", ["content__contains", "content__startswith", "content", "content__regex"])
def test_content_cannot_be_probed_through_changelist_filters(people, viewer, reader, lookup):
    for client in (viewer, reader):
        response = client.get(CHANGELIST, {lookup: SENTINEL})

        assert response.status_code == 400


def test_content_is_escaped_for_staff_who_may_read_it(user, reader):
    seed(user, user_entries=[SCRIPT_PAYLOAD], memory_entries=[ATTRIBUTE_PAYLOAD])

    pages = [reader.get(f"{CHANGELIST}{d.pk}/change/").content.decode() for d in MemoryDocument.objects.all()]

    html = "".join(pages)
    assert SCRIPT_ESCAPED in html and ATTRIBUTE_ESCAPED in html
    assert SCRIPT_PAYLOAD not in html and ATTRIBUTE_RAW not in html


def test_nobody_adds_changes_or_deletes_documents_through_the_admin(people, make_user):
    superuser = make_user("root", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(superuser)
    document = MemoryDocument.objects.filter(user=people[0]).first()

    assert client.get(f"{CHANGELIST}add/").status_code == 403
    assert client.post(f"{CHANGELIST}{document.pk}/change/", {"content": "overwritten"}).status_code == 403
    assert client.get(f"{CHANGELIST}{document.pk}/delete/").status_code == 403
    assert client.post(f"{CHANGELIST}{document.pk}/delete/", {"post": "yes"}).status_code == 403
    assert 'value="delete_selected"' not in client.get(CHANGELIST).content.decode()
    action_post(client, "delete_selected", [document], post="yes")
    assert document_count(people[0]) == 2
    assert entries_of(people[0])["user"] == (f"{SENTINEL} alice profile",)


def test_erase_action_is_not_offered_without_the_erase_permission(people, viewer):
    alice, _ = people

    html = viewer.get(CHANGELIST).content.decode()
    action_post(viewer, "erase_people", list(alice.memory_documents.all()), post="yes")

    assert "erase_people" not in html
    assert document_count(alice) == 2
    assert not MemoryEvent.objects.filter(outcome=Outcome.ERASED).exists()


def test_erase_action_confirms_then_erases_only_the_selected_person_and_is_audited(people, eraser):
    alice, bob = people
    staff_member, client = eraser
    one_of_alices = [alice.memory_documents.get(memory_type="memory")]

    confirmation = action_post(client, "erase_people", one_of_alices)

    html = confirmation.content.decode()
    assert confirmation.status_code == 200
    assert "alice" in html and "Yes, erase" in html and SENTINEL not in html
    assert document_count(alice) == 2

    done = action_post(client, "erase_people", one_of_alices, post="yes")

    assert done.status_code == 302
    assert document_count(alice) == 0, "both of the person's documents go"
    assert document_count(bob) == 1
    event = MemoryEvent.objects.get(user=alice, outcome=Outcome.ERASED)
    assert event.actor == Actor.STAFF
    logged = LogEntry.objects.filter(user=staff_member, action_flag=DELETION)
    assert logged.count() == 2 and all(SENTINEL not in entry.object_repr for entry in logged)


def test_event_admin_is_read_only_and_filters_by_outcome_and_actor(people, viewer, make_user):
    alice, _ = people
    client = Client()
    client.force_login(alice)
    client.post("/memory/remove/", {"target": "user", "entry": "not there"})

    rejected = viewer.get(EVENTS, {"outcome__exact": "rejected"}).content.decode()
    by_agent = viewer.get(EVENTS, {"actor__exact": "agent"}).content.decode()
    by_system = viewer.get(EVENTS, {"actor__exact": "system"}).content.decode()

    assert rejected.count('class="field-outcome_words"') == 1
    assert "The entry had changed since the page was loaded" in rejected and "entry_changed" not in rejected
    assert 'class="field-outcome_words"' not in by_agent
    assert by_system.count('class="field-outcome_words"') == 2
    event = MemoryEvent.objects.first()
    assert viewer.get(f"{EVENTS}add/").status_code == 403
    assert viewer.post(f"{EVENTS}{event.pk}/change/", {"outcome": "committed"}).status_code == 403
    assert viewer.get(f"{EVENTS}{event.pk}/delete/").status_code == 403
