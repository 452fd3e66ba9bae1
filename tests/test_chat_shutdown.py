"""Both agents' model clients are closed at shutdown: through the ASGI
lifespan protocol where the server speaks it, and through daphne's reactor
shutdown (daphne 4.2 does not speak lifespan)."""
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from chat.agents import chat_agent, memory_free_agent, registry
from tests.chat_helpers import fresh_agents  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent


async def test_lifespan_shutdown_closes_both_agents_clients():
    from config.asgi import application

    agent, free = await chat_agent(), await memory_free_agent()
    inbox: asyncio.Queue = asyncio.Queue()
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    for message in ({"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}):
        inbox.put_nowait(message)
    await asyncio.wait_for(application({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send), 5)

    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert agent.llm.client.is_closed() and free.llm.client.is_closed()
    assert registry.is_empty


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.multiprocess
def test_daphne_shutdown_disposes_the_agents(tmp_path):
    port = _free_port()
    env = {
        **os.environ, "EVAL_SERVICE_TOKEN": "shutdown-test-token", "OPENAI_API_KEY": "", "DEMO_MODEL_DELAY_MS": "0",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}", "LOG_LEVEL": "INFO", "ALLOWED_HOSTS": "127.0.0.1",
    }
    log = (tmp_path / "daphne.log").open("w+")
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"],
        cwd=ROOT, env=env, stdout=log, stderr=log,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "daphne did not start"
                time.sleep(0.1)
        # The memory-free eval route builds an agent without touching the database.
        response = httpx2.post(f"http://127.0.0.1:{port}/api/eval/turns/", json={"content": "hello"},
                               headers={"Authorization": "Bearer shutdown-test-token"}, timeout=10)
        assert response.status_code == 200, response.text
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    log.seek(0)
    assert "chat agents disposed" in log.read()
