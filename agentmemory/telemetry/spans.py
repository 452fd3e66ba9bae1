"""Our spans: the design's metadata event, never free text, and the two traced entry points.

`memory_span` opens a span that takes only metadata fields; `capture_content`
adds content to an approved attribute while AGENTMEMORY["CAPTURE_CONTENT"] is
on; `traced_commit` and `traced_tool` wrap the store's commit and the
`memory_update` handler.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from ..arguments import load_arguments
from ..conf import memory_settings
from ..rules import TARGETS, MemoryValidationError, rendered_length, summarize
from .logs import format_exception_safely, qualified_name, safe_exception_message

TRACER_NAME = "agentmemory"
TOOL_NAME = "memory_update"

# --- our spans ---------------------------------------------------------------

_COUNT_FIELDS = frozenset(
    {"operation_count", "user_characters", "memory_characters", "duration_ms", "retry_count", "position",
     "result_count", "asked_count"}
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
# Marks an exception event our span wrote with a content-free stacktrace; export keeps only those stacktraces.
SAFE_EXCEPTION_MARK = "memory.exception_redacted"


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
                SAFE_EXCEPTION_MARK: True,
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
                user_characters=rendered_length(result.snapshot, "user"),
                memory_characters=rendered_length(result.snapshot, "memory"),
            )
            capture_content(span, "memory.content.snapshot", result.snapshot)
            return result

    return wrapper


def traced_tool(func: Callable[[Any], dict]) -> Callable[[Any], dict]:
    """Wrap `tool.handle_memory_update` in a `memory.tool` span."""
    from ..scope import get_memory_request

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
                user_characters=rendered_length(ledger.snapshot, "user") if ledger else None,
                memory_characters=rendered_length(ledger.snapshot, "memory") if ledger else None,
                retry_count=ledger.failed_calls if ledger else None,
            )
            capture_content(span, "memory.content.result", reply)
            return reply

    return wrapper


def _count_operations(arguments: Any) -> tuple[int | None, dict[str, int]]:
    """Return the operation count and per-target counts, reading only known targets."""
    try:
        raw = load_arguments(arguments)
        items = raw.get("operations") if isinstance(raw, Mapping) else None
    except (ValueError, TypeError, RecursionError):
        return None, {}
    if not isinstance(items, list):
        return None, {}
    targets: dict[str, int] = {}
    for item in items:
        target = item.get("target") if isinstance(item, Mapping) else None
        if target in TARGETS:
            targets[target] = targets.get(target, 0) + 1
    return len(items), targets
