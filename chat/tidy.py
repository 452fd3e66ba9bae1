"""Tidy up's model request: AGENTMEMORY["TIDY_MODEL"] names `ask_model`.

`agentmemory.tidy` builds the messages (the rules, the entries as untrusted
data, no chat history) and reads the answer; this module only sends them to
the chat's configured model, through the same client as a chat turn
(`chat.llm.build_llm`: the configured OpenAI-compatible server, or the
offline demo model without a key) and the same streamed request
(`LLM.stream_chat`, with the output cap). The primary model answers; the
fallback model, when one is set, only if the primary failed. An answer that
did not finish is a failure; one cut off at the output cap ("length") says
so (`TidyAnswerCutOff`, with the text written before the cap), and
agentmemory.tidy asks once more with fewer words, then reads the last cut-off
answer for the notes it finished. The whole request is bounded by CHAT_TURN_TIMEOUT_SECONDS.

A tidy runs on the person's action, in a request's thread, not in a turn:
it builds its own client for the request and closes it afterwards (the
chat's shared client belongs to the server's event loop). Nothing of the
messages or the answer is logged.
"""
from __future__ import annotations

import asyncio
import logging
import threading

from django.conf import settings

from agentmemory.tidy import AnswerCutOff

from .llm import build_llm, model_settings

logger = logging.getLogger(__name__)


class TidyModelError(RuntimeError):
    """The model did not give a complete answer (an error, a timeout, an answer cut off)."""


class TidyAnswerCutOff(TidyModelError, AnswerCutOff):
    """The answer stopped at the output cap: `agentmemory.tidy` asks once more, with fewer words."""


def ask_model(messages: list[dict]) -> str:
    """Run one Chat Completions request with `messages`; return the model's complete text."""
    deadline = float(settings.CHAT_TURN_TIMEOUT_SECONDS)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_bounded(messages, deadline))
    # Called from a thread that runs an event loop: run the request on a loop of its own.
    result: dict = {}

    def run() -> None:
        try:
            result["text"] = asyncio.run(_bounded(messages, deadline))
        except BaseException as exc:  # handed to the caller below
            result["error"] = exc

    worker = threading.Thread(target=run, name="tidy-model", daemon=True)
    worker.start()
    worker.join()
    if "error" in result:
        raise result["error"]
    return result["text"]


async def _bounded(messages: list[dict], deadline: float) -> str:
    try:
        return await asyncio.wait_for(_ask(messages), timeout=deadline)
    except TimeoutError:
        raise TidyModelError("the tidy request ran out of time") from None


async def _ask(messages: list[dict]) -> str:
    llm = build_llm(model_settings())
    try:
        failure: Exception | None = None
        for model in llm.models:
            try:
                return await _one(llm, model, messages)
            except Exception as exc:
                logger.warning("tidy up: model request failed (%s)", type(exc).__name__)
                failure = exc
        if isinstance(failure, TidyAnswerCutOff):
            raise failure  # the last model wrote too much: said so, so the tidy can ask with fewer words
        raise TidyModelError("no model answered") from failure
    finally:
        await llm.aclose()


async def _one(llm, model: str, messages: list[dict]) -> str:
    parts: list[str] = []
    finish = None
    stream = await llm.stream_chat({"model": model, "messages": messages, "stream": True})
    async with stream:
        async for chunk in stream:
            for choice in (chunk.get("choices") or []) if isinstance(chunk, dict) else []:
                content = (choice.get("delta") or {}).get("content")
                if isinstance(content, str):
                    parts.append(content)
                finish = choice.get("finish_reason") or finish
    if finish == "length":
        cut = TidyAnswerCutOff("the answer was cut off at the output cap")
        cut.partial = "".join(parts)  # what was written before the cap: its finished notes may be used
        raise cut
    if finish != "stop":
        raise TidyModelError(f"the answer did not finish ({finish or 'none'})")
    return "".join(parts)
