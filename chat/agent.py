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
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

import httpx2
import openai
from django.conf import settings
from django.utils.translation import gettext, gettext_noop, ngettext

from agentmemory.arguments import load_arguments
from agentmemory.scope import current_memory_request
from agentmemory.tool import MEMORY_UPDATE_TOOL, TOOL_NAME, handle_memory_update

from .llm import LLM
from .repetition import RepetitionGuard
from .search import (
    CONVERSATION_SEARCH_TOOL,
    MAX_SEARCHES_PER_ATTEMPT,
    SearchScope,
    handle_conversation_search,
)
from .search import TOOL_NAME as SEARCH_TOOL_NAME
from .sse import EventTooLarge
from .text_calls import TextCallFilter

logger = logging.getLogger(__name__)

Emit = Callable[[dict], Awaitable[None]]

# A reply may need a tool round and a confirmation round; the last of these
# rounds never offers tools, so a model that keeps calling must answer.
MAX_MODEL_ROUNDS = 5
# How a round that carries tool calls may end (some servers say "stop").
TOOL_FINISH_REASONS = frozenset({"tool_calls", "stop", "function_call"})
# Tool replies after which the tool is withdrawn for the rest of the attempt.
WITHDRAW_STATUSES = frozenset({"stop_retrying", "repeated", "unavailable", "no_scope"})

# model-facing: stays English (the prompt, in every language of the pages).
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
    result_count: int | None = None  # conversation_search: how many results it returned
    ask_first: bool = False  # the person reviews changes ("ask before saving"): staged means proposed

    def as_metadata(self) -> dict:
        data = {"tool": self.tool, "status": self.status, "operation_count": self.operation_count}
        if self.code:
            data["code"] = self.code
        if self.result_count is not None:
            data["result_count"] = self.result_count
        return data

    def summary(self) -> str:
        """Return the plain sentence a person sees for this call (never a code)."""
        if self.tool == SEARCH_TOOL_NAME:
            return _search_summary(self.status, self.result_count or 0)
        if self.tool != TOOL_NAME:
            return gettext("The assistant asked for a tool that is not available here.")
        if self.status == "staged":
            count = self.operation_count
            if self.ask_first:
                return ngettext("Memory: %(count)d change ready for you to save or discard when this reply completes.",
                                "Memory: %(count)d changes ready for you to save or discard when this reply completes.",
                                count) % {"count": count}
            return ngettext("Memory: %(count)d change ready, saved when this reply completes.",
                            "Memory: %(count)d changes ready, saved when this reply completes.",
                            count) % {"count": count}
        if self.status in ("unchanged", "repeated"):
            return gettext("Memory: nothing new to save.")
        if self.status == "rejected":
            return gettext("Memory: a change was not accepted.")
        if self.status == "stop_retrying":
            return gettext("Memory: the assistant stopped trying to change memory in this reply.")
        return gettext("Memory is not available in this reply.")


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
    # conversation_search: only the authenticated chat agent may offer it.
    search_tool: bool = False

    @property
    def models(self) -> tuple[str, ...]:
        return self.llm.models

    def for_request(self, *, memory_prompt: str | None, search: SearchScope | None = None,
                    memory_tool: bool = True, heard: Callable[[str], None] | None = None) -> RequestAgent:
        """Return a request-local agent with this turn's compiled prompt.

        `search` (set by the turn from the authenticated person, only while
        memory is on for the turn) offers conversation_search, on an agent
        that may offer it. `memory_tool=False` leaves memory_update out for
        this request (trusted code's `MemoryTurn.answers_from_memory`).
        `heard` is given each tool result of the loop but memory_update's
        own replies (`MemoryTurn.heard_tool_result`).
        """
        system = self.instructions if memory_prompt is None else f"{self.instructions}\n\n{memory_prompt}"
        offer = self.memory_tool and memory_tool and memory_prompt is not None
        tools: tuple[dict[str, Collection[str]], ...] = (MEMORY_UPDATE_TOOL,) if offer else ()
        if not (self.search_tool and memory_prompt is not None):
            search = None
        if search is not None:
            tools += (CONVERSATION_SEARCH_TOOL,)
        return RequestAgent(agent=self, system_prompt=system, tools=tools, search=search, heard=heard)


