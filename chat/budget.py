"""One turn budget per person, shared by every transport and every worker.

Three limits, all kept in Django's cache (Redis when REDIS_URL is set, so
they hold across processes; the process's memory otherwise):

- the turn rate, `CHAT_TURN_RATE` (DRF rate syntax, default 30/min): the
  REST turn throttle (`ChatTurnThrottle`) and the socket spend the same
  budget, key `turns:user:<id>`. A sliding window of two fixed-window
  counters: every attempt increments the current window atomically
  (`cache.incr`, Redis INCR), so concurrent attempts from several
  processes each see their own count and at most the limit pass; a refused
  attempt gives its increment back.
- concurrent turns, `CHAT_MAX_CONCURRENT_TURNS` (default 2): a slot per
  running turn, taken with `cache.add` (Redis SET NX) so two processes
  cannot take the same one, leased for a minute and renewed while the turn
  runs (`kept`), so a killed worker's slots come back within a minute.
- open sockets, `CHAT_MAX_SOCKETS_PER_PERSON` (default 10): a small registry
  per person (channel name -> opening time) updated under a short cache lock;
  past the cap the oldest socket is named for eviction (the consumer closes
  it through the channel layer, on whichever worker holds it). Entries of a
  killed worker are the oldest, so they go first.

A cache that fails (Redis down) must not stop the chat, as the channel layer
does not. The turn budgets (the rate and the concurrent-turn slots) then fall
back to per-process budgets: the same counters, kept in this process's memory
(`_process_cache`) until the shared cache answers again, with a warning
without content on every call that could not reach it ("... counted per
process: cache error ..."). With N workers a person can so get up to N times
a limit while the cache is down, never an unlimited number of turns. The
open-socket registry is not a turn budget and needs the channel layer to
close a socket anyway: it lets the socket through and logs "open sockets not
counted" (`agentmemory.throttling.not_counted`, the one warning of every
limit kept only in the cache; the REST throttle extends its
`FailOpenThrottle`, the base of every throttle of the project).
"""
from __future__ import annotations

import asyncio
import logging
import math
import pickle
import time
import uuid
from contextlib import asynccontextmanager
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import ScopedRateThrottle

from agentmemory.throttling import FailOpenThrottle, not_counted

logger = logging.getLogger(__name__)

SCOPE = "chat_turns"
# A running turn's slot is leased for this long and renewed every LEASE_RENEW_SECONDS while the turn runs
# (`kept`): a worker killed mid-turn gives the person's slot back within a minute, not after the turn's
# whole deadline.
TURN_LEASE_SECONDS = 60
LEASE_RENEW_SECONDS = 20
SOCKET_REGISTRY_SECONDS = 24 * 3600
LOCK_SECONDS = 2
LOCK_WAIT_SECONDS = 1.0
PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int = 0  # whole seconds, at least 1 when refused
    # The window counter an allowed `take` spent its unit in ("" when nothing
    # was counted): `give_back` refunds that counter, never the window in
    # force when the refund happens, which may be the next one.
    counter: str = ""
    local: bool = False  # counted in this process's memory (the shared cache was down)

    def __bool__(self) -> bool:
        return self.allowed


ALLOWED = Decision(True)

# The per-process budgets while the shared cache cannot be reached: the same
# keys, in this process's memory. Never read while the shared cache answers.
_process_cache = LocMemCache("chat-budget-per-process", {"OPTIONS": {"MAX_ENTRIES": 100_000}})


def counted_per_process(limit: str, exc: BaseException) -> None:
    """Log that `limit` falls back to this process's count (no content: the error's class only)."""
    logger.warning("%s counted per process: cache error %s (the shared count resumes when the cache answers)",
                   limit, type(exc).__name__)


def reset_process_budgets() -> None:
    """Forget the per-process budgets (tests)."""
    _process_cache.clear()


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """Return (requests, seconds) for DRF's rate syntax ("30/min"), None for no limit."""
    if not rate:
        return None
    count, period = rate.split("/")
    return int(count), PERIODS[period.strip()[0]]


def turn_rate() -> str | None:
    # DRF's class attribute, so a test (or the schemathesis run) that raises
    # the throttle rate raises it for the socket too.
    return ScopedRateThrottle.THROTTLE_RATES.get(SCOPE)


def person_key(user_id) -> str:
    return f"turns:user:{user_id}"


# --- the rate ----------------------------------------------------------------------


