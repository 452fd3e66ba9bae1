"""Oversized and binary frames against a live daphne server, not the test stack.

Two limits stand in front of the chat: the consumer's own (a frame over
`CHAT_MAX_MESSAGE_CHARS` x 6 + 1,024 characters gets a `frame_too_large`
error and the socket stays open) and daphne's transport limit (1 MiB per
message by default: a larger one ends that socket — autobahn fails the
connection with 1009 — before the application sees it). Either way the process lives on and a new socket
chats at once.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from websockets.exceptions import ConnectionClosed

from tests.multiprocess.servers import LiveSocket, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

MESSAGE_TOO_BIG = 1009  # RFC 6455


async def test_oversized_and_binary_frames_on_a_live_server_never_take_it_down(servers, user):
    server = await asyncio.to_thread(servers.start, "frames", wait_ready=False)
    cookie = await session_cookie(user)
    socket = await LiveSocket.open(server, cookie)
    try:
        under_transport_limit = json.dumps({"type": "user_message", "content": "x" * 500_000})
        for frame, code in [(under_transport_limit, "frame_too_large"), (b"\x00\xff" * 1000, "binary_frame"),
                            ("[" * 20_000 + "]" * 20_000, "malformed_json")]:
            seen = len(socket.frames)
            await socket.send(frame)
            await socket.wait_for(lambda live: len(live.frames) > seen, what=f"an error for {code}")
            assert socket.frames[seen] == {**socket.frames[seen], "type": "error", "code": code}
        last = await socket.turn("hello after the bad frames")
        assert last["type"] == "turn_completed"

        try:
            await socket.send("x" * (2 * 1024 * 1024))  # over daphne's 1 MiB message limit
        except ConnectionClosed:
            pass  # daphne may reset the connection while the frame is still being written
        await socket.wait_for(lambda live: live.closed is not None, timeout=10, what="daphne to close the socket")
        # Autobahn fails the connection (1009 on its side); the client may see no close frame at all.
        assert getattr(getattr(socket.closed, "rcvd", None), "code", MESSAGE_TOO_BIG) == MESSAGE_TOO_BIG
        assert server.process.poll() is None
    finally:
        await socket.close()

    fresh = await LiveSocket.open(server, cookie, name="fresh")
    try:
        assert (await fresh.turn("hello again"))["type"] == "turn_completed"
    finally:
        await fresh.close()
