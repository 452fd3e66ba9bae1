#!/usr/bin/env bash
# Run every benchmark in bench/ and write docs/benchmarks.md (make bench).
# The benches need PostgreSQL: DATABASE_URL, default the local test server.
# They create and drop their own databases there; the named one is untouched.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export DATABASE_URL="${BENCH_DATABASE_URL:-${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}}"

case "$DATABASE_URL" in
  postgres://*|postgresql://*) ;;
  *)
    echo "make bench needs PostgreSQL; DATABASE_URL is not a postgres:// URL." >&2
    echo "Set BENCH_DATABASE_URL=postgres://user@host:5432/db and run it again." >&2
    exit 1
    ;;
esac

if ! "$PY" scripts/pg_reachable.py "$DATABASE_URL"
then
  server="${DATABASE_URL##*@}"; server="${server#*://}"; server="${server%%/*}"
  echo "make bench needs PostgreSQL, and none answered at $server." >&2
  echo "Start PostgreSQL (or set BENCH_DATABASE_URL to a reachable server) and run it again;" >&2
  echo "docs/benchmarks.md was not changed." >&2
  exit 1
fi

exec "$PY" bench/run_all.py "$@"
