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
"""
from __future__ import annotations

import json
from dataclasses import dataclass

# A frame may carry JSON escapes (up to 6 characters per character) and a
# little structure around the content; anything larger is refused unparsed.
FRAME_OVERHEAD_CHARS = 1024
ESCAPE_FACTOR = 6


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
        raise FrameError("binary_frame", "Send text frames holding JSON objects.")
    if len(text) > max_chars * ESCAPE_FACTOR + FRAME_OVERHEAD_CHARS:
        raise FrameError("frame_too_large", f"The frame is too large; messages hold at most {max_chars:,} characters.")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested thousands deep
        raise FrameError("malformed_json", "The frame is not valid JSON; send a JSON object with a \"type\".") from None
    if not isinstance(data, dict):
        raise FrameError("malformed_frame", "Send a JSON object with a \"type\".")
    kind = data.get("type")
    if kind == "cancel":
        return Cancel()
    if kind != "user_message":
        raise FrameError("unknown_type", "Unknown frame type; send \"user_message\" or \"cancel\".")
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        raise FrameError("invalid_content", "\"content\" must be a non-empty string.")
    if not _storable(content):
        # The REST API refuses these too (DRF's CharField); no database can store them as text.
        raise FrameError(
            "invalid_content",
            "\"content\" must not contain NUL characters or lone surrogates; remove them and send again.",
        )
    if len(content) > max_chars:
        raise FrameError(
            "message_too_long", f"The message has {len(content):,} characters; the limit is {max_chars:,}. Shorten it."
        )
    conversation_id = data.get("conversation_id")
    if conversation_id is not None and (
        isinstance(conversation_id, bool) or not isinstance(conversation_id, int) or conversation_id < 1
    ):
        raise FrameError("invalid_conversation_id", "\"conversation_id\" must be null or the id of your conversation.")
    temporary = data.get("temporary", False)
    if not isinstance(temporary, bool):
        raise FrameError("invalid_temporary", "\"temporary\" must be true or false.")
    temporary_id = data.get("temporary_id")
    if not temporary:
        if temporary_id is not None:
            raise FrameError("invalid_temporary_id", "\"temporary_id\" continues a temporary chat; send it with "
                             "\"temporary\": true.")
        return UserMessage(content=content, conversation_id=conversation_id)
    if conversation_id is not None:
        raise FrameError("invalid_conversation_id", "A temporary chat is never stored, so it has no "
                         "\"conversation_id\"; send null.")
    if temporary_id is not None and (not isinstance(temporary_id, str) or not 0 < len(temporary_id) <= 64):
        raise FrameError("invalid_temporary_id", "\"temporary_id\" must be null (a new temporary chat) or the id "
                         "the server sent for this chat.")
    return UserMessage(content=content, conversation_id=None, temporary=True, temporary_id=temporary_id)


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from "\\ud800" in the JSON
        return False
    return True
