"""A support agent on Claude, with Claude's own memory tool (`agentmemory.integrations.claude`).

Claude curates the person's two documents as the files /memories/profile.md
and /memories/notes.md; agentmemory stages each command and commits once,
after Claude ended its turn.
"""
from __future__ import annotations

from anthropic import AsyncAnthropic

from agentmemory.integrations.claude import run_with_memory
from agentmemory.turn import MemoryOutcome

SYSTEM = "You are the support assistant. Answer briefly."
ROUNDS = 5


async def answer(client: AsyncAnthropic, *, user_id, question: str, memory: bool = True, rounds: int = ROUNDS,
                 model: str = "claude-sonnet-4-5") -> tuple[str, MemoryOutcome]:
    turn = await run_with_memory(client, user_id=user_id, model=model, max_tokens=1024, system=SYSTEM,
                                 messages=[{"role": "user", "content": question}], memory=memory, rounds=rounds)
    return turn.text, turn.memory
