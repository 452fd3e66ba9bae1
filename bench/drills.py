"""Fault drills against the production shape that `make cluster` runs.

It owns one question: when a part of the deployment dies mid-load, is every
person told the truth about their memory? Six drills, each one fault under
the same load:

    leader-kill        SIGKILL of the PostgreSQL leader's postmaster; Patroni
                       (primary_start_timeout 0, synchronous_mode) promotes the
                       synchronous standby; haproxy's leader port follows
                       Patroni's /primary, PgBouncer reconnects through it
    node-kill          the leader's machine dies: SIGKILL, at once, of its
                       Patroni, its postmaster and every PostgreSQL process;
                       nobody releases the leader key, so the cluster has no
                       leader until the key's ttl runs out (measured:
                       leaderless_s); the node's Patroni is started again after
    switchover         `patronictl switchover` to the synchronous standby (planned)
    worker-kill        SIGKILL of a daphne worker, restarted at once, again and
                       again (--kills, --kill-every), rotating over the three
    pgbouncer-restart  PgBouncer stopped (SIGTERM: immediate shutdown, every
                       client and server connection closed) and started again
    redis-master-kill  SIGKILL of the Redis master; the Sentinels promote the
                       replica; the workers find it through them
                       (REDIS_SENTINELS); the killed one comes back as replica

The load: N people (default 20), each with an API token and a signed-in
session, all through haproxy (http://127.0.0.1:8100), with the offline demo
model (the workers have no OPENAI_API_KEY). Each person sends, one step at a
time, in turn (`MIX`, offset by the person, so every kind runs at every
moment): a `remember:` turn over REST (`POST /api/chat/turns/`); a pair of
`remember:` turns at once from two chat sockets of their own (two workers,
one person's memory: the lost-update case); a memory API edit
(`POST /api/memory/operations/`, the person's own add); and a plain turn
that saves nothing. Every note is a unique token. `--no-mix` sends only the
REST `remember:` turns. Each person also keeps one chat socket open, which
receives `memory_changed` when their changes commit on whichever worker.
Every answer is recorded as the person was told it:

    saved        memory `committed` (a turn's, 200 or `turn_completed`; the API's `outcome`)
    not_saved    any other memory outcome (`discarded/...`, `unavailable`); the API's 503
                 `connection_lost` (the database confirmed the change is not stored)
    in_doubt     `unconfirmed` (the commit's outcome could not be confirmed)
    failed       an error the application answered (JSON with a code, `turn_failed`, an
                 error frame), or haproxy's 503 (no worker: the request reached none)
    no_answer    the connection or socket broke, timed out, or haproxy answered 502/504
                 (the worker died under the request): nobody said anything
    answered     a plain turn that answered (nothing to look for in memory)

The load stops by itself: --after seconds after the first turn sent after
the (last) fault that commits, or at --deadline, or after --max-turns per
person. Then every person's memory, memory events and versions are read on
the PostgreSQL leader directly (checked not in recovery) and compared with
what each was told:

    acknowledged saves lost   told saved, not stored (must be 0)
    lies the other way        told not saved or failed, but stored (must be 0)
    in doubt                  told it could not be confirmed; how many turned out stored
    no answer                 how many, and how many of those were stored
    partial commits           a stored note without its committed event and version,
                              a committed event without a version, or a document that
                              is not its latest version (must be 0)
    cross-person access       a note in another person's memory or versions (must be 0)
    fault -> first commit     the first answer after the fault that told a person
                              "saved", and the first such answer to a turn sent after it
    fault -> first live update (all drills; the point of the Redis one) the first
                              `memory_changed` on a person's socket for a turn sent
                              after the fault and saved
    sockets closed            chat sockets the server or balancer closed meanwhile

It prints figures only (no memory content) and writes every outcome, without
note text, to <the cluster state directory>/drills/<drill>-<run>.json. Exit status 1 when a
save was lost, a lie was told, a commit was partial, a person reached
another's memory, the fault did not happen (no new leader, no promotion), or
nothing committed after the fault.

`--check-auth` runs no drill: it checks that every control plane of the
running cluster refuses a request without its credential (Patroni's REST API
401, etcd refused and its v2 API off, Redis and the Sentinels NOAUTH) and
takes it with one, that every service runs as an unprivileged user, that no
process has a generated secret on its command line, and that PgBouncer keeps
a SCRAM verifier, not the password. `make cluster` runs it after the start.

    make cluster && make drills [ARGS="--drills leader-kill,redis-master-kill --people 20"]
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import pwd
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# scripts/cluster.sh's state directory (outside the checkout).
CLUSTER = Path(os.environ.get("AGENTMEMORY_CLUSTER_DIR") or "/var/lib/agentmemory-cluster")
REST_PORTS = (8011, 8012)
DAPHNE_PORTS = (8101, 8102, 8103)
SENTINEL_PORTS = (26391, 26392, 26393)
REDIS_PORTS = (6391, 6392)
MASTER_NAME = "agentmemory"
BALANCER = "http://127.0.0.1:8100"
SOCKET_URL = "ws://127.0.0.1:8100/ws/chat/"
PY = os.environ.get("PY") or sys.executable
ETCD_PORT = 2389
# The users scripts/cluster.sh runs each service as (never root).
SERVICE_USERS = {"etcd": ("etcd", "postgres"), "patroni": ("postgres",), "pgbouncer": ("postgres",),
                 "haproxy": ("haproxy",), "redis": ("redis",), "sentinel": ("redis",), "daphne": ("agentmemory",)}


@dataclass
class Outcome:
    person: int
    turn: int
    sent: float  # seconds since the load started
    received: float
    told: str  # saved | not_saved | in_doubt | failed | no_answer (a plain turn: answered | failed | no_answer)
    detail: str  # memory status/code, HTTP status:code, or the transport error's type
    stored: bool | None = None
    live_update: float | None = None  # when the person's socket got memory_changed for it
    note: str = ""  # the unique token; left out of the written record
    kind: str = "rest"  # rest | socket (one of a concurrent pair) | api (a memory API edit) | plain


# What each person sends, in turn (offset by the person's index, so every kind runs at every moment):
# a `remember:` turn over REST, a concurrent pair of `remember:` turns from two sockets of their own, a
# memory API edit (`POST /api/memory/operations/`), and a plain turn that saves nothing.
MIX = ("rest", "socket_pair", "api", "plain", "rest")
PLAIN = "What is a good name for a small boat?"


def log(message: str) -> None:
    print(message, flush=True)


# --- the cluster ------------------------------------------------------------------
def read_env_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        raise SystemExit(f"No cluster: run `make cluster` first ({path} is missing).")
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    return env


def cluster_env() -> dict[str, str]:
    """Return the workers' environment (daphne/app.env) that `make cluster` wrote."""
    return read_env_file(CLUSTER / "daphne" / "app.env")


