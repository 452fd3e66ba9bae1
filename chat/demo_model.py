"""The offline demo model: a deterministic Chat Completions server in-process.

It sits behind `httpx2.MockTransport`, so the real `openai` client and our
real model loop run against it exactly as against a hosted model: streamed
`chat.completion.chunk` events, tool calls split into fragments by index,
HTTP errors. It is the model, so it reads what a model reads: the request's
messages, its tools, and the memory block in the system prompt.
model-facing: stays English. Its replies are a model's text, not the page's
words, and its commands are what it reads, so neither is translated (the
pages around them are; see the README's "Languages").

What it understands (the last user message; case-insensitive prefixes):

    remember about me: <fact>    memory_update: add <fact> to "user"
    remember: <fact>             memory_update: add <fact> to "memory"
    remember until Friday: <fact>  the same add, with no `expires`, as a small model sends it: trusted
                                 code reads the time from the person's words ("for two weeks" too)
    forget: <text>               memory_update: remove the entry containing <text>
    correct: <old> => <new>      memory_update: replace the entry containing <old>
    search: <words>              conversation_search: look for <words> in earlier conversations
    anything else                a short reply showing what the memory block holds

A Tidy up request (`agentmemory.tidy`: its system message starts with
`TIDY_MARKER`) gets the tidied document at once: entries that repeat
another (the same words, whatever their case, order or punctuation, or all
the words of a longer entry) merge into the longer one, citing both; every
other entry stays as it is, citing itself.

After a tool result it streams a confirmation that reflects that result
(success with usage, or a plain sentence for the tool's refusal, never the
tool's model-facing error; for a search, the best result
quoted as history, or that nothing was found). Two markers exist for showing and
testing failures: `[[fail]]` answers HTTP 500 on the round after it emitted
its tool call (so a mutation is staged when the model fails), or at once
when there is no tool call to make; `[[fail-first]]` answers HTTP 500 from
the primary model only, before any tool call, so a fallback model can run.

Replies stream word by word, `DEMO_MODEL_DELAY_MS` apart (read per request).
`calls` keeps a content-free record of recent requests (model, round, whether
tools and a memory block were offered) for tests and the benchmark.
"""
from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx2

from agentmemory.prompt import BLOCK_CLOSE, BLOCK_OPEN
from agentmemory.rules import SEPARATOR, TITLES
from agentmemory.words import refusal_sentence

FAIL_MARKER = "[[fail]]"
FAIL_FIRST_MARKER = "[[fail-first]]"
TOOL_NAME = "memory_update"
SEARCH_TOOL_NAME = "conversation_search"
SEARCH_PREFIX = "search:"
_HEADER = re.compile(r"^(USER PROFILE|AGENT MEMORY) \[.*\]$")
_TARGET_BY_TITLE = {title: target for target, title in TITLES.items()}
_WORD = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class DemoCall:
    """What one request looked like, without any of its text."""

    model: str
    round: int
    tools_offered: bool
    memory_block: bool
    status: int
    max_tokens: int | None = None  # the output cap the request carried


@dataclass(frozen=True)
class SeenMemory:
    status: str
    user: tuple[str, ...] = ()
    memory: tuple[str, ...] = ()

    def entries(self, target: str) -> tuple[str, ...]:
        return self.user if target == "user" else self.memory


@dataclass(frozen=True)
class Command:
    target: str
    action: str
    match: str | None = None
    content: str | None = None

    def operation(self) -> dict:
        operation = {"target": self.target, "action": self.action}
        if self.match is not None:
            operation["match"] = self.match
        if self.content is not None:
            operation["content"] = self.content
        return operation


