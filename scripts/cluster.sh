#!/usr/bin/env bash
# The production shape on one machine, for drills (docs/scaling.md, "What was
# run"): Patroni managing a PostgreSQL leader and a synchronous standby with
# one etcd node as its store; haproxy routing a TCP port to whichever node
# Patroni's REST API calls the primary; PgBouncer (transaction pooling) in
# front of that port; a Redis master, its replica and three Sentinels; three
# daphne workers behind haproxy (HTTP and WebSockets, checked on /readyz, no
# sticky sessions).
#
#   scripts/cluster.sh            start (a fresh cluster each time), then --status
#   scripts/cluster.sh --status   who leads (Patroni), which Redis is master, what runs
#   scripts/cluster.sh --stop     stop every process it started, by its own pid
#
# Everything lives under .cache/cluster/ (git-ignored): configuration rendered
# from deploy/, data, logs, pids and generated passwords (secrets.env, mode
# 600, never printed). Missing packages are installed with apt-get; a system
# service a package starts is stopped and disabled at once. Patroni, etcd,
# PostgreSQL and PgBouncer run as the postgres user, never root.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CLUSTER_DIR="$ROOT/.cache/cluster"
PY=${PY:-$ROOT/.venv/bin/python}
PIDS="$CLUSTER_DIR/pids"
LOGS="$CLUSTER_DIR/logs"

export ETCD_CLIENT_PORT=2389 ETCD_PEER_PORT=2390
export NODE1_PG_PORT=5441 NODE2_PG_PORT=5442 NODE1_REST_PORT=8011 NODE2_REST_PORT=8012
export HAPROXY_PG_PORT=5440 HAPROXY_HTTP_PORT=8100 PGBOUNCER_PORT=6441
export REDIS_MASTER_PORT=6391 REDIS_REPLICA_PORT=6392
SENTINEL_PORTS=(26391 26392 26393)
export DAPHNE1_PORT=8101 DAPHNE2_PORT=8102 DAPHNE3_PORT=8103
DAPHNE_PORTS=("$DAPHNE1_PORT" "$DAPHNE2_PORT" "$DAPHNE3_PORT")
# Stop order: the workers first, etcd last.
STOP_ORDER=(daphne-8103 daphne-8102 daphne-8101 haproxy pgbouncer sentinel-26393 sentinel-26392
  sentinel-26391 redis-6392 redis-6391 patroni-node2 patroni-node1 etcd)

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
STARTING=0
die() {
  printf '[cluster] %s\n' "$*" >&2
  # A failed start leaves nothing running (KEEP_ON_FAILURE=1 keeps it to look at).
  if [ "$STARTING" = 1 ] && [ "${KEEP_ON_FAILURE:-0}" != 1 ]; then STARTING=0; stop; fi
  exit 1
}

# --- packages -------------------------------------------------------------------
stop_system_service() {
  # A Debian package may start its own service (not here: policy-rc.d usually
  # forbids it, but a machine without one would): stop and disable it.
  local service=$1
  if [ -d /run/systemd/system ]; then
    systemctl disable --now "$service" >/dev/null 2>&1 || true
  elif [ -x "/etc/init.d/$service" ]; then
    invoke-rc.d "$service" stop >/dev/null 2>&1 || true
    update-rc.d "$service" disable >/dev/null 2>&1 || true
  fi
}

has_package_lists() {
  [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ]
}

install_packages() {
  local missing=() services=()
  command -v haproxy >/dev/null || { missing+=(haproxy); services+=(haproxy); }
  command -v pgbouncer >/dev/null || { missing+=(pgbouncer); services+=(pgbouncer); }
  command -v patroni >/dev/null || { missing+=(patroni); services+=(patroni); }
  command -v redis-sentinel >/dev/null || { missing+=(redis-sentinel); services+=(redis-sentinel); }
  command -v redis-server >/dev/null || { missing+=(redis-server); services+=(redis-server); }
  if ! command -v etcd >/dev/null; then
    # Debian 12 ships the server as etcd-server; older releases as etcd. A fresh machine has no package
    # lists yet, so apt-cache knows neither: read them first, or etcd-server looks missing.
    [ "$(id -u)" -ne 0 ] || has_package_lists || apt-get update -q >/dev/null
    # grep without -q reads its whole input: under pipefail, -q's early exit can kill the writer with
    # SIGPIPE and fail the pipeline on a match (CI once picked the missing 'etcd' package that way).
    if apt-cache policy etcd-server 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then
      missing+=(etcd-server); else missing+=(etcd); fi
    services+=(etcd)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}: install them (apt-get) or run as root"
  log "installing ${missing[*]}"
  has_package_lists || apt-get update -q
  # Another engineer's apt-get may hold the lock: wait for it (bounded).
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=120 "${missing[@]}" >"$LOGS/apt.log" 2>&1 \
    || { tail -20 "$LOGS/apt.log" >&2; die "apt-get install failed"; }
  for service in "${services[@]}"; do stop_system_service "$service"; done
}

