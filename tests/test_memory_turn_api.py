"""agentmemory's memory turn API used by another project's own agent loop,
with no `chat` code at all: the plain `openai` client against a scripted
OpenAI-compatible server over real HTTP, and `agentmemory.turn.MemoryTurn`.

The loop below is the one docs/integration.md shows; every guarantee of the
design comes from the API: identity from the caller, a fresh scope per
attempt, one commit after the complete answer, one outcome.
"""
import ast
import json
import sys

import pytest
from openai import AsyncOpenAI

from agentmemory import store
from agentmemory.models import MemoryDocument
from agentmemory.tool import TOOL_NAME, handle_memory_update
from agentmemory.turn import MemoryTurn
from tests.scripted_model import ScriptedModel, error, text, tool_call

pytestmark = pytest.mark.django_db(transaction=True)

FACT = "Prefers answers with one short code example"
CALL = {"operations": [{"target": "user", "action": "add", "content": FACT}]}


async def answer(client: AsyncOpenAI, memory: MemoryTurn, question: str) -> str:
    """A minimal agent loop of someone else's project (non-streaming for brevity)."""
    messages = [
        {"role": "system", "content": "You are a helpful assistant.\n\n" + (memory.prompt() or "")},
        {"role": "user", "content": question},
    ]
    with memory.attempt():
        for _ in range(3):
            stream = await client.chat.completions.create(
                model="their-model", messages=messages, tools=list(memory.tools), stream=True,
            )
            content, calls, finish = "", {}, None
            async for chunk in stream:
                choice = chunk.choices[0]
                finish = choice.finish_reason or finish
                content += choice.delta.content or ""
                for part in choice.delta.tool_calls or ():
                    call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    call["id"] = part.id or call["id"]
                    call["name"] += (part.function.name or "") if part.function else ""
                    call["arguments"] += (part.function.arguments or "") if part.function else ""
            if not calls:
                if finish != "stop":
                    raise RuntimeError("incomplete answer")
                return content
            messages.append({"role": "assistant", "content": content or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls.values()]})
            for c in calls.values():
                reply = handle_memory_update(c["arguments"]) if c["name"] == TOOL_NAME else {"error": "unknown tool"}
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": json.dumps(reply)})
    raise RuntimeError("too many rounds")


@pytest.fixture
def server():
    with ScriptedModel() as model:
        yield model


@pytest.fixture
def client(server):
    return AsyncOpenAI(base_url=server.base_url, api_key="theirs", max_retries=0)


async def test_the_memory_turn_api_commits_after_the_answer_without_chat_code(user, server, client):
    server.push(tool_call(CALL), text("Noted."))
    memory = MemoryTurn(user_id=user.pk, enabled=True)
    await memory.load()
    assert memory.status == "available"

    reply = await answer(client, memory, "Keep code examples short, one per answer.")
    assert await store_rows(user) == 0  # staged only: nothing is written before the commit
    outcome = await memory.commit()

    assert reply == "Noted."
    assert outcome.status == "committed" and outcome.changed == ("user",)
    assert (await load(user)).user == (FACT,)
    # The prompt the model saw held the untrusted memory frame and the tool.
    assert "<persistent_memory_data>" in server.requests[0]["messages"][0]["content"]
    assert server.requests[0]["tools"][0]["function"]["name"] == "memory_update"


async def test_a_failed_answer_is_discarded_and_a_committed_outcome_is_never_contradicted(user, server, client):
    server.push(tool_call(CALL), error(500))
    memory = MemoryTurn(user_id=user.pk, enabled=True)
    await memory.load()
    with pytest.raises(Exception):
        await answer(client, memory, "Keep code examples short.")
    assert memory.may_fall_back is False  # something was staged: no fallback model in this turn
    outcome = await memory.discard(reason="model_error")
    assert outcome.status == "discarded" and outcome.operation_count == 1
    assert await store_rows(user) == 0

    server.push(tool_call(CALL), text("Noted."))
    second = MemoryTurn(user_id=user.pk, enabled=True)
    await second.load()
    await answer(client, second, "Keep code examples short.")
    committed = await second.commit()
    # A later failure (the reply could not be stored, a disconnect) cannot undo it.
    assert await second.discard(reason="reply_not_stored") == committed
    assert second.outcome.status == "committed"


async def test_memory_off_offers_no_tool_and_no_prompt(user):
    memory = MemoryTurn(user_id=user.pk, enabled=False)
    assert await memory.load() is None
    assert memory.prompt() is None and memory.tools == ()
    with memory.attempt() as scope:
        assert scope is None
    assert (await memory.commit()).status == "disabled"


def test_agentmemory_imports_nothing_from_chat():
    import subprocess
    code = (
        "import django, os, sys; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings');"
        "os.environ.setdefault('SECRET_KEY', 'x'); django.setup();"
        "import agentmemory.turn, agentmemory.tool, agentmemory.store;"
        "print(sorted(m for m in sys.modules if m == 'chat' or m.startswith('chat.')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # django.setup() imports the chat app's models (it is installed); never its turn or agent.
    loaded = set(ast.literal_eval(result.stdout.strip()))
    assert not loaded & {"chat.turns", "chat.agent", "chat.agents", "chat.llm", "chat.consumers"}


async def store_rows(user) -> int:
    from tests.chat_helpers import db
    return await db(MemoryDocument.objects.filter(user=user).count)


async def load(user):
    from tests.chat_helpers import db
    return await db(store.load_snapshot, user_id=user.pk)
