"""Calls a model writes as text (chat/text_calls.py): found in every form seen
from small local models, held back from the stream, and never mistaken for
ordinary answers (code, JSON examples, mentions of the tool)."""
import json

import pytest

from chat.text_calls import TextCallFilter, extract_calls

OPERATION = {"target": "user", "action": "add", "content": "Prefers tabs over spaces"}
ARGUMENTS = {"operations": [OPERATION]}

CALLS = {
    "bare json": "I'll remember that.\n" + json.dumps({"name": "memory_update", "arguments": ARGUMENTS}),
    "arguments as a string": json.dumps({"name": "memory_update", "arguments": json.dumps(ARGUMENTS)}),
    "fenced json": "Sure.\n```json\n" + json.dumps({"name": "memory_update", "arguments": ARGUMENTS}) + "\n```",
    "tool_call tags": "<tool_call>\n" + json.dumps({"name": "memory_update", "arguments": ARGUMENTS}) + "\n</tool_call>",
    "unclosed tag": "<tool_call>\n" + json.dumps({"name": "memory_update", "arguments": ARGUMENTS}),
    "function wrapper": json.dumps({"type": "function", "function": {"name": "memory_update", "arguments": ARGUMENTS}}),
    "python literal": str({"name": "memory_update", "arguments": {"operations": [{**OPERATION, "match": None}]}}),
    "bare arguments": "Noted! " + json.dumps(ARGUMENTS),
    "labelled operation": "Calling memory_update: " + json.dumps(OPERATION),
    "call syntax": "memory_update(" + json.dumps(ARGUMENTS) + ")",
}

ANSWERS = [
    "Try this:\n```python\nimport sys\nprint({'path': sys.path})\n```\nThen run it.",
    'A JSON example:\n{"a": 1, "b": [1, 2, 3], "c": "text long enough to decide"}\nend',
    'Deploy config: {"target": "prod", "action": "deploy"} is how the team does it.',
    "The memory_update tool is how I save facts about you.",
    "Use d = {\"key\": \"value\"} in Python.",
    # An API example is an answer, even with a tool reply's keys.
    'The endpoint answers:\n{"success": false, "status": "rejected", "error": "quota exceeded"}\nRetry later.',
]


def stream(text: str, step: int) -> tuple[str, str, list]:
    """Feed `text` in pieces; return what was shown, the clean text and the calls."""
    text_filter = TextCallFilter()
    shown = "".join(text_filter.feed(text[i:i + step]) for i in range(0, len(text), step))
    tail, cleaned, calls = text_filter.finish()
    return shown + tail, cleaned, calls


@pytest.mark.parametrize("form", sorted(CALLS))
def test_a_written_call_is_found_and_removed(form):
    cleaned, calls = extract_calls(CALLS[form])
    assert len(calls) == 1
    assert json.loads(calls[0].arguments)["operations"][0]["content"] == OPERATION["content"]
    assert "memory_update" not in cleaned and "operations" not in cleaned and "<tool_call>" not in cleaned


@pytest.mark.parametrize("form", sorted(CALLS))
@pytest.mark.parametrize("step", [1, 3, 16, 10_000])
def test_a_written_call_never_reaches_the_stream(form, step):
    shown, _, calls = stream(CALLS[form], step)
    assert len(calls) == 1
    assert "memory_update" not in shown and "<tool_call>" not in shown


@pytest.mark.parametrize("answer", ANSWERS)
@pytest.mark.parametrize("step", [1, 5, 10_000])
def test_ordinary_answers_stream_unchanged(answer, step):
    shown, cleaned, calls = stream(answer, step)
    assert calls == []
    assert shown == cleaned == answer


# The tool's reply said back as the answer (the local model, on a full profile): model-facing codes and JSON.
_REPLY = {"success": False, "status": "rejected", "code": "over_capacity",
          "error": "'user' would hold 1,432 characters, over its limit of 1,375.", "current_entries": ["ENTRY-1"]}
ECHOES = {
    "tagged": "<tool_response>\n" + json.dumps(_REPLY) + "\n</tool_response>\nI could not save that.",
    "tagged, cut off": "<tool_response>\n" + json.dumps(_REPLY)[:60],
    "after words": "Here is what happened:\n<tool_response>" + json.dumps({"success": True, "status": "staged"}),
}


@pytest.mark.parametrize("form", sorted(ECHOES))
@pytest.mark.parametrize("step", [1, 4, 13, 10_000])
def test_a_tool_reply_said_back_is_never_shown_and_is_no_call(form, step):
    shown, cleaned, calls = stream(ECHOES[form], step)
    assert calls == []
    for text in (shown, cleaned):
        assert "tool_response" not in text and "over_capacity" not in text and '"status"' not in text
        assert "ENTRY-1" not in text
    assert shown.strip() == cleaned  # what the person saw is what is stored
    assert cleaned == {"tagged": "I could not save that.", "tagged, cut off": "",
                       "after words": "Here is what happened:"}[form]


def test_tool_call_tags_are_never_shown_even_when_they_hold_no_memory_call():
    text = 'Let me check.\n<tool_call>\n{"name": "web_search", "arguments": {"q": "weather"}}\n</tool_call>'
    cleaned, calls = extract_calls(text)
    assert calls == [] and cleaned == "Let me check."
    shown, _, _ = stream(text, 4)
    assert "<tool_call>" not in shown and "web_search" not in shown


@pytest.mark.parametrize("marker", ["<tool_call>", "<tool_response>", "```", "memory_update"])
def test_every_beginning_of_a_marker_at_the_end_of_a_delta_is_held_back(marker):
    from chat.text_calls import _partial_marker

    for size in range(1, len(marker)):
        beginning = marker[:size]
        assert _partial_marker(f"Here is the answer {beginning}") == size, beginning
        # Held back, not shown, until the next delta says whether it was a marker.
        stream = TextCallFilter()
        assert stream.feed(f"Here is the answer {beginning}") == "Here is the answer "
    assert _partial_marker("Here is the answer, plain text only.") == 0
    assert _partial_marker("") == 0
