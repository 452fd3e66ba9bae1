"""Telemetry that keeps no memory: log redaction, our spans, tracing setup.

Logs, traces and their exporters are durable copies that a conversational
"forget" can never reach, so none of them may carry memory content, prompts,
tool arguments or tool results. Three guards keep that boundary:

- `RedactionFilter` sits on every logging handler (config/settings.py) and
  rewrites each record before it is formatted: library loggers (openai, the
  HTTP client, asyncio, Django's SQL log, daphne, channels) keep their static
  message and only arguments that cannot be content (numbers, HTTP methods,
  URLs without their query); any `<persistent_memory_data>` block is blanked
  wherever it appears; exceptions keep their type and traceback frames, and
  their message only when the exception type promises a content-free one.
- `memory_span` gives our code spans that accept only the design's metadata
  event (tool, operation_count, targets, user_characters, memory_characters,
  duration_ms, retry_count, outcome, and a turn's memory_status);
  `capture_content` adds content to a short approved list of attributes,
  and only while AGENTMEMORY["CAPTURE_CONTENT"] is on.
- Every exporter is wrapped in `RedactingSpanExporter`, which rewrites every
  span — ours and those of the Django instrumentation — to an allow-list of
  attributes and content-free exception events. The capture flag widens only
  our own approved attributes, never a log or a library span.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import http
import ipaddress
import json
import logging
import os
import re
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode

try:  # The SDK (exporting spans) is the `otel` extra; without it spans are no-ops.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
except ImportError:  # pragma: no cover - exercised by examples/second_project
    Resource = Event = ReadableSpan = TracerProvider = BatchSpanProcessor = SimpleSpanProcessor = None
    SpanExporter = object

from .conf import memory_settings
from .rules import TARGETS, MemoryValidationError, document_length, summarize

TRACER_NAME = "agentmemory"
TOOL_NAME = "memory_update"
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


# --- our spans ---------------------------------------------------------------

_COUNT_FIELDS = frozenset(
    {"operation_count", "user_characters", "memory_characters", "duration_ms", "retry_count", "position",
     "result_count"}
)
_LABEL_FIELDS = frozenset({"tool", "outcome", "error_code", "actor", "memory_status"})
_LABEL = re.compile(r"^[a-z0-9_.:-]{1,64}$")
_SPAN_NAME = re.compile(r"^[a-z][a-z0-9_.]{0,63}$")

METADATA_ATTRIBUTES = frozenset(
    {f"memory.{name}" for name in _COUNT_FIELDS | _LABEL_FIELDS} | {f"memory.targets.{t}" for t in TARGETS}
)
# The only attributes that may ever hold content, and only under the flag.
# Adding a name here is a reviewed change to the privacy boundary.
CONTENT_ATTRIBUTES = frozenset(
    {
        "memory.content.arguments",  # memory_update arguments as the model sent them
        "memory.content.result",  # the tool reply the model reads
        "memory.content.operations",  # the batch a commit applies
        "memory.content.snapshot",  # both documents after a commit
    }
)
MAX_CAPTURE_CHARS = 8_000
_SAFE_EXCEPTION_MARK = "memory.exception_redacted"


class MemorySpan:
    """One of our spans; it takes metadata fields, never free text."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.metadata: dict[str, object] = {}

    def set_metadata(self, **fields: object) -> None:
        """Set metadata fields of the design's event; None values are skipped.

        An unknown field name is a programming error and raises; a label that
        is not a short identifier is recorded as "invalid", never as text.
        """
        for name, value in fields.items():
            if value is None:
                continue
            if name == "targets":
                if not isinstance(value, Mapping):
                    raise ValueError("targets must map 'user'/'memory' to operation counts")
                for target in TARGETS:
                    count = value.get(target)
                    if isinstance(count, int) and not isinstance(count, bool):
                        self.span.set_attribute(f"memory.targets.{target}", count)
            elif name in _COUNT_FIELDS:
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ValueError(f"{name} must be an int")
                self.span.set_attribute(f"memory.{name}", value)
            elif name in _LABEL_FIELDS:
                label = value if isinstance(value, str) and _LABEL.match(value) else "invalid"
                self.span.set_attribute(f"memory.{name}", label)
            else:
                allowed = ", ".join(sorted(_COUNT_FIELDS | _LABEL_FIELDS | {"targets"}))
                raise ValueError(f"{name!r} is not a metadata field of memory spans; use one of {allowed}")
            self.metadata[name] = value

    def record_error(self, exc: BaseException) -> None:
        """Mark the span failed with the exception's type and a content-free message."""
        self.span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        self.span.add_event(
            "exception",
            {
                "exception.type": qualified_name(type(exc)),
                "exception.message": safe_exception_message(exc),
                "exception.stacktrace": format_exception_safely(exc),
                _SAFE_EXCEPTION_MARK: True,
            },
        )
        code = getattr(exc, "code", None)
        if "error_code" not in self.metadata and isinstance(code, str):
            self.set_metadata(error_code=code)


