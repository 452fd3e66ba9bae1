"""The chat socket's client frames: parsing and checking, nothing else.

Client -> server:
    {"type": "user_message", "content": "...", "conversation_id": null | <id>}
    {"type": "user_message", "content": "...", "temporary": true, "temporary_id": null | "<id>"}
    {"type": "cancel"}

A temporary chat neither reads nor writes memory and is never stored: its
messages live only in the socket that holds it (`temporary_id` continues it;
null starts a new one, replacing the socket's previous temporary chat).

Server -> client (built by chat.turns and chat.consumers):
    {"type": "turn_started", "turn_id", "conversation_id", "temporary", "temporary_id"}
    {"type": "delta", "turn_id", "text"}            ("reset": true starts a fallback attempt over)
    {"type": "tool", "turn_id", "tool", "status", "operation_count", "message"}   metadata only
    {"type": "turn_completed", "turn_id", "conversation_id", "message": {...}, "memory": {...}}
    {"type": "turn_failed", "turn_id", "conversation_id", "code", "message", "memory": {...}}
    {"type": "error", "code", "message"}              a bad frame; the socket stays open
    {"type": "memory_changed", "usage": {...}}        usage only, on every socket of the person
    {"type": "memory_settings", "use_memory": bool}   the person switched memory on or off (any page)

turn_completed and turn_failed also carry "temporary" and "temporary_id".

A `user_message` is checked by the REST turn's own serializer
(chat.serializers.TurnRequestSerializer: the content, its length, the
conversation id, the temporary flag), so each rule lives once; this module
adds only what is the socket's own (the frame's size, JSON and type, and
`temporary_id`) and words the serializer's errors as error frames.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.utils.formats import number_format
from django.utils.translation import gettext as _

from .serializers import MESSAGE_TOO_LONG, TEMPORARY_HAS_NO_CONVERSATION, TurnRequestSerializer

# A frame may carry JSON escapes (up to 6 characters per character) and a
# little structure around the content; anything larger is refused unparsed.
FRAME_OVERHEAD_CHARS = 1024
ESCAPE_FACTOR = 6
# DRF's codes for text no database can store as such (PostgreSQL refuses NUL; UTF-8 has no lone surrogates).
UNSTORABLE = {"null_characters_not_allowed", "surrogate_characters_not_allowed"}


@dataclass(frozen=True)
class UserMessage:
    content: str
    conversation_id: int | None
    temporary: bool = False
    temporary_id: str | None = None


@dataclass(frozen=True)
class Cancel:
    pass


class FrameError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def frame(self) -> dict:
        return {"type": "error", "code": self.code, "message": self.message}


def parse_client_frame(text: str | None, *, max_chars: int) -> UserMessage | Cancel:
    """Return the client's frame, or raise FrameError saying what to send instead."""
    if text is None:
        raise FrameError("binary_frame", _("Send text frames holding JSON objects."))
    if len(text) > max_chars * ESCAPE_FACTOR + FRAME_OVERHEAD_CHARS:
        raise FrameError("frame_too_large", _("The frame is too large; messages hold at most {limit} characters.")
                         .format(limit=number_format(max_chars, force_grouping=True)))
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested thousands deep
        raise FrameError("malformed_json", _("The frame is not valid JSON; send a JSON object with a \"type\".")) \
            from None
    if not isinstance(data, dict):
        raise FrameError("malformed_frame", _("Send a JSON object with a \"type\"."))
    kind = data.get("type")
    if kind == "cancel":
        return Cancel()
    if kind != "user_message":
        raise FrameError("unknown_type", _("Unknown frame type; send \"user_message\" or \"cancel\"."))
    request = TurnRequestSerializer(data=data, context={"max_chars": max_chars})
    if not request.is_valid():
        raise refusal(request.errors)
    message = request.validated_data
    temporary_id = data.get("temporary_id")
    if not message["temporary"]:
        if temporary_id is not None:
            raise FrameError("invalid_temporary_id", _("\"temporary_id\" continues a temporary chat; send it with "
                                                       "\"temporary\": true."))
        return UserMessage(content=message["content"], conversation_id=message.get("conversation_id"))
    if temporary_id is not None and (not isinstance(temporary_id, str) or not 0 < len(temporary_id) <= 64):
        raise FrameError("invalid_temporary_id", _("\"temporary_id\" must be null (a new temporary chat) or the id "
                                                   "the server sent for this chat."))
    return UserMessage(content=message["content"], conversation_id=None, temporary=True, temporary_id=temporary_id)


def refusal(errors: dict) -> FrameError:
    """The error frame for TurnRequestSerializer's errors: the first field's, in the frame's order."""
    if "content" in errors:
        [first, *_rest] = errors["content"]
        if first.code == MESSAGE_TOO_LONG:
            return FrameError("message_too_long", str(first))  # the serializer's sentence, as REST says it
        if first.code in UNSTORABLE:
            return FrameError("invalid_content", _("\"content\" must not contain NUL characters or lone "
                                                   "surrogates; remove them and send again."))
        return FrameError("invalid_content", _("\"content\" must be a non-empty string."))
    if "conversation_id" in errors:
        if errors["conversation_id"][0].code == TEMPORARY_HAS_NO_CONVERSATION:
            return FrameError("invalid_conversation_id", _("A temporary chat is never stored, so it has no "
                                                           "\"conversation_id\"; send null."))
        return FrameError("invalid_conversation_id",
                          _("\"conversation_id\" must be null or the id of your conversation."))
    if "temporary" in errors:
        return FrameError("invalid_temporary", _("\"temporary\" must be true or false."))
    # Unreachable while the serializer has only the fields above; a new one is refused, not a crash.
    return FrameError("malformed_frame", _("Send a JSON object with a \"type\"."))
