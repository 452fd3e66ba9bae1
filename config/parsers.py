"""Request bodies the REST API accepts, and how it refuses the rest.

Every DRF route parses JSON with one parser, `agentmemory.parsers.BoundedJSONParser`
(the memory routes name it; REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names it
for the rest): at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes and MAX_JSON_DEPTH
levels of arrays and objects. Python's decoder raises RecursionError a
thousand levels down, which DRF turned into an HTML 500; there it is a 400
with a code. `api_exception_handler` gives parse errors a `code` on every
route, and turns a RecursionError from a view with another parser into the
same 400. A larger body is refused before it is read, twice over:

- `BoundedWebRequest`, daphne's own request (config/asgi.py installs it):
  daphne reads a whole body, into a temporary file past 100 KB, before it
  calls the application, so only the server can refuse it unread. A
  declared Content-Length over the limit is answered as soon as the headers
  end; a chunked body as soon as its bytes pass the limit.
- `BodyLimit`, the ASGI edge, for any other server (uvicorn, the tests'
  ASGI calls) that hands the application a body as it arrives.

Both answer the parser's 400 `body_too_large` and close the connection.
"""
from __future__ import annotations

import json
import logging
from io import BytesIO

from daphne.http_protocol import WebRequest
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from django.utils.translation import gettext, gettext_noop
from rest_framework import status
from rest_framework.exceptions import ErrorDetail, ParseError, ValidationError

# The parser itself is the memory app's, so the memory routes and every other
# route parse alike (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names it).
from agentmemory.parsers import (  # noqa: F401  (re-exported)
    MAX_JSON_DEPTH,
    TOO_DEEP,
    BodyTooLarge,
    BoundedJSONParser,
    JSONTooDeep,
    too_deep,
    too_large_message,
)

logger = logging.getLogger(__name__)


# The sentences follow the request's language (translated where they are sent); the code does not.
DATABASE_DOWN_AT_SIGN_IN = gettext_noop("The database did not answer while your credentials were checked, so "
                                        "nothing was done. Try again in a minute.")
DATABASE_DOWN = gettext_noop("The database did not answer, so this request could not be completed. Try again in a "
                             "minute; your memory page shows what is stored.")
NOT_FOUND = gettext_noop("Nothing of yours is at this address.")
NOT_JSON = gettext_noop("The request body is not valid JSON; send a JSON object.")
SERVER_ERROR = gettext_noop("Something went wrong on our side, so this request could not be completed; nothing was "
                            "changed. Try again later, and tell us if it keeps happening.")


def database_unavailable(exc: BaseException) -> bool:
    """Whether a database error means the database cannot serve us now (not a bug of ours).

    Connection errors (`OperationalError`, `InterfaceError`), and SQLSTATE class 25
    (invalid transaction state) from the driver: a server still read-only while it is
    promoted, or a pooled transaction whose server connection died under it, raised as
    `InternalError` during the leader-kill drill.
    """
    from django.db import InterfaceError, InternalError, OperationalError

    if isinstance(exc, (OperationalError, InterfaceError)):
        return True
    return isinstance(exc, InternalError) and str(getattr(exc.__cause__, "sqlstate", "") or "").startswith("25")


def api_exception_handler(exc, context):
    """DRF's handler, plus: parse errors carry a `code`; a RecursionError is a 400, never a 500;
    a database that does not answer is a JSON 503 `database_unavailable`, never an HTML 500;
    and any other unhandled error is a JSON 500 `server_error` (`unexpected_error`)."""
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES, which names this module.
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    if database_unavailable(exc):
        # A failover, a pooler restart, a database down. Most often it is the token or session
        # lookup of DRF's authentication (`request.user`), which runs before the view: the
        # request's user was never set, and nothing ran.
        request = context.get("request")
        signing_in = request is not None and not hasattr(request, "_user")
        logger.warning("API database error: %s %s (%s)", type(exc).__name__,
                       getattr(exc.__cause__, "sqlstate", None) or "-", "authentication" if signing_in else "view")
        response = Response({"code": "database_unavailable",
                             "detail": gettext(DATABASE_DOWN_AT_SIGN_IN if signing_in else DATABASE_DOWN)},
                            status=status.HTTP_503_SERVICE_UNAVAILABLE)
        response["Retry-After"] = "5"
        return response
    if isinstance(exc, RecursionError):
        return Response({"code": JSONTooDeep.default_code, "detail": gettext(TOO_DEEP)},
                        status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):  # DRF reads request.body, which checks the size first
        return Response({"code": BodyTooLarge.default_code, "detail": too_large_message()},
                        status=status.HTTP_400_BAD_REQUEST)
    response = exception_handler(exc, context)
    if response is None:
        return unexpected_error(exc, context)
    if isinstance(response.data, dict) and "detail" in response.data and "code" not in response.data:
        # Every error a person may read carries a code, and its sentence in the request's language: DRF's own
        # sentences are translated by DRF; Django's Http404 ("No Conversation matches the given query.") and
        # the JSON decoder's message are not, and are replaced.
        detail = response.data["detail"]
        code = detail.code if isinstance(detail, ErrorDetail) else "error"
        if isinstance(exc, Http404):
            code, detail = "not_found", gettext(NOT_FOUND)
        elif isinstance(exc, ParseError) and code == "parse_error":
            code, detail = "invalid_json", gettext(NOT_JSON)
        elif code == JSONTooDeep.default_code:
            detail = gettext(TOO_DEEP)  # the app's sentence, in its catalogue
        response.data = {**response.data, "code": code, "detail": str(detail)}
    elif isinstance(exc, ValidationError) and isinstance(response.data, dict) and not {"code", "detail"} & set(
            response.data):
        # A serializer's field errors, as DRF gives them (translated by DRF), and a code and the first of them.
        field, messages = next(iter(response.data.items()), ("", []))
        first = messages[0] if isinstance(messages, list) and messages else messages
        response.data = {**response.data, "code": "invalid_body", "detail": f"{field}: {first}"}
    return response


