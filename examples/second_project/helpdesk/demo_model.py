"""A tiny deterministic Chat Completions model, in-process behind httpx2.MockTransport.

The real `openai` client sends it real requests; it answers like a hosted
model would (non-streaming):

    remember: <fact>     calls memory_update to add <fact> to the USER profile,
                         then, after the tool result, answers "Noted."
    [[fail]] ...         answers HTTP 500 on the round after its tool call
                         (a change is staged when the model fails)
    [[stall]] ...        after its tool call, never answers (a model that hangs)
    anything else        says whether it saw a memory block in its prompt
"""
from __future__ import annotations

import asyncio
import json

import httpx2
from openai import AsyncOpenAI

FAIL = "[[fail]]"
STALL = "[[stall]]"


class DemoModel:
    def __init__(self) -> None:
        self.requests: list[dict] = []  # what each request offered (for the tests)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(await request.aread())
        self.requests.append(body)
        messages = body["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        question = messages[last_user]["content"]
        tool_results = [m for m in messages[last_user:] if m["role"] == "tool"]
        offered = {tool["function"]["name"] for tool in body.get("tools") or ()}
        stall = STALL in question
        question = question.replace(STALL, "")
        fact = question.replace(FAIL, "").strip().removeprefix("remember:").strip()

        if tool_results and stall:
            await asyncio.Event().wait()  # until the caller's deadline cancels the request
        if tool_results:
            if FAIL in question:
                return httpx2.Response(500, json={"error": {"message": "the demo failed on purpose"}})
            result = json.loads(tool_results[-1]["content"])
            return completion(text="Noted." if result.get("success") else "I could not save that.")
        if question.replace(FAIL, "").strip().startswith("remember:") and "memory_update" in offered:
            arguments = {"operations": [{"target": "user", "action": "add", "content": fact}]}
            return completion(tool_call=("call_1", "memory_update", json.dumps(arguments)))
        system = messages[0]["content"] if messages[0]["role"] == "system" else ""
        return completion(text="I remember things about you." if "<persistent_memory_data>" in system
                          else "I have no memory of you.")


def completion(*, text: str | None = None, tool_call: tuple[str, str, str] | None = None) -> httpx2.Response:
    message: dict = {"role": "assistant", "content": text}
    finish = "stop"
    if tool_call:
        call_id, name, arguments = tool_call
        message["tool_calls"] = [{"id": call_id, "type": "function",
                                  "function": {"name": name, "arguments": arguments}}]
        finish = "tool_calls"
    return httpx2.Response(200, json={
        "id": "chatcmpl-demo", "object": "chat.completion", "created": 0, "model": "demo",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    })


def demo_client(model: DemoModel) -> AsyncOpenAI:
    return AsyncOpenAI(
        api_key="demo", base_url="http://demo.invalid/v1", max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(model.handle)),
    )
