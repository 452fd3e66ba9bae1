"""Our chat passes the same contract as the adapters (agentmemory.testing.contract).

The loop is the chat's own turn (`chat.turns.run_turn`; the memory-free mode
is the evaluation route's `run_eval_turn`), its real openai client streaming
from the contract's scripted server over real HTTP, on the suite's database
(SQLite, then PostgreSQL). examples/agent_loops runs the same scenarios for
the three adapters, in the packaging step's fresh environment.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentmemory.telemetry import add_span_exporter
from agentmemory.testing.contract import SCENARIOS, People
from agentmemory.testing.model_server import Call, ScriptedServer, Seen
from agentmemory.tool import TOOL_NAME
from chat.agent import MAX_MODEL_ROUNDS
from chat.turns import run_eval_turn, run_turn
from tests.chat_helpers import fresh_agents  # noqa: F401  (autouse: no agent outlives a test)

_EXPORTED: list[InMemorySpanExporter] = []


def exported_spans() -> InMemorySpanExporter:
    """What a span exporter receives (after agentmemory's redaction), installed once per process."""
    if not _EXPORTED:
        _EXPORTED.append(InMemorySpanExporter())
        add_span_exporter(_EXPORTED[0], batch=False)
    return _EXPORTED[0]


class ChatLoop:
    name = "chat"
    rounds = MAX_MODEL_ROUNDS

    async def turn(self, server: ScriptedServer, person, question: str, *, memory: bool = True) -> str:
        if not memory:
            return (await run_eval_turn(content=question)).reply
        return (await run_turn(user=person, content=question)).reply

    def remember(self, fact: str) -> Call:
        return Call(TOOL_NAME, {"operations": [{"target": "user", "action": "add", "content": fact}]})

    def impersonate(self, other_id, fact: str) -> Call:
        return Call(TOOL_NAME, {"operations": [{"target": "user", "action": "add", "content": fact}],
                                "user_id": other_id})

    def offers_tool(self, seen: Seen) -> bool:
        return TOOL_NAME in seen.tools

    @contextlib.contextmanager
    def capture_traces(self) -> Iterator[list[str]]:
        exporter = exported_spans()
        exporter.clear()
        items: list[str] = []
        try:
            yield items
        finally:
            items.extend(span.to_json(indent=None) for span in exporter.get_finished_spans())
            exporter.clear()
        assert any('"memory.turn"' in item for item in items), "no chat span was exported: the capture is not working"


@pytest.fixture
def server(settings):
    with ScriptedServer() as model:
        settings.OPENAI_API_KEY = "scripted"
        settings.OPENAI_BASE_URL = model.openai_url
        settings.OPENAI_MODEL = "scripted-primary"
        settings.OPENAI_FALLBACK_MODEL = ""
        settings.OPENAI_MAX_RETRIES = 0
        settings.OPENAI_TIMEOUT = 10
        yield model
    assert model.errors == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.__name__)
async def test_our_chat_keeps_the_contract(scenario, server):
    await scenario(ChatLoop(), server, People())
