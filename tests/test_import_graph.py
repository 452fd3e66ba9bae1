"""agentmemory is a reusable app: it depends on nothing of this project.

Every module of agentmemory/ is parsed (not imported) and each import
statement checked, wherever it stands (module level, inside a function, under
TYPE_CHECKING): none may reach `chat`, `config` or `tests`, nor name them as a
dotted path for a later import (`import_string("chat.x")`). Its templates
extend and include only templates that agentmemory or Django's admin ships,
and reverse only its own and the admin's URL names, so the memory page renders
in a project that has neither our templates nor our URLs.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "agentmemory"
PROJECT_PACKAGES = ("chat", "config", "tests")


def modules() -> list[Path]:
    found = sorted(APP.rglob("*.py"))
    assert len(found) > 20, "agentmemory's modules were not found"
    return found


def imported_names(tree: ast.AST, module: str) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve inside the package
                base = module.split(".")[: -node.level]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module or "")
    return names


def reaches_project(name: str) -> bool:
    return name.split(".")[0] in PROJECT_PACKAGES


def test_agentmemory_imports_nothing_from_chat_config_or_tests():
    offenders = []
    for path in modules():
        module = ".".join(path.relative_to(APP.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        offenders += [f"{path.relative_to(APP.parent)}: import {name}"
                      for name in imported_names(tree, module) if reaches_project(name)]
        offenders += [
            f"{path.relative_to(APP.parent)}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"(chat|config|tests)(\.[A-Za-z_]\w*)+", node.value)
        ]
    assert offenders == []


def test_relative_imports_stay_inside_agentmemory():
    for path in modules():
        package_depth = len(path.relative_to(APP.parent).parts) - 1  # agentmemory/x.py: 1
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level <= package_depth, f"{path}:{node.lineno}: a relative import leaves agentmemory"


def test_the_checker_catches_an_import_of_the_project():
    tree = ast.parse("import chat.agent\nfrom config import settings\nfrom ..chat import x\n")
    names = imported_names(tree, "agentmemory.sub.module")
    assert [name for name in names if reaches_project(name)] == ["chat.agent", "config"]


COMMENT = re.compile(r"{%\s*comment\s*%}.*?{%\s*endcomment\s*%}|{#.*?#}", re.S)
TEMPLATE_REF = re.compile(r"{%\s*(extends|include)\s+['\"]([^'\"]+)['\"]")
URL_NAME = re.compile(r"{%\s*url\s+['\"]([^'\"]+)['\"]")


def test_templates_use_only_agentmemory_and_admin_templates_and_urls():
    templates = APP / "templates"
    shipped = {path.relative_to(templates).as_posix() for path in templates.rglob("*.html")}
    assert "agentmemory/base.html" in shipped
    problems = []
    for path in templates.rglob("*.html"):
        text = COMMENT.sub("", path.read_text())
        for _, name in TEMPLATE_REF.findall(text):
            if name not in shipped and not name.startswith("admin/"):
                problems.append(f"{path.relative_to(templates)} uses {name}")
        for name in URL_NAME.findall(text):
            if name.split(":")[0] not in ("agentmemory", "admin"):
                problems.append(f"{path.relative_to(templates)} reverses {name}")
    assert problems == []


def test_the_store_imports_nothing_from_idempotency():
    """The store stands under idempotency (issue 42): `agentmemory.idempotency` imports the store, never
    the other way round, so the names both use (UnknownUser, AlreadyCommitted) live in agentmemory/store/."""
    store_modules = sorted((APP / "store").rglob("*.py"))
    assert len(store_modules) > 5
    offenders = []
    for path in store_modules:
        module = ".".join(path.relative_to(APP.parent).with_suffix("").parts)
        tree = ast.parse(path.read_text(), filename=str(path))
        offenders += [f"{path.relative_to(APP.parent)}: import {name}" for name in imported_names(tree, module)
                      if name == "agentmemory.idempotency" or name.startswith("agentmemory.idempotency.")]
        # `from .. import idempotency` names the module as an imported name, not a module path.
        offenders += [f"{path.relative_to(APP.parent)}:{node.lineno}: from {'.' * node.level}{node.module or ''} "
                      f"import idempotency" for node in ast.walk(tree)
                      if isinstance(node, ast.ImportFrom) and any(alias.name == "idempotency" for alias in node.names)]
    assert offenders == []


def test_idempotency_keeps_its_public_names():
    from agentmemory import idempotency, store

    assert idempotency.AlreadyCommitted is store.errors.AlreadyCommitted
    assert idempotency.AlreadyCommitted.__module__ == "agentmemory.idempotency"
    assert idempotency.UnknownUser is store.UnknownUser


# --- private names stay in their module (issue 41 part 4) -------------------------------------------

OUR_PACKAGES = ("agentmemory", "chat", "config")


def private_imports(tree: ast.AST, module: str) -> list[str]:
    """`from <one of our modules> import _name` statements: another module's underscore name, imported."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        (source,) = imported_names(ast.Module(body=[node], type_ignores=[]), module)
        if source.split(".")[0] not in OUR_PACKAGES:
            continue
        found += [f"{node.lineno}: from {source} import {alias.name}" for alias in node.names
                  if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_name():
    """A helper one module shares with another has a public name (within its package); an underscore
    name is that module's own."""
    offenders = []
    for package in OUR_PACKAGES:
        paths = sorted((APP.parent / package).rglob("*.py"))
        assert paths, package
        for path in paths:
            module = ".".join(path.relative_to(APP.parent).with_suffix("").parts)
            tree = ast.parse(path.read_text(), filename=str(path))
            offenders += [f"{path.relative_to(APP.parent)}:{line}" for line in private_imports(tree, module)]
    assert offenders == []


def test_the_checker_catches_a_private_import():
    tree = ast.parse(
        "from .statements import _statements, Row\n"
        "from agentmemory.threats.folding import _fold\n"
        "from ..rules import __all__\n"
        "from django.db.models import _private\n"
        "def f():\n    from . import _inner\n"
    )
    assert private_imports(tree, "agentmemory.store.commit") == [
        "1: from agentmemory.store.statements import _statements",
        "2: from agentmemory.threats.folding import _fold",
        "6: from agentmemory.store import _inner",
    ]
