"""The model client: one `AsyncOpenAI` built from settings, or the offline demo.

With `OPENAI_API_KEY` set it talks to `OPENAI_BASE_URL` (OpenAI, Azure
OpenAI, Ollama, vLLM, llama.cpp: anything that speaks Chat Completions).
Without a key it talks to `chat.demo_model` through `httpx2.MockTransport`,
so the real client, streaming and tool-call code run either way. The client
is built once per process by `chat.agents` and closed at shutdown.

`LLM.stream_chat` sends a turn's request through that client's public
`post(..., stream=True, stream_cls=...)`: auth, base URL, retries, timeouts
and the SDK's errors (`openai.APIStatusError`, `APIConnectionError`, an
error event inside the stream) stay the SDK's, but the body goes out as the
plain JSON we built (no typed transform walking every history message and
the tool schema) and each streamed chunk comes back as the decoded JSON
object (no pydantic model per chunk), its bytes split into events by
`chat.sse.LeanDecoder` rather than the SDK's line-by-line decoder. Together
those were over half of a plain turn's server CPU (docs/benchmarks.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx2
from django.conf import settings
from openai import AsyncOpenAI, AsyncStream

from .demo_model import DemoModel
from .sse import LeanDecoder

# What `chat.completions.create` sends: the path and the bearer auth only.
CHAT_COMPLETIONS_PATH = "/chat/completions"
_CHAT_OPTIONS = {"security": {"bearer_auth": True}}

DEMO_MODEL_NAME = "demo"
DEMO_BASE_URL = "http://demo-model.invalid/v1"


class ChunkStream(AsyncStream[object]):
    """The SDK's stream class, reading its bytes with `chat.sse.LeanDecoder`.

    Only the decoding of bytes into events is ours; the SDK's stream still
    ends at `[DONE]` (draining an HTTP/1.1 body for reuse), raises an error
    event as `openai.APIError`, maps timeouts and broken connections to its
    errors, and closes the response.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # The SDK reads only aiter_bytes, whose events LeanDecoder gives in the SDK's shape.
        self._decoder = LeanDecoder(max_event_bytes=settings.CHAT_MAX_SSE_EVENT_BYTES)  # type: ignore[assignment]


@dataclass(frozen=True)
class ModelSettings:
    """The settings that shape a client; a change means a new client."""

    api_key: str = field(repr=False)
    base_url: str
    model: str
    fallback_model: str
    timeout: float
    max_retries: int
    max_tokens: int = 1024
    max_tokens_field: str = "auto"

    @property
    def is_demo(self) -> bool:
        return not self.api_key

    @property
    def cap_field(self) -> str:
        """Return the request field that carries the output cap for this endpoint."""
        if self.max_tokens_field != "auto":
            return self.max_tokens_field
        host = urlsplit(self.base_url).hostname if self.base_url else "api.openai.com"
        return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def model_settings() -> ModelSettings:
    """Return the model settings in force now."""
    return ModelSettings(
        api_key=settings.OPENAI_API_KEY,
        base_url=settings.OPENAI_BASE_URL,
        model=settings.OPENAI_MODEL,
        fallback_model=settings.OPENAI_FALLBACK_MODEL,
        timeout=settings.OPENAI_TIMEOUT,
        max_retries=settings.OPENAI_MAX_RETRIES,
        max_tokens=settings.OPENAI_MAX_TOKENS,
        max_tokens_field=settings.OPENAI_MAX_TOKENS_FIELD,
    )


@dataclass
class LLM:
    client: AsyncOpenAI
    model: str
    fallback_model: str = ""
    demo: DemoModel | None = field(default=None, repr=False)
    # Every request carries the output cap, in the field this endpoint reads.
    max_tokens: int = 1024
    cap_field: str = "max_tokens"

    @property
    def is_demo(self) -> bool:
        return self.demo is not None

    @property
    def models(self) -> tuple[str, ...]:
        """The primary model, then the fallback if one is configured."""
        return (self.model, self.fallback_model) if self.fallback_model else (self.model,)

    async def stream_chat(self, body: dict) -> ChunkStream:
        """Start a streamed Chat Completions request; iterate the result for chunks as dicts.

        `body` is sent as it is (it must carry "stream": true), with the
        output cap added: no request leaves without one. The result is the
        SDK's own stream class, so `[DONE]`, an `error` event and a broken
        connection behave as with `chat.completions.create`; use it as an
        async context manager to release the connection early (closing it
        is what tells a model server to stop generating).
        """
        return await self.client.post(  # type: ignore[call-overload]  # cast_to=object: the raw stream
            CHAT_COMPLETIONS_PATH, body={**body, self.cap_field: self.max_tokens}, cast_to=object,
            options=_CHAT_OPTIONS,
            stream=True, stream_cls=ChunkStream,
        )

    async def aclose(self) -> None:
        await self.client.close()


def build_llm(config: ModelSettings | None = None) -> LLM:
    """Return a client for the configured model, or for the demo without a key."""
    config = config or model_settings()
    if not config.is_demo:
        client = AsyncOpenAI(
            api_key=config.api_key,
            base_url=config.base_url or None,
            timeout=config.timeout,
            max_retries=config.max_retries,
        )
        return LLM(client=client, model=config.model, fallback_model=config.fallback_model,
                   max_tokens=config.max_tokens, cap_field=config.cap_field)

    demo = DemoModel(primary_model=DEMO_MODEL_NAME, delay_ms=lambda: settings.DEMO_MODEL_DELAY_MS)
    client = AsyncOpenAI(
        api_key="demo-offline",
        base_url=DEMO_BASE_URL,
        timeout=config.timeout,
        # The demo fails on purpose; a retry would only hide that.
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(demo.handle)),
    )
    return LLM(client=client, model=DEMO_MODEL_NAME, fallback_model=config.fallback_model, demo=demo,
               max_tokens=config.max_tokens, cap_field="max_tokens")


def demo_model_in_use() -> bool:
    """Return True when no API key is set, so the chat runs on the demo model."""
    return model_settings().is_demo
