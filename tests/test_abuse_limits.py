"""One turn budget per person (chat/budget.py): the rate shared by REST and the
socket, concurrent turns, open sockets; refusals say why and write nothing."""
import asyncio
import json

import pytest
from django.core.cache import cache
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle

from chat import budget
from chat.consumers import CLOSE_TOO_MANY_SOCKETS
from chat.models import Conversation
from tests.chat_helpers import connect, db, fresh_agents, receive_until  # noqa: F401

TURNS = "/api/chat/turns/"


# --- the budget itself ---------------------------------------------------------------


def test_sliding_window_admits_the_rate_then_refuses_with_a_retry_after():
    start = 1_000_000 * 60.0  # the start of a window
    assert [budget.take("k", "3/min", now=start + i).allowed for i in range(3)] == [True] * 3
    refused = budget.take("k", "3/min", now=start + 3)
    assert not refused and 1 <= refused.retry_after <= 120
    # Refusals give their unit back: the count stays at the limit.
    assert cache.get(f"budget:k:{int(start // 60)}") == 3
    # Half-way through the next window the previous one weighs half: 1.5 + 1 <= 3 fits, once.
    assert budget.take("k", "3/min", now=start + 90).allowed
    assert not budget.take("k", "3/min", now=start + 90).allowed
    # Two windows later it is all forgotten.
    assert budget.take("k", "3/min", now=start + 180).allowed


def test_retry_after_is_when_the_next_attempt_fits():
    start = 2_000_000 * 60.0
    for i in range(3):
        budget.take("r", "3/min", now=start + i)
    refused = budget.take("r", "3/min", now=start + 10)
    assert not budget.take("r", "3/min", now=start + 10 + refused.retry_after - 1).allowed or refused.retry_after == 1
    assert budget.take("r", "3/min", now=start + 10 + refused.retry_after).allowed


def test_give_back_returns_one_unit():
    start = 3_000_000 * 60.0
    spent = budget.take("g", "1/min", now=start)
    assert spent
    budget.give_back(spent)
    assert budget.take("g", "1/min", now=start + 1)


def test_give_back_refunds_the_window_the_unit_was_spent_in():
    """A turn admitted in the last moment of a window and refused (no slot) in the next gives its unit back
    to the window it spent it in: that window's count is what the next window weighs."""
    start = 4_000_000 * 60.0
    window = int(start // 60)
    for i in range(2):
        assert budget.take("w", "3/min", now=start + 58 + i)
    late = budget.take("w", "3/min", now=start + 59.9)
    assert late and cache.get(f"budget:w:{window}") == 3
    budget.give_back(late)  # refunded at start + 60.1: the next window is in force by then
    assert cache.get(f"budget:w:{window}") == 2
    assert cache.get(f"budget:w:{window + 1}") is None
    # Early in the next window 2 of the previous weigh ~2, so exactly one more fits.
    assert budget.take("w", "3/min", now=start + 60.1)
    assert not budget.take("w", "3/min", now=start + 60.2)


def test_give_back_of_an_uncounted_decision_is_a_no_op():
    budget.give_back(None)
    budget.give_back(budget.ALLOWED)  # the cache was down, or no rate: nothing was spent


@pytest.fixture
def cache_down(monkeypatch):
    """Every call of the shared cache fails, as with Redis down; the per-process budgets start empty."""
    def broken(*args, **kwargs):
        raise ConnectionError("redis down")

    for name in ("add", "incr", "decr", "get", "set", "delete"):
        monkeypatch.setattr(cache, name, broken)
    budget.reset_process_budgets()
    yield
    budget.reset_process_budgets()


@override_settings(CHAT_MAX_CONCURRENT_TURNS=1)
def test_a_failing_cache_falls_back_to_per_process_budgets(cache_down, caplog):
    start = 2_000_000 * 60.0
    # The rate: the limit still holds, counted in this process, and says why it refuses.
    first = budget.take("x", "2/min", now=start)
    assert first.allowed and first.local
    assert budget.take("x", "2/min", now=start + 1).allowed
    refused = budget.take("x", "2/min", now=start + 2)
    assert not refused and refused.retry_after >= 1
    budget.give_back(first)  # a refund goes to the per-process counter it was spent in
    assert budget.take("x", "2/min", now=start + 3).allowed
    assert not budget.take("x", "2/min", now=start + 4)
    assert budget.take("y", "2/min", now=start).allowed  # another key has its own
    # The concurrent-turn slots: one per person in this process.
    slot = budget.acquire_turn(7)
    assert slot is not None and slot.local
    assert budget.acquire_turn(7) is None
    slot.release()
    assert budget.acquire_turn(7) is not None
    # The socket registry cannot close a socket without the channel layer: let through, uncounted.
    assert budget.register_socket(7, "chan") == []
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert any("turn budget counted per process: cache error ConnectionError" in m for m in warnings)
    assert any("concurrent turns counted per process: cache error ConnectionError" in m for m in warnings)
    assert any("open sockets not counted: cache error ConnectionError" in m for m in warnings)


def test_the_shared_cache_counts_again_once_it_answers(monkeypatch):
    start = 2_100_000 * 60.0
    budget.reset_process_budgets()
    with monkeypatch.context() as down:
        down.setattr(cache, "add", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("redis down")))
        assert budget.take("z", "1/min", now=start).local
        assert not budget.take("z", "1/min", now=start + 1)
    # Redis is back: the shared count decides (it never saw those), the process's is not read.
    back = budget.take("z", "1/min", now=start + 2)
    assert back.allowed and not back.local
    assert cache.get(f"budget:z:{int(start // 60)}") == 1
    assert not budget.take("z", "1/min", now=start + 3)
    budget.reset_process_budgets()


