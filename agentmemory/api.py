"""The memory API: the caller's own memory, and nobody else's.

No route, query parameter or body field names a person; the owner is always
`request.user` (session with CSRF, or token). Writes take the operations
body of the model's `memory_update` tool, parsed by the same strict
`rules.parse_operations`, and commit through `services` with the person as
the actor. Like the page, the API works whatever the rollout flag says (see
`views`). Error bodies are `{"code", "position", "detail"}` and never carry
memory content. A write for an account deleted while the request ran
answers 410 `account_closed` (`MemoryAPIView.handle_exception`).

`POST /api/memory/operations/` takes an `Idempotency-Key` header
(`agentmemory.idempotency`): a batch sent again with the same key commits
nothing and answers the first outcome (`Idempotent-Replayed: true`), with the
memory as it is now (the record keeps no memory content, so nothing a person
removed or erased lives on in it); 409 while the first runs, 422 with another
body. A batch the rules refused is kept too (the same 400 again); a failure
that committed nothing and may pass on a retry (the database) frees the key.
"""
from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle
from rest_framework.views import APIView

from . import idempotency, preferences, proposals, services, versions, words
from .conf import memory_settings
from .models import Actor
from .parsers import TOO_DEEP, BodyTooLarge, BoundedJSONParser, JSONTooDeep, too_large_message
from .rules import MemoryValidationError, parse_operations
from .selectors import (
    change_payload,
    memory_state,
    person_export,
    proposal_payload,
    receipt_payload,
    state_payload,
)
from .serializers import (
    CommitResponseSerializer,
    ExportSerializer,
    MemoryErrorSerializer,
    MemorySettingsSerializer,
    MemoryStateSerializer,
    ProposalListSerializer,
    ProposalSaveSerializer,
    ProposalSerializer,
    OperationBatchSerializer,
    ChangeListSerializer,
    ChangeSerializer,
    EraseReceiptSerializer,
    UndoResponseSerializer,
)
from .store import MemoryUnavailable, UnknownUser
from .throttling import FailOpenThrottle

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


def _error(code: str, detail: str, *, position: int | None = None, status_code: int = 400) -> Response:
    return Response({"code": code, "position": position, "detail": detail}, status=status_code)


# A batch of operations commits in seconds; a claim older than this belongs to an attempt that died.
OPERATIONS_LEASE_SECONDS = 60