def cluster_secrets() -> dict[str, str]:
    """The credentials `make cluster` generated (secrets/secrets.env, root's alone)."""
    return read_env_file(CLUSTER / "secrets" / "secrets.env")


def patroni_members() -> list[dict]:
    """Return Patroni's view of the members, from whichever REST API answers."""
    for port in REST_PORTS:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/cluster", timeout=1) as response:
                return json.load(response)["members"]
        except Exception:
            continue
    return []


def leader() -> dict | None:
    return next((m for m in patroni_members() if m["role"] == "leader"), None)


def wait_for_sync_standby(seconds: float) -> tuple[dict, dict] | None:
    """Wait until there is a leader and a streaming synchronous standby; return both."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        members = {m["role"]: m for m in patroni_members()}
        standby = members.get("sync_standby")
        if "leader" in members and standby and standby.get("state") in ("streaming", "running"):
            return members["leader"], standby
        time.sleep(0.5)
    return None


def postmaster_pid(node: str) -> int:
    """Return the pid of a node's postmaster, checked against its command line."""
    data_dir = CLUSTER / node / "data"
    pid = int((data_dir / "postmaster.pid").read_text().split()[0])
    if str(data_dir) not in cmdline(pid):
        raise RuntimeError(f"pid {pid} is not {node}'s postmaster")
    return pid


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def recorded_pid(name: str) -> int:
    """The pid scripts/cluster.sh recorded for a process, checked against its command line."""
    lines = (CLUSTER / "pids" / f"{name}.pid").read_text().splitlines()
    pid, match = int(lines[0]), lines[1]
    if match not in cmdline(pid):
        raise RuntimeError(f"{name}: pid {pid} is not running as recorded")
    return pid


