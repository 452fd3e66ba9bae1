"""The chat's REST API and page: turns (session+CSRF and token auth),
cancellation by client disconnect on the real ASGI handler, conversations
owned by their person, the memory-free eval route, schema, docs and page."""
import asyncio
import json

import pytest
from django.contrib.staticfiles import finders
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from agentmemory.models import MemoryDocument, MemoryEvent, Outcome
from chat.models import Conversation, Message
from tests.chat_helpers import asgi_post, db, demo, events_of, fresh_agents, wait_for  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "Invoices are generated on the first Monday"
TURNS = "/api/chat/turns/"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def post_turn(client, content, conversation_id=None, **extra):
    return client.post(TURNS, {"content": content, "conversation_id": conversation_id}, format="json", **extra)


def test_turn_returns_the_reply_and_the_memory_outcome(user):
    response = post_turn(token_client(user), f"remember: {FACT}")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["memory"]["status"] == "committed"
    assert body["memory"]["usage"]["memory"]["used"] == len(FACT)
    assert body["reply"].startswith("Done")
    assert Conversation.objects.get(pk=body["conversation_id"]).user == user
    assert MemoryDocument.objects.get(user=user, memory_type="memory").content == FACT


def test_session_auth_needs_the_csrf_token(user):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    refused = post_turn(client, "hello")
    assert refused.status_code == 403

    page = client.get("/")
    token = page.cookies["csrftoken"].value if "csrftoken" in page.cookies else client.cookies["csrftoken"].value
    accepted = post_turn(client, "hello", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 200, accepted.content


def test_anonymous_turn_is_refused():
    response = post_turn(APIClient(), "hello")
    assert response.status_code in (401, 403)
    assert Conversation.objects.count() == 0


@override_settings(CHAT_MAX_MESSAGE_CHARS=50)
def test_oversized_or_empty_message_is_a_400(user):
    client = token_client(user)
    assert post_turn(client, "x" * 51).status_code == 400
    assert post_turn(client, "   ").status_code == 400
    assert Conversation.objects.count() == 0


def test_failed_turn_is_a_502_and_commits_nothing(user):
    response = post_turn(token_client(user), f"remember: {FACT} [[fail]]")
    assert response.status_code == 502
    assert response.json()["code"] == "model_failed_after_staging"
    assert response.json()["memory"]["status"] == "discarded"
    assert not MemoryDocument.objects.filter(user=user).exists()


def test_conversation_of_another_user_is_a_404(user, other_user):
    theirs = post_turn(token_client(other_user), "hello").json()["conversation_id"]
    mine = token_client(user)
    assert post_turn(mine, "hello", theirs).status_code == 404
    assert mine.get(f"/api/conversations/{theirs}/messages/").status_code == 404
    assert mine.delete(f"/api/conversations/{theirs}/").status_code == 404
    assert Message.objects.filter(conversation_id=theirs).count() == 2


def test_conversations_list_and_messages_show_only_your_own(user, other_user):
    mine, theirs = token_client(user), token_client(other_user)
    first = post_turn(mine, "hello").json()["conversation_id"]
    post_turn(mine, f"remember: {FACT}", first)
    post_turn(theirs, "hello")

    listed = mine.get("/api/conversations/").json()
    assert [item["id"] for item in listed] == [first]
    messages = mine.get(f"/api/conversations/{first}/messages/").json()
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert [m["memory_outcome"] for m in messages][-2:] == ["committed", "committed"]


def test_delete_one_and_all_conversations_touch_only_your_own(user, other_user):
    mine, theirs = token_client(user), token_client(other_user)
    one = post_turn(mine, "hello").json()["conversation_id"]
    post_turn(mine, "hello")
    kept = post_turn(theirs, "hello").json()["conversation_id"]

    assert mine.delete(f"/api/conversations/{one}/").status_code == 204
    assert not Conversation.objects.filter(pk=one).exists()
    response = mine.delete("/api/conversations/")
    assert response.status_code == 200 and response.json() == {"deleted": 1}
    assert list(Conversation.objects.values_list("pk", flat=True)) == [kept]


def test_turns_are_throttled(user, monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "2/min"})
    client = token_client(user)
    assert [post_turn(client, "hello").status_code for _ in range(3)] == [200, 200, 429]


@override_settings(AGENTMEMORY={"ENABLED": False})
def test_flag_off_turn_reports_memory_disabled(user):
    body = post_turn(token_client(user), f"remember: {FACT}").json()
    assert body["memory"]["status"] == "disabled"
    assert not MemoryDocument.objects.exists()


# --- cancellation on the real ASGI handler ----------------------------------------


async def test_cancelled_non_streamed_request_commits_nothing(user):
    """A client disconnect makes Django 5 cancel the async view's task; the turn discards."""
    from config.asgi import application

    key = (await db(Token.objects.create, user=user)).key
    gone = asyncio.Event()
    sent: list[dict] = []
    scope, receive, send = asgi_post(
        TURNS, {"content": f"remember: {FACT}", "conversation_id": None},
        authorization=f"Token {key}", gone=gone, sent=sent,
    )

    model = await demo()
    with override_settings(DEMO_MODEL_DELAY_MS=100):
        request = asyncio.create_task(application(scope, receive, send))
        # The second model round means the tool call was handled: something is staged.
        await wait_for(lambda: request.done() or any(call.round == 1 for call in model.calls))
        assert not request.done(), f"the view answered before staging: {sent}"
        gone.set()
        await asyncio.wait_for(request, timeout=10)
        # Nothing of the turn runs on in the background, where it could still commit.
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()] == []

    assert not any(message["type"] == "http.response.start" for message in sent)
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    assert [event.error_code for event in await events_of(user, Outcome.DISCARDED)] == ["cancelled"]
    stored = await db(lambda: list(Message.objects.values_list("role", "memory_outcome")))
    assert stored == [("user", "discarded")]


