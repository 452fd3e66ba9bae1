"""The three adapters as `agentmemory.testing.contract.Loop`s: each runs this project's example
(loops/*.py) with the real SDK against the scripted server over real HTTP."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI

from agentmemory.testing.model_server import Call, ScriptedServer, Seen
from agentmemory.tool import TOOL_NAME
from loops import agents_sdk, claude_agent, pydantic_agent

ROUNDS = 4


def memory_update(fact: str, **extra) -> Call:
    return Call(TOOL_NAME, {"operations": [{"target": "user", "action": "add", "content": fact}], **extra})


def openai_client(server: ScriptedServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.openai_url, api_key="scripted", max_retries=0, timeout=20)


class AgentsSdkLoop:
    name = "openai-agents"
    rounds = ROUNDS

    async def turn(self, server, person, question, *, memory=True) -> str:
        client = openai_client(server)
        try:
            agent = agents_sdk.support_agent(client, model="scripted")
            text, _ = await agents_sdk.answer(agent, user_id=person.pk, question=question, memory=memory,
                                              max_turns=self.rounds)
            return text
        finally:
            await client.close()

    def remember(self, fact: str) -> Call:
        return memory_update(fact)

    def impersonate(self, other_id, fact: str) -> Call:
        return memory_update(fact, user_id=other_id)

    def offers_tool(self, seen: Seen) -> bool:
        return TOOL_NAME in seen.tools

    @contextlib.contextmanager
    def capture_traces(self) -> Iterator[list[str]]:
        """Every trace and span the SDK finishes, as its exporter would send them (tracing on)."""
        from agents.tracing import TracingProcessor, set_trace_processors, set_tracing_disabled
        from agents.tracing.processors import default_processor

        items: list[str] = []

        class Collect(TracingProcessor):
            def on_trace_start(self, trace) -> None: ...

            def on_trace_end(self, trace) -> None:
                items.append(json.dumps(trace.export(), default=str))

            def on_span_start(self, span) -> None: ...

            def on_span_end(self, span) -> None:
                items.append(json.dumps(span.export(), default=str))

            def shutdown(self) -> None: ...

            def force_flush(self) -> None: ...

        set_tracing_disabled(False)
        set_trace_processors([Collect()])
        try:
            yield items
        finally:
            set_trace_processors([default_processor()])
            set_tracing_disabled(True)
        assert any('"function"' in item for item in items), "the SDK traced no tool call: the capture is not working"


class PydanticAiLoop:
    name = "pydantic-ai"
    rounds = ROUNDS

    def __init__(self) -> None:
        self.instrument = None

    async def turn(self, server, person, question, *, memory=True) -> str:
        client = openai_client(server)
        try:
            agent = pydantic_agent.support_agent(client, model="scripted")
            if self.instrument is not None:
                agent.instrument = self.instrument
            text, _ = await pydantic_agent.answer(agent, user_id=person.pk, question=question, memory=memory,
                                                  request_limit=self.rounds)
            return text
        finally:
            await client.close()

    def remember(self, fact: str) -> Call:
        return memory_update(fact)

    def impersonate(self, other_id, fact: str) -> Call:
        return memory_update(fact, user_id=other_id)

    def offers_tool(self, seen: Seen) -> bool:
        return TOOL_NAME in seen.tools

    @contextlib.contextmanager
    def capture_traces(self) -> Iterator[list[str]]:
        """The spans of an instrumented run, as docs/integration.md says to instrument it (no content)."""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from pydantic_ai.models.instrumented import InstrumentationSettings

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.instrument = InstrumentationSettings(tracer_provider=provider, include_content=False)
        items: list[str] = []
        try:
            yield items
        finally:
            self.instrument = None
            items.extend(span.to_json(indent=None) for span in exporter.get_finished_spans())
        assert items, "the instrumented run recorded no span: the capture is not working"


class ClaudeLoop:
    name = "claude-memory-tool"
    rounds = ROUNDS

    def __init__(self) -> None:
        self.tracing = None  # the client's open_telemetry option while traces are captured

    async def turn(self, server, person, question, *, memory=True) -> str:
        client = AsyncAnthropic(base_url=server.anthropic_url, api_key="scripted", max_retries=0, timeout=20,
                                open_telemetry=self.tracing)
        try:
            text, _ = await claude_agent.answer(client, user_id=person.pk, question=question, memory=memory,
                                                rounds=self.rounds, model="scripted")
            return text
        finally:
            await client.close()

    def remember(self, fact: str) -> Call:
        return Call("memory", {"command": "insert", "path": "/memories/profile.md", "insert_line": 0,
                               "insert_text": fact})

    def impersonate(self, other_id, fact: str) -> Call:
        return Call("memory", {"command": "create", "path": f"/memories/users/{other_id}/profile.md",
                               "file_text": fact})

    def offers_tool(self, seen: Seen) -> bool:
        return "memory_20250818" in seen.tools

    @contextlib.contextmanager
    def capture_traces(self) -> Iterator[list[str]]:
        """The anthropic client's own spans, with the client told to record content: the adapter must not let it."""
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracing = {"tracer_provider": provider, "traces": {"content_mode": "content"}}
        items: list[str] = []
        try:
            yield items
        finally:
            self.tracing = None
            items.extend(span.to_json(indent=None) for span in exporter.get_finished_spans())
        assert any("anthropic.messages.create" in item for item in items), "the client traced no call"


LOOPS = {loop.name: loop for loop in (AgentsSdkLoop, PydanticAiLoop, ClaudeLoop)}
