"""Telemetry keeps no memory (agentmemory.telemetry).

Distinctive sentinels go into both documents and into tool arguments; the
store, the tool and the real openai client then run with every logger at
DEBUG (logging configured from settings.LOGGING, filters exactly as
configured) and spans exported to in-memory exporters. Every captured record,
attribute, event and exception is searched: zero hits by default; with the
capture flag on, hits only in the approved attributes of our own spans.
"""
import asyncio
import copy
import io
import json
import logging
import logging.config
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx2
import openai
import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.http import JsonResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import path
from django.utils.log import DEFAULT_LOGGING
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentmemory import store
from agentmemory.models import MemoryDocument
from agentmemory.rules import MemoryValidationError, Operation
from agentmemory.scope import memory_scope
from agentmemory.telemetry import (
    CONTENT_ATTRIBUTES,
    REDACTED_MESSAGE,
    TRACER_NAME,
    RedactionFilter,
    add_span_exporter,
    capture_content,
    instrument_django,
    memory_span,
    redact_span,
    tracer_provider,
    uninstrument_django,
)
from agentmemory.tool import handle_memory_update, staged_operations
from tests.conftest import on_postgres

ROOT = Path(__file__).resolve().parent.parent

# Secret-looking values that the threat scan still lets through as facts.
DOC_USER = "zq7Kestrel4401Umber"
DOC_MEMORY = "zq7Marmot9283Ochre"
ARG_ADD = "zq7Heron5512Cobalt"
ARG_MATCH = "zq7Lynx0067Sienna"
WIRE = "zq7Osprey3318Teal"  # in model requests and responses only
SENTINELS = (DOC_USER, DOC_MEMORY, ARG_ADD, ARG_MATCH, WIRE)


def hits(text: str) -> list[str]:
    return [sentinel for sentinel in SENTINELS if sentinel in text]


# --- capture ---------------------------------------------------------------------

CAPTURED: list[str] = []


class CapturingHandler(logging.Handler):
    """Keep what a handler writes and every attribute of the record it got."""

    def emit(self, record: logging.LogRecord) -> None:
        CAPTURED.append(self.format(record))
        CAPTURED.append(repr(sorted((key, repr(value)) for key, value in vars(record).items())))


class DebugLogs:
    def __init__(self):
        self.records: list[str] = CAPTURED

    def text(self) -> str:
        return "\n".join(self.records)


@pytest.fixture
def debug_logs():
    """Logging as settings.LOGGING configures it, each handler writing to memory,
    and every logger at DEBUG."""
    config = copy.deepcopy(settings.LOGGING)
    for name, handler in config["handlers"].items():
        config["handlers"][name] = {
            "()": f"{__name__}.CapturingHandler",
            "formatter": handler.get("formatter"),
            "filters": handler.get("filters", []),
        }
    CAPTURED.clear()
    logging.config.dictConfig(config)
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    levels = [(logger, logger.level) for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    try:
        yield DebugLogs()
    finally:
        for logger, level in levels:
            logger.setLevel(level)
        logging.config.dictConfig(settings.LOGGING)
        CAPTURED.clear()


_EXPORTERS: dict[str, InMemorySpanExporter] = {}


class Spans:
    def __init__(self, redacted: InMemorySpanExporter, raw: InMemorySpanExporter):
        self.redacted_exporter, self.raw_exporter = redacted, raw

    def exported(self):
        """What an exporter receives: every span after the redaction."""
        return self.redacted_exporter.get_finished_spans()

    def ours_raw(self):
        """Our spans as created, before any redaction."""
        return [s for s in self.raw_exporter.get_finished_spans() if s.instrumentation_scope.name == TRACER_NAME]

    def named(self, name):
        return [s for s in self.exported() if s.name == name]


@pytest.fixture
def spans():
    if not _EXPORTERS:
        _EXPORTERS["redacted"] = InMemorySpanExporter()
        _EXPORTERS["raw"] = InMemorySpanExporter()
        add_span_exporter(_EXPORTERS["redacted"], batch=False)
        tracer_provider().add_span_processor(SimpleSpanProcessor(_EXPORTERS["raw"]))
    for exporter in _EXPORTERS.values():
        exporter.clear()
    yield Spans(_EXPORTERS["redacted"], _EXPORTERS["raw"])
    for exporter in _EXPORTERS.values():
        exporter.clear()


@pytest.fixture
def capture_on(settings):
    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "CAPTURE_CONTENT": True}


