"""Request and response shapes of the chat API (also the OpenAPI schema).

`TurnRequestSerializer` is the one copy of the rules of a turn's request:
the REST turn (chat/api.py) and the socket's `user_message` frame
(chat/frames.py) both validate through it, and the socket turns its errors
into error frames by their codes (`MESSAGE_EMPTY`, `MESSAGE_TOO_LONG`,
`TEMPORARY_HAS_NO_CONVERSATION` and DRF's own).
"""
from django.conf import settings
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from rest_framework import serializers

from .models import Conversation, Message
from .turns import OUTCOME_MESSAGES


class StrictCharField(serializers.CharField):
    """A string as sent: a number or boolean is refused, not turned into text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: "7", 7.0 or true are refused, not turned into a number."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return data


# Error codes of the rules below that DRF does not name itself (chat/frames.py maps them to frame codes).
MESSAGE_EMPTY = "empty"
MESSAGE_TOO_LONG = "too_long"
TEMPORARY_HAS_NO_CONVERSATION = "temporary_has_no_conversation"


class EvalTurnRequestSerializer(serializers.Serializer):
    """The message of a turn. The limit is CHAT_MAX_MESSAGE_CHARS, or the context's "max_chars"."""

    content = StrictCharField(
        trim_whitespace=False, help_text="The message; at most CHAT_MAX_MESSAGE_CHARS characters."
    )

    def validate_content(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError(_("Write a message; it is empty."), code=MESSAGE_EMPTY)
        limit = self.context.get("max_chars", settings.CHAT_MAX_MESSAGE_CHARS)
        if len(value) > limit:
            raise serializers.ValidationError(
                _("The message has {count} characters; the limit is {limit}. Shorten it.").format(
                    count=number_format(len(value), force_grouping=True),
                    limit=number_format(limit, force_grouping=True),
                ),
                code=MESSAGE_TOO_LONG,
            )
        return value


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only: "yes", 1 or "false" are refused, not guessed."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class TurnRequestSerializer(EvalTurnRequestSerializer):
    conversation_id = StrictIntegerField(
        required=False, allow_null=True, min_value=1, help_text="null (or absent) starts a new conversation."
    )
    temporary = StrictBooleanField(
        required=False, default=False,
        help_text="true: a temporary turn that neither reads nor writes memory and is not stored "
                  "(conversation_id must be null or absent).",
    )

    def validate(self, attrs):
        if attrs.get("temporary") and attrs.get("conversation_id") is not None:
            raise serializers.ValidationError(
                {"conversation_id": _("A temporary turn is never stored, so it has no conversation; send null.")},
                code=TEMPORARY_HAS_NO_CONVERSATION,
            )
        return attrs


class DocumentUsageSerializer(serializers.Serializer):
    used = serializers.IntegerField()
    limit = serializers.IntegerField()
    percent = serializers.IntegerField()
    entries = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named label
    level = serializers.ChoiceField(choices=["ok", "warn", "full"], help_text="ok < 75 %, warn < 90 %, full.")


class MemoryUsageSerializer(serializers.Serializer):
    user = DocumentUsageSerializer()
    memory = DocumentUsageSerializer()


class MemoryOutcomeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=sorted(OUTCOME_MESSAGES))
    message = serializers.CharField()
    operation_count = serializers.IntegerField()
    changed = serializers.ListField(child=serializers.ChoiceField(choices=["user", "memory"]))
    usage = MemoryUsageSerializer(allow_null=True, help_text="Usage after a commit; null otherwise. Never content.")
    code = serializers.CharField(allow_blank=True)
    memory_full = serializers.BooleanField(
        help_text="true when the person should review their memory: a change did not fit, or it is 90 % full.",
    )
    proposal_id = serializers.IntegerField(
        allow_null=True, help_text="status proposed: the proposal to save or discard (/api/memory/proposals/).",
    )
    change_id = serializers.IntegerField(
        allow_null=True, required=False,
        help_text="status committed with a change: the change to undo (/api/memory/changes/<id>/undo/).",
    )
    until = serializers.DateField(
        allow_null=True, required=False,
        help_text="status committed: the last day of what this turn saved with an expiry; null for none.",
    )


class TurnResponseSerializer(serializers.Serializer):
    turn_id = serializers.CharField()
    conversation_id = serializers.IntegerField(allow_null=True)
    temporary = serializers.BooleanField(help_text="true for a temporary turn: nothing of it was stored.")
    message_id = serializers.IntegerField(allow_null=True)
    reply = serializers.CharField(allow_blank=True)
    model = serializers.CharField()
    memory = MemoryOutcomeSerializer()
    notice = serializers.CharField(
        allow_blank=True,
        help_text="A plain sentence when the reply could not be saved in the conversation history "
        "(the memory outcome still holds); empty otherwise.",
    )


class TurnFailureSerializer(serializers.Serializer):
    turn_id = serializers.CharField(allow_blank=True)
    conversation_id = serializers.IntegerField(allow_null=True)
    temporary = serializers.BooleanField()
    code = serializers.CharField()
    detail = serializers.CharField()
    memory = MemoryOutcomeSerializer()


class TurnConflictSerializer(serializers.Serializer):
    """409 and 422 of an Idempotency-Key: the key is busy, or it was used for another request."""

    code = serializers.CharField(help_text="idempotency_key_in_use (409) or idempotency_key_reused (422).")
    detail = serializers.CharField(help_text="What happened and what to do next, as a plain sentence.")
    retry_after = serializers.IntegerField(required=False, help_text="409: seconds to wait (also in Retry-After).")


class EvalTurnResponseSerializer(serializers.Serializer):
    turn_id = serializers.CharField()
    reply = serializers.CharField(allow_blank=True)
    model = serializers.CharField()


class ConversationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at"]
        read_only_fields = fields


class MessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = ["id", "role", "content", "memory_outcome", "turn_id", "created_at"]
        read_only_fields = fields


class DeletedSerializer(serializers.Serializer):
    deleted = serializers.IntegerField(help_text="How many conversations were deleted.")
