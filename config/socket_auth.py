"""Who is on a chat socket: Django's own session check, with a request's connection rules.

channels' AuthMiddlewareStack fills `scope["user"]` through its own copy of
the session check, run by channels' DatabaseSyncToAsync, which closes
connections outside the call's context: with CONN_MAX_AGE=0 the connection
it opened stayed open until that thread's next socket. This stack keeps
channels' cookie and session layers and its lazy `scope["user"]`, and fills
it with `django.contrib.auth.get_user` (the check the consumer makes again
before every turn, `chat.consumers`) in a worker thread, through
`agentmemory.workers.in_worker`.
"""
from __future__ import annotations

from types import SimpleNamespace

from channels.auth import AuthMiddleware
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.contrib import auth

from agentmemory.workers import in_worker


class SessionAuthMiddleware(AuthMiddleware):
    async def resolve_scope(self, scope) -> None:
        scope["user"]._wrapped = await in_worker(auth.get_user, SimpleNamespace(session=scope["session"]))


def SessionAuthStack(inner):  # noqa: N802 - named like channels' AuthMiddlewareStack, which it replaces
    return CookieMiddleware(SessionMiddleware(SessionAuthMiddleware(inner)))
