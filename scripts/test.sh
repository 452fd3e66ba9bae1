#!/usr/bin/env bash
# Run the whole suite on SQLite, then on PostgreSQL when it is reachable, then
# the packaging checks once (tests marked `packaging`: build the wheel, run the
# second project from it in a fresh venv on both databases, the lean runtime,
# the release commands). Arguments replace that plan: they go to both suite
# runs as they are (e.g. `-m browser`), and the packaging step is skipped.
# REQUIRE_POSTGRES=1 (set by .ci/run) turns an unreachable PostgreSQL into a
# failure instead of a skipped run.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export TEST_POSTGRES_URL="$PG_URL"
status=0
ran=()
packaging=0
if [ $# -eq 0 ]; then
  set -- -m "not packaging"
  packaging=1
fi

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

if [ $packaging -eq 1 ]; then
  echo "== Packaging: wheel, second project and agent loops with the adapters' extras (SQLite and PostgreSQL), lean runtime, release commands =="
  started=$SECONDS
  env -u DATABASE_URL "$PY" -m pytest -q -m packaging
  rc=$?
  if [ $rc -ne 0 ]; then status=1; fi
  ran+=("Packaging: $([ $rc -eq 0 ] && echo passed || echo FAILED) ($((SECONDS - started)) s)")
fi

echo "== Summary =="
printf '  %s\n' "${ran[@]}"
exit $status
