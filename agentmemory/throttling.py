"""Limits kept in the cache never cost a request its answer.

A limit counts in Django's cache: Redis when the project shares one between
workers, which may be down or slow. The chat's turn budget always went on
without it; every other limit does the same, through this module:

- `FailOpenThrottle` is the base of every DRF throttle here and in the chat
  (`agentmemory.api.MemoryWriteThrottle`, `chat.budget.ChatTurnThrottle`).
  When the cache fails while a request is counted, the request is served
  uncounted, and a warning names the limit and the error's class.
- `not_counted()` is that warning, for code that counts in the cache outside
  a DRF throttle (the chat's concurrent-turn slots and open-socket registry).

The warning never carries content: not the cache key (it holds a person's id
or address), not the error's message (it may hold the cache's address),
only the limit's name and the exception's class. A cache that drops packets
costs each counted request up to the cache's own timeout (the project's
settings give Redis 2 s).
"""
from __future__ import annotations

import logging

from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)


def not_counted(limit: str, exc: BaseException, *, served: str = "the request is served") -> None:
    """Log that `limit` was not counted because the cache failed (no content: the error's class only)."""
    logger.warning("%s not counted: cache error %s (%s)", limit, type(exc).__name__, served)


class CacheUnavailable(Exception):
    """A cache call failed; raised from the cache's own error."""


class _GuardedCache:
    """The cache, with every failing call raised as CacheUnavailable (so only cache errors fail open)."""

    def __init__(self, cache) -> None:
        self._cache = cache

    def __getattr__(self, name):
        attribute = getattr(self._cache, name)
        if not callable(attribute):
            return attribute

        def call(*args, **kwargs):
            try:
                return attribute(*args, **kwargs)
            except Exception as exc:
                raise CacheUnavailable(type(exc).__name__) from exc

        return call


def client_address(request) -> str:
    """The client's address, trusting exactly REST_FRAMEWORK["NUM_PROXIES"] reverse proxies: the one rule.

    X-Forwarded-For is a list each proxy appends to; anything left of what
    our own proxies added was written by the client and proves nothing. With
    no proxy (0, or unset: the server faces the clients) it is the socket's
    peer, REMOTE_ADDR, and the header is ignored; with N it is the N-th
    entry from the right, empty entries ("a, ,b") not counted. Every
    throttle of the app keys anonymous callers on it (`FailOpenThrottle.get_ident`),
    and a project's sign-in protection should too (this project's
    `config/client_ip.py` does), so that both name the same client.
    """
    from rest_framework.settings import api_settings

    meta = getattr(request, "META", {})
    remote = meta.get("REMOTE_ADDR", "") or ""
    proxies = api_settings.NUM_PROXIES or 0
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    if not proxies or not forwarded:
        return remote
    addresses = [address.strip() for address in forwarded.split(",") if address.strip()]
    if not addresses:
        return remote
    return addresses[-min(proxies, len(addresses))]


class FailOpenThrottle(SimpleRateThrottle):
    """A DRF rate throttle that serves the request, uncounted, when its cache fails.

    Subclasses keep DRF's rate table and key functions. `count()` is where a
    throttle counts (DRF's own count in `self.cache` unless overridden);
    while it runs, `self.cache` is guarded, so an error of the cache, and
    nothing else, lets the request through with a `not_counted` warning.
    """

    def allow_request(self, request, view) -> bool:
        cache = self.cache
        self.cache = _GuardedCache(cache)  # type: ignore[assignment]  # stands in for the cache's get/set/add
        try:
            return self.count(request, view)
        except CacheUnavailable as exc:
            not_counted(f"{self.limit_name()} throttle", exc.__cause__ or exc)
            return True
        finally:
            self.cache = cache

    def count(self, request, view) -> bool:
        """Count this request; return whether it is within the rate."""
        return super().allow_request(request, view)

    def limit_name(self) -> str:
        return getattr(self, "scope", None) or type(self).__name__

    def get_ident(self, request) -> str:
        """The client address of `client_address` (DRF's own differs on empty X-Forwarded-For entries)."""
        return client_address(request)
