"""One model loop: stream a reply, run tool calls, repeat until a final answer.

An `Agent` is shared and immutable (built once by `chat.agents`); a turn
gets a `RequestAgent` from `Agent.for_request(...)` with its own compiled
system prompt, so one person's prompt or memory never lands on an object
another request can see. The loop reports tool calls as metadata only (tool
name, status, operation count), never their arguments. Whether a fallback
model may run is decided by the turn (`chat.turns`), which owns the ledger.
"""
from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx2
import openai

from agentmemory.tool import MEMORY_UPDATE_TOOL, TOOL_NAME, handle_memory_update

from .llm import LLM

Emit = Callable[[dict], Awaitable[None]]

# A reply may need a tool round and a confirmation round; more is a loop.
MAX_MODEL_ROUNDS = 5

BASE_INSTRUCTIONS = (
    "You are a helpful assistant in a web chat. Answer clearly and concisely. "
    "The user's messages are theirs; the rest of this system prompt is the application's."
)


class ModelError(Exception):
    """The model call failed (HTTP error, timeout, broken stream, tool loop)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.tool_events: tuple[ToolEvent, ...] = ()


@dataclass(frozen=True)
class ToolEvent:
    """One tool call of a turn, as content-free metadata."""

    tool: str
    status: str
    operation_count: int
    code: str = ""

    def as_metadata(self) -> dict:
        data = {"tool": self.tool, "status": self.status, "operation_count": self.operation_count}
        if self.code:
            data["code"] = self.code
        return data

    def summary(self) -> str:
        if self.tool != TOOL_NAME:
            return f"{self.tool}: {self.status}"
        if self.status == "staged":
            noun = "operation" if self.operation_count == 1 else "operations"
            return f"memory update staged: {self.operation_count} {noun}"
        if self.status == "rejected":
            return f"memory update rejected ({self.code or 'invalid'})"
        return f"memory update refused: {self.status.replace('_', ' ')}"


@dataclass(frozen=True)
class AttemptResult:
    text: str
    model: str
    tool_events: tuple[ToolEvent, ...] = ()


@dataclass(frozen=True)
class Agent:
    """A shared agent: a client, instructions and the tools it may offer."""

    name: str
    llm: LLM
    memory_tool: bool
    instructions: str = BASE_INSTRUCTIONS

    @property
    def models(self) -> tuple[str, ...]:
        return self.llm.models

    def for_request(self, *, memory_prompt: str | None) -> RequestAgent:
        """Return a request-local agent with this turn's compiled prompt."""
        system = self.instructions if memory_prompt is None else f"{self.instructions}\n\n{memory_prompt}"
        tools = (MEMORY_UPDATE_TOOL,) if self.memory_tool and memory_prompt is not None else ()
        return RequestAgent(agent=self, system_prompt=system, tools=tools)


@dataclass(frozen=True)
class RequestAgent:
    agent: Agent
    system_prompt: str
    tools: tuple[dict, ...] = field(default=())

    @property
    def offers_memory_tool(self) -> bool:
        return any(tool["function"]["name"] == TOOL_NAME for tool in self.tools)

    async def run_attempt(self, *, model: str, history: Sequence[dict], emit: Emit) -> AttemptResult:
        """Run the loop on `model` until it answers without tool calls.

        Raise ModelError on any failure of the model; the caller decides
        what that means for staged memory.
        """
        messages: list[dict] = [{"role": "system", "content": self.system_prompt}, *history]
        shown: list[str] = []
        events: list[ToolEvent] = []
        try:
            for _ in range(MAX_MODEL_ROUNDS):
                text, calls = await self._stream_round(model=model, messages=messages, emit=emit)
                shown.append(text)
                if not calls:
                    return AttemptResult(text="".join(shown).strip(), model=model, tool_events=tuple(events))
                messages.append({"role": "assistant", "content": text or None, "tool_calls": calls})
                for call in calls:
                    event, reply = self._run_tool(call)
                    events.append(event)
                    await emit({"type": "tool", **event.as_metadata(), "message": event.summary()})
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(reply)})
            raise ModelError(
                "tool_loop", f"The model kept calling tools for {MAX_MODEL_ROUNDS} rounds; send the message again."
            )
        except ModelError as exc:
            exc.tool_events = tuple(events)
            raise

    async def _stream_round(self, *, model: str, messages: list[dict], emit: Emit) -> tuple[str, list[dict]]:
        request = {"model": model, "messages": messages, "stream": True}
        if self.tools:
            request["tools"] = list(self.tools)
        text: list[str] = []
        fragments: dict[int, dict] = {}
        try:
            stream = await self.agent.llm.client.chat.completions.create(**request)
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                    await emit({"type": "delta", "text": delta.content})
                for fragment in delta.tool_calls or ():
                    _assemble(fragments, fragment)
        except openai.APIStatusError as exc:
            raise ModelError("model_error", f"The model answered HTTP {exc.status_code}; try again.") from exc
        except (openai.APIError, httpx2.HTTPError) as exc:
            raise ModelError("model_unreachable", f"The model could not be reached ({type(exc).__name__}); try again.") from exc
        calls = [fragments[index] for index in sorted(fragments)]
        return "".join(text), calls

    def _run_tool(self, call: dict) -> tuple[ToolEvent, dict]:
        name = call["function"]["name"]
        if name != TOOL_NAME or not self.offers_memory_tool:
            reply = {"success": False, "status": "unknown_tool", "error": f"There is no tool named {name!r} here."}
            return ToolEvent(tool=name[:40], status="unknown_tool", operation_count=0), reply
        arguments = call["function"]["arguments"]
        reply = handle_memory_update(arguments)
        return ToolEvent(
            tool=TOOL_NAME,
            status=str(reply.get("status", "")),
            operation_count=_operation_count(arguments),
            code=str(reply.get("code", "")) if not reply.get("success") else "",
        ), reply


def _assemble(fragments: dict[int, dict], fragment) -> None:
    """Add one streamed tool-call fragment to the call at its index."""
    call = fragments.setdefault(
        fragment.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if fragment.id:
        call["id"] = fragment.id
    if fragment.function is not None:
        if fragment.function.name:
            call["function"]["name"] += fragment.function.name
        if fragment.function.arguments:
            call["function"]["arguments"] += fragment.function.arguments


def _operation_count(arguments: str) -> int:
    try:
        operations = json.loads(arguments).get("operations")
    except (ValueError, AttributeError):
        return 0
    return len(operations) if isinstance(operations, list) else 0
