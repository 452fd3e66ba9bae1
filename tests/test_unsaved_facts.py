"""The unsaved-statement question offers one fact per entry, never a run-on of clauses (issue 52, item 3).

Pure checks of `gate.unsaved_statements`, and one real turn (scripted model over real HTTP, SQLite and
PostgreSQL) whose proposal holds one entry per fact.
"""
import pytest

from agentmemory import gate, proposals
from chat.turns import run_turn
from tests.chat_helpers import db, fresh_agents  # noqa: F401
from tests.scripted_model import scripted_model, text  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def offered(message: str) -> list[str]:
    return gate.unsaved_statements(gate.TurnSources.from_messages([{"role": "user", "content": message}]))


@pytest.mark.parametrize(("message", "facts"), [
    ("I use Neovim, I prefer tabs, and I work at Acme on the billing team.", ["Uses Neovim.", "Prefers tabs."]),
    ("My dog is called Biscuit and my cat is called Pixel.",
     ["Their dog is called Biscuit.", "Their cat is called Pixel."]),
    ("I'm a senior Rust engineer with ten years of experience and I mostly work on embedded systems.",
     ["Is a senior Rust engineer with ten years of experience.", "Mostly works on embedded systems."]),
])
def test_each_fact_of_a_run_on_statement_is_its_own_entry(message, facts):
    assert offered(message) == facts


def test_a_clause_with_one_fact_is_offered_whole():
    entry = "Uses Neovim as their editor and for quick notes."
    assert offered("I use Neovim as my editor and for quick notes.") == [entry]


async def test_a_run_on_statement_is_offered_one_fact_an_entry_in_a_real_turn(user, scripted_model):
    scripted_model.push(text("Nice setup."))  # no memory call: trusted code offers what the person said

    result = await run_turn(user=user, content="My dog is called Biscuit and my cat is called Pixel.")

    [proposal] = await db(proposals.pending, user_id=user.pk)
    assert proposal.id == result.memory.proposal_id
    assert [op.content for op in proposal.operations] == ["Their dog is called Biscuit.", "Their cat is called Pixel."]
