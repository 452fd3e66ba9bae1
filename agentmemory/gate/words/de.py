"""German: the words the gate reads in a message and in an entry (the same names as `en`, in full)."""
from __future__ import annotations

import re


def _words(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


CODE = "de"
FUNCTION_WORDS = frozenset(
    "ich mich mir mein meine meinen meinem meiner wir uns unser unsere unseren du dich dir dein deine sie ihr es "
    "der die das den dem des ein eine einen einem einer und oder aber also dass weil wenn ob wie was wer wo warum "
    "ist sind war waren bin bist hat habe haben hatte wird werden kann können soll sollte möchte muss nicht kein "
    "keine keinen nie niemals auch noch schon jetzt gerade immer mit von zu zum zur im in auf für aus bei nach "
    "über unter vor bitte danke ja nein doch mal man sich so sehr nur".split()
)
SECRET_LABELS = ("passwort", "kennwort", "pin", "pin-code", "pincode", "geheimzahl", "code", "zugangscode",
                 "türcode", "kombination", "zahlenkombination", "geheimnis", "token", "api-schlüssel",
                 "sicherheitsfrage", "sicherheitsantwort", "zugangsdaten", "tan")
NEGATION = ("nicht", "nie", "niemals", "kein", "keine", "keinen", "keinem", "keiner", "ohne", "nicht mehr",
            "weder", "noch nie")
CONTRAST = ("statt", "anstatt", "anstelle von", "lieber als", "als", "nicht", "nie", "niemals", "kein", "keine",
            "keinen", "ohne", "weder", "noch", "gegen")
REMEMBER_LEAD = _words(
    r"^\W*(?:bitte\s+)?(?:merk(?:e)?\s+(?:dir|euch)|merken\s+sie\s+sich|notier(?:e)?\s+(?:dir|das)|vergiss\s+nicht|"
    r"behalte?\s+im\s+kopf|speicher(?:e)?(?:\s+dir)?)\b(?:\s+(?:bitte|das|dies|folgendes))*\s*[:,-]?\s*"
    r"(?:(?:dass|das)\s+)?"
)

RECALL_QUESTION = _words(
    r"\b(?:weißt|erinnerst|kennst) du (?:noch |eigentlich )?(?!,? dass\b)|\bwas (?:weißt|hast) du (?:über|von)\b"
    r"|\berinnerst du dich\b"
)
REMEMBER = _words(
    r"\b(?:merk(?:e)? (?:dir|euch)|merken sie sich|notier(?:e)? (?:dir|das|es)|vergiss nicht|nicht vergessen|"
    r"behalte? (?:das |es )?im (?:kopf|hinterkopf)|speicher(?:e)? (?:dir |das |es |bitte )|ab jetzt|ab sofort|"
    r"von jetzt an|von nun an|in zukunft|künftig|zukünftig|für die zukunft|ins gedächtnis|in (?:dein|deinem) "
    r"gedächtnis|im gedächtnis)"
)
FORGET = _words(
    r"\b(?:vergiss|vergessen sie)\b(?! (?:nicht|bitte nicht)\b)|\bnicht mehr merken\b"
    r"|\b(?:lösch|entfern)\w*\b.{0,40}\b(?:gedächtnis|erinnerung|notiz|eintr[aä]g|profil)\w*"
)
STRONG_CORRECTION = _words(
    r"^\s*(?:korrektur|update|berichtigung)\s*:|\b(?:eigentlich|tatsächlich|korrektur|nicht mehr|inzwischen|"
    r"mittlerweile|jetzt nutze|ich nutze jetzt|wir nutzen jetzt|ich verwende jetzt|wir verwenden jetzt|"
    r"(?:ich bin|wir sind) (?:umgestiegen|gewechselt|umgezogen)|(?:ich habe|wir haben) (?:gewechselt|umgestellt)|"
    r"das (?:stimmt|ist) (?:nicht|falsch|veraltet)|stimmt nicht mehr)\b"
)
WEAK_CORRECTION = _words(r"\b(?:stattdessen|statt|anstatt|heutzutage|falsch|veraltet)\b")
INTERROGATIVE = _words(
    r"^\s*(?:was|welche[rsmn]?|wer|wen|wem|wessen|wann|wo|woher|wohin|warum|wieso|weshalb|wie|kannst|könntest|"
    r"würdest|wirst|sollte|sollen|soll|hast|habe ich|hat|haben|ist|sind|bin ich|gibt es|weißt|kennst|erinnerst)\b"
)
IMPERATIVE = _words(
    r"^\s*(?:bitte\s+|ok,?\s+|okay,?\s+|jetzt\s+)?(?:schreib|schreibe|erklär|erkläre|zeig|zeige|hilf|gib|sag|"
    r"mach|mache|erstell|erstelle|generier|konvertier|refaktorier|debugge|list|liste|fass|übersetz|übersetze|"
    r"implementier|füg|prüf|prüfe|such|suche|find|finde|vergleich|beschreib|formulier|entwirf|plan|berechne|"
    r"nenn|lass uns|weiter|versuch|danke|vielen dank|hallo|hi|hey|moin|servus|guten (?:morgen|tag|abend)|tschüss|"
    r"ok|okay|cool|super|prima|gut|alles klar)\b"
)
FIRST_PERSON = _words(r"\b(?:ich|mich|mir|mein|meine[nmrs]?|wir|uns|unser|unsere[nmrs]?)\b")
CLAUSES = re.compile(
    r"[.!?]+(?=\s|$)|[;\n]+|:\s+|,\s*(?=(?:aber|und|also|deshalb|deswegen|wie|was|welche|kannst|könntest)\b)",
    re.IGNORECASE,
)

TRANSIENT_TIME = _words(
    r"\b(?:heute|heut|heute abend|morgen früh|morgen|gestern|gerade|grade|im moment|momentan|derzeit|zurzeit|"
    r"aktuell|vorerst|fürs erste|bis jetzt|bisher|diese woche|dieses wochenende|diesen sprint|in dieser sitzung|"
    r"für diese aufgabe|heute morgen|heute nachmittag)\b"
)
TRANSIENT_PROGRESS = _words(
    r"\b(?:arbeite|arbeiten|arbeitet) (?:gerade |noch |grade )?an\b|\bbin (?:gerade |noch )?dabei\b|"
    r"\b(?:bin|sind|ist) (?:gerade |eben |jetzt )?fertig\b|\bfertig (?:mit|geworden)\b|\bhabe? (?:gerade |eben )?"
    r"\w+ (?:fertig|abgeschlossen|erledigt|behoben|gefixt|repariert|gemerged|deployt|installiert)\b|"
    r"\b(?:abgeschlossen|erledigt|behoben|gefixt)\b|\bals nächst(?:es|er|e)\b|\bnächste[rn]? schritte?\b|"
    r"\b(?:danach|dann|anschließend) (?:kommt|kommen|mache ich|nehme ich|geht es|folgt|ist)\b|\bweiter mit\b|"
    r"\bmache? (?:dann |jetzt )?weiter mit\b|\bin arbeit\b|\bto-?do\b|\bmuss noch\b|\bschritt \d+\b|"
    r"\bwill hilfe bei\b|\bbat um hilfe\b|^\W*(?:gerade\s+)?(?:fertig|abgeschlossen|angefangen|begonnen|"
    r"refaktoriert|umgestellt|migriert|behoben)\b"
)
ERROR = _words(
    r"\b(?:\w+(?:Error|Exception)\b|traceback|stacktrace|segfault|exit code|exit-code|fehlermeldung|"
    r"fehler:|schlägt fehl|fehlgeschlagen|ist abgestürzt|stürzt ab|absturz|wirft|geworfen|command not found)"
)
LESSON = _words(
    r"\b(?:immer|nie|niemals|muss|müssen|jedes mal|wann immer|außer wenn|es sei denn|erfordert|braucht|"
    r"sicherstellen|darauf achten|sonst|weil)\b"
)
ONE_OFF_COMMAND = _words(
    r"\b(?:ausgeführt|eingetippt|installiert|deinstalliert|aktualisiert|neu installiert)\b\s+`?"
    r"|^\s*\$\s|\bmusste (?:\w+ )?(?:ausführen|installieren)\b"
)
PASSING = _words(
    r"\bbis (?:montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|morgen|heute abend|nächste woche|"
    r"ende der woche|feierabend)\b|\bbald\b|\bgleich\b|\bstürzt (?:ständig|dauernd|immer wieder) ab\b|"
    r"\b(?:es|das) (?:baut|läuft|geht|funktioniert|kompiliert) (?:jetzt )?wieder\b|\bals nächst(?:es|er|e)\b|"
    r"\b(?:danach|dann|anschließend) (?:kommt|kommen|mache ich|nehme ich|geht es|folgt)\b|\bweiter mit\b|"
    r"\bbin (?:gerade |eben |jetzt )?(?:fertig|dabei)\b|\bauf branch\b|\bnur ein ausrutscher\b|\bbei \d{1,3} ?%"
    # what the person does next, said with the verb before "ich": "danach kümmere ich mich um ...", "endlich"
    # ("dann" left out: "wenn ..., dann nutze ich ..." is a lasting rule; "nur noch" alone is "only ... now")
    r"|\b(?:danach|anschließend|als nächstes|morgen|später)\s+[a-zäöüß]+e\s+ich\b|\bendlich\b"
    r"|\bfast (?:fertig|durch|geschafft)\b|\bnur noch\b[^.;]{0,30}\b(?:fehlt|fehlen|übrig|offen|zu tun)\b"
)
SUMMARY = _words(
    r"\b(?:(?:der|die) (?:nutzer|benutzer|person)(?:in)? (?:hat gefragt|fragte|wollte wissen|bat um)|"
    r"wir haben (?:besprochen|geredet|diskutiert|uns unterhalten)|in diesem (?:gespräch|chat)|"
    r"(?:dieses|das) gespräch (?:ging|war) um|zusammenfassung|zusammengefasst|besprochen wurde)\b"
)
SELF_NOTE = _words(
    r"\b(?:als (?:eine )?ki|ein sprachmodell|der assistent|die assistentin|dieser assistent|assistent (?:hat|ist|"
    r"soll|wird|muss))\b|^\s*ich habe (?:geholfen|erklärt|geantwortet|vorgeschlagen|empfohlen|gezeigt)\b"
)
STOP = frozenset(
    "der die das den dem des ein eine einen einem einer und oder aber dass mit von für auf aus bei nach nicht "
    "ist sind war waren hat haben wird werden kann können soll sollte ich wir sie ihr uns mein meine unser unsere "
    "auch noch schon nur sehr immer bitte danke nutzt nutzen verwendet verwenden mag mögen bevorzugt bevorzugen "
    "arbeitet arbeiten merk merke dir".split()
)
ABOUT_ME = _words(r"\büber mich\b")
ASKS_MEMORY = _words(
    r"\berinnere mich\b|\bhabe ich (?:dir )?(?:gesagt|erzählt|erwähnt)\b|\bnochmal\s*\?\s*$|"
    r"\b(?:was|welche[rsmn]?|wer|wo|wann|wie)\b[^?]{0,50}?\b(?:bin ich|ist mein|sind meine|mein|meine|"
    r"nutzen wir|nutze ich|verwende ich|benutze ich|bevorzuge ich|mag ich|wohne ich|lebe ich|arbeite ich|"
    r"heiße ich|unser|unsere)\b"
)
LEAD_IN = re.compile(
    r"^(?:kurze frage|eine frage|frage|nur zur sicherheit|übrigens|ach ja)\b[^:?.!\n]{0,60}:\s+(?=[^\n]*\?\s*$)",
    re.IGNORECASE,
)
BARE_COMMAND = _words(
    r"^\W*(?:bitte\s+)?(?:merk(?:e)? dir|merken|notier(?:e)?|speicher(?:e)?|behalte?)\s+(?:das|dies|es)"
    r"(?:\s+im kopf)?(?:\s+(?:für|bis|wenn|später)\b[^.!?]*)?\W*$"
)
REMEMBER_FIRST = _words(r"^\W*(?:bitte\s+)?(?:merk(?:e|t)?|erinnere?t?)\b")
PLEASANTRY = re.compile(
    r"^\s*(?:(?:danke|vielen dank|ok|okay|cool|super|prima|hallo|hi|hey|moin)\b[^.!?\n]{0,20}[.!]+\s*)+",
    re.IGNORECASE,
)