def start_recorded(name: str, match: str, command: list[str], *, user: str = "") -> int:
    """Start a process as scripts/cluster.sh does (own session, log appended, pid recorded for --stop).

    With `user`, as that user in a clean environment (scripts/cluster.sh's start_process); without,
    `command` drops privileges itself (run-app)."""
    if user:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--",
                   "env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", f"HOME={CLUSTER}", *command]
    with open(CLUSTER / "logs" / f"{name}.log", "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=CLUSTER, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                                   start_new_session=True)
    (CLUSTER / "pids" / f"{name}.pid").write_text(f"{process.pid}\n{match}\n")
    threading.Thread(target=process.wait, daemon=True).start()  # reap it if it dies while we run
    return process.pid


def wait_gone(pid: int, seconds: float) -> bool:
    """Wait until a process is gone (or a zombie: dead, not yet reaped by its parent)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if text[text.rindex(")") + 2] == "Z":
            return True
        time.sleep(0.05)
    return False


def http_ok(url: str, timeout: float = 2) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except Exception:
        return False


def redis_cli(port: int, *args: str) -> str:
    """redis-cli to a Redis or a Sentinel of the cluster, its password in REDISCLI_AUTH (never the argv)."""
    secrets = cluster_secrets()
    password = secrets["SENTINEL_PASSWORD"] if port in SENTINEL_PORTS else secrets["REDIS_PASSWORD"]
    try:
        return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                              timeout=3, env={**os.environ, "REDISCLI_AUTH": password}).stdout.strip()
    except subprocess.TimeoutExpired:
        return ""


def sentinel_master() -> int | None:
    """The Redis master's port, as the first Sentinel that answers names it."""
    for port in SENTINEL_PORTS:
        answer = redis_cli(port, "sentinel", "get-master-addr-by-name", MASTER_NAME).split()
        if len(answer) == 2 and answer[1].isdigit():
            return int(answer[1])
    return None


def wait_until(predicate, seconds: float, step: float = 0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return None


# --- faults -----------------------------------------------------------------------
class Fault(ABC):
    """One drill's fault. `prepare` checks the cluster can take it; `inject` runs in a thread of its own."""

    name = ""
    # What ends the load (--after seconds later): the first saved answer to a turn sent after the
    # fault ("commit"), or the first live update on a socket for such a turn ("live_update").
    recovery = "commit"

    def __init__(self, args, clock, env):
        self.args, self.clock, self.env = args, clock, env
        self.times: dict[str, float] = {}  # what happened when, in load seconds
        self.facts: dict[str, object] = {}
        self.done = threading.Event()  # the fault (every repetition) was injected

    def prepare(self) -> str:
        return ""

    @abstractmethod
    def inject(self) -> None:
        """Cause the fault (each drill its own)."""

    def watch(self) -> None:
        """Called every 0.2 s from the fault until the load stops."""

    def recover(self) -> None:
        """After the load: bring back what the fault took away, for the next drill."""

    def ok(self) -> list[str]:
        return []


class LeaderKill(Fault):
    name = "leader-kill"

    def prepare(self):
        pair = wait_for_sync_standby(self.args.standby_wait)
        if pair is None:
            raise SystemExit("No leader with a streaming synchronous standby: a failover could not happen. "
                             "Check `make cluster ARGS=--status`.")
        self.old, self.standby = pair
        return (f"leader {self.old['name']} (port {self.old['port']}), synchronous standby "
                f"{self.standby['name']}")

    def inject(self):
        pid = postmaster_pid(self.old["name"])
        self.times["at"] = self.clock()
        os.kill(pid, signal.SIGKILL)
        log(f"  {self.times['at']:.1f} s: SIGKILL to {self.old['name']}'s postmaster (pid {pid})")
        self.done.set()

    def watch(self):
        current = leader()
        if current and current["name"] != self.old["name"] and "new_leader" not in self.times:
            self.times["new_leader"] = self.clock()
            self.facts["new_leader"] = current["name"]
            self.facts["timeline"] = current.get("timeline")

    def recover(self):
        if self.args.rejoin_wait:
            rejoined = wait_for_sync_standby(self.args.rejoin_wait)
            self.facts["old_leader_back_as_sync_standby"] = bool(rejoined and rejoined[1]["name"] == self.old["name"])

    def ok(self):
        return [] if "new_leader" in self.times else ["no new leader"]


class NodeKill(LeaderKill):
    """The leader's machine dies: Patroni and every PostgreSQL process, SIGKILLed together.

    Unlike leader-kill (the postmaster only: its Patroni sees it die and hands the leader key over in
    seconds), nobody is left to release the key: the standby may take it only once its ttl has run out.
    The time with no leader (`leaderless_s`, the fault to the first moment another member holds the key)
    is what the ttl buys."""

    name = "node-kill"

    def inject(self):
        node = self.old["name"]
        patroni = recorded_pid(f"patroni-{node}")
        postmaster = postmaster_pid(node)
        # Every process of the node at once, as a machine's death takes them: Patroni, the postmaster
        # and its children (backends, walsenders, checkpointer...), listed before the first signal.
        children = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()
                    and parent_pid(int(entry.name)) == postmaster]
        self.times["at"] = self.clock()
        for pid in (patroni, postmaster, *children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log(f"  {self.times['at']:.1f} s: SIGKILL to {node}'s Patroni (pid {patroni}), its postmaster "
            f"(pid {postmaster}) and {len(children)} PostgreSQL processes, at once")
        self.done.set()

    def watch(self):
        had = "new_leader" in self.times
        super().watch()
        if not had and "new_leader" in self.times:
            self.facts["leaderless_s"] = round(self.times["new_leader"] - self.times["at"], 2)
            self.facts["ttl"] = patroni_config().get("ttl")
            log(f"  {self.times['new_leader']:.1f} s: {self.facts['new_leader']} holds the leader key: "
                f"{self.facts['leaderless_s']} s with no leader (ttl {self.facts['ttl']})")

    def recover(self):
        # The machine comes back: its Patroni starts, finds another leader, rejoins as a standby.
        node = self.old["name"]
        config = CLUSTER / node / "patroni.yml"
        start_recorded(f"patroni-{node}", str(config), ["patroni", str(config)], user="postgres")
        super().recover()


def parent_pid(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2:].split()[1])


def patroni_config() -> dict:
    """The dynamic configuration (ttl, loop_wait, retry_timeout...) from whichever REST API answers."""
    for port in REST_PORTS:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/config", timeout=1) as response:
                return json.load(response)
        except Exception:
            continue
    return {}


class Switchover(LeaderKill):
    name = "switchover"

    def inject(self):
        config = CLUSTER / self.old["name"] / "patroni.yml"
        self.times["at"] = self.clock()
        log(f"  {self.times['at']:.1f} s: patronictl switchover {self.old['name']} -> {self.standby['name']}")
        done = subprocess.run(["patronictl", "-c", str(config), "switchover", "--leader", self.old["name"],
                               "--candidate", self.standby["name"], "--force"],
                              capture_output=True, text=True, timeout=120)
        self.times["command_returned"] = self.clock()
        self.facts["patronictl_exit"] = done.returncode
        if done.returncode:
            log(f"  patronictl exited {done.returncode}: {done.stderr.strip()[-300:]}")
        self.done.set()


class PgBouncerRestart(Fault):
    name = "pgbouncer-restart"

    def inject(self):
        pid = recorded_pid("pgbouncer")
        self.times["at"] = self.clock()
        os.kill(pid, signal.SIGTERM)  # immediate shutdown: every connection closed at once
        gone = wait_gone(pid, 20)
        self.times["stopped"] = self.clock()
        ini = CLUSTER / "pgbouncer" / "pgbouncer.ini"
        new = start_recorded("pgbouncer", str(ini), ["pgbouncer", str(ini)], user="postgres")
        self.times["started"] = self.clock()
        log(f"  {self.times['at']:.1f} s: SIGTERM to PgBouncer (pid {pid}); "
            f"{'stopped' if gone else 'NOT stopped'} after {self.times['stopped'] - self.times['at']:.2f} s, "
            f"started again (pid {new})")
        self.done.set()


class WorkerKill(Fault):
    name = "worker-kill"

    def prepare(self):
        ready = [port for port in DAPHNE_PORTS if http_ok(f"http://127.0.0.1:{port}/readyz")]
        if len(ready) < len(DAPHNE_PORTS):
            raise SystemExit(f"Workers not ready: only {ready}. Check `make cluster ARGS=--status`.")
        self.kills: list[dict] = []
        return f"{self.args.kills} kills, one every {self.args.kill_every:g} s, rotating over {DAPHNE_PORTS}"

    def inject(self):
        for _ in range(self.args.kills):
            # Only when every worker is ready again (/readyz, which can take seconds under this
            # load): a kill before a restarted worker is ready leaves one ready worker, haproxy
            # sends it everything, and the next kill takes every turn in flight with it (a trial
            # run killing whenever two answered /healthz: 740 of 880 turns got haproxy's 502).
            # Then the worker killed least recently (never killed first), so all three take turns.
            port = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                ready = [p for p in DAPHNE_PORTS if http_ok(f"http://127.0.0.1:{p}/readyz", 3)]
                if len(ready) == len(DAPHNE_PORTS):
                    last = {k["port"]: k["at"] for k in self.kills}
                    port = min(ready, key=lambda p: (last.get(p, -1.0), p))
                    break
                time.sleep(0.2)
            if port is None:
                log("  the three workers were not all ready for 60 s: kills stop here")
                break
            name = f"daphne-{port}"
            pid = recorded_pid(name)
            at = self.clock()
            self.times.setdefault("at", at)
            self.times["last"] = at
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 5)
            # As scripts/cluster.sh starts it: run-app switches to the workers' user and environment.
            start_recorded(name, f"-p {port} config.asgi:application",
                           [str(CLUSTER / "run-app"), "daphne", str(port)])
            self.kills.append({"at": round(at, 2), "port": port})
            time.sleep(self.args.kill_every)
        self.facts["kills"] = len(self.kills)
        self.facts["kills_by_worker"] = dict(Counter(k["port"] for k in self.kills))
        log(f"  {len(self.kills)} workers killed and restarted between {self.times.get('at', 0):.1f} s "
            f"and {self.times.get('last', 0):.1f} s")
        self.done.set()

    def recover(self):
        ready = wait_until(lambda: all(http_ok(f"http://127.0.0.1:{p}/readyz") for p in DAPHNE_PORTS), 60)
        self.facts["all_workers_ready_after"] = bool(ready)

    def ok(self):
        return [] if self.kills else ["no worker was killed"]


class RedisMasterKill(Fault):
    name = "redis-master-kill"
    recovery = "live_update"

    def prepare(self):
        master = sentinel_master()
        if master not in REDIS_PORTS:
            raise SystemExit("The Sentinels name no Redis master of the cluster. Check `make cluster ARGS=--status`.")
        replica = next(port for port in REDIS_PORTS if port != master)
        if not wait_until(lambda: "connected_slaves:1" in redis_cli(master, "info", "replication"), 60):
            raise SystemExit(f"Redis {master} has no connected replica: a promotion could not happen.")
        self.master, self.replica = master, replica
        return f"Redis master {master} (per the Sentinels), replica {replica}"

    def inject(self):
        pid = recorded_pid(f"redis-{self.master}")
        self.times["at"] = self.clock()
        os.kill(pid, signal.SIGKILL)
        log(f"  {self.times['at']:.1f} s: SIGKILL to the Redis master {self.master} (pid {pid})")
        self.done.set()

    def watch(self):
        if "promoted" not in self.times and sentinel_master() == self.replica:
            self.times["promoted"] = self.clock()

    def recover(self):
        # The killed master comes back; the Sentinels make it a replica of the new master.
        conf = CLUSTER / f"redis-{self.master}" / "redis.conf"
        start_recorded(f"redis-{self.master}", f"127.0.0.1:{self.master}", ["redis-server", str(conf)], user="redis")
        back = wait_until(lambda: redis_cli(self.master, "role").startswith("slave")
                          and "connected_slaves:1" in redis_cli(self.replica, "info", "replication"), 60)
        self.facts["old_master_back_as_replica"] = bool(back)

    def ok(self):
        return [] if "promoted" in self.times else ["the Sentinels promoted no replica"]


