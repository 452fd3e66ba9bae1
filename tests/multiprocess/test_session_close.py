"""A logout on one daphne process closes the person's sockets on the other.

The logout signal sends `session.ended` through the Redis channel layer to
the person's group; the socket on the other process stops and closes with
4401 before any further turn. A deactivation that no signal announces (a
direct database update) still stops the next turn: the socket re-reads its
session first. Without Redis these tests skip (fail under REQUIRE_REDIS=1).
"""
from __future__ import annotations

import asyncio
import time

import pytest
from django.contrib.auth import get_user_model

from chat.consumers import CLOSE_UNAUTHENTICATED
from tests.multiprocess.servers import LiveSocket, orm, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

CSRF = "abcdefghijklmnopqrstuvwxyz012345"  # a 32-character secret: Django accepts it unmasked


def close_code(socket: LiveSocket):
    return getattr(getattr(socket.closed, "rcvd", None), "code", None)


async def test_logout_on_one_process_closes_the_sockets_on_the_other(servers, redis_url, user, other_user):
    one, two = await asyncio.gather(
        asyncio.to_thread(servers.start, "one", REDIS_URL=redis_url),
        asyncio.to_thread(servers.start, "two", REDIS_URL=redis_url),
    )
    cookie = await session_cookie(user)
    on_two = await LiveSocket.open(two, await session_cookie(user), name="alice-on-two")
    also_on_one = await LiveSocket.open(one, await session_cookie(user), name="alice-on-one")
    stranger = await LiveSocket.open(two, await session_cookie(other_user), name="bob-on-two")
    try:
        assert (await on_two.turn("hello"))["type"] == "turn_completed"
        started = time.monotonic()
        status, _ = await asyncio.to_thread(
            one.request, "POST", "/accounts/logout/",
            headers={"Cookie": f"sessionid={cookie}; csrftoken={CSRF}", "X-CSRFToken": CSRF})
        assert status in (200, 302)
        for socket in (on_two, also_on_one):
            await socket.wait_for(lambda live: live.closed is not None, timeout=10, what="the socket to close")
        took_ms = (time.monotonic() - started) * 1000
        for socket in (on_two, also_on_one):
            assert socket.of_type("socket_closed")[0]["code"] == "session_ended"
            assert close_code(socket) == CLOSE_UNAUTHENTICATED
        await asyncio.sleep(0.3)
        assert stranger.closed is None
        assert (await stranger.turn("hello"))["type"] == "turn_completed"
        print(f"\nlogout on process one -> the person's sockets on both processes closed in {took_ms:.0f} ms "
              "(the logout request included)")
    finally:
        for socket in (on_two, also_on_one, stranger):
            await socket.close()


async def test_an_unannounced_deactivation_stops_the_next_turn_on_a_live_server(servers, redis_url, user):
    server = await asyncio.to_thread(servers.start, "one", REDIS_URL=redis_url)
    socket = await LiveSocket.open(server, await session_cookie(user))
    try:
        assert (await socket.turn("hello"))["type"] == "turn_completed"
        await orm(lambda: get_user_model().objects.filter(pk=user.pk).update(is_active=False))
        await socket.send({"type": "user_message", "content": "hello again", "conversation_id": None})
        await socket.wait_for(lambda live: live.closed is not None, timeout=10, what="the socket to close")
        assert socket.of_type("socket_closed")[0]["code"] == "session_ended"
        assert len(socket.of_type("turn_started")) == 1  # the second turn never started
    finally:
        await socket.close()
