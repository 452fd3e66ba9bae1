"""Helpers for the memory page, API, admin and isolation tests.

Memory is seeded through `store.commit_operations` (as the system actor), the
one writer of memory rows, so the tests see exactly what the store stores.
"""
from __future__ import annotations

import re
from html import unescape

import pytest
from django.core.cache import cache

from agentmemory import store
from agentmemory.models import Actor, MemoryDocument, MemoryEvent
from agentmemory.rules import MAX_OPERATIONS, Operation

SCRIPT_PAYLOAD = "<script>alert(1)</script>"
SCRIPT_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ATTRIBUTE_PAYLOAD = '"><img src=x onerror=alert(1)>'
ATTRIBUTE_ESCAPED = "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
ATTRIBUTE_RAW = "<img src=x onerror=alert(1)>"


@pytest.fixture(autouse=True)
def fresh_throttle():
    """Start every test with an unspent `memory_writes` budget."""
    cache.clear()
    yield
    cache.clear()


def seed(user, *, user_entries=(), memory_entries=()) -> None:
    operations = [Operation(target="user", action="add", content=entry) for entry in user_entries]
    operations += [Operation(target="memory", action="add", content=entry) for entry in memory_entries]
    for start in range(0, len(operations), MAX_OPERATIONS):
        store.commit_operations(
            user_id=user.pk, operations=operations[start:start + MAX_OPERATIONS], actor=Actor.SYSTEM
        )


def entries_of(user) -> dict[str, tuple[str, ...]]:
    snapshot = store.load_snapshot(user_id=user.pk)
    return {"user": snapshot.user, "memory": snapshot.memory}


def csrf_token_for(client) -> str:
    """Return the CSRF token the memory page hands this client."""
    response = client.get("/memory/")
    assert response.status_code == 200
    return client.cookies["csrftoken"].value


def event_values(user) -> list[str]:
    """Every stored value of a person's audit events, as text, for sentinel searches."""
    return [str(value) for row in MemoryEvent.objects.filter(user=user).values() for value in row.values()]


def document_count(user) -> int:
    return MemoryDocument.objects.filter(user=user).count()


def crawl(client, start="/admin/", limit=400):
    """Fetch every admin page reachable by links from `start`; return {url: response}."""
    seen, queue, responses = set(), [start], {}
    while queue and len(seen) < limit:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        response = client.get(url)
        responses[url] = response
        if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
            continue
        for href in re.findall(r'href="([^"#]+)"', response.content.decode()):
            href = unescape(href)
            if href.startswith("?"):
                href = url.split("?")[0] + href
            if href.startswith("/admin/") and "logout" not in href and href not in seen:
                queue.append(href)
    return responses