@contextmanager
def memory_span(name: str, **metadata: object) -> Iterator[MemorySpan]:
    """Open one of our spans, e.g. `with memory_span("memory.commit") as span:`.

    Exceptions are recorded by type with a content-free message and
    re-raised; `duration_ms` is filled in unless the caller set it.
    """
    if not _SPAN_NAME.match(name):
        raise ValueError("span names are fixed identifiers such as 'memory.commit'")
    started = time.monotonic()
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as raw:
        span = MemorySpan(raw)
        span.set_metadata(**metadata)
        try:
            yield span
        except BaseException as exc:
            span.record_error(exc)
            raise
        finally:
            if "duration_ms" not in span.metadata:
                span.set_metadata(duration_ms=int((time.monotonic() - started) * 1000))


def capture_content(span: MemorySpan, name: str, value: object) -> bool:
    """Add content to an approved attribute while the capture flag is on.

    Return whether anything was recorded. Off by default; meant for a
    controlled environment, never for production.
    """
    if name not in CONTENT_ATTRIBUTES:
        raise ValueError(f"{name!r} is not an approved content attribute; see CONTENT_ATTRIBUTES")
    if not memory_settings().capture_content or not span.span.is_recording():
        return False
    text = value if isinstance(value, str) else json.dumps(_jsonable(value), ensure_ascii=False)
    span.span.set_attribute(name, text[:MAX_CAPTURE_CHARS])
    return True


def _jsonable(value: object) -> object:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    return value if isinstance(value, (str, int, float, bool, type(None))) else str(value)


def _failure_outcome(exc: BaseException) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if isinstance(exc, MemoryValidationError):
        return "rejected"
    if names & {"CommitCancelled", "CancelledError"}:
        return "cancelled"
    if "AlreadyCommitted" in names:  # a commit under this idempotency key already stands
        return "replayed"
    return "failed"


