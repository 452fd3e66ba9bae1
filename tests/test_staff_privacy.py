"""Staff see only what they may: transcripts, titles and memory behind one content permission.

A support account with every view permission but without
`agentmemory.view_memory_content` crawls the whole admin (changelists, change
views, history and delete pages, searches with `?q=`, filters): no message
text, conversation title or memory entry may appear in any response. One
with the permission sees them. Memory events name the staff member who
erased a person's memory.
"""
from urllib.parse import parse_qs, urlsplit

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.test import Client

from agentmemory.models import Actor, MemoryDocument, MemoryEvent, MemoryVersion, Outcome
from chat.models import Conversation, Message

from .memory_helpers import crawl, fresh_throttle, seed  # noqa: F401  (fresh_throttle is an autouse fixture)

SECRET = "Falcon-9931"
TITLE_SECRET = "Heron-5120"
MEMORY_SECRET = "Osprey-7704"
SECRETS = (SECRET, TITLE_SECRET, MEMORY_SECRET)
CONVERSATIONS = "/admin/chat/conversation/"
DOCUMENTS = "/admin/agentmemory/memorydocument/"
EVENTS = "/admin/agentmemory/memoryevent/"
VERSIONS = "/admin/agentmemory/memoryversion/"
VIEW = (
    ("agentmemory", "view_memorydocument"), ("agentmemory", "view_memoryevent"), ("agentmemory", "view_memoryversion"),
    ("chat", "view_conversation"), ("chat", "view_message"),
)


def staff_client(make_user, name, *permissions):
    person = make_user(name, f"pw-{name}-123", is_staff=True)
    for app_label, codename in permissions:
        person.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    client = Client()
    client.force_login(person)
    return person, client


def leaks(responses):
    """Return the URLs whose response holds a secret (other than one the URL itself searched for)."""
    found = []
    for url, response in responses.items():
        searched = parse_qs(urlsplit(url).query).get("q", [""])[0]
        body = response.content.decode(errors="replace")
        if searched:
            body = body.replace(searched, "")  # the search box echoes the term
        if any(secret in body for secret in SECRETS):
            found.append(url)
    return sorted(found)


@pytest.fixture
def transcripts(user, other_user):
    seed(user, user_entries=[f"{MEMORY_SECRET} alice profile"], memory_entries=[f"{MEMORY_SECRET} alice notes"])
    conversations = []
    for person in (user, other_user):
        conversation = Conversation.objects.create(user=person, title=f"remember: {TITLE_SECRET} codename")
        Message.objects.create(conversation=conversation, role="user",
                               content=f"remember: {person.username} secret project codename is {SECRET}")
        Message.objects.create(conversation=conversation, role="assistant", content=f"Noted: {SECRET}.",
                               memory_outcome="committed")
        conversations.append(conversation)
    return conversations


@pytest.fixture
def viewer(make_user):
    return staff_client(make_user, "viewer", *VIEW)[1]


@pytest.fixture
def reader(make_user):
    return staff_client(make_user, "reader", *VIEW, ("agentmemory", "view_memory_content"))[1]


def test_staff_without_the_content_permission_get_no_text_title_or_memory_anywhere(transcripts, viewer):
    responses = crawl(viewer)
    probes = [
        *(f"{CONVERSATIONS}{c.pk}/change/" for c in transcripts),
        *(f"{CONVERSATIONS}{c.pk}/history/" for c in transcripts),
        *(f"{DOCUMENTS}{d.pk}/change/" for d in MemoryDocument.objects.all()),
        *(f"{VERSIONS}{v.pk}/change/" for v in MemoryVersion.objects.all()),
        *(f"{url}?q={secret}" for url in (CONVERSATIONS, DOCUMENTS, EVENTS, VERSIONS) for secret in SECRETS),
        f"{VERSIONS}?before__contains={MEMORY_SECRET}", f"{VERSIONS}?after__contains={MEMORY_SECRET}",
        f"{CONVERSATIONS}?q=alice", f"{CONVERSATIONS}?o=1", f"{CONVERSATIONS}?o=-2.3",
    ]
    responses.update({url: viewer.get(url) for url in probes})

    assert any(url.startswith(CONVERSATIONS) and url.endswith("/change/") and r.status_code == 200
               for url, r in responses.items()), "the viewer reaches the conversations themselves"
    assert any(url.startswith(VERSIONS) and url.endswith("/change/") and r.status_code == 200
               for url, r in responses.items()), "the viewer reaches the versions themselves"
    assert len(responses) > 20
    assert leaks(responses) == []


def test_metadata_is_still_there_for_staff_without_the_content_permission(transcripts, viewer):
    alice_conversation = transcripts[0]

    listing = viewer.get(CONVERSATIONS).content.decode()
    page = viewer.get(f"{CONVERSATIONS}{alice_conversation.pk}/change/").content.decode()

    assert ">alice<" in listing and ">bob<" in listing
    assert 'class="field-message_count">2<' in listing
    assert f"Conversation {alice_conversation.pk} of alice" in page
    assert "committed" in page  # each message's memory outcome, without its text
    assert "Assistant" in page and "User" in page


def test_search_by_content_or_title_is_refused_without_the_permission(transcripts, viewer):
    by_text = viewer.get(CONVERSATIONS, {"q": SECRET}).content.decode()
    by_title = viewer.get(CONVERSATIONS, {"q": TITLE_SECRET}).content.decode()
    by_name = viewer.get(CONVERSATIONS, {"q": "bob"}).content.decode()

    assert ">alice<" not in by_text and ">bob<" not in by_text
    assert ">alice<" not in by_title and ">bob<" not in by_title
    assert ">bob<" in by_name and ">alice<" not in by_name


