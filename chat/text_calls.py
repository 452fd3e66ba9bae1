"""Tool calls that a model wrote as text instead of as a structured call.

Small open-weights models (and servers whose chat template they ignore)
sometimes answer with `{"name": "memory_update", "arguments": {...}}`, a
fenced ```json block holding it, or `<tool_call>...</tool_call>` tags. That
text must never be shown or stored as the person's answer: when tools are
offered it is handled as the call it is, otherwise it is dropped, and the
rest of the answer is kept. So is the tool's own reply said back as the
answer in Qwen's `<tool_response>...` tags (`{"success": false, "status":
"rejected", "code": ...}`): it is written for the model, with codes no
person reads, and it is dropped. The same JSON without the tags is left
alone: `{"success": ..., "status": ...}` is also what an API example in an
ordinary answer looks like.

`TextCallFilter` sits on the stream: it passes text through as it arrives
and holds back from the first place a call could start (a `<tool_call>` tag,
a code fence, a `{` opening a line) until it can tell, or until the round
ends. `extract_calls` then finds every call in the round's whole text.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

TOOL_NAME = "memory_update"

_OPEN_TAG = "<tool_call>"
_RESPONSE_OPEN = "<tool_response>"
_FENCE = "```"
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_RESPONSE_TAG = re.compile(r"<tool_response>.*?(?:</tool_response>|$)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n(.*?)(?:```|$)", re.DOTALL)
_CALL_START = re.compile(r"""\{\s*["'](?:name|function|operations|type|tool|arguments|target|action)["']\s*:""")
# A label a model writes before the call ("memory_update:", "functions.memory_update(").
_LABEL = re.compile(r"(?:functions\.)?memory_update\s*[:(=]?\s*$")
_OPERATION_KEYS = frozenset({"target", "action", "match", "content"})
# Languages a fenced call is written in; any other fence is code and streams on.
_CALL_FENCES = frozenset({"", "json", "tool_call", "tool_code", "jsonc", "javascript", "js"})
_DECIDE_CHARS = 48


@dataclass(frozen=True)
class TextCall:
    """A memory_update call found in text: its arguments as a JSON string."""

    arguments: str


def as_call(value: object, *, named: bool = False) -> TextCall | None:
    """Return the memory_update call `value` (decoded JSON) stands for, if any.

    With `named` (the text names memory_update), bare operations count too:
    an operation object, or a list of them, written without the wrapper.
    """
    if isinstance(value, dict) and isinstance(value.get("function"), dict):
        value = value["function"]
    if named and _is_operation(value):
        value = {"operations": [value]}
    elif named and isinstance(value, list) and value and all(map(_is_operation, value)):
        value = {"operations": value}
    if not isinstance(value, dict):
        return None
    if set(value) == {"operations"}:
        return TextCall(arguments=json.dumps(value))
    if value.get("name") != TOOL_NAME:
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        return TextCall(arguments=arguments)
    if isinstance(arguments, dict):
        return TextCall(arguments=json.dumps(arguments))
    return None


def _is_operation(value: object) -> bool:
    return isinstance(value, dict) and {"target", "action"} <= set(value) <= _OPERATION_KEYS


def extract_calls(text: str) -> tuple[str, list[TextCall]]:
    """Return the text without the memory_update calls written in it, and the calls."""
    spans: list[tuple[int, int]] = []
    calls: list[TextCall | None] = []  # None: a span removed that is not our call

    def take(start: int, end: int, body: str) -> bool:
        call = _decode_call(body)
        if call is None or any(s < end and start < e for s, e in spans):
            return False
        spans.append((start, end))
        calls.append(call)
        return True

    for found in _TAG.finditer(text):
        if not take(found.start(), found.end(), found.group(1)):
            # Tool-call tags are never an answer for a person, whatever they hold.
            spans.append((found.start(), found.end()))
            calls.append(None)
    for found in _RESPONSE_TAG.finditer(text):  # a tool reply said back: never the person's answer
        if not any(s < found.end() and found.start() < e for s, e in spans):
            spans.append((found.start(), found.end()))
            calls.append(None)
    for found in _FENCED.finditer(text):
        if found.group(1).lower() in _CALL_FENCES:
            take(found.start(), found.end(), found.group(2))
    named = TOOL_NAME in text
    for found in _CALL_START.finditer(text):
        start = found.start()
        if any(s <= start < e for s, e in spans):
            continue
        decoded = _decode_object(text, start)
        if decoded is None:
            continue
        value, end = decoded
        if (call := as_call(value, named=named)) is not None and not any(s < end and start < e for s, e in spans):
            label = _LABEL.search(text, 0, start)
            if label is not None:
                start = label.start()
                if text[label.start():label.end()].rstrip().endswith("(") and text[end:end + 1] == ")":
                    end += 1
            spans.append((start, end))
            calls.append(call)

    if not spans:
        return text, []
    ordered = sorted(zip(spans, calls), key=lambda pair: pair[0][0])
    kept, cursor = [], 0
    for (start, end), _ in ordered:
        kept.append(text[cursor:start])
        cursor = end
    kept.append(text[cursor:])
    cleaned = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()
    return cleaned, [call for _, call in ordered if call is not None]


def _decode_call(body: str) -> TextCall | None:
    body = body.strip()
    decoded = _decode_object(body, 0) if body.startswith("{") else None
    return as_call(decoded[0], named=True) if decoded is not None else None


def _decode_object(text: str, start: int) -> tuple[object, int] | None:
    """Decode the object at `start`: JSON, or failing that a Python literal
    (small models write None, True and single quotes); return it and its end."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        pass
    end = _balanced_end(text, start)
    if end is None:
        return None
    try:
        return ast.literal_eval(text[start:end]), end
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _balanced_end(text: str, start: int, limit: int = 20_000) -> int | None:
    """Return the end of the brace-balanced object at `start` (quotes respected)."""
    depth, quote, escaped = 0, "", False
    for index in range(start, min(len(text), start + limit)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


class TextCallFilter:
    """Pass streamed text through, holding back what may be a call written as text."""

    def __init__(self) -> None:
        self.text = ""  # everything the round streamed
        self.shown = ""  # the part passed through so far (always a prefix of `text`)
        self._pending = ""
        self._holding = False

    def feed(self, delta: str) -> str:
        """Add streamed text; return the part that is safe to show now."""
        self.text += delta
        if self._holding:
            return ""
        self._pending += delta
        out = self._release()
        self.shown += out
        return out

    def finish(self) -> tuple[str, str, list[TextCall]]:
        """End the round: return (text still to show, the round's clean text, the calls)."""
        cleaned, calls = extract_calls(self.text)
        tail = cleaned[len(self.shown):] if cleaned.startswith(self.shown) else ""
        self.shown += tail
        return tail, cleaned, calls

    def _release(self) -> str:
        out = []
        while True:
            pending = self._pending
            start = _suspect(pending)
            if start is None:
                keep = _partial_marker(pending)
                out.append(pending[: len(pending) - keep])
                self._pending = pending[len(pending) - keep:]
                return "".join(out)
            out.append(pending[:start])
            rest = pending[start:]
            decision, marker = _classify(rest)
            if decision == "undecided":
                self._pending = rest
                return "".join(out)
            if decision == "call":
                self._holding = True
                self._pending = rest
                return "".join(out)
            out.append(rest[:marker])
            self._pending = rest[marker:]


def _suspect(text: str) -> int | None:
    """Return where a call could start in `text`, or None."""
    positions = [i for i in (text.find("<tool_call"), text.find("<tool_response"), text.find(_FENCE),
                             text.find(TOOL_NAME)) if i >= 0]
    found = re.search(r'(?:^|\n)[ \t]*\{|\{\s*"', text)
    if found is not None:
        positions.append(text.index("{", found.start()))
    return min(positions) if positions else None


def _partial_marker(text: str) -> int:
    """Return how many trailing characters could begin a marker."""
    for size in range(min(len(text), len(_RESPONSE_OPEN) - 1), 0, -1):
        if text[-size] not in _MARKER_FIRSTS:  # on every delta: most tails start no marker at all
            continue
        tail = text[-size:]
        if (_OPEN_TAG.startswith(tail) or _RESPONSE_OPEN.startswith(tail) or _FENCE.startswith(tail)
                or TOOL_NAME.startswith(tail)):
            return size
    return 0


_MARKER_FIRSTS = frozenset(marker[0] for marker in (_OPEN_TAG, _RESPONSE_OPEN, _FENCE, TOOL_NAME))


def _classify(rest: str) -> tuple[str, int]:
    """Decide whether `rest` (starting at a suspect) opens a call: call, text, or undecided."""
    if rest.startswith(("<tool_call", "<tool_response")):
        return "call", 0
    if rest.startswith(TOOL_NAME):
        # The tool's name, then perhaps the call: "memory_update: {...}", "memory_update({...})".
        after = rest[len(TOOL_NAME):]
        body = after[re.match(r"\s*[:(=]?\s*", after).end():]  # type: ignore[union-attr]  # all optional: always matches
        if body[:1] in ("{", "["):
            return "call", 0
        if not body and len(after) < 8:
            return "undecided", 0
        return "text", len(TOOL_NAME)
    if rest.startswith(_FENCE):
        newline = rest.find("\n")
        if newline < 0:
            return ("undecided", 0) if len(rest) < _DECIDE_CHARS else ("text", len(_FENCE))
        language = rest[len(_FENCE):newline].strip().lower()
        if language not in _CALL_FENCES:
            return "text", newline + 1
        body = rest[newline + 1:].lstrip()
        if not body:
            return "undecided", 0
        if not body.startswith("{"):
            return "text", newline + 1
        verdict, _ = _classify_json(body)
        return verdict, newline + 1
    return _classify_json(rest)


def _classify_json(rest: str) -> tuple[str, int]:
    if _CALL_START.match(rest):
        return "call", 0
    head = rest[1:].lstrip()
    if not head:
        return "undecided", 0
    if head[0] not in "\"'":
        return "text", 1
    key_end = head.find(head[0], 1)
    if key_end < 0 and len(head) < _DECIDE_CHARS:
        return "undecided", 0
    if key_end >= 0 and ":" not in head[key_end:] and len(head) < _DECIDE_CHARS:
        return "undecided", 0
    return "text", 1
