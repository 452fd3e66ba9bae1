"""Redis unreachable: a single process chats on, and says what it lost.

The channel layer carries only the `memory_changed` fan-out, so with Redis
gone a server still answers and commits; the failure is reported, not
hidden: /readyz names the channel layer, the log has a warning, and a
committed turn's memory message tells the person their other open pages were
not told. With Redis cut and restored through a TCP proxy, the same sockets
get live updates again without reconnecting.
"""
from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pytest

from agentmemory import store
from chat.consumers import LAYER_RETRY_SECONDS
from chat.turns import NOT_ANNOUNCED_MESSAGE
from tests.faults.tcp_proxy import TcpProxy
from tests.multiprocess.servers import LiveSocket, free_port, orm, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

FACT = "The release train leaves on Thursdays"
JOIN_WARNING = "chat socket has no live memory updates: channel layer error"
DELIVERY_WARNING = "memory_changed not delivered: channel layer error"


def memory_changed(socket: LiveSocket) -> int:
    return len(socket.of_type("memory_changed"))


async def test_unreachable_redis_single_process_chat_still_works_and_reports_it(servers, user):
    nothing_listens = f"redis://127.0.0.1:{free_port()}/0"
    server = await asyncio.to_thread(servers.start, "no-redis", wait_ready=False, REDIS_URL=nothing_listens)
    status, body = await asyncio.to_thread(server.get, "/readyz")
    assert status == 503 and body["failing"] == ["channel_layer"]

    cookie = await session_cookie(user)
    first = await LiveSocket.open(server, cookie, name="first")
    second = await LiveSocket.open(server, cookie, name="second")
    try:
        last = await first.turn(f"remember: {FACT}")
        assert last["type"] == "turn_completed", last
        assert last["memory"]["status"] == "committed"
        assert last["memory"]["message"] == NOT_ANNOUNCED_MESSAGE  # reported to the person
        assert (await orm(store.load_snapshot, user_id=user.pk)).memory == (FACT,)

        again = await second.turn("What do you know about me?")
        assert again["type"] == "turn_completed" and again["memory"]["status"] == "nothing_to_commit"
        assert FACT in again["message"]["content"]  # the second socket reads what the first saved
        assert first.closed is None and second.closed is None
        log = server.log()
        assert log.count(JOIN_WARNING) == 2  # one per socket, reported to the operator
        assert DELIVERY_WARNING in log
        assert FACT not in log
    finally:
        await first.close()
        await second.close()


@pytest.fixture
def redis_proxy(redis_url):
    parts = urlsplit(redis_url)
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 6379)).start()
    database = parts.path.lstrip("/") or "0"
    try:
        yield proxy, f"redis://127.0.0.1:{proxy.port}/{database}"
    finally:
        proxy.close()


async def wait_for_log(server, text: str, count: int, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while server.log().count(text) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not log {text!r} {count} times within {timeout} s")
        await asyncio.sleep(0.1)


async def test_redis_cut_and_restored_keeps_the_chat_and_brings_live_updates_back(servers, user, redis_proxy):
    proxy, url = redis_proxy
    server = await asyncio.to_thread(servers.start, "redis-behind-proxy", REDIS_URL=url)
    cookie = await session_cookie(user)
    writer = await LiveSocket.open(server, cookie, name="writer")
    watcher = await LiveSocket.open(server, cookie, name="watcher")
    try:
        await writer.turn("remember: fact one of three")
        await watcher.wait_for(lambda socket: memory_changed(socket) == 1, what="memory_changed before the cut")

        proxy.cut()
        last = await writer.turn("remember: fact two of three")
        assert last["type"] == "turn_completed" and last["memory"]["status"] == "committed"
        assert last["memory"]["message"] == NOT_ANNOUNCED_MESSAGE
        await asyncio.sleep(LAYER_RETRY_SECONDS)
        assert memory_changed(watcher) == 1  # nothing announced while Redis is away
        assert writer.closed is None and watcher.closed is None
        assert "chat socket stopped receiving live memory updates" in server.log()

        proxy.restore()
        await wait_for_log(server, "live memory updates are back", 2, timeout=LAYER_RETRY_SECONDS * 5)
        last = await writer.turn("remember: fact three of three")
        assert last["memory"]["status"] == "committed" and last["memory"]["message"] == "Memory saved."
        await watcher.wait_for(lambda socket: memory_changed(socket) == 2, what="memory_changed after the restore")
        snapshot = await orm(store.load_snapshot, user_id=user.pk)
        assert snapshot.memory == ("fact one of three", "fact two of three", "fact three of three")
    finally:
        await writer.close()
        await watcher.close()