@dataclass(frozen=True)
class RequestAgent:
    agent: Agent
    system_prompt: str
    tools: tuple[dict, ...] = field(default=())
    search: SearchScope | None = None  # whose conversations conversation_search reads
    # Trusted code reads each tool result for secrets, as it is appended (`MemoryTurn.heard_tool_result`).
    heard: Callable[[str], None] | None = None

    @property
    def offers_memory_tool(self) -> bool:
        return any(tool["function"]["name"] == TOOL_NAME for tool in self.tools)

    @property
    def offers_search_tool(self) -> bool:
        return self.search is not None and any(
            tool["function"]["name"] == SEARCH_TOOL_NAME for tool in self.tools)

    async def run_attempt(self, *, model: str, history: Sequence[dict], emit: Emit) -> AttemptResult:
        """Run the loop on `model` until it gives a complete answer.

        Memory can fail; the answer cannot fail because of it. The tool is
        withdrawn once the tool says stop (its failure budget is spent, or
        memory is unavailable) or the model repeats a call that already
        succeeded, and the last round never offers tools, so the model must
        answer. Raise ModelError on any failure of the model, including an
        answer that did not finish (`finish_reason` other than "stop"); the
        caller decides what that means for staged memory.
        """
        messages: list[dict] = [{"role": "system", "content": self.system_prompt}, *history]
        shown: list[str] = []
        events: list[ToolEvent] = []
        offered = bool(self.tools)
        succeeded: set[str] = set()
        searches = 0
        try:
            for index in range(MAX_MODEL_ROUNDS):
                tools = offered and index + 1 < MAX_MODEL_ROUNDS
                reply = await self._stream_round(model=model, messages=messages, emit=emit, tools=tools)
                # Without tools a call is not run; a round that is nothing but a call
                # is answered "withdrawn" so the model answers in words next round.
                last = index + 1 == MAX_MODEL_ROUNDS
                withdrawn = not tools and bool(reply.calls) and not reply.text.strip() and not last
                calls = reply.calls if tools or withdrawn else []
                if not calls:
                    if reply.finish_reason != "stop":
                        raise _incomplete(reply.finish_reason)
                    shown.append(reply.text)
                    text = "".join(shown).strip()
                    if not text and (events or reply.dropped) and not last:
                        # Small models sometimes end silently after a tool result, or write only a
                        # made-up tool reply: ask once more, without tools, so the memory step never
                        # costs the answer.
                        offered = False
                        continue
                    if not text:
                        raise ModelError("model_empty",
                                         gettext("The assistant gave no answer. Send your message again."))
                    return AttemptResult(text=text, model=model, tool_events=tuple(events))
                if reply.finish_reason not in TOOL_FINISH_REASONS:
                    raise _incomplete(reply.finish_reason)
                shown.append(reply.text)
                messages.append({"role": "assistant", "content": reply.text or None, "tool_calls": calls})
                for call in calls:
                    if withdrawn:
                        event, result = _withdrawn(call)
                    elif call["function"]["name"] == SEARCH_TOOL_NAME and self.offers_search_tool:
                        searches += 1
                        event, result = await self._run_search(call, searches)
                    else:
                        event, result = self._run_tool(call, succeeded)
                    events.append(event)
                    if result.get("status") in WITHDRAW_STATUSES:
                        offered = False
                    await emit({"type": "tool", **event.as_metadata(), "message": event.summary()})
                    content = json.dumps(result)
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
                    if self.heard is not None and call["function"]["name"] != TOOL_NAME:
                        self.heard(content)  # a conversation_search hit may hold a secret of an earlier chat
            raise AssertionError("the last round offers no tools, so it always answers or fails")
        except ModelError as exc:
            exc.tool_events = tuple(events)
            raise

    async def _stream_round(self, *, model: str, messages: list[dict], emit: Emit, tools: bool) -> _Round:
        request = {"model": model, "messages": messages, "stream": True}
        if tools:
            request["tools"] = list(self.tools)
        fragments: dict[int, dict] = {}
        finish_reason = None
        text = TextCallFilter()
        loop = RepetitionGuard()
        looping = too_long = False
        # A server that ignores the token cap is cut off here: no reply longer than this is stored.
        cap, written_chars = settings.CHAT_MAX_REPLY_CHARS, 0
        try:
            # Chunks arrive as the decoded JSON objects (chat.llm.LLM.stream_chat):
            # read defensively, an OpenAI-compatible server may leave fields out.
            stream = await self.agent.llm.stream_chat(request)
            async with stream:
                async for chunk in stream:
                    choices = chunk.get("choices") if isinstance(chunk, dict) else None
                    choice = choices[0] if isinstance(choices, list) and choices else None
                    if not isinstance(choice, dict):
                        continue
                    finish_reason = choice.get("finish_reason") or finish_reason
                    delta = choice.get("delta")
                    if not isinstance(delta, dict):
                        continue
                    content = delta.get("content")
                    if content and isinstance(content, str):
                        # Counted as written, shown or held back (a call or a tool reply written as text).
                        written_chars += len(content)
                        if written_chars > cap:
                            too_long = True  # leaving the block closes the stream
                            break
                        if visible := text.feed(content):
                            await emit({"type": "delta", "text": visible})
                            if loop.feed(visible):
                                # Leaving the block closes the stream: the server stops generating.
                                looping = True
                                break
                    pieces = delta.get("tool_calls")
                    if isinstance(pieces, list):
                        for position, fragment in enumerate(pieces):
                            _assemble(fragments, fragment, position)
        except EventTooLarge:
            too_long = True  # one streamed event past CHAT_MAX_SSE_EVENT_BYTES: the block closed the stream
        except openai.APIStatusError as exc:
            raise ModelError("model_error", gettext("The assistant could not answer just now. Try again.")) from exc
        except (openai.APIError, httpx2.HTTPError) as exc:
            raise ModelError("model_unreachable",
                             gettext("The assistant could not be reached. Try again in a moment.")) from exc
        if looping:
            raise _incomplete("repetition")
        if too_long:
            raise _incomplete("length")
        tail, cleaned, written = text.finish()
        if tail:
            await emit({"type": "delta", "text": tail})
        calls = [fragments[index] for index in sorted(fragments)]
        # A call written as text is the call it stands for (when tools are offered).
        calls += [
            {"id": f"call_text_{len(calls) + n}", "type": "function",
             "function": {"name": TOOL_NAME, "arguments": call.arguments}}
            for n, call in enumerate(written)
        ]
        return _Round(text=cleaned, calls=calls, finish_reason=finish_reason,
                      dropped=not cleaned.strip() and bool(text.text.strip()))

    async def _run_search(self, call: dict, count: int) -> tuple[ToolEvent, dict]:
        """Run conversation_search for the turn's person: read-only, never staged."""
        if count > MAX_SEARCHES_PER_ATTEMPT:
            # model-facing: stays English (the tool replies, here and below, are what the model reads).
            reply = {
                "success": False, "status": "search_limit",
                "error": f"You already searched {MAX_SEARCHES_PER_ATTEMPT} times in this reply. "
                "Answer the user now with what you found.",
            }
            return ToolEvent(tool=SEARCH_TOOL_NAME, status="search_limit", operation_count=0, result_count=0), reply
        reply = await handle_conversation_search(call["function"]["arguments"], self.search)  # type: ignore[arg-type]
        return ToolEvent(
            tool=SEARCH_TOOL_NAME, status=str(reply.get("status", "")), operation_count=0,
            result_count=int(reply.get("result_count") or 0),  # type: ignore[call-overload]  # an int
        ), reply

    def _run_tool(self, call: dict, succeeded: set[str]) -> tuple[ToolEvent, dict]:
        name = call["function"]["name"]
        if name != TOOL_NAME or not self.offers_memory_tool:
            # model-facing: stays English (tool replies are what the model reads).
            reply = {"success": False, "status": "unknown_tool", "error": f"There is no tool named {name!r} here."}
            return ToolEvent(tool=name[:40], status="unknown_tool", operation_count=0), reply
        arguments = call["function"]["arguments"]
        key = _canonical(arguments)
        if key in succeeded:
            # Staging it again could fail (a replace whose entry is gone) and cost the change.
            reply = {
                "success": True, "status": "repeated",
                "message": "This exact change was already accepted in this turn; do not call memory_update "
                "again. Answer the user now.",
            }
            return ToolEvent(tool=TOOL_NAME, status="repeated", operation_count=_operation_count(arguments)), reply
        reply = handle_memory_update(arguments)
        if reply.get("success"):
            succeeded.add(key)
        request = current_memory_request.get()
        return ToolEvent(
            tool=TOOL_NAME,
            status=str(reply.get("status", "")),
            operation_count=_operation_count(arguments),
            code=str(reply.get("code", "")) if not reply.get("success") else "",
            ask_first=bool(request and request.ask_first),
        ), reply


