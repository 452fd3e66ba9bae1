#!/usr/bin/env bash
# Run the whole suite on SQLite, then on PostgreSQL when it is reachable.
# REQUIRE_POSTGRES=1 (set by .ci/run) turns an unreachable PostgreSQL into a
# failure instead of a skipped run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
status=0
ran=()

echo "== Test suite on SQLite =="
env -u DATABASE_URL "$PY" -m pytest -q "$@"
rc=$?
if [ $rc -ne 0 ]; then status=1; fi
ran+=("SQLite: $([ $rc -eq 0 ] && echo passed || echo FAILED)")

if "$PY" scripts/pg_reachable.py "$PG_URL"
then
  echo "== Test suite on PostgreSQL ($PG_URL) =="
  DATABASE_URL="$PG_URL" "$PY" -m pytest -q "$@"
  rc=$?
  if [ $rc -ne 0 ]; then status=1; fi
  ran+=("PostgreSQL: $([ $rc -eq 0 ] && echo passed || echo FAILED)")
else
  if [ "${REQUIRE_POSTGRES:-0}" = "1" ]; then
    echo "PostgreSQL is required but not reachable at $PG_URL" >&2
    status=1
    ran+=("PostgreSQL: REQUIRED BUT UNREACHABLE")
  else
    ran+=("PostgreSQL: not run (no server reachable at $PG_URL)")
  fi
fi

echo "== Summary =="
printf '  %s\n' "${ran[@]}"
exit $status