def take(key: str, rate: str | None = None, *, now: float | None = None) -> Decision:
    """Spend one unit of `key`'s budget at `rate` (default CHAT_TURN_RATE) if it has one left."""
    parsed = parse_rate(rate if rate is not None else turn_rate())
    if parsed is None:
        return ALLOWED
    limit, period = parsed
    now = time.time() if now is None else now
    window = int(now // period)
    current, previous = f"budget:{key}:{window}", f"budget:{key}:{window - 1}"
    local = False
    try:
        count, before = _count(cache, current, previous, period)
    except Exception as exc:
        counted_per_process("turn budget", exc)
        local = True
        count, before = _count(_process_cache, current, previous, period)
    elapsed = now - window * period
    if before * (1 - elapsed / period) + count <= limit:
        return Decision(True, counter=current, local=local)
    refund(current, local=local)
    return Decision(False, _retry_after(limit, period, count - 1, before, elapsed), local=local)


def _count(store, current: str, previous: str, period: int) -> tuple[int, int]:
    """Spend a unit in window `current` of `store`; return its count and the previous window's."""
    store.add(current, 0, timeout=2 * period + 1)
    return store.incr(current), store.get(previous) or 0


def give_back(spent: Decision | None) -> None:
    """Return the unit an allowed `take` spent (a turn refused for another reason after it).

    The refund goes to the counter the unit was spent in: a turn admitted at
    the end of one window and refused in the next must not leave the first
    window a unit short (nor give the next one a unit it never spent).
    """
    if spent is not None and spent.counter:
        refund(spent.counter, local=spent.local)


def refund(counter: str, *, local: bool = False) -> None:
    try:
        (_process_cache if local else cache).decr(counter)
    except Exception:  # expired or unreachable: nothing to give back
        pass


def _retry_after(limit: int, period: int, count: int, before: int, elapsed: float) -> int:
    """Seconds until one more attempt fits: the window estimate falls to limit - 1."""
    if count + 1 > limit:
        # Not before the next window, where this window's count weighs as `before` did.
        wait = (period - elapsed) + period * (1 - (limit - 1) / max(count, 1))
    else:
        wait = period * (1 - (limit - 1 - count) / max(before, 1)) - elapsed
    return max(1, math.ceil(wait))


# --- concurrent turns ---------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    key: str
    token: str
    local: bool = False  # taken in this process's memory (the shared cache was down)

    def release(self) -> None:
        if not self.key:
            return
        store = _process_cache if self.local else caches[DEFAULT_CACHE_ALIAS]
        try:
            delete_if_held(store, self.key, self.token)
        except Exception as exc:  # the lease expires by itself
            logger.warning("turn slot not released: cache error %s", type(exc).__name__)

    def renew(self) -> bool:
        """Extend the lease while this turn still holds the slot; False when it no longer does (or the cache failed)."""
        if not self.key:
            return False
        store = _process_cache if self.local else caches[DEFAULT_CACHE_ALIAS]
        try:
            return renew_if_held(store, self.key, self.token, TURN_LEASE_SECONDS)
        except Exception as exc:  # the lease may lapse; the turn goes on
            logger.warning("turn slot lease not renewed: cache error %s", type(exc).__name__)
            return False


@asynccontextmanager
async def kept(slot: Slot | None):
    """Renew `slot`'s lease every LEASE_RENEW_SECONDS while the block runs (a turn), off the event loop."""
    if slot is None or not slot.key:
        yield
        return

    async def renew_forever() -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW_SECONDS)
            await asyncio.to_thread(slot.renew)

    renewing = asyncio.ensure_future(renew_forever())
    try:
        yield
    finally:
        renewing.cancel()


def acquire_turn(user_id) -> Slot | None:
    """Take one of the person's CHAT_MAX_CONCURRENT_TURNS slots; None when all are in use."""
    token = uuid.uuid4().hex
    try:
        return _take_slot(cache, user_id, token, local=False)
    except Exception as exc:
        counted_per_process("concurrent turns", exc)
        return _take_slot(_process_cache, user_id, token, local=True)


def _take_slot(store, user_id, token: str, *, local: bool) -> Slot | None:
    for index in range(max(settings.CHAT_MAX_CONCURRENT_TURNS, 0)):
        key = f"turns:running:{user_id}:{index}"
        if store.add(key, token, timeout=TURN_LEASE_SECONDS):
            return Slot(key, token, local)
    return None


def admit_turn(user_id) -> tuple[Slot | None, Decision]:
    """Take a concurrent-turn slot, then spend one unit of the person's rate budget.

    One call, so the chat socket hands off to a thread once per turn for
    both. Return (slot, ALLOWED) to go ahead; (None, ALLOWED) when all the
    person's slots are in use (no budget spent); (None, the refusal) when
    over the rate, with the slot given back.
    """
    slot = acquire_turn(user_id)
    if slot is None:
        return None, ALLOWED
    decision = take(person_key(user_id))
    if not decision.allowed:
        slot.release()
        return None, decision
    return slot, decision


# --- open sockets --------------------------------------------------------------------


def register_socket(user_id, channel_name: str, *, now: float | None = None) -> list[str]:
    """Record a new socket of the person; return the channels of the oldest ones past the cap."""
    limit = max(settings.CHAT_MAX_SOCKETS_PER_PERSON, 1)
    key = f"sockets:{user_id}"
    try:
        with _locked(key):
            registry = dict(cache.get(key) or {})
            registry[channel_name] = time.time() if now is None else now
            evicted = []
            while len(registry) > limit:
                oldest = min(registry, key=registry.__getitem__)
                evicted.append(oldest)
                del registry[oldest]
            cache.set(key, registry, timeout=SOCKET_REGISTRY_SECONDS)
    except Exception as exc:
        not_counted("open sockets", exc, served="the socket stays open")
        return []
    return evicted


