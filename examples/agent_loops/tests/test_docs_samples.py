"""The adapter samples of docs/integration.md run as written, with the real SDKs.

Each sample is taken from the first project's docs/integration.md (by a line
only it has), executed alone in a fresh namespace, and driven against the
scripted server, which its client finds through the environment as a
project's own client would (OPENAI_BASE_URL / ANTHROPIC_BASE_URL). The model
calls the memory tool once, then answers; the fact must be committed once,
after the answer. The first project compiles these samples and checks that
this file runs each one (tests/test_integration_docs.py).
"""
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from agentmemory import store
from agentmemory.testing.contract import db
from agentmemory.testing.model_server import Say, ScriptedServer
from tests.drivers import LOOPS

DOC = Path(__file__).resolve().parents[3] / "docs" / "integration.md"
FACT = "Prefers answers with one short code example"
SAMPLES = {  # the adapter sample, by its marker, and the loop whose tool call the model makes
    "from agents import": "openai-agents",
    "from pydantic_ai import": "pydantic-ai",
    "from anthropic import": "claude-memory-tool",
}


def sample(marker: str) -> str:
    blocks = [b for b in re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.S | re.M) if marker in b]
    assert len(blocks) == 1, f"docs/integration.md has {len(blocks)} samples with {marker!r}"
    return blocks[0]


@pytest.fixture
def server(monkeypatch):
    with ScriptedServer() as model:
        monkeypatch.setenv("OPENAI_BASE_URL", model.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "docs-sample")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model.anthropic_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "docs-sample")
        yield model
    assert model.errors == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("marker", sorted(SAMPLES), ids=lambda marker: SAMPLES[marker])
async def test_the_adapter_sample_runs_as_written(marker, server):
    namespace = {"__name__": f"integration_sample_{SAMPLES[marker].replace('-', '_')}"}
    exec(compile(sample(marker), f"docs/integration.md ({SAMPLES[marker]})", "exec"), namespace)
    user = await db(get_user_model().objects.create_user, username="docs", password="docs-pass-123")
    server.push(LOOPS[SAMPLES[marker]]().remember(FACT), Say("Noted."))

    reply, outcome = await namespace["answer"](user, "Keep code examples short, one per answer.")

    assert reply == "Noted."
    assert (outcome.status, outcome.operation_count) == ("committed", 1)
    assert (await db(store.load_snapshot, user_id=user.pk)).user == (FACT,)
    assert len(server.requests) == 2
