"""The gate reads the person's language (`agentmemory.gate.language`, `gate.words`): pure rules, no database.

English and German are read in full; French, Spanish, Italian, Portuguese
and Dutch for what the person asks of memory, negation and secret labels; a
message in any other language is "unknown", and a save the person did not
ask for is asked, never committed.
"""
from types import ModuleType

import pytest

from agentmemory import gate
from agentmemory.gate import language, words
from agentmemory.gate.negation import asserts_negated, negated_terms
from agentmemory.rules import Operation, Snapshot


def sources(message: str) -> gate.TurnSources:
    return gate.TurnSources.from_messages([{"role": "user", "content": message}])


def add(content: str, target: str = "user") -> Operation:
    return Operation(target=target, action="add", content=content)


def verdict(message: str, entry: str) -> str:
    """What becomes of the model's add: a refusal code, an ask reason, or "" (committed)."""
    turn = sources(message)
    return gate.refusal(add(entry), turn) or gate.reason(add(entry), start=Snapshot(), sources=turn)


# --- which language -----------------------------------------------------------------------------


@pytest.mark.parametrize(("message", "code"), [
    ("I use Neovim with a bunch of Lua plugins", "en"),
    ("ok, die Billing-Tests laufen jetzt mit pytest. Als Nächstes kommt der Rechnungsexport.", "de"),
    ("retiens que mon mot de passe du VPN est Prune-Orage-5518", "fr"),
    ("Recuerda que prefiero respuestas cortas", "es"),  # "que" is French too: the command decides
    ("Ricorda che uso sempre Python per i dati", "it"),
    ("Lembra que eu prefiro respostas curtas", "pt"),
    ("Onthoud dat ik liever korte antwoorden heb", "nl"),
    ("Jestem programistą backendu i używam Pythona", "unknown"),
    ("Jag är backendutvecklare och använder Python", "unknown"),
    ("Backend geliştiriciyim ve Python kullanıyorum", "unknown"),
    ("ok", "en"),  # too short to tell: English, the strictest rules
    ("lgtm", "en"),
    ("def reverse(items): return items[::-1]", "en"),  # code
    ("", "en"),
])
def test_the_language_of_a_short_message(message, code):
    assert language.detect(message) == code


def test_every_language_has_the_words_of_its_kind():
    partial = ("CODE", "FUNCTION_WORDS", "REMEMBER", "FORGET", "REMEMBER_LEAD", "NEGATION", "CONTRAST",
               "SECRET_LABELS")
    every = {name for name in vars(words.en) if name.isupper()}
    assert set(words.LANGUAGES) == {"en", "de", "fr", "es", "it", "pt", "nl"} and words.FULL == {"en", "de"}
    for code, module in words.LANGUAGES.items():
        assert isinstance(module, ModuleType) and module.CODE == code
        assert all(getattr(module, name, None) for name in partial), code
        assert all(isinstance(label, str) and label == label.lower() for label in module.SECRET_LABELS), code
    assert every <= {name for name in vars(words.de) if name.isupper()}, "German is read in full"


# --- what a German message asks -----------------------------------------------------------------


@pytest.mark.parametrize(("message", "expected"), [
    ("Merk dir bitte: wir deployen immer freitags", gate.EXPLICIT),
    ("Ab jetzt bitte kürzere Antworten", gate.EXPLICIT),
    ("vergiss, was ich über Java gesagt habe", gate.FORGET),
    ("Vergiss nicht, dass wir freitags deployen", gate.EXPLICIT),
    ("warum schlägt der Build auf der CI fehl?", gate.QUESTION),
    ("Schreib mir eine Funktion, die eine Liste umdreht", gate.REQUEST),
    ("Ich arbeite als Data Engineer in einem kleinen Team", gate.STATEMENT),
    ("Eigentlich nutze ich inzwischen Rust für Services", gate.CORRECT),
    ("retiens que je préfère les réponses courtes", gate.EXPLICIT),
    ("oublie ce que j'ai dit sur Java", gate.FORGET),
    ("Jestem programistą backendu i używam Pythona", gate.STATEMENT),
])
def test_what_a_message_in_another_language_asks_of_memory(message, expected):
    assert gate.intent(message) == expected


