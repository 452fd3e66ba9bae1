"""The offline demo model in a process of its own, over HTTP, for the turn bench.

A deployed chat reaches its model over HTTP, in another process on another
machine, and the model's own work is not the chat server's CPU. This serves
`chat.demo_model.DemoModel` (the same replies, tool calls and stream as the
in-process demo) as an OpenAI-compatible `POST /v1/chat/completions`: HTTP/1.1
with keep-alive and chunked transfer encoding, each SSE event written as its
own chunk as the model produces it. bench/turns.py points the chat servers at
it with OPENAI_BASE_URL, so their real `openai` client pays the real
transport (connection pool, HTTP parsing, socket reads) and the model's CPU
stays here.

Run: `python bench/_model_server.py PORT` (stdlib asyncio; it logs nothing
about the requests).
"""
from __future__ import annotations

import asyncio
import sys

import httpx2

import _setup

_MAX_HEAD = 64 * 1024


async def serve(port: int) -> None:
    _setup.setup_django()
    from chat.demo_model import DemoModel

    model = DemoModel(primary_model="demo", delay_ms=lambda: 0)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                if len(head) > _MAX_HEAD:
                    return
                request_line, *lines = head.decode("latin-1").split("\r\n")
                method, target, _ = request_line.split(" ", 2)
                headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines if ":" in line]
                length = int({name.lower(): value for name, value in headers}.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                request = httpx2.Request(method, f"http://127.0.0.1:{port}{target}", headers=headers, content=body)
                response = await model.handle(request)
                writer.write(
                    f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n".encode()
                    + b"".join(f"{name}: {value}\r\n".encode() for name, value in response.headers.items()
                               if name.lower() not in ("content-length", "transfer-encoding"))
                    + b"transfer-encoding: chunked\r\n\r\n"
                )
                async for data in response.aiter_raw():
                    if data:
                        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
