#!/usr/bin/env bash
# The production shape on one machine, for drills (docs/scaling.md, "What was
# run"): Patroni managing a PostgreSQL leader and a synchronous standby with
# one etcd node as its store; haproxy routing a TCP port to whichever node
# Patroni's REST API calls the primary; PgBouncer (transaction pooling) in
# front of that port; a Redis master, its replica and three Sentinels; three
# daphne workers behind haproxy (HTTP and WebSockets, checked on /readyz, no
# sticky sessions).
#
#   scripts/cluster.sh              start (a fresh cluster each time), check every control plane
#                                   refuses a request without its credential, then --status
#   scripts/cluster.sh --status     who leads (Patroni), which Redis is master, what runs
#   scripts/cluster.sh --check-auth the control planes' credential checks again (bench/drills.py --check-auth)
#   scripts/cluster.sh --stop       stop every process it started, by its own pid
#
# Its state lives outside the checkout, in AGENTMEMORY_CLUSTER_DIR
# (default /var/lib/agentmemory-cluster), so the checkout may sit anywhere (a
# mode-700 home included): configuration rendered from deploy/, data, logs,
# pids, a copy of the application the workers run, and the generated
# credentials (secrets/, root only; each service's own in its mode-600
# configuration, owned by the user it runs as). Every service runs as an
# unprivileged user: etcd as etcd, Patroni, PostgreSQL and PgBouncer as
# postgres, Redis and the Sentinels as redis, haproxy as haproxy, daphne as
# agentmemory (created if missing). No password is ever on a command line:
# psql reads secrets/pgpass (PGPASSFILE), redis-cli REDISCLI_AUTH, the
# services their configuration files. Missing packages are installed with
# apt-get; a system service a package starts is stopped and disabled at once.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export CLUSTER_DIR="${AGENTMEMORY_CLUSTER_DIR:-/var/lib/agentmemory-cluster}"
PY=${PY:-$ROOT/.venv/bin/python}
PIDS="$CLUSTER_DIR/pids"
LOGS="$CLUSTER_DIR/logs"
SECRETS="$CLUSTER_DIR/secrets"
APP="$CLUSTER_DIR/app"
MARKER="$CLUSTER_DIR/.agentmemory-cluster"
export PGPASSFILE="$SECRETS/pgpass"

# Who runs what (the users must exist; agentmemory is created).
DB_USER=postgres REDIS_USER=redis HAPROXY_USER=haproxy APP_USER=agentmemory
ETCD_USER=etcd

export ETCD_CLIENT_PORT=2389 ETCD_PEER_PORT=2390
export NODE1_PG_PORT=5441 NODE2_PG_PORT=5442 NODE1_REST_PORT=8011 NODE2_REST_PORT=8012
export HAPROXY_PG_PORT=5440 HAPROXY_HTTP_PORT=8100 PGBOUNCER_PORT=6441
export REDIS_MASTER_PORT=6391 REDIS_REPLICA_PORT=6392
SENTINEL_PORTS=(26391 26392 26393)
export DAPHNE1_PORT=8101 DAPHNE2_PORT=8102 DAPHNE3_PORT=8103
DAPHNE_PORTS=("$DAPHNE1_PORT" "$DAPHNE2_PORT" "$DAPHNE3_PORT")
# Patroni's timing (deploy/patroni.yml; docs/scaling.md, "Choosing the ttl").
export PATRONI_TTL=${PATRONI_TTL:-10} PATRONI_LOOP_WAIT=${PATRONI_LOOP_WAIT:-2}
export PATRONI_RETRY_TIMEOUT=${PATRONI_RETRY_TIMEOUT:-4}
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
  local apt_log="${TMPDIR:-/tmp}/agentmemory-cluster-apt.log"
  has_package_lists || apt-get update -q
  # Another engineer's apt-get may hold the lock: wait for it (bounded).
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=120 "${missing[@]}" >"$apt_log" 2>&1 \
    || { tail -20 "$apt_log" >&2; die "apt-get install failed"; }
  for service in "${services[@]}"; do stop_system_service "$service"; done
}

pg_bin() {
  local bin
  bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$bin/postgres" ] || die "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
  echo "$bin"
}

