"""Tidy up: the assistant proposes a consolidated version of one of the caller's documents."""
from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle

from .. import proposals, tidy
from ..rules import TARGETS
from ..selectors import proposal_payload
from ..serializers import MemoryErrorSerializer, ProposalSerializer
from ..throttling import FailOpenThrottle
from .base import (
    ACCOUNT_GONE_RESPONSE,
    NOT_SIGNED_IN_RESPONSE,
    THROTTLED_RESPONSE,
    MemoryAPIView,
    MemoryWriteThrottle,
    error_response,
)


class TidyThrottle(FailOpenThrottle, UserRateThrottle):
    """Tidy ups per person: each is a model request, so it spends at the chat's turn rate.

    The rate is DEFAULT_THROTTLE_RATES["memory_tidy"] when the project sets
    one, else its "chat_turns" rate (CHAT_TURN_RATE here), else no limit.
    The memory page's form counts here too.
    """

    scope = "memory_tidy"
    FALLBACK_SCOPE = "chat_turns"

    def get_rate(self):
        return self.THROTTLE_RATES.get(self.scope) or self.THROTTLE_RATES.get(self.FALLBACK_SCOPE)


class TidyRequestSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=TARGETS, help_text="The document to tidy up: 'user' (your profile) "
                                     "or 'memory' (the assistant's notes).")


def _failure(description: str) -> OpenApiResponse:
    return OpenApiResponse(MemoryErrorSerializer, description=description)


class TidyView(MemoryAPIView):
    """Ask the assistant to propose a tidied version of one document."""

    throttle_classes = [MemoryWriteThrottle, TidyThrottle]

    @extend_schema(
        operation_id="memory_tidy", tags=["memory"], summary="Tidy up a memory document",
        description="One model request, outside any chat: the assistant reads the document's entries (never your "
                    "chats or its own answers) and proposes a consolidated version: duplicates merged, wording "
                    "shortened, stale entries dropped. It is stored as one pending proposal (see "
                    "/api/memory/proposals/) that you save, edit or discard; nothing changes until you save it. "
                    "Each merged line keeps where the entries it came from came from. The proposal passes the "
                    "rules of every write (capacity, the threat scan) and is pinned to the entries it read: "
                    "if your memory changes before you save it, the save is refused (conflict).",
        request=TidyRequestSerializer,
        examples=[OpenApiExample("Tidy up the notes", value={"target": "memory"}, request_only=True)],
        responses={
            201: ProposalSerializer,
            400: MemoryErrorSerializer,
            403: NOT_SIGNED_IN_RESPONSE,
            404: _failure("tidy_not_offered: this deployment has no Tidy up (no TIDY_MODEL, or "
                                            "memory is not rolled out)."),
            409: _failure("nothing_to_tidy: fewer than two entries, or the assistant found "
                                                "nothing to change; memory_off: your memory switch is off."),
            410: ACCOUNT_GONE_RESPONSE,
            422: _failure("tidy_unusable: the answer did not name the entries each line came from "
                                         "(or added something new); tidy_over_capacity: it would not fit; "
                                         "tidy_refused: the threat scan refused a line; tidy_too_many_changes: "
                                         "more changes than one batch holds. Nothing was stored."),
            429: THROTTLED_RESPONSE,
            503: _failure("tidy_model_failed: the model failed or timed out; unavailable / "
                                             "database_unavailable: memory could not be read. Nothing was stored."),
        },
    )
    def post(self, request):
        data = request.data
        if not isinstance(data, dict):
            return error_response("invalid_body", _('Send a JSON object: {"target": "user"} or {"target": "memory"}.'))
        unknown = sorted(set(data) - {"target"})
        if unknown:
            return error_response("unknown_argument", _("Unknown field(s); only 'target' is accepted. Your memory "
                                                        "is always the signed-in person's."))
        target = data.get("target")
        if not isinstance(target, str) or target not in TARGETS:
            return error_response(tidy.INVALID_TARGET,
                                  _('"target" must be "user" (your profile) or "memory" (notes).'))
        try:
            proposal_id = tidy.propose(user_id=request.user.pk, target=target)
        except tidy.TidyFailed as failed:
            return error_response(failed.code, failed.message, status_code=failed.status)
        proposal = proposals.get(user_id=request.user.pk, proposal_id=proposal_id)
        return Response(ProposalSerializer(proposal_payload(proposal)).data, status=status.HTTP_201_CREATED)
