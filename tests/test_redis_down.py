"""Redis down never costs a 500 (issue 30).

Every limit kept in the cache (Redis when REDIS_URL is set) degrades
without an error: while the cache cannot be reached the limit is not
counted, a warning without content says so, and the request is served;
except the chat's turn budgets (the rate and the concurrent-turn slots,
chat/budget.py), which fall back to per-process budgets, also with a
warning (docs/scaling.md). Here the cache and the channel layer point at a
port nobody listens on (the real Redis keeps running), every rate is 1/min,
and every route that throttles or counts is called twice: both calls are
served, so nothing was counted and nothing failed; the turn routes' second
call is refused by this process's budget.

`test_every_route_is_called_here_or_named_as_uncounted` keeps the list
whole: a new route must be called by these tests or named as one that
counts nothing in the cache.
"""
from __future__ import annotations

import json
import logging

import pytest
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from agentmemory import preferences, proposals, store
from agentmemory.models import MemoryProposal, MemoryVersion
from agentmemory.rules import Operation
from agentmemory.throttling import FailOpenThrottle
from chat import budget
from chat.models import Conversation
# Built now: building it sets up logging again, which would drop caplog's handler mid-test.
from config.asgi import application  # noqa: F401,E402
from tests.chat_helpers import connect, db, fresh_agents, receive_until  # noqa: F401
from tests.multiprocess.servers import free_port

EVAL_TOKEN = "eval-token-for-redis-down"
PASSWORD = "pw-alice-123"  # tests/conftest.py's user
# Memory content the log must never hold.
FACTS = ["Tends the quince orchard on Sundays", "Keeps bees behind the orchard", "Owns a blue canoe",
         "Reads sagas at night", "Collects brass keys", "Rows on the lake at dawn"]
JSON = {"HTTP_ACCEPT": "application/json"}

# Every route, by URL name, that these tests call with the cache unreachable.
CALLED = {
    "login",                      # django-axes counts failed sign-ins (in the database, not the cache)
    "chat:turns",                 # CHAT_TURN_RATE and the concurrent-turn slots
    "chat:eval-turns",            # CHAT_TURN_RATE by client address
    "agentmemory:api",            # DELETE: MEMORY_WRITE_RATE
    "agentmemory:api-operations",
    "agentmemory:api-settings",   # PUT
    "agentmemory:api-proposal",   # DELETE
    "agentmemory:api-proposal-save",
    "agentmemory:add", "agentmemory:correct", "agentmemory:remove", "agentmemory:erase",
    "agentmemory:settings", "agentmemory:save-mode",
    "agentmemory:proposal-save", "agentmemory:proposal-discard",
    "agentmemory:api-change-undo", "agentmemory:api-change-restore",  # POST: MEMORY_WRITE_RATE
    "agentmemory:api-tidy", "agentmemory:tidy",  # MEMORY_WRITE_RATE and the tidy rate
    "agentmemory:change-undo", "agentmemory:change-restore",
    "agentmemory:expiry", "agentmemory:import", "agentmemory:import-save", "agentmemory:api-import",
    "agentmemory:review-setting", "agentmemory:review-notice",
    "ws:ws/chat/",                # the socket: open-socket registry, turn rate and slots
}
# Routes that count nothing in the cache (reads, probes, static assets).
UNCOUNTED = {
    "favicon", "healthz", "readyz", "logout", "schema",
    "agentmemory:page", "agentmemory:export", "agentmemory:api-export", "agentmemory:api-proposals",
    "agentmemory:api-changes", "agentmemory:api-change",
    "chat:index", "chat:conversations", "chat:conversation", "chat:messages", "chat:api-docs",
    # The account page and its token API: sign out everywhere counts wrong passwords in the database (django-axes).
    "account", "account-revoke-token", "account-sign-out-everywhere", "api-account-token",
    # The memory page's JavaScript catalogue (translations only; no cache, no database).
    "agentmemory:jsi18n",
    # An import's review and the Markdown export: reads.
    "agentmemory:import-review", "agentmemory:export-markdown", "agentmemory:api-export-markdown",
    # The chat page's JavaScript catalogue and the language switch (a cookie; no cache, no database).
    "javascript-catalog", "set_language",
}