def span_text(span) -> str:
    return span.to_json(indent=None)


def content_hits_outside_approved_attributes(span) -> list[str]:
    """Sentinels anywhere in the span except the approved content attributes."""
    found = hits(span.name) + hits(json.dumps(span.status.description)) + hits(span.resource.to_json())
    for key, value in (span.attributes or {}).items():
        if key not in CONTENT_ATTRIBUTES:
            found += hits(f"{key}={value}")
    for event in span.events:
        found += hits(event.name) + hits(json.dumps(dict(event.attributes or {}), default=str))
    for link in span.links:
        found += hits(json.dumps(dict(link.attributes or {}), default=str))
    return found


# --- the memory work the sentinels pass through ------------------------------------


def run_memory_work(user) -> None:
    """Commit both documents, run the tool (stage, ambiguous, no match), commit
    the staged batch, fail a commit, and read back, all with sentinels."""
    store.commit_operations(
        user_id=user.pk,
        operations=[
            Operation("user", "add", content=f"Locker code word is {DOC_USER}."),
            Operation("memory", "add", content=f"Staging host alias is {DOC_MEMORY}."),
        ],
    )
    snapshot = store.load_snapshot(user_id=user.pk)
    with memory_scope(user.pk, True, snapshot=snapshot):
        staged = handle_memory_update(
            json.dumps({"operations": [{"target": "memory", "action": "add", "content": f"Deploy word is {ARG_ADD}."}]})
        )
        assert staged["success"] is True
        ambiguous = handle_memory_update(
            json.dumps({"operations": [{"target": "memory", "action": "remove", "match": " is "}]})
        )
        assert ambiguous["code"] == "ambiguous_match" and any(DOC_MEMORY in c for c in ambiguous["candidates"])
        missing = handle_memory_update({"operations": [{"target": "user", "action": "remove", "match": ARG_MATCH}]})
        assert missing["code"] == "no_match"
        batch = staged_operations()
    store.commit_operations(user_id=user.pk, operations=batch)
    with pytest.raises(MemoryValidationError):
        store.commit_operations(
            user_id=user.pk, operations=[Operation("user", "replace", match=ARG_MATCH, content=f"x {ARG_ADD}")]
        )
    assert store.load_snapshot(user_id=user.pk).memory[-1] == f"Deploy word is {ARG_ADD}."


# --- logging -----------------------------------------------------------------------


def test_every_handler_that_settings_configure_carries_the_redaction_filter():
    try:
        # What django.setup() does: its defaults first, then the project's.
        logging.config.dictConfig(DEFAULT_LOGGING)
        logging.config.dictConfig(settings.LOGGING)
        loggers = [logging.getLogger()] + [
            logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
        ]
        handlers = {
            handler for logger in loggers for handler in logger.handlers
            if not isinstance(handler, logging.NullHandler)  # libraries add these; they write nothing
        }
        assert handlers, "settings.LOGGING configures no handler"
        for handler in handlers:
            assert any(isinstance(f, RedactionFilter) for f in handler.filters), handler
        assert not logging.getLogger("django").handlers  # Django's unfiltered defaults are gone
    finally:
        logging.config.dictConfig(settings.LOGGING)


@pytest.mark.django_db
def test_default_logs_and_spans_of_store_and_tool_carry_no_sentinel(user, debug_logs, spans):
    with CaptureQueriesContext(connection):  # Django's SQL log at DEBUG, with parameters
        run_memory_work(user)

    text = debug_logs.text()
    assert "django.db.backends" in text and "INSERT agentmemory_document" in text
    assert hits(text) == []

    exported = spans.exported()
    assert len(spans.named("memory.commit")) == 3 and len(spans.named("memory.tool")) == 3
    for span in exported:
        assert hits(span_text(span)) == [], span.name
    for span in spans.ours_raw():  # our spans never held content in the first place
        assert hits(span_text(span)) == [], span.name


