"""Entries that expire: the person's day, phrases read as dates, and removing what is past its date.

An entry may carry an expiry: the last day it holds, as an ISO date in the
person's time zone, kept in the entry's provenance (`provenance.Source.expires`)
and in the snapshot (`rules.Snapshot.expiry`). The rules check it
(`rules.normalize_expiry`); this module is the trusted code around them:

- `time_zone_of` / `today_for`: the person's time zone is the IANA name
  their browser reported to the memory page (`MemoryPreference.time_zone`),
  else settings.TIME_ZONE. "Today" is read there, so "until Sunday" and
  "past its date" mean the person's Sunday and the person's midnight.
- `resolve`: a phrase the model or the person sent ("for a week", "until
  Friday", "11 Dec", "tomorrow", "never") becomes an ISO date (or "never")
  for a given day; what it cannot read is left as it is, for the rules to
  refuse with a reason.
- `remove_expired` / `remove_all_expired`: entries past their date are
  removed by the same locked commit as every change (actor "expiry"), with a
  version and a History line, undoable. It runs on the person's next read of
  the memory page or the API, and from `manage.py memory_remove_expired`
  (cron). A prompt never shows such an entry even before that: the turn
  reads `Snapshot.unexpired(today)`.

Nothing here logs or returns memory content.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import DatabaseError
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from . import provenance
from .models import Actor, MemoryDocument, MemoryPreference
from .rules import CLEAR_EXPIRY, MemoryValidationError, Operation, Snapshot
from .store import CommitResult, MemoryUnavailable, commit_operations, load_state

MAX_TIME_ZONE = 64

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_UNITS = {"day": 1, "days": 1, "week": 7, "weeks": 7, "fortnight": 14}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10}
_NEVER = {"never", "forever", "none", "no expiry", "until i remove it", "permanent", "permanently"}
_LEAD = re.compile(r"^(?:until|till|til|through|thru|expires?|by|on)\s+")
_ISO = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")


def valid_time_zone(name: object) -> str:
    """Return `name` when it is a known IANA time zone, else ""."""
    if (not isinstance(name, str) or not name or len(name) > MAX_TIME_ZONE
            or not re.fullmatch(r"[A-Za-z0-9_+/-]+", name)):
        return ""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ""
    return name


def time_zone_of(user_id) -> ZoneInfo:
    """The person's time zone: the one their browser reported, else settings.TIME_ZONE."""
    name = MemoryPreference.objects.filter(user_id=user_id).values_list("time_zone", flat=True).first()
    return ZoneInfo(valid_time_zone(name) or settings.TIME_ZONE)


def remember_time_zone(user_id, name: object) -> None:
    """Keep the time zone the person's browser reported (ignored when unknown or unchanged)."""
    name = valid_time_zone(name)
    if not name:
        return
    updated = MemoryPreference.objects.filter(user_id=user_id).exclude(time_zone=name).update(time_zone=name)
    if not updated and not MemoryPreference.objects.filter(user_id=user_id).exists():
        MemoryPreference.objects.get_or_create(user_id=user_id, defaults={"time_zone": name})


def today_in(zone: ZoneInfo, now: datetime | None = None) -> str:
    return (now or timezone.now()).astimezone(zone).date().isoformat()


def today_where(time_zone: object, now: datetime | None = None) -> str:
    """Today (ISO) in the named time zone, else in settings.TIME_ZONE."""
    return today_in(ZoneInfo(valid_time_zone(time_zone) or settings.TIME_ZONE), now)


def today_for(user_id, now: datetime | None = None) -> str:
    """The person's today, as an ISO date."""
    return today_in(time_zone_of(user_id), now)