FAULTS = {fault.name: fault for fault in (LeaderKill, Switchover, WorkerKill, PgBouncerRestart, RedisMasterKill,
                                          NodeKill)}


# --- the control planes' credentials -----------------------------------------------
def http(method: str, url: str, body: dict | None = None, auth: tuple[str, str] | None = None,
         token: str = "") -> tuple[int, str]:
    """(status, body) of one HTTP request; a refused connection is status 0."""
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    if token:
        headers["Authorization"] = token
    request = urllib.request.Request(url, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
    except OSError as error:
        return 0, type(error).__name__


def resp(port: int, *commands: list[str]) -> list[str]:
    """Send Redis commands on one raw connection; the first line of each answer."""
    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=3) as connection:
        reader = connection.makefile("rb")
        for command in commands:
            connection.sendall(f"*{len(command)}\r\n".encode()
                               + b"".join(f"${len(p.encode())}\r\n{p}\r\n".encode() for p in command))
            answers.append(reader.readline().decode(errors="replace").strip())
    return answers


def check_auth() -> int:
    """Every control plane refuses a request without its credential and takes it with one (see the docstring)."""
    secrets = cluster_secrets()
    results: list[tuple[str, bool, str]] = []

    def check(what: str, ok: bool, saw: str) -> None:
        results.append((what, ok, saw))

    rest_auth = ("patroni", secrets["PATRONI_REST_PASSWORD"])
    members = patroni_members()
    leader_name = next((m["name"] for m in members if m["role"] == "leader"), "node1")
    for port in REST_PORTS:
        base = f"http://127.0.0.1:{port}"
        status, _ = http("PATCH", f"{base}/config", {"ttl": 5})
        check(f"Patroni {port}: PATCH /config without credentials", status == 401, str(status))
        status, _ = http("POST", f"{base}/switchover", {"leader": leader_name})
        check(f"Patroni {port}: POST /switchover without credentials", status == 401, str(status))
        status, _ = http("POST", f"{base}/reinitialize", {})
        check(f"Patroni {port}: POST /reinitialize without credentials", status == 401, str(status))
        status, _ = http("POST", f"{base}/restart", {}, auth=("patroni", "wrong"))
        check(f"Patroni {port}: POST /restart with a wrong password", status == 401, str(status))
        # With the credential: the ttl patched to what it is changes nothing, and is taken.
        ttl = patroni_config().get("ttl")
        status, body = http("PATCH", f"{base}/config", {"ttl": ttl}, auth=rest_auth)
        check(f"Patroni {port}: PATCH /config (ttl unchanged) with credentials",
              ttl is not None and status == 200 and f'"ttl": {ttl}' in body, f"{status} {body[:60]}")
    # patronictl reads the same credential from the node's configuration (ctl.authentication).
    done = subprocess.run(["patronictl", "-c", str(CLUSTER / "node1" / "patroni.yml"), "list"],
                          capture_output=True, text=True, timeout=30)
    check("patronictl list with the node's configuration", done.returncode == 0, f"exit {done.returncode}")

    etcd = f"http://127.0.0.1:{ETCD_PORT}"
    service = base64.b64encode(b"/service/").decode()
    status, body = http("POST", f"{etcd}/v3/kv/range", {"key": service, "range_end": base64.b64encode(b"/service0")
                                                        .decode()})
    check("etcd v3: read Patroni's keys without a token", status != 200, f"{status} {body[:60]}")
    status, body = http("POST", f"{etcd}/v3/kv/put", {"key": base64.b64encode(b"/service/agentmemory/x").decode(),
                                                      "value": base64.b64encode(b"1").decode()})
    check("etcd v3: write without a token", status != 200, f"{status} {body[:60]}")
    status, _ = http("GET", f"{etcd}/v2/keys/service/")
    check("etcd v2 API: off", status == 404, str(status))
    status, body = http("POST", f"{etcd}/v3/auth/authenticate", {"name": "patroni", "password": "wrong"})
    check("etcd: a wrong password", status != 200, str(status))
    status, body = http("POST", f"{etcd}/v3/auth/authenticate",
                        {"name": "patroni", "password": secrets["ETCD_PATRONI_PASSWORD"]})
    token = json.loads(body).get("token", "") if status == 200 else ""
    status, body = http("POST", f"{etcd}/v3/kv/range", {"key": service, "range_end": base64.b64encode(b"/service0")
                                                        .decode()}, token=token)
    check("etcd v3: read Patroni's keys as patroni", status == 200 and '"kvs"' in body, str(status))
    status, body = http("POST", f"{etcd}/v3/kv/put", {"key": base64.b64encode(b"/elsewhere").decode(),
                                                      "value": base64.b64encode(b"1").decode()}, token=token)
    check("etcd v3: patroni writing outside /service/", status != 200, f"{status} {body[:60]}")

    for port in (*REDIS_PORTS, *SENTINEL_PORTS):
        kind = "Sentinel" if port in SENTINEL_PORTS else "Redis"
        password = secrets["SENTINEL_PASSWORD"] if kind == "Sentinel" else secrets["REDIS_PASSWORD"]
        question = ["SENTINEL", "get-master-addr-by-name", MASTER_NAME] if kind == "Sentinel" else ["PING"]
        try:
            without, wrong, _, with_it = resp(port, question, ["AUTH", "wrong"], ["AUTH", password], question)
        except OSError as error:
            check(f"{kind} {port}: answers", False, type(error).__name__)
            continue
        check(f"{kind} {port}: {question[0]} without the password", without.startswith("-NOAUTH"), without[:40])
        check(f"{kind} {port}: a wrong password", wrong.startswith("-WRONGPASS"), wrong[:40])
        check(f"{kind} {port}: with the password", not with_it.startswith(("-NOAUTH", "-WRONGPASS", "-ERR")),
              with_it[:40])

    userlist = (CLUSTER / "pgbouncer" / "userlist.txt").read_text()
    check("PgBouncer's userlist: a SCRAM verifier, not the password",
          "SCRAM-SHA-256$" in userlist and secrets["APP_DB_PASSWORD"] not in userlist, "")

    # Every service as its own unprivileged user; no secret on any process's command line.
    for pidfile in sorted((CLUSTER / "pids").glob("*.pid")):
        name = pidfile.stem
        try:
            pid = recorded_pid(name)
            owner = Path(f"/proc/{pid}").stat().st_uid
        except (OSError, RuntimeError, ValueError) as error:
            check(f"{name}: running", False, type(error).__name__)
            continue
        user = pwd.getpwuid(owner).pw_name
        expected = SERVICE_USERS[name.split("-")[0]]
        check(f"{name}: runs as {'/'.join(expected)}", owner != 0 and user in expected, user)
    exposed = []
    values = [value for key, value in secrets.items() if value]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(value in line for value in values):
                exposed.append(entry.name)
    check("no generated secret on any process's command line", not exposed, f"pids {exposed}" if exposed else "")
    # The files holding credentials: mode 600, each its service user's (the generated list: root's).
    for path, owners in (("secrets/secrets.env", ("root",)), ("daphne/app.env", ("agentmemory",)),
                         ("node1/patroni.yml", ("postgres",)), ("node2/patroni.yml", ("postgres",)),
                         ("pgbouncer/userlist.txt", ("postgres",)), ("redis-6391/redis.conf", ("redis",)),
                         ("sentinel-26391/sentinel.conf", ("redis",))):
        info = (CLUSTER / path).stat()
        user = pwd.getpwuid(info.st_uid).pw_name
        check(f"{path}: mode 600, {'/'.join(owners)}'s", info.st_mode & 0o777 == 0o600 and user in owners,
              f"{info.st_mode & 0o777:o} {user}")

    for what, ok, saw in results:
        log(f"  {'ok  ' if ok else 'FAIL'} {what}" + (f" ({saw})" if saw and not ok else ""))
    failed = [what for what, ok, _ in results if not ok]
    log(f"  {len(results) - len(failed)} of {len(results)} checks hold"
        + (f"; FAILED: {len(failed)}" if failed else ""))
    return 1 if failed else 0


