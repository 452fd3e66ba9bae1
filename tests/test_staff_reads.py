"""Staff reads of content are audited (issue 27, item 3).

A staff member holding `agentmemory.view_memory_content` drives the admin
over HTTP: each page that shows them a person's content (a memory document,
a proposal, a conversation) and each search over conversation text writes a
content-free event for that person, naming the staff member and the kind of
thing read. The person reads it in History in plain words; admins see it in
the event admin. Staff without the permission, and lists that show no
content, record nothing. A live daphne server's access log keeps no search
term. Assertions compute booleans first, so a failure never prints a secret.
"""
import time

import pytest
from django.db import DatabaseError
from django.test import Client

from agentmemory import proposals, services, words
from agentmemory.models import Actor, MemoryDocument, MemoryEvent, Outcome, Viewed
from agentmemory.rules import Operation
from chat.models import Conversation, Message

from tests.multiprocess.servers import servers  # noqa: F401  (a fixture)

from .memory_helpers import event_values, fresh_throttle, seed  # noqa: F401  (fresh_throttle is autouse)
from .test_plain_words import CODE_LIKE
from .test_staff_privacy import staff_client

SECRET = "Falcon-9931"
TITLE_SECRET = "Heron-5120"
MEMORY_SECRET = "Osprey-7704"
PROPOSAL_SECRET = "Kestrel-3318"
SECRETS = (SECRET, TITLE_SECRET, MEMORY_SECRET, PROPOSAL_SECRET)
CONVERSATIONS = "/admin/chat/conversation/"
DOCUMENTS = "/admin/agentmemory/memorydocument/"
PROPOSALS = "/admin/agentmemory/memoryproposal/"
EVENTS = "/admin/agentmemory/memoryevent/"
VIEW = (
    ("agentmemory", "view_memorydocument"), ("agentmemory", "view_memoryevent"),
    ("agentmemory", "view_memoryproposal"), ("chat", "view_conversation"), ("chat", "view_message"),
)
CONTENT = ("agentmemory", "view_memory_content")


def views_of(person):
    return list(MemoryEvent.objects.filter(user=person, outcome=Outcome.VIEWED)
                .values_list("actor", "viewed", "targets", "staff_username"))


def holds_a_secret(values) -> bool:
    return any(secret in value for value in values for secret in SECRETS)


def history_section(client) -> str:
    html = client.get("/memory/").content.decode()
    return html[html.index('id="history-title"'):]


@pytest.fixture
def content(user, other_user):
    """alice: both documents, a proposal and a conversation; bob: a conversation."""
    seed(user, user_entries=[f"{MEMORY_SECRET} alice profile"], memory_entries=[f"{MEMORY_SECRET} alice notes"])
    proposal_id = proposals.create(
        user_id=user.pk, operations=[Operation(target="memory", action="add", content=f"{PROPOSAL_SECRET} fact")])
    conversations = {}
    for person in (user, other_user):
        conversation = Conversation.objects.create(user=person, title=f"remember: {TITLE_SECRET} codename")
        Message.objects.create(conversation=conversation, role="user",
                               content=f"{person.username} says the project codename is {SECRET}")
        conversations[person.username] = conversation
    return {"proposal": proposal_id, "conversations": conversations}


@pytest.fixture
def reader(make_user):
    return staff_client(make_user, "reader", *VIEW, CONTENT)


@pytest.fixture
def viewer(make_user):
    return staff_client(make_user, "viewer", *VIEW)


def test_opening_a_memory_document_records_who_read_which_document(content, user, reader):
    staff, client = reader
    document = MemoryDocument.objects.get(user=user, memory_type="user")

    page = client.get(f"{DOCUMENTS}{document.pk}/change/")

    assert page.status_code == 200 and MEMORY_SECRET in page.content.decode()
    assert views_of(user) == [(Actor.STAFF, Viewed.MEMORY, {"user": 1}, "reader")]
    event = MemoryEvent.objects.get(user=user, outcome=Outcome.VIEWED)
    assert event.staff_id == staff.pk
    assert not holds_a_secret(event_values(user)), "an event holds content"


def test_opening_a_proposal_records_a_view(content, user, reader):
    page = reader[1].get(f"{PROPOSALS}{content['proposal']}/change/")

    assert page.status_code == 200 and PROPOSAL_SECRET in page.content.decode()
    assert views_of(user) == [(Actor.STAFF, Viewed.PROPOSAL, {}, "reader")]


def test_opening_a_transcript_records_a_view_for_its_owner_only(content, user, other_user, reader):
    conversation = content["conversations"]["alice"]

    page = reader[1].get(f"{CONVERSATIONS}{conversation.pk}/change/")

    assert page.status_code == 200 and SECRET in page.content.decode()
    assert views_of(user) == [(Actor.STAFF, Viewed.CONVERSATION, {}, "reader")]
    assert views_of(other_user) == []


def test_each_view_is_recorded(content, user, reader):
    document = MemoryDocument.objects.get(user=user, memory_type="memory")

    for _ in range(2):
        reader[1].get(f"{DOCUMENTS}{document.pk}/change/")

    assert views_of(user) == [(Actor.STAFF, Viewed.MEMORY, {"memory": 1}, "reader")] * 2


def test_a_search_over_messages_records_a_view_for_each_person_listed_without_the_term(
    content, user, other_user, reader,
):
    term = "alice says the project"

    listing = reader[1].get(CONVERSATIONS, {"q": term})

    assert listing.status_code == 200 and ">alice<" in listing.content.decode()
    assert views_of(user) == [(Actor.STAFF, Viewed.SEARCH, {}, "reader")]
    assert views_of(other_user) == [], "bob's conversation did not match, so nothing of his was shown"
    stored = [str(value) for row in MemoryEvent.objects.values() for value in row.values()]
    assert not any(term in value for value in stored), "an event holds the search term"


