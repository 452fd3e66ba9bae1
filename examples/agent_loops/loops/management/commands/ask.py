"""`manage.py ask ADAPTER USERNAME QUESTION`: one turn of an example agent, as that person.

ADAPTER is agents (the OpenAI Agents SDK), pydantic-ai or claude. With
OPENAI_API_KEY (agents, pydantic-ai) or ANTHROPIC_API_KEY (claude) set, the
turn goes to that API (OPENAI_BASE_URL / ANTHROPIC_BASE_URL choose another
endpoint; OPENAI_MODEL / ANTHROPIC_MODEL the model); without one, to an
offline demo model (loops/demo_model.py). Prints the answer and, in a plain
sentence, what happened to memory.
"""
from __future__ import annotations

import asyncio
import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from loops.demo_model import demo_server

ADAPTERS = ("agents", "pydantic-ai", "claude")


class Command(BaseCommand):
    help = "Ask an example agent (agents, pydantic-ai or claude) a question as one person; memory is theirs."

    def add_arguments(self, parser):
        parser.add_argument("adapter", choices=ADAPTERS)
        parser.add_argument("username")
        parser.add_argument("question")

    def handle(self, *args, adapter: str, username: str, question: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No account named {username!r}: create one with `manage.py createsuperuser` "
                               "or `manage.py shell`.")
        reply, outcome = asyncio.run(ask(adapter, user.pk, question))
        self.stdout.write(reply)
        self.stdout.write(f"Memory: {outcome.message}")


async def ask(adapter: str, user_id, question: str):
    key = os.environ.get("ANTHROPIC_API_KEY" if adapter == "claude" else "OPENAI_API_KEY", "")
    server = None if key else demo_server(adapter)
    try:
        if adapter == "claude":
            from anthropic import AsyncAnthropic

            from loops import claude_agent

            client = AsyncAnthropic(**({"base_url": server.anthropic_url, "api_key": "demo"} if server else {}))
            try:
                return await claude_agent.answer(client, user_id=user_id, question=question,
                                                 model=os.environ.get("ANTHROPIC_MODEL", "claude-sonnet-4-5"))
            finally:
                await client.close()
        from openai import AsyncOpenAI

        client = AsyncOpenAI(**({"base_url": server.openai_url, "api_key": "demo"} if server else {}))
        model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        try:
            if adapter == "agents":
                from agents import set_tracing_disabled

                from loops import agents_sdk

                if server is not None:
                    set_tracing_disabled(True)  # offline: no trace export to try

                return await agents_sdk.answer(agents_sdk.support_agent(client, model=model), user_id=user_id,
                                               question=question)
            from loops import pydantic_agent

            return await pydantic_agent.answer(pydantic_agent.support_agent(client, model=model), user_id=user_id,
                                               question=question)
        finally:
            await client.close()
    finally:
        if server is not None:
            server.stop()
