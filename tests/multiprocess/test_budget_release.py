"""A turn slot's release is one compare-and-delete on Redis (issue 41): a lease that
expires between a read and a delete can never free the slot another worker took since.

Two processes share one Redis: this one holds a slot; its lease expires at the worst
moment (right after a read-then-delete would have read its own token) and another
process (a separate Python interpreter, the project's settings with REDIS_URL) takes
the same slot. The release that follows must leave the other worker's slot alone.
With the old `get` then `delete` it freed it. Without Redis this skips (fails under
REQUIRE_REDIS=1).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache

from chat import budget

pytestmark = [pytest.mark.multiprocess]

ROOT = Path(__file__).resolve().parents[2]
TAKE_IN_ANOTHER_PROCESS = """
import django
django.setup()
from chat import budget
slot = budget.acquire_turn({user_id})
print(slot.key if slot else "", slot.token if slot else "")
"""


def take_in_another_process(redis_url: str, user_id: int) -> tuple[str, str]:
    env = {**os.environ, "REDIS_URL": redis_url, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_SENTINELS", None)
    done = subprocess.run([sys.executable, "-c", TAKE_IN_ANOTHER_PROCESS.format(user_id=user_id)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    key, token = done.stdout.strip().splitlines()[-1].split(" ")
    return key, token


@pytest.fixture
def shared_cache(redis_url):
    from django.test import override_settings

    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url,
                            "KEY_PREFIX": "chat"}},
        CHAT_MAX_CONCURRENT_TURNS=1,
    ):
        yield redis_url
        cache.clear()
    # Restoring CACHES gave Django's cache handler a new context-local table: open the default cache
    # here, in the tests' own context, so later tests share one cache object (tests/test_redis_down.py).
    cache.get("probe")


def test_a_lease_expiring_between_check_and_delete_never_frees_another_workers_slot(shared_cache, monkeypatch):
    user_id = 4242
    mine = budget.acquire_turn(user_id)
    assert mine is not None and not mine.local
    theirs: dict = {}

    def lease_expires_and_the_other_worker_takes_the_slot() -> None:
        cache.delete(mine.key)  # the lease ran out
        theirs["key"], theirs["token"] = take_in_another_process(shared_cache, user_id)

    real_get = cache.get

    def read_then_lease_expires(key, *args, **kwargs):
        value = real_get(key, *args, **kwargs)
        if key == mine.key and not theirs:
            lease_expires_and_the_other_worker_takes_the_slot()
        return value

    monkeypatch.setattr(cache, "get", read_then_lease_expires)
    mine.release()
    if not theirs:  # the release read nothing a lease could expire after: it expires now
        lease_expires_and_the_other_worker_takes_the_slot()
    monkeypatch.undo()

    assert theirs["key"] == mine.key and theirs["token"] != mine.token, "the other worker took the same slot"
    assert cache.get(mine.key) == theirs["token"], "the other worker's slot is still taken"
    assert budget.acquire_turn(user_id) is None, "so this person's one slot is in use"
    budget.Slot(theirs["key"], theirs["token"]).release()
    assert budget.acquire_turn(user_id) is not None, "its owner's release frees it"


def test_the_socket_registry_lock_is_released_only_by_its_holder(shared_cache):
    lock = budget._locked("sockets:77")
    with lock:
        assert cache.get(lock.key) == lock.token
        cache.set(lock.key, "another-holder", timeout=5)  # our lease ran out and another process took the lock
    assert cache.get(lock.key) == "another-holder"


def test_the_process_cache_releases_only_its_own_token():
    store = budget._process_cache
    store.set("turns:running:test:0", "a", timeout=60)
    assert not budget.delete_if_held(store, "turns:running:test:0", "b")
    assert store.get("turns:running:test:0") == "a"
    assert budget.delete_if_held(store, "turns:running:test:0", "a")
    assert store.get("turns:running:test:0") is None


@pytest.mark.parametrize("where", ["redis", "process"])
def test_a_running_turns_lease_is_renewed_and_a_killed_workers_slot_comes_back_within_it(
        where, redis_url, monkeypatch):
    """The lease is short (TURN_LEASE_SECONDS) and renewed while the turn runs (`budget.kept`): a long turn keeps
    its slot past the lease; a worker killed mid-turn (no release, no renewal) frees it when the lease runs out."""
    import asyncio
    import time as clock

    from django.test import override_settings

    monkeypatch.setattr(budget, "TURN_LEASE_SECONDS", 1)
    monkeypatch.setattr(budget, "LEASE_RENEW_SECONDS", 0.2)
    caches_setting = ({"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url,
                                   "KEY_PREFIX": "chat"}} if where == "redis" else None)
    budget.reset_process_budgets()

    def take(user_id):
        if where == "process":
            return budget._take_slot(budget._process_cache, user_id, "t-%s" % clock.monotonic(), local=True)
        return budget.acquire_turn(user_id)

    async def long_turn(slot) -> bool:
        async with budget.kept(slot):
            await asyncio.sleep(2.5)  # two and a half leases
            return take(51) is None  # still held: the person's one slot is in use

    with override_settings(**({"CACHES": caches_setting} if caches_setting else {}), CHAT_MAX_CONCURRENT_TURNS=1):
        slot = take(51)
        assert slot is not None
        assert asyncio.run(long_turn(slot)), "a renewed slot outlives its lease"
        # The worker dies here: nothing releases or renews the slot.
        assert take(51) is None
        clock.sleep(1.3)
        freed = take(51)
        assert freed is not None, "the lease ran out: the slot came back"
        freed.release()
        if where == "redis":
            cache.clear()
    cache.get("probe")  # as in shared_cache: the tests' own context opens the restored cache
    budget.reset_process_budgets()
