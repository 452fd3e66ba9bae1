"""This project runs on agentmemory installed from its wheel, with the three extras, and nothing of the first project."""
import importlib.metadata
import importlib.util
import sysconfig
from pathlib import Path

import agentmemory

EXTRAS = {"openai-agents": "agents", "pydantic-ai-slim": "pydantic-ai", "anthropic": "anthropic"}


def test_agentmemory_and_the_frameworks_come_from_the_wheel_and_its_extras():
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(agentmemory.__file__).resolve().is_relative_to(site)
    requires = importlib.metadata.requires("django-agentmemory") or []
    for distribution, extra in EXTRAS.items():
        assert any(r.startswith(distribution) and f'extra == "{extra}"' in r for r in requires), distribution
        importlib.metadata.version(distribution)  # installed
    for module in ("chat", "config"):
        assert importlib.util.find_spec(module) is None, module
