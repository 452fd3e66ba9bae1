"""The chat's REST API: turns, conversations, and the memory-free eval route.

Why adrf for the turn views: DRF's own dispatch is synchronous, so Django
would run the view in a worker thread, where a client disconnect cannot
reach the turn (the thread runs on and could commit). adrf's APIView awaits
an `async def post` in the request's own task, with DRF's authentication,
CSRF, permissions, throttles and serializers unchanged; Django's ASGI
handler cancels that task when the client disconnects, and the cancellation
reaches `run_turn`, which discards the ledger (and rolls back a commit in
flight). The conversation views do no model work and stay plain DRF.

Idempotency. A turn sent with an `Idempotency-Key` header runs once per
person and key (`agentmemory.idempotency` holds the rules): the key is
claimed before the turn takes a slot, a retry gets the first answer again
(`Idempotent-Replayed: true`), 409 while the first still runs, 422 with
another body. Only an answered turn is kept; a turn that failed, was
cancelled before it completed or found no conversation releases the key, so
a retry runs. The record keeps the answer as a reference to the stored
reply, which a replay reads back from the person's conversation.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import threading

from adrf.views import APIView as AsyncAPIView
from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404
from django.utils.formats import number_format
from django.utils.translation import gettext, gettext_noop
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, permissions
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.response import Response

from agentmemory import idempotency
from agentmemory.workers import in_worker

from . import budget, credentials, retention
from .budget import ChatTurnThrottle
from .frames import refusal
from .models import Conversation, Message
from .serializers import (
    ConversationSerializer,
    DeletedSerializer,
    EvalTurnRequestSerializer,
    EvalTurnResponseSerializer,
    MessageSerializer,
    TurnConflictSerializer,
    TurnFailureSerializer,
    TurnRequestSerializer,
    TurnResponseSerializer,
)
from .turns import ConversationNotFound, TemporaryChat, TurnFailed, TurnResult, run_eval_turn, run_turn

logger = logging.getLogger(__name__)

FAILURE_STATUS = {"internal_error": 500, "cancelled": 409, "session_ended": 403, "turn_timeout": 504}
BUSY_RETRY_SECONDS = 2
# How long a claimed key's first attempt may run before a retry takes it over:
# the turn's model deadline, plus its memory commit and the conversation log.
IDEMPOTENCY_MARGIN_SECONDS = 60
# The sentences (`detail`, `notice`) are in the request's language (LocaleMiddleware); codes stay as they are.
KEY_NOT_FOR_TEMPORARY = gettext_noop(
    "A temporary chat keeps nothing, so its answer cannot be given again: send it without the "
    "Idempotency-Key header (a temporary turn never changes memory)."
)
REPLY_NOT_KEPT = gettext_noop(
    "This reply is not in your conversation history, so it cannot be sent again; its memory outcome stands."
)

IDEMPOTENCY_KEY_PARAMETER = idempotency.key_parameter(
    "Optional. A key of your choosing (a random UUID) that makes a retry safe: the same key from you "
    "within AGENTMEMORY_IDEMPOTENCY_WINDOW_HOURS (default 24) answers the first turn's result again "
    "(with Idempotent-Replayed: true) and never runs or commits again; 409 while the first is still "
    "running; 422 with another body. Not for temporary turns."
)
REPLAYED_HEADER = OpenApiParameter(
    idempotency.REPLAYED_HEADER, str, OpenApiParameter.HEADER, response=[200], enum=["true"],
    description="Present (true) when the answer is the stored result of an earlier request with the same "
                "Idempotency-Key.",
)
RETRY_AFTER_HEADER = OpenApiParameter(
    "Retry-After", int, OpenApiParameter.HEADER, response=[409, 429], required=True,
    description="Seconds to wait before sending again.",
)

# DRF answers 403 on every route here when the credentials are missing or wrong.
NOT_SIGNED_IN = OpenApiResponse(
    description="Not signed in: send Authorization: Token <key>, or the session cookie with the CSRF token."
)
NOT_YOURS = OpenApiResponse(description="No conversation of yours has this id.")

_USAGE_EXAMPLE = {
    "user": {"used": 564, "limit": 1375, "percent": 41, "entries": 2, "label": "41% — 564/1,375 chars", "level": "ok"},
    "memory": {"used": 616, "limit": 2200, "percent": 28, "entries": 3, "label": "28% — 616/2,200 chars", "level": "ok"},  # noqa: E501 (OpenAPI example literal)
}
TURN_EXAMPLES = [
    OpenApiExample("Start a conversation", value={"content": "remember: the project uses PostgreSQL 15", "conversation_id": None}, request_only=True),  # noqa: E501 (OpenAPI example literal)
    OpenApiExample("Continue a conversation", value={"content": "What do you know about me?", "conversation_id": 12}, request_only=True),  # noqa: E501 (OpenAPI example literal)
    OpenApiExample(
        "Memory committed",
        value={
            "turn_id": "4f1c0b6e2a9d4c77b1e0c3a5d6f7e8a9", "conversation_id": 12, "temporary": False, "message_id": 87,
            "reply": "Done: I added that to my notes.",
            "model": "gpt-4o-mini",
            "memory": {"status": "committed", "message": "Memory saved.", "operation_count": 1,
                       "changed": ["memory"], "usage": _USAGE_EXAMPLE, "code": "", "memory_full": False, "proposal_id": None},  # noqa: E501 (OpenAPI example literal)
        },
        response_only=True, status_codes=["200"],
    ),
    OpenApiExample(
        "Memory read failed (the answer still comes)",
        value={
            "turn_id": "9a8b7c6d5e4f40312a1b2c3d4e5f6a7b", "conversation_id": 12, "temporary": False, "message_id": 88,
            "reply": "Hello! I could not read your memory this time, so I am answering without it.",
            "model": "gpt-4o-mini",
            "memory": {"status": "unavailable", "message": "Memory could not be read this turn: the answer was "
                       "given without it and nothing was saved.", "operation_count": 0, "changed": [],
                       "usage": None, "code": "", "memory_full": False, "proposal_id": None},
        },
        response_only=True, status_codes=["200"],
    ),
    OpenApiExample(
        "Model failed after staging",
        value={
            "turn_id": "0c1d2e3f4a5b46789c0d1e2f3a4b5c6d", "conversation_id": 12, "temporary": False, "code": "model_failed_after_staging",  # noqa: E501 (OpenAPI example literal)
            "detail": "The model failed after proposing a memory change, so nothing was saved and no fallback "
                      "model ran. Send your message again.",
            "memory": {"status": "discarded", "message": "The turn did not complete, so its memory changes were "
                       "discarded; nothing was saved.", "operation_count": 1, "changed": [], "usage": None, "code": "", "memory_full": False, "proposal_id": None},  # noqa: E501 (OpenAPI example literal)
        },
        response_only=True, status_codes=["502"],
    ),
]


_TURN_FIELDS = ("turn_id", "conversation_id", "temporary", "message_id", "reply", "model", "memory", "notice")


def _turn_response(result: TurnResult) -> dict:
    return {
        "turn_id": result.turn_id,
        "conversation_id": result.conversation_id,
        "temporary": result.temporary_id is not None,
        "message_id": result.message_id,
        "reply": result.reply,
        "model": result.model,
        "memory": result.memory.as_dict(),
        "notice": result.notice,
    }


def _kept(body: dict) -> dict:
    """What the idempotency record keeps of a turn's answer: all but the reply's text (its message id stays)."""
    return {name: value for name, value in body.items() if name != "reply"}


def _replayed_turn(*, user_id, stored: dict) -> dict:
    """The first answer again: the stored body, with the reply read back from the person's conversation."""
    message_id = stored.get("message_id")
    reply = None
    if message_id is not None:
        reply = (Message.objects.filter(pk=message_id, conversation__user_id=user_id, role=Message.Role.ASSISTANT)
                 .values_list("content", flat=True).first())
    body = {**stored, "reply": reply if reply is not None else ""}
    if reply is None:
        body["notice"] = gettext(REPLY_NOT_KEPT)
    return {name: body.get(name) for name in _TURN_FIELDS}


