"""Two daphne processes sharing PostgreSQL and a Redis channel layer.

One person, two sockets, one on each process: in every round both send a
`remember:` at the same moment, so two commits for the same person race
from two processes. Both changes must survive every round (no lost update),
and each commit must reach the person's socket on the other process as
`memory_changed` through Redis. A memory API edit on one process reaches a
socket on the other the same way.

PostgreSQL and Redis only: on SQLite these tests skip (two processes on one
SQLite file are not the deployment this proves); under REQUIRE_REDIS=1 an
unreachable Redis fails them.
"""
from __future__ import annotations

import asyncio

import pytest
from rest_framework.authtoken.models import Token

from agentmemory import store
from agentmemory.models import MemoryEvent, Outcome
from tests.multiprocess.servers import LiveSocket, orm, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.multiprocess]

ROUNDS = 12


async def start_two(servers, redis_url):
    return await asyncio.gather(
        asyncio.to_thread(servers.start, "one", REDIS_URL=redis_url),
        asyncio.to_thread(servers.start, "two", REDIS_URL=redis_url),
    )


def memory_changed(socket: LiveSocket) -> int:
    return len(socket.of_type("memory_changed"))


def commit_times(user) -> list:
    return list(MemoryEvent.objects.filter(user=user, outcome=Outcome.COMMITTED).order_by("id")
                .values_list("created_at", flat=True))


async def test_concurrent_turns_through_two_processes_keep_both_memory_changes(
    postgres_only, redis_url, servers, user,
):
    one, two = await start_two(servers, redis_url)
    cookie = await session_cookie(user)
    first = await LiveSocket.open(one, cookie, name="on-one")
    second = await LiveSocket.open(two, cookie, name="on-two")
    sent: list[str] = []
    try:
        for round_number in range(ROUNDS):
            facts = (f"Fact A{round_number} came through process one", f"Fact B{round_number} came through process two")
            sent.extend(facts)
            last_first, last_second = await asyncio.gather(
                first.turn(f"remember: {facts[0]}"), second.turn(f"remember: {facts[1]}"),
            )
            for last in (last_first, last_second):
                assert last["type"] == "turn_completed", last
                assert last["memory"]["status"] == "committed", last["memory"]
            kept = (await orm(store.load_snapshot, user_id=user.pk)).memory
            assert set(facts) <= set(kept), f"round {round_number}: a concurrent change was lost"

        kept = (await orm(store.load_snapshot, user_id=user.pk)).memory
        assert sorted(kept) == sorted(sent)  # lost updates: 0
        times = await orm(commit_times, user)
        assert len(times) == 2 * ROUNDS
        # How close the two commits of a round were: evidence that they really raced.
        gaps_ms = sorted(abs((times[i + 1] - times[i]).total_seconds()) * 1000 for i in range(0, len(times), 2))
        # Every commit reaches both sockets: its own process's and, through Redis, the other's.
        for socket in (first, second):
            await socket.wait_for(lambda live: memory_changed(live) == 2 * ROUNDS,
                                  what=f"{2 * ROUNDS} memory_changed frames")
        print(f"\ntwo processes: {2 * ROUNDS} concurrent turns in {ROUNDS} rounds, {len(kept)} changes kept, "
              f"{2 * ROUNDS - len(kept)} lost, {memory_changed(first) + memory_changed(second)} memory_changed "
              f"delivered; the two commits of a round were a median {gaps_ms[len(gaps_ms) // 2]:.0f} ms apart "
              f"(max {gaps_ms[-1]:.0f} ms)")
    finally:
        await first.close()
        await second.close()


async def test_memory_changed_reaches_the_persons_socket_on_the_other_process(
    postgres_only, redis_url, servers, user, other_user,
):
    one, two = await start_two(servers, redis_url)
    watcher = await LiveSocket.open(two, await session_cookie(user), name="watcher-on-two")
    writer = await LiveSocket.open(one, await session_cookie(user), name="writer-on-one")
    stranger = await LiveSocket.open(two, await session_cookie(other_user), name="stranger-on-two")
    try:
        last = await writer.turn("remember: The nightly build runs at two")
        assert last["memory"]["status"] == "committed"
        await watcher.wait_for(lambda live: memory_changed(live) == 1, what="memory_changed from process one")
        usage = watcher.of_type("memory_changed")[0]["usage"]
        assert usage["memory"]["entries"] == 1
        assert "nightly" not in str(watcher.of_type("memory_changed"))  # usage only, never content

        # A memory API edit on process two reaches the writer's socket on process one.
        key = (await orm(Token.objects.create, user=user)).key
        status, body = await asyncio.to_thread(
            two.request, "POST", "/api/memory/operations/", headers={"Authorization": f"Token {key}"},
            body={"operations": [{"target": "user", "action": "add", "content": "Prefers terse answers"}]},
        )
        assert status == 200, body
        await writer.wait_for(lambda live: memory_changed(live) == 2, what="memory_changed from the API on two")
        assert writer.of_type("memory_changed")[-1]["usage"]["user"]["entries"] == 1

        await asyncio.sleep(0.5)
        assert memory_changed(stranger) == 0  # another person's socket on the same process hears nothing
    finally:
        for socket in (watcher, writer, stranger):
            await socket.close()