def resolve(phrase: str | None, today: str) -> str | None:
    """Return the ISO date (or "never") a phrase means on the day `today`; else the phrase unchanged.

    Reads: an ISO date; "today", "tomorrow"; "for a week", "for 3 days", "in
    2 weeks", "a fortnight"; "for a month", "for 2 months"; "this week" / "end of
    the week" (the coming Sunday); "next week" (the Sunday after); "until Friday"
    and "next Friday" (the next Friday after today), "this Friday" (today if it is one);
    "11 Dec", "Dec 11", "December 11th" (the next such day); "never", "until I
    remove it". The day a phrase names is the last day the entry holds.
    """
    if phrase is None:
        return None
    text = " ".join(phrase.strip().casefold().replace(",", " ").split()).rstrip(".")
    if not text:
        return phrase
    if _ISO.match(text):
        return text
    if text in _NEVER:
        return CLEAR_EXPIRY
    day = date.fromisoformat(today)
    found = _resolve(_LEAD.sub("", text), day)
    return found.isoformat() if found is not None else phrase


def _resolve(text: str, day: date) -> date | None:
    if text == "today" or text in ("tonight", "end of today", "end of the day"):
        return day
    if text == "tomorrow":
        return day + timedelta(days=1)
    if text in ("this week", "end of the week", "end of this week", "the end of the week", "the weekend",
                "this weekend"):
        return day + timedelta(days=(6 - day.weekday()))
    if text == "next week":
        return day + timedelta(days=(6 - day.weekday()) + 7)
    if text in ("end of the month", "end of this month", "the end of the month"):
        return _add_months(day.replace(day=1), 1) - timedelta(days=1)
    found = re.fullmatch(r"(?:for|in)?\s*(?:the\s+next\s+)?(\w+)\s+(days?|weeks?|fortnight|months?|years?)", text)
    if found is None:
        found = re.fullmatch(r"(?:for|in)?\s*(?:the\s+next\s+)?()(day|week|fortnight|month|year)", text)
    if found is not None:
        count = _count(found.group(1) or "1")
        unit = found.group(2)
        if count is None:
            return None
        if unit.startswith("month"):
            return _add_months(day, count)
        if unit.startswith("year"):
            return _add_months(day, 12 * count)
        return day + timedelta(days=count * _UNITS[unit])
    weekday = re.fullmatch(r"(next\s+|this\s+)?(\w+)", text)
    if weekday is not None and (index := _weekday(weekday.group(2))) is not None:
        ahead = (index - day.weekday()) % 7
        # "until Sunday" said on a Sunday means the next one; only "this Sunday" is today.
        if ahead == 0 and not (weekday.group(1) or "").startswith("this"):
            ahead = 7
        return day + timedelta(days=ahead)
    return _calendar_day(text, day)


# The most a span counts ("for 3660 days"): anything longer is past MAX_EXPIRY_YEARS whatever its unit.
MAX_COUNT = 3660


def _number(word: str, *, digits: int) -> int | None:
    """`word` as a number when it is 1 to `digits` decimal digits of one script, else None.

    Any script's decimal digits read as int() reads them ("٣", "３"); other
    digit characters ("²", "①") and longer runs are no number here, so the
    phrase stays as sent and the rules refuse it with a reason (int() raises
    on the former, and past 4,300 digits, and a year must not be huge).
    """
    if not (0 < len(word) <= digits and word.isdecimal()):
        return None
    return int(word)


def _count(word: str) -> int | None:
    if word.isdecimal():
        count = _number(word, digits=len(str(MAX_COUNT)))
        return count if count is not None and count <= MAX_COUNT else None
    return _NUMBERS.get(word)


def _weekday(word: str) -> int | None:
    for index, name in enumerate(_WEEKDAYS):
        if word == name or (len(word) >= 3 and name.startswith(word)):
            return index
    return None


def _month(word: str) -> int | None:
    for index, name in enumerate(_MONTHS, start=1):
        if word == name or (len(word) >= 3 and name.startswith(word)):
            return index
    return None


