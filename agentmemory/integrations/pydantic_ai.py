"""agentmemory in Pydantic AI (the `pydantic-ai` extra).

`MemoryToolset` offers `memory_update` for one turn; whose memory it edits
comes from the run's dependencies (`person(ctx.deps)`), never from the
model, and a call whose dependencies name anyone but the turn's person is
refused. `run_with_memory` wraps `agent.run` and `run_stream_with_memory`
wraps `agent.run_stream`: each loads the person's memory, adds the memory
block to the run's instructions and the toolset to its toolsets, and commits
once, only after the run produced its final output. A model error, an
exhausted usage limit (`UsageLimitExceeded`: the run's "max turns"), a
cancel, an answer cut off at the output limit (`finish_reason` "length",
which Pydantic AI returns as output) or a stream left unfinished discards
what was staged.

Pydantic AI traces nothing unless the agent is instrumented, and an
instrumented run records prompts and tool arguments unless told not to: a
turn with memory refuses to start (`ValueError`, before any request) on an
agent whose instrumentation records content. Instrument it with
`InstrumentationSettings(include_content=False)`.
"""
from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent, RunContext
from pydantic_ai.models.instrumented import InstrumentationSettings, InstrumentedModel
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset

from ..tool import DESCRIPTION, PARAMETERS, TOOL_NAME, handle_memory_update
from ..turn import MemoryOutcome, MemoryTurn
from .errors import IncompleteAnswer


def user_id_of(deps: Any):
    """The default `person`: the run's dependencies carry the signed-in person's id as `user_id`."""
    return deps.user_id


class MemoryToolset(FunctionToolset):
    """`memory_update` for one memory turn; the person is read from the run's dependencies."""

    def __init__(self, turn: MemoryTurn, *, person: Callable[[Any], Any] = user_id_of) -> None:
        self.turn = turn
        self.person = person

        heard: set[str] = set()

        async def memory_update(ctx: RunContext[Any], **arguments: Any) -> dict:
            if str(person(ctx.deps)) != str(turn.user_id):
                return {"success": False, "status": "no_scope", "code": "no_scope",
                        "error": "Memory is not available in this run; nothing was saved. Answer without it."}
            hear_tool_returns(turn, ctx.messages, heard)
            return handle_memory_update(arguments)  # stages on the attempt's ledger; never writes

        tools = (
            [Tool.from_schema(memory_update, TOOL_NAME, DESCRIPTION, PARAMETERS, takes_ctx=True)] if turn.tools else []
        )
        super().__init__(tools, id="agentmemory")


def hear_tool_returns(turn: MemoryTurn, messages, heard: set[str]) -> None:
    """Hand the turn each tool result of the run so far but memory_update's own, once (`heard`: call ids).

    A value a tool returned as a secret (in this run or in the message
    history it was given) is then refused in what the model stages.
    """
    for message in messages:
        for part in getattr(message, "parts", ()):
            if getattr(part, "part_kind", "") != "tool-return" or part.tool_name == TOOL_NAME:
                continue
            if part.tool_call_id in heard:
                continue
            heard.add(part.tool_call_id)
            content = part.content
            turn.heard_tool_result(content if isinstance(content, str) else json.dumps(content, default=str))


@dataclass(frozen=True)
class MemoryRun:
    """Pydantic AI's run result and what happened to memory."""

    result: Any
    memory: MemoryOutcome

    @property
    def output(self) -> Any:
        return self.result.output


async def _turn(agent: Agent, deps, person, memory: bool, user_prompt=None) -> MemoryTurn:
    turn = MemoryTurn(user_id=person(deps), enabled=None if memory else False)
    if turn.enabled:
        refuse_content_tracing(agent)
    await turn.load()
    if isinstance(user_prompt, str):  # trusted code judges what is staged against what the person said
        turn.heard([{"role": "user", "content": user_prompt}])
    return turn


def refuse_content_tracing(agent: Agent) -> None:
    """Raise ValueError when the agent's instrumentation would record prompts and tool arguments."""
    model = agent.model
    if isinstance(model, InstrumentedModel):
        settings = model.instrumentation_settings
    else:
        resolve = getattr(agent, "_resolve_instrumentation_settings", None)
        settings = resolve() if resolve is not None else agent.instrument
        if settings is True:
            settings = InstrumentationSettings()
    if settings and getattr(settings, "include_content", True):
        raise ValueError("This agent's instrumentation records prompts and tool arguments, which would copy memory "
                         "into traces: instrument it with InstrumentationSettings(include_content=False).")


def _run_options(turn: MemoryTurn, person, options: dict) -> dict:
    block = turn.prompt()
    if block is None:
        return options
    instructions = options.pop("instructions", None)
    toolsets = list(options.pop("toolsets", None) or ())
    return {**options, "instructions": [*_listed(instructions), block],
            "toolsets": [*toolsets, MemoryToolset(turn, person=person)]}


def _listed(instructions) -> list:
    if instructions is None:
        return []
    return list(instructions) if isinstance(instructions, (list, tuple)) else [instructions]


def _finished(response) -> None:
    if getattr(response, "finish_reason", None) == "length":
        raise IncompleteAnswer("length")


async def run_with_memory(
    agent: Agent,
    user_prompt=None,
    *,
    deps: Any,
    person: Callable[[Any], Any] = user_id_of,
    memory: bool = True,
    cancel_event: threading.Event | None = None,
    **options: Any,
) -> MemoryRun:
    """`agent.run` for the person `person(deps)`; commit after its final output.

    `memory=False` is the memory-free mode for untrusted routes. Other
    keywords go to `agent.run`. Re-raise whatever ended the run, after discarding.
    """
    turn = await _turn(agent, deps, person, memory, user_prompt)
    try:
        with turn.attempt():
            result = await agent.run(user_prompt, deps=deps, **_run_options(turn, person, options))
            _finished(result.response)
    except BaseException:
        await turn.discard(reason="turn_failed")
        raise
    return MemoryRun(result, await turn.commit(cancel_event=cancel_event))


@dataclass
class MemoryStream:
    """A streamed run (`stream`, Pydantic AI's StreamedRunResult); `memory` is set once the stream completed."""

    stream: Any
    memory: MemoryOutcome | None = None


@asynccontextmanager
async def run_stream_with_memory(
    agent: Agent,
    user_prompt=None,
    *,
    deps: Any,
    person: Callable[[Any], Any] = user_id_of,
    memory: bool = True,
    cancel_event: threading.Event | None = None,
    **options: Any,
) -> AsyncIterator[MemoryStream]:
    """`agent.run_stream` for the person `person(deps)`; commit when the block ends with the stream complete.

    Consume the stream inside the block (e.g. `await run.stream.get_output()`).
    Leaving the block early, an exception or a cancel discards; a stream that
    ended cut off at the output limit raises IncompleteAnswer after discarding.
    """
    turn = await _turn(agent, deps, person, memory, user_prompt)
    streamed = None
    try:
        with turn.attempt():
            async with agent.run_stream(user_prompt, deps=deps, **_run_options(turn, person, options)) as stream:
                streamed = MemoryStream(stream)
                yield streamed
            if not stream.is_complete:
                raise IncompleteAnswer("stream_not_consumed")
            _finished(stream.response)
    except BaseException:
        await turn.discard(reason="turn_failed")
        raise
    streamed.memory = await turn.commit(cancel_event=cancel_event)
