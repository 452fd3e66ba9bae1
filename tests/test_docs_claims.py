"""Claims of the README and docs/ that name something in the code, checked
against the code (issue 30 found each of these wrong once)."""
from __future__ import annotations

import re
from pathlib import Path

from django.apps import apps

from agentmemory.tool import TOOL_NAME
from chat.agent import ToolEvent

ROOT = Path(__file__).resolve().parent.parent


def read(name: str) -> str:
    return (ROOT / name).read_text()


def agentmemory_tables() -> set[str]:
    return {model._meta.db_table for model in apps.get_app_config("agentmemory").get_models()}


def test_the_quoted_tool_frame_text_is_what_the_chat_sends():
    for name in ("README.md", "docs/chat.md"):
        quotes = re.findall(r'"(Memory: (\d+) changes? [^"]*)"', read(name))
        assert quotes, f"{name} no longer quotes a memory tool frame"
        for quote, count in quotes:
            sent = {ToolEvent(TOOL_NAME, "staged", int(count), ask_first=ask_first).summary()
                    for ask_first in (False, True)}
            assert quote in sent, name


def test_rollout_names_every_table_migrate_agentmemory_creates():
    line = next(line for line in read("docs/rollout.md").splitlines() if "migrate agentmemory " in line and "#" in line)
    assert set(re.findall(r"agentmemory_\w+", line)) == agentmemory_tables()
    count = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}[len(agentmemory_tables())]
    assert f"the {count} `agentmemory_*` tables" in read("docs/rollout.md")


def test_privacy_says_where_each_table_of_the_app_is():
    section = read("docs/privacy.md").split("## What is stored where", 1)[1].split("\n## ", 1)[0]
    assert sorted(table for table in agentmemory_tables() if f"`{table}`" not in section) == []


def test_integration_lists_every_command_of_the_wheel():
    commands = {path.stem for path in (ROOT / "agentmemory" / "management" / "commands").glob("*.py")
                if not path.stem.startswith("_")}
    text = read("docs/integration.md")
    sentence = text[text.index("the management commands"):][:300]
    assert sorted(command for command in commands if f"`{command}`" not in sentence) == []
