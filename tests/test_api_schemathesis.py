"""Schemathesis against `/api/schema/`: every chat and memory route, in-process.

The schema is loaded from the full ASGI application (`config.asgi`, the one
daphne serves) and schemathesis's own engine — the one its command line
runs — drives every generated request through that application: the
schema's examples, the coverage phase (boundary and missing values) and
hypothesis fuzzing with positive and negative data, bounded by
`MAX_EXAMPLES` per operation, plus the stateful phase that chains the
responses' ids into later requests. Requests carry a DRF token of a test
user through the schema's `tokenAuth` scheme (so the auth checks can also
take it away); the eval route gets its service token.

The invariants: no 5xx, and every response is documented — its status code,
content type, headers and body match the schema; invalid data is rejected
and authentication is not ignored. `positive_data_acceptance` is off: the
memory rules rightly refuse schema-valid batches (a `match` that finds no
entry), which the schema cannot express.

The throttles are raised for the run (a 429 would hide every later case);
that a throttled response matches the schema is checked separately.
The database is real (SQLite or PostgreSQL); requests run in the ASGI
handler's threads, so the tests are transactional.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import pytest
import schemathesis
from django.core.cache import cache
from django.db import connections
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from rest_framework.throttling import ScopedRateThrottle
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from agentmemory.api import MemoryWriteThrottle, TidyThrottle
from agentmemory.api.passport import ImportThrottle
from tests.chat_helpers import fresh_agents  # noqa: F401  (fresh agents, empty channel layer)

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "25"))
SEED = 20260507
EVAL_TOKEN = "schemathesis-eval-service-token"
# Every chat and memory route in the schema (the schema endpoint and the docs page are not in it):
# the person's routes with a DRF token, the eval route with its service token.
PERSON_ROUTES = r"^/api/(chat|conversations|memory)/"
EVAL_ROUTES = r"^/api/eval/"
EXPECTED_OPERATIONS = {
    "POST /api/chat/turns/",
    "POST /api/eval/turns/",
    "GET /api/conversations/",
    "DELETE /api/conversations/",
    "GET /api/conversations/{id}/",
    "DELETE /api/conversations/{id}/",
    "GET /api/conversations/{id}/messages/",
    "GET /api/memory/",
    "GET /api/memory/settings/",
    "GET /api/memory/export/markdown/",
    "POST /api/memory/import/",
    "PUT /api/memory/settings/",
    "GET /api/memory/proposals/",
    "GET /api/memory/proposals/{id}/",
    "DELETE /api/memory/proposals/{id}/",
    "POST /api/memory/proposals/{id}/save/",
    "DELETE /api/memory/",
    "POST /api/memory/operations/",
    "GET /api/memory/export/",
    "GET /api/memory/changes/",
    "GET /api/memory/changes/{id}/",
    "POST /api/memory/changes/{id}/undo/",
    "POST /api/memory/changes/{id}/restore/",
    "POST /api/memory/tidy/",
}


@dataclass
class RunReport:
    """What one engine run did: cases per operation, failures, engine errors."""

    cases: Counter = field(default_factory=Counter)
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop_reasons: list[str] = field(default_factory=list)

    def summary(self) -> str:
        per_operation = ", ".join(f"{label} {count}" for label, count in sorted(self.cases.items()))
        return (f"{sum(self.cases.values())} cases over {len(self.cases)} operations; "
                f"statuses {dict(sorted(self.statuses.items()))}; per operation: {per_operation}")


def run_schemathesis(*, routes: str, report: RunReport, **config: object) -> None:
    """Run schemathesis's engine over the routes matching `routes`; add what it did to `report`."""
    from config.asgi import application

    config = SchemathesisConfig.from_dict({
        "seed": SEED,
        "generation": {"max-examples": MAX_EXAMPLES},
        "checks": {"positive_data_acceptance": {"enabled": False}},
        **config,
    })
    schema = schemathesis.openapi.from_asgi("/api/schema/", application, config=config).include(path_regex=routes)
    for event in schemathesis.engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            for node in event.recorder.cases.values():
                report.cases[node.value.operation.label] += 1
            for interaction in event.recorder.interactions.values():
                if interaction.response is not None:
                    report.statuses[interaction.response.status_code] += 1
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.failure_info is not None:
                        failure = check.failure_info.failure
                        interaction = event.recorder.interactions.get(case_id)
                        status = interaction.response.status_code if interaction and interaction.response else "-"
                        report.failures.append(
                            f"{event.recorder.label}: {check.name}: {failure.title} (HTTP {status})\n"
                            f"    {check.failure_info.code_sample}"
                        )
        elif isinstance(event, (events.NonFatalError, events.FatalError)):
            report.errors.append(f"{type(event).__name__}: {event!r}")
        elif isinstance(event, events.EngineFinished):
            report.stop_reasons.append(str(event.stop_reason))
            for failure in event.failures:
                report.failures.append(f"run: {failure.title}")


