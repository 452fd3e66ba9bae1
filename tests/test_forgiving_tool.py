"""The model's tool forgives the slips small models make that have one safe
meaning, and says what it did; what is ambiguous is still refused. Driven by
a scripted model over real HTTP through the turn service, so each case is
also checked at the commit (which replays what was staged).

- add with a match: added, the match ignored.
- replace on an empty document: its content is added.
- replace with one word for a sentence entry: the word takes the matched
  words' place inside the entry.
- remove on an empty document: nothing to remove, a no-op, not a failure.
- remove naming its entry in content (no match, or a match with the same
  words): the content is the match; a content that says something else is
  still refused (it may have meant a replace).
- a replace of an entry the same batch removed: its content is added.
- a forget or a correction aimed at the wrong document: moved to the one
  holding its entry.
- an add in the document the person's words do not name: "remember about
  me" puts it in the profile; otherwise the model's target stands.
- a replace on "remember ..." whose match, words of the message, names no
  entry: its content is added; on a correction, or with a match that is
  not from the message, it is still refused.
- conversation_search's arguments sent to memory_update, and the other way
  round: the reply names the right tool and what it takes.
"""
import json

import pytest

from agentmemory.rules import Snapshot
from chat.turns import run_turn
from tests.chat_helpers import aseed, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def tool_reply(server, request: int = 1) -> dict:
    """The tool's reply the model read in request number `request` (0-based)."""
    return json.loads(server.requests[request]["messages"][-1]["content"])


def ops(*operations) -> dict:
    return {"operations": list(operations)}


async def test_a_replace_on_an_empty_profile_is_stored_as_an_add(user, scripted_model):
    scripted_model.push(tool_call(ops({"target": "user", "action": "replace", "match": "editor",
                                       "content": "Uses Neovim as their editor"})), text("Noted."))

    result = await run_turn(user=user, content="I switched to Neovim.")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).user == ("Uses Neovim as their editor",)
    assert tool_reply(scripted_model)["results"] == [
        "'user' was empty, so there was nothing to replace; added as a new entry"]


async def test_an_add_with_a_match_is_stored_and_the_match_ignored(user, scripted_model):
    await aseed(user, memory_entries=["The API is written in Go"])
    scripted_model.push(tool_call(ops({"target": "memory", "action": "add", "match": "Go",
                                       "content": "Deploys happen on Fridays"})), text("Noted."))

    result = await run_turn(user=user, content="We deploy on Fridays.")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == ("The API is written in Go", "Deploys happen on Fridays")
    assert tool_reply(scripted_model)["results"] == ["match is not used by add; added as a new entry"]


async def test_a_remove_on_an_empty_document_is_nothing_to_remove(user, scripted_model):
    scripted_model.push(tool_call(ops({"target": "memory", "action": "remove", "match": "Vim"})),
                        text("There was nothing to forget."))

    result = await run_turn(user=user, content="Forget that I use Vim.")

    assert result.memory.status == "nothing_to_commit"
    assert [(e.status, e.code) for e in result.tool_events] == [("unchanged", "")]
    reply = tool_reply(scripted_model)
    assert reply["success"] is True and reply["results"] == ["nothing to remove: 'memory' is empty; nothing changed"]
    assert await snapshot_of(user) == Snapshot()


@pytest.mark.parametrize("operation", [
    {"target": "user", "action": "remove", "content": "cat named Miso"},
    {"target": "user", "action": "remove", "match": "Miso", "content": "Has a cat named Miso"},
    {"target": "user", "action": "remove", "match": "cat named Miso", "expires": "never"},
], ids=["content_only", "same_words", "with_expiry"])
async def test_a_remove_that_names_its_entry_in_content_removes_it(user, scripted_model, operation):
    await aseed(user, user_entries=["Has a cat named Miso", "Lives in Porto"])
    scripted_model.push(tool_call(ops(operation)), text("Forgotten."))

    result = await run_turn(user=user, content="forget: cat named Miso")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).user == ("Lives in Porto",)


async def test_a_remove_whose_content_says_something_else_is_still_refused(user, scripted_model):
    await aseed(user, user_entries=["Has a cat named Miso"])
    scripted_model.push(tool_call(ops({"target": "user", "action": "remove", "match": "Miso",
                                       "content": "Has a dog named Rex"})), text("I could not change that."))

    result = await run_turn(user=user, content="forget: cat named Miso")

    assert [e.code for e in result.tool_events] == ["remove_with_content"]
    assert (await snapshot_of(user)).user == ("Has a cat named Miso",)


