"""The environment variables the code reads, .env.example and the README's
settings table name the same set, and .env.example's values are the code's
defaults (issue 30: four variables were missing from .env.example, four
from the README, one from both).

A variable whose default is computed from the setup (`default=not DEBUG`,
`'off' if the port is 6432 else '5'`) is commented out in .env.example
(`#NAME=`, with its rule): a fixed value there, copied to .env as the file
suggests, differs from the computed default in some setup (issue 42: the
API docs staff-only and cookies Secure under `make run`, prepared statements
forced on a pooler). `test_computed_defaults_stay_commented_out` catches one.

The code is parsed, not run: every `env.<cast>("NAME", ...)` of
django-environ, `os.environ.get("NAME")`, `os.getenv("NAME")` and
`os.environ["NAME"]` in config/, agentmemory/, chat/ and manage.py. A
default given as a literal (`default=60`, `os.environ.get("X", "a,b")`) is
compared with the value .env.example gives, read with the same cast.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import environ

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "manage.py", *sorted((ROOT / "config").rglob("*.py")), *sorted((ROOT / "agentmemory").rglob("*.py")),
           *sorted((ROOT / "chat").rglob("*.py"))]
# Read from the environment, but not settings of this project.
NOT_SETTINGS = {
    "DJANGO_SETTINGS_MODULE": "Django's own: which settings module to load",
    "HOST": "`make run`'s address (a make variable); demo_accounts only prints it",
    "PORT": "`make run`'s port (a make variable); demo_accounts only prints it",
}
NAME = re.compile(r"[A-Z][A-Z0-9_]*")
CASTS = {"str": str, "bool": bool, "int": int, "float": float, "list": list, "get": str}
ENV_NAMES = {"env", "environ"}  # django-environ's Env in the settings; os.environ by another name elsewhere


@dataclass(frozen=True)
class Read:
    name: str
    where: str
    cast: type | None = None
    default: object = None
    has_default: bool = False


def _is_os_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def _literal(node: ast.AST):
    """The value of a constant expression (literals, lists, `1024 * 1024`); raise ValueError otherwise."""
    for child in ast.walk(node):
        if not isinstance(child, (ast.Constant, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator,
                                  ast.unaryop, ast.Load)):
            raise ValueError("not a constant expression")
    return eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # constants only


def env_reads() -> list[Read]:
    reads = []
    for path in SOURCES:
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            if isinstance(node, ast.Subscript) and (_is_os_environ(node.value) or (
                    isinstance(node.value, ast.Name) and node.value.id in ENV_NAMES)):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    reads.append(Read(node.slice.value, where))
                continue
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str) and NAME.fullmatch(first.value)):
                continue
            func = node.func
            method = None
            if isinstance(func, ast.Attribute):
                owner = func.value
                if _is_os_environ(owner) or (isinstance(owner, ast.Name) and owner.id in ENV_NAMES):
                    method = func.attr
                elif isinstance(owner, ast.Name) and owner.id == "os" and func.attr == "getenv":
                    method = "get"
            elif isinstance(func, ast.Name) and func.id in ENV_NAMES:
                method = "str"
            if method is None:
                continue
            if method == "setdefault":  # os.environ.setdefault("DJANGO_SETTINGS_MODULE", ...)
                reads.append(Read(first.value, where))
                continue
            default_node = next((keyword.value for keyword in node.keywords if keyword.arg == "default"), None)
            if default_node is None and method == "get" and len(node.args) > 1:
                default_node = node.args[1]
            read = Read(first.value, where, CASTS.get(method))
            if default_node is not None and read.cast is not None:
                try:
                    read = Read(first.value, where, read.cast, _literal(default_node), True)
                except ValueError:
                    pass  # computed from other settings (`not DEBUG`, a path): not comparable
            reads.append(read)
    return reads


def read_names() -> set[str]:
    return {read.name for read in env_reads()} - set(NOT_SETTINGS)


# Computed defaults that .env.example may still set: a secret's placeholder
# (production refuses to start without a real one; DEBUG has its own).
PLACEHOLDERS = {"SECRET_KEY": "change-me"}


def env_example(text: str | None = None, *, commented: bool = False) -> dict[str, str]:
    """NAME -> value of each assignment in .env.example (with `commented`, of each `#NAME=` line)."""
    values: dict[str, str] = {}
    pattern = r"#([A-Z][A-Z0-9_]*)=(.*)" if commented else r"([A-Z][A-Z0-9_]*)=(.*)"
    for line in (text if text is not None else (ROOT / ".env.example").read_text()).splitlines():
        match = re.fullmatch(pattern, line)
        if match:
            assert match.group(1) not in values, f"{match.group(1)} is in .env.example twice"
            values[match.group(1)] = match.group(2)
    return values


def computed_defaults() -> dict[str, str]:
    """NAME -> where, for each read whose default is an expression of the setup, not a literal."""
    computed = {}
    for path in SOURCES:
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str) and NAME.fullmatch(node.args[0].value)):
                continue
            func = node.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    and func.value.id in ENV_NAMES | {"os"} or _is_os_environ(getattr(func, "value", None))):
                continue
            default = next((keyword.value for keyword in node.keywords if keyword.arg == "default"), None)
            if default is None and isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) > 1:
                default = node.args[1]
            if default is None:
                continue
            try:
                _literal(default)
            except ValueError:
                computed[node.args[0].value] = where
    return computed


def fixed_computed_defaults(text: str) -> list[str]:
    """The variables with a computed default that `text` (an .env.example) sets to a fixed value."""
    active, commented = env_example(text), env_example(text, commented=True)
    return sorted(f"{name} ({where})" for name, where in computed_defaults().items()
                  if name in active and PLACEHOLDERS.get(name) != active[name]
                  or name not in active and name in read_names() and name not in commented)


def readme_settings() -> set[str]:
    """Every variable named in the first column of the README's "Settings" table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "the README's settings table was not found"
    names = set()
    for row in rows:
        cell = row.split("|")[1]
        tokens = re.findall(r"`([^`]+)`", cell)
        assert not [token for token in tokens if "*" in token], f"a wildcard in the README's settings table: {cell}"
        names |= {token for token in tokens if NAME.fullmatch(token)}
    return names


