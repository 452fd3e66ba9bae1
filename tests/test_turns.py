"""The turn service's invariants: commit only after success, never after a
cancel or a failure, no fallback after staging, fail open on reads, and no
cross-user leakage. Real database, real openai client, offline demo model."""
import asyncio
import json
import threading

import pytest
from django.test import override_settings

from agentmemory import store
from agentmemory.models import MemoryDocument, Outcome
from agentmemory.rules import Operation
from chat.agents import chat_agent, memory_free_agent, registry
from chat.models import Conversation, Message
from chat.turns import ConversationNotFound, TurnFailed, run_turn
from tests.chat_helpers import aseed, db, demo, events_of, fresh_agents, snapshot_of, wait_for  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The project deploys with Ansible"
FALLBACK = override_settings(OPENAI_FALLBACK_MODEL="demo-fallback")


class Frames:
    """Collects what a turn emits, so a test can wait for a point in the turn."""

    def __init__(self):
        self.frames: list[dict] = []

    async def __call__(self, frame: dict) -> None:
        self.frames.append(frame)

    def types(self) -> list[str]:
        return [frame["type"] for frame in self.frames]

    def has(self, kind: str) -> bool:
        return kind in self.types()


async def messages_of(conversation_id):
    return await db(lambda: list(Message.objects.filter(conversation_id=conversation_id).values(
        "role", "content", "memory_outcome", "metadata")))


async def test_remember_commits_after_the_final_answer(user):
    frames = Frames()
    result = await run_turn(user=user, content=f"remember: {FACT}", emit=frames)

    assert result.memory.status == "committed"
    assert result.memory.changed == ("memory",)
    assert result.memory.usage["memory"]["used"] == len(FACT)
    assert (await snapshot_of(user)).memory == (FACT,)
    assert frames.types()[0] == "turn_started"
    assert frames.types()[-1] == "turn_completed"
    # The tool frame comes before the answer; the commit only after the answer.
    assert frames.types().index("tool") < frames.types().index("turn_completed")


async def test_stored_messages_keep_tool_calls_as_metadata_only(user):
    result = await run_turn(user=user, content=f"remember: {FACT}")
    stored = await messages_of(result.conversation_id)

    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert [m["memory_outcome"] for m in stored] == ["committed", "committed"]
    assistant = stored[1]
    assert assistant["metadata"]["tools"] == [{"tool": "memory_update", "status": "staged", "operation_count": 1}]
    assert FACT not in json.dumps(assistant["metadata"])


async def test_plain_message_sees_the_memory_block(user):
    await aseed(user, user_entries=["Prefers short answers"], memory_entries=[FACT])
    result = await run_turn(user=user, content="what do you know about me?")

    assert "Prefers short answers" in result.reply and FACT in result.reply
    assert result.memory.status == "nothing_to_commit"
    assert (await demo()).calls[-1].memory_block is True


async def test_conversation_history_is_sent_back_to_the_model(user):
    first = await run_turn(user=user, content="hello")
    second = await run_turn(user=user, content="hello again", conversation_id=first.conversation_id)

    assert second.conversation_id == first.conversation_id
    assert [m["role"] for m in await messages_of(first.conversation_id)] == ["user", "assistant"] * 2


async def test_failed_turn_commits_nothing(user):
    frames = Frames()
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content=f"remember: {FACT} [[fail]]", emit=frames)

    assert failure.value.code == "model_failed_after_staging"
    assert failure.value.memory.status == "discarded"
    assert frames.has("tool") and frames.types()[-1] == "turn_failed"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    discarded = await events_of(user, Outcome.DISCARDED)
    assert [(e.operation_count, e.error_code) for e in discarded] == [(1, "model_failed_after_staging")]
    assert await events_of(user, Outcome.COMMITTED) == []


