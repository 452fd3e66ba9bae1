"""Words for people: no code, operation index or HTTP status on the memory page, in History or in the admin.

Codes stay in the database and the API; what a person reads comes from
`agentmemory.words`, which reuses the chat turn's outcome sentences.
"""
import re

import pytest
from django.test import Client

from agentmemory import words
from agentmemory.models import Actor, MemoryEvent, Outcome
from agentmemory.rules import MemoryValidationError, Operation, apply_operations, Snapshot
from agentmemory.turn import CODE_MESSAGES, OUTCOME_MESSAGES

from .memory_helpers import entries_of, fresh_throttle, seed  # noqa: F401  (fresh_throttle is autouse)

# What a code looks like on a page: snake_case words, "Operation 3", "HTTP 500", "(no_match)".
CODE_LIKE = re.compile(r"\b[a-z]+_[a-z_]+\b|Operation \d|HTTP \d{3}|\(\w+\)")

RULE_CODES = [
    "add_with_match", "add_without_content", "ambiguous_match", "batch_size", "conflict", "control_character",
    "delimiter_in_entry", "empty_entry", "entry_changed", "incomplete_entry", "invalid_arguments",
    "invalid_content", "invalid_match", "invalid_operation", "no_match", "over_capacity", "remove_with_content",
    "remove_without_match", "replace_duplicate", "replace_fields", "reserved_header", "reserved_tag",
    "separator_match", "turn_budget", "unknown_action", "unknown_argument", "unknown_field", "unknown_target",
    "threat_prompt_injection", "threat_secret", "threat_some_new_category",
]
EVENT_CODES = [
    "", "cancelled", "session_ended", "model_failed_after_staging", "model_incomplete", "model_error", "model_unreachable",
    "model_empty", "turn_error", "database_error", "entry_changed", "conflict", "over_capacity", "no_match",
    "threat_exfiltration", "something_new",
]


@pytest.mark.parametrize("code", RULE_CODES)
def test_every_rule_code_reads_as_a_plain_sentence(code):
    message = words.rule_message(code, target="memory", limits={"user": 1375, "memory": 2200})

    assert message and message[0].isupper() and message.endswith(".")
    assert not CODE_LIKE.search(message), message


@pytest.mark.parametrize("outcome", [choice for choice, _ in Outcome.choices])
@pytest.mark.parametrize("code", EVENT_CODES)
def test_every_event_reads_as_plain_words(outcome, code):
    texts = [
        words.outcome_name(outcome),
        words.event_changes(outcome, {"add": 1, "remove": 2}, {"user": 1, "memory": 2}),
        words.event_reason(outcome, code),
    ]

    for text in texts:
        assert not CODE_LIKE.search(text), text
    # Settings and staff reads say what they did.
    if outcome not in ("committed", "erased", "memory_on", "memory_off", "ask_first", "auto_save", "viewed"):
        assert words.event_reason(outcome, code), "a change that did not save says why"


def test_changes_are_sentences():
    assert words.describe_changes({"add": 1}, {"memory": 1}) == "Added 1 entry to your notes"
    assert words.describe_changes({"remove": 2}, {"user": 2}) == "Removed 2 entries from your profile"
    assert words.describe_changes({"replace": 1}, {"user": 1}, done=False) == "Tried to correct 1 entry in your profile"
    assert (words.describe_changes({"remove": 2, "add": 1}, {"user": 1, "memory": 2})
            == "Added 1 entry and removed 2 entries in your profile and your notes")
    assert words.describe_changes({}, {}) == ""


def test_the_turn_outcome_words_are_reused_not_copied():
    assert words.event_reason("discarded", "cancelled") == CODE_MESSAGES["cancelled"]
    assert words.event_reason("rejected", "conflict") == CODE_MESSAGES["conflict"]
    assert words.event_reason("unchanged", "") == CODE_MESSAGES["unchanged"]
    assert words.event_reason("discarded", "something_new") == OUTCOME_MESSAGES["discarded"]


def test_the_model_facing_message_is_not_what_the_person_reads():
    with pytest.raises(MemoryValidationError) as caught:
        apply_operations(Snapshot(), [Operation("memory", "add", content="x" * 3000)])

    assert "In the same batch" in caught.value.message
    assert words.rule_message(caught.value.code, target=caught.value.target, limits={"memory": 2200}) == (
        "This does not fit: your notes would be over its limit of 2,200 characters. "
        "Shorten or remove another entry first."
    )


@pytest.fixture
def alice_client(user):
    client = Client()
    client.force_login(user)
    return client


def history_of(client) -> str:
    html = client.get("/memory/").content.decode()
    return html[html.index('id="history-title"'):]


def test_history_says_what_happened_in_plain_words(alice_client, user):
    seed(user, memory_entries=["Ships weekly."])
    for outcome, code, actions in [
        (Outcome.DISCARDED, "model_failed_after_staging", {"add": 1}),
        (Outcome.DISCARDED, "cancelled", {"add": 1}),
        (Outcome.REJECTED, "over_capacity", {"add": 1}),
        (Outcome.REJECTED, "threat_secret", {"add": 1}),
        (Outcome.FAILED, "database_error", {"replace": 1}),
    ]:
        MemoryEvent.objects.create(user=user, actor=Actor.AGENT, outcome=outcome, error_code=code,
                                   operation_count=1, actions=actions, targets={"memory": 1})

    history = history_of(alice_client)

    assert "Added 1 entry to your notes" in history  # the seed, by the system
    assert "Tried to add 1 entry to your notes" in history
    assert "The assistant failed before finishing its answer" in history
    assert str(CODE_MESSAGES["cancelled"]) in history
    assert "memory would have gone over its limit" in history
    assert "It looked like a password, token or key" in history
    assert "The database did not answer" in history
    visible = re.sub(r"<[^>]+>", " ", history)
    assert not CODE_LIKE.search(visible), CODE_LIKE.search(visible)


def test_memory_page_errors_are_plain_sentences(alice_client, user):
    seed(user, user_entries=["Uses vim."])

    # A failed form post redirects back to the page, which shows the error.
    over = alice_client.post("/memory/add/", {"target": "user", "content": "x" * 1400}, follow=True).content.decode()
    tag = alice_client.post("/memory/correct/", {
        "target": "user", "entry": "Uses vim.", "content": "Uses <persistent_memory_data> helix.",
    }, follow=True).content.decode()

    assert "This does not fit: your profile would be over its limit of 1,375 characters." in over
    assert "Remove the tag." in tag
    for html in (over, tag):
        errors = " ".join(re.findall(r'<p class="memory-error" role="alert">(.*?)</p>', html, flags=re.S))
        assert errors and not CODE_LIKE.search(errors), errors
        assert "Operation" not in html and "over_capacity" not in html and "reserved_tag" not in html
    assert entries_of(user)["user"] == ("Uses vim.",)
