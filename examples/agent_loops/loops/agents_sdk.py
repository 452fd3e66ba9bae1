"""A support agent on the OpenAI Agents SDK, with agentmemory (`agentmemory.integrations.openai_agents`).

The model is the SDK's default, the Responses API, through a client you
build (any OpenAI-compatible endpoint). Identity comes from your
authentication: pass `request.user.pk`, never anything the model said.
"""
from __future__ import annotations

from agents import Agent, OpenAIResponsesModel
from openai import AsyncOpenAI

from agentmemory.integrations.openai_agents import run_with_memory
from agentmemory.turn import MemoryOutcome

INSTRUCTIONS = "You are the support assistant. Answer briefly."
MAX_TURNS = 5


def support_agent(client: AsyncOpenAI, *, model: str = "gpt-4o-mini") -> Agent:
    """The shared agent: no memory in it; each turn runs a request-local copy."""
    return Agent(name="Support", instructions=INSTRUCTIONS, model=OpenAIResponsesModel(model=model, openai_client=client))


async def answer(agent: Agent, *, user_id, question: str, memory: bool = True,
                 max_turns: int = MAX_TURNS) -> tuple[str, MemoryOutcome]:
    run = await run_with_memory(agent, question, user_id=user_id, memory=memory, max_turns=max_turns)
    return str(run.final_output), run.memory