@FALLBACK
async def test_fallback_does_not_run_after_a_staged_mutation(user):
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content=f"remember: {FACT} [[fail]]")

    assert failure.value.code == "model_failed_after_staging"
    models = [call.model for call in (await demo()).calls]
    assert models == ["demo", "demo"]  # the tool round and the failing round; no fallback
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0


@FALLBACK
async def test_fallback_runs_as_a_fresh_attempt_when_nothing_was_staged(user):
    frames = Frames()
    result = await run_turn(user=user, content=f"remember: {FACT} [[fail-first]]", emit=frames)

    calls = (await demo()).calls
    assert [(call.model, call.status) for call in calls] == [
        ("demo", 500), ("demo-fallback", 200), ("demo-fallback", 200),
    ]
    assert result.model == "demo-fallback"
    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == (FACT,)
    assert {"type": "delta", "text": "", "reset": True, "turn_id": result.turn_id} in frames.frames


async def test_model_failure_without_fallback_reports_no_memory_change(user):
    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content="hello [[fail-first]]")

    assert failure.value.code == "model_error"
    assert failure.value.memory.status == "nothing_to_commit"  # nothing was staged, so nothing was lost
    assert await events_of(user, Outcome.DISCARDED) == []  # nothing was staged, nothing to record


async def test_read_failure_still_answers_reports_unavailable_and_writes_nothing(user):
    # A row this release cannot read: load_snapshot refuses it (SchemaVersionError).
    await db(MemoryDocument.objects.create, user=user, memory_type="memory", content="legacy row", schema_version=99)
    result = await run_turn(user=user, content=f"remember: {FACT}")

    assert result.memory.status == "unavailable"
    assert result.reply == "My memory is not available right now, so nothing was saved."
    assert result.tool_events[0].status == "unavailable"
    rows = await db(lambda: list(MemoryDocument.objects.filter(user=user).values_list("content", "schema_version")))
    assert rows == [("legacy row", 99)]
    assert await events_of(user, Outcome.COMMITTED) == []

    plain = await run_turn(user=user, content="hello")
    assert plain.memory.status == "unavailable"
    assert "could not read your memory" in plain.reply