pg_bin() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$bin/postgres" ] || die "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
  echo "$bin"
}

# --- helpers --------------------------------------------------------------------
render() {  # render TEMPLATE DEST: ${NAME} from the environment; an unknown name fails
  "$PY" - "$1" "$2" <<'PY'
import os, string, sys
text = string.Template(open(sys.argv[1]).read()).substitute(os.environ)
with open(sys.argv[2], "w") as out:
    out.write(text)
PY
}

as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups -- env HOME="$CLUSTER_DIR" "$@"; }

start_process() {  # start_process NAME USER MATCH COMMAND...: in the background, its pid kept
  local name=$1 user=$2 match=$3; shift 3
  if [ "$user" = postgres ]; then
    # setsid without --fork and setpriv both exec: $! is the process itself.
    setsid setpriv --reuid=postgres --regid=postgres --init-groups -- env HOME="$CLUSTER_DIR" "$@" \
      >>"$LOGS/$name.log" 2>&1 </dev/null &
  else
    setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  fi
  printf '%s\n%s\n' "$!" "$match" >"$PIDS/$name.pid"
}

alive() {  # alive NAME: its recorded pid runs and is still the process we started
  local file="$PIDS/$1.pid" pid match
  [ -f "$file" ] || return 1
  pid=$(sed -n 1p "$file"); match=$(sed -n 2p "$file")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "$match" >/dev/null
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { log "timed out after ${seconds}s waiting for $what"; return 1; }
    sleep 0.5
  done
}

leader_through_haproxy() {  # four connections in a row through haproxy's leader port reach a server not in recovery
  local _
  for _ in 1 2 3 4; do
    PGPASSWORD="$PG_SUPERUSER_PASSWORD" psql -h 127.0.0.1 -p "$HAPROXY_PG_PORT" -U postgres -d postgres -tA \
      -c 'select 1 / (case when pg_is_in_recovery() then 0 else 1 end)' >/dev/null 2>&1 || return 1
  done
}

http_ok() {  # http_ok URL: 200
  "$PY" -c 'import sys, urllib.request; sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)' "$1"
}

sync_standby_streaming() {  # the cluster has a leader and a streaming synchronous standby
  "$PY" - "$1" <<'PY'
import json, sys, urllib.request
members = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/cluster", timeout=2))["members"]
roles = {m["role"]: m for m in members}
ok = "leader" in roles and roles.get("sync_standby", {}).get("state") in ("streaming", "running")
sys.exit(0 if ok else 1)
PY
}

redis_replica_online() { redis-cli -p "$REDIS_MASTER_PORT" info replication | grep 'connected_slaves:1' >/dev/null; }

secret() { "$PY" -c 'import secrets; print(secrets.token_urlsafe(24))'; }

# --- start ----------------------------------------------------------------------
any_alive() {
  local name
  for name in "${STOP_ORDER[@]}"; do alive "$name" && return 0; done
  return 1
}

