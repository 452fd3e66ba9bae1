"""Undo and restore from outside (issue 25, part 2): the REST API (/api/memory/changes/), the memory page's
History without JavaScript (Post/Redirect/Get), and the chat turn's change_id, over HTTP on a real database.
An agent change comes from a REST turn against a scripted model over real HTTP."""
import pytest
from django.test import Client
from rest_framework.test import APIClient

from agentmemory import store
from agentmemory.models import Actor, MemoryEvent, MemoryVersion, Outcome
from agentmemory.rules import Operation
from tests.chat_helpers import fresh_agents  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

FACT = "Deploys go through the heron-7741 pipeline"


def api_for(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def page_for(user) -> Client:
    page = Client()
    page.force_login(user)
    return page


def commit(user, *operations, actor=Actor.USER):
    return store.commit_operations(user_id=user.pk, operations=list(operations), actor=actor)


def add(content, target="memory"):
    return Operation(target=target, action="add", content=content)


def memory_of(user, target="memory"):
    return store.load_snapshot(user_id=user.pk).entries(target)


@pytest.mark.django_db(transaction=True)
def test_an_agent_change_from_a_rest_turn_is_undone_by_its_change_id(user, scripted_model):
    scripted_model.push(tool_call({"operations": [{"target": "memory", "action": "add", "content": FACT}]}),
                        text("Saved."))
    api = api_for(user)
    turn = api.post("/api/chat/turns/", {"content": "remember our pipeline"}, format="json").json()
    assert turn["memory"]["status"] == "committed" and memory_of(user) == (FACT,)
    change_id = turn["memory"]["change_id"]

    listed = api.get("/api/memory/changes/").json()["changes"]
    assert [change["id"] for change in listed] == [change_id]
    assert listed[0]["by"] == "agent" and listed[0]["conversation_id"] == turn["conversation_id"]
    assert listed[0]["documents"] == {"memory": {"before": [], "after": [FACT], "added": [FACT], "removed": [],
                                                 "changed": [], "expiry_changed": []}}

    undone = api.post(f"/api/memory/changes/{change_id}/undo/")
    assert undone.status_code == 200
    body = undone.json()
    assert body["outcome"] == "committed" and body["changed"] == ["memory"] and body["change_id"] > change_id
    assert memory_of(user) == ()
    # The undo is a change too, by the person, and can be undone.
    newest = api.get(f"/api/memory/changes/{body['change_id']}/").json()
    assert newest["kind"] == "undo" and newest["by"] == "user"
    again = api.post(f"/api/memory/changes/{body['change_id']}/undo/")
    assert again.status_code == 200 and memory_of(user) == (FACT,)
    [source] = store.load_state(user_id=user.pk).sources["memory"]
    assert source.restored and source.by == "user"


def test_undo_after_the_entry_changed_is_a_409_conflict_in_plain_words(user):
    change = commit(user, add(FACT), actor=Actor.AGENT)
    commit(user, Operation(target="memory", action="replace", match="heron-7741", content="Deploys go through CI"))
    response = api_for(user).post(f"/api/memory/changes/{change.change_id}/undo/")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "conflict" and "nothing was undone" in body["detail"]
    assert "staged" not in body["detail"] and FACT not in body["detail"]
    assert memory_of(user) == ("Deploys go through CI",)


def test_another_persons_change_is_404_on_every_route(user, other_user):
    change = commit(other_user, add("bob's fact"))
    api = api_for(user)
    for method, path in (("get", f"/api/memory/changes/{change.change_id}/"),
                         ("post", f"/api/memory/changes/{change.change_id}/undo/"),
                         ("post", f"/api/memory/changes/{change.change_id}/restore/"),
                         ("post", "/api/memory/changes/not-a-number/undo/")):
        response = getattr(api, method)(path)
        assert response.status_code == 404 and response.json()["code"] == "change_not_found", path
    assert api.get("/api/memory/changes/").json() == {"changes": []}
    assert memory_of(other_user) == ("bob's fact",)


def test_restore_brings_back_a_version_through_the_api(user):
    commit(user, add("a"), add("b"))
    kept = commit(user, Operation(target="memory", action="replace", match="b", content="B"))
    commit(user, Operation(target="memory", action="remove", match="a"), add("c"))
    response = api_for(user).post(f"/api/memory/changes/{kept.change_id}/restore/")
    assert response.status_code == 200 and memory_of(user) == ("a", "B")
    again = api_for(user).post(f"/api/memory/changes/{kept.change_id}/restore/")
    assert again.status_code == 409 and again.json()["code"] == "already_restored"


def test_the_schema_documents_the_change_routes(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert set(paths["/api/memory/changes/{id}/undo/"]["post"]["responses"]) >= {"200", "404", "409"}
    assert "restore" in paths["/api/memory/changes/{id}/restore/"]["post"]["summary"].lower()
    assert "get" in paths["/api/memory/changes/"]


# --- the page, without JavaScript ---------------------------------------------------------


def test_the_page_lists_each_change_entry_by_entry_with_undo_and_restore(user):
    commit(user, add("Uses vim."), actor=Actor.AGENT)
    change = commit(user, Operation(target="memory", action="replace", match="vim", content="Uses emacs."))
    html = page_for(user).get("/memory/").content.decode()
    item = html[html.index(f'id="change-{change.change_id}"'):]
    item = item[:item.index("</li>\n      \n      <li") if "</li>\n      \n      <li" in item else len(item)]
    assert "You" in item and "Changed" in item and "“Uses vim.”" in item and "“Uses emacs.”" in item
    assert f'action="/memory/changes/{change.change_id}/undo/"' in item
    assert f'action="/memory/changes/{change.change_id}/restore/"' in item
    assert "The assistant, in a chat" in html


def test_undo_on_the_page_posts_then_redirects_and_says_so(user):
    change = commit(user, add(FACT), actor=Actor.AGENT)
    page = page_for(user)
    response = page.post(f"/memory/changes/{change.change_id}/undo/")
    assert response.status_code == 302 and response["Location"] == "/memory/#history"
    assert memory_of(user) == ()
    shown = page.get("/memory/").content.decode()
    assert "Undone: your memory is as it was before that change." in shown
    assert page.get(f"/memory/changes/{change.change_id}/undo/").status_code == 302  # a GET changes nothing
    assert memory_of(user) == ()


def test_a_refused_undo_on_the_page_shows_its_reason_beside_the_change(user):
    change = commit(user, add(FACT), actor=Actor.AGENT)
    commit(user, Operation(target="memory", action="replace", match="heron", content="Deploys go through CI"))
    page = page_for(user)
    response = page.post(f"/memory/changes/{change.change_id}/undo/")
    assert response.status_code == 302 and response["Location"] == f"/memory/#change-{change.change_id}"
    html = page.get("/memory/").content.decode()
    item = html[html.index(f'id="change-{change.change_id}"'):]
    assert item.index("Something this change wrote has changed since") < item.index('class="change-actions"')
    assert memory_of(user) == ("Deploys go through CI",)
    assert MemoryEvent.objects.filter(user=user, outcome=Outcome.REJECTED, error_code="conflict").exists()


def test_a_pruned_change_is_gone_on_the_page(user, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "VERSIONS_KEPT": 1}
    first = commit(user, add("one"))
    commit(user, add("two"))
    assert not MemoryVersion.objects.filter(event_id=first.change_id).exists()
    page = page_for(user)
    response = page.post(f"/memory/changes/{first.change_id}/undo/", follow=True)
    assert "This change is no longer kept" in response.content.decode()
    assert memory_of(user) == ("one", "two")


def test_undo_as_json_for_the_pages_script(user):
    change = commit(user, add(FACT), actor=Actor.AGENT)
    response = page_for(user).post(f"/memory/changes/{change.change_id}/restore/", HTTP_ACCEPT="application/json")
    assert response.status_code == 409
    assert response.json() == {"ok": False, "message": "Your memory already holds this version; nothing changed."}
