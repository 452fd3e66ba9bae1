"""The gate in the person's language, end to end: a scripted model over real HTTP proposes, the turn decides.

On SQLite and on PostgreSQL (make test runs both): task progress however it
is said, in English and German, never commits; an entry that drops the
person's "not" / "never" / "kein" is asked; a command to remember that the
model left undone is offered in the person's words; a message in a language
the gate has no rules for asks instead of committing.
"""
import pytest

from agentmemory import gate, proposals
from agentmemory.rules import Snapshot
from chat.turns import run_turn
from tests.chat_helpers import db, fresh_agents, snapshot_of  # noqa: F401
from tests.scripted_model import scripted_model, text, tool_call  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def adds(*entries, target="user") -> dict:
    return {"operations": [{"target": target, "action": "add", "content": entry} for entry in entries]}


async def pending(user):
    return await db(proposals.pending, user_id=user.pk)


async def offered(user) -> list[tuple[str, str]]:
    return [(op.content, op.reason) for proposal in await pending(user) for op in proposal.operations]


@pytest.mark.parametrize(("message", "entries"), [
    ("I just finished refactoring the login view; next I'll move on to the signup form.",
     ("Refactored the login view.", "Moving on to the signup form.")),
    ("I just finished refactoring the login view; next I'll move on to the signup form.",
     ("Finished refactoring the login view.", "Next I'll move on to the signup form.")),
    ("ok, billing tests are on pytest now. Next up the invoice export.",
     ("Finished moving the billing tests to pytest; next is the invoice export.",)),
    ("ok, die Billing-Tests laufen jetzt mit pytest. Als Nächstes kommt der Rechnungsexport.",
     ("Billing-Tests laufen mit pytest; als Nächstes kommt der Rechnungsexport.",)),
    ("Ich bin gerade fertig mit dem Login-Refactoring, als Nächstes mache ich das Signup-Formular.",
     ("Hat das Login-Refactoring abgeschlossen.",)),
])
async def test_a_progress_note_never_commits_in_english_or_german(user, scripted_model, message, entries):
    scripted_model.push(tool_call(adds(*entries)), text("Nice progress."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status in ("nothing_to_commit", "proposed")
    assert await snapshot_of(user) == Snapshot()
    assert {reason for _, reason in await offered(user)} <= {gate.TRANSIENT}


async def test_a_german_progress_note_beside_a_lasting_fact_is_asked_not_committed(user, scripted_model):
    scripted_model.push(tool_call(adds("Nutzt pytest für alle Tests", "Als Nächstes kommt der Rechnungsexport.")),
                        text("Notiert."))

    result = await run_turn(user=user, content="Wir nutzen pytest für alle Tests. Als Nächstes kommt der Rechnungsexport.")

    assert result.memory.status == "committed" and result.memory.code == "partly_asked"
    assert (await snapshot_of(user)).user == ("Nutzt pytest für alle Tests",)
    assert await offered(user) == [("Als Nächstes kommt der Rechnungsexport.", gate.TRANSIENT)]


@pytest.mark.parametrize(("message", "inverted", "kept"), [
    ("I always want tabs, not spaces", "spaces", "Prefers tabs, not spaces"),
    ("We use pytest, never unittest", "unittest tests in our project.", "Uses pytest, never unittest"),
    ("Wir schreiben alles in Python, kein Java", "Schreibt in Java", "Schreibt alles in Python, kein Java"),
])
async def test_an_inverted_entry_is_asked_and_the_one_that_keeps_the_negation_commits(
        user, scripted_model, message, inverted, kept):
    scripted_model.push(tool_call(adds(inverted, kept)), text("Got it."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "committed" and result.memory.code == "partly_asked"
    assert (await snapshot_of(user)).user == (kept,)
    assert await offered(user) == [(inverted, gate.NEGATED)]
    (proposal,) = await pending(user)
    assert "not" in str(gate.REASONS[proposal.operations[0].reason])


async def test_from_now_on_with_no_memory_call_is_offered_as_a_question(user, scripted_model):
    scripted_model.push(text("Sure, short answers from here."))

    result = await run_turn(user=user, content="From now on keep your answers short please; I prefer terse replies")

    assert result.memory.status == "proposed" and result.memory.code == "asked"
    assert await snapshot_of(user) == Snapshot(), "offered, never saved"
    assert await offered(user) == [("Prefers terse replies.", gate.ASKED_UNSAVED)]
    (proposal,) = await pending(user)
    saved = await db(proposals.save, user_id=user.pk, proposal_id=proposal.id)
    assert saved.changed and (await snapshot_of(user)).user == ("Prefers terse replies.",)


@pytest.mark.parametrize(("message", "entry", "why"), [
    ("I'm a senior Rust engineer with ten years of experience, so you can skip the basics.",
     "Is a senior Rust engineer with ten years of experience.", gate.UNSAVED),
    ("Merk dir: ich bevorzuge kurze Antworten", "Bevorzugt kurze Antworten.", gate.ASKED_UNSAVED),
    ("Ich bin blind und nutze einen Screenreader, also pack bitte nichts Wichtiges in Bilder.",
     "Ist blind und nutzt einen Screenreader.", gate.UNSAVED),
    ("retiens que je préfère les réponses courtes", "Je préfère les réponses courtes.", gate.ASKED_UNSAVED),
])
async def test_what_the_person_said_or_asked_to_remember_is_offered_when_the_model_saved_nothing(
        user, scripted_model, message, entry, why):
    scripted_model.push(text("Okay."))

    result = await run_turn(user=user, content=message)

    assert result.memory.status == "proposed" and await snapshot_of(user) == Snapshot()
    assert await offered(user) == [(entry, why)]


async def test_a_secret_the_person_asked_to_remember_is_never_offered(user, scripted_model):
    scripted_model.push(text("I won't keep passwords."))

    result = await run_turn(user=user, content="retiens que mon mot de passe du VPN est Prune-Orage-5518")

    assert result.memory.status == "nothing_to_commit"
    assert await pending(user) == [] and await snapshot_of(user) == Snapshot()


async def test_a_save_in_a_language_without_rules_is_asked_not_committed(user, scripted_model):
    scripted_model.push(tool_call(adds("Backend developer who has used Python for five years")), text("Zapisane."))

    result = await run_turn(user=user, content="Jestem programistą backendu i używam Pythona od pięciu lat")

    assert result.memory.status == "proposed" and result.memory.code == "asked"
    assert await snapshot_of(user) == Snapshot()
    assert await offered(user) == [("Backend developer who has used Python for five years", gate.UNREAD_LANGUAGE)]


async def test_a_french_password_the_person_asked_to_remember_is_refused(user, scripted_model):
    scripted_model.push(tool_call(adds("Mot de passe du VPN : Prune-Orage-5518")), text("Je ne garde pas ça."))

    result = await run_turn(user=user, content="retiens que mon mot de passe du VPN est Prune-Orage-5518")

    assert [event.code for event in result.tool_events] == ["threat_secret"]
    assert result.memory.status == "nothing_to_commit"
    assert await snapshot_of(user) == Snapshot() and await pending(user) == []