start() {
  if any_alive; then
    log "already running (make cluster ARGS=--stop first for a fresh one)"
    status
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "run as root: PostgreSQL, Patroni, etcd and PgBouncer are started as the postgres user"
  id postgres >/dev/null 2>&1 || die "no postgres user (the PostgreSQL packages create it)"
  [ -x "$PY" ] || die "no $PY: run make install first"
  STARTING=1
  rm -rf "$CLUSTER_DIR"
  mkdir -p "$PIDS" "$LOGS" "$CLUSTER_DIR"/{etcd,node1,node2,pgbouncer,haproxy,redis-6391,redis-6392}
  for port in "${SENTINEL_PORTS[@]}"; do mkdir -p "$CLUSTER_DIR/sentinel-$port"; done
  # postgres must reach its own directories and log files, and nothing else of ours.
  chmod 711 "$CLUSTER_DIR" "$LOGS"
  chmod 700 "$CLUSTER_DIR"/{etcd,node1,node2,pgbouncer}
  umask 077
  install_packages
  export PG_BIN
  PG_BIN=$(pg_bin)
  command -v etcd >/dev/null || die "etcd is not installed"
  log "fresh cluster under $CLUSTER_DIR (PostgreSQL binaries $PG_BIN)"

  export PG_SUPERUSER_PASSWORD PG_REPLICATION_PASSWORD APP_DB_PASSWORD
  PG_SUPERUSER_PASSWORD=$(secret); PG_REPLICATION_PASSWORD=$(secret); APP_DB_PASSWORD=$(secret)
  {
    echo "PG_SUPERUSER_PASSWORD=$PG_SUPERUSER_PASSWORD"
    echo "PG_REPLICATION_PASSWORD=$PG_REPLICATION_PASSWORD"
    echo "APP_DB_PASSWORD=$APP_DB_PASSWORD"
  } >"$CLUSTER_DIR/secrets.env"

  # The drills' load is one turn at a time per person, at a rate the default
  # CHAT_TURN_RATE refuses; the concurrent-turn cap is raised too because a
  # worker killed mid-turn keeps the person's slot until its lease runs out
  # (60 s, renewed while a turn runs: chat/budget.py), and the worker-kill
  # drill kills every 1.5 s.
  # The workers' environment: production settings (DEBUG off, a secret key,
  # allowed hosts), the database through PgBouncer, Redis's master found
  # through the three Sentinels (REDIS_URL gives only the database number).
  local secret_key
  secret_key=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')
  cat >"$CLUSTER_DIR/app.env" <<EOF
DJANGO_SETTINGS_MODULE=config.settings
DEBUG=0
SECRET_KEY=$secret_key
ALLOWED_HOSTS=127.0.0.1,localhost
CSRF_TRUSTED_ORIGINS=http://127.0.0.1:$HAPROXY_HTTP_PORT,http://localhost:$HAPROXY_HTTP_PORT
SECURE_COOKIES=0
NUM_PROXIES=1
AGENTMEMORY_ENABLED=1
DATABASE_URL=postgres://agentmemory:$APP_DB_PASSWORD@127.0.0.1:$PGBOUNCER_PORT/agentmemory
DATABASE_PREPARE_THRESHOLD=off
REDIS_URL=redis://127.0.0.1/0
REDIS_SENTINELS=$(printf '127.0.0.1:%s,' "${SENTINEL_PORTS[@]}" | sed 's/,$//')
REDIS_SENTINEL_MASTER=agentmemory
CHAT_TURN_RATE=1000/min
CHAT_MAX_CONCURRENT_TURNS=1000
EOF

  render deploy/etcd.conf.yml "$CLUSTER_DIR/etcd/etcd.conf.yml"
  local node
  for node in 1 2; do
    NODE_NAME=node$node NODE_DIR="$CLUSTER_DIR/node$node" \
      PG_PORT=$([ $node = 1 ] && echo $NODE1_PG_PORT || echo $NODE2_PG_PORT) \
      REST_PORT=$([ $node = 1 ] && echo $NODE1_REST_PORT || echo $NODE2_REST_PORT) \
      render deploy/patroni.yml "$CLUSTER_DIR/node$node/patroni.yml"
  done
  PG_LEADER_PORT=$HAPROXY_PG_PORT render deploy/pgbouncer.ini "$CLUSTER_DIR/pgbouncer/pgbouncer.ini"
  printf '"agentmemory" "%s"\n' "$APP_DB_PASSWORD" >"$CLUSTER_DIR/pgbouncer/userlist.txt"
  render deploy/haproxy.cfg "$CLUSTER_DIR/haproxy/haproxy.cfg"
  for port in "$REDIS_MASTER_PORT" "$REDIS_REPLICA_PORT"; do
    REDIS_PORT=$port render deploy/redis.conf "$CLUSTER_DIR/redis-$port/redis.conf"
  done
  for port in "${SENTINEL_PORTS[@]}"; do
    SENTINEL_PORT=$port render deploy/sentinel.conf "$CLUSTER_DIR/sentinel-$port/sentinel.conf"
  done
  for name in etcd patroni-node1 patroni-node2 pgbouncer; do touch "$LOGS/$name.log"; done
  chown -R postgres:postgres "$CLUSTER_DIR"/{etcd,node1,node2,pgbouncer} \
    "$LOGS"/{etcd,patroni-node1,patroni-node2,pgbouncer}.log

  log "etcd on $ETCD_CLIENT_PORT"
  start_process etcd postgres "$CLUSTER_DIR/etcd/etcd.conf.yml" etcd --config-file "$CLUSTER_DIR/etcd/etcd.conf.yml"
  wait_for 30 etcd http_ok "http://127.0.0.1:$ETCD_CLIENT_PORT/health" || die "etcd did not start (logs/etcd.log)"

  log "Patroni node1 (PostgreSQL $NODE1_PG_PORT, REST $NODE1_REST_PORT): initialises the cluster"
  start_process patroni-node1 postgres "$CLUSTER_DIR/node1/patroni.yml" patroni "$CLUSTER_DIR/node1/patroni.yml"
  wait_for 90 "node1 to lead" http_ok "http://127.0.0.1:$NODE1_REST_PORT/primary" \
    || die "node1 did not become the leader (logs/patroni-node1.log)"
  log "Patroni node2 (PostgreSQL $NODE2_PG_PORT, REST $NODE2_REST_PORT): a copy of the leader, then its synchronous standby"
  start_process patroni-node2 postgres "$CLUSTER_DIR/node2/patroni.yml" patroni "$CLUSTER_DIR/node2/patroni.yml"
  wait_for 120 "a streaming synchronous standby" sync_standby_streaming "$NODE1_REST_PORT" \
    || die "node2 did not become the synchronous standby (logs/patroni-node2.log)"

  log "haproxy: PostgreSQL leader on $HAPROXY_PG_PORT, HTTP on $HAPROXY_HTTP_PORT"
  start_process haproxy root "$CLUSTER_DIR/haproxy/haproxy.cfg" haproxy -db -f "$CLUSTER_DIR/haproxy/haproxy.cfg"
  # haproxy 2.6 starts every server UP until its checks say otherwise (fall 2: about 1.5 s), so a
  # connection may first reach the standby: wait until four in a row (round robin) reach the leader.
  wait_for 30 "the leader through haproxy" leader_through_haproxy \
    || die "haproxy does not reach the leader (logs/haproxy.log)"
  # The application's role and database (the password goes through stdin, never argv, and a failed
  # statement is not written to the server's log with it).
  PGPASSWORD="$PG_SUPERUSER_PASSWORD" psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$HAPROXY_PG_PORT" -U postgres -d postgres <<EOF
SET log_min_error_statement = panic;
CREATE ROLE agentmemory LOGIN PASSWORD '$APP_DB_PASSWORD';
CREATE DATABASE agentmemory OWNER agentmemory;
EOF

  log "PgBouncer on $PGBOUNCER_PORT (transaction pooling) -> haproxy $HAPROXY_PG_PORT"
  start_process pgbouncer postgres "$CLUSTER_DIR/pgbouncer/pgbouncer.ini" pgbouncer "$CLUSTER_DIR/pgbouncer/pgbouncer.ini"
  wait_for 20 PgBouncer env PGPASSWORD="$APP_DB_PASSWORD" \
    psql -h 127.0.0.1 -p "$PGBOUNCER_PORT" -U agentmemory -d agentmemory -tAc 'select 1' \
    || die "PgBouncer does not answer (logs/pgbouncer.log)"

  log "Redis master $REDIS_MASTER_PORT, replica $REDIS_REPLICA_PORT, sentinels ${SENTINEL_PORTS[*]}"
    # Redis rewrites its command line to its address: that is what identifies it.
  start_process redis-6391 root "127.0.0.1:6391" redis-server "$CLUSTER_DIR/redis-6391/redis.conf"
  wait_for 20 "Redis master" redis-cli -p "$REDIS_MASTER_PORT" ping || die "Redis did not start"
  start_process redis-6392 root "127.0.0.1:6392" redis-server "$CLUSTER_DIR/redis-6392/redis.conf" \
    --replicaof 127.0.0.1 "$REDIS_MASTER_PORT"
  for port in "${SENTINEL_PORTS[@]}"; do
    start_process "sentinel-$port" root "127.0.0.1:$port" \
      redis-sentinel "$CLUSTER_DIR/sentinel-$port/sentinel.conf"
  done
  wait_for 30 "the Redis replica" redis_replica_online || die "the Redis replica did not connect"

  log "migrations, once (through haproxy's leader port)"
  (
    set -a; . "$CLUSTER_DIR/app.env"; set +a
    export DATABASE_URL="postgres://agentmemory:$APP_DB_PASSWORD@127.0.0.1:$HAPROXY_PG_PORT/agentmemory"
    env -u OPENAI_API_KEY "$PY" manage.py migrate --noinput >"$LOGS/migrate.log" 2>&1
  ) || die "migrate failed (logs/migrate.log)"

  log "daphne workers on ${DAPHNE_PORTS[*]}"
  for port in "${DAPHNE_PORTS[@]}"; do
    (
      set -a; . "$CLUSTER_DIR/app.env"; set +a
      # The offline demo model: no key reaches the workers.
      unset OPENAI_API_KEY
      start_process "daphne-$port" root "-p $port config.asgi:application" \
        "$PY" -m daphne -b 127.0.0.1 -p "$port" config.asgi:application
    )
  done
  for port in "${DAPHNE_PORTS[@]}"; do
    wait_for 60 "daphne $port /readyz" http_ok "http://127.0.0.1:$port/readyz" \
      || die "daphne $port is not ready (logs/daphne-$port.log)"
  done
  wait_for 30 "haproxy /readyz" http_ok "http://127.0.0.1:$HAPROXY_HTTP_PORT/readyz" \
    || die "haproxy does not reach the workers"
  STARTING=0
  log "up: http://127.0.0.1:$HAPROXY_HTTP_PORT/ (make cluster ARGS=--stop to stop)"
  status
}

