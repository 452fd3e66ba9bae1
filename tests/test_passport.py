"""The memory passport's formats (issue 39, part 2, the part built so far): each import format read from a
fixture written for the test, hostile imports refused whole with a code, and our export read back."""
import json

import pytest
from rest_framework.test import APIClient

from agentmemory import passport, selectors, store
from agentmemory.models import Actor
from agentmemory.passport import ImportRefused, Item, read
from agentmemory.rules import Operation

from .memory_helpers import fresh_throttle, seed  # noqa: F401  (fresh_throttle is autouse)

CHATGPT_LIST = """Prefers metric units.
Is training for a half marathon in April.
Project Quillfeather uses Rust and PostgreSQL.
"""

CLAUDE_FILES = """/memories/profile.md
# About the user
- Works as a marine biologist.
- Prefers short answers.

/memories/notes.md
- The survey boat is called Kestrel.
- Field season runs until October (until 2027-10-31)
"""

MEM0 = {"results": [
    {"id": "a1", "memory": "Likes hiking in the Tatras", "user_id": "x", "created_at": "2026-01-01T00:00:00Z"},
    {"id": "a2", "memory": "Team deploys on Thursdays", "user_id": "x"},
]}

LETTA = {"memory": {"blocks": [
    {"label": "persona", "value": "I am a helpful assistant."},
    {"label": "human", "value": "Name: Ines\nPrefers German replies."},
]}}


def test_chatgpt_memories_as_copied_from_its_settings():
    found = read(CHATGPT_LIST)
    assert found.format == passport.CHATGPT
    assert found.items == (Item("user", "Prefers metric units."),
                           Item("user", "Is training for a half marathon in April."),
                           Item("memory", "Project Quillfeather uses Rust and PostgreSQL."))


def test_claude_memory_files_with_an_expiry():
    found = read(CLAUDE_FILES)
    assert found.format == passport.OURS_MARKDOWN
    assert found.items == (Item("user", "Works as a marine biologist."), Item("user", "Prefers short answers."),
                           Item("memory", "The survey boat is called Kestrel."),
                           Item("memory", "Field season runs until October", "2027-10-31"))


def test_mem0_and_letta_json():
    assert read(json.dumps(MEM0)) == passport.Imported(passport.MEM0, (
        Item("user", "Likes hiking in the Tatras"), Item("memory", "Team deploys on Thursdays")))
    assert read(json.dumps(MEM0["results"])).format == passport.MEM0
    letta = read(json.dumps(LETTA))
    assert letta.format == passport.LETTA
    assert letta.items == (Item("user", "Name: Ines"), Item("user", "Prefers German replies."))


def test_a_plain_list_with_bullets_and_duplicates():
    found = read("- Uses a standing desk\n* uses vim\n- Uses a standing desk\n\n1. Builds with Bazel\n")
    assert found.format == passport.PLAIN
    assert [item.content for item in found.items] == ["Uses a standing desk", "uses vim", "Builds with Bazel"]


@pytest.mark.parametrize(("data", "code"), [
    (b"x" * (10 * 1024 * 1024), "import_too_large"),
    ("\n".join(f"Fact number {n}" for n in range(10_000)).encode(), "import_too_many"),
    (json.dumps([{"memory": f"m{n}"} for n in range(10_000)]).encode(), "import_too_many"),
    (json.dumps([{"memory": f"m{n}"} for n in range(5_000)])[:250_000].encode() + b"]", "import_invalid_json"),
    ("Prefers tea".encode("utf-16"), "import_encoding"),
    (b"\xff\xfe\xfa not text", "import_encoding"),
    (b"   \n  ", "import_empty"),
    (json.dumps({"format": "something-else"}).encode(), "import_unknown_format"),
    (("A" * 1_001).encode(), "import_item_too_long"),
])
def test_hostile_imports_are_refused_whole_with_a_code(data, code):
    with pytest.raises(ImportRefused) as refused:
        read(data)
    assert refused.value.code == code


def test_our_json_export_and_markdown_pair_read_back_the_same_memory(user):
    seed(user, user_entries=["Works as a marine biologist.", "Prefers short answers."],
         memory_entries=["The survey boat is called Kestrel.", "Field season runs until October"])
    store.commit_operations(user_id=user.pk, actor=Actor.SYSTEM, operations=[
        Operation(target="memory", action="replace", match="Field season", expires="2027-10-31")])
    assert passport.EXPORT_FORMAT == selectors.EXPORT_FORMAT
    api = APIClient()
    api.force_authenticate(user)
    exported = api.get("/api/memory/export/").content
    from_json = read(exported)
    assert from_json.format == passport.OURS_JSON

    snapshot = store.load_state(user_id=user.pk).snapshot
    documents = {"user": snapshot.user, "memory": snapshot.memory}
    expiries = {"user": snapshot.expiries("user"), "memory": snapshot.expiries("memory")}
    bundle = passport.markdown_bundle(documents, expiries)
    from_markdown = read(bundle)
    assert from_markdown.format == passport.OURS_MARKDOWN
    expected = (Item("user", "Works as a marine biologist."), Item("user", "Prefers short answers."),
                Item("memory", "The survey boat is called Kestrel."),
                Item("memory", "Field season runs until October", "2027-10-31"))
    assert from_json.items == expected
    assert from_markdown.items == expected
    files = passport.markdown_pair(documents, expiries)
    assert set(files) == {"/memories/profile.md", "/memories/notes.md"}
    assert files["/memories/notes.md"].endswith("- Field season runs until October (until 2027-10-31)\n")