# --- people -----------------------------------------------------------------------
def create_people(count: int, run: str) -> list[dict]:
    """Create `count` accounts, each with an API token and a signed-in session, through PgBouncer."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from rest_framework.authtoken.models import Token

    people = []
    for index in range(count):
        user = get_user_model()._default_manager.create(username=f"drill-{run}-{index}")
        user.set_unusable_password()
        user.save(update_fields=["password"])
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        people.append({"user_id": user.pk, "token": Token.objects.create(user=user).key,
                       "session": session.session_key})
    return people


def take_turn(key: str, content: str, timeout: float) -> tuple[str, str]:
    """Send one turn; return what the person was told: (told, detail)."""
    body, failure = post_json(key, "/api/chat/turns/", {"content": content, "conversation_id": None}, timeout)
    if failure is not None:
        return failure
    memory = body.get("memory") or {}
    status = memory.get("status", "?") + (f"/{memory['code']}" if memory.get("code") else "")
    if memory.get("status") == "committed" and "memory" in (memory.get("changed") or ()):
        return "saved", status
    if memory.get("status") == "unconfirmed":
        return "in_doubt", status
    return "not_saved", status


def api_edit(key: str, note: str, timeout: float) -> tuple[str, str]:
    """Add `note` through the memory API as the person's own edit; return what they were told."""
    body, failure = post_json(key, "/api/memory/operations/",
                              {"operations": [{"target": "memory", "action": "add", "content": note}]}, timeout)
    if failure is not None:
        told, detail = failure
        # The API's own answers for a COMMIT whose answer was lost: confirmed not stored, or unknown.
        if detail.endswith(":connection_lost"):
            return "not_saved", detail
        if detail.endswith(":unconfirmed"):
            return "in_doubt", detail
        return told, detail
    outcome = str(body.get("outcome") or "?")
    if outcome == "committed" and "memory" in (body.get("changed") or ()):
        return "saved", outcome
    return "not_saved", outcome


def socket_pair(session_key: str, contents: tuple[str, str], timeout: float) -> list[tuple[str, str]]:
    """Two sockets of one person through haproxy, each sending a turn at once; what each was told."""
    from websockets.sync.client import connect

    told: list[tuple[str, str] | None] = [None, None]
    with ExitStack() as opened:
        try:
            sockets = [opened.enter_context(connect(SOCKET_URL, origin="http://127.0.0.1:8100", open_timeout=10,
                                                    additional_headers={"Cookie": f"sessionid={session_key}"}))
                       for _ in contents]
        except Exception as error:
            # Refused at the handshake (an HTTP status: a worker that could not check the session), or no answer.
            status = getattr(getattr(error, "response", None), "status_code", None)
            return [("failed", f"socket_not_opened:{status or type(error).__name__}")] * len(contents)
        _pair_turns(sockets, contents, told, timeout)
    return [answer or ("no_answer", "socket:no_frame") for answer in told]


def _pair_turns(sockets: list, contents: tuple[str, str], told: list, timeout: float) -> None:
    """Send each socket its turn at once, and wait for each one's answer (in `told`)."""

    def one(index: int) -> None:
        socket = sockets[index]
        try:
            socket.send(json.dumps({"type": "user_message", "content": contents[index], "conversation_id": None}))
            deadline = time.monotonic() + timeout
            while True:
                frame = json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
                if frame.get("type") in ("turn_completed", "turn_failed"):
                    break
                if frame.get("type") == "error":
                    told[index] = ("failed", f"error:{frame.get('code')}")
                    return
        except Exception as error:  # the socket closed under the turn, or no answer in time: nobody said
            told[index] = ("no_answer", f"socket:{type(error).__name__}")
            return
        memory = frame.get("memory") or {}
        status = memory.get("status", "?") + (f"/{memory['code']}" if memory.get("code") else "")
        if frame["type"] == "turn_completed" and memory.get("status") == "committed" \
                and "memory" in (memory.get("changed") or ()):
            told[index] = ("saved", status)
        elif memory.get("status") == "unconfirmed":
            told[index] = ("in_doubt", status)
        elif frame["type"] == "turn_failed":
            told[index] = ("failed", f"turn_failed:{frame.get('code')}/{status}")
        else:
            told[index] = ("not_saved", status)

    threads = [threading.Thread(target=one, args=(index,), daemon=True) for index in range(len(contents))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)