@pytest.fixture
def redis_down():
    """Point the cache and the channel layer at a port where nothing listens."""
    url = f"redis://127.0.0.1:{free_port()}/0"
    with override_settings(
        CACHES={"default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": "chat",
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }},
        CHANNEL_LAYERS={"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}},
    ):
        with pytest.raises(Exception):  # really unreachable
            cache.get("probe")
        budget.reset_process_budgets()
        yield url
        budget.reset_process_budgets()
    # Restoring CACHES gave Django's cache handler a new context-local table.
    # Open the default cache here, in the tests' own context, so later tests
    # and their async fixtures share one cache object again, as before: one
    # first opened inside an event loop's task would stay that task's alone.
    cache.get("probe")


@pytest.fixture
def one_per_minute(monkeypatch):
    """Every DRF rate at 1/min: a second call served proves the first was not counted."""
    monkeypatch.setattr(SimpleRateThrottle, "THROTTLE_RATES", {"chat_turns": "1/min", "memory_writes": "1/min"})


def outcome(response) -> tuple:
    """Status and error code only: no body text (it may hold memory content) reaches a failure message."""
    if not (response.get("Content-Type") or "").startswith("application/json"):
        return (response.status_code,)
    body = json.loads(response.content)
    code = body.get("code") if isinstance(body, dict) else None
    return (response.status_code, code) if code else (response.status_code,)


PER_PROCESS = {"turn budget", "concurrent turns"}  # chat/budget.py's fallback: counted in the process


def assert_warned_without_content(caplog, *limits: str) -> None:
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    for limit in limits:
        said = "counted per process" if limit in PER_PROCESS else "not counted"
        assert any(limit in message and said in message and "cache error" in message
                   for message in warnings), f"no '{said}' warning for {limit}"
    leaked = [fact for fact in FACTS if fact in caplog.text]
    assert leaked == [], f"{len(leaked)} memory entries reached the log"