@pytest.fixture
def token(django_user_model) -> str:
    person = django_user_model.objects.create_user(username="fuzz", password="pw-fuzz-123")
    return Token.objects.create(user=person).key


@pytest.fixture(autouse=True)
def close_handler_connections():
    """Close the ASGI handler threads' connections so the test database can be dropped."""
    yield
    connections.close_all()


def test_every_api_response_matches_the_schema_and_none_is_a_5xx(token, settings, monkeypatch):
    settings.EVAL_SERVICE_TOKEN = EVAL_TOKEN
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", {"chat_turns": "100000/min"})
    monkeypatch.setattr(MemoryWriteThrottle, "THROTTLE_RATES", {"memory_writes": "100000/min"})
    monkeypatch.setattr(TidyThrottle, "THROTTLE_RATES", {"memory_tidy": "100000/min"})
    monkeypatch.setattr(ImportThrottle, "THROTTLE_RATES", {"memory_imports": "100000/min"})
    cache.clear()

    report = RunReport()
    run_schemathesis(routes=PERSON_ROUTES, report=report,
                     auth={"openapi": {"tokenAuth": {"api_key": f"Token {token}"}}})
    run_schemathesis(routes=EVAL_ROUTES, report=report, headers={"Authorization": f"Bearer {EVAL_TOKEN}"})

    print(f"\nschemathesis: {report.summary()}")  # the figures for docs/reliability.md (-s shows them)
    assert report.stop_reasons == ["completed", "completed"], report.errors
    assert not report.errors
    assert set(report.cases) == EXPECTED_OPERATIONS, "a chat or memory route is missing from the schema or the run"
    assert all(count >= 1 for count in report.cases.values())
    assert not [status for status in report.statuses if status >= 500]
    assert not report.failures, "\n".join(report.failures)


@pytest.mark.parametrize(
    "throttle, rates, method, path, body",
    [
        (ScopedRateThrottle, {"chat_turns": "1/min"}, "post", "/api/chat/turns/", {"content": "hello"}),
        (MemoryWriteThrottle, {"memory_writes": "1/min"}, "post", "/api/memory/operations/",
         {"operations": [{"target": "memory", "action": "add", "content": "Throttle probe"}]}),
        (MemoryWriteThrottle, {"memory_writes": "1/min"}, "delete", "/api/memory/", None),
        (TidyThrottle, {"memory_tidy": "1/min"}, "post", "/api/memory/tidy/", {"target": "memory"}),
        (ImportThrottle, {"memory_imports": "1/min"}, "post", "/api/memory/import/", {"text": "Prefers tea."}),
    ],
)
def test_a_throttled_response_is_a_documented_429(token, monkeypatch, throttle, rates, method, path, body):
    from drf_spectacular.generators import SchemaGenerator

    monkeypatch.setattr(throttle, "THROTTLE_RATES", rates)
    cache.clear()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    call = getattr(client, method)
    statuses = [call(path, body, format="json").status_code for _ in range(2)]
    assert statuses[-1] == 429
    operation = SchemaGenerator().get_schema(request=None, public=True)["paths"][path][method]
    assert "429" in operation["responses"], f"{method.upper()} {path} answers 429 but its schema does not say so"


@pytest.mark.parametrize("content", [0, 12.5, True, ["hello"], {"text": "hello"}])
@pytest.mark.parametrize("path", ["/api/chat/turns/", "/api/eval/turns/"])
def test_message_content_that_is_not_a_string_is_a_400(token, settings, path, content):
    # Found by the run above: DRF's CharField turned 0 into the message "0".
    settings.EVAL_SERVICE_TOKEN = EVAL_TOKEN
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {EVAL_TOKEN}" if "eval" in path else f"Token {token}")
    response = client.post(path, {"content": content}, format="json")
    assert response.status_code == 400
    assert "content" in response.json()
