"""Redis through Sentinel (config/redis_sentinel.py): the settings, and a real failover.

The settings are read in a fresh process (settings are read once per
process). The failover test starts a real Redis master, its replica and one
Sentinel (`redis-server --sentinel`, the same binary as `redis-sentinel`) on
free ports under a temporary directory, SIGKILLs the master, and checks that
Django's cache and the channels_redis layer, configured as the settings
configure them, reach the promoted replica without being rebuilt. It skips
where redis-server is not installed. Every process it starts is stopped by
its own pid.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config import redis_sentinel

PRINT = ("import django, json; django.setup(); from django.conf import settings; "
         "print(json.dumps({'layers': settings.CHANNEL_LAYERS, 'caches': settings.CACHES}))")


def settings_with(**env) -> dict:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "SECRET_KEY": "x", **env}
    done = subprocess.run([sys.executable, "-c", PRINT], env=environment, cwd=settings.BASE_DIR,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_sentinels_configure_the_channel_layer_and_the_cache():
    built = settings_with(REDIS_SENTINELS="127.0.0.1:26391, 10.0.0.2:26392,[::1]:26393",
                          REDIS_SENTINEL_MASTER="agentmemory", REDIS_URL="redis://:s3cret@ignored.example:6379/4")
    layer = built["layers"]["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    (host,) = layer["CONFIG"]["hosts"]
    # channels_redis builds a sentinel pool from exactly these keys (channels_redis.utils.create_pool).
    assert "address" not in host
    assert host["master_name"] == "agentmemory"
    assert host["sentinels"] == [["127.0.0.1", 26391], ["10.0.0.2", 26392], ["::1", 26393]]
    assert host["db"] == 4 and host["password"] == "s3cret"
    assert host["socket_timeout"] == 10  # above the layer's 5-second wait, as without Sentinel

    cache = built["caches"]["default"]
    assert cache["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert cache["OPTIONS"]["pool_class"] == "config.redis_sentinel.SentinelMasterPool"
    assert cache["OPTIONS"]["master_name"] == "agentmemory"
    assert cache["OPTIONS"]["sentinels"] == host["sentinels"]
    assert cache["OPTIONS"]["socket_timeout"] == 2 and cache["OPTIONS"]["socket_connect_timeout"] == 2
    assert cache["KEY_PREFIX"] == "chat"


def test_the_sentinels_password_goes_with_every_question_to_a_sentinel():
    built = settings_with(REDIS_SENTINELS="127.0.0.1:26391", REDIS_SENTINEL_PASSWORD="sentinel-pw",
                          REDIS_URL="redis://:redis-pw@ignored.example/1")
    (host,) = built["layers"]["default"]["CONFIG"]["hosts"]
    assert host["sentinel_kwargs"]["password"] == "sentinel-pw"
    assert host["password"] == "redis-pw"  # the master's own password stays REDIS_URL's
    assert built["caches"]["default"]["OPTIONS"]["sentinel_password"] == "sentinel-pw"
    pool = redis_sentinel.SentinelMasterPool.from_url(
        "redis://:redis-pw@x/1", sentinels=[["127.0.0.1", 1]], master_name="m", sentinel_password="sentinel-pw")
    assert [s.connection_pool.connection_kwargs["password"] for s in pool.sentinel_manager.sentinels] \
        == ["sentinel-pw"]
    assert pool.connection_kwargs["password"] == "redis-pw"
    # None asked for, none sent.
    (host,) = settings_with(REDIS_SENTINELS="127.0.0.1:26391")["layers"]["default"]["CONFIG"]["hosts"]
    assert "password" not in host["sentinel_kwargs"]


def test_without_sentinels_redis_url_is_used_directly():
    built = settings_with(REDIS_SENTINELS="", REDIS_URL="redis://127.0.0.1:6379/2")
    assert built["layers"]["default"]["CONFIG"]["hosts"] == [{"address": "redis://127.0.0.1:6379/2",
                                                              "socket_timeout": 10}]
    assert "pool_class" not in built["caches"]["default"]["OPTIONS"]
    assert built["caches"]["default"]["LOCATION"] == "redis://127.0.0.1:6379/2"


def test_the_master_name_defaults_and_redis_url_is_optional():
    built = settings_with(REDIS_SENTINELS="127.0.0.1:26379", REDIS_URL="")
    (host,) = built["layers"]["default"]["CONFIG"]["hosts"]
    assert host["master_name"] == "mymaster" and host["db"] == 0 and "password" not in host
    assert built["caches"]["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"


@pytest.mark.parametrize("value", ["127.0.0.1", "127.0.0.1:port", ":26379", "a:1,b", "h:0", "h:70000"])
def test_a_malformed_sentinel_list_is_refused(value):
    with pytest.raises(ImproperlyConfigured):
        redis_sentinel.parse_sentinels(value)


def test_the_pool_takes_only_the_database_and_credentials_of_the_url():
    pool = redis_sentinel.SentinelMasterPool.from_url(
        "redis://user:pw@elsewhere.example:6000/3", sentinels=[["127.0.0.1", 1]], master_name="m",
        socket_timeout=2)
    kwargs = pool.connection_kwargs
    assert (kwargs["db"], kwargs["username"], kwargs["password"], kwargs["socket_timeout"]) == (3, "user", "pw", 2)
    assert "host" not in kwargs or kwargs["host"] != "elsewhere.example"
    assert pool.service_name == "m"


# --- a real failover ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redis_cli(port: int, *args: str, password: str = "") -> str:
    # The password through the environment (REDISCLI_AUTH), never the command line.
    env = {**os.environ, "REDISCLI_AUTH": password} if password else None
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          timeout=5, env=env).stdout.strip()


def wait_until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {seconds} s waiting for {what}")


@pytest.fixture
def sentinel_shape(tmp_path, request):
    """A master, its replica and one sentinel; with `passwords` (indirect), each asks for its own."""
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        pytest.skip("redis-server is not installed")
    passwords = getattr(request, "param", None) or {"redis": "", "sentinel": ""}
    redis_pw, sentinel_pw = passwords["redis"], passwords["sentinel"]
    master, replica, sentinel = free_port(), free_port(), free_port()
    processes: dict[str, subprocess.Popen] = {}

    def start(name: str, conf_text: str, *args: str) -> None:
        # Passwords go in a configuration file of mode 600, not on the command line.
        conf_file = tmp_path / f"{name}.conf"
        conf_file.write_text(conf_text)
        conf_file.chmod(0o600)
        log = open(tmp_path / f"{name}.log", "wb")
        processes[name] = subprocess.Popen(["redis-server", str(conf_file), *args], stdout=log,
                                           stderr=subprocess.STDOUT, cwd=tmp_path)

    common = f"bind 127.0.0.1\nsave \"\"\nappendonly no\ndir {tmp_path}\n"
    if redis_pw:
        common += f"requirepass {redis_pw}\nmasterauth {redis_pw}\n"
    start("master", f"port {master}\n{common}")
    wait_until(lambda: redis_cli(master, "ping", password=redis_pw) == "PONG", 10, "the master")
    start("replica", f"port {replica}\n{common}replicaof 127.0.0.1 {master}\n")
    wait_until(lambda: "connected_slaves:1" in redis_cli(master, "info", "replication", password=redis_pw), 10,
               "the replica")
    start("sentinel",
          f"bind 127.0.0.1\nport {sentinel}\ndir {tmp_path}\n"
          f"sentinel monitor test-master 127.0.0.1 {master} 1\n"
          "sentinel down-after-milliseconds test-master 1000\n"
          "sentinel failover-timeout test-master 3000\n"
          + (f"sentinel auth-pass test-master {redis_pw}\n" if redis_pw else "")
          + (f"requirepass {sentinel_pw}\n" if sentinel_pw else ""), "--sentinel")
    wait_until(lambda: redis_cli(sentinel, "sentinel", "get-master-addr-by-name", "test-master",
                                 password=sentinel_pw).split() == ["127.0.0.1", str(master)], 10, "the sentinel")
    try:
        yield {"master": master, "replica": replica, "sentinels": [["127.0.0.1", sentinel]],
               "processes": processes, "redis_pw": redis_pw, "sentinel_pw": sentinel_pw}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def test_the_cache_and_the_channel_layer_follow_a_sentinel_promotion(sentinel_shape):
    from channels_redis.core import RedisChannelLayer
    from django.core.cache.backends.redis import RedisCache

    shape = sentinel_shape
    cache = RedisCache("redis://127.0.0.1:1/5", {
        "KEY_PREFIX": "sentineltest",
        "OPTIONS": redis_sentinel.cache_options(shape["sentinels"], "test-master",
                                                socket_connect_timeout=1, socket_timeout=1)})
    layer = RedisChannelLayer(hosts=[redis_sentinel.channel_layer_host(
        shape["sentinels"], "test-master", "redis://127.0.0.1:1/6", socket_timeout=3)])

    async def round_trip(token: str) -> str:
        channel = await layer.new_channel("sentineltest.")
        await layer.send(channel, {"type": "test.ping", "token": token})
        message = await asyncio.wait_for(layer.receive(channel), 5)
        await layer.flush()
        return message["token"]

    cache.set("count", 1)
    assert cache.incr("count") == 2
    # It went to the master, in database 5 of the URL (whose host and port are not used).
    assert redis_cli(shape["master"], "-n", "5", "get", "sentineltest:1:count") == "2"
    assert asyncio.run(round_trip("before")) == "before"

    wait_until(lambda: redis_cli(shape["replica"], "-n", "5", "get", "sentineltest:1:count") == "2", 10,
               "the replica to have the count")
    shape["processes"]["master"].send_signal(signal.SIGKILL)
    shape["processes"]["master"].wait(5)
    wait_until(lambda: redis_cli(shape["replica"], "role").startswith("master"), 30, "the promotion")

    # Same cache object and layer: the next connections ask the sentinel and reach the new master.
    def cache_answers():
        try:
            cache.set("after", 7)
            return cache.get("after") == 7
        except Exception:
            return False

    wait_until(cache_answers, 15, "the cache on the new master")
    assert redis_cli(shape["replica"], "-n", "5", "get", "sentineltest:1:after") == "7"
    assert cache.get("count") == 2  # replicated before the kill

    def layer_answers():
        try:
            return asyncio.run(round_trip("after")) == "after"
        except Exception:
            return False

    wait_until(layer_answers, 15, "the channel layer on the new master")


@pytest.mark.parametrize("sentinel_shape", [{"redis": "redis-pw-1", "sentinel": "sentinel-pw-2"}], indirect=True)
def test_a_sentinel_and_a_master_that_ask_for_passwords_are_reached_with_them(sentinel_shape):
    """The cluster's shape (scripts/cluster.sh): Redis's requirepass in REDIS_URL, the sentinels' their own."""
    from channels_redis.core import RedisChannelLayer
    from django.core.cache.backends.redis import RedisCache
    from redis.exceptions import AuthenticationError, ConnectionError, ResponseError

    shape = sentinel_shape
    # Neither answers without its password.
    assert "NOAUTH" in redis_cli(shape["master"], "ping")
    assert "NOAUTH" in redis_cli(shape["sentinels"][0][1], "sentinel", "get-master-addr-by-name", "test-master")

    def cache(url, sentinel_password):
        return RedisCache(url, {"KEY_PREFIX": "sentinelpw", "OPTIONS": redis_sentinel.cache_options(
            shape["sentinels"], "test-master", sentinel_password=sentinel_password,
            socket_connect_timeout=1, socket_timeout=1)})

    with_both = cache(f"redis://:{shape['redis_pw']}@127.0.0.1:1/5", shape["sentinel_pw"])
    with_both.set("k", 3)
    assert with_both.get("k") == 3
    assert redis_cli(shape["master"], "-n", "5", "get", "sentinelpw:1:k", password=shape["redis_pw"]) == "3"
    layer = RedisChannelLayer(hosts=[redis_sentinel.channel_layer_host(
        shape["sentinels"], "test-master", f"redis://:{shape['redis_pw']}@127.0.0.1:1/6",
        sentinel_password=shape["sentinel_pw"], socket_timeout=3)])

    async def round_trip() -> str:
        channel = await layer.new_channel("sentinelpw.")
        await layer.send(channel, {"type": "test.ping", "token": "pw"})
        message = await asyncio.wait_for(layer.receive(channel), 5)
        await layer.flush()
        return message["token"]

    assert asyncio.run(round_trip()) == "pw"
    # Without the sentinels' password no master is found; without Redis's, the master refuses.
    with pytest.raises((ConnectionError, ResponseError, AuthenticationError)):
        cache(f"redis://:{shape['redis_pw']}@127.0.0.1:1/5", "").get("k")
    with pytest.raises((ConnectionError, ResponseError, AuthenticationError)):
        cache("redis://127.0.0.1:1/5", shape["sentinel_pw"]).get("k")