def post_json(key: str, path: str, payload: dict, timeout: float) -> tuple[dict, tuple[str, str] | None]:
    """POST through haproxy with the person's token and a fresh Idempotency-Key: (body, None) or ({}, told)."""
    request = urllib.request.Request(
        f"{BALANCER}{path}", method="POST", data=json.dumps(payload).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json",
                 "Idempotency-Key": secrets.token_hex(16)},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response), None
    except urllib.error.HTTPError as error:
        try:
            code = json.loads(error.read() or b"{}").get("code", "") or "-"
        except Exception:
            code = "not_json"
        if code == "not_json" and error.code in (502, 504):
            # haproxy's own answer: the worker died or went silent under the request. Nobody said
            # whether anything was saved.
            return {}, ("no_answer", f"{error.code}:balancer")
        if code == "not_json" and error.code == 503:
            return {}, ("failed", "503:balancer_no_worker")  # haproxy had no worker to send it to
        return {}, ("failed", f"{error.code}:{code}")
    except Exception as error:  # the connection broke, or no answer in time
        reason = getattr(error, "reason", None)
        return {}, ("no_answer", type(reason if isinstance(reason, BaseException) else error).__name__)


class Sockets:
    """One chat socket per person through haproxy, kept open (reopened if closed), recording memory_changed."""

    def __init__(self, people, clock, stop: threading.Event):
        self.people, self.clock, self.stop = people, clock, stop
        self.updates: dict[int, list[float]] = defaultdict(list)
        self.opened = 0
        self.closed: Counter = Counter()
        self.open_failures: Counter = Counter()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.ready = threading.Event()

    async def _main(self):
        await asyncio.gather(*(self._person(i, p["session"]) for i, p in enumerate(self.people)))

    async def _person(self, index: int, session_key: str):
        from websockets.asyncio.client import connect

        first = True
        while not self.stop.is_set():
            try:
                async with connect(SOCKET_URL, origin="http://127.0.0.1:8100", open_timeout=10,
                                   additional_headers={"Cookie": f"sessionid={session_key}"},
                                   ping_interval=None) as socket:
                    self.opened += 1
                    if first:
                        first = False
                        if self.opened >= len(self.people):
                            self.ready.set()
                    while not self.stop.is_set():
                        try:
                            frame = await asyncio.wait_for(socket.recv(), 0.5)
                        except asyncio.TimeoutError:
                            continue
                        if '"memory_changed"' in frame:
                            self.updates[index].append(self.clock())
                    await socket.close()
                    return
            except Exception as error:
                if self.stop.is_set():
                    return
                code = getattr(getattr(error, "rcvd", None), "code", None)
                (self.closed if not first else self.open_failures)[str(code or type(error).__name__)] += 1
                await asyncio.sleep(0.5)


class Readiness:
    """Every worker's /readyz, asked directly every 0.5 s: when it said what (names of failing checks)."""

    def __init__(self, clock, stop: threading.Event):
        self.clock, self.stop = clock, stop
        self.failing: list[tuple[float, int, str]] = []  # (when, port, "database,channel_layer" or error)
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self.stop.is_set():
            for port in DAPHNE_PORTS:
                when = self.clock()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=3):
                        continue
                except urllib.error.HTTPError as error:
                    try:
                        said = ",".join(json.loads(error.read()).get("failing", [])) or str(error.code)
                    except Exception:
                        said = str(error.code)
                except Exception as error:
                    said = f"down:{type(error).__name__}"
                self.failing.append((when, port, said))
            time.sleep(0.5)

    def summary(self, at: float | None) -> dict:
        said = Counter(name for _, _, name in self.failing)
        times = [when for when, _, _ in self.failing]
        return {"polls_failing_by_answer": dict(said),
                "first_s": round(min(times) - at, 2) if times and at is not None else None,
                "last_s": round(max(times) - at, 2) if times and at is not None else None}


