"""/healthz answers without touching anything; /readyz checks the database and
a channel-layer round trip and names each failing check in a 503."""
import os

import pytest
import redis
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connections, transaction

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/11")
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


def redis_layer(url: str) -> dict:
    return {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [url]}}}


def test_healthz_answers_without_a_database(client):
    # No django_db mark: any query here would raise.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
def test_readyz_is_ready_when_database_and_channel_layer_answer(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok", "channel_layer": "ok"}


@pytest.mark.django_db
def test_readyz_names_an_unreachable_channel_layer_with_503(client, settings):
    settings.CHANNEL_LAYERS = redis_layer(UNREACHABLE_REDIS)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["failing"] == ["channel_layer"]
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["channel_layer"]["status"] == "failed"
    assert "REDIS_URL" in body["detail"]
    assert "127.0.0.1:1" not in response.content.decode()  # types only, no driver messages


@pytest.mark.django_db
def test_readyz_names_a_failing_database_with_503(client):
    user_model = get_user_model()
    with transaction.atomic():
        # A real failure: the transaction is broken, so the next query fails.
        try:
            with transaction.atomic(savepoint=False):
                user_model.objects.create(username="dup")
                user_model.objects.create(username="dup")
        except IntegrityError:
            pass
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["database"]
    assert body["checks"]["database"]["error"] == "TransactionManagementError"
    assert "DATABASE_URL" in body["detail"]


def needs_redis() -> None:
    """Skip without a Redis at REDIS_URL (fail under REQUIRE_REDIS=1)."""
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.exceptions.RedisError:
        if os.environ.get("REQUIRE_REDIS") == "1":
            raise
        pytest.skip(f"no Redis at {REDIS_URL}")


@pytest.mark.django_db(transaction=True)
async def test_readyz_works_on_the_async_path_with_a_real_redis_layer(async_client, settings):
    needs_redis()
    settings.CHANNEL_LAYERS = redis_layer(REDIS_URL)
    try:
        response = await async_client.get("/readyz")
    finally:
        # The check ran in asgiref's shared worker thread; close its connection
        # so the test database can be dropped.
        await sync_to_async(connections.close_all, thread_sensitive=True)()
    assert response.status_code == 200, response.content
    assert response.json()["checks"]["channel_layer"]["status"] == "ok"


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_get_only(client, path):
    assert client.post(path).status_code == 405


async def test_readyz_channel_check_passes_while_a_socket_waits_on_the_same_layer(monkeypatch):
    """An open chat socket's consumer holds channels_redis's one receive loop of the process; the
    check's message must come through it (before: a `readyz.` channel, never read meanwhile, so
    every worker with an open socket failed /readyz; found by the drills of docs/reliability.md)."""
    import asyncio

    from channels_redis.core import RedisChannelLayer

    from config import health

    needs_redis()
    layer = RedisChannelLayer(hosts=[REDIS_URL])
    monkeypatch.setattr(health, "get_channel_layer", lambda: layer)
    socket = asyncio.ensure_future(layer.receive(await layer.new_channel()))  # a socket waiting for frames
    try:
        await asyncio.sleep(0.2)  # it holds the receive loop now
        await asyncio.wait_for(health._check_channel_layer(), health.CHECK_TIMEOUT_SECONDS)
    finally:
        socket.cancel()
        try:
            await socket
        except (asyncio.CancelledError, Exception):
            pass
        await layer.flush()
