"""The memory-full signal (issue 12 item 3): `memory.memory_full` on a turn's outcome.

True when the person should review their memory: a document is at 90 % or
more, or a change of this turn was refused because it did not fit (by the
tool while staging, or by the commit under the lock). The chat shows its
notice from this flag; the words come from the outcome.
"""
import pytest
from django.db import connection

from agentmemory import store
from agentmemory.models import Actor
from agentmemory.rules import Operation
from chat.turns import TemporaryChat, run_turn
from tests.chat_helpers import aseed, db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import dynamic, scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def add(content: str) -> dict:
    return {"operations": [{"target": "memory", "action": "add", "content": content}]}


async def test_a_plain_turn_with_room_is_not_full(user, scripted_model):
    scripted_model.push(text("Hello."))

    result = await run_turn(user=user, content="hello")

    assert result.memory.memory_full is False and result.memory.as_dict()["memory_full"] is False


async def test_a_nearly_full_memory_is_flagged_even_when_nothing_changes(user, scripted_model):
    await aseed(user, memory_entries=["n" * 2000])  # 90 % of 2,200
    scripted_model.push(text("Hello."))

    result = await run_turn(user=user, content="hello")

    assert result.memory.status == "nothing_to_commit" and result.memory.memory_full is True


async def test_a_change_refused_for_capacity_while_staging_is_flagged(user, scripted_model):
    await aseed(user, memory_entries=["h" * 1100])  # 50 %
    scripted_model.push(tool_call(add("b" * 1200)), text("I could not save that."))

    result = await run_turn(user=user, content="remember this long thing")

    assert result.memory.status == "nothing_to_commit"
    assert result.memory.memory_full is True
    assert (await snapshot_of(user)).memory == ("h" * 1100,)


async def test_a_change_that_no_longer_fits_at_commit_is_rejected_as_full(user, scripted_model):
    def fill_then_answer(body):
        try:
            store.commit_operations(user_id=user.pk, actor=Actor.USER,
                                    operations=[Operation(target="memory", action="add", content="f" * 1500)])
        finally:
            connection.close()
        return text("Saved.")

    scripted_model.push(tool_call(add("a" * 1000)), dynamic(fill_then_answer))

    result = await run_turn(user=user, content="remember this")

    assert result.memory.status == "rejected" and result.memory.code == "over_capacity"
    assert result.memory.memory_full is True
    assert "your memory is full" in result.memory.message and "over_capacity" not in result.memory.message
    assert (await snapshot_of(user)).memory == ("f" * 1500,)


async def test_memory_off_is_never_full(user, scripted_model):
    await aseed(user, memory_entries=["n" * 2100])
    scripted_model.push(text("Hello."))

    result = await run_turn(user=user, content="hello", temporary=TemporaryChat())

    assert result.memory.status == "disabled" and result.memory.memory_full is False
