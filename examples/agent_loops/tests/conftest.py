import os
import inspect

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.db.backends.signals import connection_created


@pytest.fixture(autouse=True)
async def close_thread_connections(request):
    """After an async test, close what its sync_to_async calls opened, so the
    test database (PostgreSQL) can be dropped at the end of the run."""
    yield
    if inspect.iscoroutinefunction(request.function):
        await sync_to_async(connections.close_all, thread_sensitive=True)()


# The Agents SDK would export traces to OpenAI; the contract turns a collector on where it looks at traces.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def _fast_sqlite(sender, connection, **kwargs):
    """Tests only: SQLite without fsync (each transactional test's flush waited on the disk)."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous = OFF")


connection_created.connect(_fast_sqlite)
