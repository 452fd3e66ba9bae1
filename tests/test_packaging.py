"""agentmemory as an installable app, and a lean runtime.

- `python -m build` makes the django-agentmemory wheel (once per run), with
  the `agentmemory` package only;
- a fresh virtual environment (no system site packages) gets that wheel plus
  the pinned requirements of examples/second_project, and the second
  project's own tests run there, on SQLite and on PostgreSQL: agentmemory
  without `chat`, `config`, channels or the OpenTelemetry SDK;
- another fresh virtual environment gets the wheel with its `agents`,
  `pydantic-ai` and `anthropic` extras plus the pins of examples/agent_loops,
  and that project's tests run there on both databases: the adapters of
  agentmemory.integrations pass the contract (agentmemory.testing.contract)
  with the real frameworks, and the adapter samples of docs/integration.md
  run as written;
- a fresh virtual environment with `-r requirements.txt` holds no test tool,
  and runs the project's checks.

The fresh environments are made by `python -m venv` and filled by uv's
`uv pip install` (pinned in requirements-dev.txt) from the same files and
pins pip would read: uv installs them in seconds where pip took 30 to 40 s
each. pip's own install of the same pins is what `make install-dev` runs,
CI's first step, from a fresh clone.

Slow (fresh environments, installs from the package index); marked
`packaging` so scripts/test.sh runs them once, outside the two database
passes of the suite. The runtime environment is cached in .cache/packaging/
under the checksum of requirements.txt; the second project's is always new.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parent.parent
SECOND_PROJECT = ROOT / "examples" / "second_project"
AGENT_LOOPS = ROOT / "examples" / "agent_loops"
ADAPTER_EXTRAS = "agents,pydantic-ai,anthropic"
CACHE = ROOT / ".cache" / "packaging"
PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
TEST_TOOLS = ("pytest", "playwright", "hypothesis", "schemathesis")
VERSION = "0.1.0"
UV = Path(sys.executable).parent / "uv"
# Variables of this run that must not leak into a child project or environment.
DROP = ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH", "VIRTUAL_ENV", "TEST_DB_NAME", "PYTHONHOME")


def run(command: list, *, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))} exited {result.returncode}:\n" + (
        result.stdout[-6000:] + result.stderr[-6000:])
    return result


def child_env(**extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in DROP}
    return {**env, **extra}


def uv(*args) -> subprocess.CompletedProcess:
    """Run uv (installed beside this interpreter by requirements-dev.txt), reading no uv config file."""
    return run([UV, *args], env=child_env(UV_NO_CONFIG="1"))


def fresh_venv(path: Path, *requirements: str) -> Path:
    """A new virtual environment (never --system-site-packages) with `uv pip install *requirements`."""
    run([sys.executable, "-m", "venv", "--without-pip", path])
    python = path / "bin" / "python"
    uv("pip", "install", "--quiet", "--python", python, *requirements)
    return python


def installed(python: Path) -> set[str]:
    listing = uv("pip", "list", "--python", python, "--format=json")
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(listing.stdout)}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """Build the wheel from a copy of the sources (no egg-info or build/ left in the checkout)."""
    source = tmp_path_factory.mktemp("source")
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copytree(ROOT / "agentmemory", source / "agentmemory", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # The catalogues are compiled for the wheel as a release would (the .mo files are not in git).
    for catalogue in (source / "agentmemory" / "locale").glob("*/LC_MESSAGES/*.po"):
        run(["msgfmt", "--check", "-o", catalogue.with_suffix(".mo"), catalogue])
    (source / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "integration.md", source / "docs")
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    run([sys.executable, "-m", "build", "--wheel", "--outdir", out, source], env=child_env())
    wheels = list(out.glob("django_agentmemory-*.whl"))
    assert len(wheels) == 1, wheels
    print(f"wheel built in {time.monotonic() - started:.1f} s: {wheels[0].name}, {wheels[0].stat().st_size} bytes")
    return wheels[0]


@pytest.fixture(scope="session")
def second_project_python(wheel, agent_loops_install, tmp_path_factory) -> Path:
    started = time.monotonic()
    python = fresh_venv(tmp_path_factory.mktemp("second-venv") / "venv",
                        str(wheel), "-r", str(SECOND_PROJECT / "requirements.txt"))
    print(f"second project environment installed in {time.monotonic() - started:.1f} s")
    return python


def test_the_wheel_holds_agentmemory_with_its_data_files_and_nothing_else(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    dist_info = f"django_agentmemory-{VERSION}.dist-info/"
    assert all(name.startswith(("agentmemory/", dist_info)) for name in names), [
        name for name in names if not name.startswith(("agentmemory/", dist_info))]
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    source = ROOT / "agentmemory"
    expected = {
        path.relative_to(ROOT).as_posix()
        for pattern in ("**/*.py", "templates/**/*.html", "static/**/*", "policy/*.md")
        for path in source.glob(pattern) if path.is_file()
    }
    assert expected - set(names) == set()
    for required in ("agentmemory/migrations/0001_initial.py", "agentmemory/templates/agentmemory/base.html",
                     "agentmemory/templates/agentmemory/memory_page.html", "agentmemory/static/agentmemory/memory.js",
                     "agentmemory/management/commands/memory_readiness.py",
                     "agentmemory/integrations/claude_memory.py", "agentmemory/testing/contract.py",
                     "agentmemory/store/__init__.py", "agentmemory/store/commit.py",
                     "agentmemory/threats/__init__.py", "agentmemory/threats/scan.py",
                     "agentmemory/telemetry/__init__.py", "agentmemory/api/__init__.py",
                     "agentmemory/locale/de/LC_MESSAGES/django.po", "agentmemory/locale/de/LC_MESSAGES/django.mo",
                     "agentmemory/locale/de/LC_MESSAGES/djangojs.po", "agentmemory/locale/de/LC_MESSAGES/djangojs.mo"):
        assert required in names

    metadata = zipfile.ZipFile(wheel).read(dist_info + "METADATA").decode()
    requires = [line.split(":", 1)[1].strip() for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    assert f"Version: {VERSION}" in metadata
    assert "Django<7,>=5.2" in requires
    assert any(r.startswith("channels") and 'extra == "live"' in r for r in requires)
    assert any(r.startswith("opentelemetry-sdk") and 'extra == "otel"' in r for r in requires)
    for extra, distribution in (("agents", "openai-agents"), ("pydantic-ai", "pydantic-ai-slim"),
                                ("anthropic", "anthropic")):
        assert any(r.startswith(distribution) and f'extra == "{extra}"' in r for r in requires), extra
    base = [r for r in requires if "extra ==" not in r]
    assert not [r for r in base if r.lower().startswith(("channels", "opentelemetry-sdk", "openai", "daphne",
                                                         "pydantic-ai", "anthropic"))]


def project_env(tmp_path: Path, database_url: str | None, *, prefix: str) -> dict:
    """The environment of a project's test run; its test database's name is unique to this run (TEST_DB_NAME)."""
    env = child_env(TEST_DB_NAME=f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}", TEST_DB_DIR=str(tmp_path))
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def check_run(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"the project's tests exited {result.returncode}:\n" + (
        result.stdout[-6000:] + result.stderr[-6000:])
    assert " passed" in result.stdout and "failed" not in result.stdout.splitlines()[-1], result.stdout
    return result.stdout


def run_project(project: Path, python: Path, tmp_path: Path, database_url: str | None, *, prefix: str) -> str:
    """Run `project`'s own tests from its directory: it is on sys.path, this checkout is not."""
    env = project_env(tmp_path, database_url, prefix=prefix)
    return check_run(subprocess.run([str(python), "-m", "pytest", "-q"], cwd=project, env=env, capture_output=True,
                                    text=True, timeout=300))


