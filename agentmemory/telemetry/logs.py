"""Logs that keep no memory: the redaction filter on every handler, and content-free exceptions.

`RedactionFilter` rewrites each record before it is formatted (the package
docstring, `agentmemory.telemetry`, says what it keeps); `format_exception_safely`
and `safe_exception_message` give a traceback and a message that carry no
content, for logs and for spans alike.
"""
from __future__ import annotations

import enum
import http
import ipaddress
import logging
import re
import traceback
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

REDACTED = "[redacted]"
REDACTED_MESSAGE = "[message redacted: it may carry memory content]"

# Exceptions whose messages are written to be content-free (rules.py, store/errors.py).
CONTENT_FREE_EXCEPTIONS = frozenset(
    {
        "agentmemory.rules.MemoryValidationError",
        "agentmemory.store.MemoryUnavailable",
        "agentmemory.store.SchemaVersionError",
        "agentmemory.store.CommitCancelled",
        "agentmemory.store.UnknownUser",
        "agentmemory.store.InactiveUser",
    }
)


# --- exceptions --------------------------------------------------------------


def qualified_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module in (None, "builtins") else f"{module}.{cls.__qualname__}"


def is_content_free(exc: BaseException) -> bool:
    """Return True when the exception's message is known to hold no content."""
    return any(qualified_name(cls) in CONTENT_FREE_EXCEPTIONS for cls in type(exc).__mro__)


def safe_exception_message(exc: BaseException) -> str:
    return str(exc) if is_content_free(exc) else REDACTED_MESSAGE


def format_exception_safely(exc: BaseException) -> str:
    """Return a traceback of `exc` and its causes with unsafe messages redacted.

    Frames show file, line and source code, never local values; a database
    error's message can quote the row it failed on, so it is dropped.
    """
    return "".join(_format_chain(exc, set(), depth=0))


def _format_chain(exc: BaseException, seen: set[int], depth: int) -> list[str]:
    seen.add(id(exc))
    lines: list[str] = []
    cause, context = exc.__cause__, exc.__context__
    if depth < 10 and cause is not None and id(cause) not in seen:
        lines += _format_chain(cause, seen, depth + 1)
        lines.append("\nThe above exception was the direct cause of the following exception:\n\n")
    elif depth < 10 and context is not None and not exc.__suppress_context__ and id(context) not in seen:
        lines += _format_chain(context, seen, depth + 1)
        lines.append("\nDuring handling of the above exception, another exception occurred:\n\n")
    if exc.__traceback__ is not None:
        lines.append("Traceback (most recent call last):\n")
        lines += traceback.format_tb(exc.__traceback__)
    lines.append(f"{qualified_name(type(exc))}: {safe_exception_message(exc)}\n")
    return lines


# --- logging -----------------------------------------------------------------

MEMORY_BLOCK = re.compile(
    r"<\s*persistent_memory_data\s*>.*?(?:<\s*/\s*persistent_memory_data\s*>|\Z)", re.IGNORECASE | re.DOTALL
)
REDACTED_BLOCK = "<persistent_memory_data>[redacted]</persistent_memory_data>"

# Loggers of libraries that see request and response bodies, SQL with its
# parameters, or task and frame reprs. Their records keep only static text.
LIBRARY_LOGGERS = (
    "openai", "httpx", "httpx2", "httpcore", "httpcore2", "h11", "h2", "hpack", "asyncio",
    "daphne", "channels", "channels_redis", "django.channels", "django.db.backends",
    "twisted", "autobahn", "websockets", "urllib3", "requests", "opentelemetry",
    # The agent frameworks of agentmemory.integrations (openai-agents logs as "openai.agents").
    "anthropic", "pydantic_ai", "pydantic_graph", "mcp", "griffe",
)
_SQL_LOGGER = "django.db.backends"
_SAFE_LIBRARY_EXTRAS = frozenset({"status_code", "duration", "alias"})
_STANDARD_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName",
}
_HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
_HTTP_REASONS = frozenset(status.phrase for status in http.HTTPStatus)
_EXCEPTION_NAME = re.compile(r"[A-Z][A-Za-z0-9]{0,60}(?:Error|Exception|Timeout|Warning|Exit|Cancelled|Interrupt)")
_HTTP_VERSION = re.compile(r"HTTP/\d(?:\.\d)?")
_URL_START = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_FREE_TEXT_END = re.compile(r"[=({\[<'\"]")
_MAX_TEMPLATE = 200


