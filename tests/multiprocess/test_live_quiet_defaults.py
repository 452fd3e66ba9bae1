"""A production-like daphne (DEBUG off, nothing but the required settings)
from outside: its defaults keep the API docs to staff, admit a socket only
from the deployment's own origin, and an idle socket on Redis logs nothing.
"""
from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.multiprocess.servers import LiveSocket, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

# channels_redis waits for a socket's next message with a 5-second BZPOPMIN: two of them.
IDLE_SECONDS = 11


@pytest.fixture
def staff(make_user):
    return make_user("sam", "pw-sam-123", is_staff=True)


async def test_the_api_docs_are_for_staff_and_the_socket_for_its_own_origin(servers, user, staff):
    server = await asyncio.to_thread(servers.start, "defaults")  # no API_DOCS_PUBLIC, no CSRF_TRUSTED_ORIGINS
    person = {"Cookie": f"sessionid={await session_cookie(user)}"}
    staff_member = {"Cookie": f"sessionid={await session_cookie(staff)}"}
    for path in ("/api/schema/", "/api/docs/"):
        assert (await asyncio.to_thread(server.get, path))[0] == 403, path
        assert (await asyncio.to_thread(server.get, path, headers=person))[0] == 403, path
        assert (await asyncio.to_thread(server.get, path, headers=staff_member))[0] == 200, path

    # The server listens on 127.0.0.1:<port>; pages on the same host's other ports or scheme are refused.
    for origin in ("http://127.0.0.1", "https://127.0.0.1", f"https://127.0.0.1:{server.port}",
                   "http://127.0.0.1:9999", "http://localhost"):
        with pytest.raises(InvalidStatus) as refused:
            await connect(server.ws_url, origin=origin, additional_headers=person, proxy=None, open_timeout=10)
        assert refused.value.response.status_code == 403, origin
    own = await LiveSocket.open(server, person["Cookie"].removeprefix("sessionid="), name="own-origin")
    try:
        assert (await own.turn("hello"))["type"] == "turn_completed"
    finally:
        await own.close()


async def test_an_idle_socket_on_redis_logs_nothing(servers, redis_url, user):
    server = await asyncio.to_thread(servers.start, "idle", REDIS_URL=redis_url)
    socket = await LiveSocket.open(server, await session_cookie(user), name="idle")
    try:
        logged = len(server.log())
        await asyncio.sleep(IDLE_SECONDS)
        assert socket.closed is None
        quiet = server.log()[logged:]
        assert "channel layer" not in quiet and "Error" not in quiet, quiet
        assert (await socket.turn("hello"))["type"] == "turn_completed"  # and it still works
    finally:
        await socket.close()
