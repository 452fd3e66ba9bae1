"""Adapters that give an existing agent loop every guarantee of the write path.

Each module needs its extra and is imported by nothing in agentmemory's core:

- `openai_agents`: the OpenAI Agents SDK (`pip install django-agentmemory[agents]`);
- `pydantic_ai`: Pydantic AI (`[pydantic-ai]`);
- `claude`: Claude's memory tool over the `anthropic` client (`[anthropic]`),
  on the command mapping of `claude_memory` (which needs no extra).

Every adapter goes through `agentmemory.turn.MemoryTurn` (read fail-open, a
fresh scope per attempt, one commit after the final answer, discard on
anything else) and stages through `agentmemory.rules`; none writes memory
itself. `agentmemory.testing.contract` is the suite they all pass.
"""
