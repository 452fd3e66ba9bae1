"""What every memory route shares: the view base class with its one error shape, the write
throttle, and the responses the schema names on every route."""
from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from .. import idempotency, words
from ..conf import memory_settings
from ..parsers import TOO_DEEP, BodyTooLarge, BoundedJSONParser, JSONTooDeep, too_large_message
from ..rules import MemoryValidationError
from ..serializers import MemoryErrorSerializer
from ..store import MemoryUnavailable, UnknownUser
from ..throttling import FailOpenThrottle

logger = logging.getLogger(__name__)


class MemoryWriteThrottle(FailOpenThrottle, UserRateThrottle):
    """The `memory_writes` budget, spent only by requests that change memory.

    Kept in the cache; when the cache cannot be reached the change is served
    uncounted, with a warning (`agentmemory.throttling`).
    """

    scope = "memory_writes"

    def count(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return super().count(request, view)


def error_response(code: str, detail: str, *, position: int | None = None, status_code: int = 400) -> Response:
    return Response({"code": code, "position": position, "detail": detail}, status=status_code)


# A batch of operations commits in seconds; a claim older than this belongs to an attempt that died.
OPERATIONS_LEASE_SECONDS = 60


def _rule_detail(exc: MemoryValidationError) -> str:
    """A broken rule's sentence: in English the tool's own reply (what the model reads, naming the operation);
    in another language the person's sentence for its code (the memory page's), as `position` names the operation."""
    if (get_language() or "en").split("-")[0] == "en":
        return exc.message
    return words.rule_message(exc.code, target=exc.target, limits=memory_settings().limits)


class MemoryAPIView(APIView):
    throttle_classes = [MemoryWriteThrottle]
    # JSON only, bounded in size and depth: the same parser, and the same
    # codes, as every other route of a project that makes it its default.
    parser_classes = [BoundedJSONParser]

    def handle_exception(self, exc):
        if isinstance(exc, MemoryValidationError):
            return error_response(exc.code, _rule_detail(exc), position=exc.position)
        if isinstance(exc, (idempotency.InvalidKey, idempotency.KeyReused)):
            code = 400 if isinstance(exc, idempotency.InvalidKey) else 422
            return error_response(exc.code, exc.message, status_code=code)
        if isinstance(exc, idempotency.InProgress):
            response = error_response(exc.code, exc.message, status_code=status.HTTP_409_CONFLICT)
            response["Retry-After"] = str(exc.retry_after)
            return response
        if isinstance(exc, (JSONTooDeep, RecursionError)):
            return error_response(JSONTooDeep.default_code, _(TOO_DEEP))
        if isinstance(exc, (BodyTooLarge, RequestDataTooBig)):
            return error_response(BodyTooLarge.default_code, too_large_message())
        if isinstance(exc, ParseError):
            return error_response("invalid_json", _('The body is not valid JSON. Send {"operations": [...]}.'))
        if isinstance(exc, UnknownUser):
            # Signed in when the request began, deleted before its write took the lock.
            return error_response("account_closed",
                                  _("This account no longer exists (it was deleted or is being deleted); "
                                    "nothing was changed."), status_code=status.HTTP_410_GONE)
        if isinstance(exc, MemoryUnavailable):
            return error_response("unavailable", _("Memory could not be read right now. Try again in a minute."),
                          status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
        if isinstance(exc, DatabaseError):
            logger.warning("memory API database error", extra={"error": type(exc).__name__})
            return error_response("database_unavailable",
                          _("The database did not answer; nothing was changed. Try again in a minute."),
                          status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
        response = super().handle_exception(exc)
        # One error shape for every failure of these routes (403, 415, 429, the project's 500...).
        if isinstance(response.data, dict) and set(response.data) == {"detail"}:
            detail = response.data["detail"]
            code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
            response.data = {"code": str(code), "position": None, "detail": str(detail)}
        elif isinstance(response.data, dict) and set(response.data) == {"code", "detail"}:
            response.data = {"code": response.data["code"], "position": None, "detail": response.data["detail"]}
        return response


# --- responses for the schema -----------------------------------------------

UNAVAILABLE_RESPONSE = OpenApiResponse(MemoryErrorSerializer, description="Memory could not be read or written now.")
NOT_SIGNED_IN_RESPONSE = OpenApiResponse(
    MemoryErrorSerializer,
    description="Not signed in: send Authorization: Token <key>, or the session cookie with the CSRF token.",
)
THROTTLED_RESPONSE = OpenApiResponse(
    MemoryErrorSerializer, description="Too many memory changes (MEMORY_WRITE_RATE); wait and retry.",
)
IDEMPOTENCY_KEY_PARAMETER = idempotency.key_parameter(
    "Optional. A key of your choosing (a random UUID) that makes a retry safe: the same key from you "
    "within AGENTMEMORY_IDEMPOTENCY_WINDOW_HOURS (default 24) commits nothing again and answers the "
    "first outcome and changed (with your memory as it is now, and Idempotent-Replayed: true); 409 "
    "while the first is still running; 422 with another body."
)
REPLAYED_HEADER = OpenApiParameter(
    idempotency.REPLAYED_HEADER, str, OpenApiParameter.HEADER, response=[200, 400], enum=["true"],
    description="Present (true) when the answer is the stored result of an earlier request with the same "
                "Idempotency-Key.",
)
RETRY_AFTER_HEADER = OpenApiParameter(
    "Retry-After", int, OpenApiParameter.HEADER, response=[409], required=True,
    description="Seconds to wait before sending again.",
)
KEY_IN_USE_RESPONSE = OpenApiResponse(
    MemoryErrorSerializer, description="idempotency_key_in_use: the first request with this Idempotency-Key is "
                                       "still running; retry after Retry-After seconds to get its result.",
)
KEY_REUSED_RESPONSE = OpenApiResponse(
    MemoryErrorSerializer, description="idempotency_key_reused: this Idempotency-Key was already used with a "
                                       "different body; nothing was changed.",
)
ACCOUNT_GONE_RESPONSE = OpenApiResponse(
    MemoryErrorSerializer, description="account_closed: the account was deleted while the request ran; "
                                       "nothing was changed.",
)
