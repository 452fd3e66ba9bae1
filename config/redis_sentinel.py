"""Redis through Sentinel: the channel layer and the cache find the master by asking the sentinels.

With `REDIS_SENTINELS=host:port,host:port,...` (and `REDIS_SENTINEL_MASTER`,
the name the sentinels monitor) nothing in the project connects to a fixed
Redis address. Every new connection asks the sentinels which Redis is the
master of that name (redis-py's `SentinelConnectionPool`), so after the
sentinels promote the replica, the next connection reaches the new master
without a restart or a new setting. `REDIS_URL`, when also set, gives only
the database number and the credentials; its host and port are not used.
`REDIS_SENTINEL_PASSWORD`, when set, is what the sentinels themselves ask
for (their `requirepass`): every question to a sentinel carries it.

- The channel layer: channels_redis builds a sentinel pool itself from a
  `hosts` entry with `sentinels` and `master_name` (`channel_layer_host`).
- The cache: Django's own `RedisCache` opens its pools with
  `pool_class.from_url(LOCATION, **OPTIONS)`; `SentinelMasterPool` is that
  pool class, a redis-py sentinel pool built from the options
  (`cache_options`). The backend and its errors stay Django's and redis-py's,
  so the throttles and turn budgets fail open exactly as with `REDIS_URL`.

While no sentinel names a master (between the master's death and the
promotion), a connection attempt fails with redis-py's `ConnectionError`
(`MasterNotFoundError`) or a refused connection: the same error as a Redis
that is down, handled the same way (limits not counted, live updates paused).
"""
from __future__ import annotations

from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
from redis.sentinel import Sentinel, SentinelConnectionPool

# Sentinels answer in milliseconds; one that does not is skipped for the next.
SENTINEL_SOCKET_TIMEOUT = 1.0


def parse_sentinels(value: str) -> list[tuple[str, int]]:
    """Return [(host, port)] from `host:port,host:port`; raise ImproperlyConfigured on a malformed entry."""
    sentinels = []
    for entry in (part.strip() for part in value.split(",")):
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        host = host.strip("[]")  # [::1]:26379
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(
                "REDIS_SENTINELS must be a comma-separated list of host:port (e.g. "
                "10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379); one entry is not."
            )
        sentinels.append((host, int(port)))
    return sentinels


def url_options(redis_url: str) -> dict:
    """The database number and credentials of REDIS_URL (its host and port are the sentinels' to decide)."""
    if not redis_url:
        return {"db": 0}
    parts = urlsplit(redis_url)
    options: dict = {"db": 0}
    path = parts.path.lstrip("/")
    if path:
        if not path.isdigit():
            raise ImproperlyConfigured("REDIS_URL's path must be a database number (redis://host:port/0).")
        options["db"] = int(path)
    if parts.username:
        options["username"] = unquote(parts.username)
    if parts.password:
        options["password"] = unquote(parts.password)
    return options


def sentinel_kwargs(password: str = "") -> dict:
    """How every connection to a sentinel is made: short timeouts, and the sentinels' password if any."""
    kwargs: dict[str, float | str] = {"socket_timeout": SENTINEL_SOCKET_TIMEOUT,
                                      "socket_connect_timeout": SENTINEL_SOCKET_TIMEOUT}
    if password:
        kwargs["password"] = password
    return kwargs


def channel_layer_host(sentinels, master, redis_url: str, *, sentinel_password: str = "", **options) -> dict:
    """One `hosts` entry of channels_redis's RedisChannelLayer that goes through the sentinels."""
    return {
        "sentinels": [list(address) for address in sentinels],
        "master_name": master,
        "sentinel_kwargs": sentinel_kwargs(sentinel_password),
        **url_options(redis_url),
        **options,
    }


def cache_options(sentinels, master, *, sentinel_password: str = "", **options) -> dict:
    """OPTIONS of Django's RedisCache that make it reach the master through the sentinels."""
    return {
        "pool_class": "config.redis_sentinel.SentinelMasterPool",
        "sentinels": [list(address) for address in sentinels],
        "master_name": master,
        **({"sentinel_password": sentinel_password} if sentinel_password else {}),
        **options,
    }


class SentinelMasterPool(SentinelConnectionPool):
    """A redis-py sentinel pool for the master, built the way Django's RedisCache builds its pools."""

    @classmethod
    def from_url(cls, url, *, sentinels, master_name, sentinel_password="", **kwargs):
        # LOCATION is REDIS_URL (or a placeholder): only its database and
        # credentials apply; connection options (timeouts) apply to the master.
        kwargs = {**url_options(url if url.startswith(("redis://", "rediss://")) else ""), **kwargs}
        manager = Sentinel([tuple(address) for address in sentinels],
                           sentinel_kwargs=sentinel_kwargs(sentinel_password))
        return cls(master_name, manager, **kwargs)