async def _settle_key(claim, result: TurnResult | None) -> None:
    """Keep the answered turn's result under its key, or give the key back (nothing was committed)."""
    if claim is None:
        return
    try:
        if result is None or result.memory.status == "unconfirmed":
            # An unconfirmed commit is not this key's answer: a retry runs again, and its commit finds
            # the first one's record (written in that commit's own transaction) if it did land.
            await asyncio.shield(in_worker(idempotency.release, claim))
        else:
            await asyncio.shield(in_worker(
                idempotency.finish, claim, status=200, body=_kept(_turn_response(result)),
                conversation_id=result.conversation_id,
            ))
    except Exception as exc:  # the answer stands; a retry after the lease runs, and cannot commit again
        logger.warning("idempotency record not settled: %s", type(exc).__name__)


def _failure_response(failure: TurnFailed) -> Response:
    body = {
        "turn_id": failure.turn_id,
        "conversation_id": failure.conversation_id,
        "temporary": failure.temporary_id is not None,
        "code": failure.code,
        "detail": failure.message,
        "memory": failure.memory.as_dict(),
    }
    return Response(body, status=FAILURE_STATUS.get(failure.code, 502))


class TurnLimitsMixin:
    """429s of the turn routes say why, in one shape: {"code", "detail", "retry_after"} and Retry-After."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        if isinstance(exc, Throttled):
            wait = int(exc.wait or 1)
            response.data = {"code": "rate_limited", "retry_after": wait,
                             "detail": gettext("Too many turns in a short time; try again in %(seconds)s seconds.")
                             % {"seconds": number_format(wait, force_grouping=True)}}
            response["Retry-After"] = str(wait)
        return response


class TurnView(TurnLimitsMixin, AsyncAPIView):
    throttle_classes = [ChatTurnThrottle]
    throttle_scope = "chat_turns"

    @extend_schema(
        operation_id="chat_turn_create",
        summary="Run one chat turn",
        description=(
            "Sends a message, waits for the complete answer and commits any memory change the agent "
            "staged, only after the answer is complete. If the request is cancelled or the client "
            "disconnects first, nothing is committed; nor when the session or token the request came "
            "with ended while the answer was written (signed out everywhere, password changed, token "
            "revoked: 403, code session_ended). `memory.status` is one of committed, "
            "nothing_to_commit, unavailable, disabled, discarded, rejected. With `temporary: true` the "
            "turn neither reads nor writes memory and nothing of it is stored (one message, no "
            "conversation)."
        ),
        request=TurnRequestSerializer,
        responses={
            200: TurnResponseSerializer,
            400: OpenApiResponse(description=(
                "Invalid body (empty or too long message); or, with code invalid_idempotency_key, a malformed "
                "Idempotency-Key header, or one sent with a temporary turn (code idempotency_key_temporary).")),
            403: OpenApiResponse(description=(
                "Not signed in (send Authorization: Token <key>, or the session cookie with the CSRF token); "
                "or, with code session_ended, the session or token ended before the answer completed and "
                "nothing was saved.")),
            404: OpenApiResponse(description="The conversation is not yours or does not exist."),
            409: OpenApiResponse(TurnConflictSerializer, description=(
                "code idempotency_key_in_use: the first request with this Idempotency-Key is still running; "
                "retry after Retry-After seconds to get its result. (code cancelled, without a key header: "
                "the turn was stopped and nothing was saved.)")),
            422: OpenApiResponse(TurnConflictSerializer, description=(
                "code idempotency_key_reused: this Idempotency-Key was already used with a different body; "
                "nothing ran.")),
            429: OpenApiResponse(description="Too many turns; wait and retry."),
            500: TurnFailureSerializer,
            502: TurnFailureSerializer,
            504: OpenApiResponse(TurnFailureSerializer, description=(
                "The turn ran past CHAT_TURN_TIMEOUT_SECONDS (code turn_timeout): the model was stopped and "
                "nothing was saved.")),
        },
        parameters=[IDEMPOTENCY_KEY_PARAMETER, REPLAYED_HEADER, RETRY_AFTER_HEADER],
        examples=TURN_EXAMPLES,
        tags=["chat"],
    )
    async def post(self, request):
        try:
            key = idempotency.parse_key(request.headers.get(idempotency.HEADER))
        except idempotency.InvalidKey as exc:
            return Response({"code": exc.code, "detail": exc.message}, status=400)
        serializer = TurnRequestSerializer(data=request.data)
        if not serializer.is_valid():
            # The fields' errors as DRF gives them, and the code and sentence the socket answers for them.
            refused = refusal(serializer.errors)
            return Response({**serializer.errors, "code": refused.code, "detail": str(refused.message)}, status=400)
        temporary = bool(serializer.validated_data.get("temporary"))
        if key is not None and temporary:
            return Response({"code": "idempotency_key_temporary", "detail": gettext(KEY_NOT_FOR_TEMPORARY)}, status=400)
        claim = None
        if key is not None:
            claimed = await self._claim(request, key)
            if isinstance(claimed, Response):  # a replay, 409 or 422: not a turn after all
                await sync_to_async(budget.give_back, thread_sensitive=False)(getattr(request, "turn_budget", None))
                return claimed
            claim = claimed
        slot = await sync_to_async(budget.acquire_turn, thread_sensitive=False)(request.user.pk)
        if slot is None:
            # Not a turn after all: the rate budget the throttle took is given back, and the key.
            await _settle_key(claim, None)
            await sync_to_async(budget.give_back, thread_sensitive=False)(getattr(request, "turn_budget", None))
            return Response(
                {"code": "too_many_turns", "retry_after": BUSY_RETRY_SECONDS,
                 "detail": gettext("You already have %(count)s turns running; wait for one to finish, then send "
                                   "again.") % {"count": number_format(settings.CHAT_MAX_CONCURRENT_TURNS,
                                                                       force_grouping=True)}},
                status=429, headers={"Retry-After": str(BUSY_RETRY_SECONDS)},
            )
        completed: list[TurnResult] = []  # the result, once the turn is complete (even if cancelled after)
        try:
            async with budget.kept(slot):  # the slot's lease is renewed while the turn runs
                result = await run_turn(
                    user=request.user,
                    content=serializer.validated_data["content"],
                    conversation_id=serializer.validated_data.get("conversation_id"),
                    cancel_event=threading.Event(),
                    temporary=TemporaryChat() if temporary else None,
                    signed_in=credentials.for_request(request),
                    idempotency_key=key,
                    completed=completed.append,
                )
        except ConversationNotFound as exc:
            await _settle_key(claim, None)
            raise NotFound(str(exc)) from None
        except TurnFailed as failure:
            await _settle_key(claim, None)  # nothing was committed: a retry may run
            return _failure_response(failure)
        except BaseException:  # a disconnect (CancelledError) or an error: keep the answer only if it came
            await _settle_key(claim, completed[0] if completed else None)
            raise
        finally:
            await asyncio.shield(sync_to_async(slot.release, thread_sensitive=False)())
        body = _turn_response(result)
        await _settle_key(claim, result)
        return Response(body)

    async def _claim(self, request, key: str):
        """Claim the person's key for this turn: the Claim, or the Response that answers instead."""
        try:
            claimed = await in_worker(
                idempotency.claim, user_id=request.user.pk, key=key,
                fingerprint=idempotency.fingerprint(request.method, request.path, request.data),
                lease_seconds=settings.CHAT_TURN_TIMEOUT_SECONDS + IDEMPOTENCY_MARGIN_SECONDS,
            )
        except idempotency.KeyReused as exc:
            return Response({"code": exc.code, "detail": exc.message}, status=422)
        except idempotency.InProgress as exc:
            return Response({"code": exc.code, "detail": exc.message, "retry_after": exc.retry_after},
                            status=409, headers={"Retry-After": str(exc.retry_after)})
        if isinstance(claimed, idempotency.Replay):
            return Response(await in_worker(_replayed_turn, user_id=request.user.pk, stored=claimed.body),
                            status=claimed.status, headers={idempotency.REPLAYED_HEADER: "true"})
        return claimed


