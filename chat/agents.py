"""The process's two agents, built once, and their disposal at shutdown.

`chat_agent()` serves authenticated people: it registers the memory tool
and conversation search only when the rollout flag is on (a turn offers
them only while memory is on for it). `memory_free_agent()` serves untrusted
traffic (the evaluation route): no tool, no memory block, ever. Each is
built behind an asyncio lock, so two cold requests share one instance and
one client. The registry keys agents by the flag and the model settings in
force, so flipping the flag (or `override_settings` in a test) gets the
matching agent instead of a stale one.

Shutdown. Daphne (4.2) does not speak the ASGI lifespan protocol, so the
disposal runs from a Twisted "before shutdown" trigger, registered on the
first build when the Twisted reactor is running (daphne's SIGINT/SIGTERM
stop the reactor, which fires it on the live event loop). Servers that do
speak lifespan (uvicorn, hypercorn) reach `dispose()` through `lifespan_app`,
routed in config/asgi.py. `atexit` is a last resort for anything left open.
"""
from __future__ import annotations

import asyncio
import atexit
import logging
import sys
import weakref

from agentmemory.conf import memory_settings

from .agent import Agent
from .llm import LLM, ModelSettings, build_llm, model_settings

logger = logging.getLogger(__name__)

CHAT = "chat"
MEMORY_FREE = "memory_free"


class AgentRegistry:
    def __init__(self) -> None:
        self._agents: dict[tuple, Agent] = {}
        self._llms: dict[ModelSettings, LLM] = {}
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self.builds = 0  # since the last disposal; tests count cold builds with it
        self._shutdown_hooked = False

    def _lock(self) -> asyncio.Lock:
        # An asyncio.Lock belongs to one event loop; tests run one loop each.
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def get(self, kind: str) -> Agent:
        """Return the shared agent of `kind`, building it once."""
        config = model_settings()
        memory = kind == CHAT and memory_settings().enabled
        key = (kind, memory, config)
        agent = self._agents.get(key)
        if agent is not None:
            return agent
        async with self._lock():
            agent = self._agents.get(key)
            if agent is None:
                llm = self._llms.get(config)
                if llm is None:
                    # Building a client loads TLS settings and certificates: off the loop.
                    llm = self._llms[config] = await asyncio.to_thread(build_llm, config)
                # conversation_search rides on memory: the chat agent with the flag on, never memory-free.
                agent = self._agents[key] = Agent(name=kind, llm=llm, memory_tool=memory, search_tool=memory)
                self.builds += 1
                self._hook_shutdown()
        return agent

    async def aclose(self) -> None:
        """Close every client and forget the agents (they are rebuilt on demand)."""
        llms = list(self._llms.values())
        self._agents.clear()
        self._llms.clear()
        self.builds = 0
        for llm in llms:
            try:
                await llm.aclose()
            except Exception as exc:  # one failing close must not keep the others open
                logger.warning("model client not closed cleanly: %s", type(exc).__name__)

    @property
    def is_empty(self) -> bool:
        return not self._llms

    def _hook_shutdown(self) -> None:
        if self._shutdown_hooked:
            return
        reactor = sys.modules.get("twisted.internet.reactor")
        if reactor is not None and getattr(reactor, "running", False):
            reactor.addSystemEventTrigger("before", "shutdown", _dispose_on_reactor)
            self._shutdown_hooked = True


registry = AgentRegistry()


async def chat_agent() -> Agent:
    """Return the agent for authenticated people (memory tool when enabled)."""
    return await registry.get(CHAT)


async def memory_free_agent() -> Agent:
    """Return the agent for untrusted traffic: no memory tool, no memory block."""
    return await registry.get(MEMORY_FREE)


async def dispose() -> None:
    """Close both agents' model clients; called once at shutdown."""
    await registry.aclose()
    logger.info("chat agents disposed")


def _dispose_on_reactor():
    from twisted.internet.defer import Deferred

    # Daphne runs Twisted on asyncio; returning a Deferred makes shutdown wait.
    return Deferred.fromFuture(asyncio.ensure_future(dispose()))


async def lifespan_app(scope, receive, send) -> None:
    """The ASGI lifespan protocol, for servers that send it."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            try:
                await dispose()
            except Exception as exc:
                await send({"type": "lifespan.shutdown.failed", "message": type(exc).__name__})
            else:
                await send({"type": "lifespan.shutdown.complete"})
            return


@atexit.register
def _dispose_at_exit() -> None:
    if registry.is_empty:
        return
    try:
        asyncio.run(asyncio.wait_for(registry.aclose(), timeout=2))
    except Exception:  # the loop the clients used is gone; the OS closes the sockets
        pass