@pytest.mark.django_db(transaction=True)
def test_redis_down_every_throttled_or_counted_http_route_is_served_uncounted(
        redis_down, one_per_minute, user, settings, caplog):
    caplog.set_level(logging.WARNING)
    settings.EVAL_SERVICE_TOKEN = EVAL_TOKEN
    api = APIClient(raise_request_exception=False)
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    service = APIClient(raise_request_exception=False)
    service.credentials(HTTP_AUTHORIZATION=f"Bearer {EVAL_TOKEN}")
    page = Client(raise_request_exception=False)

    # Sign-in (django-axes counts failures in the database): served.
    for _ in range(2):
        response = page.post("/accounts/login/", {"username": user.username, "password": PASSWORD})
        assert outcome(response) == (302,)

    # The chat's turn routes: the first turn answers; the second is over this process's budget (1/min).
    assert outcome(api.post("/api/chat/turns/", {"content": "hello"}, format="json")) == (200,)
    assert outcome(service.post("/api/eval/turns/", {"content": "hello"}, format="json")) == (200,)
    assert outcome(api.post("/api/chat/turns/", {"content": "hello"}, format="json")) == (429, "rate_limited")
    assert outcome(service.post("/api/eval/turns/", {"content": "hello"}, format="json")) == (429, "rate_limited")
    assert Conversation.objects.filter(user=user).count() == 1

    # The memory API's writes (MEMORY_WRITE_RATE).
    for fact in FACTS[:2]:
        response = api.post("/api/memory/operations/",
                            {"operations": [{"target": "memory", "action": "add", "content": fact}]}, format="json")
        assert outcome(response) == (200,)
    assert store.load_snapshot(user_id=user.pk).memory == tuple(FACTS[:2])
    for mode in ("ask", "auto"):
        assert outcome(api.put("/api/memory/settings/", {"save_mode": mode}, format="json")) == (200,)
    for use_memory in (False, True):
        assert outcome(api.put("/api/memory/settings/", {"use_memory": use_memory}, format="json")) == (200,)
    first, second, third, fourth = (
        proposals.create(user_id=user.pk, operations=[Operation(target="user", action="add", content=fact)])
        for fact in FACTS[2:6])
    assert outcome(api.post(f"/api/memory/proposals/{first}/save/", {}, format="json")) == (200,)
    assert outcome(api.delete(f"/api/memory/proposals/{second}/")) == (204,)

    # The memory page's forms share that budget.
    assert outcome(page.post(f"/memory/proposals/{third}/save/", {}, **JSON)) == (200,)
    assert outcome(page.post(f"/memory/proposals/{fourth}/discard/", {}, **JSON)) == (200,)
    assert not MemoryProposal.objects.filter(user=user).exists()
    assert store.load_snapshot(user_id=user.pk).user == (FACTS[2], FACTS[4])
    assert outcome(page.post("/memory/add/", {"target": "memory", "content": "Plays the oboe"}, **JSON)) == (200,)
    assert outcome(page.post("/memory/correct/", {"target": "memory", "entry": "Plays the oboe",
                                                  "content": "Plays the bassoon"}, **JSON)) == (200,)
    assert outcome(page.post("/memory/remove/", {"target": "memory", "entry": "Plays the bassoon"}, **JSON)) == (200,)
    for value in ("0", "1"):
        assert outcome(page.post("/memory/settings/", {"use_memory": value}, **JSON)) == (200,)
    for mode in ("ask", "auto"):
        assert outcome(page.post("/memory/save-mode/", {"save_mode": mode}, **JSON)) == (200,)
    assert preferences.load(user_id=user.pk).save_mode == "auto"
    assert store.load_snapshot(user_id=user.pk).memory == tuple(FACTS[:2])

    # Undo and restore, from the API and the page.
    added = api.post("/api/memory/operations/",
                     {"operations": [{"target": "memory", "action": "add", "content": "Plays the cello"}]},
                     format="json")
    change = MemoryVersion.objects.filter(user=user).order_by("-id").first().event_id
    assert outcome(added) == (200,)
    assert outcome(api.post(f"/api/memory/changes/{change}/undo/", format="json")) == (200,)
    assert outcome(api.post(f"/api/memory/changes/{change}/restore/", format="json")) == (200,)
    assert outcome(page.post(f"/memory/changes/{change}/undo/", {}, **JSON)) == (200,)
    assert store.load_snapshot(user_id=user.pk).memory == tuple(FACTS[:2])
    assert outcome(page.post(f"/memory/changes/{change}/restore/", {}, **JSON)) == (200,)
    assert store.load_snapshot(user_id=user.pk).memory == (*FACTS[:2], "Plays the cello")

    # Tidy up, from the API and the page: served uncounted (the offline demo model finds nothing to merge).
    assert outcome(api.post("/api/memory/tidy/", {"target": "memory"}, format="json")) == (409, "nothing_to_tidy")
    assert outcome(page.post("/memory/tidy/", {"target": "memory"}, **JSON))[0] == 409

    # An entry's expiry, an import and its save, the review setting and a review notice's answer.
    assert outcome(page.post("/memory/expiry/", {"target": "memory", "entry": FACTS[0], "preset": "week"},
                             **JSON)) == (200,)
    imported = page.post("/memory/import/", {"text": "- Sails a dinghy on weekends\n- Grows tomatoes"})
    assert imported.status_code == 302
    proposal_id = int(imported["Location"].rstrip("/").split("/")[-1])
    assert page.post(f"/memory/import/{proposal_id}/save/", {}).status_code == 302
    assert "Grows tomatoes" in store.load_snapshot(user_id=user.pk).user + store.load_snapshot(user_id=user.pk).memory
    assert outcome(api.post("/api/memory/import/", {"text": "- Bakes sourdough"}, format="json"))[0] in (200, 201)
    assert outcome(page.post("/memory/review-setting/", {"allow_review": "0"}, **JSON)) == (200,)
    assert outcome(page.post("/memory/review-notices/999999/", {"answer": "keep"}, **JSON)) == (200,)  # none open

    # Erasing, from the page and the API.
    response = page.post("/memory/erase/")
    assert outcome(response) == (302,) and response["Location"] == "/memory/"
    assert store.load_snapshot(user_id=user.pk).memory == ()
    for _ in range(2):
        assert outcome(api.delete("/api/memory/")) == (200,)

    assert_warned_without_content(caplog, "turn budget", "concurrent turns", "memory_writes")


