"""Malformed and oversized frames on the chat socket: no crash, an `error`
frame for each, and the socket stays usable.

Every example runs on the full ASGI stack (`config.asgi.application`: origin
check, session auth, routing) through `channels.testing.WebsocketCommunicator`:
it signs in, sends hypothesis-generated bad frames — arbitrary text and
bytes, JSON that is not an object, nesting thousands deep, a wrong type for
every field, frames and messages over the limits — and expects exactly one
`error` frame per bad frame (with the code the frame deserves, and nothing of
the frame echoed back). Then a valid `user_message` on the same socket must
complete a turn. A consumer that raised would end the socket, and the next
receive would raise here.
"""
from __future__ import annotations

import json

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chat.frames import FrameError, parse_client_frame
from tests.chat_helpers import connect, fresh_agents, receive_until  # noqa: F401


@pytest.fixture(autouse=True)
def unlimited_turn_rate(monkeypatch):
    """Hundreds of frames per test: out of the per-person turn budget (tests/test_abuse_limits.py tests it)."""
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES",
                        {**ScopedRateThrottle.THROTTLE_RATES, "chat_turns": "100000/min"})

pytestmark = pytest.mark.django_db(transaction=True)

# The codes docs/chat.md lists for the `error` frame.
ERROR_CODES = {
    "malformed_json", "malformed_frame", "unknown_type", "invalid_content", "message_too_long",
    "frame_too_large", "binary_frame", "invalid_conversation_id", "turn_in_progress", "conversation_not_found",
}
SMALL_LIMIT = 200  # CHAT_MAX_MESSAGE_CHARS in the size tests, so oversized frames stay cheap
FUZZ = settings(
    max_examples=30, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
not_a_string = json_values.filter(lambda value: not isinstance(value, str))
bad_conversation_ids = (
    st.text(max_size=10) | st.booleans() | st.floats() | st.integers(max_value=0)
    | st.lists(st.integers(), max_size=3) | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)


async def assert_error(socket, code: str | None = None) -> dict:
    """Receive the next frame; it must be a content-free `error` frame (with `code`, if given)."""
    frame = json.loads(await socket.receive_from(timeout=10))
    assert frame["type"] == "error", frame
    assert set(frame) == {"type", "code", "message"}, "an error frame carries no part of the bad frame"
    assert frame["code"] in ERROR_CODES
    if code is not None:
        assert frame["code"] == code, frame
    return frame


async def assert_usable(socket) -> None:
    """A valid message on the same socket completes a turn."""
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "hello", "conversation_id": None}))
    frames = await receive_until(socket, "turn_completed", timeout=10)
    assert [frame["type"] for frame in frames if frame["type"] in ("error", "turn_failed")] == []
    assert frames[-1]["message"]["content"]


async def send_frame(socket, frame: str | bytes) -> None:
    # Straight to the application: the communicator's send_to refuses empty frames, a browser does not.
    key = "bytes" if isinstance(frame, bytes) else "text"
    await socket.send_input({"type": "websocket.receive", key: frame})


async def send_bad_frames(user, frames: list[tuple[str | bytes, str | None]]) -> None:
    """Send each (frame, expected code), expect one error each, then a turn that completes."""
    socket = await connect(user)
    try:
        for frame, code in frames:
            await send_frame(socket, frame)
            await assert_error(socket, code)
        await assert_usable(socket)
    finally:
        await socket.disconnect()


def expected_code(text: str, *, max_chars: int) -> str:
    """The parser's verdict on a text frame; examples the parser accepts are not bad frames."""
    try:
        parse_client_frame(text, max_chars=max_chars)
    except FrameError as exc:
        return exc.code
    assume(False)
    raise AssertionError("unreachable")


@FUZZ
@given(texts=st.lists(st.text(max_size=300), min_size=1, max_size=4))
async def test_arbitrary_text_frames_get_an_error_and_the_socket_stays_usable(user, texts):
    await send_bad_frames(user, [(text, expected_code(text, max_chars=8000)) for text in texts])


@FUZZ
@given(payloads=st.lists(st.binary(max_size=2048), min_size=1, max_size=4))
async def test_binary_frames_get_an_error_and_the_socket_stays_usable(user, payloads):
    await send_bad_frames(user, [(payload, "binary_frame") for payload in payloads])


@FUZZ
@given(value=json_values.filter(lambda value: not isinstance(value, dict)))
async def test_json_that_is_not_an_object_gets_malformed_frame(user, value):
    await send_bad_frames(user, [(json.dumps(value), "malformed_frame")])


@FUZZ
@given(data=st.data(), brackets=st.sampled_from(["list", "object"]))
async def test_deeply_nested_json_gets_an_error_not_a_crash(user, data, brackets):
    # Up to 24,000 levels: still under the size limit, and far past Python's recursion limit.
    if brackets == "list":
        depth = data.draw(st.integers(min_value=1, max_value=24_000))
        text, shallow_code = "[" * depth + "1" + "]" * depth, "malformed_frame"
    else:
        depth = data.draw(st.integers(min_value=1, max_value=7_000))
        text, shallow_code = '{"k": ' * depth + "1" + "}" * depth, "unknown_type"
    codes = {shallow_code, "malformed_json"}  # which one depends on the interpreter's recursion limit
    socket = await connect(user)
    try:
        await send_frame(socket, text)
        assert (await assert_error(socket))["code"] in codes
        await assert_usable(socket)
    finally:
        await socket.disconnect()


