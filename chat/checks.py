"""System checks for the chat's model settings (`manage.py check`, and at start-up).

A turn must always end: these catch a cap or a deadline that would let one
run without bound, and a cap field the client would not know how to send.
"""
from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, register

MAX_TOKENS_FIELDS = ("auto", "max_tokens", "max_completion_tokens")


@register(Tags.compatibility)
def check_turn_bounds(app_configs=None, **kwargs):
    """The output cap and the turn deadline must be positive; the cap field must be known."""
    errors = []
    cap = getattr(settings, "OPENAI_MAX_TOKENS", 1024)
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
        errors.append(Error(
            f"OPENAI_MAX_TOKENS is {cap!r}; it must be a whole number of tokens, at least 1.",
            hint="Set OPENAI_MAX_TOKENS to the longest answer one model request may write, e.g. the default 1024.",
            id="chat.E001",
        ))
    field = getattr(settings, "OPENAI_MAX_TOKENS_FIELD", "auto")
    if field not in MAX_TOKENS_FIELDS:
        errors.append(Error(
            f"OPENAI_MAX_TOKENS_FIELD is {field!r}; it must be one of {', '.join(MAX_TOKENS_FIELDS)}.",
            hint="Leave it at auto unless your endpoint refuses the field auto picks.",
            id="chat.E002",
        ))
    deadline = getattr(settings, "CHAT_TURN_TIMEOUT_SECONDS", 120.0)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0:
        errors.append(Error(
            f"CHAT_TURN_TIMEOUT_SECONDS is {deadline!r}; it must be a number of seconds above 0.",
            hint="Set CHAT_TURN_TIMEOUT_SECONDS to the longest a turn may run, e.g. the default 120.",
            id="chat.E003",
        ))
    retention = getattr(settings, "CHAT_RETENTION_DAYS", 0)
    if isinstance(retention, bool) or not isinstance(retention, int) or retention < 0:
        errors.append(Error(
            f"CHAT_RETENTION_DAYS is {retention!r}; it must be a whole number of days, 0 (off) or more.",
            hint="Set CHAT_RETENTION_DAYS to how long conversations are kept, or 0 to keep them.",
            id="chat.E004",
        ))
    return errors
