"""Tell a person's open pages that their memory changed (usage only).

Every open chat socket of a person joins `group_name(user_id)` on the channel
layer; a commit from any process reaches them all. A failing channel layer
never fails the commit that already happened: it is logged and reported.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from .rules import TARGETS, Snapshot, usage

logger = logging.getLogger(__name__)


def group_name(user_id) -> str:
    return f"agentmemory.user.{user_id}"


def usage_payload(snapshot: Snapshot, limits: Mapping[str, int]) -> dict:
    """Return per-document usage, with no content, for events and the UI."""
    payload = {}
    for target in TARGETS:
        measured = usage(snapshot, target, limits)
        payload[target] = {
            "used": measured.used,
            "limit": measured.limit,
            "percent": measured.percent,
            "entries": len(snapshot.entries(target)),
            "label": str(measured),
        }
    return payload


async def broadcast_memory_changed(user_id, snapshot: Snapshot, limits: Mapping[str, int]) -> bool:
    """Send `memory_changed` to every open socket of the person; return success."""
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        await layer.group_send(
            group_name(user_id),
            {"type": "memory.changed", "usage": usage_payload(snapshot, limits)},
        )
    except Exception as exc:
        logger.warning("memory_changed not delivered: channel layer error %s", type(exc).__name__)
        return False
    return True


def broadcast_memory_changed_sync(user_id, snapshot: Snapshot, limits: Mapping[str, int]) -> bool:
    return async_to_sync(broadcast_memory_changed)(user_id, snapshot, limits)
