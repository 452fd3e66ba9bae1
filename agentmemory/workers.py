"""ORM work off the event loop: a pooled worker thread, with a request's connection rules.

Worker threads are pooled and outlive a turn, so each call is treated like a
request: `close_old_connections()` before and after, so CONN_MAX_AGE decides
whether the thread's connection stays (0: closed when the call returns).
Both run inside the call's own context. `asyncio.to_thread` and asgiref run
the function in a copy of the caller's context, and Django keeps connections
in that context; channels' `DatabaseSyncToAsync` closes outside the copy, so a
connection opened in the call stayed open until the thread's next call.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from django.db import close_old_connections

T = TypeVar("T")


def _with_connection_rules(function: Callable[..., T], /, *args, **kwargs) -> T:
    """Call `function` in this (worker) thread as a request would run it."""
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


async def in_worker(function: Callable[..., T], /, *args, **kwargs) -> T:
    """Run `function` in a worker thread with a request's connection rules; return its result."""
    return await asyncio.to_thread(_with_connection_rules, function, *args, **kwargs)