class DemoModel:
    """A transport handler that answers POST /chat/completions with a stream."""

    def __init__(self, *, primary_model: str, delay_ms: Callable[[], int], history: int = 1000) -> None:
        self.primary_model = primary_model
        self.delay_ms = delay_ms
        self.calls: deque[DemoCall] = deque(maxlen=history)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return _error(404, "The demo model serves only POST /chat/completions.")
        body = json.loads(await request.aread())
        messages = body.get("messages") or []
        model = str(body.get("model") or "")
        if _is_tidy(_system_text(messages)):
            cap = body.get("max_tokens") or body.get("max_completion_tokens")
            self.calls.append(DemoCall(model=model, round=0, tools_offered=bool(body.get("tools")),
                                       memory_block=False, status=200,
                                       max_tokens=cap if isinstance(cap, int) else None))
            return self._stream_at_once(model, tidy_answer(_last_user_text(messages)))
        tool_names = {tool.get("function", {}).get("name") for tool in body.get("tools") or []}
        seen = parse_memory_block(_system_text(messages))
        user_text = _last_user_text(messages)
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
        tool_results = _tool_results_after_last_user(messages)
        failing = FAIL_MARKER in user_text
        command = parse_command(_strip_markers(user_text), seen)
        search = parse_search(_strip_markers(user_text))
        can_call_tool = (TOOL_NAME in tool_names and command is not None) or (
            SEARCH_TOOL_NAME in tool_names and search is not None)

        if FAIL_FIRST_MARKER in user_text and model == self.primary_model:
            status = 500
        elif failing and (tool_results or not can_call_tool):
            status = 500
        else:
            status = 200
        self.calls.append(
            DemoCall(
                model=model, round=len(tool_results), tools_offered=bool(tool_names),
                memory_block=seen is not None, status=status, max_tokens=cap,
            )
        )
        if status != 200:
            return _error(status, "The demo model failed on purpose ([[fail]] marker).")
        if tool_results:
            if _last_call_name(messages) == SEARCH_TOOL_NAME:
                return self._stream_text(model, search_answer(tool_results[-1]), cap)
            return self._stream_text(model, confirmation(tool_results[-1], _last_command(messages)), cap)
        if can_call_tool and search is not None:
            return self._stream_call(model, SEARCH_TOOL_NAME, json.dumps({"query": search}),
                                     call_id=f"call_demo_{len(self.calls)}")
        if can_call_tool:
            return self._stream_tool_call(model, command, call_id=f"call_demo_{len(self.calls)}")  # type: ignore[arg-type]
        if search is not None:
            return self._stream_text(
                model, "Search is off in this chat, so I can't look through your past conversations.", cap
            )
        if command is not None:
            return self._stream_text(
                model, "Memory is off in this chat, so I can't save or change anything. I only see this conversation.",
                cap,
            )
        return self._stream_text(model, describe_memory(seen), cap)

    # --- streaming ------------------------------------------------------------

    def _stream_text(self, model: str, text: str, cap: int | None = None) -> httpx2.Response:
        # A word stands for a token: past the request's cap the answer is cut, as a model's is.
        words = _WORD.findall(text) or [""]
        finish = "length" if cap is not None and len(words) > cap else "stop"
        words = words[:cap] if cap is not None else words

        async def events() -> AsyncIterator[bytes]:
            for index, word in enumerate(words):
                if index:
                    await self._pause()
                delta = {"content": word}
                if index == 0:
                    delta["role"] = "assistant"
                yield _sse(_chunk(model, delta))
            yield _sse(_chunk(model, {}, finish_reason=finish))
            yield b"data: [DONE]\n\n"

        return _stream_response(events())

    def _stream_at_once(self, model: str, text: str) -> httpx2.Response:
        # A tidy's answer is a document, not a chat reply: one chunk, no pauses.
        async def events() -> AsyncIterator[bytes]:
            yield _sse(_chunk(model, {"role": "assistant", "content": text}))
            yield _sse(_chunk(model, {}, finish_reason="stop"))
            yield b"data: [DONE]\n\n"

        return _stream_response(events())

    def _stream_tool_call(self, model: str, command: Command, *, call_id: str) -> httpx2.Response:
        return self._stream_call(model, TOOL_NAME, json.dumps({"operations": [command.operation()]}), call_id=call_id)

    def _stream_call(self, model: str, name: str, arguments: str, *, call_id: str) -> httpx2.Response:
        # Two fragments, as hosted models send them: the client must assemble by index.
        middle = len(arguments) // 2
        first, rest = arguments[:middle], arguments[middle:]

        async def events() -> AsyncIterator[bytes]:
            yield _sse(_chunk(model, {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": call_id, "type": "function",
                "function": {"name": name, "arguments": first},
            }]}))
            await self._pause()
            yield _sse(_chunk(model, {"tool_calls": [{"index": 0, "function": {"arguments": rest}}]}))
            yield _sse(_chunk(model, {}, finish_reason="tool_calls"))
            yield b"data: [DONE]\n\n"

        return _stream_response(events())

    async def _pause(self) -> None:
        delay = self.delay_ms()
        await asyncio.sleep(delay / 1000 if delay > 0 else 0)


# --- reading the request -------------------------------------------------------