# The API's own providers: with either in force every span is a no-op.
_NO_TRACING = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def traced_commit(func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap `store.commit_operations` in a `memory.commit` span (none without a tracer provider)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if isinstance(trace.get_tracer_provider(), _NO_TRACING):
            # No tracer provider is installed, so no span could be recorded or
            # exported: skip building one (it cost ~35 µs of a ~300 µs commit).
            return func(*args, **kwargs)
        operations = kwargs.get("operations") or ()
        summary = summarize(operations)
        actor = kwargs.get("actor")
        with memory_span(
            "memory.commit",
            actor=getattr(actor, "value", actor) or "agent",
            operation_count=summary.operation_count,
            targets=summary.targets,
        ) as span:
            capture_content(span, "memory.content.operations", list(operations))
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                span.set_metadata(outcome=_failure_outcome(exc))
                raise
            span.set_metadata(
                outcome=str(result.outcome),
                retry_count=result.retry_count,
                duration_ms=result.duration_ms,
                user_characters=document_length(result.snapshot.user),
                memory_characters=document_length(result.snapshot.memory),
            )
            capture_content(span, "memory.content.snapshot", result.snapshot)
            return result

    return wrapper


def traced_tool(func: Callable[[Any], dict]) -> Callable[[Any], dict]:
    """Wrap `tool.handle_memory_update` in a `memory.tool` span."""
    from .scope import get_memory_request

    @functools.wraps(func)
    def wrapper(arguments: Any) -> dict:
        with memory_span("memory.tool", tool=TOOL_NAME) as span:
            capture_content(span, "memory.content.arguments", arguments)
            reply = func(arguments)
            count, targets = _count_operations(arguments)
            request = get_memory_request()
            ledger = request.ledger if request is not None else None
            span.set_metadata(
                outcome=reply.get("status"),
                error_code=reply.get("code"),
                position=reply.get("position") if isinstance(reply.get("position"), int) else None,
                operation_count=count,
                targets=targets,
                user_characters=document_length(ledger.snapshot.user) if ledger else None,
                memory_characters=document_length(ledger.snapshot.memory) if ledger else None,
                retry_count=ledger.failed_calls if ledger else None,
            )
            capture_content(span, "memory.content.result", reply)
            return reply

    return wrapper


def _count_operations(arguments: Any) -> tuple[int | None, dict[str, int]]:
    """Return the operation count and per-target counts, reading only known targets."""
    try:
        raw = json.loads(arguments) if isinstance(arguments, str) else arguments
        items = raw.get("operations") if isinstance(raw, Mapping) else None
    except (ValueError, TypeError):
        return None, {}
    if not isinstance(items, list):
        return None, {}
    targets: dict[str, int] = {}
    for item in items:
        target = item.get("target") if isinstance(item, Mapping) else None
        if target in TARGETS:
            targets[target] = targets.get(target, 0) + 1
    return len(items), targets


# --- export: every span passes the allow-list --------------------------------

# Attributes a library span (Django, ASGI, HTTP clients) may keep: request
# shape and outcome, never bodies, headers, queries or SQL.
LIBRARY_SPAN_ATTRIBUTES = frozenset(
    {
        "http.method", "http.request.method", "http.request.method_original", "http.route",
        "http.status_code", "http.response.status_code", "http.scheme", "url.scheme",
        "http.server_name", "http.host", "server.address", "server.port", "net.host.port",
        "net.host.name", "http.flavor", "network.protocol.name", "network.protocol.version",
        "http.user_agent", "user_agent.original", "net.peer.ip", "net.peer.port",
        "client.address", "client.port", "network.peer.address", "network.peer.port",
        "http.target", "url.path", "http.url", "url.full", "error.type",
        "http.request_content_length", "http.response_content_length",
        "http.request.body.size", "http.response.body.size",
        "db.system", "db.system.name", "db.name", "db.namespace", "db.operation",
        "db.operation.name", "db.collection.name",
        "gen_ai.system", "gen_ai.provider.name", "gen_ai.operation.name", "gen_ai.request.model",
        "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.response.finish_reasons", "gen_ai.response.id",
    }
)
_URL_SPAN_ATTRIBUTES = frozenset({"http.url", "url.full", "http.target", "url.path"})
_MAX_LIBRARY_VALUE = 512


def redact_span(span: ReadableSpan) -> ReadableSpan:
    """Return a copy of a finished span that carries no content.

    Our spans keep their metadata attributes, plus the approved content
    attributes while the capture flag is on. Library spans keep the
    allow-listed request attributes, URLs without query, and exception
    events with the type only.
    """
    ours = span.instrumentation_scope is not None and span.instrumentation_scope.name == TRACER_NAME
    allowed = METADATA_ATTRIBUTES | (CONTENT_ATTRIBUTES if memory_settings().capture_content else frozenset())

    def keep(attributes: Mapping | None) -> dict:
        kept = {}
        for key, value in (attributes or {}).items():
            if ours:
                if key in allowed:
                    kept[key] = value
            elif key in LIBRARY_SPAN_ATTRIBUTES:
                if key in _URL_SPAN_ATTRIBUTES and isinstance(value, str):
                    value = safe_url(value)
                elif isinstance(value, str):
                    value = redact_text(value)[:_MAX_LIBRARY_VALUE]
                kept[key] = value
        return kept

    events = []
    for event in span.events:
        if event.name == "exception":
            attributes = event.attributes or {}
            exception_type = str(attributes.get("exception.type", ""))
            safe = {"exception.type": exception_type}
            if exception_type in CONTENT_FREE_EXCEPTIONS:
                safe["exception.message"] = str(attributes.get("exception.message", ""))
            else:
                safe["exception.message"] = REDACTED_MESSAGE
            if ours and attributes.get(_SAFE_EXCEPTION_MARK) is True:
                safe["exception.stacktrace"] = str(attributes.get("exception.stacktrace", ""))
            events.append(Event("exception", safe, event.timestamp))
        else:
            events.append(Event(event.name, keep(event.attributes), event.timestamp))

    status = span.status
    if status.status_code == StatusCode.ERROR:
        head = (status.description or "").split(":", 1)[0].strip()
        status = Status(StatusCode.ERROR, head if re.fullmatch(r"[A-Za-z_][\w.]{0,100}", head) else None)

    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=keep(span.attributes),
        events=events,
        links=[Link(link.context) for link in span.links],
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


class RedactingSpanExporter(SpanExporter):
    """Pass every span through `redact_span` before the wrapped exporter sees it."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.exporter = exporter

    def export(self, spans: Sequence[ReadableSpan]):
        return self.exporter.export([redact_span(span) for span in spans])

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        flush = getattr(self.exporter, "force_flush", None)
        return flush(timeout_millis) if flush else True


# --- setup -------------------------------------------------------------------

_setup_lock = threading.RLock()
_provider: TracerProvider | None = None
_exporting = False


def tracer_provider() -> TracerProvider:
    """Return the process's SDK tracer provider, installing it once."""
    global _provider
    if TracerProvider is None:
        raise RuntimeError("exporting spans needs the OpenTelemetry SDK: pip install 'django-agentmemory[otel]'")
    with _setup_lock:
        if _provider is None:
            current = trace.get_tracer_provider()
            if isinstance(current, TracerProvider):
                _provider = current
            else:
                attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "agentmemory-chat"}
                _provider = TracerProvider(resource=Resource.create(attributes))
                trace.set_tracer_provider(_provider)
        return _provider


