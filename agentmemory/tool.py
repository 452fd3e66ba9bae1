"""The one memory tool the model gets: `memory_update`.

The handler takes no identity: it reads the request's binding from
`scope.py`. It never writes to the database; it stages the batch on the
turn's ledger, and the turn commits the ledger only after it succeeds. Its
replies are for the model: usage on success, the reason and what to do next
on failure (previews of the candidates on an ambiguous match, the current
entries on overflow so that one batch can consolidate).
"""
from __future__ import annotations

import json
from collections.abc import Mapping

from .conf import memory_settings
from .rules import (
    TARGETS,
    MemoryValidationError,
    Operation,
    Snapshot,
    parse_operations,
    usage,
)
from .scope import get_memory_request, stage_operations
from .telemetry import traced_tool

TOOL_NAME = "memory_update"

PARAMETERS = {
    "type": "object",
    "properties": {
        "operations": {
            "type": "array",
            "minItems": 1,
            "maxItems": 20,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "target": {"enum": ["user", "memory"]},
                    "action": {"enum": ["add", "replace", "remove"]},
                    "match": {"type": ["string", "null"]},
                    "content": {"type": ["string", "null"]},
                },
                "required": ["target", "action"],
            },
        }
    },
    "required": ["operations"],
}

DESCRIPTION = (
    "Change your persistent memory of the signed-in user. 'user' holds their profile "
    "(role, preferences, expertise, style); 'memory' holds durable notes (project facts, "
    "conventions, environment, lessons). Operations run in order: add (content only), "
    "replace (match = a unique substring of one entry, content = the complete new entry), "
    "remove (match only). Capacity is checked after the whole batch, so consolidate and add "
    "in one call. Changes are saved only when this turn completes."
)

MEMORY_UPDATE_TOOL = {
    "type": "function",
    "function": {"name": TOOL_NAME, "description": DESCRIPTION, "parameters": PARAMETERS},
}


@traced_tool
def handle_memory_update(arguments: str | Mapping) -> dict:
    """Stage a batch from the model on the current turn's ledger; return the reply."""
    request = get_memory_request()
    if request is None:
        return _refusal("no_scope", "Memory is not available here; nothing was saved. Answer without it.")
    if not request.writes_enabled or request.ledger is None:
        return _refusal(
            "unavailable",
            "Memory is unavailable for this turn; nothing was saved. Answer the user without saving.",
        )
    ledger = request.ledger
    limit = memory_settings().max_tool_failures
    if ledger.failed_calls >= limit:
        return _stop_retrying(limit)

    try:
        raw = json.loads(arguments) if isinstance(arguments, str) else arguments
        operations = parse_operations(raw)
        snapshot = stage_operations(ledger, operations, request.limits)
    except (ValueError, MemoryValidationError) as exc:
        ledger.failed_calls += 1
        if ledger.failed_calls >= limit:
            return _stop_retrying(limit)
        return _failure(exc, ledger.snapshot)

    return {
        "success": True,
        "status": "staged",
        "message": f"Staged {_count(len(operations))}; saved when this turn completes.",
        "usage": {target: str(usage(snapshot, target, request.limits)) for target in TARGETS},
        "entry_counts": {target: len(snapshot.entries(target)) for target in TARGETS},
    }


def staged_operations() -> list[Operation]:
    """Return what the current turn has staged (empty without a writable scope)."""
    request = get_memory_request()
    if request is None or request.ledger is None:
        return []
    return list(request.ledger.operations)


def _failure(exc: Exception, current: Snapshot) -> dict:
    if not isinstance(exc, MemoryValidationError):
        return {
            "success": False,
            "status": "rejected",
            "code": "invalid_json",
            "error": "The arguments are not valid JSON. Nothing was staged; send "
            '{"operations": [...]} again.',
        }
    reply = {
        "success": False,
        "status": "rejected",
        "code": exc.code,
        "error": f"{exc} Nothing in this batch was staged.",
    }
    if exc.position is not None:
        reply["position"] = exc.position
    if exc.candidates:
        reply["candidates"] = list(exc.candidates)
    if exc.code == "over_capacity" and exc.target:
        # What is stored or staged now, not the rejected result: the model
        # matches against these entries to consolidate in its next batch.
        reply["current_entries"] = list(current.entries(exc.target))
    return reply


def _refusal(code: str, message: str) -> dict:
    return {"success": False, "status": code, "code": code, "error": message}


def _stop_retrying(limit: int) -> dict:
    return _refusal(
        "stop_retrying",
        f"memory_update failed {limit} times in this turn. Stop retrying: answer the user now "
        "and, if it matters, tell them the memory change was not made.",
    )


def _count(n: int) -> str:
    return f"{n} operation" + ("" if n == 1 else "s")
