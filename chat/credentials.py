"""Is the credential a turn came with still good? Read afresh from the database.

A socket and a REST turn are let in with a credential: a session (the
cookie) or a DRF token (`Authorization: Token <key>`). Signing out, "sign
out everywhere", a password change and deactivation end the person's
sessions and revoke their tokens (chat/signals.py); the person can also
revoke a token themselves (config/account.py). These checks read the
credential again, as Django's and DRF's authentication would on a new
request: the socket before each turn, and every turn just before it commits
a memory change (`chat.turns.run_turn`'s `signed_in`), so a credential that
ended while the answer was written commits nothing.

They run in a worker thread. A database that cannot be reached counts as
still signed in: the turn fails open and its commit, which needs the
database too, cannot write.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth
from django.db import InterfaceError, OperationalError
from rest_framework.authtoken.models import Token

UNREACHABLE = (OperationalError, InterfaceError)


def session_valid(session_key: str | None, user_id) -> bool:
    """The session still exists, names this person, matches their password, and they are active."""
    if not session_key:
        return False
    try:
        store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
        user = auth.get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]  # it reads only .session; None for inactive people, Anonymous when stale
    except UNREACHABLE:
        return True
    return bool(user.is_authenticated and user.pk == user_id)


def token_valid(key: str, user_id) -> bool:
    """The token still exists, is this person's, and they are active (DRF's TokenAuthentication's rule)."""
    try:
        return Token.objects.filter(key=key, user_id=user_id, user__is_active=True).exists()
    except UNREACHABLE:
        return True


def for_request(request) -> Callable[[], bool] | None:
    """Return the check of the credential a DRF request was let in with, or None when it has none to re-read."""
    user_id = request.user.pk
    if isinstance(request.auth, Token):
        return partial(token_valid, request.auth.key, user_id)
    session = getattr(request._request, "session", None)
    session_key = getattr(session, "session_key", None)
    if session is not None and session_key and session.get(auth.SESSION_KEY) is not None:
        return partial(session_valid, session_key, user_id)
    return None