# --- task progress, however it is said -----------------------------------------------------------


@pytest.mark.parametrize("message", [
    "I just finished refactoring the login view; next I'll move on to the signup form.",
    "Done with the login view. Then I'll do the signup form.",
    "Wrapped up the parser; after that we'll tackle the lexer.",
    "bin gerade fertig mit dem Login-Refactoring",
    "Ich bin fertig mit den Tests, als Nächstes kommt der Rechnungsexport.",
])
def test_a_progress_note_states_nothing_lasting(message):
    assert gate.passing_only(message)


@pytest.mark.parametrize(("message", "entry"), [
    ("I just finished refactoring the login view; next I'll move on to the signup form.", "Refactored the login view."),
    ("I just finished refactoring the login view; next I'll move on to the signup form.",
     "Moving on to the signup form."),
    ("ok, billing tests are on pytest now. Next up the invoice export.",
     "Finished moving the billing tests to pytest; next is the invoice export."),
    ("ok, die Billing-Tests laufen jetzt mit pytest. Als Nächstes kommt der Rechnungsexport.",
     "Billing-Tests laufen mit pytest; als Nächstes kommt der Rechnungsexport."),
    ("Wir nutzen pytest. Als Nächstes kommt der Rechnungsexport.", "Als Nächstes kommt der Rechnungsexport."),
])
def test_a_progress_entry_never_commits(message, entry):
    assert verdict(message, entry) in (gate.TRANSIENT, gate.TRANSIENT_TURN, gate.NOT_STATED)


@pytest.mark.parametrize(("message", "entry"), [
    ("We deploy every Thursday from main.", "Deploys every Thursday from main"),
    ("Das Projekt läuft auf Python 3.12 und PostgreSQL, das nutzen wir überall.", "Projekt läuft auf Python 3.12"),
    ("I moved to Lisbon in 2020 and work remotely.", "Lives in Lisbon and works remotely"),
])
def test_a_lasting_fact_in_english_or_german_commits(message, entry):
    assert verdict(message, entry) == ""


@pytest.mark.parametrize("message", [
    "If I ask for code, then I'll want type hints everywhere.",  # a conditional "then": a lasting rule
    "Wir deployen immer freitags, das ist eben so.",  # the particle "eben" is no moment
    "Ich nutze nur noch Neovim.",  # "only Neovim now": a lasting change
    "Wenn ich nach Code frage, dann nutze ich gern Beispiele mit Typen.",
])
def test_a_lasting_rule_is_not_read_as_progress(message):
    assert not gate.passing_only(message)



# --- what the person negated stays negated -------------------------------------------------------


@pytest.mark.parametrize(("message", "code", "terms"), [
    ("I always want tabs, not spaces", "en", {"spaces"}),
    ("We use pytest, never unittest", "en", {"unittest"}),
    ("Wir nutzen Python, kein Java", "de", {"java"}),
    ("wir nutzen pytest, nie unittest", "de", {"unittest"}),
    ("On utilise des tabulations, pas des espaces", "fr", {"espaces"}),
    ("J'utilise Vim, jamais Emacs", "fr", {"emacs"}),
    ("I don't like long answers; keep them short", "en", {"long"}),
    ("No I use Django these days", "en", set()),  # an answer, not a negation
])
def test_the_terms_a_message_negates(message, code, terms):
    assert negated_terms(message, code) == terms


