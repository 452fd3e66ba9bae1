"""A server process killed mid-turn (SIGKILL) leaves no partial commit.

Each try starts a live daphne server, runs a turn over a real socket and
kills the process without warning: no shutdown hook, no `finally`, no
rollback by the application — only the database's own transaction rules.
Killed while the answer streams, with a memory change staged or without
one, nothing is committed: no memory row, no committed event, no stored
answer. Killed at random moments (before, during and after the commit),
every try is all or nothing: a memory change exists exactly when its
committed event does, and a stored answer never exists without its change.
"""
from __future__ import annotations

import asyncio
import random

import pytest

from agentmemory import store
from agentmemory.models import MemoryEvent, Outcome
from chat.models import Message
from tests.multiprocess.servers import LiveSocket, orm, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

STREAM_DELAY_MS = "40"  # the demo model's words arrive this far apart, so a kill lands mid-stream
MID_STREAM_TRIES = 3
RANDOM_TRIES = 10
RANDOM_SEED = 20260507
# Kills land between the send and this multiple of a whole cold turn's duration (measured first).
KILL_WINDOW = 1.5


def stored(user) -> dict:
    return {
        "memory": store.load_snapshot(user_id=user.pk).memory,
        "committed": MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).count(),
        "answers": Message.objects.filter(conversation__user=user, role=Message.Role.ASSISTANT).count(),
    }


async def start_and_connect(servers, user, name: str):
    server = await asyncio.to_thread(servers.start, name, wait_ready=False, DEMO_MODEL_DELAY_MS=STREAM_DELAY_MS)
    socket = await LiveSocket.open(server, await session_cookie(user))
    return server, socket


@pytest.mark.parametrize("staged", [True, False], ids=["with-a-staged-write", "without-a-staged-write"])
async def test_server_killed_while_the_answer_streams_commits_nothing(servers, user, staged):
    for attempt in range(MID_STREAM_TRIES):
        before = await orm(stored, user)
        server, socket = await start_and_connect(servers, user, f"killed-{attempt}")
        content = f"remember: killed fact number {attempt}" if staged else "tell me what you know"
        await socket.send({"type": "user_message", "content": content, "conversation_id": None})

        def streaming(live: LiveSocket) -> bool:
            tool_staged = any(frame.get("status") == "staged" for frame in live.of_type("tool"))
            return len(live.of_type("delta")) >= 3 and (tool_staged or not staged)

        await socket.wait_for(streaming, what="a streaming answer")
        assert not socket.of_type("turn_completed")
        await asyncio.to_thread(server.kill)
        await socket.wait_for(lambda live: live.closed is not None, timeout=10, what="the socket to close")

        after = await orm(stored, user)
        assert after == before, f"try {attempt}: the killed turn left {after} (was {before})"
        await socket.close()


async def test_server_killed_at_random_moments_commits_all_or_nothing(servers, user):
    chance = random.Random(RANDOM_SEED)
    committed_tries = answers_missing = 0
    # How long a whole cold turn takes here: the kills spread over it and a little past it.
    server, socket = await start_and_connect(servers, user, "measure")
    started = asyncio.get_running_loop().time()
    last = await socket.turn("remember: the measured fact", timeout=30)
    whole_turn = asyncio.get_running_loop().time() - started
    assert last["memory"]["status"] == "committed"
    await socket.close()
    await asyncio.to_thread(server.stop)
    for attempt in range(RANDOM_TRIES):
        before = await orm(stored, user)
        fact = f"random kill fact number {attempt}"
        server, socket = await start_and_connect(servers, user, f"random-{attempt}")
        await socket.send({"type": "user_message", "content": f"remember: {fact}", "conversation_id": None})
        # Stratified: one kill in each slice of the window, at a random point of it.
        await asyncio.sleep((attempt + chance.random()) / RANDOM_TRIES * KILL_WINDOW * whole_turn)
        await asyncio.to_thread(server.kill)
        await socket.wait_for(lambda live: live.closed is not None, timeout=10, what="the socket to close")

        after = await orm(stored, user)
        changed = after["memory"] != before["memory"]
        new_events = after["committed"] - before["committed"]
        new_answers = after["answers"] - before["answers"]
        if changed:
            assert after["memory"] == before["memory"] + (fact,)
            committed_tries += 1
            # Killed after the commit and before the answer was stored: the change stands (the
            # whole answer had been produced), only the conversation log lacks the reply.
            answers_missing += new_answers == 0
        # All or nothing: the change and its committed event go together; an answer is stored only after both.
        assert new_events == (1 if changed else 0), f"try {attempt}: {new_events} events, memory changed: {changed}"
        assert new_answers <= (1 if changed else 0), f"try {attempt}: an answer was stored without its change"
        await socket.close()

    # The person's lock is free again: a new process commits at once.
    server, socket = await start_and_connect(servers, user, "after-the-kills")
    last = await socket.turn("remember: the survivor fact", timeout=30)
    assert last["type"] == "turn_completed" and last["memory"]["status"] == "committed"
    await socket.close()
    print(f"\nkilled at random moments over {whole_turn:.2f} s turns: {RANDOM_TRIES} tries, {committed_tries} "
          f"committed before the kill ({answers_missing} of them before the reply was stored), "
          f"{RANDOM_TRIES - committed_tries} committed nothing, 0 partial")
