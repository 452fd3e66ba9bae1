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
from django.utils.formats import number_format
from django.utils.translation import gettext
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json as drf_json

from .arguments import MAX_JSON_DEPTH, TOO_DEEP, too_deep  # noqa: F401  (too_deep: the parser's check)


class JSONTooDeep(ParseError):
    default_detail = TOO_DEEP
    default_code = "json_too_deep"


class BodyTooLarge(ParseError):
    default_code = "body_too_large"

    def __init__(self) -> None:
        super().__init__(too_large_message())


def too_large_message() -> str:
    """In the request's language, the limit grouped as the language writes numbers ("1.048.576 Bytes")."""
    return gettext("The request body is larger than %(limit)s bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); send less.") % {
        "limit": number_format(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0, force_grouping=True)}


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
