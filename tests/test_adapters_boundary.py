"""The adapters stay optional: agentmemory's core imports none of them, nor their frameworks.

agentmemory.integrations holds one module per agent framework, each needing
its extra; agentmemory.testing (the contract and its scripted server) needs
no extra and no test runner. Parsed, not imported, like tests/test_import_graph.py.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "agentmemory"
FRAMEWORKS = ("agents", "pydantic_ai", "anthropic")
OPTIONAL = ("agentmemory.integrations", "agentmemory.testing")


def imports(path: Path) -> list[str]:
    module = ".".join(path.relative_to(APP.parent).with_suffix("").parts)
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[: -node.level] if node.level else []
            names.append(".".join(base + ([node.module] if node.module else [])))
    return names


def offenders(paths, forbidden) -> list[str]:
    return [f"{path.relative_to(APP.parent)}: {name}" for path in paths for name in imports(path)
            if any(name == f or name.startswith(f + ".") for f in forbidden)]


def test_the_core_imports_no_adapter_and_no_agent_framework():
    core = [path for path in APP.rglob("*.py") if path.relative_to(APP).parts[0] not in ("integrations", "testing")]
    assert len(core) > 20
    assert offenders(core, FRAMEWORKS + OPTIONAL) == []


def test_the_contract_and_the_claude_mapping_need_no_extra_and_no_test_runner():
    plain = [*(APP / "testing").glob("*.py"), APP / "integrations" / "claude_memory.py",
             APP / "integrations" / "errors.py", APP / "integrations" / "__init__.py"]
    assert offenders(plain, FRAMEWORKS + ("pytest",)) == []
    code = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings'); django.setup();"
            "import agentmemory.testing.contract, agentmemory.integrations.claude_memory, sys;"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=APP.parent)
    assert result.stdout.strip() == "[]"
