"""The documented release commands work, with production settings.

The `release:` line of the Procfile (the README lists the same commands) runs
step by step, as the deployment would run it, with the README's production
settings (DEBUG off, HTTPS behind the proxy, HSTS): on a new SQLite file, and
on a new PostgreSQL database when one is reachable. Any step that exits
non-zero fails the test. Afterwards the server serves what `collectstatic`
wrote: content-hashed names cached for a year, gzip when asked.

Marked `packaging`: scripts/test.sh runs it once, outside the two database
passes of the suite.
"""
from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
# README, "Running it on PostgreSQL and Redis": the settings of every worker.
PRODUCTION = {
    "DEBUG": "0",
    "ALLOWED_HOSTS": "chat.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://chat.example.com",
    "TRUST_PROXY_HEADERS": "1",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "NUM_PROXIES": "1",
    "AGENTMEMORY_ENABLED": "0",
}


def release_steps() -> list[list[str]]:
    lines = [line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("release:")]
    assert len(lines) == 1, "the Procfile has one release: line"
    steps = [shlex.split(step) for step in lines[0].removeprefix("release:").split("&&")]
    assert [step[:3] for step in steps] == [
        ["python", "manage.py", "compilemessages"], ["python", "manage.py", "migrate"], ["python", "manage.py", "memory_readiness"],
        ["python", "manage.py", "collectstatic"], ["python", "manage.py", "check"],
    ]
    return steps


def environment(database_url: str, static_root: Path) -> dict:
    keep = {key: value for key, value in os.environ.items()
            if key in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR") or key.startswith("PIP_")}
    return {**keep, **PRODUCTION, "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": secrets.token_urlsafe(50), "DATABASE_URL": database_url, "STATIC_ROOT": str(static_root)}


def run_release(env: dict) -> None:
    for step in release_steps():
        command = [sys.executable, *step[1:]]
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"`{shlex.join(step)}` failed ({result.returncode}):\n" + (
            result.stdout[-4000:] + result.stderr[-4000:])


SERVE_CHECK = """
import json, django
django.setup()
from django.conf import settings
from django.templatetags.static import static
from django.test import Client
client = Client(HTTP_HOST="chat.example.com", HTTP_X_FORWARDED_PROTO="https")
url = static("css/site.css")
hashed = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
plain = client.get("/static/css/site.css")
page = client.get("/accounts/login/")
print(json.dumps({
    "collected": settings.STATIC_COLLECTED, "url": url, "status": hashed.status_code,
    "encoding": hashed.get("Content-Encoding"), "cache": hashed.get("Cache-Control"),
    "plain_status": plain.status_code, "page_links_hashed": url in page.content.decode(),
}))
"""


def check_static_serving(env: dict) -> None:
    result = subprocess.run([sys.executable, "-c", SERVE_CHECK], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["collected"] is True
    assert served["url"].startswith("/static/css/site.") and served["url"] != "/static/css/site.css"
    assert served["status"] == 200 and served["encoding"] == "gzip"
    assert "immutable" in served["cache"] and "max-age=315360000" in served["cache"]
    assert served["plain_status"] == 200 and served["page_links_hashed"]


def test_the_release_commands_pass_on_sqlite_and_the_collected_files_are_served(tmp_path):
    env = environment(f"sqlite:///{tmp_path / 'release.sqlite3'}", tmp_path / "staticfiles")
    run_release(env)
    assert (tmp_path / "staticfiles" / "staticfiles.json").is_file()
    check_static_serving(env)


def test_the_release_commands_pass_on_a_new_postgresql_database(tmp_path):
    psycopg = pytest.importorskip("psycopg")
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError:
        if os.environ.get("REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required but not reachable at {PG_URL}")
        pytest.skip(f"no PostgreSQL at {PG_URL}")
    name = f"release_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = urlunsplit(urlsplit(PG_URL)._replace(path=f"/{name}"))
            run_release(environment(url, tmp_path / "staticfiles"))
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
