"""One copy of each rule (issue 41, part 5): the socket's `user_message`
frame and the REST turn are checked by the same serializer class
(chat.serializers.TurnRequestSerializer), so they refuse the same inputs;
the socket only words the refusal as its error frame (codes: docs/chat.md).
The origin check is channels' OriginValidator with our own-origin rule added
(its cases: tests/test_ws_origins.py)."""
from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.frames import FrameError, UserMessage, parse_client_frame
from chat.models import Conversation
from chat.serializers import TurnRequestSerializer
from tests.chat_helpers import connect, fresh_agents, receive_until  # noqa: F401

LIMIT = 50
TURNS = "/api/chat/turns/"
HELLO = {"content": "hello"}

# (the request's fields, the socket's error code, the field REST names)
BAD = [
    ({"content": ""}, "invalid_content", "content"),
    ({"content": "   \n"}, "invalid_content", "content"),
    ({}, "invalid_content", "content"),
    ({"content": None}, "invalid_content", "content"),
    ({"content": 5}, "invalid_content", "content"),
    ({"content": True}, "invalid_content", "content"),
    ({"content": ["hello"]}, "invalid_content", "content"),
    ({"content": "hello\x00"}, "invalid_content", "content"),
    ({"content": "hello\ud800"}, "invalid_content", "content"),
    ({"content": "x" * (LIMIT + 1)}, "message_too_long", "content"),
    ({**HELLO, "conversation_id": "7"}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "conversation_id": 7.0}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "conversation_id": True}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "conversation_id": 0}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "conversation_id": -3}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "conversation_id": [1]}, "invalid_conversation_id", "conversation_id"),
    ({**HELLO, "temporary": "yes"}, "invalid_temporary", "temporary"),
    ({**HELLO, "temporary": 1}, "invalid_temporary", "temporary"),
    ({**HELLO, "temporary": None}, "invalid_temporary", "temporary"),
    ({**HELLO, "temporary": True, "conversation_id": 1}, "invalid_conversation_id", "conversation_id"),
]
GOOD = [
    {"content": "hello"},
    {"content": " hello ", "conversation_id": None},
    {"content": "x" * LIMIT, "conversation_id": 12},
    {"content": "hello", "temporary": True},
    {"content": "hello", "temporary": False, "conversation_id": 3},
    {"content": "hello", "temporary": True, "conversation_id": None},
]


@pytest.fixture
def used(monkeypatch):
    """The serializer classes whose is_valid ran, in order."""
    classes: list[type] = []
    original = TurnRequestSerializer.is_valid

    def spy(self, *args, **kwargs):
        classes.append(type(self))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(TurnRequestSerializer, "is_valid", spy)
    return classes


@pytest.fixture
def unlimited_turn_rate(monkeypatch):
    from rest_framework.throttling import ScopedRateThrottle

    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES",
                        {**ScopedRateThrottle.THROTTLE_RATES, "chat_turns": "100000/min"})


def frame_verdict(fields: dict) -> str | UserMessage:
    try:
        message = parse_client_frame(json.dumps({"type": "user_message", **fields}), max_chars=LIMIT)
    except FrameError as exc:
        return exc.code
    assert isinstance(message, UserMessage)
    return message


@override_settings(CHAT_MAX_MESSAGE_CHARS=LIMIT)
@pytest.mark.parametrize("fields, code, field", BAD)
def test_the_socket_refuses_through_the_rest_serializer(used, fields, code, field):
    assert frame_verdict(fields) == code
    assert used == [TurnRequestSerializer]
    serializer = TurnRequestSerializer(data=fields)
    assert not serializer.is_valid() and field in serializer.errors


@override_settings(CHAT_MAX_MESSAGE_CHARS=LIMIT)
@pytest.mark.parametrize("fields", GOOD)
def test_what_rest_accepts_the_socket_accepts(used, fields):
    serializer = TurnRequestSerializer(data=fields)
    assert serializer.is_valid(), serializer.errors
    message = frame_verdict(fields)
    assert isinstance(message, UserMessage), message
    assert used == [TurnRequestSerializer, TurnRequestSerializer]
    assert message.content == serializer.validated_data["content"]
    assert message.conversation_id == serializer.validated_data.get("conversation_id")
    assert message.temporary == serializer.validated_data["temporary"]


def test_the_too_long_sentence_is_the_serializers_own():
    content = "x" * 12_345
    serializer = TurnRequestSerializer(data={"content": content}, context={"max_chars": 10_000})
    assert not serializer.is_valid()
    with pytest.raises(FrameError) as refused:
        parse_client_frame(json.dumps({"type": "user_message", "content": content}), max_chars=10_000)
    assert refused.value.code == "message_too_long"
    assert refused.value.message == str(serializer.errors["content"][0])
    assert refused.value.message == "The message has 12,345 characters; the limit is 10,000. Shorten it."


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_MAX_MESSAGE_CHARS=LIMIT)
async def test_rest_and_the_socket_refuse_the_same_inputs_with_the_same_class(user, used, unlimited_turn_rate):
    from asgiref.sync import sync_to_async

    def rest_refusals() -> list[tuple[int, list[str]]]:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
        answers = []
        for fields, _code, _field in BAD:
            # json.dumps escapes a lone surrogate (the test client's encoder would raise on it).
            response = client.post(TURNS, json.dumps(fields), content_type="application/json")
            body = response.json()
            answers.append((response.status_code, sorted(body), body.get("code")))
        return answers

    answers = await sync_to_async(rest_refusals)()
    # The field's errors, and the code and sentence the socket answers (issue 54: every detail has a code).
    assert answers == [(400, sorted([field, "code", "detail"]), code) for _fields, code, field in BAD]
    assert used == [TurnRequestSerializer] * len(BAD)

    used.clear()
    socket = await connect(user)
    try:
        for fields, code, _field in BAD:
            await socket.send_to(text_data=json.dumps({"type": "user_message", **fields}))
            frame = json.loads(await socket.receive_from(timeout=10))
            assert set(frame) == {"type", "code", "message"} and (frame["type"], frame["code"]) == ("error", code)
        await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "hello"}))
        await receive_until(socket, "turn_completed")
    finally:
        await socket.disconnect()
    assert used == [TurnRequestSerializer] * (len(BAD) + 1)
    assert await sync_to_async(Conversation.objects.count)() == 1  # only the good turn was stored


def test_the_origin_check_is_channels_validator():
    from channels.security.websocket import OriginValidator

    from config.asgi import application
    from config.origins import ExactOriginValidator

    assert issubclass(ExactOriginValidator, OriginValidator)
    assert isinstance(application.application_mapping["websocket"], ExactOriginValidator)
