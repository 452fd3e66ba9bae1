"""The memory passport: import what another assistant kept as ONE proposal; export the Markdown pair."""
from __future__ import annotations

import re

from django.http import HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.throttling import UserRateThrottle

from .. import importing, passport, proposals, words
from ..rules import MemoryValidationError
from ..selectors import markdown_export, proposal_payload
from ..serializers import MemoryErrorSerializer, ProposalSerializer
from ..throttling import FailOpenThrottle
from .base import (
    ACCOUNT_GONE_RESPONSE,
    NOT_SIGNED_IN_RESPONSE,
    THROTTLED_RESPONSE,
    UNAVAILABLE_RESPONSE,
    MemoryAPIView,
    MemoryWriteThrottle,
    error_response,
)

# A JSON body holding an import of MAX_IMPORT_BYTES, every character escaped, is at most about six times as long.
MAX_BODY_BYTES = 6 * passport.MAX_IMPORT_BYTES + 4096
# A route's key: an item's number as ASCII digits ("²", "①" and other digits Python's isdigit takes are not).
_ITEM_NUMBER = re.compile(r"[0-9]{1,6}")


class ImportThrottle(FailOpenThrottle, UserRateThrottle):
    """Imports, and views of an import's review, per person: each reads up to 200 items, so they are counted apart.

    The rate is DEFAULT_THROTTLE_RATES["memory_imports"] when the project
    sets one, else DEFAULT_RATE. The memory page's import and its review
    screen count here too (`agentmemory.views`).
    """

    scope = "memory_imports"
    DEFAULT_RATE = "10/min"

    def get_rate(self):
        return self.THROTTLE_RATES.get(self.scope) or self.DEFAULT_RATE


class ImportRequestSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="What another assistant kept, as text: ChatGPT's saved memories (one a "
                                 "line), Claude's memory files or our Markdown pair, a mem0 or Letta JSON export "
                                 "(as a string), our JSON export, or a plain list. At most 256 KB (UTF-8), 200 "
                                 "items, 1,000 characters an item.")
    routes = serializers.DictField(child=serializers.ChoiceField(choices=importing.ROUTES), required=False,
                                   help_text='Per item, by its number in the import (1-based, as read): "user", '
                                   '"memory" or "skip". Items not named go where the trusted rule routes them.')


class RefusedItemSerializer(serializers.Serializer):
    content = serializers.CharField(help_text="The item's text; empty for a secret, which is never sent back.")
    code = serializers.CharField(help_text="Why: already_stored, repeated, expiry_past, or the rule's code "
                                 "(threat_secret, threat_prompt_injection, ...).")
    reason = serializers.CharField(help_text="The same, as a sentence for the person.")


class ImportResponseSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=passport.FORMATS)
    proposal = ProposalSerializer(allow_null=True, help_text="The pending proposal (save it with "
                                  "/api/memory/proposals/{id}/save/); null when nothing could be added.")
    refused = RefusedItemSerializer(many=True)
    over_capacity = serializers.ListField(child=serializers.CharField(), help_text="Documents the proposal would "
                                          "not fit in: its save is refused (over_capacity) until there is room.")


def _failure(description: str) -> OpenApiResponse:
    return OpenApiResponse(MemoryErrorSerializer, description=description)


class MemoryImportView(MemoryAPIView):
    """Import what another assistant kept, as one proposal to review."""

    throttle_classes = [MemoryWriteThrottle, ImportThrottle]

    @extend_schema(
        operation_id="memory_import", tags=["memory"], summary="Import memory from another assistant",
        description="The format is detected; each item is checked with the rules of every write (the threat scan, "
                    "the secret rules), items your memory already holds or the import repeats are refused, and "
                    "the rest is stored as ONE pending proposal, never written directly. Nothing changes until "
                    "you save it (all or nothing). Saved entries record 'imported' (the format) in their "
                    "provenance. A bad file is refused whole with a code; nothing is stored.",
        request=ImportRequestSerializer,
        examples=[OpenApiExample("ChatGPT's memories", request_only=True,
                                 value={"text": "Prefers metric units.\nIs training for a half marathon.",
                                        "routes": {"2": "memory"}})],
        responses={
            200: OpenApiResponse(ImportResponseSerializer, description="Nothing could be added: proposal is null."),
            201: ImportResponseSerializer,
            400: _failure("import_encoding, import_invalid_json, import_unknown_format, import_empty, "
                          "import_too_many, import_item_too_long, import_split_phrases (more than a few pairs of "
                          "items read as one instruction), invalid_route, invalid_body. Nothing stored."),
            409: _failure("erased: your memory was erased while the import was read. Nothing stored."),
            403: NOT_SIGNED_IN_RESPONSE,
            410: ACCOUNT_GONE_RESPONSE,
            413: _failure("import_too_large: over 256 KB. Nothing stored."),
            429: THROTTLED_RESPONSE,
            503: UNAVAILABLE_RESPONSE,
        },
    )
    def post(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > MAX_BODY_BYTES:
            return error_response("import_too_large", words.import_refused("import_too_large"),
                                  status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        body = ImportRequestSerializer(data=request.data)
        if not isinstance(request.data, dict) or not body.is_valid():
            return error_response("invalid_body", _('Send a JSON object: {"text": "...", "routes": {"1": "memory"}}.'))
        routes = {}
        for number, target in (body.validated_data.get("routes") or {}).items():
            if not _ITEM_NUMBER.fullmatch(str(number)):
                return error_response("invalid_route", words.import_save_message("invalid_route_key"))
            routes[int(number)] = target
        try:
            result = importing.propose(user_id=request.user.pk, data=body.validated_data["text"], routes=routes)
        except passport.ImportRefused as refused:
            code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE if refused.code == "import_too_large" else 400
            return error_response(refused.code, words.import_refused(refused.code), status_code=code)
        except MemoryValidationError as exc:
            return error_response(exc.code, words.import_save_message(exc.code),
                                  status_code=status.HTTP_409_CONFLICT if exc.code == "erased" else 400)
        proposal = (proposals.get(user_id=request.user.pk, proposal_id=result.proposal_id)
                    if result.proposal_id is not None else None)
        payload = {
            "format": result.format,
            "proposal": proposal_payload(proposal) if proposal is not None else None,
            "refused": [{"content": item.content, "code": item.code, "reason": words.import_item_reason(item.code)}
                        for item in result.refused],
            "over_capacity": list(result.over_capacity),
        }
        return Response(ImportResponseSerializer(payload).data,
                        status=status.HTTP_201_CREATED if proposal is not None else status.HTTP_200_OK)


class MemoryMarkdownExportView(MemoryAPIView):
    """Download the caller's memory as the Markdown pair."""

    @extend_schema(
        operation_id="memory_export_markdown", tags=["memory"], summary="Export your memory as Markdown files",
        description="Both documents as Claude's memory files in one text: '/memories/profile.md' then "
                    "'/memories/notes.md', each followed by its entries, one '- ' line each, an expiry as "
                    "' (until YYYY-MM-DD)'. POST it to /api/memory/import/ (here or elsewhere) to bring it back.",
        responses={(200, "text/markdown"): OpenApiTypes.STR, 403: NOT_SIGNED_IN_RESPONSE,
                   503: UNAVAILABLE_RESPONSE},
    )
    def get(self, request):
        now = timezone.now()
        response = HttpResponse(markdown_export(user_id=request.user.pk), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="memory-{now:%Y%m%d-%H%M%S}.md"'
        response["Cache-Control"] = "no-store"
        return response