@pytest.mark.parametrize(("message", "entry", "expected"), [
    ("I always want tabs, not spaces", "spaces", gate.NEGATED),
    ("I always want tabs, not spaces", "Prefers spaces", gate.NEGATED),
    ("I always want tabs, not spaces", "Prefers tabs, not spaces", ""),
    ("I always want tabs, not spaces", "Prefers tabs over spaces", ""),
    ("We use pytest, never unittest", "unittest tests in our project.", gate.NEGATED),
    ("We use pytest, never unittest", "Uses pytest, never unittest", ""),
    ("Wir nutzen Python, kein Java", "Nutzt Java", gate.NEGATED),
    ("Wir nutzen Python, kein Java", "Nutzt Python, kein Java", ""),
    ("remember: tabs, not spaces", "Prefers spaces", gate.NEGATED),  # even on the person's command
    ("Actually I no longer use Vim, I use Neovim", "Uses Neovim", ""),
    ("I don't like long answers; keep them short", "Prefers short answers", ""),
])
def test_an_entry_that_drops_the_persons_negation_is_asked(message, entry, expected):
    assert verdict(message, entry) == expected


def test_an_entry_keeps_a_negation_in_any_shipped_language():
    assert asserts_negated("Utilise des espaces", frozenset({"espaces"}), "fr")
    assert not asserts_negated("Utilise des tabulations, pas des espaces", frozenset({"espaces"}), "fr")
    assert not asserts_negated("Nutzt pytest statt unittest", frozenset({"unittest"}), "de")


def test_the_reason_says_so_in_plain_words():
    assert "not" in str(gate.REASONS[gate.NEGATED]) and "negated" not in str(gate.REASONS[gate.NEGATED])


# --- a language the gate cannot read: asked, never a silent commit --------------------------------


@pytest.mark.parametrize(("message", "entry", "expected"), [
    ("Jestem programistą backendu i używam Pythona od pięciu lat", "Backend developer who uses Python",
     gate.UNREAD_LANGUAGE),
    ("Jag jobbar som utvecklare och använder alltid Python", "Uses Python", gate.UNREAD_LANGUAGE),
    ("Je suis développeuse backend depuis cinq ans", "Backend developer for five years", gate.UNREAD_LANGUAGE),
    ("retiens que je préfère les réponses courtes", "Prefers short answers", ""),  # asked for: commits
    ("Recuerda que prefiero respuestas cortas", "Prefiere respuestas cortas", ""),
])
def test_a_save_in_a_language_without_rules_is_asked_unless_the_person_asked_for_it(message, entry, expected):
    assert verdict(message, entry) == expected


def test_an_edit_in_a_language_without_rules_is_asked_too():
    start = Snapshot(user=("Uses Python",))
    turn = sources("Jestem programistą i teraz używam Rusta zamiast Pythona")
    replace = Operation(target="user", action="replace", entry="Uses Python", content="Uses Rust")
    remove = Operation(target="user", action="remove", entry="Uses Python")
    assert gate.reason(replace, start=start, sources=turn) == gate.UNREAD_LANGUAGE
    assert gate.reason(remove, start=start, sources=turn) == gate.UNREAD_LANGUAGE


def test_a_secret_is_refused_by_value_in_a_language_without_rules():
    turn = sources("Mój klucz do GitHuba to ghp_4f9Kx2LmQ8vN3pR7sT1wY6zB0cD5eH9jA2uX, zapamiętaj go")
    assert turn.language == "unknown"
    assert gate.refusal(add("GitHub: ghp_4f9Kx2LmQ8vN3pR7sT1wY6zB0cD5eH9jA2uX"), turn) == gate.SECRET_SEEN


# --- recall the person asked for -------------------------------------------------------------------