def add_span_exporter(exporter: SpanExporter, *, batch: bool = True) -> None:
    """Export finished spans to `exporter`, always through the redaction."""
    processor = BatchSpanProcessor if batch else SimpleSpanProcessor
    tracer_provider().add_span_processor(processor(RedactingSpanExporter(exporter)))


def instrument_django() -> None:
    """Trace Django requests (before the handler loads its middleware)."""
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(
            tracer_provider=tracer_provider(),
            excluded_urls=os.environ.get("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", "healthz,readyz"),
        )


def uninstrument_django() -> None:
    from opentelemetry.instrumentation.django import DjangoInstrumentor

    instrumentor = DjangoInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


def setup_telemetry() -> bool:
    """Turn on tracing when an OTLP endpoint is configured; return whether it is on.

    Installs the tracer provider, the OTLP/HTTP exporter (behind the
    redaction) and the Django instrumentation, once per process. Without
    OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT), or with
    OTEL_SDK_DISABLED=true, it does nothing: no span would leave the process.
    Call it before the ASGI/WSGI handler is built (config/asgi.py, wsgi.py).
    """
    global _exporting
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "false").strip().lower() == "true":
        return False
    if not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return False
    if TracerProvider is None:
        logging.getLogger(__name__).warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
            "no span is exported (pip install 'django-agentmemory[otel]')")
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    with _setup_lock:
        if not _exporting:
            add_span_exporter(OTLPSpanExporter(), batch=True)
            instrument_django()
            _exporting = True
    return True
