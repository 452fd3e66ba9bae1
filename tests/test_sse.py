"""chat/sse.py decodes a server-sent event stream as the openai SDK's own decoder does.

The SDK's `SSEDecoder` is the reference: any stream of events (several data
lines, event names, ids, comments, any line ends, a space or none after the
colon, non-ASCII text) cut into pieces anywhere must decode to the same
events, in order, with the same data and names. No database.
"""
from __future__ import annotations

import asyncio

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from chat.sse import LeanDecoder
from tests.chat_helpers import fresh_agents  # noqa: F401  (a fresh client for the test's model server)

# Text a data line may hold: anything but line ends (which end the line).
LINE_TEXT = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=30)
NAME = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="._-"), min_size=1,
               max_size=12)
LINE_END = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw) -> bytes:
    """A stream of events, each a few field lines and a blank line, with mixed line ends."""
    out = []
    for _ in range(draw(st.integers(0, 6))):
        lines = []
        if draw(st.booleans()):
            lines.append(": keep-alive" + draw(LINE_TEXT))
        if draw(st.booleans()):
            lines.append("event: " + draw(NAME))
        if draw(st.booleans()):
            lines.append("id: " + draw(NAME))
        for text in draw(st.lists(LINE_TEXT, min_size=1, max_size=3)):
            lines.append(("data: " if draw(st.booleans()) else "data:") + text)
        out.extend(line + draw(LINE_END) for line in lines)
        out.append(draw(LINE_END))  # the blank line that ends the event
    if draw(st.booleans()):
        out.append("data: an unfinished event, dropped at the end\n")
    return "".join(out).encode("utf-8")


def cut_into_pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]


def events(decoded) -> list[tuple]:
    return [(event.event, event.data, event.id) for event in decoded]


async def decode(decoder, pieces: list[bytes]) -> list:
    async def chunks():
        for piece in pieces:
            yield piece

    return [event async for event in decoder.aiter_bytes(chunks())]


async def decode_async(decoder, pieces: list[bytes]) -> list[tuple]:
    return events(await decode(decoder, pieces))


@settings(max_examples=300, deadline=None)
@given(data=streams(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_the_lean_decoder_reads_what_the_sdk_reads(data, cuts):
    pieces = cut_into_pieces(data, cuts)
    expected = events(SSEDecoder().iter_bytes(iter([data])))  # the SDK, given the whole stream at once
    assert asyncio.run(decode_async(LeanDecoder(), pieces)) == expected
    assert asyncio.run(decode_async(SSEDecoder(), pieces)) == expected  # the SDK agrees with itself when cut


def test_the_common_chat_chunk_and_done():
    stream = b'data: {"choices": []}\n\ndata: {"choices": [{"delta": {"content": "h\xc3\xa9"}}]}\n\ndata: [DONE]\n\n'
    decoded = asyncio.run(decode(LeanDecoder(), [stream[:7], stream[7:40], stream[40:]]))
    assert [event.data for event in decoded] == ['{"choices": []}', '{"choices": [{"delta": {"content": "hé"}}]}',
                                                 "[DONE]"]
    assert decoded[1].json() == {"choices": [{"delta": {"content": "hé"}}]}
    assert all(event.event is None for event in decoded)


def test_a_carriage_return_split_from_its_line_feed_is_one_line_end():
    pieces = [b"data: one\r", b"\n\r", b"\ndata: two\r", b"\r"]
    assert [event.data for event in asyncio.run(decode(LeanDecoder(), pieces))] == ["one", "two"]


# --- one event's size is capped ---------------------------------------------------------------


def test_an_event_past_the_cap_raises_and_events_within_it_pass():
    from chat.sse import EventTooLarge

    small = b'data: {"a": 1}\n\n' * 3
    assert len(asyncio.run(decode(LeanDecoder(max_event_bytes=64), [small]))) == 3
    endless = [b"data: " + b"x" * 40 for _ in range(10)]  # 406 bytes and no blank line: never ends
    try:
        asyncio.run(decode(LeanDecoder(max_event_bytes=256), endless))
    except EventTooLarge as exc:
        assert "256" in str(exc) and "xxxx" not in str(exc)
    else:
        raise AssertionError("an event that never ends must stop at the cap")
    whole = [b"data: " + b"y" * 300 + b"\n\n"]  # complete, in one piece, but too large
    try:
        asyncio.run(decode(LeanDecoder(max_event_bytes=256), whole))
    except EventTooLarge:
        pass
    else:
        raise AssertionError("a complete event past the cap is refused too")


@pytest.mark.django_db(transaction=True)
async def test_a_model_server_that_never_ends_an_event_ends_the_turn_as_cut_off(settings, user, fresh_agents):
    """Over real HTTP: the chat's client reads a stream whose one event never ends; the worker stops at the cap."""
    import http.server
    import threading

    from chat.turns import TurnFailed, run_turn

    sent = {"bytes": 0}

    class Endless(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            piece = b'data: {"choices": [{"index": 0, "delta": {"content": "' + b"z" * 8192
            try:
                for _ in range(4096):  # up to 32 MiB, never a blank line
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent["bytes"] += len(piece)
                    piece = b"z" * 8192
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings.OPENAI_API_KEY = "endless"
        settings.OPENAI_BASE_URL = f"http://127.0.0.1:{server.server_address[1]}/v1"
        settings.OPENAI_MODEL = "endless"
        settings.OPENAI_FALLBACK_MODEL = ""
        settings.OPENAI_MAX_RETRIES = 0
        settings.CHAT_MAX_SSE_EVENT_BYTES = 256 * 1024
        with pytest.raises(TurnFailed) as failed:
            await run_turn(user=user, content="Tell me a story.")
        assert failed.value.code == "model_incomplete" and "length limit" in failed.value.message
        assert sent["bytes"] < 8 * 1024 * 1024, "the worker stopped reading near the cap, not at the deadline"
    finally:
        server.shutdown()