@pytest.mark.django_db
def test_capture_flag_adds_content_only_to_approved_attributes(user, debug_logs, spans, capture_on):
    with CaptureQueriesContext(connection):
        run_memory_work(user)

    assert hits(debug_logs.text()) == []  # the flag never turns on raw logs

    for raw_or_exported in (spans.ours_raw(), spans.exported()):
        approved = [
            str(value)
            for span in raw_or_exported
            for key, value in (span.attributes or {}).items()
            if key in CONTENT_ATTRIBUTES
        ]
        assert set(hits("\n".join(approved))) == {DOC_USER, DOC_MEMORY, ARG_ADD, ARG_MATCH}
        for span in raw_or_exported:
            assert content_hits_outside_approved_attributes(span) == [], span.name
    tool_spans = spans.named("memory.tool")
    assert ARG_ADD in tool_spans[0].attributes["memory.content.arguments"]
    assert DOC_MEMORY in tool_spans[1].attributes["memory.content.result"]  # the ambiguous candidates


def test_memory_block_is_redacted_in_any_logger_and_in_extra_fields(debug_logs):
    block = f"<persistent_memory_data>\nUSER PROFILE\n{DOC_USER}\n</persistent_memory_data>"
    logging.getLogger("chat.turns").debug("system prompt: %s", block, extra={"prompt": block})
    logging.getLogger("somewhere.else").info("unclosed <persistent_memory_data> %s", DOC_MEMORY)
    text = debug_logs.text()
    assert "<persistent_memory_data>[redacted]</persistent_memory_data>" in text
    assert hits(text) == []


def test_exception_messages_are_redacted_in_logs_unless_content_free(debug_logs):
    log = logging.getLogger("agentmemory.store")
    try:
        try:
            raise KeyError(DOC_USER)
        except KeyError as exc:
            raise ValueError(f"could not save {DOC_MEMORY}") from exc
    except ValueError as exc:
        log.exception("commit failed")
        log.warning(exc)
        log.warning("failed: %s", exc)
    try:
        raise MemoryValidationError("match found no entry in 'user'.", code="no_match", position=1)
    except MemoryValidationError:
        log.exception("rejected")
    text = debug_logs.text()
    assert hits(text) == []
    assert "builtins" not in text and "KeyError: " + REDACTED_MESSAGE in text
    assert "ValueError: " + REDACTED_MESSAGE in text
    assert "The above exception was the direct cause" in text
    assert "Operation 1: match found no entry in 'user'." in text  # content-free, so kept
    assert 'File "' in text  # the frames survive


@pytest.mark.django_db
def test_a_database_error_quoting_the_row_never_reaches_the_logs(user, debug_logs):
    try:
        with transaction.atomic():
            MemoryDocument.objects.create(user=user, memory_type="bogus", content=f"Alias {DOC_MEMORY}")
    except IntegrityError as exc:
        if on_postgres():  # PostgreSQL quotes the failing row, content included
            assert DOC_MEMORY in str(exc)
        logging.getLogger("django.request").error("Internal Server Error: %s", "/memory/", exc_info=True)
    text = debug_logs.text()
    assert "IntegrityError: " + REDACTED_MESSAGE in text
    assert hits(text) == []


def test_the_model_clients_per_request_log_line_is_off_by_default():
    # httpx2 logs "HTTP Request: POST <url> 200 OK" at INFO on every model call;
    # the process log (LOG_LEVEL=INFO) leaves it out unless HTTP_CLIENT_LOG_LEVEL asks for it.
    assert logging.getLogger().isEnabledFor(logging.INFO)
    assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    assert logging.getLogger("httpx2").isEnabledFor(logging.WARNING)


def test_library_records_keep_static_text_and_safe_arguments_only(debug_logs):
    body = {"json_data": {"messages": [{"role": "system", "content": WIRE}]}}
    logging.getLogger("openai._base_client").debug("Request options: %s", body)  # older openai releases
    logging.getLogger("httpx2").info(
        'HTTP Request: %s %s "%s %d %s"', "POST", f"https://api.example.com/v1/chat?k={WIRE}", "HTTP/1.1", 200, "OK"
    )
    logging.getLogger("httpcore2.http11").debug(
        f"receive_response_headers.complete return_value=(b'HTTP/1.1', 200, [(b'x-echo', b'{WIRE}')])"
    )
    logging.getLogger("asyncio").error(f"Task exception was never retrieved\nfuture: <Task exception=KeyError('{WIRE}')>")
    logging.getLogger("daphne.http_protocol").debug("HTTP %s request for %s", "POST", ["127.0.0.1", 51234])
    text = debug_logs.text()
    assert hits(text) == []
    assert "Request options: {'json_data': '<dict>'}" in text
    assert 'HTTP Request: POST https://api.example.com/v1/chat?[redacted] "HTTP/1.1 200 OK"' in text
    assert "receive_response_headers.complete return_value [details redacted]" in text
    assert "Task exception was never retrieved" in text
    assert "HTTP POST request for ['127.0.0.1', 51234]" in text


