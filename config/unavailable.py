"""Pages when the database does not answer: a 503 with a plain sentence, never Django's bare 500.

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
"""
from __future__ import annotations

import logging
import sys

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