# --- the drill --------------------------------------------------------------------
def run_drill(name: str, args) -> int:
    from django.db import connections

    started = time.monotonic()

    def clock() -> float:
        return time.monotonic() - started

    fault = FAULTS[name](args, clock, cluster_env())
    shape = fault.prepare()
    run = secrets.token_hex(3)
    people = create_people(args.people, run)
    connections.close_all()
    log(f"{name} drill {run}: {args.people} people through haproxy {BALANCER}, one socket each; {shape}; "
        f"the fault after {args.kill_after:g} s of load")

    outcomes: list[Outcome] = []
    lock = threading.Lock()
    stop = threading.Event()
    first_commit: dict[str, float] = {}
    started = time.monotonic()
    sockets_stop = threading.Event()  # after the last turn's answer, so its live update is seen
    sockets = Sockets(people, clock, sockets_stop)
    sockets.thread.start()
    sockets.ready.wait(30)
    started = time.monotonic()  # the load's clock starts with every socket open

    def fault_time() -> float | None:
        # After a repeated fault, the commit that counts follows the last one.
        return fault.times.get("last", fault.times.get("at")) if fault.done.is_set() else None

    def person(index: int, key: str, session_key: str) -> None:
        for turn in range(args.max_turns):
            if stop.is_set():
                return
            kind = MIX[(index + turn) % len(MIX)] if args.mix else "rest"
            notes = [f"drill note {run}-{index}-{turn}-{part}{secrets.token_hex(3)}"
                     for part in (("a", "b") if kind == "socket_pair" else ("",))]
            sent = clock()
            if kind == "socket_pair":
                answers = socket_pair(session_key, tuple(f"remember: {note}" for note in notes),
                                      args.request_timeout)
                kinds = ["socket"] * len(notes)
            elif kind == "api":
                answers, kinds = [api_edit(key, notes[0], args.request_timeout)], ["api"]
            elif kind == "plain":
                told, detail = take_turn(key, PLAIN, args.request_timeout)
                answers, kinds, notes = [("answered" if told != "failed" and told != "no_answer" else told,
                                          detail)], ["plain"], [""]
            else:
                answers, kinds = [take_turn(key, f"remember: {notes[0]}", args.request_timeout)], ["rest"]
            received = clock()
            with lock:
                for (told, detail), note, made in zip(answers, notes, kinds):
                    outcomes.append(Outcome(index, turn, sent, received, told, detail, note=note, kind=made))
                    at = fault_time()
                    if told == "saved" and at is not None and sent >= at and "first" not in first_commit:
                        first_commit["first"] = received
            time.sleep(args.think)

    threads = [threading.Thread(target=person, args=(i, p["token"], p["session"]), daemon=True)
               for i, p in enumerate(people)]
    for thread in threads:
        thread.start()

    def watcher() -> None:
        while not stop.is_set():
            if "at" in fault.times:
                fault.watch()
            time.sleep(0.2)

    watching = threading.Thread(target=watcher, daemon=True)
    watching.start()
    time.sleep(args.kill_after)
    injecting = threading.Thread(target=fault.inject, daemon=True)
    injecting.start()

    def first_live_update_after() -> float | None:
        at = fault_time()
        if at is None:
            return None
        with lock:
            saved = [o for o in outcomes if o.told == "saved" and o.sent >= at]
        return min((t for o in saved for t in sockets.updates.get(o.person, ()) if o.sent <= t <= o.received + 2),
                   default=None)

    readiness = Readiness(clock, stop)
    readiness.thread.start()
    while True:
        now = clock()
        recovered = first_commit.get("first") if fault.recovery == "commit" else first_live_update_after()
        if recovered is not None and now - recovered >= args.after:
            break
        if now >= args.deadline or not any(thread.is_alive() for thread in threads):
            break
        time.sleep(0.2)
    injecting.join(max(1.0, args.deadline - clock()))
    stop.set()
    for thread in threads:
        thread.join(args.request_timeout + 5)
    watching.join(2)
    time.sleep(1)
    sockets_stop.set()
    sockets.thread.join(5)
    readiness.thread.join(5)
    load_seconds = clock()
    fault.recover()

    # Every person's memory, events and versions, read on the leader itself (not through any pooler).
    current = wait_until(lambda: (lambda m: m if m and m.get("state") == "running" else None)(leader()), 60, 0.5)
    if current is None:
        print("No leader after the drill: memory cannot be read.", file=sys.stderr)
        return 1
    truth = read_truth(current, people, run)
    if truth is None:
        return 1
    for outcome in outcomes:
        if not outcome.note:  # a plain turn: nothing to look for
            continue
        outcome.stored = any(outcome.note in entry for entry in truth["notes"][outcome.person])
        sent_after = outcome.sent
        outcome.live_update = next((t for t in sockets.updates.get(outcome.person, ())
                                    if sent_after <= t <= outcome.received + 2), None)

    at = fault.times.get("at")
    told = Counter(o.told for o in outcomes)
    lost = [o for o in outcomes if o.told == "saved" and not o.stored]
    by_kind = {kind: dict(Counter(o.told for o in outcomes if o.kind == kind))
               for kind in sorted({o.kind for o in outcomes})}
    lies = [o for o in outcomes if o.told in ("not_saved", "failed") and o.stored]
    in_doubt = [o for o in outcomes if o.told == "in_doubt"]
    no_answer = [o for o in outcomes if o.told == "no_answer"]
    failures = Counter(o.detail for o in outcomes if o.told in ("failed", "no_answer"))
    not_saved = Counter(o.detail for o in outcomes if o.told == "not_saved")
    after_fault = [o for o in outcomes if at is not None and o.sent >= at]
    saved_after = [o.received for o in outcomes if o.told == "saved" and at is not None and o.received >= at]
    in_flight = [o for o in outcomes if at is not None and o.sent < at <= o.received]
    before = [o.received - o.sent for o in outcomes if at is None or o.received < at]
    live_after = [o.live_update for o in after_fault if o.told == "saved" and o.live_update is not None]
    saved_after_no_live = [o for o in after_fault if o.told == "saved" and o.live_update is None]

    def since(t):
        return round(t - at, 2) if t is not None and at is not None else None

    figures = {
        "drill": name, "run": run, "people": args.people, "turns": len(outcomes),
        "load_seconds": round(load_seconds, 1),
        "told": dict(told), "told_by_kind": by_kind,
        "acknowledged_saves_lost": len(lost),
        "lies_the_other_way": len(lies),
        "in_doubt": len(in_doubt), "in_doubt_stored": sum(1 for o in in_doubt if o.stored),
        "no_answer": len(no_answer), "no_answer_stored": sum(1 for o in no_answer if o.stored),
        "partial_commits": truth["partial"],
        "cross_person": truth["cross"],
        "failures": dict(failures), "answered_not_saved": dict(not_saved),
        "turns_sent_after_fault": len(after_fault),
        "fault_to_first_saved_answer_s": since(min(saved_after, default=None)),
        "fault_to_first_commit_of_a_turn_sent_after_s": (
            round(first_commit["first"] - fault_time(), 2) if "first" in first_commit else None),
        "fault_to_first_live_update_s": since(min(live_after, default=None)),
        "saved_after_fault_without_live_update": len(saved_after_no_live),
        # Saved, by what the turn said about the person's other pages: `committed/not_announced`
        # says they were not told (the channel layer failed); a plain `committed` says they were.
        "saved_by_detail": dict(Counter(o.detail for o in outcomes if o.told == "saved")),
        "said_announced_but_no_live_update": sum(1 for o in outcomes if o.told == "saved"
                                                 and o.detail == "committed" and o.live_update is None),
        "sockets_opened": sockets.opened, "sockets_closed": dict(sockets.closed),
        "sockets_not_opened": dict(sockets.open_failures),
        "in_flight_at_fault": len(in_flight),
        "in_flight_longest_wait_s": round(max((o.received - o.sent for o in in_flight), default=0), 2),
        "turn_seconds_before_fault_p50": round(statistics.median(before), 2) if before else None,
        "leader_after": current["name"],
        "readyz_not_ready": readiness.summary(at),
        "fault_times_s": {key: since(value) for key, value in fault.times.items()},
        **fault.facts,
    }
    out = CLUSTER / "drills" / f"{name}-{run}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    records = [{k: v for k, v in asdict(o).items() if k != "note"} for o in outcomes]
    out.write_text(json.dumps({"figures": figures, "outcomes": records}, indent=1))

    log(f"  turns: {len(outcomes)} in {load_seconds:.1f} s ({len(after_fault)} sent after the fault)")
    log(f"  told: saved {told['saved']}, answered not saved {told['not_saved']}, in doubt {told['in_doubt']}, "
        f"failed {told['failed']}, no answer {told['no_answer']}")
    log(f"  by kind: {json.dumps(by_kind)}")
    log(f"  fault: {json.dumps(figures['fault_times_s'])}; {json.dumps(fault.facts)}")
    log(f"  fault -> first saved answer {figures['fault_to_first_saved_answer_s']} s "
        f"(to a turn sent after the {'last ' if 'last' in fault.times else ''}fault: "
        f"{figures['fault_to_first_commit_of_a_turn_sent_after_s']} s); "
        f"fault -> first live update {figures['fault_to_first_live_update_s']} s")
    log(f"  in flight at the fault: {len(in_flight)}, longest wait {figures['in_flight_longest_wait_s']} s; "
        f"turn time before the fault, p50: {figures['turn_seconds_before_fault_p50']} s")
    log(f"  acknowledged saves lost: {len(lost)} (must be 0)")
    log(f"  lies the other way (told not saved, but stored): {len(lies)} (must be 0)"
        + (f" ({', '.join(sorted(set(o.detail for o in lies)))})" if lies else ""))
    log(f"  in doubt (could not be confirmed): {len(in_doubt)}, of which stored: {figures['in_doubt_stored']}")
    log(f"  no answer: {len(no_answer)}, of which stored: {figures['no_answer_stored']}")
    log(f"  partial commits: {truth['partial']} (must be 0); cross-person access: {truth['cross']} (must be 0)")
    log(f"  failed turns by code: {dict(failures) or 'none'}")
    log(f"  answered, not saved: {dict(not_saved) or 'none'}")
    log(f"  sockets: {sockets.opened} opened, closed meanwhile {dict(sockets.closed) or 'none'}"
        + (f", not opened {dict(sockets.open_failures)}" if sockets.open_failures else "")
        + f"; saved turns after the fault without a live update: {len(saved_after_no_live)}")
    log(f"  saved, by detail: {figures['saved_by_detail']}; said announced, but no live update seen: "
        f"{figures['said_announced_but_no_live_update']}")
    log(f"  workers' /readyz while not ready (polled every 0.5 s): {json.dumps(figures['readyz_not_ready'])}")
    log(f"  outcomes: {out}")
    problems = fault.ok()
    if lost:
        problems.append("acknowledged saves lost")
    if lies:
        problems.append("lies the other way")
    if truth["partial"] or truth["cross"]:
        problems.append("partial commits or cross-person access")
    if "first" not in first_commit:
        problems.append("no commit after the fault")
    if fault.recovery == "live_update" and figures["fault_to_first_live_update_s"] is None:
        problems.append("no live update after the fault")
    if problems:
        log(f"  FAILED: {'; '.join(problems)}")
    return 1 if problems else 0