class MemoryAPIView(APIView):
    throttle_classes = [MemoryWriteThrottle]
    # JSON only, bounded in size and depth: the same parser, and the same
    # codes, as every other route of a project that makes it its default.
    parser_classes = [BoundedJSONParser]

    def handle_exception(self, exc):
        if isinstance(exc, MemoryValidationError):
            return _error(exc.code, exc.message, position=exc.position)
        if isinstance(exc, (idempotency.InvalidKey, idempotency.KeyReused)):
            return _error(exc.code, exc.message, status_code=400 if isinstance(exc, idempotency.InvalidKey) else 422)
        if isinstance(exc, idempotency.InProgress):
            response = _error(exc.code, exc.message, status_code=status.HTTP_409_CONFLICT)
            response["Retry-After"] = str(exc.retry_after)
            return response
        if isinstance(exc, (JSONTooDeep, RecursionError)):
            return _error(JSONTooDeep.default_code, TOO_DEEP)
        if isinstance(exc, (BodyTooLarge, RequestDataTooBig)):
            return _error(BodyTooLarge.default_code, too_large_message())
        if isinstance(exc, ParseError):
            return _error("invalid_json", 'The body is not valid JSON. Send {"operations": [...]}.')
        if isinstance(exc, UnknownUser):
            # Signed in when the request began, deleted before its write took the lock.
            return _error("account_closed", "This account no longer exists (it was deleted or is being deleted); "
                          "nothing was changed.", status_code=status.HTTP_410_GONE)
        if isinstance(exc, MemoryUnavailable):
            return _error("unavailable", "Memory could not be read right now. Try again in a minute.",
                          status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
        if isinstance(exc, DatabaseError):
            logger.warning("memory API database error", extra={"error": type(exc).__name__})
            return _error("database_unavailable",
                          "The database did not answer; nothing was changed. Try again in a minute.",
                          status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
        response = super().handle_exception(exc)
        # One error shape for every failure of these routes (403, 415, 429...).
        if isinstance(response.data, dict) and set(response.data) == {"detail"}:
            detail = response.data["detail"]
            code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
            response.data = {"code": str(code), "position": None, "detail": str(detail)}
        return response


# --- examples for the schema -------------------------------------------------

_STATE_EXAMPLE = {
    "schema_version": 1,
    "agent_memory_enabled": True,
    "documents": {
        "user": {
            "title": "USER PROFILE",
            "entries": ["Prefers short code examples.", "Experienced with Python and SQL."],
            "usage": {"used": 63, "limit": 1375, "percent": 4, "entries": 2, "label": "4% — 63/1,375 chars", "level": "ok"},
            "created_at": "2026-05-04T09:12:44Z",
            "updated_at": "2026-05-06T17:03:10Z",
        },
        "memory": {
            "title": "AGENT MEMORY",
            "entries": ["The project uses Pydantic models at API boundaries."],
            "usage": {"used": 51, "limit": 2200, "percent": 2, "entries": 1, "label": "2% — 51/2,200 chars", "level": "ok"},
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
    description="Present (true) when the answer is the stored result of an earlier request with the same Idempotency-Key.",
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
            return _error("invalid_include", 'include takes one value: "chats" (erase your conversations too).')
        if include and not services.chats_erasable():
            return _error("invalid_include", "This deployment keeps no conversations here to erase.")
        receipt = services.erase_memory(user_id=request.user.pk, actor=Actor.USER, with_chats=bool(include))
        return Response(EraseReceiptSerializer(receipt_payload(receipt)).data)


class MemoryOperationsView(MemoryAPIView):
    """Apply an ordered batch of operations to the caller's memory."""

    @extend_schema(
        operation_id="memory_apply_operations",
        tags=["memory"],
        summary="Change your memory",
        description="The same contract as the assistant's memory_update tool: 1 to 20 ordered "
                    "operations (add: content; replace: match and content; remove: match). The whole "
                    "batch commits or nothing does; capacity is checked after the batch. Unknown fields "
                    "are refused. Send an Idempotency-Key header to make a retry safe: the batch commits "
                    "once per key.",
        request=OperationBatchSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER, REPLAYED_HEADER, RETRY_AFTER_HEADER],
        responses={200: CommitResponseSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                   409: KEY_IN_USE_RESPONSE, 410: ACCOUNT_GONE_RESPONSE, 422: KEY_REUSED_RESPONSE,
                   429: THROTTLED_RESPONSE, 503: UNAVAILABLE_RESPONSE},
        examples=[*BATCH_EXAMPLES, COMMIT_EXAMPLE, *ERROR_EXAMPLES],
    )
    def post(self, request):
        key = idempotency.parse_key(request.headers.get(idempotency.HEADER))
        operations = parse_operations(request.data)
        if key is None:
            result = services.commit_batch(user_id=request.user.pk, operations=operations, actor=Actor.USER)
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
            result = services.commit_batch(user_id=request.user.pk, operations=operations, actor=Actor.USER,
                                           idempotency_key=key)
            kept = {"outcome": result.outcome, "changed": list(result.changed)}
        except idempotency.AlreadyCommitted as first:  # a crashed first attempt committed it: not again
            kept = first.outcome
        except MemoryValidationError as exc:
            # The rules refused the batch as memory stood: that is its result (content-free, like every error here).
            idempotency.finish(claimed, status=400, body={"code": exc.code, "position": exc.position,
                                                          "detail": exc.message})
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
            return _error("invalid_body", 'Send a JSON object such as {"use_memory": false}.')
        unknown = sorted(set(data) - {"use_memory", "save_mode", "agent_memory_enabled"})
        if unknown:
            return _error("unknown_argument",
                          f"Unknown field(s) {', '.join(repr(name) for name in unknown)}; only 'use_memory' "
                          "and 'save_mode' can be changed.")
        if "use_memory" not in data and "save_mode" not in data:
            return _error("invalid_use_memory", 'Send "use_memory" (true or false) and/or "save_mode".')
        if "use_memory" in data and not isinstance(data["use_memory"], bool):
            return _error("invalid_use_memory", '"use_memory" must be true or false.')
        if "save_mode" in data and data["save_mode"] not in preferences.SAVE_MODES:
            return _error("invalid_save_mode", '"save_mode" must be "auto" or "ask".')
        if "use_memory" in data:
            services.set_use_memory(user_id=request.user.pk, use_memory=data["use_memory"], actor=Actor.USER)
        if "save_mode" in data:
            services.set_save_mode(user_id=request.user.pk, save_mode=data["save_mode"], actor=Actor.USER)
        return Response(MemorySettingsSerializer(self._payload(request)).data)


# --- proposals ("ask before saving") ------------------------------------------------


PROPOSAL_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The proposal's id.")
PROPOSAL_GONE = OpenApiResponse(MemoryErrorSerializer, description="No pending proposal of yours has this id "
                                "(saved, discarded, expired, or not yours).")


def _proposal_id(pk: str) -> int:
    """The path's id as a number; anything else names no proposal (a JSON 404, like an unknown id)."""
    if not pk.isascii() or not pk.isdigit() or len(pk) > 18:
        raise proposals.ProposalGone("No pending proposal of yours has this id.")
    return int(pk)


class ProposalAPIView(MemoryAPIView):
    def handle_exception(self, exc):
        if isinstance(exc, proposals.ProposalGone):
            return _error("proposal_not_found", "No pending proposal of yours has this id: it was saved, "
                          "discarded or has expired.", status_code=status.HTTP_404_NOT_FOUND)
        return super().handle_exception(exc)


class ProposalListView(ProposalAPIView):
    """The caller's pending proposals."""

    @extend_schema(
        operation_id="memory_proposals_list", tags=["memory"], summary="Your pending memory proposals",
        description="With save_mode ask, each finished chat reply that changed memory leaves a proposal here "
                    "instead of saving it. Newest first; expired ones are gone.",
        responses={200: ProposalListSerializer, 403: NOT_SIGNED_IN_RESPONSE, 503: UNAVAILABLE_RESPONSE},
    )
    def get(self, request):
        items = [proposal_payload(p) for p in proposals.pending(user_id=request.user.pk)]
        return Response(ProposalListSerializer({"proposals": items}).data)


class ProposalDetailView(ProposalAPIView):
    """One pending proposal: read it or discard it."""

    @extend_schema(
        operation_id="memory_proposal_read", parameters=[PROPOSAL_ID], tags=["memory"], summary="One pending memory proposal",
        responses={200: ProposalSerializer, 403: NOT_SIGNED_IN_RESPONSE, 404: PROPOSAL_GONE},
    )
    def get(self, request, pk: str):
        proposal = proposals.get(user_id=request.user.pk, proposal_id=_proposal_id(pk))
        return Response(ProposalSerializer(proposal_payload(proposal)).data)

    @extend_schema(
        operation_id="memory_proposal_discard", parameters=[PROPOSAL_ID], tags=["memory"], summary="Discard a memory proposal",
        description="Nothing of it is saved; your history records that you discarded it (without content).",
        request=None,
        responses={204: OpenApiResponse(description="Discarded."), 403: NOT_SIGNED_IN_RESPONSE,
                   404: PROPOSAL_GONE, 410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE},
    )
    def delete(self, request, pk: str):
        services.discard_proposal(user_id=request.user.pk, proposal_id=_proposal_id(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProposalSaveView(ProposalAPIView):
    """Save one pending proposal, all or nothing."""

    @extend_schema(
        operation_id="memory_proposal_save", parameters=[PROPOSAL_ID], tags=["memory"], summary="Save a memory proposal",
        description="Commits the proposal's operations in order, all or nothing, with the same rules as every "
                    "memory change. If your memory changed so that it no longer applies (an entry it edits "
                    "was changed or removed, or it no longer fits), nothing is saved and the proposal stays "
                    "for you to discard. edits replace the text of added facts, by position.",
        request=ProposalSaveSerializer,
        responses={200: CommitResponseSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                   404: PROPOSAL_GONE, 410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE, 503: UNAVAILABLE_RESPONSE},
    )
    def post(self, request, pk: str):
        proposal_id = _proposal_id(pk)
        data = request.data if request.data is not None else {}
        if not isinstance(data, dict):
            return _error("invalid_body", 'Send a JSON object: {} or {"edits": [{"position": 1, "content": "..."}]}.')
        unknown = sorted(set(data) - {"edits"})
        if unknown:
            return _error("unknown_argument", f"Unknown field(s) {', '.join(repr(n) for n in unknown)}; "
                          "only 'edits' is accepted.")
        edits = data.get("edits", [])
        if not isinstance(edits, list) or not all(
            isinstance(item, dict) and set(item) == {"position", "content"}
            and isinstance(item["position"], int) and not isinstance(item["position"], bool)
            and isinstance(item["content"], str)
            for item in edits
        ):
            return _error("invalid_edit", '"edits" must be a list of {"position": <int>, "content": "<text>"}.')
        result = services.save_proposal(user_id=request.user.pk, proposal_id=proposal_id,
                                        edits={item["position"]: item["content"] for item in edits})
        payload = state_payload(memory_state(user_id=request.user.pk))
        payload.update(outcome=result.outcome, changed=list(result.changed))
        return Response(CommitResponseSerializer(payload).data)


# --- versions: undo and restore -----------------------------------------------------


CHANGE_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH,
                             description="The change's id (`change_id` of a chat turn's memory outcome).")
CHANGE_GONE = OpenApiResponse(MemoryErrorSerializer, description="change_not_found: no kept change of yours has "
                              "this id (pruned, erased, or not yours).")
CHANGE_CONFLICT = OpenApiResponse(MemoryErrorSerializer, description=(
    "conflict: an entry the change wrote has changed since (undo), or your memory changed while the restore "
    "was applied; nothing was changed. nothing_to_undo / already_restored: memory already holds it."))


UNDO_RESPONSES = {200: UndoResponseSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                  404: CHANGE_GONE, 409: CHANGE_CONFLICT, 410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE,
                  503: UNAVAILABLE_RESPONSE}


class ChangeAPIView(MemoryAPIView):
    # Refusals that are about the memory's state, not the request's shape.
    CONFLICT_CODES = frozenset({"conflict", "no_match", "ambiguous_match", "entry_changed", "nothing_to_undo",
                                "already_restored"})
    action = "undo"

    def handle_exception(self, exc):
        if isinstance(exc, versions.ChangeGone):
            return _error("change_not_found", words.CHANGE_GONE, status_code=status.HTTP_404_NOT_FOUND)
        if isinstance(exc, MemoryValidationError):
            # The person's words, not the model's: an undo is never a model's batch.
            detail = words.undo_message(exc.code, action=self.action, target=exc.target,
                                        limits=memory_settings().limits)
            conflict = exc.code in self.CONFLICT_CODES
            code = "conflict" if exc.code in ("no_match", "ambiguous_match", "entry_changed") else exc.code
            return _error(code, detail, status_code=status.HTTP_409_CONFLICT if conflict else 400)
        return super().handle_exception(exc)

    def committed(self, request, result) -> Response:
        payload = state_payload(memory_state(user_id=request.user.pk))
        payload.update(outcome=result.outcome, changed=list(result.changed), change_id=result.change_id)
        return Response(UndoResponseSerializer(payload).data)


class ChangeListView(ChangeAPIView):
    """The caller's kept changes, each with every document it touched before and after."""

    @extend_schema(
        operation_id="memory_changes_list", tags=["memory"], summary="Your memory's history of changes",
        description="Every kept change to your memory, newest first: who made it (the assistant, you, support "
                    "staff, the system), where it came from, and each document's entries before and after, with "
                    "what was added, removed and changed. Undo or restore one below.",
        responses={200: ChangeListSerializer, 403: NOT_SIGNED_IN_RESPONSE, 503: UNAVAILABLE_RESPONSE},
    )
    def get(self, request):
        items = [change_payload(change) for change in versions.changes(user_id=request.user.pk)]
        return Response(ChangeListSerializer({"changes": items}).data)


class ChangeDetailView(ChangeAPIView):
    """One kept change."""

    @extend_schema(
        operation_id="memory_change_read", parameters=[CHANGE_ID], tags=["memory"], summary="One memory change",
        responses={200: ChangeSerializer, 403: NOT_SIGNED_IN_RESPONSE, 404: CHANGE_GONE},
    )
    def get(self, request, pk: str):
        return Response(ChangeSerializer(change_payload(versions.change(user_id=request.user.pk, change_id=pk))).data)


class ChangeUndoView(ChangeAPIView):
    """Undo one change."""

    @extend_schema(
        operation_id="memory_change_undo", parameters=[CHANGE_ID], tags=["memory"], summary="Undo a memory change",
        description="Commits the change's inverse, all or nothing: what it added is removed, what it changed "
                    "goes back, what it removed comes back (at the end of its document). If an entry it wrote "
                    "has changed since, nothing is changed (409 conflict). Capacity and the content rules hold "
                    "as for any change. The undo is itself a change, which can be undone.",
        request=None,
        responses=UNDO_RESPONSES,
    )
    def post(self, request, pk: str):
        return self.committed(request, services.undo_change(user_id=request.user.pk, change_id=pk))


class ChangeRestoreView(ChangeAPIView):
    """Restore the documents as one change left them."""

    action = "restore"

    @extend_schema(
        operation_id="memory_change_restore", parameters=[CHANGE_ID], tags=["memory"],
        summary="Restore the version a change left",
        description="Brings each document this change touched back to the entries it held right after the "
                    "change, in their order, all or nothing. Changes made since to those documents are undone "
                    "by it; if your memory changes while it is applied, nothing is changed (409 conflict). The "
                    "restore is itself a change, which can be undone.",
        request=None,
        responses=UNDO_RESPONSES,
    )
    def post(self, request, pk: str):
        return self.committed(request, services.restore_change(user_id=request.user.pk, change_id=pk))
