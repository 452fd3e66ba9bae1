"""Liveness and readiness endpoints for the process supervisor.

`/healthz` answers as long as the process serves requests and touches
nothing else, so a slow database never gets a live process restarted.
`/readyz` checks what a chat turn needs — a database query and a round trip
through the channel layer — and answers 503 with the name of each failing
check, so a load balancer stops routing to the instance. Neither reads
memory; failures are reported by exception type only.
"""
from __future__ import annotations

import asyncio
import time
import uuid

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

CHECK_TIMEOUT_SECONDS = 2.0


@never_cache
@require_GET
def healthz(request):
    """Return 200 while the process can answer; no database, no channel layer."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
async def readyz(request):
    """Return 200 when the database and channel layer answer, else 503 naming the failures."""
    checks = {
        "database": await _run(_check_database),
        "channel_layer": await _run(_check_channel_layer),
    }
    failing = sorted(name for name, result in checks.items() if result["status"] != "ok")
    body = {"status": "unavailable" if failing else "ready", "checks": checks}
    if failing:
        body["failing"] = failing
        body["detail"] = (
            f"Not ready: {', '.join(failing)} failed. Check the service's connection settings "
            "(DATABASE_URL, REDIS_URL) and that the service is up; this endpoint recovers by itself."
        )
    return JsonResponse(body, status=503 if failing else 200)


async def _run(check) -> dict:
    started = time.monotonic()
    try:
        await asyncio.wait_for(check(), timeout=CHECK_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        return {"status": "failed", "error": "timeout", "ms": _ms(started)}
    except Exception as exc:  # report the type only: messages can quote data
        return {"status": "failed", "error": type(exc).__name__, "ms": _ms(started)}
    return {"status": "ok", "ms": _ms(started)}


async def _check_database() -> None:
    await sync_to_async(_query_database, thread_sensitive=True)()


def _query_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        if cursor.fetchone() != (1,):
            raise RuntimeError("unexpected answer")


async def _check_channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise LookupError("no channel layer")
    # The default prefix: channels_redis has one receive loop per process, and
    # while an open socket's consumer holds it, it reads only the process's
    # `specific.` channels. A channel of another prefix ("readyz.", as before)
    # was never read while any socket was open, so every worker with chat
    # sockets failed this check (a 2 s timeout) and left the balancer.
    channel = await layer.new_channel()
    token = uuid.uuid4().hex
    await layer.send(channel, {"type": "readyz.ping", "token": token})
    message = await layer.receive(channel)
    if message.get("token") != token:
        raise RuntimeError("channel layer returned another message")


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
