"""Every Python sample of docs/integration.md runs as written, on its own.

Each ```python block is taken from the document and executed alone in a
fresh namespace (so a sample that leans on another's imports fails), then
driven: the settings and URL samples are checked for what they configure,
the memory turn sample and the three agent loops run against the scripted
model over real HTTP (`tests.scripted_model`, the package's ScriptedServer,
not streamed: the loops do not stream), found through OPENAI_BASE_URL and
OPENAI_API_KEY as a project's own client would find its endpoint. The
model calls memory_update once, then answers; the fact must be committed
after the answer, once.

The three adapter samples (OpenAI Agents SDK, Pydantic AI, Claude) need
their extras, which this project does not install: they run in
examples/agent_loops (tests/test_docs_samples.py), installed from the wheel
with the extras by tests/test_packaging.py; here they are only compiled.
"""
from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest
from django.urls import reverse

from agentmemory import store
from tests.chat_helpers import db
from tests.scripted_model import ScriptedModel, text, tool_call

DOC = Path(__file__).resolve().parent.parent / "docs" / "integration.md"
FACT = "Prefers answers with one short code example"
CALL = {"operations": [{"target": "user", "action": "add", "content": FACT}]}
QUESTION = "Keep code examples short, one per answer."
# Each sample, by a line only it has.
SAMPLES = {
    "settings": "INSTALLED_APPS = [",
    "urls": "urlpatterns = [",
    "memory turn": "async def remember(",
    "chat completions": "client.chat.completions.create(",
    "responses": "client.responses.create(",
    "agents sdk": "from agents import",
    "pydantic ai": "from pydantic_ai import",
    "claude": "from anthropic import",
    "signals": "@receiver(memory_committed",
}
# Run in examples/agent_loops, where their extras are installed.
ADAPTERS = ("agents sdk", "pydantic ai", "claude")
AGENT_LOOPS_SAMPLES = DOC.parent.parent / "examples" / "agent_loops" / "tests" / "test_docs_samples.py"


def samples() -> dict[str, str]:
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M)
    found: dict[str, str] = {}
    for block in blocks:
        kinds = [kind for kind, marker in SAMPLES.items() if marker in block]
        assert len(kinds) == 1, f"a Python block of docs/integration.md is not one known sample: {kinds}"
        assert kinds[0] not in found, f"two {kinds[0]} samples"
        found[kinds[0]] = block
    assert sorted(found) == sorted(SAMPLES), "a sample is missing from docs/integration.md"
    return found


def run(kind: str) -> dict:
    """Execute one sample as written, alone, as a module of its own; return its namespace."""
    namespace = {"__name__": f"integration_sample_{kind.replace(' ', '_')}"}
    exec(compile(samples()[kind], f"docs/integration.md ({kind})", "exec"), namespace)
    return namespace


def test_each_python_block_is_a_known_sample():
    assert len(samples()) == len(SAMPLES)


def test_the_settings_sample():
    settings = run("settings")
    assert "agentmemory" in settings["INSTALLED_APPS"] and "rest_framework" in settings["INSTALLED_APPS"]
    assert settings["REST_FRAMEWORK"]["DEFAULT_THROTTLE_RATES"]["memory_writes"]
    logging = settings["LOGGING"]
    assert all("redact" in handler.get("filters", []) for handler in logging["handlers"].values())
    assert logging["filters"]["redact"]["()"] == "agentmemory.telemetry.RedactionFilter"
    assert settings["AGENTMEMORY"] == {"ENABLED": True}


@pytest.mark.django_db(transaction=True)
def test_the_signals_sample_hears_a_commit_and_an_erase(user):
    from agentmemory import services, signals

    sample = run("signals")
    try:
        result = services.add_entry(user_id=user.pk, target="memory", content=FACT)
        services.erase_memory(user_id=user.pk, actor="user")
        assert sample["reindex_queue"] == [("reindex", user.pk, result.change_id, ("memory",)), ("drop", user.pk)]
    finally:
        signals.memory_committed.disconnect(dispatch_uid="search_reindex_memory")
        signals.memory_erased.disconnect(dispatch_uid="search_drop_memory")


def test_the_urls_sample():
    urls = types.ModuleType("integration_sample_urls")
    urls.__dict__.update(run("urls"))
    assert reverse("agentmemory:page", urlconf=urls) == "/memory/"
    assert reverse("agentmemory:api-operations", urlconf=urls) == "/api/memory/operations/"
    assert reverse("admin:index", urlconf=urls) == "/admin/"


