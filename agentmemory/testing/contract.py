"""The contract every agent loop keeps, as scenarios any test runner can drive.

One definition for every loop: the adapters in `agentmemory.integrations`
(tested in examples/agent_loops, where their extras are installed), this
repository's chat (tests/test_contract_chat.py), and any other project's
loop. Each scenario drives the real loop against a `ScriptedServer` over
real HTTP and checks the real database:

- `commits_once_after_the_final_answer`: the tool stages during the run
  (nothing is stored while the model is still answering) and the turn
  commits once, after the final answer;
- `nothing_committed_on_a_model_error`, `..._on_a_cancel`,
  `..._past_the_turn_limit`, `..._from_an_incomplete_answer`;
- `identity_only_from_the_host`: a model that names someone else writes
  nobody's memory and sees nobody else's;
- `concurrent_people_stay_apart`: two people's simultaneous turns never see
  or write each other's memory;
- `memory_free_mode_offers_no_block_and_no_tool`;
- `no_memory_content_in_logs_or_traces`.

A loop is described by a `Loop` (see its docstring). A scenario is
`await scenario(loop, server, people)`; it raises AssertionError on a
breach. Run them inside a test that may use the database from worker
threads (pytest-django: `transactional_db`), with memory enabled.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from django.contrib.auth import get_user_model
from django.db import connection

from .. import store
from ..models import Actor, MemoryEvent, Outcome
from ..prompt import BLOCK_OPEN
from ..rules import Operation
from ..telemetry import RedactionFilter
from .model_server import Call, Fail, Hang, Rule, Say, ScriptedServer, Seen

FACT = "Prefers answers with one short code example"
NOTED = "Noted."


class Loop(Protocol):
    """An agent loop under the contract.

    `turn` runs one turn for `person` (a user object, as your
    authentication gives it) against `server` and returns the answer text,
    or raises; `memory=False` is the loop's memory-free mode for untrusted
    routes. `rounds` is the most model requests one turn makes before the
    loop gives up. `remember(fact)` is the model's tool call that adds `fact`
    to the person's profile, `impersonate(other_id, fact)` a call that tries
    to write someone else's, `offers_tool(seen)` whether a request offered
    the memory tool. `capture_traces()` is a context manager yielding a list
    that fills with the loop's trace data as text (empty for a loop that
    traces nothing).
    """

    name: str
    rounds: int

    async def turn(self, server: ScriptedServer, person: Any, question: str, *, memory: bool = True) -> str: ...

    def remember(self, fact: str) -> Call: ...

    def impersonate(self, other_id: Any, fact: str) -> Call: ...

    def offers_tool(self, seen: Seen) -> bool: ...

    def capture_traces(self) -> contextlib.AbstractContextManager[list[str]]: ...


# --- the database, from worker threads -------------------------------------------------


async def db(function: Callable, /, *args, **kwargs):
    """Run ORM work in a worker thread and close its connection (PostgreSQL can then drop the test database)."""

    def run():
        try:
            return function(*args, **kwargs)
        finally:
            connection.close()

    return await asyncio.to_thread(run)


class People:
    """Accounts and their memory, for the scenarios."""

    def __init__(self) -> None:
        self.count = 0

    async def make(self, name: str = "") -> Any:
        self.count += 1
        username = name or f"person{self.count}"
        return await db(get_user_model().objects.create_user, username=f"{username}-{self.count}",
                        password=f"{username}-pass-{self.count}")

    async def seed(self, person, *entries: str) -> None:
        operations = [Operation(target="user", action="add", content=entry) for entry in entries]
        await db(store.commit_operations, user_id=person.pk, operations=operations, actor=Actor.SYSTEM)

    async def stored(self, person) -> tuple[str, ...]:
        snapshot = await db(store.load_snapshot, user_id=person.pk)
        return snapshot.user + snapshot.memory

    def stored_now(self, person) -> tuple[str, ...]:
        """The stored entries, read from the calling thread (a scripted rule's), connection closed after."""
        try:
            snapshot = store.load_snapshot(user_id=person.pk)
            return snapshot.user + snapshot.memory
        finally:
            connection.close()

    async def commits(self, person) -> int:
        """How many agent commits changed this person's memory."""
        return await db(lambda: MemoryEvent.objects.filter(user_id=person.pk, actor=Actor.AGENT,
                                                           outcome=Outcome.COMMITTED).count())


# --- the scenarios -----------------------------------------------------------------------


async def _fails(work: Awaitable) -> BaseException:
    try:
        await work
    except BaseException as exc:  # the loop's own exception, whatever its type
        return exc
    raise AssertionError("the turn completed, but it should have failed")


async def commits_once_after_the_final_answer(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    during: list[tuple] = []

    def answer(seen: Seen):
        during.append(people.stored_now(person))  # the model is still answering: nothing may be stored yet
        return Say(NOTED)

    server.push(loop.remember(FACT), Rule(answer))
    reply = await loop.turn(server, person, "Keep code examples short, one per answer.")
    assert reply.strip() == NOTED, f"{loop.name}: the reply was not the model's final answer"
    assert during == [()], f"{loop.name}: memory was written before the final answer"
    assert await people.stored(person) == (FACT,), f"{loop.name}: the staged fact was not committed"
    assert await people.commits(person) == 1, f"{loop.name}: the turn did not commit exactly once"
    first = server.requests[0]
    assert loop.offers_tool(first) and BLOCK_OPEN in first.system, f"{loop.name}: no memory block or tool offered"


async def nothing_committed_on_a_model_error(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    server.push(loop.remember(FACT), Fail(500))
    await _fails(loop.turn(server, person, "Keep code examples short."))
    assert await people.stored(person) == (), f"{loop.name}: a failed turn committed memory"


async def nothing_committed_on_a_cancel(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    server.push(loop.remember(FACT), Hang(15))
    task = asyncio.ensure_future(loop.turn(server, person, "Keep code examples short."))
    arrived = await asyncio.to_thread(server.wait_for_requests, 2, 10)
    assert arrived, f"{loop.name}: the model was not asked again after the tool call"
    task.cancel()
    failure = await _fails(task)
    assert isinstance(failure, asyncio.CancelledError) or getattr(failure, "code", "") == "cancelled", (
        f"{loop.name}: a cancel ended as {type(failure).__name__}")
    assert await people.stored(person) == (), f"{loop.name}: a cancelled turn committed memory"


async def nothing_committed_past_the_turn_limit(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    server.push(*(loop.remember(f"{FACT}, note {number}") for number in range(loop.rounds + 1)))
    await _fails(loop.turn(server, person, "Keep code examples short."))
    assert await people.stored(person) == (), f"{loop.name}: a turn that ran out of rounds committed memory"


async def nothing_committed_from_an_incomplete_answer(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    server.push(loop.remember(FACT), Say("Noted, and then the answer was cut", finished=False))
    await _fails(loop.turn(server, person, "Keep code examples short."))
    assert await people.stored(person) == (), f"{loop.name}: an answer cut off at the output limit committed memory"


async def identity_only_from_the_host(loop: Loop, server: ScriptedServer, people: People) -> None:
    alice, bob = await people.make("alice"), await people.make("bob")
    secret = "Bob keeps his notes in Esperanto"
    await people.seed(bob, secret)
    server.push(loop.impersonate(bob.pk, FACT), Say("Done."))
    with contextlib.suppress(Exception):  # refused, the loop may answer or fail; either way nothing lands
        await loop.turn(server, alice, "Remember for bob: keep code examples short.")
    assert await people.stored(bob) == (secret,), f"{loop.name}: the model wrote someone else's memory"
    assert await people.stored(alice) == (), f"{loop.name}: a refused call was committed"
    assert not any(secret in seen.text for seen in server.requests), f"{loop.name}: alice's turn saw bob's memory"


async def concurrent_people_stay_apart(loop: Loop, server: ScriptedServer, people: People) -> None:
    alice, bob = await people.make("alice"), await people.make("bob")
    seeds = {"alice": "Alice works on the billing service", "bob": "Bob maintains the mobile app"}
    facts = {"alice": "Alice prefers tabs", "bob": "Bob prefers spaces"}
    await people.seed(alice, seeds["alice"])
    await people.seed(bob, seeds["bob"])
    server.delay = 0.05  # each answer waits, so the two turns interleave

    def answer(seen: Seen):
        return Say(NOTED) if seen.after_tool else loop.remember(seen.last_user.removeprefix("remember: "))

    server.push(*(Rule(answer) for _ in range(4)))
    replies = await asyncio.gather(loop.turn(server, alice, f"remember: {facts['alice']}"),
                                   loop.turn(server, bob, f"remember: {facts['bob']}"))
    assert [reply.strip() for reply in replies] == [NOTED, NOTED], f"{loop.name}: a concurrent turn failed"
    assert await people.stored(alice) == (seeds["alice"], facts["alice"]), f"{loop.name}: alice's memory is wrong"
    assert await people.stored(bob) == (seeds["bob"], facts["bob"]), f"{loop.name}: bob's memory is wrong"
    for seen in server.requests:
        mine = "alice" if facts["alice"] in seen.last_user else "bob"
        other = "bob" if mine == "alice" else "alice"
        assert seeds[mine] in seen.system, f"{loop.name}: a turn did not see its own person's memory"
        assert seeds[other] not in seen.text and facts[other] not in seen.text, (
            f"{loop.name}: one person's turn saw the other's memory")


async def memory_free_mode_offers_no_block_and_no_tool(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    seed = "Alice is allergic to peanuts"
    await people.seed(person, seed)
    server.push(Say("Hello."))
    reply = await loop.turn(server, person, "Hello there.", memory=False)
    assert reply.strip() == "Hello."
    (seen,) = server.requests
    assert not loop.offers_tool(seen), f"{loop.name}: the memory-free mode offered the memory tool"
    assert BLOCK_OPEN not in seen.text and seed not in seen.text, f"{loop.name}: the memory-free mode sent memory"
    assert await people.stored(person) == (seed,)


SENTINEL_SEED = "Stored-sentinel zq81 is the person's locker code word"
SENTINEL_FACT = "Staged-sentinel kx47 likes a morning stand-up"


@contextlib.contextmanager
def captured_logs() -> Iterator[list[str]]:
    """Every log record of the turn at DEBUG, as a handler with agentmemory's redaction filter writes it,
    plus the raw text of agentmemory's own records (which must carry no content before any filter)."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.name.startswith("agentmemory"):
                lines.append(str(record.msg) + repr(record.args))
            lines.append(self.format(record))

    handler = Collect(level=logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    handler.addFilter(RedactionFilter())
    root = logging.getLogger()
    # The root's other handlers (a test runner's log capture) stay off meanwhile: DEBUG records of
    # HTTP clients quote requests, and a failing test must not print them.
    level, others = root.level, list(root.handlers)
    for other in others:
        root.removeHandler(other)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        for other in others:
            root.addHandler(other)
        root.setLevel(level)


async def no_memory_content_in_logs_or_traces(loop: Loop, server: ScriptedServer, people: People) -> None:
    person = await people.make("alice")
    await people.seed(person, SENTINEL_SEED)
    server.push(loop.remember(SENTINEL_FACT), Say(NOTED))
    with captured_logs() as logs, loop.capture_traces() as traces:
        await loop.turn(server, person, "Please remember my stand-up preference.")
    assert await people.stored(person) == (SENTINEL_SEED, SENTINEL_FACT)
    assert SENTINEL_SEED in server.requests[0].system, "the memory did reach the model (a sanity check)"
    for sentinel in ("zq81", "kx47"):  # counted, never shown: a failure must not print the leaked text
        leaked_logs = sum(sentinel in line for line in logs)
        leaked_traces = sum(sentinel in item for item in traces)
        assert leaked_logs == 0, f"{loop.name}: memory content reached {leaked_logs} log records"
        assert leaked_traces == 0, f"{loop.name}: memory content reached {leaked_traces} trace items"


SCENARIOS: tuple[Callable[[Loop, ScriptedServer, People], Awaitable[None]], ...] = (
    commits_once_after_the_final_answer,
    nothing_committed_on_a_model_error,
    nothing_committed_on_a_cancel,
    nothing_committed_past_the_turn_limit,
    nothing_committed_from_an_incomplete_answer,
    identity_only_from_the_host,
    concurrent_people_stay_apart,
    memory_free_mode_offers_no_block_and_no_tool,
    no_memory_content_in_logs_or_traces,
)


@contextlib.contextmanager
def no_traces() -> Iterator[list[str]]:
    """`Loop.capture_traces` for a loop that records no traces of its own."""
    yield []