@pytest.mark.django_db
def test_the_sql_log_keeps_the_statement_shape_without_parameters(user, debug_logs):
    with CaptureQueriesContext(connection):
        store.commit_operations(user_id=user.pk, operations=[Operation("user", "add", content=f"Alias {DOC_USER}.")])
    sql_lines = [line for line in debug_logs.records if "django.db.backends" in line and "DEBUG" in line]
    assert any("INSERT agentmemory_document [statement and parameters redacted]; alias=default" in line
               for line in sql_lines)
    assert hits(debug_logs.text()) == []


def test_the_filter_is_idempotent_when_a_record_reaches_several_handlers():
    stream_a, stream_b = io.StringIO(), io.StringIO()
    logger = logging.getLogger("django.db.backends.test_idempotent")
    handlers = [logging.StreamHandler(stream_a), logging.StreamHandler(stream_b)]
    for handler in handlers:
        handler.addFilter(RedactionFilter())
        logger.addHandler(handler)
    logger.propagate, logger.level = False, logging.DEBUG
    try:
        logger.debug("(%.3f) %s; args=%s; alias=%s", 0.001, f"INSERT INTO \"t\" VALUES ('{WIRE}')", (WIRE,), "default")
    finally:
        for handler in handlers:
            logger.removeHandler(handler)
    assert stream_a.getvalue() == stream_b.getvalue() == (
        "(0.001) INSERT t [statement and parameters redacted]; alias=default\n"
    )


def test_a_record_that_cannot_be_checked_is_replaced_not_emitted():
    class Exploding:
        def __str__(self):
            raise RuntimeError(WIRE)

    record = logging.LogRecord("chat.turns", logging.INFO, __file__, 1, Exploding(), None, None)
    assert RedactionFilter().filter(record) is True
    assert record.getMessage() == "[log record redacted: it could not be checked]"


async def test_openai_client_debug_logs_carry_no_request_or_response_body(debug_logs):
    calls = {"n": 0}

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert WIRE.encode() in request.content  # the body really carries the sentinel
        calls["n"] += 1
        if calls["n"] == 1:
            return httpx2.Response(500, json={"error": {"message": f"overloaded {WIRE}"}})
        if calls["n"] == 2:
            return httpx2.Response(200, json=_completion_with_tool_call())
        return httpx2.Response(400, json={"error": {"message": f"bad request: {WIRE}", "type": "invalid"}})

    client = openai.AsyncOpenAI(
        api_key="sk-test-not-a-real-key-000000000000",
        base_url="http://model.test/v1",
        max_retries=1,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    messages = [
        {"role": "system", "content": f"<persistent_memory_data>\n{WIRE}\n</persistent_memory_data>"},
        {"role": "user", "content": f"remember {WIRE}"},
    ]
    try:
        completion = await client.chat.completions.create(model="m", messages=messages)
        assert WIRE in completion.choices[0].message.tool_calls[0].function.arguments
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(model="m", messages=messages)
        assert WIRE in str(caught.value)  # openai quotes the response body in its message
        logging.getLogger("chat.agent").exception("model call failed")
    finally:
        await client.close()

    text = debug_logs.text()
    assert "openai" in text and "httpx2" in text and "Retrying request" in text
    assert hits(text) == []


def _completion_with_tool_call() -> dict:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{
            "index": 0, "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "memory_update", "arguments": json.dumps(
                    {"operations": [{"target": "user", "action": "add", "content": WIRE}]})},
            }]},
        }],
    }


# --- our spans ---------------------------------------------------------------------


