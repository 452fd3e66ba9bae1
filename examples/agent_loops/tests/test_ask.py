"""The runnable examples: `manage.py ask` runs each adapter's example offline, as one person."""
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from agentmemory import store


@pytest.fixture
def person(db):
    return get_user_model().objects.create_user("marie", password="marie-pass-123")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("adapter", ["agents", "pydantic-ai", "claude"])
def test_each_example_remembers_for_the_person_who_asks_and_then_knows_it(adapter, person, capsys, monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    call_command("ask", adapter, "marie", "remember: The office closes at six.")
    assert capsys.readouterr().out.splitlines() == ["Noted.", "Memory: Memory saved."]
    assert store.load_snapshot(user_id=person.pk).memory == ("The office closes at six.",)
    call_command("ask", adapter, "marie", "What do you know?")
    assert capsys.readouterr().out.splitlines() == ["I remember things about you.", "Memory: No memory change in this turn."]


def test_an_unknown_person_is_refused(db):
    with pytest.raises(CommandError):
        call_command("ask", "claude", "nobody", "hello")
