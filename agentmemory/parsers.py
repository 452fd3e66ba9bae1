"""The one JSON parser of every route: bounded in size and depth.

Python's decoder raises RecursionError about a thousand levels down, which
DRF turns into an HTML 500; a body of a megabyte of brackets gets there
easily. `BoundedJSONParser` reads at most DATA_UPLOAD_MAX_MEMORY_SIZE bytes
and refuses arrays and objects nested deeper than MAX_JSON_DEPTH levels, as
a ParseError with a code: `json_too_deep`, `body_too_large`. The memory API
names it as its parser (so it holds in any project that installs the app);
this project's REST_FRAMEWORK names it as the default for every other route.
"""
from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json as drf_json

# The API's bodies nest three levels ({"operations": [{...}]}); this leaves room and no more.
MAX_JSON_DEPTH = 32
TOO_DEEP = f"The JSON body nests deeper than {MAX_JSON_DEPTH} levels; send a flatter document."


class JSONTooDeep(ParseError):
    default_detail = TOO_DEEP
    default_code = "json_too_deep"


class BodyTooLarge(ParseError):
    default_code = "body_too_large"

    def __init__(self) -> None:
        super().__init__(too_large_message())


def too_large_message() -> str:
    return (f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes "
            "(DATA_UPLOAD_MAX_MEMORY_SIZE); send less.")


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise BodyTooLarge()
        try:
            data = drf_json.loads(raw.decode(encoding),
                                  parse_constant=drf_json.strict_constant if self.strict else None)
        except RecursionError:
            raise JSONTooDeep() from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if too_deep(data):
            raise JSONTooDeep()
        return data


def too_deep(data, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than `limit` (iterative: no recursion of our own)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
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
    return drf_json.loads(arguments)
