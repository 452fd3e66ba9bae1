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

The package: `logs` (the filter, content-free exceptions), `spans` (our
spans, `traced_commit`, `traced_tool`), `export` (the allow-list every
exported span passes, and `setup_telemetry`). Import from here.
"""
from .export import (
    LIBRARY_SPAN_ATTRIBUTES,
    RedactingSpanExporter,
    add_span_exporter,
    instrument_django,
    redact_span,
    setup_telemetry,
    tracer_provider,
    uninstrument_django,
)
from .logs import (
    CONTENT_FREE_EXCEPTIONS,
    LIBRARY_LOGGERS,
    MEMORY_BLOCK,
    REDACTED,
    REDACTED_BLOCK,
    REDACTED_MESSAGE,
    RedactionFilter,
    format_exception_safely,
    is_content_free,
    qualified_name,
    redact_record,
    redact_text,
    safe_exception_message,
    safe_url,
    sql_summary,
)
from .spans import (
    CONTENT_ATTRIBUTES,
    MAX_CAPTURE_CHARS,
    METADATA_ATTRIBUTES,
    TOOL_NAME,
    TRACER_NAME,
    MemorySpan,
    capture_content,
    memory_span,
    traced_commit,
    traced_tool,
)

__all__ = [
    "CONTENT_ATTRIBUTES", "CONTENT_FREE_EXCEPTIONS", "LIBRARY_LOGGERS", "LIBRARY_SPAN_ATTRIBUTES",
    "MAX_CAPTURE_CHARS", "MEMORY_BLOCK", "METADATA_ATTRIBUTES", "REDACTED", "REDACTED_BLOCK",
    "REDACTED_MESSAGE", "TOOL_NAME", "TRACER_NAME", "MemorySpan", "RedactingSpanExporter",
    "RedactionFilter", "add_span_exporter", "capture_content", "format_exception_safely",
    "instrument_django", "is_content_free", "memory_span", "qualified_name", "redact_record",
    "redact_span", "redact_text", "safe_exception_message", "safe_url", "setup_telemetry",
    "sql_summary", "traced_commit", "traced_tool", "tracer_provider", "uninstrument_django",
]
