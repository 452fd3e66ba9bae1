"""The chat WebSocket: a thin shell that turns frames into `run_turn` calls.

It authenticates (anonymous sockets are closed with 4401), parses frames
(`chat.frames`), runs at most one turn at a time as a task of its own so a
`cancel` frame or a disconnect can stop it, and relays the turn's frames.
It also joins the person's memory group, so a commit from any socket or the
memory page reaches every open page as `memory_changed`.

The channel layer (Redis when several processes serve) carries only that
fan-out, so its failure must not end the chat: joining the group and
receiving from the layer are guarded. While the layer is down the socket
chats on without live updates, a warning says so, and it rejoins the group
once the layer answers again (a turn's outcome also says when its change
could not be announced).

Limits (chat/budget.py, shared with REST and across workers through the
cache): each turn spends the person's `CHAT_TURN_RATE` budget and takes one
of their `CHAT_MAX_CONCURRENT_TURNS` slots; a refusal is an `error` frame
with `retry_after` and nothing of the turn is written. Opening a socket past
`CHAT_MAX_SOCKETS_PER_PERSON` closes the person's oldest one (4429).

A temporary chat lives in this socket only (`TemporaryChat`, at most one per
socket): its messages are never stored and go when the socket closes.

The socket ends with the session (chat/signals.py): logout, a password
change, deactivation or deletion sends `session.ended` to the person's group
and every socket stops its turn and closes with 4401. Before each turn the
socket also re-reads its session, so a missed message still stops the next
turn, and the turn re-reads it before it commits a memory change
(`chat.credentials`), so a missed message cannot let a turn that outlived
its session commit.
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import HttpRequest
from django.utils import translation
from django.utils.formats import number_format
from django.utils.translation import gettext

from agentmemory.notify import group_name
from agentmemory.workers import in_worker

from . import budget
from .credentials import session_valid
from .frames import Cancel, FrameError, parse_client_frame
from .turns import TemporaryChat, TurnError, run_turn

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
# The person opened more than CHAT_MAX_SOCKETS_PER_PERSON sockets; this, their oldest, was closed.
CLOSE_TOO_MANY_SOCKETS = 4429
# A refused turn may be retried this soon when it waited only for another turn to end.
BUSY_RETRY_SECONDS = 2
# How long a socket waits before asking a failed channel layer again.
LAYER_RETRY_SECONDS = 2.0


class ChatConsumer(AsyncWebsocketConsumer):
    user: Any = None  # the signed-in user, from connect()
    group: str | None = None
    turn: asyncio.Task | None = None
    cancel_event: threading.Event | None = None
    closed = False
    in_group = False
    registered = False
    turn_over = True
    temporary_chat: TemporaryChat | None = None
    _layer_receive: Any = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._group_known = asyncio.Event()
        self._language: str | None = None

    async def dispatch(self, message) -> None:
        """Handle each message in the person's language, as LocaleMiddleware does for a request.

        A turn started here is a task that keeps the language, so its frames'
        sentences (and the memory outcome's) are in it; codes stay as they are.
        """
        if self._language is None:
            self._language = language_of(self.scope)
        with translation.override(self._language):
            await super().dispatch(message)

    # AsyncConsumer.__call__ assigns `channel_receive` and ends the socket if
    # it raises; this property hands it a receive that survives a failing layer.
    @property
    def channel_receive(self):
        return self._receive_from_layer

    @channel_receive.setter
    def channel_receive(self, receive) -> None:
        self._layer_receive = receive

    async def connect(self) -> None:
        user = self.scope.get("user")
        # Accept, then close: a browser sees the 4401 code only after a handshake.
        await self.accept()
        if user is None or not user.is_authenticated:
            self._group_known.set()
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.group = group_name(user.pk)
        await self._join_group()
        self._group_known.set()
        await self._register()

    async def _register(self) -> None:
        """Count this socket; close the person's oldest ones past the cap, on any worker."""
        if not self.channel_name:
            return
        evicted = await _off_loop(budget.register_socket, self.user.pk, self.channel_name)
        self.registered = True
        for channel in evicted:
            if channel == self.channel_name:
                continue
            try:
                await self.channel_layer.send(channel, {"type": "socket.evict"})
            except Exception as exc:
                logger.warning("oldest socket not closed: channel layer error %s", type(exc).__name__)

    async def socket_evict(self, event) -> None:
        """Channel message from a newer socket of the same person: this one is past the cap."""
        await self._end("too_many_sockets",
                        gettext("You have more than %(count)s chat pages open; this one, the oldest, was closed. "
                                "Close other pages, then reload this one.")
                        % {"count": number_format(settings.CHAT_MAX_SOCKETS_PER_PERSON, force_grouping=True)},
                        CLOSE_TOO_MANY_SOCKETS, registered=False)

    async def _end(self, code: str, message: str, close_code: int, *, registered: bool = True) -> None:
        """Stop the running turn (nothing of it is saved), say why, and close the socket."""
        if self.closed:
            return
        await self._stop_turn()
        await self._send({"type": "socket_closed", "code": code, "message": message})
        if not registered:
            self.registered = False  # the newer socket already took this one out of the registry
        await self.close(code=close_code)
        self.closed = True  # no frame and no turn after the close, whatever arrives before the handshake ends

    async def disconnect(self, code) -> None:
        self.closed = True
        if self.registered:
            self.registered = False
            await _off_loop(budget.unregister_socket, self.user.pk, self.channel_name)
        if self.group and self.in_group:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception as exc:  # the group entry expires by itself
                logger.warning("chat socket left its memory group uncleanly: channel layer error %s",
                               type(exc).__name__)
        await self._stop_turn()
        self.temporary_chat = None  # a temporary chat ends with its socket

    async def _join_group(self, *, quiet: bool = False) -> bool:
        try:
            await self.channel_layer.group_add(self.group, self.channel_name)
        except Exception as exc:
            if not quiet:
                logger.warning("chat socket has no live memory updates: channel layer error %s; check REDIS_URL "
                               "and that Redis is up (the socket rejoins when it answers)", type(exc).__name__)
            self.in_group = False
            return False
        self.in_group = True
        return True

    async def _receive_from_layer(self) -> dict:
        """Return the next group message; while the layer fails, wait and rejoin."""
        await self._group_known.wait()
        if self.group is None:
            await asyncio.Future()  # not signed in: no group, nothing to receive until the socket ends
        while True:
            if not self.in_group:
                await asyncio.sleep(LAYER_RETRY_SECONDS)
                if not await self._join_group(quiet=True):
                    continue
                logger.info("chat socket rejoined its memory group: live memory updates are back")
            try:
                return await self._layer_receive()
            except Exception as exc:
                logger.warning("chat socket stopped receiving live memory updates: channel layer error %s; "
                               "check REDIS_URL and that Redis is up (the socket rejoins when it answers)",
                               type(exc).__name__)
                self.in_group = False

    async def receive(self, text_data=None, bytes_data=None) -> None:
        if self.user is None or self.closed:
            return
        try:
            frame = parse_client_frame(text_data, max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        except FrameError as exc:
            await self._send(exc.frame())
            return
        if isinstance(frame, Cancel):
            await self._stop_turn(wait=False)
            return
        if self.turn is not None and not self.turn.done() and self.turn_over:
            await asyncio.wait([self.turn])  # the turn has ended; only its slot is being given back
        if self.turn is not None and not self.turn.done():
            await self._send({"type": "error", "code": "turn_in_progress",
                              "message": gettext('A turn is still running; wait for it or send {"type": "cancel"}.')})
            return
        temporary = None
        if frame.temporary:
            temporary = self._temporary_chat(frame.temporary_id)
            if temporary is None:
                await self._send({"type": "error", "code": "temporary_chat_gone",
                                  "message": gettext("This temporary chat has ended (temporary chats end when "
                                                     "their page is closed or reloaded); start a new one.")})
                return
        slot = await self._admit()
        if slot is None:
            return
        self.cancel_event = threading.Event()
        self.turn_over = False
        self.turn = asyncio.create_task(
            self._run(frame.content, frame.conversation_id, self.cancel_event, slot, temporary)
        )

    def _temporary_chat(self, temporary_id: str | None) -> TemporaryChat | None:
        """Return the socket's temporary chat to continue, a new one for no id, or None if it is gone."""
        if temporary_id is None:
            self.temporary_chat = TemporaryChat()
            return self.temporary_chat
        if self.temporary_chat is not None and self.temporary_chat.id == temporary_id:
            return self.temporary_chat
        return None

    async def _admit(self) -> budget.Slot | None:
        """Check the session, take a concurrent-turn slot and spend the rate budget; or say why not, None.

        One worker-thread handoff for the three: the session is read afresh
        first (signed out, password changed or account closed ends the socket,
        and nothing is spent), then the slot, then the rate.
        """
        session = self.scope.get("session")
        admitted = await _signed_in_then_admit(getattr(session, "session_key", None), self.user.pk)
        if admitted is None:
            await self.session_ended({})
            return None
        slot, decision = admitted
        if slot is not None:
            return slot
        if decision.allowed:  # the rate had room; every concurrent slot is taken
            await self._send({
                "type": "error", "code": "too_many_turns", "retry_after": BUSY_RETRY_SECONDS,
                "message": gettext("You already have %(count)s turns running in other pages; wait for one to "
                                   "finish, then send again.")
                % {"count": number_format(settings.CHAT_MAX_CONCURRENT_TURNS, force_grouping=True)},
            })
            return None
        await self._send({
            "type": "error", "code": "rate_limited", "retry_after": decision.retry_after,
            "message": gettext("Too many turns in a short time; nothing was sent to the model. "
                               "Try again in %(seconds)s seconds.")
            % {"seconds": number_format(decision.retry_after, force_grouping=True)},
        })
        return None

    async def session_ended(self, event) -> None:
        """Group message `session.ended` from chat.signals: logout, password change, deactivation, deletion."""
        await self._end("session_ended", gettext("Your session ended (signed out, password changed or account "
                                                 "closed); sign in again to chat. Nothing of an unfinished turn "
                                                 "was saved."), CLOSE_UNAUTHENTICATED)


    async def memory_changed(self, event) -> None:
        """Group message `memory.changed` from agentmemory.notify."""
        await self._send({"type": "memory_changed", "usage": event.get("usage")})

    async def memory_settings(self, event) -> None:
        """Group message `memory.settings` from agentmemory.notify: the person's switch changed."""
        await self._send({"type": "memory_settings", "use_memory": bool(event.get("use_memory"))})

    async def _run(self, content: str, conversation_id: int | None, cancel_event: threading.Event,
                   slot: budget.Slot, temporary: TemporaryChat | None = None) -> None:
        session_key = getattr(self.scope.get("session"), "session_key", None)
        try:
            async with budget.kept(slot):  # the slot's lease is renewed while the turn runs
                await run_turn(user=self.user, content=content, conversation_id=conversation_id,
                               emit=self._send, cancel_event=cancel_event, temporary=temporary,
                               signed_in=partial(session_valid, session_key, self.user.pk))
        except TurnError as exc:
            if not hasattr(exc, "failed_frame"):  # failed turns already sent turn_failed
                await self._send({"type": "error", "code": exc.code, "message": str(exc)})
        except asyncio.CancelledError:
            pass  # the turn sent turn_failed (if the socket is still open) and discarded its ledger
        except Exception as exc:
            logger.error("chat socket turn crashed: %s", type(exc).__name__)
            await self._send({"type": "error", "code": "internal_error",
                              "message": gettext("Something went wrong on our side; nothing was saved. Try again.")})
        finally:
            self.turn_over = True
            await asyncio.shield(_off_loop(slot.release))

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


def language_of(scope) -> str:
    """The socket's language, by Django's own rule for a request: the language cookie
    (the account page's switch), else the handshake's Accept-Language, else LANGUAGE_CODE."""
    request = HttpRequest()
    request.COOKIES = dict(scope.get("cookies") or {})
    for name, value in scope.get("headers") or ():
        if name == b"accept-language":
            request.META["HTTP_ACCEPT_LANGUAGE"] = value.decode("latin-1")
    return translation.get_language_from_request(request)


async def _off_loop(function, /, *args):
    """Run a cache call (a Redis round trip with REDIS_URL) off the event loop."""
    return await sync_to_async(function, thread_sensitive=False)(*args)


async def _signed_in_then_admit(session_key, user_id):
    """In a worker thread with a request's connection rules: None when the session has ended, else
    `budget.admit_turn`'s (slot, decision). Not thread-sensitive: sockets do not queue on one thread."""
    return await in_worker(_admit_if_signed_in, session_key, user_id)


def _admit_if_signed_in(session_key, user_id):
    if not session_valid(session_key, user_id):  # read afresh; the database down counts as signed in
        return None
    return budget.admit_turn(user_id)