@override_settings(CHAT_MAX_CONCURRENT_TURNS=2)
def test_concurrent_turn_slots():
    first, second = budget.acquire_turn(1), budget.acquire_turn(1)
    assert first and second and first.key != second.key
    assert budget.acquire_turn(1) is None
    assert budget.acquire_turn(2) is not None  # another person has their own
    first.release()
    third = budget.acquire_turn(1)
    assert third is not None
    first.release()  # a stale release does not free the slot someone else now holds
    assert budget.acquire_turn(1) is None


@override_settings(CHAT_MAX_CONCURRENT_TURNS=1)
def test_admitting_a_turn_takes_a_slot_then_the_rate_in_one_call(monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "2/min"})
    slot, decision = budget.admit_turn(90515)
    assert slot is not None and decision.allowed

    # Every slot in use: refused as busy, and the rate budget is not spent.
    busy, decision = budget.admit_turn(90515)
    assert busy is None and decision.allowed
    slot.release()
    slot, decision = budget.admit_turn(90515)
    assert slot is not None and decision.allowed  # the second unit of 2/min
    slot.release()

    # Over the rate: refused with a retry-after, and the slot taken first is given back.
    refused, decision = budget.admit_turn(90515)
    assert refused is None and not decision.allowed and decision.retry_after >= 1
    held = budget.acquire_turn(90515)
    assert held is not None
    held.release()


@override_settings(CHAT_MAX_SOCKETS_PER_PERSON=2)
def test_socket_registry_names_the_oldest_past_the_cap():
    assert budget.register_socket(1, "a", now=1) == []
    assert budget.register_socket(1, "b", now=2) == []
    assert budget.register_socket(1, "c", now=3) == ["a"]
    budget.unregister_socket(1, "b")
    assert budget.open_sockets(1) == 1
    assert budget.register_socket(2, "z") == []


# --- REST and the socket spend one budget -----------------------------------------------


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


async def _send(socket, content: str) -> None:
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": content, "conversation_id": None}))


