"""agentmemory in the OpenAI Agents SDK (the `agents` extra).

`MEMORY_TOOL` is `memory_update` as the SDK's `FunctionTool`: it stages on
the ledger of the current `MemoryTurn.attempt()` (a ContextVar the run's
tasks inherit) and never writes. `run_with_memory` is one turn around
`Runner.run`: it loads the signed-in person's memory, runs a request-local
copy of the agent with the memory block added to its instructions and the
tool added to its tools, and commits once, only when the run returned a
final output. MaxTurnsExceeded, a guardrail tripwire, a model error, an
incomplete answer (the SDK raises it from the Responses API, its default
model) or a cancel discards what was staged and re-raises.

The SDK's traces carry no model input, output or tool arguments from here:
every run gets `trace_include_sensitive_data=False`, whatever the run config
or the environment says, and the Responses API is asked not to store the
response (`store=False`, unless the agent sets `store` itself).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import threading
from dataclasses import dataclass
from typing import Any

from agents import Agent, FunctionTool, RunConfig, RunHooks, Runner, RunResult

from ..tool import DESCRIPTION, PARAMETERS, TOOL_NAME, handle_memory_update
from ..turn import MemoryOutcome, MemoryTurn


async def _invoke(context, arguments: str) -> str:
    return json.dumps(handle_memory_update(arguments))  # stages on the attempt's ledger; never writes


# The SDK's strict schema mode would reject the optional fields (match, content).
MEMORY_TOOL = FunctionTool(name=TOOL_NAME, description=DESCRIPTION, params_json_schema=PARAMETERS,
                           on_invoke_tool=_invoke, strict_json_schema=False)


@dataclass(frozen=True)
class MemoryRun:
    """The SDK's run result and what happened to memory."""

    result: RunResult
    memory: MemoryOutcome

    @property
    def final_output(self) -> Any:
        return self.result.final_output


def agent_with_memory(agent: Agent, turn: MemoryTurn) -> Agent:
    """Return a copy of `agent` for this turn only: the memory block and tool added when memory is on."""
    block = turn.prompt()
    if block is None:
        return agent
    if any(getattr(tool, "name", None) == TOOL_NAME for tool in agent.tools):
        raise ValueError(f"the agent already has a tool named {TOOL_NAME}; run_with_memory adds its own")
    settings = agent.model_settings
    if settings.store is None:
        settings = dataclasses.replace(settings, store=False)
    return agent.clone(instructions=_instructions(agent.instructions, block), tools=[*agent.tools, MEMORY_TOOL],
                       model_settings=settings)


def _instructions(base, block: str):
    if base is None:
        return block
    if isinstance(base, str):
        return f"{base}\n\n{block}"

    async def dynamic(context, agent) -> str:  # the agent's own dynamic instructions, then memory
        text = base(context, agent)
        if inspect.isawaitable(text):
            text = await text
        return f"{text or ''}\n\n{block}"

    return dynamic


class HeardToolResults(RunHooks):
    """The run's own hooks, and each tool result but memory_update's handed to the turn as it arrives.

    A value a tool returns as a secret is then refused in what the model
    stages after it (`MemoryTurn.heard_tool_result`).
    """

    def __init__(self, turn: MemoryTurn, hooks: RunHooks | None = None) -> None:
        self.turn = turn
        self.hooks = hooks

    async def on_tool_end(self, context, agent, tool, result) -> None:
        if getattr(tool, "name", "") != TOOL_NAME:
            self.turn.heard_tool_result(result if isinstance(result, str) else str(result))
        if self.hooks is not None:
            await self.hooks.on_tool_end(context, agent, tool, result)

    def __getattribute__(self, name: str):
        # Every other hook is the run's own (whatever hooks this SDK version has).
        if name.startswith("on_") and name != "on_tool_end":
            hooks = object.__getattribute__(self, "hooks")
            if hooks is not None:
                return getattr(hooks, name)
        return object.__getattribute__(self, name)


def private_run_config(run_config: RunConfig | None) -> RunConfig:
    """Return the run config with the SDK's capture of model and tool data off."""
    return dataclasses.replace(run_config or RunConfig(), trace_include_sensitive_data=False)


async def run_with_memory(
    agent: Agent,
    input,
    *,
    user_id,
    memory: bool = True,
    run_config: RunConfig | None = None,
    cancel_event: threading.Event | None = None,
    **runner: Any,
) -> MemoryRun:
    """Run `agent` for the person `user_id` (from your authentication, never the model); commit after it returns.

    `memory=False` is the memory-free mode for untrusted routes: no read, no
    block, no tool. Other keywords (max_turns, context, hooks, ...) go to
    `Runner.run`. Re-raise whatever ended the run, after discarding.
    """
    turn = MemoryTurn(user_id=user_id, enabled=None if memory else False)
    await turn.load()
    # Trusted code judges what is staged against what the person said (a string, or the input items).
    turn.heard([{"role": "user", "content": input}] if isinstance(input, str)
               else [item for item in input if isinstance(item, dict)])
    request_agent = agent_with_memory(agent, turn)
    try:
        with turn.attempt():
            hooks = HeardToolResults(turn, runner.pop("hooks", None))
            result = await Runner.run(request_agent, input, run_config=private_run_config(run_config), hooks=hooks,
                                      **runner)
    except BaseException:  # MaxTurnsExceeded, a tripwire, a model error, a cancel: nothing is saved
        await turn.discard(reason="turn_failed")
        raise
    return MemoryRun(result, await turn.commit(cancel_event=cancel_event))


__all__ = ["MEMORY_TOOL", "HeardToolResults", "MemoryRun", "agent_with_memory", "private_run_config",
           "run_with_memory"]
