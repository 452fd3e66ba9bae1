"""What a project needs to prove its agent loop keeps agentmemory's guarantees.

`model_server` is a scripted model over real HTTP on 127.0.0.1 that speaks
the OpenAI Chat Completions and Responses APIs and Anthropic's Messages API
from one protocol-neutral script; `contract` is the suite every agent loop
passes (the adapters in `agentmemory.integrations`, this repository's chat,
and yours). Standard library and agentmemory only: importing this package
needs no extra and no test runner, and nothing here prints a request body.
"""
