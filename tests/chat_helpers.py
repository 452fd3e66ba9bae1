"""Helpers for the chat tests: fresh agents, sockets on the full ASGI stack.

Every chat test runs the real openai client against the offline demo model
over `httpx2.MockTransport`, and a real database (SQLite or PostgreSQL).
Memory is seeded through `store.commit_operations`, its one writer.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.db import connection
from django.test import Client

from agentmemory import store
from agentmemory.models import Actor, MemoryEvent
from agentmemory.rules import Operation
from chat.agents import chat_agent, registry

ORIGIN = b"http://127.0.0.1"


@pytest.fixture(autouse=True)
async def fresh_agents():
    """Start and end every test with no agent built and an empty channel layer."""
    cache.clear()
    await registry.aclose()
    layer = get_channel_layer()
    if hasattr(layer, "flush"):
        await layer.flush()
    yield
    await registry.aclose()
    cache.clear()


async def demo():
    """Return the demo model behind the current chat agent."""
    agent = await chat_agent()
    assert agent.llm.demo is not None, "the chat tests run on the offline demo model (no OPENAI_API_KEY)"
    return agent.llm.demo


def seed(user, *, user_entries=(), memory_entries=()) -> None:
    operations = [Operation(target="user", action="add", content=entry) for entry in user_entries]
    operations += [Operation(target="memory", action="add", content=entry) for entry in memory_entries]
    store.commit_operations(user_id=user.pk, operations=operations, actor=Actor.SYSTEM)


async def db(function, /, *args, **kwargs):
    """Run ORM work in a worker thread and close its connection afterwards.

    A connection left open in a pooled thread would keep PostgreSQL from
    dropping the test database at the end of the run.
    """

    def run():
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return await asyncio.to_thread(run)


async def aseed(user, **entries) -> None:
    await db(seed, user, **entries)


async def snapshot_of(user):
    return await db(store.load_snapshot, user_id=user.pk)


async def events_of(user, outcome: str) -> list[MemoryEvent]:
    return await db(lambda: list(MemoryEvent.objects.filter(user=user, outcome=outcome)))


async def session_cookie(user) -> str:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies["sessionid"].value

    return await db(login)


async def connect(user=None, *, origin: bytes = ORIGIN) -> WebsocketCommunicator:
    """Return a connected socket on the full ASGI application, signed in as `user`."""
    from config.asgi import application

    headers = [(b"origin", origin), (b"host", b"127.0.0.1")]  # the page's own origin, as a browser sends it
    if user is not None:
        headers.append((b"cookie", f"sessionid={await session_cookie(user)}".encode()))
    communicator = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def receive_until(communicator: WebsocketCommunicator, kind: str, *, timeout: float = 10) -> list[dict]:
    """Return every frame up to and including the first of type `kind`."""
    frames = []
    while True:
        frame = json.loads(await communicator.receive_from(timeout=timeout))
        frames.append(frame)
        if frame["type"] == kind:
            return frames


async def wait_for(predicate, *, timeout: float = 10, interval: float = 0.01) -> None:
    """Wait until `predicate()` is true, or fail saying what was awaited."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {getattr(predicate, '__name__', 'a condition')}")
        await asyncio.sleep(interval)


def asgi_post(path: str, payload: dict, *, authorization: str, gone: asyncio.Event, sent: list[dict],
              headers: tuple[tuple[bytes, bytes], ...] = ()):
    """Return (scope, receive, send) for one JSON POST through an ASGI app.

    Setting `gone` makes the client disconnect; the app's messages land in `sent`.
    `headers` are sent too.
    """
    body = json.dumps(payload).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()), (b"authorization", authorization.encode()),
                    *headers],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80),
    }
    body_sent = False

    async def receive():
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    return scope, receive, send