async def test_an_ambiguous_slip_is_still_refused(user, scripted_model):
    # 'user' is empty, but the match is in 'memory': the model may mean that entry, or a new fact for the
    # profile. The person's message asks for no change, so nothing is guessed.
    await aseed(user, memory_entries=["Uses Go 1.22"])
    scripted_model.push(tool_call(ops({"target": "user", "action": "replace", "match": "Go 1.22",
                                       "content": "Uses Go 1.23"})), text("I could not change that."))

    result = await run_turn(user=user, content="I joined the Go 1.23 beta program.")

    assert [e.code for e in result.tool_events] == ["no_match"]
    assert "set target to 'memory'" in tool_reply(scripted_model)["error"]
    assert result.memory.status == "nothing_to_commit"
    assert (await snapshot_of(user)) == Snapshot(memory=("Uses Go 1.22",))


async def test_search_arguments_sent_to_memory_update_name_the_right_tool(user, scripted_model):
    scripted_model.push(tool_call({"query": "locker code", "limit": 5}), text("Let me answer instead."))

    result = await run_turn(user=user, content="Look up the locker code I gave you last week.")

    assert [e.code for e in result.tool_events] == ["wrong_tool"]
    reply = tool_reply(scripted_model)
    assert "conversation_search" in reply["error"] and '{"query"' in reply["error"]
    assert result.memory.status == "nothing_to_commit"


async def test_memory_update_arguments_sent_to_search_name_the_right_tool(user, scripted_model):
    scripted_model.push(
        tool_call(ops({"target": "memory", "action": "add", "content": "Uses Go"}), name="conversation_search"),
        text("Noted."))

    result = await run_turn(user=user, content="We use Go.")

    assert [(e.tool, e.status) for e in result.tool_events] == [("conversation_search", "invalid")]
    reply = tool_reply(scripted_model)
    assert "memory_update" in reply["error"] and '{"operations"' in reply["error"]
    assert await snapshot_of(user) == Snapshot()


async def test_a_one_word_correction_is_patched_into_its_entry(user, scripted_model):
    await aseed(user, memory_entries=["The team deploys with Ansible every Thursday"])
    scripted_model.push(tool_call(ops({"target": "memory", "action": "replace", "match": "Ansible",
                                       "content": "Terraform"})), text("Updated."))

    result = await run_turn(user=user, content="correct: Ansible => Terraform")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == ("The team deploys with Terraform every Thursday",)
    assert tool_reply(scripted_model)["results"][0].startswith(
        "content was one word, so it replaced the matched words inside the entry")


