"""The caller's memory: read it, change it by operations, export it, erase it, its settings."""
from __future__ import annotations

import logging

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response

from .. import expiry, idempotency, importing, preferences, services, store, words
from ..conf import memory_settings
from ..models import Actor
from ..notify import broadcast_memory_changed_sync
from ..rules import MemoryValidationError, parse_operations
from ..selectors import (
    memory_state,
    person_export,
    receipt_payload,
    state_payload,
)
from ..serializers import (
    CommitResponseSerializer,
    EraseReceiptSerializer,
    ExportSerializer,
    MemoryErrorSerializer,
    MemorySettingsSerializer,
    MemoryStateSerializer,
    OperationBatchSerializer,
)
from .base import (
    ACCOUNT_GONE_RESPONSE,
    IDEMPOTENCY_KEY_PARAMETER,
    KEY_IN_USE_RESPONSE,
    KEY_REUSED_RESPONSE,
    NOT_SIGNED_IN_RESPONSE,
    OPERATIONS_LEASE_SECONDS,
    REPLAYED_HEADER,
    RETRY_AFTER_HEADER,
    THROTTLED_RESPONSE,
    UNAVAILABLE_RESPONSE,
    MemoryAPIView,
    error_response,
)

logger = logging.getLogger(__name__)

# --- examples for the schema -------------------------------------------------

_STATE_EXAMPLE = {
    "schema_version": 1,
    "agent_memory_enabled": True,
    "documents": {
        "user": {
            "title": "USER PROFILE",
            "entries": ["Prefers short code examples.", "Experienced with Python and SQL."],
            "usage": {"used": 63, "limit": 1375, "percent": 4, "entries": 2, "label": "4% — 63/1,375 chars", "level": "ok"},  # noqa: E501 (OpenAPI example literal)
            "created_at": "2026-05-04T09:12:44Z",
            "updated_at": "2026-05-06T17:03:10Z",
        },
        "memory": {
            "title": "AGENT MEMORY",
            "entries": ["The project uses Pydantic models at API boundaries."],
            "usage": {"used": 51, "limit": 2200, "percent": 2, "entries": 1, "label": "2% — 51/2,200 chars", "level": "ok"},  # noqa: E501 (OpenAPI example literal)
            "created_at": "2026-05-04T09:12:44Z",
            "updated_at": "2026-05-04T09:12:44Z",
        },
    },
}

STATE_EXAMPLE = OpenApiExample("Both documents", value=_STATE_EXAMPLE, response_only=True)

BATCH_EXAMPLES = [
    OpenApiExample(
        "Add a fact about me",
        value={"operations": [{"target": "user", "action": "add", "content": "Prefers short code examples."}]},
        request_only=True,
    ),
    OpenApiExample(
        "Consolidate, then add, in one batch",
        value={"operations": [
            {"target": "memory", "action": "replace", "match": "PostgreSQL 15",
             "content": "The project runs on PostgreSQL 16."},
            {"target": "memory", "action": "remove", "match": "old staging server"},
            {"target": "memory", "action": "add", "content": "Database migrations must be reversible."},
        ]},
        request_only=True,
    ),
]

COMMIT_EXAMPLE = OpenApiExample(
    "Committed", value={**_STATE_EXAMPLE, "outcome": "committed", "changed": ["user"]}, response_only=True,
)

ERROR_EXAMPLES = [
    OpenApiExample(
        "Ambiguous match",
        value={"code": "ambiguous_match", "position": 2,
               "detail": "match is ambiguous: it occurs in 2 entries of 'memory'; use a longer substring "
                         "that only the intended entry contains."},
        response_only=True, status_codes=["400"],
    ),
    OpenApiExample(
        "Over capacity",
        value={"code": "over_capacity", "position": None,
               "detail": "'user' would hold 1,402 characters, over its limit of 1,375. In the same batch, "
                         "shorten or remove entries (consolidate related facts) before adding."},
        response_only=True, status_codes=["400"],
    ),
    OpenApiExample(
        "A field naming a person",
        value={"code": "unknown_argument", "position": None,
               "detail": "Unknown argument(s) 'user_id'; only 'operations' is accepted. "
                         "Memory always belongs to the signed-in user."},
        response_only=True, status_codes=["400"],
    ),
]

