"""Provenance through the store (issue 15, part 2): "why do you remember this?".

Every writer records where the entries it writes came from, in the same
locked commit; surviving entries keep theirs; the sources stay aligned with
the entries on both databases; a deleted conversation drops the link and
keeps the entry; the page, the export and the admin show them (the admin
without content).
"""
import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from agentmemory import proposals, provenance, services, store
from agentmemory.models import Actor, MemoryDocument
from agentmemory.rules import Operation
from chat.models import Conversation
from chat.turns import run_turn
from tests.chat_helpers import db, fresh_agents  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The build runs on Debian bookworm"


def sources(user, target="memory"):
    return store.load_state(user_id=user.pk).sources[target]


def add(user, content, actor=Actor.USER, target="memory", **origin):
    return store.commit_operations(user_id=user.pk, actor=actor, origin=origin or None,
                                   operations=[Operation(target=target, action="add", content=content)])


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


async def test_the_agents_commit_names_its_conversation_and_turn(user, scripted_model):
    scripted_model.push(tool_call({"operations": [{"target": "memory", "action": "add", "content": FACT}]}),
                        text("Saved."))

    result = await run_turn(user=user, content="our build runs on bookworm")

    [source] = await db(sources, user)
    assert source.by == "agent" and source.conversation_id == result.conversation_id
    assert source.turn_id == result.turn_id and source.at


def test_each_writer_is_named_and_surviving_entries_keep_their_source(user):
    add(user, "Uses Django.", actor=Actor.AGENT, conversation_id=12, turn_id="t1")
    add(user, "Ships weekly.")
    first = sources(user)

    services.correct_entry(user_id=user.pk, target="memory", entry="Ships weekly.", content="Ships every Monday.")
    add(user, "Reviewed by support.", actor=Actor.STAFF)

    after = sources(user)
    assert [s.by for s in after] == ["agent", "user", "staff"]
    assert after[0] == first[0]  # untouched entry: the same source, time included
    assert after[1] != first[1] and after[1].by == "user"
    assert store.load_snapshot(user_id=user.pk).memory == ("Uses Django.", "Ships every Monday.",
                                                           "Reviewed by support.")


def test_a_consolidation_and_a_remove_keep_the_sources_aligned(user):
    for fact in ("Uses Django.", "Uses Django 5.", "Ships weekly."):
        add(user, fact)
    kept = sources(user)[2]

    store.commit_operations(user_id=user.pk, actor=Actor.AGENT, origin={"conversation_id": 3, "turn_id": "t3"},
                            operations=[
                                Operation(target="memory", action="remove", match="Uses Django."),
                                Operation(target="memory", action="replace", match="Django 5",
                                          content="Uses Django 5.2 LTS."),
                            ])

    memory = store.load_snapshot(user_id=user.pk).memory
    after = sources(user)
    assert memory == ("Uses Django 5.2 LTS.", "Ships weekly.")
    assert len(after) == len(memory)
    assert after[0].by == "agent" and after[0].conversation_id == 3 and after[1] == kept


def test_rows_from_before_provenance_read_as_unknown_and_stay_aligned(user):
    add(user, "Old fact.")
    MemoryDocument.objects.filter(user=user).update(provenance=None)

    assert sources(user) == (None,)
    add(user, FACT, actor=Actor.AGENT, conversation_id=5)

    after = sources(user)
    assert after[0] is None and after[1].conversation_id == 5


def test_a_saved_proposal_comes_from_its_chat(user):
    conversation = Conversation.objects.create(user=user, title="Trip planning")
    proposal_id = proposals.create(user_id=user.pk, conversation_id=conversation.pk, turn_id="t9",
                                   operations=[Operation(target="memory", action="add", content=FACT)])

    proposals.save(user_id=user.pk, proposal_id=proposal_id)

    [source] = sources(user)
    assert source.by == "agent" and source.conversation_id == conversation.pk and source.turn_id == "t9"


def test_deleting_the_conversation_keeps_the_entry_and_drops_the_link(user):
    conversation = Conversation.objects.create(user=user, title="Trip planning")
    add(user, FACT, actor=Actor.AGENT, conversation_id=conversation.pk, turn_id="t1")
    add(user, "Other fact.", actor=Actor.AGENT, conversation_id=conversation.pk + 1000)

    assert client_for(user).delete(f"/api/conversations/{conversation.pk}/").status_code == 204

    first, second = sources(user)
    assert store.load_snapshot(user_id=user.pk).memory == (FACT, "Other fact.")
    assert first.by == "agent" and first.conversation_id is None and first.turn_id == ""
    assert second.conversation_id == conversation.pk + 1000


def test_the_memory_page_says_where_each_entry_came_from(user, client):
    conversation = Conversation.objects.create(user=user, title="Trip planning")
    add(user, FACT, actor=Actor.AGENT, conversation_id=conversation.pk)
    add(user, "Prefers short answers.", target="user")
    client.force_login(user)

    html = client.get("/memory/").content.decode()

    assert f'href="/?conversation={conversation.pk}"' in html
    assert "From your chat \u201cTrip planning\u201d" in html
    assert "Written by you" in html


def test_another_persons_conversation_is_never_linked(user, other_user, client):
    theirs = Conversation.objects.create(user=other_user, title="Bob's secret plans")
    add(user, FACT, actor=Actor.AGENT, conversation_id=theirs.pk)  # an id that is not alice's
    client.force_login(user)

    html = client.get("/memory/").content.decode()

    assert "secret plans" not in html and f"conversation={theirs.pk}" not in html
    assert "From a chat with the assistant" in html


def test_the_export_carries_the_sources_aligned_with_the_entries(user):
    add(user, FACT, actor=Actor.AGENT, conversation_id=4, turn_id="t4")
    add(user, "Ships weekly.")

    document = client_for(user).get("/api/memory/export/").json()["documents"]["memory"]

    assert len(document["sources"]) == len(document["entries"]) == 2
    assert document["sources"][0]["by"] == "agent" and document["sources"][0]["conversation_id"] == 4
    assert document["sources"][1]["by"] == "user"
    assert set(document["sources"][1]) == {"by", "at"}


def test_staff_see_sources_without_the_content_permission_but_not_the_content(user, make_user, client):
    add(user, FACT, actor=Actor.AGENT, conversation_id=77)
    staff = make_user("support", "pw-support-123", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_memorydocument"))
    client.force_login(staff)
    document = MemoryDocument.objects.get(user=user)

    page = client.get(f"/admin/agentmemory/memorydocument/{document.pk}/change/").content.decode()

    assert "the assistant" in page and "chat 77" in page
    leaked = "bookworm" in page
    assert not leaked, "memory content reached staff without the content permission"


def test_a_source_holds_ids_and_roles_only(user):
    add(user, FACT, actor=Actor.AGENT, conversation_id=8, turn_id="t8")

    [stored] = MemoryDocument.objects.get(user=user).provenance

    assert set(stored) == {"by", "at", "conversation_id", "turn_id"}
    assert provenance.Source.from_json(stored).conversation_id == 8
    leaked = any("bookworm" in str(value) for value in stored.values())
    assert not leaked
