"""This project's shorthand for the package's scripted model (agentmemory.testing.model_server).

There is one scripted model server, `agentmemory.testing.model_server.
ScriptedServer`: the one other projects test with and the contract suite
drives. This module only names its steps the way the project's tests script
a streamed Chat Completions answer, and gives the `scripted_model` fixture:

    with ScriptedModel() as server:
        server.push(tool_call({"operations": [...]}), text("Done."))
        client = AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=0)

Builders: `text` (an `Answer`, word by word), `pieces` (text in the deltas
given), `tool_call`, `tool_calls` (several calls in one answer), `error`
(`Fail`), `cut` (`Cut`: text, then the connection closes without the
terminating chunk), `endless` (`Endless`: a stream that never ends until the
client hangs up; `server.hangups` records when) and `dynamic` (a `Rule`: a
response chosen from the decoded request body). An empty script answers
HTTP 500 "script exhausted". Every request lands in `server.requests` (a
`Seen`, which reads as its decoded body); nothing here prints a body or
message content. The same server answers non-streamed Chat Completions and
Responses API requests from the same steps.

In Django tests, the `scripted_model` fixture points the chat's settings at
a fresh server (import it: `from tests.scripted_model import scripted_model
# noqa: F401`). A `dynamic` function that raises fails the test at teardown.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from agentmemory.testing.model_server import (
    EXHAUSTED,
    Answer,
    Call,
    Cut,
    Endless,
    Fail,
    Rule,
    ScriptedServer,
    Seen,
    Step,
)

__all__ = ["EXHAUSTED", "TOOL_NAME", "ScriptedModel", "cut", "dynamic", "endless", "error", "pieces",
           "scripted_model", "text", "tool_call", "tool_calls"]

TOOL_NAME = "memory_update"


class ScriptedModel(ScriptedServer):
    """The package's ScriptedServer, with the OpenAI base URL under the name the chat's settings use."""

    @property
    def base_url(self) -> str:
        return self.openai_url if self.port else ""


# --- builders ---------------------------------------------------------------------


def text(content: str, *, finish_reason: str | None = "stop", done: bool = True, delay: float = 0.0) -> Answer:
    """Stream `content` word by word, a `finish_reason` chunk unless None, then [DONE] if `done`."""
    return Answer(content, finish=finish_reason, done=done, pace=delay)


def pieces(parts: list[str], *, finish_reason: str | None = "stop", delay: float = 0.0) -> Answer:
    """Stream `parts` as they are, one delta each (a token stream split where the test wants)."""
    return Answer(tuple(parts), finish=finish_reason, pace=delay)


def tool_call(arguments: dict | str, *, name: str = TOOL_NAME, finish_reason: str | None = "tool_calls",
              done: bool = True, text_before: str = "", delay: float = 0.0) -> Answer:
    """Stream one tool call (arguments in fragments), after optional text."""
    return Answer(text_before, (Call(name, arguments),), finish=finish_reason, done=done, pace=delay)


def tool_calls(calls: list[tuple[str, dict | str]], *, finish_reason: str | None = "tool_calls", done: bool = True,
               delay: float = 0.0) -> Answer:
    """Stream several (name, arguments) calls in one answer, each by its index."""
    return Answer("", tuple(Call(name, arguments) for name, arguments in calls), finish=finish_reason, done=done,
                  pace=delay)


def error(status: int, message: str = "scripted failure") -> Fail:
    """Answer HTTP `status` with a JSON error body shaped like OpenAI's."""
    if status < 400:
        raise ValueError("error() needs a 4xx or 5xx status")
    return Fail(status, message)


def cut(content: str = "partial answer", *, delay: float = 0.0) -> Cut:
    """Stream some text, then close the connection mid-body: no finish_reason, no [DONE]."""
    return Cut(content, pace=delay)


def endless(*, delay: float = 0.02, at_most: float = 15.0) -> Endless:
    """Stream distinct words ("w1 w2 ...") with no end, as a model that never stops.

    It stops when the client hangs up (the time lands in `server.hangups`),
    or after `at_most` seconds, so a test of a deadline that fails still ends.
    """
    return Endless(pace=delay, at_most=at_most)


def dynamic(fn: Callable[[dict], Step]) -> Rule:
    """Answer with `fn(body)`, a step chosen from the decoded request body."""

    def rule(seen: Seen) -> Step:
        return fn(seen.body)

    return Rule(rule)


# --- the fixture ------------------------------------------------------------------


@pytest.fixture
def scripted_model(settings):
    """Yield a started ScriptedModel with the chat's model settings pointing at it."""
    server = ScriptedModel().start()
    settings.OPENAI_API_KEY = "scripted"
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_MODEL = "scripted-primary"
    settings.OPENAI_FALLBACK_MODEL = ""
    settings.OPENAI_MAX_RETRIES = 0
    settings.OPENAI_TIMEOUT = 10
    try:
        yield server
    finally:
        server.stop()
    if server.errors:
        pytest.fail("the scripted model's script failed: " + "; ".join(server.errors), pytrace=False)
