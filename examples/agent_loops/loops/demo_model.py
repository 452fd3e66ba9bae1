"""An offline model for `manage.py ask` when no API key is set: agentmemory's scripted server
with a rule that plays a tiny model ("remember: <fact>" calls the adapter's memory tool; anything
else is answered from whether a memory block was in the prompt)."""
from __future__ import annotations

from agentmemory.testing.model_server import Call, Rule, Say, ScriptedServer, Seen

TURNS = 8  # more model requests than one demo turn makes


def memory_call(adapter: str, fact: str) -> Call:
    if adapter == "claude":
        return Call("memory", {"command": "insert", "path": "/memories/notes.md", "insert_line": 0,
                               "insert_text": fact})
    return Call("memory_update", {"operations": [{"target": "memory", "action": "add", "content": fact}]})


def demo_server(adapter: str) -> ScriptedServer:
    def answer(seen: Seen):
        if seen.after_tool:
            return Say("Noted." if "staged" in " ".join(seen.tool_results) else "I could not save that.")
        question = seen.last_user.strip()
        if question.lower().startswith("remember:") and seen.tools:
            return memory_call(adapter, question.split(":", 1)[1].strip())
        return Say("I remember things about you." if "<persistent_memory_data>" in seen.system
                   else "I have no memory of you.")

    server = ScriptedServer().start()
    server.push(*(Rule(answer) for _ in range(TURNS)))
    return server
