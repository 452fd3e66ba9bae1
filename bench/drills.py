"""Fault drills against the production shape that `make cluster` runs.

It owns one question: when a part of the deployment dies mid-load, is every
person told the truth about their memory? The drill here is the leader kill:

- N people (default 20), each with an API token, send `remember:` turns
  through haproxy (`POST /api/chat/turns/` on http://127.0.0.1:8100), one at a
  time each, every note a unique token, with the offline demo model (the
  workers have no OPENAI_API_KEY). Every answer is recorded as the person
  was told it: saved (200, memory `committed`), answered but not saved (200,
  any other memory outcome, e.g. `discarded/commit_failed`), failed (an HTTP
  error with its code: the turn said nothing was saved), or no answer at all
  (the connection broke or timed out).
- After --kill-after seconds the PostgreSQL leader's postmaster gets SIGKILL
  (found through Patroni's REST API and its own postmaster.pid). Patroni
  (primary_start_timeout 0, synchronous_mode) promotes the synchronous
  standby; haproxy's leader port follows Patroni's /primary, PgBouncer
  reconnects through it.
- The load stops by itself: --after seconds after the first turn sent after
  the fault that commits, or at --deadline, or after --max-turns per person.
- Then every person's memory is read on the new leader, directly on its
  port (checked not in recovery), and compared with what each was told:

    acknowledged saves lost   told saved, not stored (must be 0)
    lies the other way        told not saved (answered or failed), but stored
    no answer                 how many, and how many of those were stored
    failed turns              by HTTP status and code
    fault -> new leader       when Patroni first names another leader
    fault -> first commit     the first answer after the fault that told a person "saved"
                              (an upper bound: the commit came just before it), and the
                              first such answer to a turn sent after the fault
    in flight at the fault    turns sent before it and answered after, their longest wait

It prints figures only (no memory content) and writes every outcome, without
note text, to .cache/cluster/drills/<run>.json. Exit status 1 when a save was
lost, no failover happened or nothing committed after the fault.

    make cluster && make drills [ARGS="--people 20 --kill-after 5 --after 5"]
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / ".cache" / "cluster"
REST_PORTS = (8011, 8012)
BALANCER = "http://127.0.0.1:8100"


@dataclass
class Outcome:
    person: int
    turn: int
    sent: float  # seconds since the load started
    received: float
    told: str  # saved | not_saved | failed | no_answer
    detail: str  # memory status/code, HTTP status:code, or the transport error's type
    stored: bool | None = None
    note: str = ""  # the unique token; left out of the written record


# --- the cluster ------------------------------------------------------------------
def cluster_env() -> dict[str, str]:
    """Return the workers' environment (app.env) that `make cluster` wrote."""
    path = CLUSTER / "app.env"
    if not path.is_file():
        raise SystemExit("No cluster: run `make cluster` first (.cache/cluster/app.env is missing).")
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            env[key] = value
    return env


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
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    if str(data_dir) not in cmdline:
        raise RuntimeError(f"pid {pid} is not {node}'s postmaster")
    return pid


