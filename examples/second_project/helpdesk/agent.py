"""The helpdesk's own agent loop: the plain `openai` client and agentmemory's
memory turn (agentmemory.turn.MemoryTurn), as docs/integration.md shows it.

Identity comes from the caller's authentication; the tool stages on the
turn's ledger; the turn commits once, only after a complete answer, and
discards on any failure.
"""
from __future__ import annotations

import json

from openai import AsyncOpenAI

from agentmemory.tool import TOOL_NAME, handle_memory_update
from agentmemory.turn import MemoryOutcome, MemoryTurn

ROUNDS = 4


async def answer(client: AsyncOpenAI, *, user_id, question: str, model: str = "demo") -> tuple[str, MemoryOutcome]:
    memory = MemoryTurn(user_id=user_id)
    await memory.load()
    messages = [
        {"role": "system", "content": "You are the helpdesk assistant.\n\n" + (memory.prompt() or "")},
        {"role": "user", "content": question},
    ]
    try:
        with memory.attempt():
            for round_number in range(ROUNDS):
                tools = list(memory.tools) if round_number < ROUNDS - 1 else []  # the last round must answer
                response = await client.chat.completions.create(
                    model=model, messages=messages, **({"tools": tools} if tools else {}))
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
    except BaseException:
        await memory.discard(reason="turn_failed")
        raise
