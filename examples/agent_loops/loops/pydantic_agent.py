"""A support agent on Pydantic AI, with agentmemory (`agentmemory.integrations.pydantic_ai`).

The person comes from the run's dependencies (`Deps.user_id`, filled from
your authentication), never from the model.
"""
from __future__ import annotations

from dataclasses import dataclass

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits

from agentmemory.integrations.pydantic_ai import run_stream_with_memory, run_with_memory
from agentmemory.turn import MemoryOutcome

INSTRUCTIONS = "You are the support assistant. Answer briefly."
REQUEST_LIMIT = 5


@dataclass(frozen=True)
class Deps:
    user_id: int  # the signed-in person, from request.user.pk


def support_agent(client: AsyncOpenAI, *, model: str = "gpt-4o-mini") -> Agent[Deps, str]:
    return Agent(OpenAIChatModel(model, provider=OpenAIProvider(openai_client=client)), deps_type=Deps,
                 instructions=INSTRUCTIONS, retries=1)


async def answer(agent: Agent[Deps, str], *, user_id, question: str, memory: bool = True,
                 request_limit: int = REQUEST_LIMIT) -> tuple[str, MemoryOutcome]:
    run = await run_with_memory(agent, question, deps=Deps(user_id=user_id), memory=memory,
                                usage_limits=UsageLimits(request_limit=request_limit))
    return run.output, run.memory


async def answer_streamed(agent: Agent[Deps, str], *, user_id, question: str) -> tuple[str, MemoryOutcome]:
    """The same turn with `run_stream`: the commit waits until the stream completed."""
    async with run_stream_with_memory(agent, question, deps=Deps(user_id=user_id),
                                      usage_limits=UsageLimits(request_limit=REQUEST_LIMIT)) as run:
        text = await run.stream.get_output()
    return text, run.memory
