"""The caller's history of changes: read each kept change, undo one, restore the version it left."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from .. import services, versions, words
from ..conf import memory_settings
from ..rules import MemoryValidationError
from ..selectors import (
    change_payload,
    memory_state,
    state_payload,
)
from ..serializers import (
    ChangeListSerializer,
    ChangeSerializer,
    MemoryErrorSerializer,
    UndoResponseSerializer,
)
from .base import (
    ACCOUNT_GONE_RESPONSE,
    NOT_SIGNED_IN_RESPONSE,
    THROTTLED_RESPONSE,
    UNAVAILABLE_RESPONSE,
    MemoryAPIView,
    error_response,
)
from .memory import commit_confirmed, unknown_outcome_response

# --- versions: undo and restore -----------------------------------------------------


CHANGE_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH,
                             description="The change's id (`change_id` of a chat turn's memory outcome).")
CHANGE_GONE = OpenApiResponse(MemoryErrorSerializer, description="change_not_found: no kept change of yours has "
                              "this id (pruned, erased, or not yours).")
CHANGE_CONFLICT = OpenApiResponse(MemoryErrorSerializer, description=(
    "conflict: an entry the change wrote has changed since (undo), or your memory changed while the restore "
    "was applied; nothing was changed. nothing_to_undo / already_restored: memory already holds it."))


UNCONFIRMED_NOTE = (" If the connection to the database fails while it commits, the database is asked (for up to "
                    "AGENTMEMORY_COMMIT_CONFIRM_SECONDS) whether it is stored: not stored is 503 connection_lost, "
                    "no answer in time 503 unconfirmed (your history shows the truth once the database answers).")

UNDO_RESPONSES = {200: UndoResponseSerializer, 400: MemoryErrorSerializer, 403: NOT_SIGNED_IN_RESPONSE,
                  404: CHANGE_GONE, 409: CHANGE_CONFLICT, 410: ACCOUNT_GONE_RESPONSE, 429: THROTTLED_RESPONSE,
                  503: UNAVAILABLE_RESPONSE}


class ChangeAPIView(MemoryAPIView):
    # Refusals that are about the memory's state, not the request's shape.
    CONFLICT_CODES = frozenset({"conflict", "no_match", "ambiguous_match", "entry_changed", "nothing_to_undo",
                                "already_restored"})
    action = "undo"

    def handle_exception(self, exc):
        answer = unknown_outcome_response(exc)
        if answer is not None:
            return answer
        if isinstance(exc, versions.ChangeGone):
            return error_response("change_not_found", str(words.CHANGE_GONE), status_code=status.HTTP_404_NOT_FOUND)
        if isinstance(exc, MemoryValidationError):
            # The person's words, not the model's: an undo is never a model's batch.
            detail = words.undo_message(exc.code, action=self.action, target=exc.target,
                                        limits=memory_settings().limits)
            conflict = exc.code in self.CONFLICT_CODES
            code = "conflict" if exc.code in ("no_match", "ambiguous_match", "entry_changed") else exc.code
            return error_response(code, detail, status_code=status.HTTP_409_CONFLICT if conflict else 400)
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
                    "as for any change. The undo is itself a change, which can be undone." + UNCONFIRMED_NOTE,
        request=None,
        responses=UNDO_RESPONSES,
    )
    def post(self, request, pk: str):
        return self.committed(request, commit_confirmed(request, services.undo_change, change_id=pk))


class ChangeRestoreView(ChangeAPIView):
    """Restore the documents as one change left them."""

    action = "restore"

    @extend_schema(
        operation_id="memory_change_restore", parameters=[CHANGE_ID], tags=["memory"],
        summary="Restore the version a change left",
        description="Brings each document this change touched back to the entries it held right after the "
                    "change, in their order, all or nothing. Changes made since to those documents are undone "
                    "by it; if your memory changes while it is applied, nothing is changed (409 conflict). The "
                    "restore is itself a change, which can be undone." + UNCONFIRMED_NOTE,
        request=None,
        responses=UNDO_RESPONSES,
    )
    def post(self, request, pk: str):
        return self.committed(request, commit_confirmed(request, services.restore_change, change_id=pk))
