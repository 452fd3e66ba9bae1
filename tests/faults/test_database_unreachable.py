"""PostgreSQL unreachable during a run, without mocks.

A live daphne server reaches PostgreSQL only through a TCP proxy this test
controls. The socket signs in while the database answers (the session and
the user need it); then the proxy is cut, so the database is really gone for
that process: open connections break, new ones are refused. Chats still
answer, with memory "unavailable", and nothing is written — not then, and
not later (no write is queued for when the database returns). Restored, the
same process, without a restart, commits memory again.

What cannot answer: anything that must first authenticate against the
database (a REST call, a new sign-in or socket, a page). It fails fast with a
503 that says the database did not answer (JSON for the API, a page for a
page) rather than hanging.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from rest_framework.authtoken.models import Token

from agentmemory import store
from agentmemory.models import MemoryEvent
from chat.models import Message
from tests.faults.tcp_proxy import TcpProxy
from tests.multiprocess.servers import LiveSocket, database_url, orm, postgres_address, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

SEEDED = "The deploy target is the blue cluster"
DURING = "The outage fact is codenamed basalt"
AFTER = "The recovery fact is codenamed granite"
OUTAGE_TURNS = 3


@pytest.fixture
def postgres_proxy(postgres_only):
    proxy = TcpProxy(postgres_address()).start()
    try:
        yield proxy
    finally:
        proxy.close()


def stored_state(user) -> dict:
    """Everything a turn could write for this person: memory, its events, the conversation log."""
    return {
        "snapshot": store.load_snapshot(user_id=user.pk),
        "events": list(MemoryEvent.objects.filter(user=user).order_by("id").values_list("outcome", flat=True)),
        "messages": Message.objects.filter(conversation__user=user).count(),
    }


async def test_unreachable_database_chats_answer_with_memory_unavailable_write_nothing_and_recover(
    servers, user, postgres_proxy,
):
    from agentmemory.models import Actor
    from agentmemory.rules import Operation

    await orm(store.commit_operations, user_id=user.pk, actor=Actor.SYSTEM,
              operations=[Operation(target="memory", action="add", content=SEEDED)])
    server = await asyncio.to_thread(
        servers.start, "behind-proxy", DATABASE_URL=database_url(host="127.0.0.1", port=postgres_proxy.port),
    )
    cookie = await session_cookie(user)
    socket = await LiveSocket.open(server, cookie)
    key = (await orm(Token.objects.create, user=user)).key
    try:
        before = await orm(stored_state, user)

        postgres_proxy.cut()
        try:
            assert (await asyncio.to_thread(server.get, "/healthz"))[0] == 200
            status, body = await asyncio.to_thread(server.get, "/readyz")
            assert status == 503 and body["failing"] == ["database"]

            answers = []
            for turn in range(OUTAGE_TURNS):
                content = f"remember: {DURING}" if turn % 2 == 0 else "What do you know about me?"
                seen = len(socket.frames)
                last = await socket.turn(content, timeout=30)
                assert last["type"] == "turn_completed", last
                assert last["memory"]["status"] == "unavailable"
                assert last["message"]["content"].strip()
                assert last["message"]["id"] is None  # the conversation log was not reachable either
                tools = [frame for frame in socket.frames[seen:] if frame["type"] == "tool"]
                assert all(frame["status"] != "staged" for frame in tools)  # writes were off
                answers.append(last)
            # REST needs the database to know who calls: no answer, but a prompt JSON 503 that says
            # the database did not answer (before: Django's HTML 500 page), not a hang.
            started = time.monotonic()
            status, body = await asyncio.to_thread(
                server.request, "POST", "/api/chat/turns/", body={"content": "hello"},
                headers={"Authorization": f"Token {key}"}, timeout=10,
            )
            elapsed = time.monotonic() - started
            assert status == 503 and elapsed < 5
            assert isinstance(body, dict) and body["code"] == "database_unavailable", "a JSON answer"
            # A page needs the database for the session: a 503 page that says so, not Django's bare 500.
            status, page = await asyncio.to_thread(server.get, "/memory/", headers={"Cookie": f"sessionid={cookie}"})
            assert status == 503 and isinstance(page, str) and "The database did not answer" in page
            print(f"\ndatabase cut: {OUTAGE_TURNS} socket turns answered (memory unavailable), REST turn answered "
                  f"HTTP {status} in {elapsed * 1000:.0f} ms")
            assert server.process.poll() is None
        finally:
            postgres_proxy.restore()

        # Nothing was written during the outage, and nothing is written late.
        await asyncio.sleep(0.5)
        assert await orm(stored_state, user) == before

        # Memory works again in the same process.
        last = await socket.turn(f"remember: {AFTER}", timeout=30)
        assert last["type"] == "turn_completed"
        assert last["memory"]["status"] == "committed"
        assert last["message"]["id"] is not None
        snapshot = await orm(store.load_snapshot, user_id=user.pk)
        assert snapshot.memory == (SEEDED, AFTER)
        assert (await asyncio.to_thread(server.get, "/readyz"))[0] == 200
        assert server.process.poll() is None, "the server restarted"
    finally:
        await socket.close()