def _calendar_day(text: str, day: date) -> date | None:
    # "11 dec", "dec 11", "december 11th", "fri 11 dec", "11 dec 2027"
    words = [word for word in text.split() if _weekday(word) is None]
    number = month = year = None
    for word in words:
        bare = re.sub(r"(st|nd|rd|th)$", "", word)
        if len(bare) == 4 and (found := _number(bare, digits=4)) is not None:
            year = found
        elif number is None and (found := _number(bare, digits=2)) is not None:
            number = found
        elif (found := _month(word)) is not None and month is None:
            month = found
        else:
            return None
    if number is None or month is None:
        return None
    try:
        named = date(day.year if year is None else year, month, number)
        if year is None and named < day:
            named = date(day.year + 1, month, number)
    except ValueError:
        return None
    return named


def _add_months(day: date, months: int) -> date:
    month = day.month - 1 + months
    year, month = day.year + month // 12, month % 12 + 1
    for last in (31, 30, 29, 28):
        try:
            return date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise ValueError("no such month")  # pragma: no cover


def resolve_operations(raw: object, today: str) -> object:
    """Return tool or API arguments with each operation's `expires` phrase resolved (`resolve`).

    Trusted code between the untrusted arguments and the rules: it only
    rewrites a string `expires` it can read; everything else, and anything
    malformed, is passed on untouched for `rules.parse_operations` to judge.
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("operations"), list):
        return raw
    operations = []
    for item in raw["operations"]:
        if isinstance(item, Mapping) and isinstance(item.get("expires"), str) and item["expires"].strip():
            item = {**item, "expires": resolve(item["expires"], today)}
        operations.append(item)
    return {**raw, "operations": operations}


# A message that speaks of time: a date, a weekday or month, a span, "until", "today", "expire", "for now".
_TIME_CUE = re.compile(
    r"\b(?:until|till|til|through|thru|expir\w*|temporar\w*|today|tonight|tomorrow|yesterday|week\w*|month\w*"
    r"|year\w*|days?|fortnight|weekend|for now|for a while|while|during|deadline|by the end|this (?:morning|afternoon"
    r"|evening)|" + "|".join(_WEEKDAYS) + "|" + "|".join(m for m in _MONTHS if m != "may") + r")\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}[./]\d{1,2}\b",
    re.IGNORECASE,
)


def mentions_time(message: str) -> bool:
    """True when the person's message speaks of a time (a date, a span, "until", "today", "expire", ...)."""
    return bool(_TIME_CUE.search(message or ""))


def without_unasked_expiry(raw: object, message: str) -> tuple[object, int]:
    """Drop the `expires` of every operation when the person's message speaks of no time; return (raw, dropped).

    The model may not decide on its own that an entry expires: a small one
    sent past or unreadable dates on plain facts ("remember about me: …"),
    and the whole batch was refused. A message with any time in it keeps
    what the model sent, for the rules to judge. "never" (clearing an
    expiry) is kept too.
    """
    if mentions_time(message) or not isinstance(raw, Mapping) or not isinstance(raw.get("operations"), list):
        return raw, 0
    operations, dropped = [], 0
    for item in raw["operations"]:
        value = item.get("expires") if isinstance(item, Mapping) else None
        if isinstance(value, str) and value.strip() and value.strip().lower() not in _NEVER:
            item = {key: field for key, field in item.items() if key != "expires"}
            dropped += 1
        operations.append(item)
    return {**raw, "operations": operations}, dropped