def parse_command(text: str, seen: SeenMemory | None) -> Command | None:
    """Return the memory command in a user message, or None for plain chat."""
    stripped = text.strip()
    lowered = stripped.lower()
    timed = _REMEMBER_FOR_A_TIME.match(stripped)
    if timed is not None:  # "remember until Friday: ...": the time stays in the person's words
        fact = stripped[timed.end():].strip()
        return Command("user" if timed.group(1) else "memory", "add", content=fact) if fact else None
    if lowered.startswith("remember about me:"):
        fact = stripped[len("remember about me:"):].strip()
        return Command("user", "add", content=fact) if fact else None
    if lowered.startswith("remember:"):
        fact = stripped[len("remember:"):].strip()
        return Command("memory", "add", content=fact) if fact else None
    if lowered.startswith("forget:"):
        match = stripped[len("forget:"):].strip()
        return Command(_target_holding(match, seen), "remove", match=match) if match else None
    if lowered.startswith("correct:") and "=>" in stripped:
        old, new = (part.strip() for part in stripped[len("correct:"):].split("=>", 1))
        if not old or not new:
            return None
        target = _target_holding(old, seen)
        holders = [entry for entry in (seen.entries(target) if seen else ()) if old in entry]
        # The tool wants the complete new entry: edit the one entry it can see.
        content = holders[0].replace(old, new) if len(holders) == 1 else new
        return Command(target, "replace", match=old, content=content)
    return None


_REMEMBER_FOR_A_TIME = re.compile(r"remember( about me)?\s+(?:until|till|for)\s+[^:]{1,40}:", re.IGNORECASE)


def parse_search(text: str) -> str | None:
    """Return the words of a `search: <words>` message, or None."""
    stripped = text.strip()
    if not stripped.lower().startswith(SEARCH_PREFIX):
        return None
    words = " ".join(stripped[len(SEARCH_PREFIX):].split())[:200]
    return words or None


def _target_holding(text: str, seen: SeenMemory | None) -> str:
    if seen is not None and any(text in entry for entry in seen.user):
        return "user"
    return "memory"


def parse_memory_block(system: str) -> SeenMemory | None:
    """Return what the system prompt's memory block shows, or None without one."""
    start = system.find(BLOCK_OPEN)
    end = system.find(BLOCK_CLOSE, start + 1)
    if start < 0 or end < 0:
        return None
    status_match = re.search(r"^memory_status: (\w+)$", system, re.MULTILINE)
    status = status_match.group(1) if status_match else "available"
    sections: dict[str, list[str]] = {"user": [], "memory": []}
    current = None
    for line in system[start + len(BLOCK_OPEN):end].strip("\n").split("\n"):
        header = _HEADER.match(line)
        if header:
            current = _TARGET_BY_TITLE[header.group(1)]
            continue
        if current is not None:
            sections[current].append(line)
    documents = {target: "\n".join(lines).strip("\n") for target, lines in sections.items()}
    return SeenMemory(
        status=status,
        user=tuple(documents["user"].split(SEPARATOR)) if documents["user"] else (),
        memory=tuple(documents["memory"].split(SEPARATOR)) if documents["memory"] else (),
    )


def _system_text(messages: list) -> str:
    return "\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")


def _last_user_text(messages: list) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message.get("content") or ""
    return ""


def _tool_results_after_last_user(messages: list) -> list[dict]:
    results: list[dict] = []
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        if message.get("role") == "tool":
            try:
                results.insert(0, json.loads(message.get("content") or "{}"))
            except ValueError:
                results.insert(0, {"success": False, "error": "unreadable tool result"})
    return results


def _last_command(messages: list) -> dict | None:
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            try:
                return json.loads(call["function"]["arguments"])["operations"][0]
            except (KeyError, IndexError, TypeError, ValueError):
                return None
    return None


def _last_call_name(messages: list) -> str:
    for message in reversed(messages):
        for call in message.get("tool_calls") or []:
            return str((call.get("function") or {}).get("name") or "")
    return ""


def _strip_markers(text: str) -> str:
    return text.replace(FAIL_FIRST_MARKER, "").replace(FAIL_MARKER, "").strip()


# --- Tidy up -----------------------------------------------------------------------


def _is_tidy(system: str) -> bool:
    from agentmemory.tidy import TIDY_MARKER  # agentmemory's models load with it: not at import time

    return system.startswith(TIDY_MARKER)


