"""The second project: agentmemory installed from its wheel, used without `chat`.

tests/test_packaging.py (in the first project) builds the wheel, installs it
into a fresh virtual environment with requirements.txt here, and runs these
tests on SQLite and on PostgreSQL.
"""
import importlib.metadata
import importlib.util
import json
import sysconfig
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import AsyncClient, Client

import agentmemory
from agentmemory import store
from agentmemory.models import MemoryDocument
from helpdesk.agent import answer
from helpdesk.demo_model import DemoModel, demo_client

FACT = "Prefers answers in French"


@pytest.fixture
def person(db):
    return get_user_model().objects.create_user("marie", password="marie-pass-123")


@pytest.fixture
def model():
    return DemoModel()


def stored(user_id):
    return store.load_snapshot(user_id=user_id)


def test_agentmemory_comes_from_the_installed_wheel_without_the_first_project():
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(agentmemory.__file__).resolve().is_relative_to(site)
    assert importlib.metadata.version("django-agentmemory") == "0.1.0"
    for module in ("chat", "config"):
        assert importlib.util.find_spec(module) is None, module
    # No extra was installed: live updates and span export are optional.
    assert importlib.util.find_spec("channels") is None
    assert importlib.util.find_spec("opentelemetry.sdk") is None


def test_the_system_checks_pass_and_the_packaged_migrations_match_the_models(db, capsys):
    call_command("check", fail_level="WARNING")
    call_command("makemigrations", "agentmemory", "helpdesk", check=True, dry_run=True)


@pytest.mark.django_db(transaction=True)
async def test_the_agent_loop_commits_after_the_answer_and_the_next_turn_sees_it(model):
    user = await sync_to_async(get_user_model().objects.create_user)("marie", password="marie-pass-123")
    client = demo_client(model)

    reply, outcome = await answer(client, user_id=user.pk, question=f"remember: {FACT}")

    assert reply == "Noted."
    # Committed, and no "not announced": without channels there is nobody to tell.
    assert (outcome.status, outcome.changed, outcome.code) == ("committed", ("user",), "")
    assert (await sync_to_async(stored)(user.pk)).user == (FACT,)
    assert model.requests[0]["tools"][0]["function"]["name"] == "memory_update"

    reply, outcome = await answer(client, user_id=user.pk, question="What do you know?")
    assert reply == "I remember things about you."
    assert outcome.status == "nothing_to_commit"
    assert FACT in model.requests[-1]["messages"][0]["content"]
    await client.close()


@pytest.mark.django_db(transaction=True)
async def test_a_failed_turn_saves_nothing(model):
    user = await sync_to_async(get_user_model().objects.create_user)("marie", password="marie-pass-123")
    client = demo_client(model)
    with pytest.raises(Exception):
        await answer(client, user_id=user.pk, question=f"[[fail]] remember: {FACT}")
    assert (await sync_to_async(stored)(user.pk)).user == ()
    assert not await MemoryDocument.objects.filter(user_id=user.pk).aexists()
    await client.close()


@pytest.mark.django_db(transaction=True)
async def test_a_turn_past_its_deadline_saves_nothing_and_every_request_is_capped(model):
    user = await sync_to_async(get_user_model().objects.create_user)("marie", password="marie-pass-123")
    client = demo_client(model)
    with pytest.raises(TimeoutError):
        await answer(client, user_id=user.pk, question=f"[[stall]] remember: {FACT}", deadline=0.5)
    assert not await MemoryDocument.objects.filter(user_id=user.pk).aexists()
    assert [request["max_tokens"] for request in model.requests] == [1024, 1024]
    await client.close()


@pytest.mark.django_db(transaction=True)
async def test_ask_takes_identity_from_the_session():
    user = await sync_to_async(get_user_model().objects.create_user)("marie", password="marie-pass-123")
    client = AsyncClient()
    assert (await client.post("/ask/", {"question": "hi"}, content_type="application/json")).status_code == 401
    await client.aforce_login(user)
    response = await client.post("/ask/", {"question": f"remember: {FACT}", "user_id": 999},
                                 content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["memory"]["status"] == "committed"
    assert (await sync_to_async(stored)(user.pk)).user == (FACT,)


@pytest.mark.django_db(transaction=True)
def test_the_memory_page_renders_in_the_apps_own_layout(person):
    store.commit_operations(user_id=person.pk, operations=[
        store_operation("user", FACT)])
    anonymous = Client().get("/memory/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")

    client = Client()
    client.force_login(person)
    page = client.get("/memory/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.lstrip().lower().startswith("<!doctype html>")
    assert FACT in html and "agentmemory/memory.css" in html and "agentmemory/memory.js" in html
    assert "Signed in as <strong>marie</strong>" in html  # agentmemory/base.html, not the first project's

    api = client.get("/api/memory/")
    assert api.status_code == 200 and FACT in json.dumps(api.json())
    export = client.get("/memory/export/")
    assert export.status_code == 200


def test_the_admin_lists_memory_read_only(db, person):
    store.commit_operations(user_id=person.pk, operations=[store_operation("user", FACT)])
    staff = get_user_model().objects.create_superuser("admin", password="admin-pass-123")
    client = Client()
    client.force_login(staff)
    index = client.get("/admin/")
    assert index.status_code == 200 and "/admin/agentmemory/" in index.content.decode()
    for path in ("/admin/agentmemory/", "/admin/agentmemory/memorydocument/", "/admin/agentmemory/memoryevent/"):
        assert client.get(path).status_code == 200, path
    assert client.get("/admin/agentmemory/memorydocument/add/").status_code == 403  # read-only


def store_operation(target, content):
    from agentmemory.rules import Operation

    return Operation(target=target, action="add", content=content)