# --- helpers --------------------------------------------------------------------
render() {  # render TEMPLATE DEST OWNER: ${NAME} from the environment and secrets.env; mode 600, OWNER's
  local template=$1 dest=$2 owner=$3
  "$PY" - "$template" "$dest" "$SECRETS/secrets.env" <<'PY'
import os, string, sys
values = dict(os.environ)
for line in open(sys.argv[3]):
    key, _, value = line.rstrip("\n").partition("=")
    values[key] = value
text = string.Template(open(sys.argv[1]).read()).substitute(values)
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as out:
    out.write(text)
PY
  chown "$owner:$owner" "$dest"
}

# Every service starts in / or the state directory, never the checkout: its user may not be able
# to enter it (a mode-700 home), and PostgreSQL's tools then fail on their working directory.
as_user() {  # as_user USER COMMAND...: a clean environment, HOME in the cluster's directory
  local user=$1; shift
  (cd / && exec setpriv --reuid="$user" --regid="$user" --init-groups -- \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME="$CLUSTER_DIR" "$@")
}

start_process() {  # start_process NAME USER MATCH COMMAND...: in the background, its pid kept
  local name=$1 user=$2 match=$3; shift 3
  # The subshell, setsid without --fork, setpriv and env all exec: $! is the process itself.
  if [ "$user" = root ]; then
    (cd "$CLUSTER_DIR" && exec setsid "$@") >>"$LOGS/$name.log" 2>&1 </dev/null &
  else
    (cd "$CLUSTER_DIR" && exec setsid setpriv --reuid="$user" --regid="$user" --init-groups -- \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 HOME="$CLUSTER_DIR" "$@") \
      >>"$LOGS/$name.log" 2>&1 </dev/null &
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

secret_value() { sed -n "s/^$1=//p" "$SECRETS/secrets.env"; }

# redis-cli takes the password from REDISCLI_AUTH (the environment), never -a.
rcli() { local port=$1; shift; REDISCLI_AUTH=$(secret_value REDIS_PASSWORD) redis-cli -p "$port" "$@"; }
scli() { local port=$1; shift; REDISCLI_AUTH=$(secret_value SENTINEL_PASSWORD) redis-cli -p "$port" "$@"; }

leader_through_haproxy() {  # four connections in a row through haproxy's leader port reach a server not in recovery
  local _
  for _ in 1 2 3 4; do
    psql -h 127.0.0.1 -p "$HAPROXY_PG_PORT" -U postgres -d postgres -tA -w \
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

redis_replica_online() { rcli "$REDIS_MASTER_PORT" info replication | grep 'connected_slaves:1' >/dev/null; }

secret() { "$PY" -c 'import secrets; print(secrets.token_urlsafe(24))'; }

# --- before anything starts -----------------------------------------------------
ensure_users() {
  id "$DB_USER" >/dev/null 2>&1 || die "no $DB_USER user (the PostgreSQL packages create it)"
  id "$REDIS_USER" >/dev/null 2>&1 || die "no $REDIS_USER user (the redis-server package creates it)"
  id "$HAPROXY_USER" >/dev/null 2>&1 || die "no $HAPROXY_USER user (the haproxy package creates it)"
  id "$ETCD_USER" >/dev/null 2>&1 || ETCD_USER=$DB_USER  # older etcd packages create none
  if ! id "$APP_USER" >/dev/null 2>&1; then
    log "creating the system user $APP_USER (the workers run as it)"
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$APP_USER" \
      || die "could not create the user $APP_USER"
  fi
}

check_state_dir() {  # the state directory is reachable by every service user, and ours to wipe
  case "$CLUSTER_DIR" in /*) ;; *) die "AGENTMEMORY_CLUSTER_DIR must be an absolute path ($CLUSTER_DIR is not)";; esac
  local parent user
  parent=$(dirname "$CLUSTER_DIR")
  [ -d "$parent" ] || die "$parent does not exist: create it, or set AGENTMEMORY_CLUSTER_DIR elsewhere"
  for user in "$DB_USER" "$ETCD_USER" "$REDIS_USER" "$HAPROXY_USER" "$APP_USER"; do
    as_user "$user" test -x "$parent" || die "the cluster's state directory $CLUSTER_DIR must be reachable by" \
      "the user $user, and $parent (or a directory above it) is not: set AGENTMEMORY_CLUSTER_DIR to a" \
      "directory whose parents are all searchable by others (mode 755), e.g. /var/lib/agentmemory-cluster"
  done
  if [ -e "$CLUSTER_DIR" ] && [ ! -e "$MARKER" ] && [ -n "$(ls -A "$CLUSTER_DIR" 2>/dev/null)" ]; then
    die "$CLUSTER_DIR exists, is not empty and is not a cluster's state directory: not touching it" \
      "(set AGENTMEMORY_CLUSTER_DIR to another directory)"
  fi
}

app_python() {  # the interpreter the workers run: the venv's own, or a copy of it they can reach
  local base prefix version
  base=$("$PY" -c 'import sys; print(sys._base_executable)')
  if as_user "$APP_USER" "$base" -S -c pass 2>/dev/null; then echo "$base"; return 0; fi
  # The venv's interpreter sits where the workers' user cannot reach it (a pyenv build under a mode-700
  # home): its installation without site-packages, linked (or copied) next to the application.
  prefix=$("$PY" -c 'import sys; print(sys.base_prefix)')
  version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [ -x "$prefix/bin/python$version" ] && [ -f "$prefix/lib/python$version/os.py" ] \
    || die "the workers run as $APP_USER, which cannot run $base, and $prefix is not a usual installation to copy"
  rm -rf "$CLUSTER_DIR/python"
  mkdir -p -m 755 "$CLUSTER_DIR/python/bin" "$CLUSTER_DIR/python/lib/python$version"
  link_or_copy "$prefix/bin/python$version" "$CLUSTER_DIR/python/bin/"
  local entry
  for entry in "$prefix"/lib/libpython"$version"*.so*; do
    [ -e "$entry" ] && link_or_copy "$entry" "$CLUSTER_DIR/python/lib/"
  done
  for entry in "$prefix/lib/python$version"/*; do
    case "$(basename "$entry")" in site-packages|test|idlelib|tkinter|turtledemo) continue;; esac
    link_or_copy "$entry" "$CLUSTER_DIR/python/lib/python$version/"
  done
  as_user "$APP_USER" env LD_LIBRARY_PATH="$CLUSTER_DIR/python/lib" "$CLUSTER_DIR/python/bin/python$version" -S -c pass \
    || die "the copy of $prefix in $CLUSTER_DIR/python does not run as $APP_USER"
  echo "$CLUSTER_DIR/python/bin/python$version"
}

link_or_copy() { cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }

copy_app() {  # the application the workers run, where they can read it: hard links if possible
  local entry site
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf "$APP"
  mkdir -m 755 "$APP"
  for entry in "$ROOT"/* "$ROOT"/.[!.]*; do
    [ -e "$entry" ] || continue
    case "$(basename "$entry")" in
      .git|.cache|.venv|.env|.hypothesis|.ruff_cache|.pytest_cache|node_modules|*.sqlite3) continue;;
    esac
    cp -al "$entry" "$APP/" 2>/dev/null || cp -a "$entry" "$APP/"
  done
  cp -al "$site" "$APP/site-packages" 2>/dev/null || { rm -rf "$APP/site-packages"; cp -a "$site" "$APP/site-packages"; }
  # A checkout made under umask 077 has files only root can read: copy those (not link them) and open the copies.
  local unreadable
  unreadable=$(find "$APP" \( -type f ! -perm -o=r \) -o \( -type d ! -perm -o=rx \) -print -quit)
  if [ -n "$unreadable" ]; then
    log "files the workers could not read (e.g. ${unreadable#$APP/}): copying instead of linking"
    rm -rf "$APP"; mkdir -m 755 "$APP"
    for entry in "$ROOT"/* "$ROOT"/.[!.]*; do
      [ -e "$entry" ] || continue
      case "$(basename "$entry")" in
        .git|.cache|.venv|.env|.hypothesis|.ruff_cache|.pytest_cache|node_modules|*.sqlite3) continue;;
      esac
      cp -r "$entry" "$APP/"
    done
    cp -r "$site" "$APP/site-packages"
    chmod -R u=rwX,go=rX "$APP"
  fi
  # The workers cannot write bytecode there: compile the application's own modules once, into the
  # copy's directories (the links share only files), or every worker start compiles them all again.
  # (Each .pyc takes its source's mode; umask 022 opens the new __pycache__ directories.)
  "$PY" -m compileall -q -x '/site-packages/' "$APP" >/dev/null || true
}

write_app_runner() {  # $CLUSTER_DIR/run-app: daphne or migrate, as $APP_USER, with the workers' environment
  local python=$1
  cat >"$CLUSTER_DIR/run-app" <<RUN
#!/bin/bash
# Written by scripts/cluster.sh. Runs the application as $APP_USER from its
# copy in $APP with $python and the venv's packages; the workers'
# environment (passwords included) is read from daphne/app.env, which only
# $APP_USER can read, after the switch: nothing secret on a command line.
#   run-app daphne PORT | run-app migrate
set -eu
if [ "\$(id -u)" = 0 ]; then
  cd "$APP"
  exec setpriv --reuid=$APP_USER --regid=$APP_USER --init-groups -- env -i PATH=/usr/bin:/bin LANG=C.UTF-8 \
    HOME="$CLUSTER_DIR/daphne" PYTHONPATH="$APP/site-packages" PYTHONDONTWRITEBYTECODE=1 \\
    LD_LIBRARY_PATH="$CLUSTER_DIR/python/lib" /bin/bash "\$0" "\$@"
fi
set -a; . "$CLUSTER_DIR/daphne/app.env"; set +a
case "\${1:-}" in
  daphne) exec "$python" -S -m daphne -b 127.0.0.1 -p "\$2" config.asgi:application ;;
  migrate) export DATABASE_URL="\$DATABASE_URL_DIRECT"; exec "$python" -S manage.py migrate --noinput ;;
  *) echo "usage: run-app daphne PORT | run-app migrate" >&2; exit 2 ;;
esac
RUN
  chmod 755 "$CLUSTER_DIR/run-app"
}

generate_secrets() {  # once per state directory: kept across fresh starts
  [ -s "$SECRETS/secrets.env" ] && return 0
  local name
  {
    for name in PG_SUPERUSER_PASSWORD PG_REPLICATION_PASSWORD APP_DB_PASSWORD PATRONI_REST_PASSWORD \
        ETCD_ROOT_PASSWORD ETCD_PATRONI_PASSWORD REDIS_PASSWORD SENTINEL_PASSWORD; do
      echo "$name=$(secret)"
    done
    echo "SECRET_KEY=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')"
  } >"$SECRETS/secrets.env"
}

etcd_enable_auth() {  # a root user, a user "patroni" limited to Patroni's keys, then authentication on
  "$PY" - "$ETCD_CLIENT_PORT" "$SECRETS/secrets.env" <<'PY'
import base64, json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}/v3"
secrets = dict(line.rstrip("\n").split("=", 1) for line in open(sys.argv[2]))
b64 = lambda text: base64.b64encode(text.encode()).decode()
def call(path, body):
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        response.read()
call("/auth/user/add", {"name": "root", "password": secrets["ETCD_ROOT_PASSWORD"]})
call("/auth/user/grant", {"user": "root", "role": "root"})
call("/auth/role/add", {"name": "patroni"})
# Patroni's namespace (/service/<scope>/...): "/service0" is the first key past the prefix.
call("/auth/role/grant", {"name": "patroni", "perm": {"permType": "READWRITE", "key": b64("/service/"),
                                                     "range_end": b64("/service0")}})
call("/auth/user/add", {"name": "patroni", "password": secrets["ETCD_PATRONI_PASSWORD"]})
call("/auth/user/grant", {"user": "patroni", "role": "patroni"})
call("/auth/enable", {})
PY
}

# --- start ----------------------------------------------------------------------
any_alive() {
  local name
  for name in "${STOP_ORDER[@]}"; do alive "$name" && return 0; done
  return 1
}

start() {
  if [ -d "$PIDS" ] && any_alive; then
    log "already running (make cluster ARGS=--stop first for a fresh one)"
    status
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || die "run as root: every service is started as its own unprivileged user"
  [ -x "$PY" ] || die "no $PY: run make install first"
  install_packages
  ensure_users
  check_state_dir
  STARTING=1
  # A fresh cluster each time; the credentials stay those of this state directory.
  mkdir -p "$CLUSTER_DIR"
  touch "$MARKER"
  find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name secrets ! -name "$(basename "$MARKER")" -exec rm -rf {} +
  chmod 711 "$CLUSTER_DIR"
  mkdir -p -m 700 "$SECRETS" "$PIDS"
  mkdir -p -m 711 "$LOGS"
  export PG_BIN
  PG_BIN=$(pg_bin)
  command -v etcd >/dev/null || die "etcd is not installed"
  local app_python
  app_python=$(app_python)
  log "fresh cluster under $CLUSTER_DIR (PostgreSQL binaries $PG_BIN; workers: $app_python as $APP_USER)"
  umask 077
  generate_secrets
  chmod 600 "$SECRETS/secrets.env"
  # State directories, each its service user's alone.
  local dir owner port node
  for dir in etcd:$ETCD_USER node1:$DB_USER node2:$DB_USER pgbouncer:$DB_USER haproxy:$HAPROXY_USER \
      redis-6391:$REDIS_USER redis-6392:$REDIS_USER sentinel-26391:$REDIS_USER sentinel-26392:$REDIS_USER \
      sentinel-26393:$REDIS_USER daphne:$APP_USER; do
    owner=${dir#*:}; dir=${dir%%:*}
    mkdir -m 700 "$CLUSTER_DIR/$dir"
    chown "$owner:$owner" "$CLUSTER_DIR/$dir"
  done
  umask 022
  copy_app
  write_app_runner "$app_python"
  umask 077

  # root's psql (this script, the drills) finds its passwords here.
  {
    echo "127.0.0.1:*:*:postgres:$(secret_value PG_SUPERUSER_PASSWORD)"
    echo "127.0.0.1:*:agentmemory:agentmemory:$(secret_value APP_DB_PASSWORD)"
  } >"$PGPASSFILE"

  # The drills' load is one turn at a time per person, at a rate the default
  # CHAT_TURN_RATE refuses; the concurrent-turn cap is raised too because a
  # worker killed mid-turn keeps the person's slot until its lease runs out
  # (60 s, renewed while a turn runs: chat/budget.py), and the worker-kill
  # drill kills every 1.5 s.
  # The workers' environment: production settings (DEBUG off, a secret key,
  # allowed hosts), the database through PgBouncer, Redis's master found
  # through the three Sentinels (REDIS_URL gives only the database number and
  # Redis's password; REDIS_SENTINEL_PASSWORD the Sentinels' own).
  # DATABASE_URL_DIRECT (haproxy's leader port) is for the migrations only.
  local app_pw redis_pw
  app_pw=$(secret_value APP_DB_PASSWORD); redis_pw=$(secret_value REDIS_PASSWORD)
  cat >"$CLUSTER_DIR/daphne/app.env" <<ENV
DJANGO_SETTINGS_MODULE=config.settings
DEBUG=0
SECRET_KEY=$(secret_value SECRET_KEY)
ALLOWED_HOSTS=127.0.0.1,localhost
CSRF_TRUSTED_ORIGINS=http://127.0.0.1:$HAPROXY_HTTP_PORT,http://localhost:$HAPROXY_HTTP_PORT
SECURE_COOKIES=0
NUM_PROXIES=1
AGENTMEMORY_ENABLED=1
DATABASE_URL=postgres://agentmemory:$app_pw@127.0.0.1:$PGBOUNCER_PORT/agentmemory
DATABASE_URL_DIRECT=postgres://agentmemory:$app_pw@127.0.0.1:$HAPROXY_PG_PORT/agentmemory
DATABASE_PREPARE_THRESHOLD=off
REDIS_URL=redis://:$redis_pw@127.0.0.1/0
REDIS_SENTINELS=$(printf '127.0.0.1:%s,' "${SENTINEL_PORTS[@]}" | sed 's/,$//')
REDIS_SENTINEL_MASTER=agentmemory
REDIS_SENTINEL_PASSWORD=$(secret_value SENTINEL_PASSWORD)
CHAT_TURN_RATE=1000/min
CHAT_MAX_CONCURRENT_TURNS=1000
ENV
  chown "$APP_USER:$APP_USER" "$CLUSTER_DIR/daphne/app.env"

  render deploy/etcd.conf.yml "$CLUSTER_DIR/etcd/etcd.conf.yml" "$ETCD_USER"
  for node in 1 2; do
    NODE_NAME=node$node NODE_DIR="$CLUSTER_DIR/node$node" \
      PG_PORT=$([ $node = 1 ] && echo $NODE1_PG_PORT || echo $NODE2_PG_PORT) \
      REST_PORT=$([ $node = 1 ] && echo $NODE1_REST_PORT || echo $NODE2_REST_PORT) \
      render deploy/patroni.yml "$CLUSTER_DIR/node$node/patroni.yml" "$DB_USER"
  done
  PG_LEADER_PORT=$HAPROXY_PG_PORT render deploy/pgbouncer.ini "$CLUSTER_DIR/pgbouncer/pgbouncer.ini" "$DB_USER"
  render deploy/haproxy.cfg "$CLUSTER_DIR/haproxy/haproxy.cfg" "$HAPROXY_USER"
  for port in "$REDIS_MASTER_PORT" "$REDIS_REPLICA_PORT"; do
    REDIS_PORT=$port render deploy/redis.conf "$CLUSTER_DIR/redis-$port/redis.conf" "$REDIS_USER"
  done
  for port in "${SENTINEL_PORTS[@]}"; do
    SENTINEL_PORT=$port render deploy/sentinel.conf "$CLUSTER_DIR/sentinel-$port/sentinel.conf" "$REDIS_USER"
  done
  # Logs a service opens itself (the others' are its standard output, opened here).
  touch "$LOGS/pgbouncer.log"; chown "$DB_USER:$DB_USER" "$LOGS/pgbouncer.log"
  for port in "$REDIS_MASTER_PORT" "$REDIS_REPLICA_PORT" "${SENTINEL_PORTS[@]}"; do
    name=$([ "$port" -gt 26000 ] && echo sentinel || echo redis)-$port
    touch "$LOGS/$name.log"; chown "$REDIS_USER:$REDIS_USER" "$LOGS/$name.log"
  done

  log "etcd on $ETCD_CLIENT_PORT (as $ETCD_USER), v3 API with authentication, v2 off"
  start_process etcd "$ETCD_USER" "$CLUSTER_DIR/etcd/etcd.conf.yml" etcd --config-file "$CLUSTER_DIR/etcd/etcd.conf.yml"
  wait_for 30 etcd http_ok "http://127.0.0.1:$ETCD_CLIENT_PORT/health" || die "etcd did not start (logs/etcd.log)"
  etcd_enable_auth || die "could not turn on etcd's authentication"

  log "Patroni node1 (PostgreSQL $NODE1_PG_PORT, REST $NODE1_REST_PORT): initialises the cluster"
  start_process patroni-node1 "$DB_USER" "$CLUSTER_DIR/node1/patroni.yml" patroni "$CLUSTER_DIR/node1/patroni.yml"
  wait_for 90 "node1 to lead" http_ok "http://127.0.0.1:$NODE1_REST_PORT/primary" \
    || die "node1 did not become the leader (logs/patroni-node1.log)"
  log "Patroni node2 (PostgreSQL $NODE2_PG_PORT, REST $NODE2_REST_PORT): a copy of the leader, then its synchronous standby"
  start_process patroni-node2 "$DB_USER" "$CLUSTER_DIR/node2/patroni.yml" patroni "$CLUSTER_DIR/node2/patroni.yml"
  wait_for 120 "a streaming synchronous standby" sync_standby_streaming "$NODE1_REST_PORT" \
    || die "node2 did not become the synchronous standby (logs/patroni-node2.log)"

  log "haproxy (as $HAPROXY_USER): PostgreSQL leader on $HAPROXY_PG_PORT, HTTP on $HAPROXY_HTTP_PORT"
  start_process haproxy "$HAPROXY_USER" "$CLUSTER_DIR/haproxy/haproxy.cfg" haproxy -db -f "$CLUSTER_DIR/haproxy/haproxy.cfg"
  # haproxy 2.6 starts every server UP until its checks say otherwise (fall 2: about 1.5 s), so a
  # connection may first reach the standby: wait until four in a row (round robin) reach the leader.
  wait_for 30 "the leader through haproxy" leader_through_haproxy \
    || die "haproxy does not reach the leader (logs/haproxy.log)"
  # The application's role and database (the password goes through stdin, never argv, and a failed
  # statement is not written to the server's log with it).
  psql -q -w -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$HAPROXY_PG_PORT" -U postgres -d postgres <<SQL
SET log_min_error_statement = panic;
CREATE ROLE agentmemory LOGIN PASSWORD '$app_pw';
CREATE DATABASE agentmemory OWNER agentmemory;
SQL
  # PgBouncer keeps the role's SCRAM verifier, as PostgreSQL stores it (same salt and iterations, so
  # PgBouncer can log in to the server with the keys of the client's own SCRAM login), not the password.
  local verifier
  verifier=$(psql -w -tA -h 127.0.0.1 -p "$HAPROXY_PG_PORT" -U postgres -d postgres \
    -c "select rolpassword from pg_authid where rolname = 'agentmemory'")
  case "$verifier" in SCRAM-SHA-256\$*) ;; *) die "the role's password is not stored as a SCRAM verifier";; esac
  printf '"agentmemory" "%s"\n' "$verifier" >"$CLUSTER_DIR/pgbouncer/userlist.txt"
  chown "$DB_USER:$DB_USER" "$CLUSTER_DIR/pgbouncer/userlist.txt"

  log "PgBouncer on $PGBOUNCER_PORT (transaction pooling) -> haproxy $HAPROXY_PG_PORT"
  start_process pgbouncer "$DB_USER" "$CLUSTER_DIR/pgbouncer/pgbouncer.ini" pgbouncer "$CLUSTER_DIR/pgbouncer/pgbouncer.ini"
  wait_for 20 PgBouncer psql -w -h 127.0.0.1 -p "$PGBOUNCER_PORT" -U agentmemory -d agentmemory -tAc 'select 1' \
    || die "PgBouncer does not answer (logs/pgbouncer.log)"

  log "Redis master $REDIS_MASTER_PORT, replica $REDIS_REPLICA_PORT, sentinels ${SENTINEL_PORTS[*]} (as $REDIS_USER)"
  # Redis rewrites its command line to its address: that is what identifies it.
  start_process redis-6391 "$REDIS_USER" "127.0.0.1:6391" redis-server "$CLUSTER_DIR/redis-6391/redis.conf"
  wait_for 20 "Redis master" rcli "$REDIS_MASTER_PORT" ping || die "Redis did not start"
  start_process redis-6392 "$REDIS_USER" "127.0.0.1:6392" redis-server "$CLUSTER_DIR/redis-6392/redis.conf" \
    --replicaof 127.0.0.1 "$REDIS_MASTER_PORT"
  for port in "${SENTINEL_PORTS[@]}"; do
    start_process "sentinel-$port" "$REDIS_USER" "127.0.0.1:$port" \
      redis-sentinel "$CLUSTER_DIR/sentinel-$port/sentinel.conf"
  done
  wait_for 30 "the Redis replica" redis_replica_online || die "the Redis replica did not connect"

  log "migrations, once (as $APP_USER, through haproxy's leader port)"
  "$CLUSTER_DIR/run-app" migrate >"$LOGS/migrate.log" 2>&1 || die "migrate failed (logs/migrate.log)"

  log "daphne workers on ${DAPHNE_PORTS[*]} (as $APP_USER)"
  for port in "${DAPHNE_PORTS[@]}"; do
    start_process "daphne-$port" root "-p $port config.asgi:application" "$CLUSTER_DIR/run-app" daphne "$port"
  done
  for port in "${DAPHNE_PORTS[@]}"; do
    wait_for 60 "daphne $port /readyz" http_ok "http://127.0.0.1:$port/readyz" \
      || die "daphne $port is not ready (logs/daphne-$port.log)"
  done
  wait_for 30 "haproxy /readyz" http_ok "http://127.0.0.1:$HAPROXY_HTTP_PORT/readyz" \
    || die "haproxy does not reach the workers"
  log "every control plane refuses a request without its credential (bench/drills.py --check-auth)"
  check_auth || die "a control plane took a request without its credential, or a secret is exposed (above)"
  STARTING=0
  log "up: http://127.0.0.1:$HAPROXY_HTTP_PORT/ (make cluster ARGS=--stop to stop)"
  status
}

# As a module (make drills says why).
check_auth() { AGENTMEMORY_CLUSTER_DIR="$CLUSTER_DIR" "$PY" -m bench.drills --check-auth; }

# --- status ---------------------------------------------------------------------
status() {
  if [ ! -d "$PIDS" ] || ! any_alive; then echo "cluster: not running ($CLUSTER_DIR)"; return 0; fi
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
  master=$(scli "${SENTINEL_PORTS[0]}" sentinel get-master-addr-by-name agentmemory 2>/dev/null | paste -sd: -) || true
  echo "redis master (per sentinel ${SENTINEL_PORTS[0]}): ${master:-unknown}"
  for port in "$REDIS_MASTER_PORT" "$REDIS_REPLICA_PORT"; do
    echo "redis $port: $(rcli "$port" role 2>/dev/null | head -1 || echo down)"
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
  --check-auth) check_auth ;;
  *) die "usage: scripts/cluster.sh [--status|--check-auth|--stop]" ;;
esac