async def test_cancelled_turn_commits_nothing(user):
    frames = Frames()
    with override_settings(DEMO_MODEL_DELAY_MS=200):
        task = asyncio.create_task(run_turn(user=user, content=f"remember: {FACT}", emit=frames))
        await wait_for(lambda: frames.has("tool"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert frames.types()[-1] == "turn_failed"
    assert frames.frames[-1]["code"] == "cancelled"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0
    assert [e.error_code for e in await events_of(user, Outcome.DISCARDED)] == ["cancelled"]


async def test_cancel_event_set_before_the_commit_commits_nothing(user):
    cancel = threading.Event()

    async def emit(frame):
        if frame["type"] == "tool":
            cancel.set()

    with pytest.raises(TurnFailed) as failure:
        await run_turn(user=user, content=f"remember: {FACT}", emit=emit, cancel_event=cancel)

    assert failure.value.code == "cancelled"
    assert await db(MemoryDocument.objects.filter(user=user).count) == 0


async def test_concurrent_writers_preserve_both_changes_when_a_new_entry_also_matches(user):
    await aseed(user, memory_entries=["Uses tea breaks"])

    async def emit(frame):
        # Between staging and commit, the person adds a second entry with "tea".
        if frame["type"] == "tool":
            await db(store.commit_operations, user_id=user.pk,
                     operations=[Operation(target="memory", action="add", content="Green tea is fine")])

    result = await run_turn(user=user, content="forget: tea", emit=emit)

    # The staged remove is pinned to the entry it matched, so it still removes that one.
    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == ("Green tea is fine",)


async def test_stale_replace_is_rejected_as_a_conflict_and_keeps_the_persons_correction(user):
    await aseed(user, memory_entries=["Uses Python 3.11"])
    correction = "Uses Python 3.13; never 3.12"

    async def emit(frame):
        # Between staging and commit, the person corrects the entry on the memory page.
        if frame["type"] == "tool":
            await db(store.commit_operations, user_id=user.pk, operations=[
                Operation(target="memory", action="replace", match="Uses Python 3.11", content=correction)])

    result = await run_turn(user=user, content="correct: 3.11 => 3.12", emit=emit)

    assert result.memory.status == "rejected"
    assert result.memory.code == "conflict"
    assert "changed while" in result.memory.message and "not saved" in result.memory.message
    assert result.reply  # the answer still stands
    assert (await snapshot_of(user)).memory == (correction,)
    [event] = await events_of(user, Outcome.REJECTED)
    assert event.error_code == "conflict"


async def test_two_users_concurrent_turns_never_see_each_others_memory(user, other_user):
    await aseed(user, memory_entries=["ALICE-SENTINEL-7f3a"])
    await aseed(other_user, memory_entries=["BOB-SENTINEL-91c2"])

    async def turns_of(person, own, foreign):
        for index in range(4):
            result = await run_turn(user=person, content=f"remember: {own} fact {index}")
            assert result.memory.status == "committed"
            reply = (await run_turn(user=person, content="what do you know?")).reply
            assert own in reply and foreign not in reply

    with override_settings(DEMO_MODEL_DELAY_MS=1):
        await asyncio.gather(
            turns_of(user, "ALICE-SENTINEL-7f3a", "BOB-SENTINEL-91c2"),
            turns_of(other_user, "BOB-SENTINEL-91c2", "ALICE-SENTINEL-7f3a"),
        )

    alice, bob = await snapshot_of(user), await snapshot_of(other_user)
    assert all("ALICE" in entry for entry in alice.memory) and len(alice.memory) == 5
    assert all("BOB" in entry for entry in bob.memory) and len(bob.memory) == 5


async def test_conversation_of_another_user_is_refused(user, other_user):
    theirs = await run_turn(user=other_user, content="hello")
    with pytest.raises(ConversationNotFound):
        await run_turn(user=user, content="hello", conversation_id=theirs.conversation_id)
    assert await db(Message.objects.filter(conversation_id=theirs.conversation_id).count) == 2


@override_settings(AGENTMEMORY={"ENABLED": False})
async def test_flag_off_serves_chat_with_no_memory_block_and_no_tool(user):
    await aseed(user, memory_entries=[FACT])
    result = await run_turn(user=user, content=f"remember: {FACT} again")

    assert result.memory.status == "disabled"
    call = (await demo()).calls[-1]
    assert (call.tools_offered, call.memory_block) == (False, False)
    assert FACT not in result.reply
    assert (await snapshot_of(user)).memory == (FACT,)
    assert (await chat_agent()).memory_tool is False


async def test_anonymous_user_cannot_run_a_memory_turn():
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(PermissionError):
        await run_turn(user=AnonymousUser(), content="hello")
    assert await db(Conversation.objects.count) == 0


async def test_two_concurrent_cold_requests_build_one_agent():
    first, second = await asyncio.gather(chat_agent(), chat_agent())
    assert first is second
    assert registry.builds == 1

    free_a, free_b = await asyncio.gather(memory_free_agent(), memory_free_agent())
    assert free_a is free_b and free_a is not first
    assert free_a.llm is first.llm  # one client for both agents
    assert free_a.memory_tool is False and first.memory_tool is True
    assert registry.builds == 2


async def test_request_local_agent_never_changes_the_shared_agent(user):
    agent = await chat_agent()
    before = (agent.instructions, agent.memory_tool)
    await aseed(user, memory_entries=[FACT])
    await run_turn(user=user, content="hello")
    assert (agent.instructions, agent.memory_tool) == before
    assert FACT not in agent.instructions


async def test_dispose_closes_the_model_client():
    agent = await chat_agent()
    await registry.aclose()
    assert agent.llm.client.is_closed()
    assert registry.is_empty