def read_truth(current: dict, people: list[dict], run: str) -> dict | None:
    """Notes stored per person, partial commits and cross-person notes, read on the leader's own port."""
    from django.db import connections

    from agentmemory import store
    from agentmemory.conf import memory_settings
    from agentmemory.models import MemoryDocument, MemoryEvent, MemoryVersion
    from agentmemory.rules import parse_document

    settings = connections["default"].settings_dict
    saved = dict(HOST=settings["HOST"], PORT=settings["PORT"])
    settings.update(HOST="127.0.0.1", PORT=str(current["port"]))
    connections["default"].close()
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery()")
            if cursor.fetchone()[0]:
                print(f"{current['name']} is in recovery: not the leader", file=sys.stderr)
                return None
        notes, partial, cross = {}, 0, 0
        kept = memory_settings().versions_kept
        prefix = f"drill note {run}-"
        for index, person in enumerate(people):
            user_id = person["user_id"]
            entries = store.load_snapshot(user_id=user_id).memory
            mine = [entry for entry in entries if f"{prefix}{index}-" in entry]
            notes[index] = entries
            cross += sum(1 for entry in entries if prefix in entry and entry not in mine)
            events = set(MemoryEvent.objects.filter(user_id=user_id, outcome="committed").values_list("id", flat=True))
            versions = list(MemoryVersion.objects.filter(user_id=user_id, memory_type="memory")
                            .order_by("id").values_list("event_id", "before", "after"))
            versioned = {event_id for event_id, _, _ in versions}
            if len(versions) >= kept:
                # Older versions were pruned (AGENTMEMORY VERSIONS_KEPT): compare from the oldest kept on.
                events = {event_id for event_id in events if event_id >= min(versioned)}
            # A committed change without its version, or a version without its committed event.
            partial += len(events - versioned) + len(versioned - events)
            # A stored note that no committed change wrote (or that was there before the oldest kept one).
            written = [entry for _, _, after in versions for entry in parse_document(after)]
            if versions and len(versions) >= kept:
                written += parse_document(versions[0][1])
            partial += sum(1 for entry in mine if entry not in written)
            # The document is what its latest change left.
            document = (MemoryDocument.objects.filter(user_id=user_id, memory_type="memory")
                        .values_list("content", flat=True).first() or "")
            if versions and versions[-1][2] != document:
                partial += 1
            # Another person's note in this person's versions.
            cross += sum(1 for entry in written if prefix in entry and f"{prefix}{index}-" not in entry)
        return {"notes": notes, "partial": partial, "cross": cross}
    finally:
        connections["default"].close()
        settings.update(saved)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("drill", nargs="*", help=f"drills to run, in order: {', '.join(FAULTS)} (or all); "
                                                  "default leader-kill")
    parser.add_argument("--drill", "--drills", dest="drills", default="",
                        help="comma-separated drills (the same as the positional names)")
    parser.add_argument("--repeat", type=int, default=1, help="run each drill this many times")
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument("--kill-after", type=float, default=5.0, help="seconds of load before the fault")
    parser.add_argument("--after", type=float, default=5.0,
                        help="seconds of load after the first commit that follows the (last) fault")
    parser.add_argument("--deadline", type=float, default=90.0, help="the load stops by then in any case")
    parser.add_argument("--max-turns", type=int, default=40, help="turns per person at most")
    parser.add_argument("--think", type=float, default=0.2, help="seconds between one person's turns")
    parser.add_argument("--no-mix", dest="mix", action="store_false",
                        help="only `remember:` turns over REST (default: the mix of REST and socket turns, "
                             "concurrent socket pairs, memory API edits and plain turns)")
    parser.add_argument("--request-timeout", type=float, default=30.0)
    parser.add_argument("--standby-wait", type=float, default=90.0,
                        help="seconds to wait for a streaming synchronous standby before a leader fault")
    parser.add_argument("--rejoin-wait", type=float, default=60.0,
                        help="seconds to wait, after, for the old leader to come back as synchronous standby "
                             "(0: don't)")
    parser.add_argument("--kills", type=int, default=20, help="worker-kill: how many kills")
    parser.add_argument("--kill-every", type=float, default=2.0, help="worker-kill: seconds between kills")
    parser.add_argument("--check-auth", action="store_true",
                        help="run no drill: check every control plane refuses a request without its credential")
    args = parser.parse_args()
    if args.check_auth:
        return check_auth()
    names = [n for part in [*args.drill, *args.drills.split(",")] for n in part.split(",") if n.strip()]
    names = [n.strip() for n in names] or ["leader-kill"]
    if names == ["all"]:
        names = list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        parser.error(f"unknown drill {', '.join(unknown)}: one of {', '.join(FAULTS)} or all")

    env = cluster_env()
    os.environ.update(env)
    os.environ.pop("OPENAI_API_KEY", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    status = 0
    for name in names:
        for _ in range(args.repeat):
            status |= run_drill(name, args)
    return status


if __name__ == "__main__":
    sys.exit(main())
