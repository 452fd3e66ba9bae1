"""Pages and sockets when the database does not answer: a 503 with a plain sentence, never a bare 500.

The API answers a database outage as JSON (`config.parsers.api_exception_handler`).
A page (the memory page, the account page, a sign-in, an admin page) has no such
handler: the error reaches Django's `handler500` from wherever it was raised, the
view or a middleware (the session's save, the user's lookup). This handler tells
the two apart: a database that cannot serve us now (`database_unavailable`) is a
503 page saying so, with Retry-After, so a person knows to try again and a
balancer knows the instance is not broken; every other error is Django's own 500.

The page reads nothing from the database: no user, no session, no memory. It is
rendered without the request, so no context processor runs (the signed-in user
is a lazy database read).

A chat socket's handshake reads the session and the user too (config/socket_auth.py),
before anything is accepted; daphne answers an error there with a 500.
`OutageAwareSocket` makes that a 503 with Retry-After when the database cannot
serve us, as a page's; `answer_socket_outages` installs it (config/asgi.py).
"""
from __future__ import annotations

import logging
import sys

from autobahn.twisted.websocket import ConnectionDeny
from daphne.ws_protocol import WebSocketProtocol
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views.defaults import server_error as django_server_error

from config.parsers import database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


def server_error(request: HttpRequest, template_name: str = "500.html") -> HttpResponse:
    """`handler500`: a 503 page for a database outage, Django's 500 for anything else."""
    exc = sys.exc_info()[1]
    if exc is None or not database_unavailable(exc):
        return django_server_error(request, template_name=template_name)
    logger.warning("Page database error: %s %s", type(exc).__name__,
                   getattr(exc.__cause__, "sqlstate", None) or "-")
    response = HttpResponse(render_to_string("database_unavailable.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class OutageAwareSocket(WebSocketProtocol):
    """daphne's WebSocket protocol: a handshake the database could not serve is a 503, not a 500."""

    def handle_exception(self, exception):
        if hasattr(self, "handshake_deferred") and database_unavailable(exception):
            logger.warning("Socket handshake database error: %s %s", type(exception).__name__,
                           getattr(exception.__cause__, "sqlstate", None) or "-")
            self.handshake_deferred.errback(ConnectionDeny(code=503, reason="Service Unavailable"))
            return
        super().handle_exception(exception)

    def failHandshake(self, reason, code=400, responseHeaders=None):
        if code == 503:
            responseHeaders = [*(responseHeaders or []), ("Retry-After", str(RETRY_AFTER_SECONDS)),
                               ("Cache-Control", "no-store")]
        super().failHandshake(reason, code, responseHeaders)


def answer_socket_outages() -> None:
    """Make daphne build `OutageAwareSocket`s for the chat sockets (its factory names the protocol)."""
    import daphne.ws_protocol

    daphne.ws_protocol.WebSocketFactory.protocol = OutageAwareSocket
