"""Memory never costs the answer: the agent loop's rules, driven by a scripted
model over real HTTP (tests/scripted_model.py) with the real openai client,
through the turn service, the chat socket and the REST API.

- A call that repeats one that already succeeded is not staged again, and
  the tool is withdrawn; the staged change stays staged.
- After the tool's failure budget is spent the tool is withdrawn and the
  next round answers.
- The last allowed round never offers tools.
- A memory_update call written as text (bare JSON, fenced JSON, <tool_call>
  tags) is handled as a call when tools are offered and removed otherwise;
  it is never shown or stored as the answer.
"""
import json

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from chat.agent import MAX_MODEL_ROUNDS
from chat.models import Message
from chat.turns import run_turn
from tests.chat_helpers import connect, db, fresh_agents, receive_until, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "The team deploys on Fridays only"
CALL = {"operations": [{"target": "memory", "action": "add", "content": FACT}]}
# Refused as no_match: after the add, 'memory' is not empty, and no entry holds the match.
MISSING = {"operations": [{"target": "memory", "action": "add", "content": FACT},
                          {"target": "memory", "action": "remove", "match": "never stored"}]}


def offered_tools(server) -> list[bool]:
    return ["tools" in body for body in server.requests]


def stored_answers(user) -> list[str]:
    return list(Message.objects.filter(conversation__user=user, role="assistant").values_list("content", flat=True))


class Frames:
    def __init__(self):
        self.frames = []

    async def __call__(self, frame):
        self.frames.append(frame)

    def shown(self) -> str:
        return "".join(f["text"] for f in self.frames if f["type"] == "delta")


# --- the tool is withdrawn, the answer comes ------------------------------------------------


async def test_a_repeated_successful_call_is_not_staged_again_and_withdraws_the_tool(user, scripted_model):
    scripted_model.push(tool_call(CALL), tool_call(CALL), text("Noted: you deploy on Fridays."))

    result = await run_turn(user=user, content="We deploy on Fridays only.")

    assert result.reply == "Noted: you deploy on Fridays."
    assert [event.status for event in result.tool_events] == ["staged", "repeated"]
    assert offered_tools(scripted_model) == [True, True, False]
    repeated_reply = json.loads(scripted_model.requests[2]["messages"][-1]["content"])
    assert repeated_reply["status"] == "repeated" and "do not call memory_update again" in repeated_reply["message"]
    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == (FACT,)


async def test_a_spent_failure_budget_withdraws_the_tool_and_the_turn_answers(user, scripted_model):
    scripted_model.push(tool_call(MISSING), tool_call(MISSING), tool_call(MISSING),
                        text("Use a virtual environment and reinstall the package."))

    result = await run_turn(user=user, content="how do I fix ModuleNotFoundError?")

    assert result.reply == "Use a virtual environment and reinstall the package."
    assert [event.code for event in result.tool_events] == ["no_match", "no_match", "stop_retrying"]
    assert offered_tools(scripted_model) == [True, True, True, False]
    assert result.memory.status == "nothing_to_commit"


async def test_a_success_after_failures_stays_staged_when_the_budget_runs_out_later(user, scripted_model):
    scripted_model.push(tool_call(MISSING), tool_call(CALL), tool_call(MISSING), tool_call(MISSING),
                        text("Saved what I could."))

    result = await run_turn(user=user, content="remember that we deploy on Fridays")

    assert result.reply == "Saved what I could."
    # Four rounds offered tools; the fifth, the last allowed, did not.
    assert offered_tools(scripted_model) == [True] * (MAX_MODEL_ROUNDS - 1) + [False]
    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == (FACT,)


async def test_the_last_round_never_offers_tools(user, scripted_model):
    calls = [tool_call({"operations": [{"target": "memory", "action": "add", "content": f"Fact number {n}"}]})
             for n in range(MAX_MODEL_ROUNDS - 1)]
    scripted_model.push(*calls, text("All four facts are noted."))

    result = await run_turn(user=user, content="remember four facts")

    assert offered_tools(scripted_model) == [True] * (MAX_MODEL_ROUNDS - 1) + [False]
    assert result.reply == "All four facts are noted."
    assert result.memory.status == "committed"
    assert len((await snapshot_of(user)).memory) == MAX_MODEL_ROUNDS - 1


async def test_a_structured_call_in_the_last_round_is_ignored_and_its_text_is_the_answer(user, scripted_model):
    calls = [tool_call({"operations": [{"target": "memory", "action": "add", "content": f"Fact number {n}"}]})
             for n in range(MAX_MODEL_ROUNDS - 1)]
    scripted_model.push(*calls, tool_call(CALL, text_before="Here is my answer.", finish_reason="stop"))

    result = await run_turn(user=user, content="remember more facts")

    assert result.reply == "Here is my answer."
    assert FACT not in (await snapshot_of(user)).memory


# --- calls written as text ------------------------------------------------------------------

CALL_JSON = json.dumps({"name": "memory_update", "arguments": CALL})
WRITTEN = {
    "bare_json": f"I'll remember that.\n{CALL_JSON}",
    "fenced_json": f"I'll remember that.\n```json\n{CALL_JSON}\n```",
    "tool_call_tags": f"I'll remember that.\n<tool_call>\n{CALL_JSON}\n</tool_call>",
    "bare_arguments": f"I'll remember that. {json.dumps(CALL)}",
}