def test_a_search_matching_nobody_records_nothing(content, reader):
    reader[1].get(CONVERSATIONS, {"q": "no message says this"})

    assert not MemoryEvent.objects.filter(outcome=Outcome.VIEWED).exists()


def test_lists_show_no_titles_and_record_nothing(content, reader):
    pages = {url: reader[1].get(url) for url in (CONVERSATIONS, DOCUMENTS, PROPOSALS, EVENTS,
                                                 f"{DOCUMENTS}?q=alice")}

    assert all(response.status_code == 200 for response in pages.values())
    assert not any(TITLE_SECRET in response.content.decode() for response in pages.values())
    assert not MemoryEvent.objects.filter(outcome=Outcome.VIEWED).exists()


def test_staff_without_the_content_permission_record_nothing(content, user, viewer):
    probes = [
        *(f"{CONVERSATIONS}{c.pk}/change/" for c in content["conversations"].values()),
        *(f"{DOCUMENTS}{d.pk}/change/" for d in MemoryDocument.objects.all()),
        f"{PROPOSALS}{content['proposal']}/change/", f"{CONVERSATIONS}?q={SECRET}", f"{CONVERSATIONS}?q=alice",
    ]
    responses = {url: viewer[1].get(url) for url in probes}

    assert any(url.endswith("/change/") and r.status_code == 200 for url, r in responses.items())
    assert not MemoryEvent.objects.filter(outcome=Outcome.VIEWED).exists()


def test_the_person_reads_in_history_that_support_staff_viewed_their_memory(content, user, reader):
    document = MemoryDocument.objects.get(user=user, memory_type="user")
    reader[1].get(f"{DOCUMENTS}{document.pk}/change/")
    reader[1].get(f"{PROPOSALS}{content['proposal']}/change/")
    reader[1].get(f"{CONVERSATIONS}{content['conversations']['alice'].pk}/change/")
    reader[1].get(CONVERSATIONS, {"q": "alice says"})
    person = Client()
    person.force_login(user)

    history = history_section(person)

    for sentence in ("Support staff viewed your memory (your profile)",
                     "Support staff viewed a change the assistant proposed to your memory",
                     "Support staff viewed one of your conversations",
                     "Support staff searched conversations, and yours were among the results"):
        assert sentence in history
    assert history.count("<td>Viewed</td>") == 4 and history.count("<td>Support staff</td>") >= 4
    assert "reader" not in history, "the person reads that support staff looked, not who"
    assert not CODE_LIKE.search(history.split("</table>")[0].split("<tbody>")[1])


@pytest.mark.parametrize("viewed", Viewed.values)
def test_every_kind_of_read_is_plain_words_for_the_person_and_the_admin(viewed):
    for for_owner in (True, False):
        text = words.staff_view(viewed, {"user": 1}, for_owner=for_owner)

        assert text[0].isupper() and not CODE_LIKE.search(text), text
        assert text.startswith("Support staff ") == for_owner
    assert words.outcome_name(Outcome.VIEWED) == "Viewed" and words.event_reason(Outcome.VIEWED, "") == ""


def test_admins_see_who_viewed_what(content, user, reader, make_user):
    document = MemoryDocument.objects.get(user=user, memory_type="memory")
    reader[1].get(f"{DOCUMENTS}{document.pk}/change/")
    admin_user = make_user("root", is_staff=True, is_superuser=True)
    admin = Client()
    admin.force_login(admin_user)

    listing = admin.get(EVENTS, {"outcome__exact": "viewed"}).content.decode()

    assert listing.count('class="field-outcome_words"') == 1
    assert "Staff: reader" in listing and "Viewed the memory (the notes)" in listing
    assert not holds_a_secret([listing])


def test_a_read_that_cannot_be_recorded_shows_nothing(content, user, reader, monkeypatch):
    def unavailable(**kwargs):
        raise DatabaseError("audit table unavailable")

    monkeypatch.setattr(services, "record_staff_views", unavailable)
    client = Client(raise_request_exception=False)
    client.force_login(reader[0])
    document = MemoryDocument.objects.get(user=user, memory_type="user")

    page = client.get(f"{DOCUMENTS}{document.pk}/change/")

    assert page.status_code == 500
    assert MEMORY_SECRET not in page.content.decode()


@pytest.mark.multiprocess
def test_a_live_servers_access_log_keeps_no_search_term(user, servers, make_user):
    """daphne writes its access log itself (not through logging): the query string is dropped there."""
    conversation = Conversation.objects.create(user=user, title="notes")
    Message.objects.create(conversation=conversation, role="user", content=f"the codename is {SECRET}")
    staff, _ = staff_client(make_user, "reader", *VIEW, CONTENT)
    login = Client()
    login.force_login(staff)
    cookie = login.cookies["sessionid"].value
    server = servers.start("access-log")

    status, body = server.get(f"{CONVERSATIONS}?q={SECRET}", headers={"Cookie": f"sessionid={cookie}"})

    assert status == 200 and ">alice<" in body
    deadline = time.monotonic() + 10
    while "/admin/chat/conversation/" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = server.log()
    assert "GET /admin/chat/conversation/?[redacted]" in log
    leaked = SECRET in log
    assert not leaked, "the access log holds the staff member's search term"
    assert views_of(user) == [(Actor.STAFF, Viewed.SEARCH, {}, "reader")]