def unregister_socket(user_id, channel_name: str) -> None:
    key = f"sockets:{user_id}"
    try:
        with _locked(key):
            registry = dict(cache.get(key) or {})
            if registry.pop(channel_name, None) is not None:
                cache.set(key, registry, timeout=SOCKET_REGISTRY_SECONDS)
    except Exception as exc:
        logger.warning("closed socket not uncounted: cache error %s", type(exc).__name__)


def open_sockets(user_id) -> int:
    return len(cache.get(f"sockets:{user_id}") or {})


class _locked:
    """A short lock in the cache (SET NX with a timeout); after a bounded wait, go on without it."""

    def __init__(self, key: str) -> None:
        self.key = f"{key}:lock"
        self.token = uuid.uuid4().hex

    def __enter__(self):
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not cache.add(self.key, self.token, timeout=LOCK_SECONDS):
            if time.monotonic() > deadline:
                logger.warning("socket registry lock not taken in %.1f s; going on without it", LOCK_WAIT_SECONDS)
                self.token = ""
                break
            time.sleep(0.005)
        return self

    def __exit__(self, *exc) -> None:
        if self.token:
            delete_if_held(caches[DEFAULT_CACHE_ALIAS], self.key, self.token)


# --- releasing what one holds ------------------------------------------------------------

# Delete the key only while it still holds this token, in one step on the Redis server.
_RELEASE_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


# Extend the key's lease only while it still holds this token.
_RENEW_SCRIPT = ("if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) "
                 "else return 0 end")


def renew_if_held(store, key: str, token: str, seconds: int) -> bool:
    """Set `key`'s lease to `seconds` only while it holds `token`, atomically (as `delete_if_held`)."""
    if isinstance(store, RedisCache):
        full = store.make_and_validate_key(key)
        client = store._cache.get_client(full, write=True)  # type: ignore[attr-defined]  # redis-py client of Django's backend
        return bool(client.eval(_RENEW_SCRIPT, 1, full, store._cache._serializer.dumps(token),  # type: ignore[attr-defined]
                                int(seconds)))
    if isinstance(store, LocMemCache):
        full = store.make_and_validate_key(key)
        with store._lock:  # type: ignore[attr-defined]  # LocMemCache's own lock
            held = full in store._cache and not store._has_expired(full)  # type: ignore[attr-defined]
            if held and pickle.loads(store._cache[full]) == token:  # type: ignore[attr-defined]
                store._expire_info[full] = store.get_backend_timeout(seconds)  # type: ignore[attr-defined]
                return True
            return False
    if store.get(key) == token:
        return bool(store.touch(key, seconds))
    return False


def delete_if_held(store, key: str, token: str) -> bool:
    """Delete `key` only while it holds `token`, atomically; return True when it was deleted.

    A slot or lock is leased: read-then-delete would let a lease that
    expires between the two free what another worker took since. On Redis
    it is one script (compare and delete on the server); in this process's
    memory (LocMemCache) the check and the delete hold the cache's own lock.
    Another backend falls back to read-then-delete. Pass the backend itself
    (`caches[alias]`), not the `cache` proxy.
    """
    if isinstance(store, RedisCache):
        full = store.make_and_validate_key(key)
        client = store._cache.get_client(full, write=True)  # type: ignore[attr-defined]  # redis-py client of Django's backend
        return bool(client.eval(_RELEASE_SCRIPT, 1, full, store._cache._serializer.dumps(token)))  # type: ignore[attr-defined]
    if isinstance(store, LocMemCache):
        full = store.make_and_validate_key(key)
        with store._lock:  # type: ignore[attr-defined]  # LocMemCache's own lock, as its delete() takes
            held = full in store._cache and not store._has_expired(full)  # type: ignore[attr-defined]
            if held and pickle.loads(store._cache[full]) == token:  # type: ignore[attr-defined]
                return store._delete(full)  # type: ignore[attr-defined]
            return False
    if store.get(key) == token:
        return bool(store.delete(key))
    return False


# --- the REST side ---------------------------------------------------------------------


class ChatTurnThrottle(FailOpenThrottle, ScopedRateThrottle):
    """DRF's scoped throttle on the shared budget: a person's key, or the client address for anonymous callers.

    Subclassing ScopedRateThrottle keeps its rate table (`THROTTLE_RATES`)
    and scope lookup; only where the count lives changes. `take` serves the
    turn uncounted when the cache fails, as FailOpenThrottle does for DRF's
    own count.
    """

    def count(self, request, view) -> bool:
        self.scope = getattr(view, self.scope_attr, None) or SCOPE
        self.rate = self.get_rate()
        if self.rate is None:
            return True
        user = request.user
        key = person_key(user.pk) if user and user.is_authenticated else f"turns:address:{self.get_ident(request)}"
        self.decision = take(key, self.rate)
        # The view gives the unit back when the turn does not run after all (chat/api.py).
        request.turn_budget = self.decision
        return self.decision.allowed

    def wait(self):
        return getattr(self, "decision", ALLOWED).retry_after or None