@pytest.mark.parametrize("form", sorted(WRITTEN))
async def test_a_call_written_as_text_is_handled_as_a_call(user, scripted_model, form):
    scripted_model.push(text(WRITTEN[form]), text("Saved: deploys happen on Fridays."))
    frames = Frames()

    result = await run_turn(user=user, content="We deploy on Fridays only.", emit=frames)

    assert [event.status for event in result.tool_events] == ["staged"]
    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == (FACT,)
    assert "memory_update" not in result.reply and "operations" not in result.reply
    assert "memory_update" not in frames.shown() and "operations" not in frames.shown()
    assert not any("memory_update" in answer for answer in await db(stored_answers, user))
    # The model saw its own call answered like any structured call.
    assert scripted_model.requests[1]["messages"][-1]["role"] == "tool"


@pytest.mark.parametrize("form", sorted(WRITTEN))
async def test_a_call_written_as_text_is_removed_when_memory_is_off(user, scripted_model, form, settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "ENABLED": False}
    scripted_model.push(text(WRITTEN[form]))
    frames = Frames()

    result = await run_turn(user=user, content="We deploy on Fridays only.", emit=frames)

    assert result.reply == "I'll remember that."
    assert "memory_update" not in frames.shown()
    assert await db(stored_answers, user) == ["I'll remember that."]
    assert offered_tools(scripted_model) == [False]


async def test_code_answers_still_stream_as_code(user, scripted_model):
    answer = "Try this:\n```python\nimport sys\nprint({'path': sys.path})\n```\nThen run it."
    scripted_model.push(text(answer))
    frames = Frames()

    result = await run_turn(user=user, content="how do I print sys.path?", emit=frames)

    assert result.reply == answer
    assert frames.shown() == answer
    assert result.tool_events == ()


# --- both transports ------------------------------------------------------------------------


async def test_over_the_socket_a_spent_budget_still_answers(user, scripted_model):
    scripted_model.push(tool_call(MISSING), tool_call(MISSING), tool_call(MISSING), text("Here is the answer."))
    socket = await connect(user)
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "a question", "conversation_id": None}))

    frames = await receive_until(socket, "turn_completed")

    assert frames[-1]["message"]["content"] == "Here is the answer."
    assert [f["status"] for f in frames if f["type"] == "tool"] == ["rejected", "rejected", "stop_retrying"]
    assert not any(f["type"] == "turn_failed" for f in frames)
    await socket.disconnect()


async def test_over_the_socket_a_written_call_is_never_shown(user, scripted_model):
    scripted_model.push(text(WRITTEN["tool_call_tags"]), text("Saved."))
    socket = await connect(user)
    await socket.send_to(text_data=json.dumps({"type": "user_message", "content": "We deploy on Fridays only.",
                                               "conversation_id": None}))

    frames = await receive_until(socket, "turn_completed")

    assert not any("memory_update" in json.dumps(f) for f in frames if f["type"] in ("delta", "turn_completed"))
    assert frames[-1]["memory"]["status"] == "committed"
    await socket.disconnect()


@override_settings(CHAT_TURN_RATE="1000/min")
def test_over_rest_a_repeated_call_and_a_written_call_still_answer(user, scripted_model):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    scripted_model.push(tool_call(CALL), tool_call(CALL), text(WRITTEN["fenced_json"]))

    response = client.post("/api/chat/turns/", {"content": "We deploy on Fridays only.", "conversation_id": None},
                           format="json")

    assert response.status_code == 200
    body = response.json()
    assert "memory_update" not in body["reply"]
    assert body["memory"]["status"] == "committed"
    # The repeated call withdrew the tool, so the written call in the next round was only removed.
    assert offered_tools(scripted_model) == [True, True, False]


async def test_a_round_that_is_only_a_written_call_after_the_tool_was_withdrawn_still_gets_an_answer(
        user, scripted_model):
    scripted_model.push(tool_call(MISSING), tool_call(MISSING), tool_call(MISSING),
                        text(WRITTEN["tool_call_tags"].split("\n", 1)[1]),  # only the call, as text
                        text("Here is the answer without memory."))

    result = await run_turn(user=user, content="a question")

    assert result.reply == "Here is the answer without memory."
    assert [event.status for event in result.tool_events][-1] == "withdrawn"
    told = json.loads(scripted_model.requests[4]["messages"][-1]["content"])
    assert told["status"] == "withdrawn" and "plain text" in told["error"]
    assert offered_tools(scripted_model) == [True, True, True, False, False]
    assert (await snapshot_of(user)).memory == ()


async def test_an_empty_answer_after_a_tool_result_is_asked_again_without_tools(user, scripted_model):
    scripted_model.push(tool_call(CALL), text(""), text("Noted: Fridays only."))

    result = await run_turn(user=user, content="We deploy on Fridays only.")

    assert result.reply == "Noted: Fridays only."
    assert offered_tools(scripted_model) == [True, True, False]
    assert result.memory.status == "committed"