# --- status ---------------------------------------------------------------------
status() {
  if ! any_alive; then echo "cluster: not running"; return 0; fi
  "$PY" - <<'PY' || true
import json, urllib.request
for port in (8011, 8012):
    try:
        members = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/cluster", timeout=2))["members"]
    except Exception:
        continue
    for m in members:
        lag = m.get("lag", "")
        print(f"patroni: {m['name']:6} {m['role']:13} {m.get('state', ''):10} port {m.get('port')} "
              f"timeline {m.get('timeline', '?')}" + (f" lag {lag}" if lag not in ("", None) else ""))
    leader = [m for m in members if m["role"] == "leader"]
    print("leader: " + (f"{leader[0]['name']} (127.0.0.1:{leader[0]['port']})" if leader else "none"))
    break
else:
    print("patroni: no REST API answers (8011, 8012)")
PY
  local master
  master=$(redis-cli -p "${SENTINEL_PORTS[0]}" sentinel get-master-addr-by-name agentmemory 2>/dev/null | paste -sd: -) || true
  echo "redis master (per sentinel ${SENTINEL_PORTS[0]}): ${master:-unknown}"
  for port in "$REDIS_MASTER_PORT" "$REDIS_REPLICA_PORT"; do
    echo "redis $port: $(redis-cli -p "$port" role 2>/dev/null | head -1 || echo down)"
  done
  if [ -S "$CLUSTER_DIR/haproxy/admin.sock" ]; then
    "$PY" - "$CLUSTER_DIR/haproxy/admin.sock" <<'PY' || true
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
s.sendall(b"show stat\n"); data = b""
while chunk := s.recv(65536):
    data += chunk
for line in data.decode().splitlines()[1:]:
    f = line.split(",")
    if len(f) > 17 and f[1] not in ("FRONTEND", "BACKEND"):
        print(f"haproxy: {f[0]}/{f[1]} {f[17]}")
PY
  fi
  local name running=() stopped=()
  for name in "${STOP_ORDER[@]}"; do
    if alive "$name"; then running+=("$name"); else stopped+=("$name"); fi
  done
  echo "processes running: ${running[*]:-none}"
  [ ${#stopped[@]} -eq 0 ] || echo "processes not running: ${stopped[*]}"
}

# --- stop -----------------------------------------------------------------------
stop_one() {  # stop_one NAME: TERM, then KILL after 20 s
  local name=$1 pid
  alive "$name" || return 0
  pid=$(sed -n 1p "$PIDS/$name.pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 40); do alive "$name" || return 0; sleep 0.5; done
  log "$name ($pid) ignored TERM: KILL"
  kill -KILL "$pid" 2>/dev/null || true
}

stop_postgres() {  # a postmaster left behind by a killed Patroni: by its own postmaster.pid
  local node=$1 data="$CLUSTER_DIR/$1/data" pid
  [ -f "$data/postmaster.pid" ] || return 0
  pid=$(head -1 "$data/postmaster.pid")
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -F -- "$data" >/dev/null || return 0
  log "PostgreSQL of $node ($pid) outlived Patroni: fast shutdown"
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local name
  for name in "${STOP_ORDER[@]}"; do
    if alive "$name"; then log "stopping $name"; stop_one "$name"; fi
  done
  for node in node1 node2; do stop_postgres "$node"; done
  rm -f "$PIDS"/*.pid 2>/dev/null || true
  log "stopped"
}

case "${1:-}" in
  "") start ;;
  --status) status ;;
  --stop) stop ;;
  *) die "usage: scripts/cluster.sh [--status|--stop]" ;;
esac
