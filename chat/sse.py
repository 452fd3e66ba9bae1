"""A lean server-sent events decoder for the model's stream.

The openai SDK decodes a streamed response line by line in Python and builds
an event object per line's field; for a Chat Completions stream (one `data:`
line per event) that was most of the client's CPU per streamed chunk
(bench/turns.py). This decoder splits the bytes on blank lines and reads an
event's fields in one pass, with a fast path for the common single `data:`
line. It follows the SSE format as the SDK's decoder does: `\\n`, `\\r\\n` or
`\\r` line ends, comment lines, a space after the colon dropped, several
`data:` lines joined by `\\n`, and an event at the end of the stream without
its blank line dropped. `chat.llm.ChunkStream` gives it to the SDK's own
stream class, which keeps everything else ([DONE], error events, timeouts,
a broken connection, closing the response).

One event is at most `max_event_bytes` long (CHAT_MAX_SSE_EVENT_BYTES, 1 MiB
by default, the cap of the HTTP client the SDK uses): a server that never
ends an event would otherwise grow the worker's memory until the turn's
deadline. Past it the decoder raises `EventTooLarge`, and the turn ends as
an answer cut off at its length limit (`chat.agent`).
"""
from __future__ import annotations

import json
from collections.abc import AsyncIterator


class Event:
    """One event, as the SDK's stream reads it: `data`, `event`, `json()`."""

    __slots__ = ("data", "event", "id", "retry")

    def __init__(self, data: str, event: str | None = None, id: str | None = None, retry: int | None = None):
        self.data = data
        self.event = event
        self.id = id
        self.retry = retry

    def json(self):
        return json.loads(self.data)


class EventTooLarge(ValueError):
    """One event of the stream grew past the decoder's `max_event_bytes` (its size only, never its text)."""


class LeanDecoder:
    """Decode an SSE byte stream into events (see the module docstring)."""

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._last_id: str | None = None
        self.max_event_bytes = max_event_bytes

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[Event]:
        pending = b""
        cap = self.max_event_bytes
        async for piece in iterator:
            events, pending = self._feed(pending, piece)
            if cap is not None and (len(pending) > cap or any(len(event.data) > cap for event in events)):
                raise EventTooLarge(f"an event of the stream is longer than {cap:,} bytes")
            for event in events:
                yield event
        for event in self._feed(pending, b"", end=True)[0]:
            yield event

    def _feed(self, pending: bytes, piece: bytes, *, end: bool = False) -> tuple[list[Event], bytes]:
        """Return the events complete in `pending + piece`, and what is left of it."""
        buffer = _normalized(pending + piece if pending else piece, end=end)
        if b"\n\n" not in buffer:
            return [], buffer
        *blocks, rest = buffer.split(b"\n\n")
        return [event for event in map(self._event, blocks) if event is not None], rest

    def _event(self, block: bytes) -> Event | None:
        if block.startswith(b"data:") and b"\n" not in block:  # the common case: one data line
            value = block[5:]
            return Event(data=(value[1:] if value.startswith(b" ") else value).decode("utf-8"), id=self._last_id)
        data: list[bytes] = []
        event_type = retry = None
        seen = False
        for line in block.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data.append(value)
                seen = True
            elif name == b"event":
                event_type, seen = value.decode("utf-8"), True
            elif name == b"id":
                if b"\0" not in value:
                    self._last_id, seen = value.decode("utf-8"), True
            elif name == b"retry":
                try:
                    retry, seen = int(value), True
                except ValueError:
                    pass
        if not seen:
            return None
        return Event(data=b"\n".join(data).decode("utf-8"), event=event_type, id=self._last_id, retry=retry)


def _normalized(buffer: bytes, *, end: bool = False) -> bytes:
    """Return `buffer` with every line end as `\\n`.

    A final `\\r` waits for the next piece, which may start with the `\\n`
    of a `\\r\\n`, unless the stream has ended (`end`).
    """
    if b"\r" not in buffer:
        return buffer
    held = buffer.endswith(b"\r") and not end
    body = buffer[:-1] if held else buffer
    body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return body + b"\r" if held else body
