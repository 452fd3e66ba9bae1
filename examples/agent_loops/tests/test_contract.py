"""The contract (agentmemory.testing.contract) for each adapter, with the real SDKs over real HTTP.

tests/test_packaging.py in the first project runs this file in a fresh
virtual environment holding the wheel with its `agents`, `pydantic-ai` and
`anthropic` extras, on SQLite and on PostgreSQL. The first project's chat
passes the same scenarios there (tests/test_contract_chat.py).
"""
import pytest

from agentmemory.testing.contract import SCENARIOS, People
from agentmemory.testing.model_server import ScriptedServer
from tests.drivers import LOOPS


@pytest.fixture
def server():
    with ScriptedServer() as model:
        yield model
    assert model.errors == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.__name__)
@pytest.mark.parametrize("loop", sorted(LOOPS), ids=str)
async def test_the_contract(loop, scenario, server):
    await scenario(LOOPS[loop](), server, People())
