"""Bad bodies on every REST route: deeply nested or oversized JSON is a 400
with a code, never a 500, and the same code on every route, the memory
routes included: one parser (agentmemory/parsers.py), one handler
(config/parsers.py); the ASGI edge refuses a body over
DATA_UPLOAD_MAX_MEMORY_SIZE before Django reads it, and daphne's request
before daphne does (against a live server: tests/multiprocess/test_live_body_limit.py)."""
import asyncio
import json

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.models import Conversation
from agentmemory.parsers import MAX_JSON_DEPTH, too_deep
from tests.chat_helpers import db, fresh_agents  # noqa: F401

EVAL_TOKEN = "eval-token-for-bad-bodies"
NESTED = "[" * 5000 + "]" * 5000  # 10 KB, 5,000 levels: Python's decoder gives up with RecursionError
JUST_TOO_DEEP = json.dumps({"content": "hi", "x": json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)})

ROUTES = [
    ("post", "/api/chat/turns/", "token"),
    ("post", "/api/memory/operations/", "token"),
    ("put", "/api/memory/settings/", "token"),
    ("post", "/api/memory/proposals/1/save/", "token"),
    ("post", "/api/memory/tidy/", "token"),
    ("post", "/api/memory/import/", "token"),
    ("post", "/api/eval/turns/", "eval"),
    ("delete", "/api/conversations/", "token"),
    ("delete", "/api/memory/", "token"),
]


@pytest.fixture
def clients(user, settings):
    settings.EVAL_SERVICE_TOKEN = EVAL_TOKEN
    token = APIClient()
    token.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    service = APIClient()
    service.credentials(HTTP_AUTHORIZATION=f"Bearer {EVAL_TOKEN}")
    return {"token": token, "eval": service}


@pytest.mark.django_db
@pytest.mark.parametrize("body", [NESTED, "{\"a\":" * 3000 + "1" + "}" * 3000, JUST_TOO_DEEP],
                         ids=["arrays-5000", "objects-3000", f"depth-{MAX_JSON_DEPTH + 1}"])
@pytest.mark.parametrize("method, path, who", ROUTES)
def test_deeply_nested_json_is_a_400_with_a_code_on_every_route(clients, method, path, who, body):
    response = getattr(clients[who], method)(path, body, content_type="application/json")
    if method == "delete" and response.status_code < 400:
        return  # the route reads no body: nothing to refuse
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["code"] == "json_too_deep"
    assert not Conversation.objects.exists()


def test_every_route_with_a_json_body_is_tried_above():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    with_json = {
        (method, path.replace("{id}", "1"))
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "application/json" in (operation.get("requestBody") or {}).get("content", {})
    }
    assert with_json - {(method, path) for method, path, _ in ROUTES} == set()


@pytest.mark.django_db
@pytest.mark.parametrize("method, path, who", [route for route in ROUTES if route[0] != "delete"])
def test_malformed_json_gets_a_code_too(clients, method, path, who):
    response = getattr(clients[who], method)(path, "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_json"


@pytest.mark.django_db
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
@pytest.mark.parametrize("method, path, who", [route for route in ROUTES if route[0] != "delete"])
def test_an_oversized_body_is_a_400_with_a_code_in_the_parser(clients, method, path, who):
    body = json.dumps({"content": "x" * 5000})
    response = getattr(clients[who], method)(path, body, content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "body_too_large"
    assert not Conversation.objects.exists()


def test_depth_check_is_iterative_and_exact():
    assert not too_deep({"operations": [{"target": "memory"}]})
    assert not too_deep(json.loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH))
    assert too_deep(json.loads("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)))


# --- the ASGI edge ------------------------------------------------------------------------


async def _asgi(path: str, chunks: list[bytes], *, declared: int | None, token: str) -> tuple[int, dict, int]:
    """POST `chunks` through the full ASGI application; return status, JSON body and chunks read."""
    from config.asgi import application

    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"authorization", f"Token {token}".encode())]
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    queue = list(chunks)
    read = 0
    sent: list[dict] = []

    async def receive():
        nonlocal read
        if queue:
            read += 1
            chunk = queue.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(queue)}
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(application(scope, receive, send), timeout=10)
    start = next(message for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return start["status"], json.loads(body), read


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
async def test_the_edge_refuses_a_declared_oversized_body_without_reading_it(user):
    token = (await db(Token.objects.create, user=user)).key
    status, body, read = await _asgi("/api/chat/turns/", [b"x" * 5000] * 40, declared=200_000, token=token)
    assert (status, body["code"], read) == (400, "body_too_large", 0)


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
async def test_the_edge_stops_reading_a_streamed_body_past_the_limit(user):
    token = (await db(Token.objects.create, user=user)).key
    status, body, read = await _asgi("/api/chat/turns/", [b"x" * 5000] * 40, declared=None, token=token)
    assert (status, body["code"]) == (400, "body_too_large")
    assert read == 3  # 15,000 bytes read of 200,000, then refused
    assert await db(Conversation.objects.count) == 0


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=10_000)
async def test_a_body_under_the_limit_goes_through_the_edge(user):
    token = (await db(Token.objects.create, user=user)).key
    payload = json.dumps({"content": "hello"}).encode()
    status, body, _ = await _asgi("/api/chat/turns/", [payload], declared=len(payload), token=token)
    assert status == 200 and body["reply"]


def test_daphne_builds_the_bounded_request_once_the_application_is_loaded():
    """daphne reads a whole body before it calls the application: the refusal must happen in its request."""
    import daphne.http_protocol

    import config.asgi  # noqa: F401
    from config.parsers import BoundedWebRequest

    assert daphne.http_protocol.WebRequest is BoundedWebRequest  # tests/multiprocess/test_live_body_limit.py