def postgres_reachable() -> bool:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "pg_reachable.py"), PG_URL],
                          capture_output=True, timeout=60).returncode == 0


def postgres_url() -> str:
    reachable = postgres_reachable()
    if not reachable:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable at {PG_URL}")
        pytest.skip(f"no PostgreSQL at {PG_URL}")
    return PG_URL


def test_the_second_project_runs_on_the_installed_wheel_with_sqlite(second_project_python, tmp_path):
    run_project(SECOND_PROJECT, second_project_python, tmp_path, None, prefix="second")


def test_the_second_project_runs_on_the_installed_wheel_with_postgresql(second_project_python, tmp_path):
    run_project(SECOND_PROJECT, second_project_python, tmp_path, postgres_url(), prefix="second")


@pytest.fixture(scope="session")
def agent_loops_install(wheel, tmp_path_factory) -> concurrent.futures.Future:
    """Start installing the agent loops' environment (the wheel with the adapters' extras) in the background.

    It is the slowest install (three agent frameworks), so it runs while the
    second project installs and runs its tests.
    """
    home = tmp_path_factory.mktemp("loops-venv") / "venv"
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="loops-venv")

    def install() -> tuple[Path, float]:
        started = time.monotonic()
        python = fresh_venv(home, f"{wheel}[{ADAPTER_EXTRAS}]", "-r", str(AGENT_LOOPS / "requirements.txt"))
        return python, time.monotonic() - started

    future = executor.submit(install)
    executor.shutdown(wait=False)
    return future


