"""The like-for-like floor of a plain chat turn, for bench/turns.py.

The same ASGI stack as config/asgi.py (origin check, session auth) and the
same chat socket (`chat.consumers.ChatConsumer`: session re-read, turn
budget and slot, the person's group), but each turn is the bare minimum a
turn must do: the conversation log's statements exactly as a memory-off
turn runs them (`chat.turns._prepare` and `chat.log.store_reply`, in worker threads:
one fixed statement each on PostgreSQL, chat/log.py) and the same frames (turn_started, the demo model's words as
deltas, turn_completed). No model SDK, no HTTP to a model, no agent loop,
no memory. What a real turn costs above this is the model client and our
turn service.

    python -m daphne bench._floor_asgi:application
"""
from __future__ import annotations

import os
import re
import threading
import uuid

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from config.socket_auth import SessionAuthStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from agentmemory.turn import DISABLED, MemoryOutcome, MemoryTurn  # noqa: E402
from chat import budget  # noqa: E402
from chat.consumers import ChatConsumer, _off_loop  # noqa: E402
from chat.demo_model import describe_memory  # noqa: E402
from chat import log  # noqa: E402
from agentmemory.workers import in_worker  # noqa: E402
from chat.turns import TemporaryChat, TurnResult, _prepare  # noqa: E402
from config.origins import ExactOriginValidator  # noqa: E402

# The demo model streams its reply word by word (chat/demo_model.py).
_WORD = re.compile(r"\S+\s*|\s+")
REPLY = describe_memory(None)
PIECES = _WORD.findall(REPLY)


class FloorConsumer(ChatConsumer):
    async def _run(self, content: str, conversation_id: int | None, cancel_event: threading.Event,
                   slot: budget.Slot, temporary: TemporaryChat | None = None) -> None:
        try:
            turn_id = uuid.uuid4().hex
            memory = MemoryTurn(user_id=self.user.pk, enabled=False)
            prepared = await in_worker(_prepare, user_id=self.user.pk, content=content,
                                        conversation_id=conversation_id, memory=memory)
            await self._send({"type": "turn_started", "turn_id": turn_id,
                              "conversation_id": prepared.conversation_id, "temporary": False,
                              "temporary_id": None})
            for piece in PIECES:
                await self._send({"type": "delta", "text": piece, "turn_id": turn_id})
            outcome = MemoryOutcome(DISABLED)
            message_id, created_at = await in_worker(
                log.store_reply, conversation_id=prepared.conversation_id, user_message_id=prepared.user_message_id,
                turn_id=turn_id, content=REPLY, outcome=outcome.status, metadata={"tools": [], "model": "demo"},
            )
            result = TurnResult(turn_id=turn_id, conversation_id=prepared.conversation_id, reply=REPLY,
                                model="demo", memory=outcome, message_id=message_id, created_at=created_at)
            await self._send(result.completed_frame())
        finally:
            self.turn_over = True
            await _off_loop(slot.release)


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": ExactOriginValidator(SessionAuthStack(URLRouter([path("ws/chat/", FloorConsumer.as_asgi())]))),
    }
)
