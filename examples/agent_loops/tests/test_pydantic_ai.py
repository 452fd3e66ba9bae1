"""The Pydantic AI adapter beyond the contract: run_stream, and the person from the run's dependencies."""
import pytest
from pydantic_ai.usage import UsageLimits

from agentmemory.integrations.errors import IncompleteAnswer
from agentmemory.integrations.pydantic_ai import MemoryToolset, run_stream_with_memory
from agentmemory.testing.contract import People
from agentmemory.testing.model_server import Say, ScriptedServer
from agentmemory.turn import MemoryTurn
from loops import pydantic_agent
from loops.pydantic_agent import Deps
from tests.drivers import PydanticAiLoop, openai_client

FACT = "Prefers answers in French"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    with ScriptedServer() as model:
        yield model
    assert model.errors == []


async def test_a_streamed_run_commits_once_after_the_stream_completed(server):
    people = People()
    person = await people.make("alice")
    client = openai_client(server)
    server.push(PydanticAiLoop().remember(FACT), Say("Noted, in French from now on."))
    text, outcome = await pydantic_agent.answer_streamed(pydantic_agent.support_agent(client, model="scripted"),
                                                         user_id=person.pk, question="Answer me in French.")
    await client.close()
    assert text == "Noted, in French from now on." and outcome.status == "committed"
    assert all(seen.body.get("stream") for seen in server.requests)  # the real streaming path
    assert await people.stored(person) == (FACT,) and await people.commits(person) == 1


async def test_a_stream_left_before_it_completed_commits_nothing(server):
    people = People()
    person = await people.make("alice")
    client = openai_client(server)
    server.push(PydanticAiLoop().remember(FACT), Say("Noted, in French from now on."))
    with pytest.raises(IncompleteAnswer):
        async with run_stream_with_memory(pydantic_agent.support_agent(client, model="scripted"), "French, please.",
                                          deps=Deps(user_id=person.pk), usage_limits=UsageLimits(request_limit=4)):
            pass  # the caller stops reading: the answer was never delivered
    await client.close()
    assert await people.stored(person) == ()


async def test_the_tool_serves_only_the_person_its_run_depends_on(server):
    people = People()
    alice, bob = await people.make("alice"), await people.make("bob")
    client = openai_client(server)
    turn = MemoryTurn(user_id=alice.pk)
    await turn.load()
    server.push(PydanticAiLoop().remember(FACT), Say("Done."))
    with turn.attempt():
        result = await pydantic_agent.support_agent(client, model="scripted").run(
            "French, please.", deps=Deps(user_id=bob.pk), toolsets=[MemoryToolset(turn)])
    await client.close()
    assert result.output == "Done." and turn.staged == []
    assert '"no_scope"' in server.requests[1].tool_results[0]
    assert (await turn.commit()).status == "nothing_to_commit"
    assert await people.stored(alice) == () and await people.stored(bob) == ()


async def test_an_agent_instrumented_to_record_content_is_refused_before_any_request(server):
    from pydantic_ai.models.instrumented import InstrumentationSettings

    person = await People().make("alice")
    client = openai_client(server)
    agent = pydantic_agent.support_agent(client, model="scripted")
    agent.instrument = InstrumentationSettings()  # Pydantic AI's default records prompts and tool arguments
    with pytest.raises(ValueError, match="include_content=False"):
        await pydantic_agent.answer(agent, user_id=person.pk, question="Hello.")
    assert server.requests == []
    server.push(Say("Hello."))  # the memory-free mode has no memory to copy
    assert (await pydantic_agent.answer(agent, user_id=person.pk, question="Hello.", memory=False))[0] == "Hello."
    await client.close()


async def test_a_secret_one_of_the_agents_tools_returned_is_refused_when_the_model_copies_it(server):
    from agentmemory.testing.model_server import Call
    from tests.drivers import memory_update

    people = People()
    person = await people.make("alice")
    client = openai_client(server)
    agent = pydantic_agent.support_agent(client, model="scripted")

    @agent.tool_plain
    def read_notes() -> str:
        """The person's notes."""
        return "Home wifi password is swordfish99"

    server.push(Call("read_notes", {}), memory_update("Home wifi: swordfish99"), Say("I can't keep that."))
    text, outcome = await pydantic_agent.answer(agent, user_id=person.pk, question="Read my notes, then save the wifi to memory.")
    await client.close()
    assert outcome.status == "nothing_to_commit"
    assert await people.stored(person) == ()
    assert '"threat_secret"' in server.requests[2].tool_results[-1]