# --- people -----------------------------------------------------------------------
def create_people(count: int, run: str) -> list[tuple[int, str]]:
    """Create `count` accounts with API tokens through PgBouncer; return (user id, key)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    people = []
    for index in range(count):
        user = get_user_model()._default_manager.create(username=f"drill-{run}-{index}")
        user.set_unusable_password()
        user.save(update_fields=["password"])
        people.append((user.pk, Token.objects.create(user=user).key))
    return people


def take_turn(key: str, content: str, timeout: float) -> tuple[str, str]:
    """Send one turn; return what the person was told: (told, detail)."""
    request = urllib.request.Request(
        f"{BALANCER}/api/chat/turns/", method="POST",
        data=json.dumps({"content": content, "conversation_id": None}).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.load(response)
    except urllib.error.HTTPError as error:
        code = ""
        try:
            code = json.loads(error.read() or b"{}").get("code", "")
        except Exception:
            code = "not_json"
        return "failed", f"{error.code}:{code or '-'}"
    except Exception as error:  # the connection broke, or no answer in time
        reason = getattr(error, "reason", None)
        return "no_answer", type(reason if isinstance(reason, BaseException) else error).__name__
    memory = body.get("memory") or {}
    status = memory.get("status", "?") + (f"/{memory['code']}" if memory.get("code") else "")
    if memory.get("status") == "committed" and "memory" in (memory.get("changed") or ()):
        return "saved", status
    return "not_saved", status


# --- the drill --------------------------------------------------------------------
def leader_kill(args) -> int:
    env = cluster_env()
    os.environ.update({key: value for key, value in env.items()})
    os.environ.pop("OPENAI_API_KEY", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connections

    pair = wait_for_sync_standby(args.standby_wait)
    if pair is None:
        print("No leader with a streaming synchronous standby: a leader kill would not fail over. "
              "Check `make cluster ARGS=--status`.", file=sys.stderr)
        return 2
    old_leader, standby = pair
    run = secrets.token_hex(3)
    people = create_people(args.people, run)
    connections.close_all()
    print(f"leader-kill drill {run}: {args.people} people through haproxy {BALANCER}; "
          f"leader {old_leader['name']} (port {old_leader['port']}), synchronous standby {standby['name']}; "
          f"SIGKILL of the leader's postmaster after {args.kill_after:g} s", flush=True)

    outcomes: list[Outcome] = []
    lock = threading.Lock()
    stop = threading.Event()
    started = time.monotonic()
    fault: dict[str, float] = {}

    def clock() -> float:
        return time.monotonic() - started

    def person(index: int, key: str) -> None:
        for turn in range(args.max_turns):
            if stop.is_set():
                return
            note = f"drill note {run}-{index}-{turn}-{secrets.token_hex(3)}"
            sent = clock()
            told, detail = take_turn(key, f"remember: {note}", args.request_timeout)
            received = clock()
            with lock:
                outcomes.append(Outcome(index, turn, sent, received, told, detail, note=note))
                if told == "saved" and "at" in fault and sent >= fault["at"] and "first_commit" not in fault:
                    fault["first_commit"] = received
            time.sleep(args.think)

    def watch_leader() -> None:
        while not stop.is_set():
            current = leader()
            if "at" in fault and current and current["name"] != old_leader["name"] and "new_leader" not in fault:
                fault["new_leader"] = clock()
                fault["new_leader_name"] = current["name"]
            time.sleep(0.2)

    threads = [threading.Thread(target=person, args=(i, key), daemon=True) for i, (_, key) in enumerate(people)]
    watcher = threading.Thread(target=watch_leader, daemon=True)
    for thread in threads:
        thread.start()
    watcher.start()

    time.sleep(args.kill_after)
    pid = postmaster_pid(old_leader["name"])
    fault["at"] = clock()
    os.kill(pid, signal.SIGKILL)
    print(f"  {fault['at']:.1f} s: SIGKILL to {old_leader['name']}'s postmaster (pid {pid})", flush=True)

    while True:
        now = clock()
        if "first_commit" in fault and now - fault["first_commit"] >= args.after:
            break
        if now >= args.deadline or not any(thread.is_alive() for thread in threads):
            break
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join(args.request_timeout + 5)
    watcher.join(2)
    load_seconds = clock()

    # Every person's memory, read on the leader itself (not through any pooler).
    new_leader = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and new_leader is None:
        current = leader()
        if current and current.get("state") == "running":
            new_leader = current
        else:
            time.sleep(0.5)
    if new_leader is None:
        print("No leader after the drill: memory cannot be read.", file=sys.stderr)
        return 1
    from agentmemory import store

    settings = connections["default"].settings_dict
    settings.update(HOST="127.0.0.1", PORT=str(new_leader["port"]))
    connections["default"].close()
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery()")
        in_recovery = cursor.fetchone()[0]
    if in_recovery:
        print(f"{new_leader['name']} is in recovery: not the leader", file=sys.stderr)
        return 1
    memory = {index: store.load_snapshot(user_id=user_id).memory for index, (user_id, _) in enumerate(people)}
    for outcome in outcomes:
        outcome.stored = any(outcome.note in entry for entry in memory[outcome.person])
    connections.close_all()

    told = Counter(o.told for o in outcomes)
    lost = [o for o in outcomes if o.told == "saved" and not o.stored]
    lies = [o for o in outcomes if o.told in ("not_saved", "failed") and o.stored]
    no_answer = [o for o in outcomes if o.told == "no_answer"]
    failures = Counter(o.detail for o in outcomes if o.told in ("failed", "no_answer"))
    not_saved = Counter(o.detail for o in outcomes if o.told == "not_saved")
    after_fault = [o for o in outcomes if o.sent >= fault["at"]]
    saved_after = [o.received for o in outcomes if o.told == "saved" and o.received >= fault["at"]]
    in_flight = [o for o in outcomes if o.sent < fault["at"] <= o.received]
    before = [o.received - o.sent for o in outcomes if o.received < fault["at"]]

    rejoined = wait_for_sync_standby(args.rejoin_wait) if args.rejoin_wait else None
    figures = {
        "run": run, "people": args.people, "turns": len(outcomes), "load_seconds": round(load_seconds, 1),
        "old_leader": old_leader["name"], "new_leader": new_leader["name"],
        "timeline": new_leader.get("timeline"),
        "told": dict(told),
        "acknowledged_saves_lost": len(lost),
        "lies_the_other_way": len(lies),
        "no_answer": len(no_answer), "no_answer_stored": sum(1 for o in no_answer if o.stored),
        "failures": dict(failures), "answered_not_saved": dict(not_saved),
        "turns_sent_after_fault": len(after_fault),
        "fault_to_new_leader_s": round(fault["new_leader"] - fault["at"], 2) if "new_leader" in fault else None,
        "fault_to_first_saved_answer_s": round(min(saved_after) - fault["at"], 2) if saved_after else None,
        "fault_to_first_commit_of_a_turn_sent_after_s": (
            round(fault["first_commit"] - fault["at"], 2) if "first_commit" in fault else None),
        "in_flight_at_fault": len(in_flight),
        "in_flight_longest_wait_s": round(max((o.received - o.sent for o in in_flight), default=0), 2),
        "turn_seconds_before_fault_p50": round(statistics.median(before), 2) if before else None,
        "old_leader_back_as_sync_standby": bool(rejoined and rejoined[1]["name"] == old_leader["name"]),
    }
    out = CLUSTER / "drills" / f"leader-kill-{run}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    records = [{k: v for k, v in asdict(o).items() if k != "note"} for o in outcomes]
    out.write_text(json.dumps({"figures": figures, "outcomes": records}, indent=1))

    print(f"  turns: {len(outcomes)} in {load_seconds:.1f} s ({len(after_fault)} sent after the fault)")
    print(f"  told: saved {told['saved']}, answered not saved {told['not_saved']}, "
          f"failed {told['failed']}, no answer {told['no_answer']}")
    print(f"  leader: {old_leader['name']} -> {new_leader['name']} (timeline {new_leader.get('timeline')}); "
          f"fault -> new leader {figures['fault_to_new_leader_s']} s, "
          f"fault -> first saved answer {figures['fault_to_first_saved_answer_s']} s "
          f"(to a turn sent after the fault: {figures['fault_to_first_commit_of_a_turn_sent_after_s']} s)")
    print(f"  in flight at the fault: {len(in_flight)}, longest wait {figures['in_flight_longest_wait_s']} s; "
          f"turn time before the fault, p50: {figures['turn_seconds_before_fault_p50']} s")
    print(f"  acknowledged saves lost: {len(lost)} (must be 0)")
    print(f"  lies the other way (told not saved, but stored): {len(lies)}"
          + (f" ({', '.join(sorted(set(o.detail for o in lies)))})" if lies else ""))
    print(f"  no answer: {len(no_answer)}, of which stored: {figures['no_answer_stored']}")
    print(f"  failed turns by code: {dict(failures) or 'none'}")
    print(f"  answered, not saved: {dict(not_saved) or 'none'}")
    if args.rejoin_wait:
        print(f"  old leader back as synchronous standby within {args.rejoin_wait:g} s: "
              f"{'yes' if figures['old_leader_back_as_sync_standby'] else 'no'}")
    print(f"  outcomes: {out.relative_to(ROOT)}")
    broken = lost or "first_commit" not in fault or new_leader["name"] == old_leader["name"]
    return 1 if broken else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("drill", nargs="?", default="leader-kill", choices=["leader-kill"])
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument("--kill-after", type=float, default=5.0, help="seconds of load before the kill")
    parser.add_argument("--after", type=float, default=5.0,
                        help="seconds of load after the first commit that follows the fault")
    parser.add_argument("--deadline", type=float, default=90.0, help="the load stops by then in any case")
    parser.add_argument("--max-turns", type=int, default=40, help="turns per person at most")
    parser.add_argument("--think", type=float, default=0.2, help="seconds between one person's turns")
    parser.add_argument("--request-timeout", type=float, default=30.0)
    parser.add_argument("--standby-wait", type=float, default=90.0,
                        help="seconds to wait for a streaming synchronous standby before the kill")
    parser.add_argument("--rejoin-wait", type=float, default=60.0,
                        help="seconds to wait, after, for the old leader to come back as synchronous standby (0: don't)")
    args = parser.parse_args()
    return leader_kill(args)


if __name__ == "__main__":
    sys.exit(main())
