"""The app's settings: one namespaced AGENTMEMORY dict with defaults.

Read through `memory_settings()` at call time, never at import time, so
tests and `override_settings` see the value in force.
"""
from dataclasses import dataclass
from types import MappingProxyType

from django.conf import settings

DEFAULTS = {
    # Rollout flag: off means no memory block, no tool, tables untouched.
    "ENABLED": False,
    "USER_LIMIT": 1375,
    "MEMORY_LIMIT": 2200,
    # Adds content to approved attributes of our own spans only.
    "CAPTURE_CONTENT": False,
    # Failed memory_update calls in one turn before the tool says stop.
    "MAX_TOOL_FAILURES": 3,
    # Attempts of one commit transaction when the database reports a deadlock
    # or serialization failure.
    "COMMIT_ATTEMPTS": 3,
    "RETRY_BACKOFF_SECONDS": 0.02,
}


@dataclass(frozen=True)
class MemorySettings:
    enabled: bool
    limits: MappingProxyType
    capture_content: bool
    max_tool_failures: int
    commit_attempts: int
    retry_backoff_seconds: float


def memory_settings() -> MemorySettings:
    """Return the settings in force, with defaults for what is not set."""
    values = {**DEFAULTS, **getattr(settings, "AGENTMEMORY", {})}
    return MemorySettings(
        enabled=bool(values["ENABLED"]),
        limits=MappingProxyType({"user": int(values["USER_LIMIT"]), "memory": int(values["MEMORY_LIMIT"])}),
        capture_content=bool(values["CAPTURE_CONTENT"]),
        max_tool_failures=int(values["MAX_TOOL_FAILURES"]),
        commit_attempts=int(values["COMMIT_ATTEMPTS"]),
        retry_backoff_seconds=float(values["RETRY_BACKOFF_SECONDS"]),
    )