def tidy_answer(request_text: str) -> str:
    """Return the tidied document for a Tidy up request: repeated entries merged, the rest kept, sources cited."""
    try:  # a line of context, then the entries as a JSON list of {"number", "text"}
        data = json.loads(request_text.split("\n", 1)[1])
    except (IndexError, ValueError):
        data = []
    entries = [(item["number"], str(item.get("text") or "")) for item in (data if isinstance(data, list) else [])
               if isinstance(item, dict) and isinstance(item.get("number"), int)]
    groups: list[list[tuple[int, str]]] = []
    for number, text in entries:
        words = _words(text)
        for group in groups:
            if _repeats(words, _words(group[0][1])):
                group.append((number, text))
                break
        else:
            groups.append([(number, text)])
    lines = []
    for group in groups:
        text = max((text for _, text in group), key=lambda t: (len(_words(t)), len(t)))
        lines.append(f"{' '.join(text.split())} [{','.join(str(number) for number, _ in group)}]")
    return "\n".join(lines)


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", text.casefold()))


def _repeats(one: frozenset[str], other: frozenset[str]) -> bool:
    """The same words, or all the words (three or more) of one inside the other."""
    if one == other:
        return bool(one)
    smaller, larger = (one, other) if len(one) < len(other) else (other, one)
    return len(smaller) >= 3 and smaller <= larger


# --- what it says ----------------------------------------------------------------


def confirmation(result: dict, operation: dict | None) -> str:
    """Return the reply after a tool result: what happened, in plain words."""
    if not result.get("success"):
        # The tool's error is written for the model; the person reads a plain sentence.
        return refusal_sentence(str(result.get("code") or result.get("status") or ""),
                                target=(operation or {}).get("target"))
    if result.get("status") == "unchanged":
        if (operation or {}).get("action") == "remove":
            return "There was nothing like that in my memory, so nothing changed."
        return "I already had that in my memory, so nothing changed."
    target = (operation or {}).get("target", "memory")
    action = (operation or {}).get("action", "add")
    where = "your profile" if target == "user" else "my notes"
    did = {"add": "added that to", "remove": "removed that from", "replace": "corrected that in"}[action]
    usage = (result.get("usage") or {}).get(target, "")
    suffix = f" {where[0].upper()}{where[1:]} will be at {usage}." if usage else ""
    if "proposed to them, not saved" in (result.get("message") or ""):
        # "Ask before saving": the person saves or discards the change; the model must not claim it saved.
        offer = {"add": "adding that to", "remove": "removing that from", "replace": "correcting that in"}[action]
        where = "your profile" if target == "user" else "your notes"
        return f"I proposed {offer} {where}. Nothing is saved until you choose Save."
    # The chat's memory line under the reply says whether it was saved: the reply does not say it twice.
    return f"Done: I {did} {where}.{suffix}"


def search_answer(result: dict) -> str:
    """Return the reply after a conversation_search result: the best hit, quoted, or none."""
    if not result.get("success"):
        return "I could not search your past conversations just now."
    hits = result.get("untrusted_quoted_history") or []
    if not hits:
        return "I found nothing about that in your past conversations."
    best = hits[0]
    title = best.get("conversation") or "an earlier conversation"
    match = best.get("match") or ""  # the message's own words; matches are marked out of band (match_spans)
    more = f" ({len(hits)} results in all.)" if len(hits) > 1 else ""
    return f"From your past conversations, \u201c{title}\u201d on {best.get('date', '')}: {match}{more}"


def describe_memory(seen: SeenMemory | None) -> str:
    """Return the plain-chat reply: what the memory block holds."""
    if seen is None:
        return "Hello! I am the offline demo model. Memory is off in this chat, so I only see this conversation."
    if seen.status != "available":
        return "Hello! I could not read your memory this time, so I am answering without it."
    if not seen.user and not seen.memory:
        return (
            "Hello! I do not know anything about you yet. Tell me with "
            "\"remember: <fact>\" or \"remember about me: <fact>\"."
        )
    parts = ["Hello! Here is what I remember."]
    if seen.user:
        parts.append("About you: " + "; ".join(seen.user) + ".")
    if seen.memory:
        parts.append("Notes: " + "; ".join(seen.memory) + ".")
    return " ".join(parts)


# --- the wire format -------------------------------------------------------------


def _chunk(model: str, delta: dict, finish_reason: str | None = None) -> dict:
    return {
        "id": "chatcmpl-demo",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _sse(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def _stream_response(events: AsyncIterator[bytes]) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=events)


def _error(status: int, message: str) -> httpx2.Response:
    return httpx2.Response(
        status, json={"error": {"message": message, "type": "server_error", "code": None}}
    )