@pytest.fixture(scope="session")
def agent_loops_python(agent_loops_install) -> Path:
    python, seconds = agent_loops_install.result(timeout=900)
    print(f"agent loops environment (wheel with {ADAPTER_EXTRAS}) installed in {seconds:.1f} s (in the background)")
    return python


@pytest.fixture(scope="session")
def agent_loops_runs(agent_loops_python, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Run the agent loops' tests on SQLite and, when reachable, PostgreSQL at once (two processes, two cores)."""
    databases = {"sqlite": None, **({"postgresql": PG_URL} if postgres_reachable() else {})}
    started = {
        name: subprocess.Popen([str(agent_loops_python), "-m", "pytest", "-q"], cwd=AGENT_LOOPS, text=True,
                               env=project_env(tmp_path_factory.mktemp(f"loops-{name}"), url, prefix="loops"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for name, url in databases.items()
    }
    results = {}
    for name, process in started.items():
        try:
            stdout, stderr = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        results[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    return results


def test_the_adapters_pass_the_contract_with_their_extras_on_sqlite(agent_loops_runs):
    check_run(agent_loops_runs["sqlite"])


def test_the_adapters_pass_the_contract_with_their_extras_on_postgresql(agent_loops_runs):
    postgres_url()
    check_run(agent_loops_runs["postgresql"])


@pytest.fixture(scope="session")
def runtime_python() -> Path:
    """A fresh environment with `-r requirements.txt` only, cached per requirements.txt."""
    digest = hashlib.sha256((ROOT / "requirements.txt").read_bytes()).hexdigest()[:16]
    home = CACHE / f"runtime-{digest}"
    python = home / "bin" / "python"
    if not (home / ".complete").exists():
        shutil.rmtree(home, ignore_errors=True)
        started = time.monotonic()
        fresh_venv(home, "-r", str(ROOT / "requirements.txt"))
        (home / ".complete").write_text(f"installed in {time.monotonic() - started:.1f} s\n")
        for stale in CACHE.glob("runtime-*"):
            if stale != home:
                shutil.rmtree(stale, ignore_errors=True)
    return python


def test_the_runtime_requirements_install_no_test_tool_and_run_the_project(runtime_python):
    names = installed(runtime_python)
    tools = sorted(name for name in names if name.startswith(TEST_TOOLS))
    assert tools == [], f"requirements.txt installs test tools: {tools}"
    assert {"django", "daphne", "servestatic", "openai"} <= names
    # The runtime alone runs the project: settings, apps, URLs and the ASGI application load.
    env = child_env(DJANGO_SETTINGS_MODULE="config.settings", SECRET_KEY="runtime-check", DEBUG="1")
    run([runtime_python, "manage.py", "check", "--fail-level", "WARNING"], cwd=ROOT, env=env)
    run([runtime_python, "-c", "import django; django.setup(); import config.asgi"], cwd=ROOT, env=env)