class HasEvalServiceToken(permissions.BasePermission):
    """The eval route answers only callers holding EVAL_SERVICE_TOKEN; unset, it does not exist."""

    message = "Send Authorization: Bearer <EVAL_SERVICE_TOKEN>."

    def has_permission(self, request, view) -> bool:
        token = settings.EVAL_SERVICE_TOKEN
        if not token:
            raise Http404("Not found.")
        sent = request.META.get("HTTP_AUTHORIZATION", "")
        return hmac.compare_digest(sent.encode(), f"Bearer {token}".encode())


class EvalTurnView(TurnLimitsMixin, AsyncAPIView):
    # A service token is not a person: no session, no user, so no memory.
    authentication_classes: list = []
    permission_classes = [HasEvalServiceToken]
    # Keyed on the client address (NUM_PROXIES decides which one is trusted).
    throttle_classes = [ChatTurnThrottle]
    throttle_scope = "chat_turns"

    def check_permissions(self, request) -> None:
        # The throttle runs before the token check, so wrong tokens spend the
        # caller's budget too and cannot be guessed at full speed.
        super().check_throttles(request)
        super().check_permissions(request)

    def check_throttles(self, request) -> None:
        pass  # done in check_permissions, before the token is checked

    @extend_schema(
        operation_id="eval_turn_create",
        summary="Run one memory-free evaluation turn",
        description=(
            "For evaluation traffic with a service token (Authorization: Bearer <token>). Runs the "
            "memory-free agent: no memory block, no memory tool, nothing read or written, nothing stored. "
            "Answers 404 when EVAL_SERVICE_TOKEN is not set."
        ),
        request=EvalTurnRequestSerializer,
        responses={200: EvalTurnResponseSerializer,
                   400: OpenApiResponse(description="Invalid body (empty or too long message)."),
                   403: OpenApiResponse(description="Wrong or missing token."),
                   404: OpenApiResponse(description="The route is off (no EVAL_SERVICE_TOKEN)."),
                   502: OpenApiResponse(description="The model failed or did not finish its answer."),
                   504: OpenApiResponse(description="The turn ran past CHAT_TURN_TIMEOUT_SECONDS; the model "
                                                    "was stopped.")},
        examples=[
            OpenApiExample("Evaluation prompt", value={"content": "Summarise the plot of Hamlet in one line."}, request_only=True),  # noqa: E501 (OpenAPI example literal)
            OpenApiExample("Evaluation answer", value={"turn_id": "5e6f7a8b9c0d41e2f3a4b5c6d7e8f9a0",
                           "reply": "A prince avenges his father and everyone dies.", "model": "gpt-4o-mini"},
                           response_only=True, status_codes=["200"]),
        ],
        auth=[],
        tags=["eval"],
    )
    async def post(self, request):
        serializer = EvalTurnRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            result = await run_eval_turn(content=serializer.validated_data["content"])
        except TurnFailed as failure:
            return _failure_response(failure)
        return Response({"turn_id": result.turn_id, "reply": result.reply, "model": result.model})


