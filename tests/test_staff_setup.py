"""The README's staff set-up, run as written (issue 54): after `make run`'s set-up, each command of "Staff accounts"
works with no DEBUG and no SECRET_KEY in the environment, against a database of its own; the group holds exactly
the two permissions, the account is staff in it, and the token is the account's."""
import os
import pty
import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ANSWERS = {  # createsuperuser's questions, as a person would answer them at the terminal
    "Username": "operator",
    "Email address": "operator@example.com",
    "Password": "Tall-Quiet-Harbour-83",
    "Password (again)": "Tall-Quiet-Harbour-83",
}


def staff_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Staff accounts", 1)[1].split("\n#", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def environment(database: Path) -> dict:
    env = {key: value for key, value in os.environ.items()
           if key not in ("DEBUG", "SECRET_KEY", "TEST_DB_NAME", "DATABASE_URL", "REDIS_URL", "MAKEFLAGS", "MFLAGS")}
    env["DATABASE_URL"] = f"sqlite:///{database}"
    return env


def run_at_a_terminal(command: str, env: dict, answers: dict, timeout: float = 60) -> tuple[int, str]:
    """Run `command` with a terminal as its input and output, answering each question as a person would."""
    main, child = pty.openpty()
    process = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, stdin=child, stdout=child, stderr=child,
                               start_new_session=True)
    os.close(child)
    seen, asked, deadline = "", set(), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(main, 4096).decode(errors="replace")
                except OSError:
                    break  # the command ended and closed its terminal
                if not chunk:
                    break
                seen += chunk
                for question, answer in answers.items():
                    # "Password:" and "Password (again):" each once, in the order asked
                    if question not in asked and re.search(re.escape(question) + r"[^:\n]*:\s*$", seen):
                        asked.add(question)
                        os.write(main, (answer + "\n").encode())
            elif process.poll() is not None:
                break
        return process.wait(timeout=max(1, deadline - time.monotonic())), seen
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal for createsuperuser's questions")
def test_the_readmes_staff_commands_work_as_written(tmp_path):
    if not (ROOT / ".venv" / "bin" / "python").exists():
        pytest.skip("needs the checkout's .venv (make run makes it)")
    database = tmp_path / "db.sqlite3"
    env = environment(database)
    # What `make run` did before: the database migrated, and the demo account bob (made here directly: the demo's
    # own command costs another start of Django).
    subprocess.run([str(ROOT / ".venv/bin/python"), "manage.py", "migrate", "--noinput"], cwd=ROOT, check=True,
                   env={**env, "DEBUG": "1"}, capture_output=True, timeout=300)
    with sqlite3.connect(database) as db:
        db.execute("INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff, "
                   "is_active, date_joined) VALUES ('!', 0, 'bob', '', '', '', 0, 1, '2026-01-01 00:00:00')")
    commands = staff_commands()
    assert commands and all(command.startswith("make manage ARGS=") for command in commands)
    assert 'make manage ARGS="createsuperuser"' in commands
    printed = {}
    for command in commands:
        if "createsuperuser" in command:
            code, output = run_at_a_terminal(command, env, ANSWERS)
        else:
            done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=120)
            code, output = done.returncode, done.stdout + done.stderr
        assert code == 0, f"{command!r} failed: {output[-2000:]}"
        printed[command] = output

    with sqlite3.connect(database) as db:
        superuser = db.execute("SELECT is_superuser, is_staff FROM auth_user WHERE username = 'operator'").fetchone()
        assert superuser == (1, 1)
        permissions = {row[0] for row in db.execute(
            "SELECT p.codename FROM auth_group g JOIN auth_group_permissions gp ON gp.group_id = g.id "
            "JOIN auth_permission p ON p.id = gp.permission_id WHERE g.name = 'Memory support staff'")}
        assert permissions == {"review_memory_writes", "view_memory_content"}
        member = db.execute(
            "SELECT u.is_staff, u.is_superuser FROM auth_user u JOIN auth_user_groups ug ON ug.user_id = u.id "
            "JOIN auth_group g ON g.id = ug.group_id WHERE g.name = 'Memory support staff' AND u.username = 'bob'"
        ).fetchone()
        assert member == (1, 0)
        key = db.execute("SELECT t.key FROM authtoken_token t JOIN auth_user u ON u.id = t.user_id "
                         "WHERE u.username = 'bob'").fetchone()[0]
    assert key in printed['make manage ARGS="drf_create_token bob"']


def test_the_group_command_refuses_an_account_that_does_not_exist(db):
    from django.core.management import CommandError, call_command

    call_command("memory_support_staff")
    with pytest.raises(CommandError, match="no account named"):
        call_command("memory_support_staff", "--add", "nobody-here")


def test_a_member_opens_the_review_queue_and_the_dashboard_and_nothing_more(client, make_user):
    from django.core.management import call_command
    from django.urls import reverse

    member = make_user("dana")
    client.force_login(member)
    queue = reverse("admin:agentmemory_writereview_queue")
    dashboard = reverse("admin:agentmemory_writereview_dashboard")
    assert client.get(queue).status_code != 200  # not staff yet: the admin's login page
    call_command("memory_support_staff", "--add", "dana")
    call_command("memory_support_staff", "--add", "dana")  # again: nothing changes
    member.refresh_from_db()
    assert member.is_staff and not member.is_superuser and member.groups.count() == 1
    assert member.has_perms(["agentmemory.review_memory_writes", "agentmemory.view_memory_content"])
    assert not member.has_perm("agentmemory.erase_memory")
    assert client.get(queue).status_code == 200 and client.get(dashboard).status_code == 200