@pytest.mark.parametrize("message, operation, left", [
    ("forget: cat named Miso", {"target": "memory", "action": "remove", "match": "cat named Miso"},
     Snapshot(user=("Lives in Porto", "Python for scripting"), memory=("Deploys on Fridays",))),
    ("correct: Python for scripting => Rust for scripting",
     {"target": "memory", "action": "replace", "match": "Python for scripting", "content": "Rust for scripting"},
     Snapshot(user=("Has a cat named Miso", "Lives in Porto", "Rust for scripting"),
              memory=("Deploys on Fridays",))),
], ids=["forget", "correct"])
async def test_a_forget_or_correction_aimed_at_the_wrong_document_is_applied_where_its_entry_is(
        user, scripted_model, message, operation, left):
    await aseed(user, user_entries=["Has a cat named Miso", "Lives in Porto", "Python for scripting"],
                memory_entries=["Deploys on Fridays"])
    scripted_model.push(tool_call(ops(operation)), text("Done."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "committed"
    assert await snapshot_of(user) == left
    reply = tool_reply(scripted_model)
    assert reply["moved"] == [{"position": 1, "target": "user"}]
    assert "its entry is in 'user', so it was applied there" in reply["message"]


async def test_a_replace_of_an_entry_the_batch_removed_adds_its_content(user, scripted_model):
    # What the local model sent for "forget X; Y from now on": a remove of X (in the wrong document), then a
    # replace of X with Y. X goes, Y is added.
    await aseed(user, user_entries=["Prefers answers in German", "Lives in Porto"])
    scripted_model.push(tool_call(ops(
        {"target": "memory", "action": "remove", "match": "answers in German"},
        {"target": "user", "action": "replace", "match": "answers in German", "content": "Prefers answers in English"},
    )), text("Done."))

    result = await run_turn(user=user, content="Please forget that I want answers in German; English is fine.")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).user == ("Lives in Porto", "Prefers answers in English")
    reply = tool_reply(scripted_model)
    assert reply["results"][1] == (
        "this batch removed that entry already, so there was nothing to replace; added as a new entry")


async def test_a_call_in_the_wrong_document_is_refused_with_the_call_that_fits(user, scripted_model):
    # The message states a fact but asks for no change: the model's own second call moves it.
    await aseed(user, user_entries=["Prefers tabs"], memory_entries=["Works at Acme Corp"])
    wrong = {"target": "user", "action": "replace", "match": "Acme Corp", "content": "Works at Globex"}
    scripted_model.push(tool_call(ops(wrong)), tool_call(ops({**wrong, "target": "memory"})), text("Updated."))

    result = await run_turn(user=user, content="I joined Globex last month.")

    assert [e.status for e in result.tool_events] == ["rejected", "staged"]
    assert tool_reply(scripted_model)["retry_like_this"] == ops({**wrong, "target": "memory"})
    assert (await snapshot_of(user)).memory == ("Works at Globex",)


# --- the person's words name the document ------------------------------------------------------


@pytest.mark.parametrize("message, sent, lands", [
    ("remember about me: is fluent in Japanese", "memory", "user"),
    ("Something worth knowing about me from now on: I've become the on-call lead.", "memory", "user"),
])
async def test_an_add_goes_to_the_document_the_persons_words_name(user, scripted_model, message, sent, lands):
    scripted_model.push(tool_call(ops({"target": sent, "action": "add", "content": "The fact, reworded"})),
                        text("Noted."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).entries(lands) == ("The fact, reworded",)
    reply = tool_reply(scripted_model)
    assert reply["moved"] == [{"position": 1, "target": lands}]
    assert f"the person's message puts it in '{lands}', so it was added there" in reply["message"]


@pytest.mark.parametrize("message, sent", [
    ("remember that our staging cluster is called kestrel", "memory"),  # speaks of "our": the model decides
    ("Keep code examples short, one per answer.", "user"),  # a preference said as an instruction: stays
    ("remember: the public API is versioned under /v2", "user"),  # no "about me": the model's target stands
    ("remember that I prefer TOML for configuration", "user"),
    ("What is the API versioned under?", "user"),  # a question names nothing
])
async def test_an_add_keeps_the_models_document_when_the_words_name_none(user, scripted_model, message, sent):
    scripted_model.push(tool_call(ops({"target": sent, "action": "add", "content": "The fact, reworded"})),
                        text("Noted."))

    await run_turn(user=user, content=message)

    assert "moved" not in tool_reply(scripted_model)
    assert (await snapshot_of(user)).entries(sent) in (("The fact, reworded",), ())


async def test_a_replace_of_the_messages_words_that_names_no_entry_is_an_add_on_remember(user, scripted_model):
    await aseed(user, memory_entries=["The monorepo has three services"])
    scripted_model.push(tool_call(ops({"target": "memory", "action": "replace", "match": "publish",
                                       "content": "Services publish domain events to Kafka"})), text("Noted."))

    result = await run_turn(user=user, content="remember: all services publish their domain events to Kafka")

    assert result.memory.status == "committed"
    assert (await snapshot_of(user)).memory == ("The monorepo has three services",
                                                "Services publish domain events to Kafka")
    assert "its content was added as a new entry" in tool_reply(scripted_model)["message"]


@pytest.mark.parametrize("message, match", [
    ("remember: all services publish their domain events to Kafka", "event bus"),  # not the message's words
    ("Correction: we publish domain events to Kafka now, not RabbitMQ", "publish"),  # a correction
])
async def test_a_replace_that_names_no_entry_is_still_refused_otherwise(user, scripted_model, message, match):
    await aseed(user, memory_entries=["The monorepo has three services"])
    scripted_model.push(tool_call(ops({"target": "memory", "action": "replace", "match": match,
                                       "content": "Services publish domain events to Kafka"})), text("Sorry."))

    result = await run_turn(user=user, content=message)

    assert [event.code for event in result.tool_events] == ["no_match"]
    assert (await snapshot_of(user)).memory == ("The monorepo has three services",)
