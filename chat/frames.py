"""The chat socket's client frames: parsing and checking, nothing else.

Client -> server:
    {"type": "user_message", "content": "...", "conversation_id": null | <id>}
    {"type": "cancel"}

Server -> client (built by chat.turns and chat.consumers):
    {"type": "turn_started", "turn_id", "conversation_id"}
    {"type": "delta", "turn_id", "text"}            ("reset": true starts a fallback attempt over)
    {"type": "tool", "turn_id", "tool", "status", "operation_count", "message"}   metadata only
    {"type": "turn_completed", "turn_id", "conversation_id", "message": {...}, "memory": {...}}
    {"type": "turn_failed", "turn_id", "conversation_id", "code", "message", "memory": {...}}
    {"type": "error", "code", "message"}              a bad frame; the socket stays open
    {"type": "memory_changed", "usage": {...}}        usage only, on every socket of the person
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
            "invalid_content", "\"content\" must not contain NUL characters or lone surrogates; remove them and send again."
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
    return UserMessage(content=content, conversation_id=conversation_id)


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, e.g. from "\\ud800" in the JSON
        return False
    return True
