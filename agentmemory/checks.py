"""System checks for the memory settings (`manage.py check`, and at start-up).

They catch configurations that would quietly break a boundary: limits the
threat scanner cannot cover, a retry or failure budget of zero, a wait
bound of zero, a memory policy that is not shipped, content
capture left on outside development, and a logging handler without the
redaction filter.
"""
from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from .conf import DEFAULTS
from .prompt import load_policy
from .threats import MAX_SCAN_CHARS

FILTER_PATH = "agentmemory.telemetry.RedactionFilter"


@register(Tags.compatibility)
def check_limits(app_configs=None, **kwargs):
    """Limits must be positive integers the threat scanner can cover."""
    values = {**DEFAULTS, **getattr(settings, "AGENTMEMORY", {})}
    errors = []
    for key in ("USER_LIMIT", "MEMORY_LIMIT"):
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_SCAN_CHARS:
            errors.append(
                Error(
                    f"AGENTMEMORY['{key}'] is {value!r}; it must be an integer from 1 to {MAX_SCAN_CHARS:,}.",
                    hint=f"Set AGENTMEMORY_{key} to a number of characters, e.g. the default {DEFAULTS[key]}.",
                    id="agentmemory.E001",
                )
            )
    if values["DEFAULT_SAVE_MODE"] not in ("auto", "ask"):
        errors.append(Error(
            f"AGENTMEMORY['DEFAULT_SAVE_MODE'] is {values['DEFAULT_SAVE_MODE']!r}; it must be \"auto\" or \"ask\".",
            hint="Set AGENTMEMORY_DEFAULT_SAVE_MODE to auto (save a finished reply's change) or ask (propose it).",
            id="agentmemory.E005",
        ))
    for key, unit in (("READ_TIMEOUT_SECONDS", "seconds"), ("COMMIT_LOCK_TIMEOUT_SECONDS", "seconds"),
                      ("PROPOSAL_TTL_DAYS", "days"), ("VERSION_RETENTION_DAYS", "days"),
                      ("IDEMPOTENCY_WINDOW_HOURS", "hours")):
        value = values[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            errors.append(
                Error(
                    f"AGENTMEMORY['{key}'] is {value!r}; it must be a number of {unit} above 0.",
                    hint=f"Remove it to use the default {DEFAULTS[key]}.",
                    id="agentmemory.E003",
                )
            )
    try:
        load_policy(str(values["POLICY_VERSION"]))
    except ValueError as exc:
        errors.append(Error(str(exc), hint="Set AGENTMEMORY_POLICY_VERSION to a shipped policy.",
                            id="agentmemory.E004"))
    for key in ("MAX_TOOL_FAILURES", "COMMIT_ATTEMPTS", "VERSIONS_KEPT"):
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            errors.append(
                Error(
                    f"AGENTMEMORY['{key}'] is {value!r}; it must be an integer of at least 1.",
                    hint=f"Remove it to use the default {DEFAULTS[key]}.",
                    id="agentmemory.E002",
                )
            )
    return errors


@register(Tags.security)
def check_capture_content(app_configs=None, **kwargs):
    """Content capture is for a controlled environment, never for production."""
    capture = getattr(settings, "AGENTMEMORY", {}).get("CAPTURE_CONTENT", DEFAULTS["CAPTURE_CONTENT"])
    if capture and not settings.DEBUG:
        return [
            Warning(
                "AGENTMEMORY_CAPTURE_CONTENT is on while DEBUG is off: memory content and tool "
                "arguments are added to trace spans that leave this process.",
                hint="Turn AGENTMEMORY_CAPTURE_CONTENT off unless this is a controlled debugging "
                "environment; traces are copies that a user's 'forget' cannot delete.",
                id="agentmemory.W001",
            )
        ]
    return []


@register(Tags.security)
def check_logging_redaction(app_configs=None, **kwargs):
    """Every configured logging handler must carry the redaction filter."""
    config = getattr(settings, "LOGGING", {}) or {}
    redacting = {
        name
        for name, spec in (config.get("filters") or {}).items()
        if isinstance(spec, dict) and spec.get("()") in (FILTER_PATH, _filter_class())
    }
    warnings = []
    for name, spec in (config.get("handlers") or {}).items():
        if not redacting.intersection(spec.get("filters") or ()):
            warnings.append(
                Warning(
                    f"LOGGING handler '{name}' has no redaction filter: at DEBUG it can write "
                    "request bodies, prompts and SQL parameters that hold memory content.",
                    hint=f"Add a filter {{'()': '{FILTER_PATH}'}} to LOGGING['filters'] and list it "
                    f"in the 'filters' of handler '{name}'.",
                    id="agentmemory.W002",
                )
            )
    return warnings


def _filter_class():
    from .telemetry import RedactionFilter

    return RedactionFilter