@extend_schema_view(get=extend_schema(responses={200: ConversationSerializer(many=True), 403: NOT_SIGNED_IN}))
class ConversationListView(generics.ListAPIView):
    serializer_class = ConversationSerializer

    def get_queryset(self):
        return Conversation.objects.filter(user=self.request.user)

    @extend_schema(operation_id="conversations_destroy_all", summary="Delete all of your conversations",
                   responses={200: DeletedSerializer, 403: NOT_SIGNED_IN}, tags=["chat"])
    def delete(self, request):
        removed = retention.delete_conversations(Conversation.objects.filter(user=request.user))
        return Response({"deleted": removed["conversations"]})


@extend_schema_view(
    get=extend_schema(responses={200: ConversationSerializer, 403: NOT_SIGNED_IN, 404: NOT_YOURS}),
    delete=extend_schema(responses={204: None, 403: NOT_SIGNED_IN, 404: NOT_YOURS}),
)
class ConversationDetailView(generics.RetrieveDestroyAPIView):
    serializer_class = ConversationSerializer

    def get_queryset(self):
        return Conversation.objects.filter(user=self.request.user)

    def get_object(self):
        conversation = self.get_queryset().filter(pk=self.kwargs["pk"]).first()
        if conversation is None:
            raise NotFound(gettext("No conversation of yours has this id."), code="not_found")
        self.check_object_permissions(self.request, conversation)
        return conversation

    def perform_destroy(self, instance):
        retention.delete_conversations(Conversation.objects.filter(pk=instance.pk, user=self.request.user))


@extend_schema_view(
    get=extend_schema(responses={200: MessageSerializer(many=True), 403: NOT_SIGNED_IN, 404: NOT_YOURS})
)
class ConversationMessagesView(generics.ListAPIView):
    serializer_class = MessageSerializer

    def get_queryset(self):
        conversation = Conversation.objects.filter(pk=self.kwargs["pk"], user=self.request.user).first()
        if conversation is None:
            raise NotFound(gettext("No conversation of yours has this id."))
        return conversation.messages.all()
