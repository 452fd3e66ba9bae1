"""Shared bootstrap for the bench scripts: Django, a scratch database, figures.

A benchmark must never write into a database someone else uses, so
`bench_database` creates a dedicated PostgreSQL database on the server that
DATABASE_URL names, migrates it, points Django at it, and drops it on the way
out (also after a crash: a leftover of the same name is dropped first). It
also owns how every bench reports a latency, `latency_figures`, so all of
`docs/benchmarks.md` speaks in the same median and p99.

Usage, from a script in bench/ run as `python bench/<name>.py`:

    import _setup                          # bench/ is sys.path[0]
    with _setup.bench_database(name="agentmemory_bench_x") as url:
        from agentmemory import store      # Django is set up from here on
        samples.append(...)                # time.perf_counter_ns() deltas
    print(_setup.latency_figures(samples)) # {"n", "median_ms", "p99_ms"}

With BENCH_TEMPLATE_DATABASE set (bench/run_all.py --smoke sets it), each
scratch database is created as a copy of that already migrated database
instead of being migrated (3 s of CPU each, most of a smoke run's);
`python bench/_setup.py template NAME` makes one and `drop NAME` drops it.
"""
from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/test"
TEMPLATE_ENV = "BENCH_TEMPLATE_DATABASE"


class PostgresUnavailable(SystemExit):
    """The bench needs a PostgreSQL server and none answered."""


def setup_django() -> None:
    """Configure and set up Django for a script run outside manage.py."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-secret-key")
    import django

    django.setup()


def server_url(database_url: str | None = None) -> str:
    """Return the PostgreSQL URL to use, or exit saying how to get one."""
    url = database_url or os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if not url.startswith(("postgres://", "postgresql://")):
        raise PostgresUnavailable(
            f"This benchmark needs PostgreSQL, but DATABASE_URL is {urlsplit(url).scheme}://...; "
            f"set DATABASE_URL to a server such as {DEFAULT_DATABASE_URL}."
        )
    return url


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _admin_connection(url: str):
    import psycopg

    try:
        return psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise PostgresUnavailable(
            f"PostgreSQL is not reachable at {_redacted(url)} ({type(exc).__name__}). Start it, or set "
            "DATABASE_URL to a reachable server; the bench creates and drops its own database there."
        ) from exc


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    user = f"{parts.username}@" if parts.username else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}"


def _drop(admin, name: str) -> None:
    from psycopg import sql

    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def bench_database(*, name: str, also: Sequence[str] = (), database_url: str | None = None) -> Iterator[str]:
    """Create database `name` (and each of `also`), migrate, set Django up; drop after.

    Yield the URL of the scratch database `name`, which Django's default
    connection uses; `use_database` switches it to one of `also`. Must be
    entered before anything imports Django settings, because settings read
    DATABASE_URL once.
    """
    url = server_url(database_url)
    admin = _admin_connection(url)
    from psycopg import sql

    names = [name, *also]
    template = os.environ.get(TEMPLATE_ENV)
    for each in names:
        _drop(admin, each)
        if template:  # already migrated (bench/run_all.py --smoke)
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(each),
                                                                         sql.Identifier(template)))
        else:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(each)))
    os.environ["DATABASE_URL"] = _with_database(url, name)
    try:
        setup_django()
        from django.core.management import call_command

        for each in reversed(names):
            use_database(each)
            if not template:
                call_command("migrate", verbosity=0, interactive=False)
        yield os.environ["DATABASE_URL"]
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:  # Django may not have got as far as setup
            pass
        for each in names:
            _drop(admin, each)
        admin.close()


def create_template(name: str, database_url: str | None = None) -> None:
    """Create and migrate database `name`, for BENCH_TEMPLATE_DATABASE; it is left in place (see drop)."""
    url = server_url(database_url)
    admin = _admin_connection(url)
    from psycopg import sql

    try:
        _drop(admin, name)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        os.environ["DATABASE_URL"] = _with_database(url, name)
        setup_django()
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0, interactive=False)
        connections.close_all()  # a template must have no session when it is copied
    finally:
        admin.close()


def drop_database(name: str, database_url: str | None = None) -> None:
    admin = _admin_connection(server_url(database_url))
    try:
        _drop(admin, name)
    finally:
        admin.close()


def use_database(name: str) -> None:
    """Point Django's default connection at scratch database `name`, connected.

    Connecting here keeps the connection's setup out of the next timed call.
    """
    from django.db import connection

    if connection.settings_dict["NAME"] != name:
        connection.close()
        connection.settings_dict["NAME"] = name
    connection.ensure_connection()


def server_version(database_url: str | None = None) -> str:
    """Return the PostgreSQL server's version string, e.g. '15.20'."""
    admin = _admin_connection(server_url(database_url))
    try:
        return admin.execute("SHOW server_version").fetchone()[0]
    finally:
        admin.close()


def latency_figures(samples_ns: Sequence[int]) -> dict[str, float | int]:
    """Return the median and p99 of latencies in nanoseconds, in milliseconds."""
    ordered = sorted(samples_ns)
    if not ordered:
        raise ValueError("no samples were taken")
    # Nearest-rank p99: a value that was actually observed, never interpolated.
    rank = max(1, -(-99 * len(ordered) // 100))
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) / 1e6, 3),
        "p99_ms": round(ordered[rank - 1] / 1e6, 3),
    }


if __name__ == "__main__":
    # python bench/_setup.py template NAME | drop NAME (bench/run_all.py --smoke)
    action, database = sys.argv[1:3]
    {"template": create_template, "drop": drop_database}[action](database)
