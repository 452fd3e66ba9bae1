"""The chat WebSocket: a thin shell that turns frames into `run_turn` calls.

It authenticates (anonymous sockets are closed with 4401), parses frames
(`chat.frames`), runs at most one turn at a time as a task of its own so a
`cancel` frame or a disconnect can stop it, and relays the turn's frames.
It also joins the person's memory group, so a commit from any socket or the
memory page reaches every open page as `memory_changed`.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agentmemory.notify import group_name

from .frames import Cancel, FrameError, parse_client_frame
from .turns import TurnError, run_turn

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401


class ChatConsumer(AsyncWebsocketConsumer):
    user = None
    group: str | None = None
    turn: asyncio.Task | None = None
    cancel_event: threading.Event | None = None
    closed = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept, then close: a browser sees the 4401 code only after a handshake.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.group = group_name(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def disconnect(self, code) -> None:
        self.closed = True
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        await self._stop_turn()

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if self.user is None:
            return
        try:
            frame = parse_client_frame(text_data, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        except FrameError as exc:
            await self._send(exc.frame())
            return
        if isinstance(frame, Cancel):
            await self._stop_turn(wait=False)
            return
        if self.turn is not None and not self.turn.done():
            await self._send({"type": "error", "code": "turn_in_progress",
                              "message": "A turn is still running; wait for it or send {\"type\": \"cancel\"}."})
            return
        self.cancel_event = threading.Event()
        self.turn = asyncio.create_task(self._run(frame.content, frame.conversation_id, self.cancel_event))

    async def memory_changed(self, event) -> None:
        """Group message `memory.changed` from agentmemory.notify."""
        await self._send({"type": "memory_changed", "usage": event.get("usage")})

    async def _run(self, content: str, conversation_id: int | None, cancel_event: threading.Event) -> None:
        try:
            await run_turn(user=self.user, content=content, conversation_id=conversation_id,
                           emit=self._send, cancel_event=cancel_event)
        except TurnError as exc:
            if not hasattr(exc, "failed_frame"):  # failed turns already sent turn_failed
                await self._send({"type": "error", "code": exc.code, "message": str(exc)})
        except asyncio.CancelledError:
            pass  # the turn sent turn_failed (if the socket is still open) and discarded its ledger
        except Exception as exc:
            logger.error("chat socket turn crashed: %s", type(exc).__name__)
            await self._send({"type": "error", "code": "internal_error",
                              "message": "Something went wrong on our side; nothing was saved. Try again."})

    async def _stop_turn(self, *, wait: bool = True) -> None:
        turn = self.turn
        if turn is None or turn.done():
            return
        if self.cancel_event is not None:
            self.cancel_event.set()
        turn.cancel()
        if wait:
            await asyncio.wait([turn])

    async def _send(self, frame: dict) -> None:
        if not self.closed:
            await self.send(text_data=json.dumps(frame))
