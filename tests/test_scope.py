"""The request-bound identity (agentmemory.scope): a binding is visible only
to the code running for that request, never to a concurrent task or thread,
and writes need the snapshot that was actually read.
"""
import asyncio
import threading

import pytest

from agentmemory.rules import MemoryValidationError, Operation, Snapshot
from agentmemory.scope import MemoryLedger, get_memory_request, memory_scope, stage_operations


def bound_user():
    request = get_memory_request()
    return None if request is None else request.user_id


async def test_scope_never_leaks_into_a_concurrent_task():
    alice_bound = asyncio.Event()
    bob_bound = asyncio.Event()
    seen = {"alice": [], "bob": []}

    async def turn(name, user_id, mine, theirs):
        assert bound_user() is None
        with memory_scope(user_id, True, snapshot=Snapshot()) as request:
            mine.set()
            # Interleave: each task waits until the other one is bound too.
            await theirs.wait()
            for step in range(5):
                seen[name].append(bound_user())
                stage_operations(request.ledger, [Operation("memory", "add", content=f"{name} fact {step}")])
                await asyncio.sleep(0)
            return request.ledger

    alice_ledger, bob_ledger = await asyncio.gather(
        turn("alice", 1, alice_bound, bob_bound),
        turn("bob", 2, bob_bound, alice_bound),
    )
    assert seen == {"alice": [1] * 5, "bob": [2] * 5}
    assert all(op.content.startswith("alice ") for op in alice_ledger.operations)
    assert all(op.content.startswith("bob ") for op in bob_ledger.operations)
    assert len(alice_ledger.operations) == len(bob_ledger.operations) == 5
    assert bound_user() is None


async def test_scope_bound_inside_a_task_does_not_leak_to_its_parent():
    async def child():
        with memory_scope(2, False):
            await asyncio.sleep(0)
            return bound_user()

    with memory_scope(1, False):
        assert await asyncio.create_task(child()) == 2
        assert bound_user() == 1
    assert bound_user() is None


async def test_scope_follows_its_request_into_a_worker_thread_and_no_further():
    def worker():
        inside = bound_user()
        with memory_scope(99, False):
            pass
        return inside

    with memory_scope(7, False):
        assert await asyncio.to_thread(worker) == 7
        assert bound_user() == 7


def test_thread_started_outside_a_scope_sees_none():
    seen = []
    started = threading.Event()
    release = threading.Event()

    def worker():
        started.set()
        release.wait(5)
        seen.append(bound_user())

    thread = threading.Thread(target=worker)
    thread.start()
    started.wait(5)
    with memory_scope(1, False):
        release.set()
        thread.join(5)
    assert seen == [None]


def test_plain_thread_never_inherits_a_scope():
    seen = []
    with memory_scope(1, False):
        thread = threading.Thread(target=lambda: seen.append(bound_user()))
        thread.start()
        thread.join(5)
    assert seen == [None]


def test_scope_bound_in_a_thread_does_not_leak_to_another_thread():
    seen = {}
    barrier = threading.Barrier(2, timeout=5)

    def bound(user_id):
        with memory_scope(user_id, False):
            barrier.wait()
            seen[user_id] = bound_user()
            barrier.wait()

    def unbound():
        barrier.wait()
        seen["unbound"] = bound_user()
        barrier.wait()

    threads = [threading.Thread(target=bound, args=(1,)), threading.Thread(target=unbound)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert seen == {1: 1, "unbound": None}


def test_scope_is_unbound_on_exit_even_after_an_error():
    with pytest.raises(RuntimeError):
        with memory_scope(1, False):
            raise RuntimeError("turn failed")
    assert bound_user() is None


def test_nested_scope_restores_the_outer_binding():
    with memory_scope(1, False):
        with memory_scope(2, False):
            assert bound_user() == 2
        assert bound_user() == 1


def test_writes_enabled_without_a_snapshot_is_refused():
    with pytest.raises(ValueError, match="snapshot"):
        with memory_scope(1, True):
            pass
    assert bound_user() is None


def test_read_only_scope_has_no_ledger():
    with memory_scope(1, False) as request:
        assert request.ledger is None
        assert request.writes_enabled is False


def test_writable_scope_stages_against_the_snapshot_it_was_given():
    snapshot = Snapshot(user=("likes tea",))
    with memory_scope(1, True, snapshot=snapshot) as request:
        assert request.ledger.snapshot == snapshot
        assert request.ledger.operations == []


def test_staging_applies_the_batch_so_the_model_sees_its_own_edits():
    ledger = MemoryLedger(snapshot=Snapshot(memory=("a",)))
    first = [Operation("memory", "add", content="b")]
    second = [Operation("memory", "replace", match="b", content="c")]
    stage_operations(ledger, first)
    assert stage_operations(ledger, second) == Snapshot(memory=("a", "c"))
    # The replace is pinned to the exact entry it matched when it was staged.
    assert ledger.operations == first + [Operation("memory", "replace", match="b", content="c", entry="b")]


def test_rejected_batch_leaves_the_ledger_as_it_was():
    ledger = MemoryLedger(snapshot=Snapshot(memory=("a",)))
    stage_operations(ledger, [Operation("memory", "add", content="b")])
    before = (ledger.snapshot, list(ledger.operations))
    with pytest.raises(MemoryValidationError):
        stage_operations(ledger, [Operation("memory", "add", content="c"), Operation("memory", "remove", match="zzz")])
    assert (ledger.snapshot, ledger.operations) == before


def test_scope_limits_default_to_the_rules_and_can_be_overridden():
    with memory_scope(1, True, snapshot=Snapshot(), limits={"user": 10, "memory": 20}) as request:
        assert dict(request.limits) == {"user": 10, "memory": 20}
        with pytest.raises(MemoryValidationError):
            stage_operations(request.ledger, [Operation("user", "add", content="x" * 11)], request.limits)