@pytest.mark.parametrize(("message", "expected", "why"), [
    ("From now on keep your answers short please; I prefer terse replies", ["Prefers terse replies."],
     gate.ASKED_UNSAVED),
    ("I'm a senior Rust engineer with ten years of experience, so you can skip the basics.",
     ["Is a senior Rust engineer with ten years of experience."], gate.UNSAVED),
    ("remember that our staging DB runs Postgres 16", ["Our staging DB runs Postgres 16."], gate.ASKED_UNSAVED),
    ("Merk dir: ich bevorzuge kurze Antworten", ["Bevorzugt kurze Antworten."], gate.ASKED_UNSAVED),
    ("retiens que je préfère les réponses courtes", ["Je préfère les réponses courtes."], gate.ASKED_UNSAVED),
    ("Onthoud dat ik altijd tabs gebruik", ["Ik altijd tabs gebruik."], gate.ASKED_UNSAVED),
    ("retiens que mon mot de passe du VPN est Prune-Orage-5518", [], gate.ASKED_UNSAVED),  # a secret: nothing
    ("Merk dir bitte mein VPN-Passwort: Kiefer-Nebel-2291", [], gate.ASKED_UNSAVED),
    ("Recuerda que el código de la alarma es 4821", [], gate.ASKED_UNSAVED),
    ("Onthoud dat mijn pincode 8841 is", [], gate.ASKED_UNSAVED),
    ("remember: I finished the parser today", [], gate.ASKED_UNSAVED),  # passing
    ("Remember to run the migrations before deploying", ["Remember to run the migrations before deploying."],
     gate.ASKED_UNSAVED),  # "remember to ...": the instruction is the fact
    ("Jestem programistą backendu i używam Pythona", [], gate.UNSAVED),  # unread, and not asked for
])
def test_what_the_person_asked_to_remember_is_offered_in_their_words(message, expected, why):
    turn = sources(message)
    assert gate.unsaved_statements(turn) == expected
    assert gate.unsaved_reason(turn) == why


@pytest.mark.parametrize(("message", "expected"), [
    ("Ich arbeite seit acht Jahren als Datenbankadministratorin, die SQL-Grundlagen kannst du dir sparen.",
     ["Arbeitet seit acht Jahren als Datenbankadministratorin."]),
    ("Ich bin blind und nutze einen Screenreader, also pack bitte nichts Wichtiges in Bilder.",
     ["Ist blind und nutzt einen Screenreader."]),
    ("Ich habe zwei Katzen", ["Hat zwei Katzen."]),
    ("Ich mag lange und kurze Antworten", ["Mag lange und kurze Antworten."]),  # "kurze": no verb
    ("Ich habe gestern den Bug behoben.", []),  # a past event
    ("Ich glaube, das passt so.", []),  # an opinion of the moment
    ("Ich teste das mal", []),
    ("Meine Zeitzone ist Europe/Berlin", []),  # "sein" or "ihr" would guess a gender
    ("Heute bin ich etwas langsam", []),
])
def test_a_german_statement_is_offered_in_the_third_person(message, expected):
    assert gate.unsaved_statements(sources(message)) == expected


def test_the_new_reasons_read_in_german():
    from django.utils import translation

    with translation.override("de"):
        said = {code: str(gate.REASONS[code]) for code in (gate.ASKED_UNSAVED, gate.NEGATED, gate.UNREAD_LANGUAGE)}
    assert said[gate.NEGATED].startswith("Es behauptet") and "„nicht“" in said[gate.NEGATED]
    assert said[gate.ASKED_UNSAVED].startswith("Sie haben darum gebeten")
    assert said[gate.UNREAD_LANGUAGE].startswith("Ihre Nachricht ist in einer Sprache")


@pytest.mark.parametrize(("message", "expected"), [
    ("Erinnerst du dich, womit wir hier CI machen?", True),
    ("Welchen Editor nutze ich nochmal?", True),
    ("Wo wohne ich?", True),
    ("Wie funktioniert asyncio?", False),
    ("Ich nutze Helm; wie deployen wir nochmal?", False),  # states something: keeps the tool
    ("Wie mache ich den letzten Git-Commit rückgängig?", False),  # a coding question
])
def test_a_german_question_about_what_memory_holds(message, expected):
    assert gate.asks_memory(message) is expected
