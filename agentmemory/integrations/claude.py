"""Claude's memory tool in an agent loop over the `anthropic` client (the `anthropic` extra).

`run_with_memory` is one turn: it loads the signed-in person's memory
(`agentmemory.turn.MemoryTurn`: fail open, bounded wait), puts the memory
block in the system prompt and offers Claude's own memory tool
(`memory_20250818`, mapped onto the two documents by
`agentmemory.integrations.claude_memory`), runs the Messages API rounds,
and commits once, only when Claude ends its turn (`stop_reason` "end_turn"
or "stop_sequence"). An error, a cancel, an answer cut off (`max_tokens`,
a refusal, the context window) or running out of rounds discards what was
staged and raises. `memory=False` is the memory-free mode for untrusted
routes: no block, no tool, no read.

The `anthropic` client traces its API calls with OpenTelemetry, metadata
only unless told to record content (`open_telemetry` with
`traces.content_mode` "content", or ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE):
a turn with memory always runs on a copy of the client that records
metadata only, since its requests carry the memory block and the tool's
commands.

For Anthropic's tool runner (`client.beta.messages.tool_runner`) use
`ClaudeMemoryTool` inside `MemoryTurn.attempt()` instead and commit yourself,
as `run_with_memory` does; give the turn each of your tools' results
(`MemoryTurn.heard_tool_result`), as `run_with_memory` does, so a secret a
tool returned is never stored.
"""
from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anthropic import AsyncAnthropic
from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, ToolError

from ..turn import MemoryOutcome, MemoryTurn
from .claude_memory import MEMORY_TOOL, PROMPT_NOTE, TOOL_NAME, handle_memory_command
from .errors import IncompleteAnswer, TooManyRounds

FINISHED = frozenset({"end_turn", "stop_sequence"})
ROUNDS = 5

ToolHandler = Callable[[Mapping], Awaitable[str]]


@dataclass(frozen=True)
class ClaudeTurn:
    """The final message of a turn, its text, and what happened to memory."""

    message: object
    text: str
    memory: MemoryOutcome


async def run_with_memory(
    client: AsyncAnthropic,
    *,
    user_id,
    model: str,
    messages: Sequence[Mapping],
    max_tokens: int,
    system: str = "",
    memory: bool = True,
    tools: Sequence[Mapping] = (),
    tool_handlers: Mapping[str, ToolHandler] | None = None,
    rounds: int = ROUNDS,
    cancel_event: threading.Event | None = None,
    **create: object,
) -> ClaudeTurn:
    """Run one turn for the person `user_id` (from your authentication, never the model); commit after it ends.

    `tools` and `tool_handlers` add your own tools (a handler takes the
    tool_use input and returns the result text). Raise IncompleteAnswer,
    TooManyRounds, the client's errors or CancelledError, after discarding.
    """
    turn = MemoryTurn(user_id=user_id, enabled=None if memory else False)
    await turn.load()
    turn.heard(messages)  # trusted code judges what is staged against what the person said
    block = turn.prompt()
    prompt = "\n\n".join(part for part in (system, block, PROMPT_NOTE if block else "") if part)
    offered = [*tools, MEMORY_TOOL] if turn.tools else list(tools)
    client = metadata_only(client)
    history = [dict(message) for message in messages]
    handlers = dict(tool_handlers or {})
    try:
        with turn.attempt():
            for _ in range(rounds):
                response = await client.messages.create(
                    model=model, max_tokens=max_tokens, messages=history,
                    **({"system": prompt} if prompt else {}), **({"tools": offered} if offered else {}), **create,
                )
                calls = [block for block in response.content if block.type == "tool_use"]
                if response.stop_reason != "tool_use" or not calls:
                    if response.stop_reason not in FINISHED:
                        raise IncompleteAnswer(response.stop_reason or "none")
                    text = "".join(block.text for block in response.content if block.type == "text")
                    return ClaudeTurn(response, text, await turn.commit(cancel_event=cancel_event))
                history.append({"role": "assistant", "content": [block.model_dump(mode="json", exclude_none=True)
                                                                  for block in response.content]})
                history.append({"role": "user", "content": [await _result(call, turn, handlers) for call in calls]})
        raise TooManyRounds(rounds)
    except BaseException:
        await turn.discard(reason="turn_failed")
        raise


def metadata_only(client: AsyncAnthropic) -> AsyncAnthropic:
    """Return `client`, or a copy of it whose spans record no request or response content."""
    options = client.open_telemetry
    if options["traces"]["content_mode"] == "metadata_only":
        return client
    return client.with_options(open_telemetry={**options, "traces": {**options["traces"],
                                                                     "content_mode": "metadata_only"}})


async def _result(call, turn: MemoryTurn, handlers: Mapping[str, ToolHandler]) -> dict:
    if call.name == TOOL_NAME and turn.tools:
        reply = handle_memory_command(call.input)
        return _block(call.id, reply.text, reply.is_error)
    handler = handlers.get(call.name)
    if handler is None:
        return _block(call.id, f"There is no tool named {json.dumps(call.name)[:60]} here.", True)
    text = await handler(call.input)
    turn.heard_tool_result(text)  # a value it gives as a secret is refused in what Claude stages after it
    return _block(call.id, text, False)


def _block(tool_use_id: str, text: str, is_error: bool) -> dict:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


class ClaudeMemoryTool(BetaAsyncAbstractMemoryTool):
    """Claude's memory tool for Anthropic's tool runner, staging on the current `MemoryTurn.attempt()`.

    Use it inside `with turn.attempt():` and commit only when the runner's
    final message ended the turn. It reads the attempt's scope, never an
    identity from the model.
    """

    async def call(self, input: object) -> str:  # the raw tool_use input; the base class types it per command
        reply = handle_memory_command(input)
        if reply.is_error:
            raise ToolError(reply.text)
        return reply.text

    async def view(self, command):  # pragma: no cover - `call` handles every command
        return await self.call(command.model_dump())

    create = str_replace = insert = delete = rename = view
