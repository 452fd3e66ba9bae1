"""JSON bounded in depth, without Django or DRF: the request parser's check and the model's tool arguments.

Python's decoder raises RecursionError about a thousand levels down. Every
reader of a model's tool-call arguments (the memory tool, its telemetry, the
agent loop, conversation search) decodes them with `load_arguments`, so 2 KB
of `[[[...` is a refusal the model can recover from, never a failed turn;
`parsers.BoundedJSONParser` uses the same limit for request bodies.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

# The API's bodies nest three levels ({"operations": [{...}]}); this leaves room and no more.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"The JSON body nests deeper than {MAX_JSON_DEPTH} levels; send a flatter document."


def too_deep(data, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than `limit` (iterative: no recursion of our own)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Iterable[Any] = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


class ArgumentsTooDeep(ValueError):
    """A model's tool arguments nest deeper than MAX_JSON_DEPTH levels (a refusal the model can recover from)."""


def load_arguments(arguments):
    """Decode a model's tool-call arguments (JSON text, or an already decoded value), bounded in depth.

    The depth is measured on the text before decoding, in one linear pass
    (brackets outside strings), so 2 KB of `[[[...` is refused with
    ArgumentsTooDeep (a ValueError) instead of reaching the decoder's
    RecursionError; every reader of tool arguments (the tool, its telemetry,
    the agent loop, conversation search) uses this one function.
    """
    if not isinstance(arguments, str):
        if too_deep(arguments):
            raise ArgumentsTooDeep(TOO_DEEP)
        return arguments
    depth = 0
    in_string = escaped = False
    for char in arguments:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise ArgumentsTooDeep(TOO_DEEP)
        elif char in "]}":
            depth -= 1
    return json.loads(arguments)
