"""The helpdesk's own agent loop: the plain `openai` client and agentmemory's
memory turn (agentmemory.turn.MemoryTurn), as docs/integration.md shows it.

Identity comes from the caller's authentication; the tool stages on the
turn's ledger; the turn commits once, only after a complete answer, and
discards on any failure. Every turn ends: each request carries an output cap
and the whole loop runs under one deadline (a TimeoutError past it, after
the staged change was discarded).
"""
from __future__ import annotations

import asyncio
import json

from openai import AsyncOpenAI

from agentmemory.tool import TOOL_NAME, handle_memory_update
from agentmemory.turn import MemoryOutcome, MemoryTurn

ROUNDS = 4
MAX_TOKENS = 1024  # the most one request may write
DEADLINE_SECONDS = 120.0  # the whole turn, every round


async def answer(client: AsyncOpenAI, *, user_id, question: str, model: str = "demo",
                 deadline: float = DEADLINE_SECONDS) -> tuple[str, MemoryOutcome]:
    memory = MemoryTurn(user_id=user_id)
    await memory.load()
    messages = [
        {"role": "system", "content": "You are the helpdesk assistant.\n\n" + (memory.prompt() or "")},
        {"role": "user", "content": question},
    ]
    try:
        async with asyncio.timeout(deadline):
            return await _rounds(client, memory, messages, model)
    except BaseException:
        # A failure, a cancel or the deadline: what the turn staged is dropped.
        await memory.discard(reason="turn_failed")
        raise


async def _rounds(client: AsyncOpenAI, memory: MemoryTurn, messages: list, model: str) -> tuple[str, MemoryOutcome]:
    with memory.attempt():
        for round_number in range(ROUNDS):
            tools = list(memory.tools) if round_number < ROUNDS - 1 else []  # the last round must answer
            response = await client.chat.completions.create(
                model=model, messages=messages, max_tokens=MAX_TOKENS, **({"tools": tools} if tools else {}))
            choice = response.choices[0]
            if not choice.message.tool_calls:
                if choice.finish_reason != "stop":
                    raise RuntimeError("the answer did not finish")
                return choice.message.content or "", await memory.commit()
            messages.append(choice.message.model_dump(exclude_none=True))
            for call in choice.message.tool_calls:
                reply = (handle_memory_update(call.function.arguments)
                         if call.function.name == TOOL_NAME else {"error": "unknown tool"})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(reply)})
    raise RuntimeError("no answer within the rounds")
