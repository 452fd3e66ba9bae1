"""Export: every span leaves the process through the allow-list, and tracing is set up once.

`RedactingSpanExporter` wraps every exporter and passes each span, ours and
the libraries', through `redact_span`; `setup_telemetry` installs the OTLP
exporter and the Django instrumentation when an endpoint is configured.
"""
from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.trace import Link, Status, StatusCode

try:  # The SDK (exporting spans) is the `otel` extra; without it spans are no-ops.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
except ImportError:  # pragma: no cover - exercised by examples/second_project
    Resource = Event = ReadableSpan = TracerProvider = BatchSpanProcessor = SimpleSpanProcessor = None  # type: ignore[misc,assignment]
    SpanExporter = object  # type: ignore[misc,assignment]

from ..conf import memory_settings
from .logs import CONTENT_FREE_EXCEPTIONS, REDACTED_MESSAGE, redact_text, safe_url
from .spans import CONTENT_ATTRIBUTES, METADATA_ATTRIBUTES, SAFE_EXCEPTION_MARK, TRACER_NAME

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
            if ours and attributes.get(SAFE_EXCEPTION_MARK) is True:
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
