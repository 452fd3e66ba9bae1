"""Proposals ("ask before saving"): list, read, discard and save the caller's pending ones."""
from __future__ import annotations

from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from .. import proposals, services
from ..selectors import (
    memory_state,
    proposal_payload,
    state_payload,
)
from ..serializers import (
    CommitResponseSerializer,
    MemoryErrorSerializer,
    ProposalListSerializer,
    ProposalSaveSerializer,
    ProposalSerializer,
)
from .base import (
    ACCOUNT_GONE_RESPONSE,
    NOT_SIGNED_IN_RESPONSE,
    THROTTLED_RESPONSE,
    UNAVAILABLE_RESPONSE,
    MemoryAPIView,
    error_response,
)

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
            return error_response("proposal_not_found", _("No pending proposal of yours has this id: it was saved, "
                                                          "discarded or has expired."),
                                  status_code=status.HTTP_404_NOT_FOUND)
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
        operation_id="memory_proposal_read", parameters=[PROPOSAL_ID], tags=["memory"],
        summary="One pending memory proposal",
        responses={200: ProposalSerializer, 403: NOT_SIGNED_IN_RESPONSE, 404: PROPOSAL_GONE},
    )
    def get(self, request, pk: str):
        proposal = proposals.get(user_id=request.user.pk, proposal_id=_proposal_id(pk))
        return Response(ProposalSerializer(proposal_payload(proposal)).data)

    @extend_schema(
        operation_id="memory_proposal_discard", parameters=[PROPOSAL_ID], tags=["memory"],
        summary="Discard a memory proposal",
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
        operation_id="memory_proposal_save", parameters=[PROPOSAL_ID], tags=["memory"],
        summary="Save a memory proposal",
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
            return error_response(
                "invalid_body", _('Send a JSON object: {} or {"edits": [{"position": 1, "content": "..."}]}.')
            )
        unknown = sorted(set(data) - {"edits"})
        if unknown:
            return error_response("unknown_argument", _("Unknown field(s) %(fields)s; only 'edits' is accepted.")
                                  % {"fields": ", ".join(repr(n) for n in unknown)})
        edits = data.get("edits", [])
        if not isinstance(edits, list) or not all(
            isinstance(item, dict) and set(item) == {"position", "content"}
            and isinstance(item["position"], int) and not isinstance(item["position"], bool)
            and isinstance(item["content"], str)
            for item in edits
        ):
            return error_response("invalid_edit",
                                  _('"edits" must be a list of {"position": <int>, "content": "<text>"}.'))
        result = services.save_proposal(user_id=request.user.pk, proposal_id=proposal_id,
                                        edits={item["position"]: item["content"] for item in edits})
        payload = state_payload(memory_state(user_id=request.user.pk))
        payload.update(outcome=result.outcome, changed=list(result.changed))
        return Response(CommitResponseSerializer(payload).data)
