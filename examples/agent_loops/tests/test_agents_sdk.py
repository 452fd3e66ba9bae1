"""The OpenAI Agents SDK adapter beyond the contract: guardrails, tracing, the request-local agent."""
import pytest
from agents import Agent, GuardrailFunctionOutput, OutputGuardrailTripwireTriggered, RunConfig, output_guardrail

from agentmemory.integrations.openai_agents import MEMORY_TOOL, run_with_memory
from agentmemory.testing.contract import People
from agentmemory.testing.model_server import Call, Say, ScriptedServer
from loops import agents_sdk
from tests.drivers import AgentsSdkLoop, openai_client

FACT = "Staged-sentinel qv93 prefers terse answers"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server():
    with ScriptedServer() as model:
        yield model
    assert model.errors == []


async def test_an_output_guardrail_that_trips_on_the_final_answer_commits_nothing(server):
    person = await People().make("alice")

    @output_guardrail
    async def no_promises(context, agent, output):
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    client = openai_client(server)
    agent = agents_sdk.support_agent(client, model="scripted").clone(output_guardrails=[no_promises])
    server.push(AgentsSdkLoop().remember(FACT), Say("Noted."))
    with pytest.raises(OutputGuardrailTripwireTriggered):
        await run_with_memory(agent, "Remember that I prefer terse answers.", user_id=person.pk)
    await client.close()
    assert len(server.requests) == 2  # the change was staged and the model answered; the guardrail refused it
    assert await People().stored(person) == ()


async def test_traces_carry_no_memory_even_when_the_run_config_asks_for_sensitive_data(server, monkeypatch):
    monkeypatch.setenv("OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA", "true")
    person = await People().make("alice")
    client = openai_client(server)
    loop = AgentsSdkLoop()
    server.push(loop.remember(FACT), Say("Noted."))
    with loop.capture_traces() as traces:
        run = await run_with_memory(agents_sdk.support_agent(client, model="scripted"), "Remember: terse.",
                                    user_id=person.pk, run_config=RunConfig(trace_include_sensitive_data=True))
    await client.close()
    assert run.memory.status == "committed"
    assert traces and sum("qv93" in item or "persistent_memory_data" in item for item in traces) == 0
    # The Responses API is asked not to keep the memory block or the tool's arguments.
    assert all(seen.body.get("store") is False for seen in server.requests)


async def test_the_shared_agent_is_never_given_memory_and_dynamic_instructions_keep_theirs(server):
    person = await People().make("alice")
    client = openai_client(server)

    def instructions(context, agent) -> str:
        return "You are the night-shift assistant."

    agent = agents_sdk.support_agent(client, model="scripted").clone(instructions=instructions)
    server.push(Say("Hello."))
    run = await run_with_memory(agent, "Hello.", user_id=person.pk)
    await client.close()
    assert run.final_output == "Hello." and run.memory.status == "nothing_to_commit"
    (seen,) = server.requests
    assert seen.system.startswith("You are the night-shift assistant.") and "<persistent_memory_data>" in seen.system
    assert agent.tools == [] and agent.instructions is instructions


async def test_an_agent_with_its_own_memory_update_is_refused_before_the_model_is_called(server):
    person = await People().make("alice")
    client = openai_client(server)
    agent = agents_sdk.support_agent(client, model="scripted").clone(tools=[MEMORY_TOOL])
    with pytest.raises(ValueError):
        await run_with_memory(agent, "Hello.", user_id=person.pk)
    await client.close()
    assert server.requests == []


async def test_a_secret_one_of_the_agents_tools_returned_is_refused_when_the_model_copies_it(server):
    from agents import function_tool

    from tests.drivers import memory_update

    @function_tool
    def read_notes() -> str:
        """The person's notes."""
        return "Home wifi password is swordfish99"

    person = await People().make("alice")
    client = openai_client(server)
    agent = agents_sdk.support_agent(client, model="scripted").clone(tools=[read_notes])
    server.push(Call("read_notes", {}), memory_update("Home wifi: swordfish99"), Say("I can't keep that."))
    run = await run_with_memory(agent, "Read my notes, then save the wifi to memory.", user_id=person.pk)
    await client.close()
    assert run.memory.status == "nothing_to_commit"
    assert await People().stored(person) == ()
    assert '"threat_secret"' in server.requests[2].tool_results[-1]