@pytest.mark.parametrize("lookup", ["title", "title__contains", "title__startswith", "title__regex",
                                    "messages__content", "messages__content__contains"])
def test_titles_and_messages_cannot_be_probed_through_filters(transcripts, viewer, lookup):
    assert viewer.get(CONVERSATIONS, {lookup: SECRET}).status_code == 400


@pytest.mark.parametrize("lookup", ["messages__content__contains", "messages__content__startswith"])
def test_messages_are_never_filterable_even_with_the_permission(transcripts, reader, lookup):
    assert reader.get(CONVERSATIONS, {lookup: SECRET}).status_code == 400


def test_staff_with_the_content_permission_see_titles_text_and_memory_on_their_pages(transcripts, reader):
    alice_conversation = transcripts[0]
    document = MemoryDocument.objects.filter(user=alice_conversation.user).first()

    listing = reader.get(CONVERSATIONS).content.decode()
    page = reader.get(f"{CONVERSATIONS}{alice_conversation.pk}/change/").content.decode()
    memory = reader.get(f"{DOCUMENTS}{document.pk}/change/").content.decode()

    assert TITLE_SECRET not in listing, "lists show no titles: a title is read on its conversation's (audited) page"
    assert SECRET in page and TITLE_SECRET in page
    assert MEMORY_SECRET in memory


def test_staff_with_the_content_permission_may_search_titles_and_messages(transcripts, reader):
    by_text = reader.get(CONVERSATIONS, {"q": "alice secret project"}).content.decode()
    by_title = reader.get(CONVERSATIONS, {"q": TITLE_SECRET}).content.decode()

    assert ">alice<" in by_text and ">bob<" not in by_text
    assert by_title.count('class="field-message_count"') == 2


def test_transcripts_are_read_only_in_the_admin(transcripts, reader):
    conversation = transcripts[0]

    response = reader.post(f"{CONVERSATIONS}{conversation.pk}/change/", {"title": "changed"})

    assert response.status_code == 403
    conversation.refresh_from_db()
    assert conversation.title == f"remember: {TITLE_SECRET} codename"


def test_admin_titles_name_the_person_by_username(transcripts, viewer):
    alice = transcripts[0].user
    document = MemoryDocument.objects.get(user=alice, memory_type="user")
    event = MemoryEvent.objects.filter(user=alice).first()

    document_page = viewer.get(f"{DOCUMENTS}{document.pk}/change/").content.decode()
    event_page = viewer.get(f"{EVENTS}{event.pk}/change/").content.decode()

    assert "User profile of alice" in document_page and "of user " not in document_page
    assert "by system for alice" in event_page


def test_staff_erase_names_the_staff_member_on_the_event(transcripts, make_user):
    alice = transcripts[0].user
    eraser, client = staff_client(make_user, "eraser", *VIEW, ("agentmemory", "erase_memory"))
    documents = list(MemoryDocument.objects.filter(user=alice))

    response = client.post(DOCUMENTS, {"action": "erase_people", "post": "yes",
                                       "_selected_action": [d.pk for d in documents]})

    assert response.status_code == 302
    event = MemoryEvent.objects.get(user=alice, outcome=Outcome.ERASED)
    assert (event.actor, event.staff_id, event.staff_username) == (Actor.STAFF, eraser.pk, "eraser")
    assert "Staff: eraser" in client.get(EVENTS).content.decode()
    # The admin log keeps the id-only label, so the person's name does not outlive their account there.
    assert {entry.object_repr for entry in LogEntry.objects.filter(user=eraser)} == {
        f"User profile of user {alice.pk}", f"Agent memory of user {alice.pk}"}
    # The person reads that support staff erased it, not who.
    person = Client()
    person.force_login(alice)
    history = person.get("/memory/").content.decode()
    history = history[history.index('id="history-title"'):]
    assert "Support staff" in history and "eraser" not in history


def test_the_record_of_who_erased_outlives_the_staff_account(transcripts, make_user):
    alice = transcripts[0].user
    eraser, client = staff_client(make_user, "eraser", *VIEW, ("agentmemory", "erase_memory"))
    client.post(DOCUMENTS, {"action": "erase_people", "post": "yes",
                            "_selected_action": [d.pk for d in MemoryDocument.objects.filter(user=alice)]})

    eraser.delete()

    event = MemoryEvent.objects.get(user=alice, outcome=Outcome.ERASED)
    assert (event.staff_id, event.staff_username) == (None, "eraser")


def test_erases_by_the_person_name_no_staff_member(user):
    client = Client()
    client.force_login(user)
    seed(user, user_entries=["Uses vim."])

    client.post("/memory/erase/")

    event = MemoryEvent.objects.get(user=user, outcome=Outcome.ERASED)
    assert (event.actor, event.staff_id, event.staff_username) == (Actor.USER, None, "")


def test_staff_with_the_content_permission_read_versions_and_the_read_is_recorded(transcripts, reader, user):
    version = MemoryVersion.objects.filter(user=user).first()
    page = reader.get(f"{VERSIONS}{version.pk}/change/").content.decode()
    assert MEMORY_SECRET in page
    viewed = MemoryEvent.objects.get(user=user, outcome=Outcome.VIEWED)
    assert viewed.viewed == "version" and viewed.actor == Actor.STAFF