@pytest.mark.django_db(transaction=True)
async def test_socket_turns_spend_the_rest_budget_and_refusals_write_nothing(user, monkeypatch):
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "3/min"})
    client = await db(_token_client, user)
    statuses = [(await db(client.post, TURNS, {"content": "hello"}, format="json")).status_code for _ in range(2)]
    assert statuses == [200, 200]

    socket = await connect(user)
    await _send(socket, "hello")
    assert (await receive_until(socket, "turn_completed"))[-1]["type"] == "turn_completed"
    conversations = await db(Conversation.objects.count)
    await _send(socket, "hello again")
    refused = json.loads(await socket.receive_from(timeout=5))
    assert refused["type"] == "error" and refused["code"] == "rate_limited"
    assert refused["retry_after"] >= 1 and "Try again in" in refused["message"]
    assert await db(Conversation.objects.count) == conversations  # nothing half-written

    response = await db(client.post, TURNS, {"content": "hello"}, format="json")
    assert response.status_code == 429
    assert response.json()["code"] == "rate_limited" and int(response["Retry-After"]) >= 1
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_MAX_CONCURRENT_TURNS=1)
async def test_a_second_concurrent_turn_is_refused_on_another_socket_and_over_rest(user):
    first, second = await connect(user), await connect(user)
    client = await db(_token_client, user)
    with override_settings(DEMO_MODEL_DELAY_MS=100):
        await _send(first, "tell me something long")
        await receive_until(first, "turn_started")
        conversations = await db(Conversation.objects.count)
        await _send(second, "and me")
        refused = json.loads(await second.receive_from(timeout=5))
        assert (refused["type"], refused["code"]) == ("error", "too_many_turns")
        assert refused["retry_after"] >= 1
        response = await db(client.post, TURNS, {"content": "hello"}, format="json")
        assert response.status_code == 429 and response.json()["code"] == "too_many_turns"
        assert response["Retry-After"]
        assert await db(Conversation.objects.count) == conversations
        await receive_until(first, "turn_completed")
    # The slot is free again once the turn ended.
    await _send(second, "now me")
    assert (await receive_until(second, "turn_completed"))[-1]["type"] == "turn_completed"
    for socket in (first, second):
        await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_MAX_CONCURRENT_TURNS=1)
async def test_a_cancelled_or_disconnected_turn_gives_its_slot_back(user):
    socket = await connect(user)
    with override_settings(DEMO_MODEL_DELAY_MS=200):
        await _send(socket, "a long answer please")
        await receive_until(socket, "turn_started")
        await socket.disconnect(timeout=5)
    again = await connect(user)
    await _send(again, "hello")
    assert (await receive_until(again, "turn_completed"))[-1]["type"] == "turn_completed"
    await again.disconnect()


@pytest.mark.django_db(transaction=True)
@override_settings(CHAT_MAX_SOCKETS_PER_PERSON=2)
async def test_a_socket_past_the_cap_closes_the_persons_oldest(user, other_user):
    oldest = await connect(user)
    middle = await connect(user)
    theirs = await connect(other_user)
    newest = await connect(user)
    frame = json.loads(await oldest.receive_from(timeout=5))
    assert (frame["type"], frame["code"]) == ("socket_closed", "too_many_sockets")
    assert await oldest.receive_output(timeout=5) == {"type": "websocket.close", "code": CLOSE_TOO_MANY_SOCKETS}
    assert await middle.receive_nothing(timeout=0.2) and await theirs.receive_nothing(timeout=0.05)
    assert await db(budget.open_sockets, user.pk) == 2
    # The newest works.
    await _send(newest, "hello")
    assert (await receive_until(newest, "turn_completed"))[-1]["type"] == "turn_completed"
    for socket in (middle, theirs, newest):
        await socket.disconnect()
    await oldest.wait()
    assert await db(budget.open_sockets, user.pk) == 0


@pytest.mark.django_db
def test_wrong_eval_tokens_are_throttled_before_the_token_check(settings, monkeypatch):
    settings.EVAL_SERVICE_TOKEN = "right-token"
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "3/min"})
    client = APIClient()
    statuses = [client.post("/api/eval/turns/", {"content": "hi"}, format="json",
                            HTTP_AUTHORIZATION=f"Bearer guess-{i}").status_code for i in range(5)]
    assert statuses == [403, 403, 403, 429, 429]
    # Even the right token waits now: the address spent its budget.
    assert client.post("/api/eval/turns/", {"content": "hi"}, format="json",
                       HTTP_AUTHORIZATION="Bearer right-token").status_code == 429
