"""Request bodies the REST API accepts, and how it refuses the rest.

Every DRF route parses JSON with one parser, `agentmemory.parsers.BoundedJSONParser`
(the memory routes name it; REST_FRAMEWORK's DEFAULT_PARSER_CLASSES names it
for the rest): at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes and MAX_JSON_DEPTH
levels of arrays and objects. Python's decoder raises RecursionError a
thousand levels down, which DRF turned into an HTML 500; there it is a 400
with a code. `api_exception_handler` gives parse errors a `code` on every
route, and turns a RecursionError from a view with another parser into the
same 400. `BodyLimit` (config/asgi.py) refuses a larger body at the ASGI
edge, before Django reads it.
"""
from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework import status
from rest_framework.exceptions import ErrorDetail, ParseError

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


def api_exception_handler(exc, context):
    """DRF's handler, plus: parse errors carry a `code`; a RecursionError is a 400, never a 500."""
    # Imported here: rest_framework.views reads DEFAULT_PARSER_CLASSES, which names this module.
    from rest_framework.response import Response
    from rest_framework.views import exception_handler

    if isinstance(exc, RecursionError):
        return Response({"code": JSONTooDeep.default_code, "detail": TOO_DEEP}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, RequestDataTooBig):  # DRF reads request.body, which checks the size first
        return Response({"code": BodyTooLarge.default_code, "detail": too_large_message()},
                        status=status.HTTP_400_BAD_REQUEST)
    response = exception_handler(exc, context)
    if response is not None and isinstance(exc, ParseError) and isinstance(response.data, dict):
        detail = response.data.get("detail")
        if set(response.data) == {"detail"} and isinstance(detail, ErrorDetail):
            response.data = {"code": "invalid_json" if detail.code == "parse_error" else detail.code,
                             "detail": str(detail)}
    return response


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


async def _refuse(send) -> None:
    body = json.dumps({"code": BodyTooLarge.default_code, "detail": too_large_message()}).encode()
    await send({"type": "http.response.start", "status": 400, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