def unexpected_error(exc, context):
    """A bug of ours, not the client's: a JSON 500 with `code` and `detail`, never Django's HTML page.

    The request's transaction (if any) is rolled back, so nothing half-written
    stays. The log names the view and carries the traceback through the
    redaction filter (agentmemory.telemetry): frames and the exception's type,
    never its message, which may quote what the request held.
    """
    from rest_framework.response import Response
    from rest_framework.views import set_rollback

    set_rollback()
    view = context.get("view")
    logger.error("API unhandled error in %s", type(view).__name__ if view is not None else "an API view",
                 exc_info=exc)
    return Response({"code": "server_error", "detail": gettext(SERVER_ERROR)},
                    status=status.HTTP_500_INTERNAL_SERVER_ERROR)


class BodyLimit:
    """ASGI: refuse an HTTP body over DATA_UPLOAD_MAX_MEMORY_SIZE before Django reads it all.

    A declared Content-Length over the limit is refused at once; a streamed
    (chunked) body is counted as it arrives and refused when it passes the
    limit. Either way: 400 JSON `body_too_large`, and the connection closes.
    """

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if scope["type"] != "http" or limit is None:
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await _refuse(send)
        received = 0
        started = False

        async def counted_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _Oversized()
            return message

        async def tracked_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _Oversized:
            if not started:
                await _refuse(send)


class _Oversized(Exception):
    pass


def _refusal() -> bytes:
    return json.dumps({"code": BodyTooLarge.default_code, "detail": too_large_message()}).encode()


async def _refuse(send) -> None:
    body = _refusal()
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


# After refusing, the rest of a body is read and dropped for at most this
# long, so a client still sending gets the answer rather than a reset.
LINGER_SECONDS = 2.0


class BoundedWebRequest(WebRequest):
    """daphne's HTTP request, refusing a body over DATA_UPLOAD_MAX_MEMORY_SIZE while it arrives.

    Twisted calls `gotLength` when the headers end and `handleContentChunk`
    for each piece of body, all before daphne starts the application. A
    declared length over the limit is refused in `gotLength`, before any of
    the body is read and before a 100-continue is sent; a chunked body in
    `handleContentChunk`, once its bytes pass the limit (what was kept is
    dropped). The refusal is written at once; the rest of the body is
    discarded until it ends or LINGER_SECONDS pass, then the connection
    closes, and the application never runs.
    """

    _body_refused = False
    _body_received = 0
    _linger = None

    def gotLength(self, length):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and length is not None and length > limit:
            self.content = BytesIO()
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after the refusal
            self._refuse_body()
            return
        super().gotLength(length)

    def handleContentChunk(self, data):
        if self._body_refused:
            return
        self._body_received += len(data)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is not None and self._body_received > limit:
            self.content.close()  # a chunked body's temporary file goes with it
            self.content = BytesIO()
            self._refuse_body()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):
        if self._body_refused:  # the refused body ended: nothing to run, close now
            self._close_refused()
            return
        super().requestReceived(command, path, version)

    def connectionLost(self, reason):
        if self._linger is not None and self._linger.active():
            self._linger.cancel()
        super().connectionLost(reason)

    def _refuse_body(self) -> None:
        from twisted.internet import reactor

        self._body_refused = True
        body = _refusal()
        self.channel.transport.write(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        self._linger = reactor.callLater(LINGER_SECONDS, self._close_refused)

    def _close_refused(self) -> None:
        if self.channel is not None:
            self.channel.loseConnection()


def limit_daphne_bodies() -> None:
    """Make daphne build `BoundedWebRequest`s (its HTTP factory names WebRequest when a connection opens)."""
    import daphne.http_protocol

    daphne.http_protocol.WebRequest = BoundedWebRequest