@pytest.fixture
def model(monkeypatch):
    """The scripted server, where an `AsyncOpenAI()` built from the environment finds it."""
    with ScriptedModel() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "integration-docs")
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the SDK would export traces to OpenAI
        yield server
    assert server.errors == []


def committed(user) -> tuple[str, ...]:
    return store.load_snapshot(user_id=user.pk).user


@pytest.mark.django_db(transaction=True)
async def test_the_memory_turn_sample(user):
    remember = run("memory turn")["remember"]
    outcome = await remember(user, json.dumps(CALL), conversation_id=None, turn_id="t-1")
    assert (outcome.status, outcome.operation_count, outcome.changed) == ("committed", 1, ("user",))
    assert await db(committed, user) == (FACT,)
    refused = await remember(user, json.dumps({"operations": [{"target": "user", "action": "remove",
                                                               "match": "nowhere"}]}))
    assert refused.status == "nothing_to_commit"  # the call was refused, so the turn discards: nothing staged
    assert await db(committed, user) == (FACT,)


@pytest.mark.django_db(transaction=True)
async def test_the_memory_turn_sample_commits_once_per_idempotency_key(user):
    remember = run("memory turn")["remember"]
    first = await remember(user, json.dumps(CALL), idempotency_key="retry-me")
    other = {"operations": [{"target": "user", "action": "add", "content": "Works in UTC"}]}
    retried = await remember(user, json.dumps(other), idempotency_key="retry-me")  # the retry's model chose otherwise

    assert first.status == "committed" and retried == first
    assert await db(committed, user) == (FACT,)  # the retry committed nothing
    assert (await remember(user, json.dumps(other))).status == "committed"  # without the key: a new turn
    assert await db(committed, user) == (FACT, "Works in UTC")


@pytest.mark.django_db(transaction=True)
async def test_the_chat_completions_sample(user, model):
    answer = run("chat completions")["answer"]
    model.push(tool_call(CALL), text("Noted: one short example per answer."))
    reply, outcome = await answer(user, QUESTION)
    assert reply == "Noted: one short example per answer."
    assert outcome["status"] == "committed" and outcome["operation_count"] == 1
    assert await db(committed, user) == (FACT,)
    first, second = model.requests
    assert [tool["function"]["name"] for tool in first["tools"]] == ["memory_update"]
    assert [message["role"] for message in second["messages"]][-2:] == ["assistant", "tool"]


@pytest.mark.django_db(transaction=True)
async def test_the_chat_completions_sample_commits_nothing_from_an_unfinished_answer(user, model):
    answer = run("chat completions")["answer"]
    model.push(tool_call(CALL), text("Noted, and then I was cut", finish_reason="length"))
    with pytest.raises(RuntimeError):
        await answer(user, QUESTION)
    assert await db(committed, user) == ()


@pytest.mark.django_db(transaction=True)
async def test_the_responses_api_sample(user, model):
    answer = run("responses")["answer"]
    model.push(tool_call(CALL), text("Noted."))
    reply, outcome = await answer(user, QUESTION)
    assert reply == "Noted." and outcome.status == "committed"
    assert await db(committed, user) == (FACT,)
    first, second = model.requests
    assert first["store"] is False and [tool["name"] for tool in first["tools"]] == ["memory_update"]
    assert first["tools"][0]["strict"] is False
    outputs = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert len(outputs) == 1 and json.loads(outputs[0]["output"])["success"] is True


@pytest.mark.parametrize("kind", ADAPTERS)
def test_each_adapter_sample_compiles_and_runs_in_the_agent_loops_project(kind):
    compile(samples()[kind], f"docs/integration.md ({kind})", "exec")
    # The project that has the extras runs it, found by the same marker.
    assert SAMPLES[kind] in AGENT_LOOPS_SAMPLES.read_text(), f"examples/agent_loops does not run the {kind} sample"


def test_every_agentmemory_key_is_documented_with_its_default():
    """docs/integration.md says it lists "every key of the AGENTMEMORY setting": each of conf.DEFAULTS, and no other."""
    from agentmemory.conf import DEFAULTS

    text = (Path(__file__).resolve().parent.parent / "docs" / "integration.md").read_text()
    table = text.split("Every key of the `AGENTMEMORY` setting", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| `([^`]*)` \|", table, re.M))
    assert set(rows) == set(DEFAULTS)
    for key, value in DEFAULTS.items():
        if isinstance(value, bool | int | float) or (isinstance(value, str) and key != "POLICY_VERSION"):
            assert rows[key] == (json.dumps(value) if isinstance(value, str) else repr(value)), key
