"""Tell a person's open pages that their memory changed (usage only).

Every open chat socket of a person joins `group_name(user_id)` on the channel
layer; a commit from any process reaches them all. A failing channel layer
never fails the commit that already happened: it is logged and reported.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from asgiref.sync import async_to_sync

from .rules import TARGETS, Snapshot, usage

logger = logging.getLogger(__name__)


def get_channel_layer():
    """The channel layer, or None when there is none to tell.

    Live updates need channels (the `live` extra) and CHANNEL_LAYERS; a
    project without them still commits memory, it just has no open pages to
    tell.
    """
    try:
        from channels.layers import get_channel_layer as channels_layer
    except ImportError:
        return None
    return channels_layer()


def group_name(user_id) -> str:
    return f"agentmemory.user.{user_id}"


def usage_payload(snapshot: Snapshot, limits: Mapping[str, int]) -> dict:
    """Return per-document usage, with no content, for events and the UI (the label in the active language)."""
    from .words import usage_label  # words reads the turn's sentences, and the turn this module

    payload = {}
    for target in TARGETS:
        measured = usage(snapshot, target, limits)
        payload[target] = {
            "used": measured.used,
            "limit": measured.limit,
            "percent": measured.percent,
            "entries": len(snapshot.entries(target)),
            "label": usage_label(measured),
            "level": measured.level,
        }
    return payload


async def broadcast_memory_changed(user_id, snapshot: Snapshot, limits: Mapping[str, int]) -> bool | None:
    """Send `memory_changed` to every open socket of the person; return success
    (None: no channel layer is configured, so there is nobody to tell)."""
    layer = get_channel_layer()
    if layer is None:
        return None
    try:
        await layer.group_send(
            group_name(user_id),
            {"type": "memory.changed", "usage": usage_payload(snapshot, limits)},
        )
    except Exception as exc:
        logger.warning("memory_changed not delivered: channel layer error %s", type(exc).__name__)
        return False
    return True


def broadcast_memory_changed_sync(user_id, snapshot: Snapshot, limits: Mapping[str, int]) -> bool | None:
    return async_to_sync(broadcast_memory_changed)(user_id, snapshot, limits)


async def broadcast_settings_changed(user_id, *, use_memory: bool) -> bool | None:
    """Send `memory_settings` (the person's switch) to every open socket of the person (None: no layer)."""
    layer = get_channel_layer()
    if layer is None:
        return None
    try:
        await layer.group_send(group_name(user_id), {"type": "memory.settings", "use_memory": use_memory})
    except Exception as exc:
        logger.warning("memory_settings not delivered: channel layer error %s", type(exc).__name__)
        return False
    return True


def broadcast_settings_changed_sync(user_id, *, use_memory: bool) -> bool | None:
    return async_to_sync(broadcast_settings_changed)(user_id, use_memory=use_memory)