# --- the memory-free eval route ------------------------------------------------------


def test_eval_route_is_absent_without_a_service_token():
    response = APIClient().post("/api/eval/turns/", {"content": "hello"}, format="json")
    assert response.status_code == 404


@override_settings(EVAL_SERVICE_TOKEN="eval-secret-token")
def test_eval_route_refuses_a_wrong_token(user):
    client = APIClient()
    client.force_login(user)  # a session is not a service token
    assert client.post("/api/eval/turns/", {"content": "hi"}, format="json").status_code == 403
    client.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    assert client.post("/api/eval/turns/", {"content": "hi"}, format="json").status_code == 403


@override_settings(EVAL_SERVICE_TOKEN="eval-secret-token")
def test_eval_route_never_touches_memory(user):
    from agentmemory import store
    from agentmemory.models import Actor
    from agentmemory.rules import Operation

    store.commit_operations(user_id=user.pk, operations=[Operation("memory", "add", content=FACT)], actor=Actor.SYSTEM)
    events_before = MemoryEvent.objects.count()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer eval-secret-token")

    for content in ("what do you know?", f"remember: {FACT} for eval"):
        response = client.post("/api/eval/turns/", {"content": content}, format="json")
        assert response.status_code == 200, response.content
        assert FACT not in response.json()["reply"]

    from asgiref.sync import async_to_sync

    calls = list(async_to_sync(demo)().calls)
    assert [(call.tools_offered, call.memory_block) for call in calls] == [(False, False), (False, False)]
    assert MemoryEvent.objects.count() == events_before
    assert list(MemoryDocument.objects.values_list("content", flat=True)) == [FACT]
    assert Conversation.objects.count() == 0


# --- schema, docs, page ------------------------------------------------------------------


def test_schema_documents_the_chat_routes_with_examples(user):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    turn = schema["paths"]["/api/chat/turns/"]["post"]
    assert "Memory committed" in json.dumps(turn["responses"]["200"])
    assert "Start a conversation" in json.dumps(turn["requestBody"])
    for path in ("/api/conversations/", "/api/conversations/{id}/", "/api/conversations/{id}/messages/",
                 "/api/eval/turns/"):
        assert path in schema["paths"]


def test_docs_page_serves_its_assets_locally(user):
    client = APIClient()
    client.force_login(user)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs"):
        assert cdn not in html
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


@override_settings(API_DOCS_PUBLIC=False)  # production's default (DEBUG off): tests/test_deploy_settings.py
def test_schema_and_docs_are_for_staff_only_unless_public(make_user):
    person, staff = make_user("dora"), make_user("sam", is_staff=True)
    anonymous, signed_in, staff_member, staff_token = APIClient(), APIClient(), APIClient(), APIClient()
    signed_in.force_login(person)
    staff_member.force_login(staff)
    staff_token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    for path in ("/api/schema/", "/api/docs/", "/api/docs/?script="):
        assert anonymous.get(path).status_code == 403, path
        assert signed_in.get(path).status_code == 403, path
        assert staff_member.get(path).status_code == 200, path
    assert signed_in.get("/api/schema/", HTTP_ACCEPT="application/json").json()["detail"] == (
        "The API documentation on this server is for staff only.")
    page = anonymous.get("/api/docs/").content.decode()  # a page with the sentence and a way to sign in
    assert "for staff only" in page and 'href="/accounts/login/?next=/api/docs/"' in page
    assert staff_token.get("/api/schema/", HTTP_ACCEPT="application/json").status_code == 200
    with override_settings(API_DOCS_PUBLIC=True):
        assert anonymous.get("/api/schema/").status_code == 200
        assert anonymous.get("/api/docs/").status_code == 200


def test_chat_page_needs_a_login():
    response = APIClient().get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_chat_page_escapes_conversation_titles_and_shows_the_demo_notice(user):
    Conversation.objects.create(user=user, title="<script>alert(1)</script>")
    client = APIClient()
    client.force_login(user)
    html = client.get("/").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)</script>" not in html
    assert "Demo model in use" in html and "OPENAI_API_KEY" in html
    assert 'href="/memory/"' in html
    assert "chat/chat.js" in html and finders.find("chat/chat.js") and finders.find("css/site.css")


def test_chat_page_loads_the_markdown_renderer_before_the_chat(user):
    """markdown-it, then DOMPurify, then markdown.js, then chat.js (all `defer`, so in that order)."""
    client = APIClient()
    client.force_login(user)
    html = client.get("/").content.decode()
    names = ["vendor/markdown-it/markdown-it.min.js", "vendor/dompurify/purify.min.js", "chat/markdown.js",
             "chat/chat.js"]
    positions = [html.index(name) for name in names]
    assert positions == sorted(positions)
    assert all(finders.find(name) for name in names)


def test_the_chat_scripts_never_write_html():
    """Only DOMPurify's fragments enter the page as markup; our own code builds nodes and sets textContent."""
    for name in ("chat/chat.js", "chat/markdown.js"):
        lines = open(finders.find(name), encoding="utf-8").read().splitlines()
        source = "\n".join(line for line in lines if not line.strip().startswith("//"))  # code, not comments
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in source, f"{name} uses {sink}"


def test_login_page_renders():
    response = APIClient().get("/accounts/login/")
    assert response.status_code == 200
    assert b"Sign in" in response.content
