"""Secrets a label names, in every language the gate reads: PINs, codes, combinations, security answers, passwords.

"I keep my bank PIN as 4821", "my locker combination is 12-34-56", "the
answer to my security question is Fluffy", "mon mot de passe du VPN est
Prune-Orage-5518": a label (in English, German, French, Spanish, Italian,
Portuguese or Dutch), up to a few words naming what it opens, a connector
("is", "as", ":", "ist", "lautet", "est", "es", "è", "é", ...) and the
value. What counts as the value depends on the label: digits for a PIN, a
code or a combination (a "code" only when a word says what it opens: "vault
code", "Tresorcode", "code du coffre"; "status code 404" is none), the
words up to the clause's end for a security answer, a credential-shaped
token for a password. The scan refuses an entry holding one; the gate
keeps the value out of every entry of the turn. The words live here, beside
the credential labels of `credentials.py`, because the scan is pure and
below the gate. Pure: no Django, nothing logged.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

# What joins a label to its value, in the seven languages.
_CONNECTOR = (
    r"(?:is|was|are|as|equals|(?:is |was )?(?:set|changed) to|ist|lautet|war|sind|auf|est|était|c'est|es|era|son"
    r"|è|é|era|zijn|=|:|->|=>)"
)
_PIN = (
    r"pins?|pin[- ]?(?:code|number|nummer|nr|nummer)|pincode|puk|passcode|geheimzahl|geheimnummer|code pin"
    r"|c[óo]digo pin|codice pin|pin-?code"
)
_COMBINATION = (
    r"combinations?(?: lock)?|(?:zahlen)?kombination|zahlenschloss|combinaison|combinaci[óo]n|combinazione"
    r"|combina[çc][ãa]o|(?:cijfer)?combinatie"
)
# "code" only with what it opens; German and Dutch join the two into one word.
_CODE = (
    r"(?:vault|safe|door|gate|garage|alarm|lock|locker|padlock|entry|access|unlock|keypad|building|security"
    r"|bank|card|phone|sim|verification|secret|bike(?:[- ]lock)?|front door|house) codes?"
    r"|\w*(?:tresor|safe|t[üu]r|tor|garagen|alarm|schloss|schlie(?:ß|ss)fach|spind|zugangs|sicherheits|geheim"
    r"|zahlen|entsperr|kluis|deur|toegangs|beveiligings|ontgrendel|slot|geheime ?)code"
    r"|digicode|code (?:secret|confidentiel|d'acc[eè]s|d'entr[ée]e|de (?:la porte|l'alarme|s[ée]curit[ée]"
    r"|d[ée]verrouillage|l'immeuble)|du (?:coffre(?:-fort)?|cadenas|casier|portail))"
    r"|c[óo]digo (?:secreto|de (?:acceso|acesso|seguridad|seguran[çc]a|desbloqueo|desbloqueio|la puerta"
    r"|la alarma|la caja fuerte)|del (?:candado|portal|casillero|port[óo]n)|da (?:porta|fechadura)"
    r"|do (?:cofre|cadeado|alarme|port[ãa]o|cacifo))"
    r"|codice (?:segreto|di (?:accesso|sicurezza|sblocco)|della (?:porta|cassaforte)|dell'allarme"
    r"|del (?:lucchetto|cancello|portone|armadietto))"
    r"|code van (?:de|het|mijn) (?:kluis|kluisje|deur|voordeur|alarm|slot|fietsslot|poort)"
)
_ANSWER = (
    r"answer to (?:my|the|our) (?:security|secret) question|security(?: question)? answer|secret answer"
    r"|mother'?s maiden name|memorable (?:word|answer)"
    r"|antwort auf (?:meine|die) (?:sicherheits|geheim)frage|sicherheitsantwort"
    r"|(?:geburts|m[äa]dchen)name meiner mutter"
    r"|r[ée]ponse [àa] (?:ma|la) question (?:secr[èe]te|de s[ée]curit[ée])|r[ée]ponse secr[èe]te"
    r"|nom de jeune fille de ma m[èe]re"
    r"|respuesta a (?:mi|la) pregunta (?:de seguridad|secreta)|respuesta secreta|apellido de soltera de mi madre"
    r"|risposta alla (?:mia )?domanda (?:di sicurezza|segreta)|risposta segreta|cognome da nubile di mia madre"
    r"|resposta (?:[àa]|para a) (?:minha )?pergunta (?:de seguran[çc]a|secreta)|resposta secreta"
    r"|nome de solteira da minha m[ãa]e"
    r"|antwoord op (?:mijn|de) (?:beveiligingsvraag|veiligheidsvraag|geheime vraag)|geheim antwoord"
    r"|meisjesnaam van mijn moeder"
)
_PASSWORD = (
    r"pass(?:word|phrase|wort)s?|\w+(?:passwort|kennwort)|passwd|pwd|kennwort|mot de passe|contrase[ñn]a|clave"
    r"|senha|wachtwoord|password|parola d'ordine|wifi key|wlan-?schl[üu]ssel|netzwerkschl[üu]ssel"
)
# A label starts a word, or follows a word and a hyphen: "VPN-Passwort", "Bankkarten-PIN", "wifi-password".
_LABEL_START = r"(?<![\w-])(?:\w+-)?"
# A few words naming what the secret opens, between the label and the connector ("PIN of my bank card is",
# "mot de passe du VPN est", "PIN meiner Bankkarte ist"): they start with a preposition or an article, so
# "password manager: 1Password" and "password hasher is Argon2" name no password.
_QUALIFIER = (
    r"for|of|to|on|at|with|from|du|de|des|d'\S+|pour|sur|f[üu]r|f[üu]rs|zum|zur|vom|von|der|des|meiner|meines"
    r"|unserer|unseres|del|dello|della|dell'\S+|di|per|do|da|dos|das|para|van|voor|bij|op|het"
)
_WORDS = r"(?P<words>[ \t]+(?:" + _QUALIFIER + r")(?:[ \t]+[^\s\d:=.,;!?]+){0,4}?)?"
_NUMBERS = re.compile(
    _LABEL_START + r"(?:" + _PIN + "|" + _COMBINATION + "|" + _CODE + r")(?![\w-])" + _WORDS
    + r"[ \t]*(?P<connector>" + _CONNECTOR + r"(?![\w])[ \t]*)?[\"'`“‘«]?"
    r"(?P<value>\d+(?:[ .\-/]\d+)*|[A-Za-z]*\d[A-Za-z0-9]*)(?![\w-])",
    re.IGNORECASE,
)
_ANSWERS = re.compile(
    _LABEL_START + r"(?:" + _ANSWER + r")(?![\w-])" + _WORDS + r"[ \t]*(?P<connector>" + _CONNECTOR
    + r")(?![\w])[ \t]*[\"'`“‘«]?(?P<value>[^\s.,;!?\"'`”’»]+(?:[ \t]+[^\s.,;!?\"'`”’»]+){0,3})",
    re.IGNORECASE,
)
_PASSWORDS = re.compile(
    _LABEL_START + r"(?:" + _PASSWORD + r")(?![\w-])" + _WORDS + r"[ \t]*(?P<connector>" + _CONNECTOR
    + r")(?![\w])[ \t]*[\"'`“‘«]?(?P<value>[^\s\"'`”’»,;]{6,80})",
    re.IGNORECASE,
)
# An answer ends before a word that joins another clause.
_JOINER = re.compile(r"[ \t]+(?:and|but|so|because|und|aber|weil|et|mais|car|y|pero|porque|e|ma|perch[ée]|mas"
                     r"|porque|en|maar|omdat|want)(?:[ \t]|$).*", re.IGNORECASE)
MIN_DIGITS = 3  # a PIN, code or combination has at least this many digits
_TRAILING = ".!?)\"'”’»"


# A piece of every label above: a text with none of them is not read further (most messages have none).
_ANCHORS = (
    "pin", "puk", "code", "codig", "códig", "codic", "combina", "kombination", "zahlenschloss", "geheim", "answer",
    "antwort", "ponse", "respuesta", "risposta", "resposta", "antwoord", "maiden", "name meiner", "jeune fille",
    "soltera", "nubile", "meisjesnaam", "memorable", "pass", "pwd", "kennwort", "contrase", "clave", "senha",
    "wachtwoord", "parola", "wifi", "wlan", "netzwerkschl",
)


def labelled_values(text: str) -> Iterator[tuple[int, str]]:
    """(offset, value) of every PIN, code, combination, security answer and password a label names in `text`."""
    folded = text.lower()
    if not any(anchor in folded for anchor in _ANCHORS):
        return
    for match in _NUMBERS.finditer(text):
        if match.group("words") and not match.group("connector"):
            continue  # "pin it to 1.2": words, and nothing says what follows is the PIN
        value = match.group("value")
        if sum(c.isdigit() for c in value) >= MIN_DIGITS:
            yield match.start("value"), value
    for match in _ANSWERS.finditer(text):
        value = _JOINER.sub("", match.group("value")).rstrip(_TRAILING)
        if value:
            yield match.start("value"), value
    for match in _PASSWORDS.finditer(text):
        value = match.group("value").rstrip(_TRAILING)
        if _credential_shaped(value):
            yield match.start("value"), value


def _credential_shaped(value: str) -> bool:
    """A password rather than a word of a sentence: letters and digits, or three kinds of character."""
    if len(value) < 6 or "/" in value or "://" in value:
        return False
    kinds = (any(c.islower() for c in value), any(c.isupper() for c in value), any(c.isdigit() for c in value),
             any(not c.isalnum() for c in value))
    return (kinds[2] and (kinds[0] or kinds[1])) or (len(value) >= 8 and sum(kinds) >= 3)


def has_labelled(text: str) -> bool:
    return next(labelled_values(text), None) is not None