@FUZZ
@given(kind=json_values.filter(lambda value: value not in ("cancel", "user_message")), extra=json_values)
async def test_a_wrong_or_missing_type_gets_unknown_type(user, kind, extra):
    frame = {"type": kind, "content": extra} if kind is not None else {"content": extra}
    await send_bad_frames(user, [(json.dumps(frame), "unknown_type")])


@FUZZ
@given(content=not_a_string | st.text(alphabet=" \t\r\n", max_size=20))
async def test_content_that_is_not_a_non_empty_string_gets_invalid_content(user, content):
    frame = {"type": "user_message", "content": content, "conversation_id": None}
    await send_bad_frames(user, [(json.dumps(frame), "invalid_content")])


@FUZZ
@given(
    before=st.text(min_size=1, max_size=20).filter(str.strip),
    bad=st.sampled_from(["\x00", "\ud800", "\udfff", "\udbff"]),
)
async def test_content_with_nul_or_a_lone_surrogate_gets_invalid_content(user, before, bad):
    # Neither can be stored as text (PostgreSQL refuses NUL; UTF-8 has no lone surrogates).
    frame = {"type": "user_message", "content": before + bad, "conversation_id": None}
    await send_bad_frames(user, [(json.dumps(frame), "invalid_content")])


@FUZZ
@given(conversation_id=bad_conversation_ids)
async def test_a_wrong_conversation_id_gets_invalid_conversation_id(user, conversation_id):
    frame = {"type": "user_message", "content": "hello", "conversation_id": conversation_id}
    await send_bad_frames(user, [(json.dumps(frame), "invalid_conversation_id")])


@FUZZ
@given(conversation_id=st.integers(min_value=10**6, max_value=2**80))
async def test_an_unknown_or_out_of_range_conversation_id_gets_conversation_not_found(user, conversation_id):
    frame = {"type": "user_message", "content": "hello", "conversation_id": conversation_id}
    await send_bad_frames(user, [(json.dumps(frame), "conversation_not_found")])


@override_settings(CHAT_MAX_MESSAGE_CHARS=SMALL_LIMIT)
@FUZZ
@given(extra=st.integers(min_value=1, max_value=20 * SMALL_LIMIT), filler=st.characters(codec="utf-8"))
async def test_messages_over_the_limit_get_message_too_long(user, extra, filler):
    assume(filler.strip() and filler != "\x00")
    content = (filler * (SMALL_LIMIT + extra))[: SMALL_LIMIT + extra]
    text = json.dumps({"type": "user_message", "content": content, "conversation_id": None})
    code = "frame_too_large" if len(text) > SMALL_LIMIT * 6 + 1024 else "message_too_long"
    await send_bad_frames(user, [(text, code)])


@override_settings(CHAT_MAX_MESSAGE_CHARS=SMALL_LIMIT)
@FUZZ
@given(size=st.integers(min_value=SMALL_LIMIT * 6 + 1025, max_value=SMALL_LIMIT * 60))
async def test_frames_over_the_size_limit_get_frame_too_large_unparsed(user, size):
    # Not even JSON: a frame over the limit is refused before parsing.
    await send_bad_frames(user, [("{" * size, "frame_too_large")])


@pytest.mark.parametrize("megabytes", [1, 16])
async def test_huge_frames_at_the_default_limit_get_frame_too_large(user, megabytes):
    content = "x" * (megabytes * 1024 * 1024)
    frames = [
        (json.dumps({"type": "user_message", "content": content, "conversation_id": None}), "frame_too_large"),
        (content.encode(), "binary_frame"),
    ]
    await send_bad_frames(user, frames)


@override_settings(DEMO_MODEL_DELAY_MS=20)
async def test_bad_frames_during_a_turn_get_errors_and_the_turn_completes(user):
    socket = await connect(user)
    try:
        await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "tell me a long story"}))
        started = json.loads(await socket.receive_from(timeout=10))
        assert started["type"] == "turn_started"
        bad = ["{", b"\x00\xff", "[]", json.dumps({"type": 7}), json.dumps({"type": "user_message", "content": 5}),
               json.dumps({"type": "user_message", "content": "again"})]
        for frame in bad:
            await send_frame(socket, frame)
        frames = await receive_until(socket, "turn_completed", timeout=20)
        errors = [frame["code"] for frame in frames if frame["type"] == "error"]
        # The rest of the turn's frames may interleave, so count, in order.
        assert errors == ["malformed_json", "binary_frame", "malformed_frame", "unknown_type", "invalid_content",
                          "turn_in_progress"]
        await assert_usable(socket)
    finally:
        await socket.disconnect()