# --- the person's own words: "remember this until Friday" -------------------------------------------------
# A time the person gave for what is saved: "until Friday", "for two weeks", "bis Freitag", "für zwei Wochen".
# German words are read as the English phrase `resolve` knows (one reader of time phrases, not two).
_GERMAN = {
    "montag": "monday", "dienstag": "tuesday", "mittwoch": "wednesday", "donnerstag": "thursday",
    "freitag": "friday", "samstag": "saturday", "sonnabend": "saturday", "sonntag": "sunday",
    "heute": "today", "morgen": "tomorrow", "übermorgen": None, "nächsten": "next", "nächste": "next",
    "kommenden": "next", "kommende": "next", "diesen": "this", "diese": "this", "dieses": "this",
    "ein": "a", "eine": "a", "einen": "a", "einem": "a", "zwei": "two", "drei": "three", "vier": "four",
    "fünf": "five", "sechs": "six", "sieben": "seven", "acht": "eight", "neun": "nine", "zehn": "ten",
    "tag": "day", "tage": "days", "tagen": "days", "woche": "week", "wochen": "weeks", "monat": "month",
    "monate": "months", "monaten": "months", "jahr": "year", "jahre": "years", "jahren": "years",
    "januar": "january", "jänner": "january", "februar": "february", "märz": "march", "mai": "may",
    "juni": "june", "juli": "july", "oktober": "october", "dezember": "december", "wochenende": "this weekend",
}
_GERMAN_WHOLE = {"ende der woche": "end of the week", "ende dieser woche": "end of the week",
                 "zum wochenende": "the weekend", "ende des monats": "end of the month",
                 "monatsende": "end of the month"}
_UNTIL_WORDS = re.compile(r"\b(?:until|till|through|thru|bis(?:\s+(?:zum|zur|einschließlich))?)\s+(.{1,40})",
                          re.IGNORECASE)
_SPAN_WORDS = re.compile(r"\b(?:for|für)\s+((?:the\s+next\s+|die\s+nächsten\s+)?\w+(?:\s+\w+)?)", re.IGNORECASE)
# "for two weeks" counts only said of what to keep ("remember this for two weeks"), not of the past
# ("I have been learning Rust for two weeks").
_SPAN = re.compile(r"^(?:the\s+next\s+)?(?:a|an|\d{1,4}|" + "|".join(_NUMBERS) + r")\s+(?:days?|weeks?|months?|years?"
                   r"|fortnight)$")
_KEEP_CUE = re.compile(r"\b(?:remember|keep|note|save|store|merk\w*|speicher\w*|behalte?\w*|notier\w*)\b",
                       re.IGNORECASE)
_PAST_CUE = re.compile(r"\b(?:been|since|ago|seit|schon)\b", re.IGNORECASE)


def asked_expiry(message: str, today: str, content: str | None = None) -> str | None:
    """The one last day (ISO) the person's message gives for what is saved; None when it gives none or several.

    With `content` (the fact being saved), a time counts only in a sentence
    that asks to keep something or shares a word with the fact: in
    "Remember I'm vegetarian. I'm away until Monday." Monday is not the
    vegetarian's last day.
    """
    found = set()
    for sentence in _SENTENCE_END.split(message or ""):
        if content is not None and not (_KEEP_CUE.search(sentence) or _shares_a_word(sentence, content)):
            continue
        for match in _UNTIL_WORDS.finditer(sentence):
            found.add(_first_day(match.group(1), today))
        if _KEEP_CUE.search(message or "") and not _PAST_CUE.search(sentence):
            for match in _SPAN_WORDS.finditer(sentence):
                found.add(_first_day(match.group(1), today))
    found.discard(None)
    return found.pop() if len(found) == 1 else None


_SENTENCE_END = re.compile(r"(?<!\d)[.!?;\n]+\s*")


def _shares_a_word(sentence: str, content: str) -> bool:
    words = {word for word in re.findall(r"\w{4,}", content.casefold())}
    return any(word in words for word in re.findall(r"\w{4,}", sentence.casefold()))


