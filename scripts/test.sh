#!/usr/bin/env bash
# Compile the translations when a catalogue changed, then run the whole suite
# on SQLite and on PostgreSQL (when it is reachable), and
# the packaging checks once (tests marked `packaging`: build the wheel, run the
# second project and the agent loops from it in fresh venvs on both databases,
# the lean runtime, the release commands).
#
# The stages run one after another (run at the same time on two cores they
# took longer: the machine's load went to 9), and each suite runs in
# TEST_WORKERS pytest-xdist workers (default 2). Each worker has its own test
# database (pytest-django names them per worker), its own Redis databases
# (TEST_REDIS_URL's host; the SQLite stage's 15 and 14-13, PostgreSQL's 10 and
# 12-11) and its own temporary directory. Each stage prints as it runs and
# keeps its log in .test-logs/<stage>.log, with its slowest tests; a summary
# ends the run: each stage's outcome, time and counts.
#
# The PostgreSQL stage leaves out what does not depend on the database
# (TEST_DATABASE_FREE_ONCE=1, tests/conftest.py): the pure modules' tests that
# touch no database, and the browser tests except those about what the
# database does. They ran on SQLite. Every other test runs on both. The
# workers steal work from each other (--dist worksteal), so a few long tests
# at the end of one worker's share do not leave the other idle.
#
# Arguments replace the plan: they go to both suite runs as they are (e.g.
# `-m browser`), and the packaging stage is skipped. REQUIRE_POSTGRES=1 (set by
# .ci/run) turns an unreachable PostgreSQL into a failure instead of a skipped
# stage. TEST_WORKERS=0 runs each suite in one process.
set -uo pipefail
cd "$(dirname "$0")/.."
# The suite starts hundreds of Python processes (workers, live servers, fresh
# environments). With PYTHONDONTWRITEBYTECODE set none keeps its compiled
# modules, so each compiles them again and pytest rewrites every test module
# in every worker (collecting took 14 s instead of 6.5). The caches go to the
# __pycache__ folders git ignores.
unset PYTHONDONTWRITEBYTECODE
PY=.venv/bin/python
PG_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test}"
export TEST_POSTGRES_URL="$PG_URL"
WORKERS="${TEST_WORKERS:-2}"
REDIS_HOST="$("$PY" - <<'EOF'
import os
from urllib.parse import urlsplit
print(urlsplit(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")).netloc)
EOF
)"
LOGS=.test-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"

packaging=0
if [ $# -eq 0 ]; then
  set -- -m "not packaging"
  packaging=1
fi
parallel=()
if [ "$WORKERS" != "0" ]; then parallel=(-n "$WORKERS" --dist worksteal); fi

# run_stage NAME ENV-ASSIGNMENTS... -- PYTEST-ARGS...: prints as it runs, into $LOGS/NAME.*
run_stage() {
  local name=$1; shift
  local assignments=()
  while [ "$1" != "--" ]; do assignments+=("$1"); shift; done
  shift
  echo "== $name =="
  local started=$SECONDS
  env "${assignments[@]}" "$PY" -m pytest -q --basetemp="$LOGS/tmp-$name" "$@" 2>&1 | tee "$LOGS/$name.log"
  echo "${PIPESTATUS[0]}" > "$LOGS/$name.rc"
  echo $((SECONDS - started)) > "$LOGS/$name.seconds"
}

started_all=$SECONDS
# The translations first (`make test` compiled them already; run alone, this
# script does): a .po newer than its .mo, or a .mo missing, is compiled, so
# the suites read the current catalogues and the packaging stage's wheel
# carries agentmemory's compiled .mo files.
stale_catalogues=$(find . \( -path ./.venv -o -path ./.cache -o -path ./node_modules -o -path ./build -o -path ./dist \) -prune \
  -o -path '*/locale/*/LC_MESSAGES/*.po' -print | while read -r po; do [ "${po%.po}.mo" -nt "$po" ] || echo "$po"; done)
if [ -n "$stale_catalogues" ]; then
  echo "== translations (compilemessages) =="
  env DEBUG=1 "$PY" manage.py compilemessages --ignore=.venv --ignore=.cache --ignore=node_modules --ignore=build --ignore=dist \
    || { echo "== Summary: compilemessages FAILED (is GNU gettext's msgfmt installed?) =="; exit 1; }
fi
# Lint and types first (scripts/lint.sh, seconds): their findings stop the run
# before the suites start.
echo "== lint (ruff, mypy) =="
if ! bash scripts/lint.sh 2>&1 | tee "$LOGS/lint.log"; then
  echo "== Summary: lint FAILED in $((SECONDS - started_all)) s (ruff or mypy findings above; .test-logs/lint.log) =="
  exit 1
fi
echo "lint: passed in $((SECONDS - started_all)) s"
stages=(sqlite)
run_stage sqlite -u DATABASE_URL TEST_REDIS_URL="redis://$REDIS_HOST/15" TEST_MULTIPROCESS_REDIS_DB=14 -- \
  "${parallel[@]}" --durations=15 "$@"

if "$PY" scripts/pg_reachable.py "$PG_URL"; then
  stages+=(postgresql)
  run_stage postgresql DATABASE_URL="$PG_URL" TEST_REDIS_URL="redis://$REDIS_HOST/10" TEST_MULTIPROCESS_REDIS_DB=12 \
    TEST_DATABASE_FREE_ONCE=1 TEST_RUN_ONCE_REPORT="$LOGS/postgresql.once" -- "${parallel[@]}" --durations=15 "$@"
  postgres_state=ran
elif [ "${REQUIRE_POSTGRES:-0}" = "1" ]; then
  echo "PostgreSQL is required but not reachable at $PG_URL" >&2
  postgres_state="REQUIRED BUT UNREACHABLE"
else
  postgres_state="not run (no server reachable at $PG_URL)"
fi

if [ $packaging -eq 1 ]; then
  stages+=(packaging)
  # Only the modules that mark tests `packaging` are collected (collecting the
  # whole suite to deselect it took ten seconds).
  mapfile -t packaging_modules < <(grep -rlE --include='*.py' 'mark\.packaging' tests | sort)
  run_stage packaging -u DATABASE_URL -- -m packaging --durations=15 "${packaging_modules[@]}"
fi

status=0
summary=()
for stage in "${stages[@]}"; do
  rc=$(cat "$LOGS/$stage.rc" 2>/dev/null || echo 1)
  seconds=$(cat "$LOGS/$stage.seconds" 2>/dev/null || echo "?")
  counts=$(grep -E "^[0-9]+ (passed|failed)" "$LOGS/$stage.log" | tail -1)
  [ "$rc" -eq 0 ] || status=1
  summary+=("$stage: $([ "$rc" -eq 0 ] && echo passed || echo FAILED) in ${seconds} s (${counts:-no summary line})")
done
# ran STAGE: the tests the stage ran (passed, failed, skipped, errors, xfailed, xpassed), from its last summary line.
ran() {
  local line total=0 number
  line=$(grep -E "^[0-9]+ (passed|failed|skipped|error)" "$LOGS/$1.log" | tail -1)
  for number in $(grep -oE "[0-9]+ (passed|failed|skipped|errors?|xfailed|xpassed)" <<<"$line" | grep -oE "^[0-9]+"); do
    total=$((total + number))
  done
  echo "$total"
}
if [ "$postgres_state" = "ran" ]; then
  # Both suites collect the same tests; PostgreSQL leaves out only what uses no database (it ran on SQLite).
  ran_sqlite=$(ran sqlite)
  ran_postgres=$(ran postgresql)
  once=$(cat "$LOGS/postgresql.once" 2>/dev/null || echo 0)
  summary+=("postgresql ran $ran_postgres of the $ran_sqlite tests SQLite ran; the other $once ran on SQLite only (tests of pure modules that use no database, browser tests not about it)")
  if [ $((ran_postgres + once)) -ne "$ran_sqlite" ]; then
    summary+=("MISMATCH: $ran_postgres + $once is not $ran_sqlite: a test ran on one database and not the other")
    status=1
  fi
fi
if [ "$postgres_state" != "ran" ]; then
  summary+=("postgresql: $postgres_state")
  [ "${REQUIRE_POSTGRES:-0}" = "1" ] && status=1
fi

echo "== Summary (all stages in $((SECONDS - started_all)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)) =="
printf '  %s\n' "${summary[@]}"
exit $status