@dataclass(frozen=True)
class _Round:
    text: str
    calls: list[dict]
    finish_reason: str | None
    dropped: bool = False  # the model wrote only what is never an answer (a tool's reply said back)


def _withdrawn(call: dict) -> tuple[ToolEvent, dict]:
    # model-facing: stays English (a tool reply the model reads).
    if call["function"]["name"] == SEARCH_TOOL_NAME:
        reply = {
            "success": False, "status": "withdrawn",
            "error": "conversation_search is not available for the rest of this reply. "
            "Answer the user in plain text now.",
        }
        return ToolEvent(tool=SEARCH_TOOL_NAME, status="withdrawn", operation_count=0, result_count=0), reply
    reply = {
        "success": False, "status": "withdrawn",
        "error": "memory_update is not available for the rest of this reply; nothing was saved. "
        "Answer the user in plain text now.",
    }
    return ToolEvent(tool=TOOL_NAME, status="withdrawn", operation_count=0), reply


def _search_summary(status: str, count: int) -> str:
    """The plain sentence for a conversation_search call (never the query or a result)."""
    if status == "found":
        return ngettext("Searched your past conversations: %(count)d result.",
                        "Searched your past conversations: %(count)d results.", count) % {"count": count}
    if status == "none":
        return gettext("Searched your past conversations: nothing found.")
    return gettext("Could not search your past conversations this time.")


