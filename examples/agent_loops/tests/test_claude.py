"""Claude's memory tool through the real anthropic client: the commands Claude is trained on."""
import json

import pytest
from anthropic import AsyncAnthropic

from agentmemory.integrations.claude import ClaudeMemoryTool, run_with_memory
from agentmemory.testing.contract import People
from agentmemory.testing.model_server import Call, Say, ScriptedServer
from agentmemory.turn import MemoryTurn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    with ScriptedServer() as model:
        yield model
    assert model.errors == []


@pytest.fixture
def client(server):
    return AsyncAnthropic(base_url=server.anthropic_url, api_key="scripted", max_retries=0)


def memory(**command) -> Call:
    return Call("memory", command)


async def turn(client, person, question, **kwargs):
    return await run_with_memory(client, user_id=person.pk, model="scripted", max_tokens=512,
                                 messages=[{"role": "user", "content": question}], **kwargs)


async def test_claude_views_then_corrects_a_line_and_the_turn_commits_the_replace(server, client):
    people = People()
    person = await people.make("alice")
    await people.seed(person, "Works on the billing service.", "Prefers tabs.")
    server.push(memory(command="view", path="/memories/profile.md"),
                memory(command="str_replace", path="/memories/profile.md", old_str="tabs", new_str="spaces"),
                Say("Updated: you prefer spaces."))
    result = await turn(client, person, "Actually I prefer spaces.")
    assert result.text == "Updated: you prefer spaces." and result.memory.status == "committed"
    assert await people.stored(person) == ("Works on the billing service.", "Prefers spaces.")
    viewed = server.requests[1].tool_results[0]
    assert "     2\tPrefers tabs." in viewed and "1,375 chars" in viewed
    declared = server.requests[0].body["tools"]
    assert declared == [{"type": "memory_20250818", "name": "memory"}]
    assert "/memories/profile.md" in server.requests[0].system  # the prompt names the tool's files


async def test_rename_is_refused_with_what_the_two_files_can_do_and_nothing_is_saved(server, client):
    people = People()
    person = await people.make("alice")
    server.push(memory(command="rename", old_path="/memories/profile.md", new_path="/memories/me.md"),
                Say("I cannot rename memory files."))
    result = await turn(client, person, "Rename your memory file.")
    assert result.memory.status == "nothing_to_commit"
    result_block = server.requests[1].body["messages"][-1]["content"][0]
    assert result_block["is_error"] is True
    assert "/memories/profile.md" in result_block["content"] and "/memories/notes.md" in result_block["content"]


async def test_your_own_tools_run_beside_the_memory_tool(server, client):
    people = People()
    person = await people.make("alice")
    weather = {"name": "weather", "description": "Today's weather.", "input_schema": {"type": "object"}}

    async def forecast(arguments) -> str:
        return "Sunny."

    server.push(Call("weather", {}), Say("It is sunny."))
    result = await turn(client, person, "Weather?", tools=[weather], tool_handlers={"weather": forecast})
    assert result.text == "It is sunny."
    assert [tool["name"] for tool in server.requests[0].body["tools"]] == ["weather", "memory"]
    assert server.requests[1].tool_results == ("Sunny.",)


async def test_the_memory_tool_in_anthropics_tool_runner_stages_on_the_turn(server, client):
    people = People()
    person = await people.make("alice")
    memory_turn = MemoryTurn(user_id=person.pk)
    await memory_turn.load()
    server.push(memory(command="insert", path="/memories/notes.md", insert_line=0, insert_text="Deploys with Helm."),
                Say("Noted."))
    with memory_turn.attempt():
        runner = client.beta.messages.tool_runner(
            model="scripted", max_tokens=512, system=memory_turn.prompt(), tools=[ClaudeMemoryTool()],
            messages=[{"role": "user", "content": "We deploy with Helm."}])
        final = await runner.until_done()
    assert final.stop_reason == "end_turn" and await people.stored(person) == ()
    assert (await memory_turn.commit()).status == "committed"
    assert await people.stored(person) == ("Deploys with Helm.",)
    assert json.loads(server.requests[0].text)["tools"][0]["type"] == "memory_20250818"


async def test_a_secret_one_of_your_tools_returned_is_refused_when_claude_copies_it_into_memory(server, client):
    people = People()
    person = await people.make("alice")
    notes = {"name": "notes", "description": "The person's notes.", "input_schema": {"type": "object"}}

    async def read_notes(arguments) -> str:
        return "Home wifi password is swordfish99"

    server.push(Call("notes", {}), memory(command="insert", path="/memories/profile.md", insert_line=0,
                                          insert_text="Home wifi: swordfish99"), Say("I can't keep that."))
    result = await turn(client, person, "Read my notes, then save the wifi to memory.", tools=[notes],
                        tool_handlers={"notes": read_notes})
    assert result.memory.status == "nothing_to_commit"
    assert await people.stored(person) == ()
    refused = server.requests[2].body["messages"][-1]["content"][0]
    assert refused["is_error"] is True