@pytest.mark.django_db
def test_commit_and_tool_spans_carry_the_design_metadata(user, spans):
    store.commit_operations(
        user_id=user.pk,
        operations=[Operation("user", "add", content="Likes tea."), Operation("memory", "add", content="Uses uv.")],
    )
    commit = spans.named("memory.commit")[0].attributes
    assert commit["memory.operation_count"] == 2
    assert (commit["memory.targets.user"], commit["memory.targets.memory"]) == (1, 1)
    assert (commit["memory.outcome"], commit["memory.actor"], commit["memory.retry_count"]) == ("committed", "agent", 0)
    assert (commit["memory.user_characters"], commit["memory.memory_characters"]) == (10, 8)
    assert commit["memory.duration_ms"] >= 0

    with memory_scope(user.pk, True, snapshot=store.load_snapshot(user_id=user.pk)):
        handle_memory_update({"operations": [{"target": "user", "action": "remove", "match": "coffee"}]})
    tool = spans.named("memory.tool")[0].attributes
    assert (tool["memory.tool"], tool["memory.outcome"], tool["memory.error_code"]) == (
        "memory_update", "rejected", "no_match")
    assert (tool["memory.operation_count"], tool["memory.targets.user"], tool["memory.position"]) == (1, 1, 1)

    with pytest.raises(MemoryValidationError):
        store.commit_operations(user_id=user.pk, operations=[Operation("user", "remove", match="coffee")])
    failed = spans.named("memory.commit")[1]
    assert (failed.attributes["memory.outcome"], failed.attributes["memory.error_code"]) == ("rejected", "no_match")
    assert failed.status.description == "MemoryValidationError"


def test_memory_spans_accept_only_metadata_fields(spans):
    with memory_span("memory.test") as span:
        with pytest.raises(ValueError):
            span.set_metadata(content=DOC_USER)
        with pytest.raises(ValueError):
            span.set_metadata(operation_count=DOC_USER)
        with pytest.raises(ValueError):
            capture_content(span, "memory.note", DOC_USER)
        span.set_metadata(outcome=f"saved {DOC_USER}")  # not a label: recorded as "invalid"
    assert spans.named("memory.test")[0].attributes["memory.outcome"] == "invalid"
    assert hits(span_text(spans.named("memory.test")[0])) == []
    with pytest.raises(ValueError):
        with memory_span(f"memory {DOC_USER}"):
            pass


def test_an_exception_in_a_memory_span_is_recorded_by_type_without_content(spans):
    with pytest.raises(ValueError):
        with memory_span("memory.failing"):
            raise ValueError(f"cannot store {DOC_USER}")
    for span in [*spans.ours_raw(), *spans.exported()]:
        assert hits(span_text(span)) == []
        event = span.events[0]
        assert event.attributes["exception.type"] == "ValueError"
        assert event.attributes["exception.message"] == REDACTED_MESSAGE
        assert "raise ValueError" in event.attributes["exception.stacktrace"]
        assert span.status.description == "ValueError"


def test_library_spans_lose_bodies_queries_and_exception_text_even_with_capture_on(spans, capture_on):
    tracer = trace.get_tracer("some.http.library")
    with pytest.raises(RuntimeError):
        with tracer.start_as_current_span("POST /v1/chat", attributes={
            "http.method": "POST",
            "http.url": f"https://user:pw@api.example.com/v1/chat?q={WIRE}#{WIRE}",
            "url.query": f"q={WIRE}",
            "http.request.body": WIRE,
            "db.statement": f"INSERT ... '{WIRE}'",
            "gen_ai.prompt": WIRE,
            "memory.content.arguments": WIRE,  # an approved name on a library span is not ours
        }) as span:
            span.add_event("log", {"message": WIRE, "http.method": "POST"})
            raise RuntimeError(f"upstream said {WIRE}")
    exported = spans.named("POST /v1/chat")[0]
    assert hits(span_text(exported)) == []
    assert exported.attributes == {"http.method": "POST", "http.url": "https://api.example.com/v1/chat?[redacted]"}
    exception = [e for e in exported.events if e.name == "exception"][0]
    assert exception.attributes["exception.type"] == "RuntimeError"
    assert "exception.stacktrace" not in exception.attributes
    assert exported.status.description == "RuntimeError"