def _first_day(words: str, today: str) -> str | None:
    """The date the longest phrase at the start of `words` means ("Friday: I'm in Lisbon" -> Friday)."""
    tokens = re.split(r"\s+", re.split(r"[:;!?()\"“”]|,\s|(?<!\d)\.\s|\.$", words.strip(), maxsplit=1)[0].strip())
    for size in range(min(len(tokens), 5), 0, -1):
        phrase = " ".join(tokens[:size]).casefold().rstrip(".")
        english = _GERMAN_WHOLE.get(phrase) or " ".join(
            str(_GERMAN.get(word, word)) if _GERMAN.get(word, word) is not None else "\0"
            for word in (part.rstrip(".") if part[:-1].isdecimal() else part for part in phrase.split()))
        if "\0" in english:
            continue
        english = re.sub(r"^die next\s+", "the next ", english)
        resolved = resolve(f"for {english}" if _SPAN.match(english) else english, today)
        if resolved is not None and _ISO.match(resolved):
            return resolved
    return None


def with_asked_expiry(raw: object, message: str, today: str) -> tuple[object, str]:
    """Give the batch's one add the expiry the person's message asks for, when the model set none.

    "Remember until Friday: I'm in Lisbon" and an add without `expires`:
    trusted code reads the person's words and sets the entry's last day
    (`asked_expiry`); with several adds, or none, it cannot tell which fact
    the time is for and leaves the batch alone. Returns (raw, the date set
    or "").
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("operations"), list):
        return raw, ""
    adds = [index for index, item in enumerate(raw["operations"])
            if isinstance(item, Mapping) and item.get("action") == "add"]
    if len(adds) != 1:
        return raw, ""
    item = raw["operations"][adds[0]]
    if isinstance(item.get("expires"), str) and item["expires"].strip():
        return raw, ""
    day = asked_expiry(message, today, str(item.get("content") or ""))
    if day is None:
        return raw, ""
    operations = list(raw["operations"])
    operations[adds[0]] = {**item, "expires": day}
    return {**raw, "operations": operations}, day


def expired_operations(snapshot: Snapshot, today: str) -> list[Operation]:
    """The pinned removes of the entries past their date."""
    return [Operation(target=target, action="remove", match=entry, entry=entry)  # type: ignore[arg-type]  # TARGETS
            for target, entries in snapshot.expired(today).items() for entry in entries]


def remove_expired(*, user_id, today: str | None = None) -> CommitResult | None:
    return _remove_expired(user_id, today)[0]


def _remove_expired(user_id, today: str | None) -> tuple[CommitResult | None, int]:
    """Remove the person's entries past their date in one locked commit; also how many entries went.

    Under the lock the commit checks again that each entry is still there
    and still past its date (an entry changed or given a later date
    meanwhile is left alone: the batch is skipped, the next read tries again).
    """
    try:
        state = load_state(user_id=user_id)
    except MemoryUnavailable:
        return None, 0
    if not state.snapshot.expiry:
        return None, 0
    today = today or today_for(user_id)
    operations = expired_operations(state.snapshot, today)
    if not operations:
        return None, 0
    wanted = {(op.target, op.entry) for op in operations}

    def still_expired(current: Snapshot) -> None:
        gone = {(target, entry) for target, entries in current.expired(today).items() for entry in entries}
        if not wanted <= gone:
            raise MemoryValidationError("An entry's expiry changed since it was read.", code="conflict")

    try:
        result = commit_operations(
            user_id=user_id, operations=operations, actor=Actor.EXPIRY, origin={"by": provenance.EXPIRY},
            precondition=still_expired, max_operations=max(len(operations), 1),
        )
    except (MemoryValidationError, DatabaseError):
        return None, 0
    return result, len(operations)


def people_with_expiries():
    """The ids of people with at least one entry that has an expiry (the cron job's list)."""
    return (MemoryDocument.objects.annotate(sources_text=Cast("provenance", TextField()))
            .filter(sources_text__contains='"expires"').values_list("user_id", flat=True).distinct())


def remove_all_expired(now: datetime | None = None) -> tuple[int, int]:
    """Remove every person's entries past their date (each person's own day); return (people, entries)."""
    people = entries = 0
    for user_id in list(people_with_expiries()):
        result, removed = _remove_expired(user_id, today_for(user_id, now))
        if result is not None and result.change_id is not None:
            people += 1
            entries += removed
    return people, entries