def test_the_scan_finds_the_reads():
    names = read_names()
    # One of each kind: django-environ casts, os.environ.get, env.get on os.environ, a nested setting.
    assert {"DEBUG", "DATABASE_URL", "CHAT_TURN_RATE", "MEMORY_EVAL_API_KEY", "OTEL_SDK_DISABLED",
            "HTTP_CLIENT_LOG_LEVEL", "AGENTMEMORY_POLICY_VERSION"} <= names
    assert len(names) > 50


def test_env_example_lists_every_variable_the_code_reads_and_no_other():
    names, documented = read_names(), set(env_example()) | set(env_example(commented=True))
    assert sorted(names - documented) == [], "read by the code but missing from .env.example"
    assert sorted(documented - names) == [], "in .env.example but read by no code"


def test_the_readme_settings_table_names_every_variable_and_no_other():
    names, documented = read_names(), readme_settings()
    assert sorted(names - documented) == [], "read by the code but missing from the README's settings table"
    assert sorted(documented - names) == [], "in the README's settings table but read by no code"


def test_env_example_values_are_the_code_defaults():
    example = env_example()
    compared, differ = 0, []
    for read in env_reads():
        if not read.has_default or read.name not in example:
            continue
        value = environ.Env.parse_value(example[read.name], read.cast)
        compared += 1
        if value != read.default:
            differ.append(f"{read.name}: .env.example {value!r}, {read.where} {read.default!r}")
    assert differ == []
    assert compared > 40


def test_computed_defaults_stay_commented_out():
    computed = computed_defaults()
    # The scan finds the setup-dependent defaults of config/settings.py.
    assert {"API_DOCS_PUBLIC", "SECURE_COOKIES", "DATABASE_PREPARE_THRESHOLD", "DATABASE_URL"} <= set(computed)
    assert fixed_computed_defaults((ROOT / ".env.example").read_text()) == []
    # What it catches: the fixed values .env.example once gave (issue 42).
    before = (ROOT / ".env.example").read_text().replace("#API_DOCS_PUBLIC=0", "API_DOCS_PUBLIC=0")
    assert fixed_computed_defaults(before) == ["API_DOCS_PUBLIC (config/settings.py)"]
    before = before.replace("#DATABASE_PREPARE_THRESHOLD=5", "DATABASE_PREPARE_THRESHOLD=5")
    assert "DATABASE_PREPARE_THRESHOLD (config/settings.py)" in fixed_computed_defaults(before)


def test_commented_out_lines_are_settings_with_their_rule():
    lines = (ROOT / ".env.example").read_text().splitlines()
    for index, line in enumerate(lines):
        match = re.fullmatch(r"#([A-Z][A-Z0-9_]*)=.*", line)
        if match:
            assert match.group(1) in computed_defaults(), f"{match.group(1)} has a literal default: set it"
            assert lines[index - 1].startswith("# ") and "efault" in "\n".join(lines[max(0, index - 4):index]), \
                f"{match.group(1)}: say the rule of its default in the comment above it"