# What the person reads when an answer did not finish, by why (the reason itself is for logs).
# Marked here, translated when the error is raised (in the request's or socket's language).
INCOMPLETE_MESSAGES = {
    "length": gettext_noop("The answer reached its length limit and was cut off, so nothing was saved to memory. "
                           "Ask for a shorter answer, or ask it to continue."),
    "repetition": gettext_noop("The answer began repeating itself and was stopped, so nothing was saved to memory. "
                               "Send your message again."),
}
INCOMPLETE_MESSAGE = gettext_noop("The assistant stopped before finishing its answer, so nothing was saved. "
                                  "Send your message again.")


def _incomplete(finish_reason: str | None) -> ModelError:
    logger.info("model answer incomplete: finish_reason=%s", finish_reason or "none")
    return ModelError("model_incomplete", gettext(INCOMPLETE_MESSAGES.get(finish_reason or "", INCOMPLETE_MESSAGE)))


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(load_arguments(arguments), sort_keys=True)
    except (ValueError, RecursionError):
        return arguments


def _assemble(fragments: dict[int, dict], fragment, position: int = 0) -> None:
    """Add one streamed tool-call fragment (a JSON object) to the call at its index.

    A fragment without an index belongs to the call at its place in the
    chunk's list; arguments sent as a JSON object rather than a string are
    taken as their JSON text.
    """
    if not isinstance(fragment, dict):
        return
    index = fragment.get("index")
    call = fragments.setdefault(
        index if isinstance(index, int) and not isinstance(index, bool) else position,
        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
    )
    if fragment.get("id") and isinstance(fragment["id"], str):
        call["id"] = fragment["id"]
    function = fragment.get("function")
    if isinstance(function, dict):
        name, arguments = function.get("name"), function.get("arguments")
        if name and isinstance(name, str):
            call["function"]["name"] += name
        if isinstance(arguments, (dict, list)):
            arguments = json.dumps(arguments)
        if arguments and isinstance(arguments, str):
            call["function"]["arguments"] += arguments


def _operation_count(arguments: str) -> int:
    try:
        operations = load_arguments(arguments).get("operations")
    except (ValueError, AttributeError, RecursionError):
        return 0
    return len(operations) if isinstance(operations, list) else 0