EXPORT_EXAMPLE = OpenApiExample(
    "Export",
    value={
        "format": "agentmemory-export",
        "schema_version": 1,
        "exported_at": "2026-05-07T08:00:00Z",
        "limits": {"user": 1375, "memory": 2200},
        "documents": {
            "user": {"title": "USER PROFILE", "entries": ["Prefers short code examples."], "characters": 28,
                     "created_at": "2026-05-04T09:12:44Z", "updated_at": "2026-05-06T17:03:10Z"},
            "memory": {"title": "AGENT MEMORY", "entries": [], "characters": 0,
                       "created_at": None, "updated_at": None},
        },
    },
    response_only=True,
)

# --- a commit whose COMMIT's answer was lost ---------------------------------------------


def commit_confirmed(request, commit, /, **kwargs):
    """Run a memory write for the signed-in person; when the connection failed at its COMMIT,
    ask the database (bounded) and return the result only when the change is stored
    (`store.commit_confirmed`: else CommitNotStored or CommitUnconfirmed, answered by `unknown_outcome_response`)."""
    user_id = request.user.pk
    return store.commit_confirmed(
        commit, user_id=user_id, **kwargs,
        announce=lambda result: broadcast_memory_changed_sync(user_id, result.snapshot, result.limits),
    )


def unknown_outcome_response(exc) -> Response | None:
    """The answer to a write whose COMMIT failed: confirmed not stored (503 connection_lost), or not
    known in time (503 unconfirmed, its own code); None for any other error."""
    if isinstance(exc, store.CommitNotStored):
        return error_response("connection_lost", str(words.COMMIT_NOT_STORED),
                              status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, store.CommitUnconfirmed):
        return error_response("unconfirmed", str(words.COMMIT_UNCONFIRMED),
                              status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
    return None


def _open_key_for_retry(claimed) -> None:
    """After an unconfirmed commit: give the key back to a retry at once if the database answers
    within a second (the retry then finds the commit's outcome under the key, or runs: the truth);
    otherwise the first attempt's lease ends it, and the retry answers the truth then."""
    try:
        with store.bounded_wait(1.0, statement=True):
            idempotency.release(claimed)
    except Exception as exc:
        logger.info("idempotency key left to its lease after an unconfirmed commit: %s", type(exc).__name__)


# --- views -------------------------------------------------------------------


class MemoryView(MemoryAPIView):
    """Read or erase the caller's memory."""

    @extend_schema(
        operation_id="memory_read",
        tags=["memory"],
        summary="Read your memory",
        description="Both documents of the signed-in person, each as a list of entries, with usage and "
                    "timestamps.",
        responses={200: MemoryStateSerializer, 403: NOT_SIGNED_IN_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=[STATE_EXAMPLE],
    )
    def get(self, request):
        expiry.remove_expired(user_id=request.user.pk)  # the person's read: entries past their date go now
        return Response(MemoryStateSerializer(state_payload(memory_state(user_id=request.user.pk))).data)

    @extend_schema(
        operation_id="memory_erase",
        tags=["memory"],
        summary="Erase your memory",
        description="Delete both documents with every entry's provenance, every earlier version and every "
                    "pending proposal; with include=chats, also every conversation, its messages and their "
                    "search index, in the same transaction. Answers the receipt: what was removed, by kind, "
                    "with counts and the time, which your history keeps (counts only). Copies in database "
                    "backups remain until their retention expires (docs/privacy.md).",
        parameters=[OpenApiParameter(
            "include", OpenApiTypes.STR, OpenApiParameter.QUERY, enum=["chats"], required=False,
            description="chats: erase your conversations with your memory.")],
        request=None,
        responses={200: EraseReceiptSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                   410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE, 503: UNAVAILABLE_RESPONSE},
    )
    def delete(self, request):
        include = request.query_params.get("include")
        if include not in (None, "chats"):
            return error_response("invalid_include",
                                  _('include takes one value: "chats" (erase your conversations too).'))
        if include and not services.chats_erasable():
            return error_response("invalid_include", _("This deployment keeps no conversations here to erase."))
        receipt = services.erase_memory(user_id=request.user.pk, actor=Actor.USER, with_chats=bool(include))
        if hasattr(request, "session"):  # the memory page's review of an import goes with what it reviewed
            request.session.pop(importing.REVIEW_SESSION_KEY, None)
        return Response(EraseReceiptSerializer(receipt_payload(receipt)).data)


class MemoryOperationsView(MemoryAPIView):
    """Apply an ordered batch of operations to the caller's memory."""

    def handle_exception(self, exc):
        return unknown_outcome_response(exc) or super().handle_exception(exc)

    @extend_schema(
        operation_id="memory_apply_operations",
        tags=["memory"],
        summary="Change your memory",
        description="The same contract as the assistant's memory_update tool: 1 to 20 ordered "
                    "operations (add: content; replace: match and content; remove: match; add and replace may "
                    "carry expires: a YYYY-MM-DD date, a phrase such as 'for a week' read in your time zone, "
                    "or 'never' to clear it; replace with match and expires alone changes only the date). The whole "
                    "batch commits or nothing does; capacity is checked after the batch. Unknown fields "
                    "are refused. Send an Idempotency-Key header to make a retry safe: the batch commits "
                    "once per key. If the connection to the database fails while the change commits, the "
                    "database is asked (for up to AGENTMEMORY_COMMIT_CONFIRM_SECONDS) whether it is stored: "
                    "stored is 200; not stored is 503 connection_lost; no answer in time is 503 unconfirmed "
                    "(it may or may not be stored: read your memory or retry with the same Idempotency-Key, "
                    "which answers the true outcome).",
        request=OperationBatchSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER, REPLAYED_HEADER, RETRY_AFTER_HEADER],
        responses={200: CommitResponseSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                   409: KEY_IN_USE_RESPONSE, 410: ACCOUNT_GONE_RESPONSE, 422: KEY_REUSED_RESPONSE,
                   429: THROTTLED_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=[*BATCH_EXAMPLES, COMMIT_EXAMPLE, *ERROR_EXAMPLES],
    )
    def post(self, request):
        key = idempotency.parse_key(request.headers.get(idempotency.HEADER))
        today = expiry.today_for(request.user.pk)
        operations = parse_operations(expiry.resolve_operations(request.data, today))
        if key is None:
            result = commit_confirmed(request, services.commit_batch, operations=operations, actor=Actor.USER,
                                      today=today)
            return self._committed(request, {"outcome": result.outcome, "changed": list(result.changed)})
        claimed = idempotency.claim(
            user_id=request.user.pk, key=key, lease_seconds=OPERATIONS_LEASE_SECONDS,
            fingerprint=idempotency.fingerprint(request.method, request.path, request.data),
        )
        if isinstance(claimed, idempotency.Replay):
            if claimed.status == 200:
                response = self._committed(request, claimed.body)
            else:
                response = Response(claimed.body, status=claimed.status)
            response[idempotency.REPLAYED_HEADER] = "true"
            return response
        try:
            result = commit_confirmed(request, services.commit_batch, operations=operations, actor=Actor.USER,
                                      idempotency_key=key, today=today)
            kept = {"outcome": result.outcome, "changed": list(result.changed)}
        except idempotency.AlreadyCommitted as first:  # a crashed first attempt committed it: not again
            kept = first.outcome
        except MemoryValidationError as exc:
            # The rules refused the batch as memory stood: that is its result (content-free, like every error here).
            idempotency.finish(claimed, status=400, body={"code": exc.code, "position": exc.position,
                                                          "detail": exc.message})
            raise
        except store.CommitUnconfirmed:
            # Stored or not, no result is kept under the key: the key's commit outcome, written in the
            # commit's own transaction, is there exactly when the change is, and a retry answers from it.
            _open_key_for_retry(claimed)
            raise
        except BaseException:
            idempotency.release(claimed)  # nothing was committed: a retry may run
            raise
        idempotency.finish(claimed, status=200, body=kept)
        return self._committed(request, kept)

    def _committed(self, request, kept: dict) -> Response:
        """The commit's outcome and changed documents, with the person's memory as it is now."""
        payload = state_payload(memory_state(user_id=request.user.pk))
        payload.update(outcome=kept["outcome"], changed=list(kept["changed"]))
        return Response(CommitResponseSerializer(payload).data)


class MemoryExportView(MemoryAPIView):
    """Download the caller's memory as a JSON export."""

    @extend_schema(
        operation_id="memory_export",
        tags=["memory"],
        summary="Export your memory",
        description="Both documents as entry lists, with limits, schema version and timestamps. To restore, "
                    "send each entry back as an add operation to /api/memory/operations/.",
        responses={200: ExportSerializer, 403: NOT_SIGNED_IN_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=[EXPORT_EXAMPLE],
    )
    def get(self, request):
        now = timezone.now()
        payload = person_export(user_id=request.user.pk, exported_at=now)
        response = Response(ExportSerializer(payload).data)
        response["Content-Disposition"] = f'attachment; filename="memory-export-{now:%Y%m%d-%H%M%S}.json"'
        response["Cache-Control"] = "no-store"
        return response


SETTINGS_EXAMPLES = [
    OpenApiExample("Memory on", value={"use_memory": True, "save_mode": "auto", "agent_memory_enabled": True},
                   response_only=True),
    OpenApiExample("Turn memory off", value={"use_memory": False}, request_only=True),
    OpenApiExample("Ask before saving", value={"save_mode": "ask"}, request_only=True),
]


class MemorySettingsView(MemoryAPIView):
    """Read or change the caller's own memory settings."""

    def _payload(self, request) -> dict:
        settings = preferences.load(user_id=request.user.pk)
        return {"use_memory": settings.use_memory, "save_mode": settings.save_mode,
                "agent_memory_enabled": memory_settings().enabled}

    @extend_schema(
        operation_id="memory_settings_read",
        tags=["memory"],
        summary="Read your memory settings",
        description="Whether your chats use memory (your switch), and whether memory is rolled out at all.",
        responses={200: MemorySettingsSerializer, 403: NOT_SIGNED_IN_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=SETTINGS_EXAMPLES,
    )
    def get(self, request):
        return Response(MemorySettingsSerializer(self._payload(request)).data)

    @extend_schema(
        operation_id="memory_settings_update",
        tags=["memory"],
        summary="Turn memory on or off for your chats",
        description="Off: your chats neither read nor change memory, and a reply being written when you "
                    "switch saves nothing. What is stored is kept; read, change, export or erase it here. "
                    "Each change is recorded (without content) in your history.",
        request=MemorySettingsSerializer,
        responses={200: MemorySettingsSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                   410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=SETTINGS_EXAMPLES,
    )
    def put(self, request):
        data = request.data
        if not isinstance(data, dict):
            return error_response("invalid_body", _('Send a JSON object such as {"use_memory": false}.'))
        unknown = sorted(set(data) - {"use_memory", "save_mode", "agent_memory_enabled"})
        if unknown:
            return error_response("unknown_argument",
                          _("Unknown field(s) %(fields)s; only 'use_memory' and 'save_mode' can be changed.")
                          % {"fields": ", ".join(repr(name) for name in unknown)})
        if "use_memory" not in data and "save_mode" not in data:
            return error_response("invalid_use_memory", _('Send "use_memory" (true or false) and/or "save_mode".'))
        if "use_memory" in data and not isinstance(data["use_memory"], bool):
            return error_response("invalid_use_memory", _('"use_memory" must be true or false.'))
        if "save_mode" in data and data["save_mode"] not in preferences.SAVE_MODES:
            return error_response("invalid_save_mode", _('"save_mode" must be "auto" or "ask".'))
        if "use_memory" in data:
            services.set_use_memory(user_id=request.user.pk, use_memory=data["use_memory"], actor=Actor.USER)
        if "save_mode" in data:
            services.set_save_mode(user_id=request.user.pk, save_mode=data["save_mode"], actor=Actor.USER)
        return Response(MemorySettingsSerializer(self._payload(request)).data)