@pytest.mark.django_db(transaction=True)
async def test_redis_down_the_socket_opens_and_chats_on_the_process_budget(
        redis_down, one_per_minute, user, settings, caplog):
    caplog.set_level(logging.WARNING)
    settings.CHAT_MAX_SOCKETS_PER_PERSON = 1
    settings.CHAT_MAX_CONCURRENT_TURNS = 1
    first = await connect(user)
    second = await connect(user)  # past the cap, but the registry cannot count: nobody is closed
    try:
        await first.send_to(text_data=json.dumps({"type": "user_message", "content": f"remember: {FACTS[0]}",
                                                  "conversation_id": None}))
        last = (await receive_until(first, "turn_completed"))[-1]
        assert last["memory"]["status"] == "committed"
        assert (await db(store.load_snapshot, user_id=user.pk)).memory == (FACTS[0],)
        # The turn rate (1/min) is counted in this process while the cache is down: the next turn,
        # from the person's other socket, is refused and reaches no model.
        await second.send_to(text_data=json.dumps({"type": "user_message", "content": "hello again",
                                                   "conversation_id": None}))
        refused = (await receive_until(second, "error"))[-1]
        assert refused["code"] == "rate_limited" and refused["retry_after"] >= 1
        assert await first.receive_nothing(timeout=0.1)  # not evicted
    finally:
        await first.disconnect()
        await second.disconnect()
    assert_warned_without_content(caplog, "open sockets", "turn budget", "concurrent turns")


def _route_names(resolver: URLResolver, namespace: str = "") -> set[str]:
    names = set()
    for pattern in resolver.url_patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                continue  # the read-only admin: staff only, no throttle
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            names |= _route_names(pattern, inner)
        elif isinstance(pattern, URLPattern):
            assert pattern.name, f"an unnamed route: {pattern.pattern}"
            names.add(f"{namespace}{pattern.name}")
    return names


def test_every_route_is_called_here_or_named_as_uncounted():
    from chat.routing import websocket_urlpatterns

    routes = _route_names(get_resolver()) | {f"ws:{pattern.pattern}" for pattern in websocket_urlpatterns}
    assert routes - CALLED - UNCOUNTED == set(), "a new route: call it above with Redis down, or name it UNCOUNTED"
    assert (CALLED | UNCOUNTED) - routes == set(), "a route named here no longer exists"
    assert CALLED & UNCOUNTED == set()


class _KeyFails(FailOpenThrottle):
    rate = "1/min"

    def get_cache_key(self, request, view):
        raise LookupError("not the cache")


def test_only_a_cache_error_fails_open(redis_down, rf, caplog):
    throttle = _KeyFails()
    with pytest.raises(LookupError):  # a bug of the throttle itself still fails loudly
        throttle.allow_request(rf.post("/"), None)
    assert throttle.cache is cache  # the guard is only worn while counting
    assert not [record for record in caplog.records if "not counted" in record.getMessage()]
