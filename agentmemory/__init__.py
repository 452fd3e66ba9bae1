"""django-agentmemory: bounded, per-person memory for LLM chat agents.

Each signed-in person has two small documents (a profile and notes) that an
agent reads in its prompt and changes only through one `memory_update` tool.
The model proposes; trusted code decides: identity comes from the request,
changes are staged during a turn and committed once it succeeds, in one
locked transaction, after the rules, the threat scan and the gate have
judged them.

Entry points (import them from their modules; this package imports nothing
at import time, so `INSTALLED_APPS` can load it before Django is ready):

- `agentmemory.turn.MemoryTurn`: one person's memory for one agent turn
  (read, prompt, tools, `heard`, `attempt`, `commit`, `discard`).
- `agentmemory.services`: what views and admin actions call (add, correct,
  remove, erase, save or discard a proposal, undo, restore).
- `agentmemory.store`: the locked commit, snapshots, erase (`commit_operations`,
  `load_snapshot`, `erase`).
- `agentmemory.rules`: the pure boundary (`apply_batch`, `Operation`, `Snapshot`).
- `agentmemory.integrations`: the OpenAI Agents SDK, PydanticAI and Claude
  adapters.
- `agentmemory.testing`: a scripted OpenAI-compatible model server and the
  contract suite for host projects' own tests.
- `agentmemory.conf.memory_settings()`: the `AGENTMEMORY` setting with its defaults.

docs/integration.md walks a host project through them.
"""
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("django-agentmemory")
except PackageNotFoundError:  # run from a source checkout, not installed
    __version__ = "0.1.0+source"

__all__ = ["__version__"]