class RedactionFilter(logging.Filter):
    """Rewrite a log record so that no handler can emit memory content.

    Install it on every handler: filters on a logger do not see records that
    propagate from child loggers, filters on handlers see them all.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_agentmemory_redacted", False):
            return True
        try:
            redact_record(record)
        except Exception:  # never let a bad record through, never crash logging
            record.msg, record.args = "[log record redacted: it could not be checked]", None
            record.exc_info, record.exc_text = None, None
        record._agentmemory_redacted = True
        return True


def redact_record(record: logging.LogRecord) -> None:
    """Rewrite `record` in place; see RedactionFilter."""
    library = _is_library(record.name)
    _redact_extras(record, library=library)
    if record.name == _SQL_LOGGER or record.name.startswith(_SQL_LOGGER + "."):
        _redact_sql(record)
    elif library:
        _redact_library_message(record)
    else:
        _redact_own_message(record)
    _redact_exception(record)


def redact_text(text: str) -> str:
    """Return `text` with every persistent-memory block blanked."""
    return MEMORY_BLOCK.sub(REDACTED_BLOCK, text)


def _is_library(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in LIBRARY_LOGGERS)


def _redact_extras(record: logging.LogRecord, *, library: bool) -> None:
    for key, value in list(vars(record).items()):
        if key in _STANDARD_RECORD_ATTRIBUTES or key.startswith("_"):
            continue
        if library and key not in _SAFE_LIBRARY_EXTRAS:
            setattr(record, key, REDACTED)
        elif isinstance(value, str):
            if MEMORY_BLOCK.search(value):
                setattr(record, key, redact_text(value))
        elif not (value is None or isinstance(value, (bool, int, float))):
            # An object's repr can carry anything: Django's `request` extra
            # prints the full path with its query string.
            setattr(record, key, f"<{type(value).__name__}>")


def _redact_sql(record: logging.LogRecord) -> None:
    # Django logs "(%.3f) %s; args=%s; alias=%s" for queries and
    # "%s; (params %r)" for schema changes, with `extra` copies of each.
    args = record.args if isinstance(record.args, tuple) else ()
    query_form = isinstance(record.msg, str) and record.msg.startswith("(") and len(args) >= 4
    sql = args[1] if query_form else (args[0] if args else "")
    duration = getattr(record, "duration", args[0] if query_form else None)
    alias = getattr(record, "alias", args[3] if query_form else None)
    summary = sql_summary(sql if isinstance(sql, str) else "")
    record.msg = "(%s) %s [statement and parameters redacted]; alias=%s"
    record.args = (
        f"{duration:.3f}" if isinstance(duration, float) else "?",
        summary,
        alias if isinstance(alias, str) and alias.isidentifier() else "?",
    )
    record.sql, record.params = summary, REDACTED


_SQL_VERB = re.compile(r"^\s*([A-Za-z]+)")
_SQL_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE|JOIN)\s+\"?([A-Za-z_][A-Za-z0-9_]*)\"?", re.IGNORECASE)


def sql_summary(sql: str) -> str:
    """Return the verb and first table of a statement, e.g. `INSERT agentmemory_document`.

    Only the text before the first string literal is read: the statements
    Django logs have their parameters interpolated as quoted literals.
    """
    head = sql.split("'", 1)[0]
    verb = _SQL_VERB.match(head)
    table = _SQL_TABLE.search(head)
    parts = [verb.group(1).upper() if verb else "SQL"]
    if table:
        parts.append(table.group(1))
    return " ".join(parts)


def _redact_library_message(record: logging.LogRecord) -> None:
    template = record.msg if isinstance(record.msg, str) else f"<{type(record.msg).__name__}>"
    template = template.split("\n", 1)[0][:_MAX_TEMPLATE]
    args = record.args
    if not args:
        # A message formatted before logging (httpcore's traces, asyncio's
        # reports) can hold anything after its first `key=` or repr.
        cut = _FREE_TEXT_END.search(template)
        record.msg = template[: cut.start()].rstrip() + " [details redacted]" if cut else template
        record.args = None
        return
    safe: Any
    if isinstance(args, Mapping):
        safe = {key: _safe_argument(value) for key, value in args.items()}
    else:
        safe = tuple(_safe_argument(value) for value in args)
    try:
        template % safe
    except (TypeError, ValueError, KeyError):
        record.msg, record.args = template.split("%", 1)[0].rstrip() + " [arguments redacted]", None
        return
    record.msg, record.args = template, safe


def _safe_argument(value: object, depth: int = 0) -> object:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, BaseException):
        return f"<{type(value).__name__}>"
    if isinstance(value, bytes) and len(value) <= 16:
        value = value.decode("ascii", "replace")
    if isinstance(value, (list, tuple)) and depth == 0 and len(value) <= 4:
        return type(value)(_safe_argument(item, 1) for item in value)
    if isinstance(value, str) or type(value).__name__ == "URL":
        return _safe_string(str(value))
    return f"<{type(value).__name__}>"


def _safe_string(text: str) -> str:
    if text.upper() in _HTTP_METHODS or text in _HTTP_REASONS:
        return text
    if _HTTP_VERSION.fullmatch(text) or _EXCEPTION_NAME.fullmatch(text):
        return text
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    if _URL_START.match(text) or (text.startswith("/") and " " not in text):
        return safe_url(text)
    return REDACTED


def safe_url(url: str) -> str:
    """Return `url` without credentials, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return REDACTED
    origin = f"{parts.scheme}://{host}{port}" if parts.scheme else ""
    query = "?" + REDACTED if parts.query else ""
    return f"{origin}{parts.path[:200]}{query}"


def _redact_own_message(record: logging.LogRecord) -> None:
    if isinstance(record.msg, BaseException):
        record.msg = f"{qualified_name(type(record.msg))}: {safe_exception_message(record.msg)}"
    if isinstance(record.args, tuple) and any(isinstance(arg, BaseException) for arg in record.args):
        record.args = tuple(
            f"{qualified_name(type(arg))}: {safe_exception_message(arg)}" if isinstance(arg, BaseException) else arg
            for arg in record.args
        )
    try:
        message = record.getMessage()
    except Exception:
        message = str(record.msg)
    if MEMORY_BLOCK.search(message):
        record.msg, record.args = redact_text(message), None


def _redact_exception(record: logging.LogRecord) -> None:
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = format_exception_safely(record.exc_info[1]).rstrip("\n")
        record.exc_info = None
    elif record.exc_text:
        record.exc_text = "[exception text redacted]"