def test_redacted_spans_are_encodable_by_the_otlp_exporter(spans):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    with pytest.raises(KeyError):
        with memory_span("memory.commit", outcome="failed", targets={"user": 1}):
            raise KeyError(DOC_USER)
    encoded = encode_spans([redact_span(span) for span in spans.raw_exporter.get_finished_spans()])
    payload = encoded.SerializeToString()
    assert b"memory.commit" in payload and b"memory.targets.user" in payload
    assert not any(sentinel.encode() in payload for sentinel in SENTINELS)


# --- Django's own spans ------------------------------------------------------------


def boom(request):
    raise ValueError(f"could not store {DOC_MEMORY}")


def echo(request):
    return JsonResponse({"ok": True})


urlpatterns = [path("boom/", boom), path("echo/", echo)]


@pytest.fixture
def django_tracing(spans):
    instrument_django()
    try:
        yield spans
    finally:
        uninstrument_django()


@pytest.mark.django_db
def test_django_request_spans_carry_no_query_body_or_exception_text(django_tracing, debug_logs, settings):
    settings.ROOT_URLCONF = __name__
    client = Client(raise_request_exception=False)
    assert client.post(f"/echo/?note={WIRE}", data={"content": WIRE}).status_code == 200
    assert client.get(f"/boom/?note={ARG_ADD}").status_code == 500

    server = [s for s in django_tracing.exported() if s.instrumentation_scope.name.endswith("django")]
    assert len(server) == 2
    for span in server:
        assert hits(span_text(span)) == []
    failed = [s for s in server if s.attributes.get("http.status_code") == 500][0]
    assert failed.attributes["http.url"].endswith("/boom/?[redacted]")
    exception = [e for e in failed.events if e.name == "exception"][0].attributes
    assert (exception["exception.type"], exception["exception.message"]) == ("ValueError", REDACTED_MESSAGE)

    text = debug_logs.text()
    assert "Internal Server Error: /boom/" in text
    assert hits(text) == []


# --- setup -------------------------------------------------------------------------


def _run_python(code: str, **env) -> subprocess.CompletedProcess:
    import os

    environment = {**os.environ, "SECRET_KEY": "test-only", "DJANGO_SETTINGS_MODULE": "config.settings", **env}
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        if name not in env:
            environment.pop(name, None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


_REPORT = """
import json
import config.asgi
from django.conf import settings
from opentelemetry import trace
from agentmemory.telemetry import setup_telemetry
print(json.dumps({
    "again": setup_telemetry(),
    "middleware": [m for m in settings.MIDDLEWARE if "opentelemetry" in m],
    "provider": type(trace.get_tracer_provider()).__name__,
}))
"""


def test_without_an_endpoint_setup_installs_nothing():
    result = _run_python(_REPORT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "again": False, "middleware": [], "provider": "ProxyTracerProvider"}


def test_sdk_disabled_wins_over_an_endpoint():
    result = _run_python(_REPORT, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SDK_DISABLED="true")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1])["middleware"] == []


class _Collector(BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Collector.bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_with_an_endpoint_spans_reach_the_collector_redacted_and_django_is_instrumented_once():
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Collector.bodies = []
    code = _REPORT + f"""
from agentmemory.rules import Snapshot
from agentmemory.scope import memory_scope
from agentmemory.tool import handle_memory_update
with memory_scope(1, True, snapshot=Snapshot()):
    handle_memory_update({{"operations": [{{"target": "memory", "action": "add", "content": "word {ARG_ADD}"}}]}})
trace.get_tracer_provider().force_flush()
"""
    try:
        result = _run_python(code, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report == {
        "again": True,
        "middleware": ["opentelemetry.instrumentation.django.middleware.otel_middleware._DjangoMiddleware"],
        "provider": "TracerProvider",
    }
    assert [path for path, _ in _Collector.bodies] == ["/v1/traces"]
    payload = _Collector.bodies[0][1]
    assert b"memory.tool" in payload and b"memory.outcome" in payload
    assert ARG_ADD.encode() not in payload


def test_async_memory_spans_nest_under_the_caller_context(spans):
    async def staged():
        with memory_span("memory.inner"):
            await asyncio.sleep(0)

    async def outer():
        with memory_span("memory.outer"):
            await asyncio.gather(staged(), staged())

    asyncio.run(outer())
    outer_span = spans.named("memory.outer")[0]
    inner = spans.named("memory.inner")
    assert len(inner) == 2 and all(s.parent.span_id == outer_span.context.span_id for s in inner)
