"""The passport against each tool's published format (tests/data/README.md names the documents), and our own
export read back: every field the store keeps for an entry (text, document, expiry, where it was imported from
and when) survives export -> import -> export, as JSON and as Markdown."""
import json
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from agentmemory import importing, passport, proposals, store

from .memory_helpers import entries_of, fresh_throttle  # noqa: F401  (fresh_throttle is autouse)

DATA = Path(__file__).parent / "data"


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def import_and_save(user, data) -> importing.ImportResult:
    result = importing.propose(user_id=user.pk, data=data)
    assert result.proposal_id is not None, [item.code for item in result.refused]
    proposals.save(user_id=user.pk, proposal_id=result.proposal_id)
    return result


def kept_fields(export: dict) -> dict:
    """Per document, each entry with every field our export carries for it (the export's own times aside)."""
    return {target: [(entry, source) for entry, source in zip(document["entries"], document["sources"])]
            for target, document in export["documents"].items()}


# --- the tools' own formats ------------------------------------------------------------------------------


def test_mem0_documented_get_all_reads_field_for_field_with_its_expiration_date():
    found = passport.read((DATA / "mem0_v1_get_memories.json").read_bytes())
    assert found.format == passport.MEM0
    assert [(item.target, item.content, item.expires) for item in found.items] == [
        ("user", "Is allergic to peanuts", None),
        ("memory", "Pro trial of the note app ends on 2030-01-31", "2030-01-31"),
        ("memory", "The garden project uses raised beds of larch wood", "2031-06-30"),
    ]


def test_mem0_expiration_date_becomes_the_stored_entry_expiry(user):
    import_and_save(user, (DATA / "mem0_v1_get_memories.json").read_bytes())
    assert store.load_snapshot(user_id=user.pk).expiries("memory") == {
        "Pro trial of the note app ends on 2030-01-31": "2030-01-31",
        "The garden project uses raised beds of larch wood": "2031-06-30"}
    sources = store.load_state(user_id=user.pk).sources
    assert {source.imported for target in ("user", "memory") for source in sources[target]} == {passport.MEM0}


def test_chatgpt_printed_model_set_context_drops_the_dates_and_routes_facts_about_the_person_to_the_profile(user):
    found = passport.read((DATA / "chatgpt_model_set_context.md").read_bytes())
    assert found.format == passport.CHATGPT
    assert [(item.target, item.content) for item in found.items] == [
        ("user", "The user prefers metric units in every answer."),
        ("user", "User is training for a half marathon in April."),
        ("user", "User's cat is called Pixel."),
        ("memory", "Project Quillfeather uses Rust and PostgreSQL."),
    ]
    import_and_save(user, (DATA / "chatgpt_model_set_context.md").read_bytes())
    assert entries_of(user)["user"] == ("The user prefers metric units in every answer.",
                                        "User is training for a half marathon in April.", "User's cat is called Pixel.")


def test_a_letta_agent_file_reads_its_core_memory_blocks_and_leaves_the_persona(user):
    found = passport.read((DATA / "letta_agent_file.af").read_bytes())
    assert found.format == passport.LETTA
    assert [(item.target, item.content) for item in found.items] == [
        ("user", "The user's name is Mira."), ("user", "Mira keeps bees in the garden."),
        ("user", "She prefers metric units."), ("memory", "The hives are weighed every Sunday morning."),
    ]
    import_and_save(user, (DATA / "letta_agent_file.af").read_bytes())
    assert entries_of(user) == {"user": ("The user's name is Mira.", "Mira keeps bees in the garden.",
                                         "She prefers metric units."),
                                "memory": ("The hives are weighed every Sunday morning.",)}


# --- our export carries every field, and reads back losslessly -------------------------------------------------


@pytest.fixture
def imported_person(make_user):
    """A person whose memory came from ChatGPT and mem0 (one entry with an expiry from mem0's file)."""
    person = make_user("mira")
    import_and_save(person, (DATA / "chatgpt_model_set_context.md").read_bytes())
    import_and_save(person, (DATA / "mem0_v1_get_memories.json").read_bytes())
    return person


def test_the_json_export_carries_each_entry_imported_from_and_expiry(client, imported_person):
    exported = api_for(imported_person).get("/api/memory/export/").json()
    client.force_login(imported_person)
    downloaded = json.loads(client.get("/memory/export/").content)
    assert downloaded["documents"] == exported["documents"]
    sources = {entry: source for target in ("user", "memory")
               for entry, source in zip(exported["documents"][target]["entries"],
                                        exported["documents"][target]["sources"])}
    assert len(sources) == 7
    assert {entry: source.get("imported") for entry, source in sources.items()} == {
        "The user prefers metric units in every answer.": "chatgpt",
        "User is training for a half marathon in April.": "chatgpt",
        "User's cat is called Pixel.": "chatgpt",
        "Project Quillfeather uses Rust and PostgreSQL.": "chatgpt",
        "Is allergic to peanuts": "mem0",
        "Pro trial of the note app ends on 2030-01-31": "mem0",
        "The garden project uses raised beds of larch wood": "mem0",
    }
    assert sources["Pro trial of the note app ends on 2030-01-31"]["expires"] == "2030-01-31"
    assert {source["by"] for source in sources.values()} == {"user"}


def test_json_round_trip_is_lossless(imported_person, make_user):
    first = api_for(imported_person).get("/api/memory/export/").json()
    second_person, third_person = make_user("nils"), make_user("olga")
    import_and_save(second_person, json.dumps(first))
    second = api_for(second_person).get("/api/memory/export/").json()
    assert kept_fields(second) == kept_fields(first)
    import_and_save(third_person, json.dumps(second))
    assert kept_fields(api_for(third_person).get("/api/memory/export/").json()) == kept_fields(first)


def test_markdown_round_trip_is_lossless(imported_person, make_user):
    first = api_for(imported_person).get("/api/memory/export/markdown/").content.decode()
    assert "<!-- imported from mem0 at " in first and "(until 2030-01-31)" in first
    second_person = make_user("nils")
    import_and_save(second_person, first)
    second = api_for(second_person).get("/api/memory/export/markdown/").content.decode()
    assert second == first
    assert kept_fields(api_for(second_person).get("/api/memory/export/").json()) == kept_fields(
        api_for(imported_person).get("/api/memory/export/").json())


def test_an_export_that_claims_an_import_to_come_or_a_bad_format_is_read_as_our_own_import(user):
    later = {"format": "agentmemory-export", "documents": {"user": {"entries": ["Likes rye bread", "Likes tea"],
             "sources": [{"by": "staff", "at": "2999-01-01T00:00:00+00:00", "imported": "chatgpt"},
                         {"by": "user", "at": "2024-01-01T00:00:00+00:00", "imported": "evil_tool"}]}}}
    import_and_save(user, json.dumps(later))
    sources = store.load_state(user_id=user.pk).sources["user"]
    assert [(source.by, source.imported) for source in sources] == [("user", passport.OURS_JSON)] * 2
    assert all(source.at < "2999" for source in sources)
