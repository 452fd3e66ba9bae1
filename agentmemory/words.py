"""Words for people: every memory outcome and error code as a plain sentence.

Codes (`MemoryEvent.error_code`, `MemoryValidationError.code`, a turn's
outcome code) are for programs and stay in API fields and logs. What a person
reads on the memory page, in its History and in the admin comes from here, so
no rule name, operation index or HTTP status reaches them. The words of a
chat turn's memory outcome live in `agentmemory.turn` (`OUTCOME_MESSAGES`,
`CODE_MESSAGES`); this module reuses them where a History row says the same
thing. Model-facing tool replies (`MemoryValidationError.message`) are not
words for people and are never shown here.

Nothing here receives or returns memory content: only codes, targets, counts
and limits.

Everything here is translatable (`gettext_lazy` in the tables, `gettext` /
`ngettext` at call time; agentmemory/locale/ ships German). The functions
return plain `str` in the active language, so their result can go into JSON
(a DRF response, a channel frame, the session) as it is. The tables are lazy:
pass one through `str()` before it reaches `json.dumps`. Sentences with a
document in them are whole sentences per document, because other languages
inflect "your profile" differently after each preposition.
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.text import capfirst, get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, pgettext, pgettext_lazy

from . import threats
from .turn import CODE_MESSAGES, DISCARDED, OUTCOME_MESSAGES, UNCONFIRMED

# The two documents as the person knows them (the page's headings are the
# prompt's titles; the chat's usage line says "Profile" and "Notes").
DOCUMENTS = {"user": gettext_lazy("your profile"), "memory": gettext_lazy("your notes")}
# The page's heading of each document (the prompt's own titles stay English for the model).
DOCUMENT_TITLES = {"user": gettext_lazy("USER PROFILE"), "memory": gettext_lazy("AGENT MEMORY")}
# Where a change in History happened: "In your profile:".
_DOCUMENT_HEADINGS = {"user": gettext_lazy("In your profile:"), "memory": gettext_lazy("In your notes:")}

# Who acted, as the owner reads it in History.
ACTORS = {"agent": gettext_lazy("Assistant"), "user": gettext_lazy("You"), "staff": gettext_lazy("Support staff"),
          "system": gettext_lazy("System")}

# `MemoryEvent.outcome`, in a word or two.
OUTCOMES = {
    "committed": gettext_lazy("Saved"),
    "unchanged": gettext_lazy("Nothing changed"),
    "rejected": gettext_lazy("Not saved"),
    "cancelled": gettext_lazy("Stopped"),
    "failed": gettext_lazy("Not saved"),
    "discarded": gettext_lazy("Not saved"),
    "erased": gettext_lazy("Erased"),
    "memory_on": gettext_lazy("Setting changed"),
    "memory_off": gettext_lazy("Setting changed"),
    "ask_first": gettext_lazy("Setting changed"),
    "auto_save": gettext_lazy("Setting changed"),
    "proposed": gettext_lazy("Proposed"),
    "viewed": gettext_lazy("Viewed"),
}

# The switch's events: what changed, in History.
_SWITCH_CHANGES = {
    "memory_on": gettext_lazy("Turned on “Use memory in chats”"),
    "memory_off": gettext_lazy("Turned off “Use memory in chats”: chats neither use nor change memory"),
    "ask_first": gettext_lazy("Chose “Ask me before saving”: the assistant proposes changes for you to save"),
    "auto_save": gettext_lazy("Chose “Save automatically”: the assistant saves changes when its reply completes"),
}

# A staff member's read in the admin (outcome "viewed"), by what it showed
# (`MemoryEvent.viewed`): as the person reads it in History, and as the admin lists it.
_VIEWED = {
    "memory": gettext_lazy("Support staff viewed your memory"),
    "proposal": gettext_lazy("Support staff viewed a change the assistant proposed to your memory"),
    "conversation": gettext_lazy("Support staff viewed one of your conversations"),
    "search": gettext_lazy("Support staff searched conversations, and yours were among the results"),
    "version": gettext_lazy("Support staff viewed an earlier version of your memory"),
    "review": gettext_lazy("Support staff reviewed an entry"),
}
_VIEWED_FOR_STAFF = {
    "memory": gettext_lazy("Viewed the memory"),
    "proposal": gettext_lazy("Viewed a proposed change"),
    "conversation": gettext_lazy("Viewed a conversation"),
    "search": gettext_lazy("Searched conversations; this person's were among the results"),
    "version": gettext_lazy("Viewed an earlier version of the memory"),
    "review": gettext_lazy("Reviewed an entry the assistant saved"),
}
# Which documents a staff read showed, in parentheses: as the owner reads it, and as the admin lists it.
_VIEWED_WHERE = {
    ("user",): gettext_lazy("your profile"),
    ("memory",): gettext_lazy("your notes"),
    ("user", "memory"): gettext_lazy("your profile and your notes"),
}
_VIEWED_WHERE_FOR_STAFF = {
    ("user",): gettext_lazy("the profile"),
    ("memory",): gettext_lazy("the notes"),
    ("user", "memory"): gettext_lazy("the profile and the notes"),
}

# The actions an event counts, in the order History names them.
_ACTIONS = ("add", "replace", "expiry", "remove")

# How the page names a threat category: "it looks like ...".
THREAT_LABELS = {
    threats.PROMPT_INJECTION: gettext_lazy("an instruction to the assistant (prompt injection)"),
    threats.ROLE_HIJACK: gettext_lazy("an attempt to change the assistant's role"),
    "command_and_control": gettext_lazy("an instruction to contact or obey an outside server"),
    "hidden_content": gettext_lazy("hidden text meant for the assistant"),
    threats.EXFILTRATION: gettext_lazy("a request to send data somewhere"),
    threats.PERSISTENCE: gettext_lazy("a change to login keys or agent settings"),
    threats.SECRET: gettext_lazy("a password, token or key"),
    threats.INVISIBLE_UNICODE: gettext_lazy("text with invisible or direction-changing characters"),
    threats.OVERSIZED: gettext_lazy("text too long to check"),
}

_CHANGED_ON_PAGE = gettext_lazy(
    "This entry was changed or removed since the page was loaded; nothing was saved. "
    "Reload the page to see the current memory."
)
_TOO_MANY_AT_ONCE = gettext_lazy("Too many changes at once; nothing was saved. Make fewer changes at a time.")
_WRITE_THE_FACT = gettext_lazy("Write the fact itself before saving.")

# A rule's code as the person who typed the text reads it (memory page forms).
RULE_MESSAGES = {
    "invalid_expiry": gettext_lazy("Choose a date, or keep the entry until you remove it."),
    "expiry_past": gettext_lazy("That date has passed. Choose today or a later date."),
    "expiry_too_far": gettext_lazy("Choose a date within ten years, or keep the entry until you remove it."),
    "remove_with_expiry": gettext_lazy("A removed entry has no expiry; nothing changed."),
    "invalid_content": _WRITE_THE_FACT,
    "empty_entry": _WRITE_THE_FACT,
    "add_without_content": _WRITE_THE_FACT,
    "incomplete_entry": gettext_lazy("Write the whole fact before saving."),
    "delimiter_in_entry": gettext_lazy(
        "An entry cannot have a line with only “§” on it. Save each fact as its own entry."
    ),
    "control_character": gettext_lazy(
        "The text has an invisible control character. Type it again as plain text."),
    "reserved_tag": gettext_lazy(
        "The text has a tag that only the assistant's memory block may use. Remove the tag."),
    "reserved_header": gettext_lazy(
        "A line looks like a heading of the assistant's memory (such as “USER PROFILE”). "
        "Write the fact without it."),
    "replace_duplicate": gettext_lazy("Another entry already says exactly this. Remove this entry instead."),
    "entry_changed": _CHANGED_ON_PAGE,
    "conflict": _CHANGED_ON_PAGE,
    "no_match": _CHANGED_ON_PAGE,
    "ambiguous_match": _CHANGED_ON_PAGE,
    "batch_size": _TOO_MANY_AT_ONCE,
    "turn_budget": _TOO_MANY_AT_ONCE,
}
RULE_FALLBACK = gettext_lazy(
    "This change could not be saved; nothing was changed. Check the text and try again.")

_ON_OUR_SIDE = gettext_lazy("Something went wrong on our side, so the memory change was not saved.")
_TOO_MANY_SO = gettext_lazy("Too many changes at once, so nothing was saved.")

# Why an event did not save, as its owner reads it in History.
REASONS = {
    # a chat turn that did not complete (the reason its staged change was dropped)
    "cancelled": CODE_MESSAGES["cancelled"],
    "model_failed_after_staging": gettext_lazy(
        "The assistant failed before finishing its answer, so its memory change was not saved."),
    "model_incomplete": gettext_lazy(
        "The answer was cut off before it finished, so its memory change was not saved."),
    "model_error": gettext_lazy("The assistant could not answer, so its memory change was not saved."),
    "model_unreachable": gettext_lazy("The assistant could not be reached, so its memory change was not saved."),
    "model_empty": gettext_lazy("The assistant gave no answer, so its memory change was not saved."),
    "turn_timeout": gettext_lazy(
        "The answer took too long and was stopped, so its memory change was not saved."),
    "turn_error": _ON_OUR_SIDE,
    "internal_error": _ON_OUR_SIDE,
    # a commit that did not go through
    "conflict": CODE_MESSAGES["conflict"],
    "database_error": gettext_lazy("The database did not answer, so nothing was saved."),
    "memory_busy": CODE_MESSAGES["memory_busy"],
    "account_closed": CODE_MESSAGES["account_closed"],
    "session_ended": CODE_MESSAGES["session_ended"],
    "switched_off": CODE_MESSAGES["switched_off"],
    "proposal_discarded": gettext_lazy("You discarded this proposed change, so nothing was saved."),
    "commit_failed": CODE_MESSAGES["commit_failed"],
    "entry_changed": gettext_lazy("The entry had changed since the page was loaded, so nothing was saved."),
    "no_match": gettext_lazy("The entry to change was no longer there, so nothing was saved."),
    "ambiguous_match": gettext_lazy("It was not clear which entry to change, so nothing was saved."),
    "over_capacity": gettext_lazy(
        "It did not fit: memory would have gone over its limit, so nothing was saved."),
    "replace_duplicate": gettext_lazy("Another entry already said the same, so nothing was saved."),
    "batch_size": _TOO_MANY_SO,
    "turn_budget": _TOO_MANY_SO,
}
REJECTED_FALLBACK = gettext_lazy("The change broke one of memory's rules, so nothing was saved.")
FAILED_FALLBACK = gettext_lazy("Something went wrong while saving, so nothing was saved.")

# Outcomes that say enough without a reason.
_OUTCOME_REASONS = {
    "unchanged": CODE_MESSAGES["unchanged"],
    "cancelled": CODE_MESSAGES["cancelled"],
}


def number(value: int) -> str:
    """A count or a limit as the active language groups its digits ("8,000"; German "8.000")."""
    return number_format(value, force_grouping=True)


def usage_label(measured) -> str:
    """A document's usage as a person reads it ("41% — 564/1,375 chars"; German "41 % — 564/1.375 Zeichen").

    The tool's reply to the model says the same in English (`rules.Usage.__str__`).
    """
    return _("%(percent)s%% — %(used)s/%(limit)s chars") % {
        "percent": measured.percent, "used": number(measured.used), "limit": number(measured.limit)}


def document_name(target: str | None) -> str:
    return str(DOCUMENTS.get(target or "", gettext_lazy("your memory")))


def document_title(target: str) -> str:
    """The page's heading of a document ("USER PROFILE"), in the active language."""
    return str(DOCUMENT_TITLES.get(target, target))


def document_heading(target: str | None) -> str:
    """Where a change happened, as History heads it: "In your profile:"."""
    return str(_DOCUMENT_HEADINGS.get(target or "", gettext_lazy("In your memory:")))


def actor_name(actor: str) -> str:
    return str(ACTORS.get(actor, ACTORS["system"]))


def outcome_name(outcome: str) -> str:
    return str(OUTCOMES.get(outcome, OUTCOMES["rejected"]))


def threat_label(category: str) -> str:
    return str(THREAT_LABELS.get(category, gettext_lazy("text that memory does not keep")))


def rule_message(code: str, *, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for a rule a person's own edit broke.

    `code` is `MemoryValidationError.code`; its `message` is written for the
    model and is never passed here.
    """
    if code == "over_capacity":
        limit = (limits or {}).get(target or "")
        if limit:
            if target == "user":
                sentence = _("This does not fit: your profile would be over its limit of %(limit)s characters. "
                             "Shorten or remove another entry first.")
            elif target == "memory":
                sentence = _("This does not fit: your notes would be over its limit of %(limit)s characters. "
                             "Shorten or remove another entry first.")
            else:
                sentence = _("This does not fit: your memory would be over its limit of %(limit)s characters. "
                             "Shorten or remove another entry first.")
            return sentence % {"limit": number(limit)}
        if target == "user":
            return _("This does not fit: your profile is full. Shorten or remove another entry first.")
        if target == "memory":
            return _("This does not fit: your notes is full. Shorten or remove another entry first.")
        return _("This does not fit: your memory is full. Shorten or remove another entry first.")
    if code.startswith("threat_"):
        return _("This was not saved: it looks like %(threat)s, which memory does not keep. "
                 "Write the fact without it.") % {"threat": threat_label(code.removeprefix("threat_"))}
    return str(RULE_MESSAGES.get(code, RULE_FALLBACK))


# An erase's receipt (`store.Erased.removed`), by kind, in the order people read it.
_RECEIPT_KINDS = ("profile_entries", "notes_entries", "versions", "proposals", "conversations", "messages",
                  "search_index_rows")


def _receipt_part(kind: str, count: int) -> str:
    values = {"count": number(count)}
    if kind == "profile_entries":
        return ngettext("%(count)s profile entry", "%(count)s profile entries", count) % values
    if kind == "notes_entries":
        return ngettext("%(count)s notes entry", "%(count)s notes entries", count) % values
    if kind == "versions":
        return ngettext("%(count)s earlier version", "%(count)s earlier versions", count) % values
    if kind == "proposals":
        return ngettext("%(count)s proposed change", "%(count)s proposed changes", count) % values
    if kind == "conversations":
        return ngettext("%(count)s conversation", "%(count)s conversations", count) % values
    if kind == "messages":
        return ngettext("%(count)s message", "%(count)s messages", count) % values
    return ngettext("%(count)s search index row", "%(count)s search index rows", count) % values


def _and_list(parts: list[str]) -> str:
    """"a, b and c" in the active language."""
    return get_text_list(parts, _("and"))


def erase_receipt(removed: Mapping[str, int]) -> str:
    """Return what an erase removed, e.g. "2 profile entries, 1 earlier version and 3 conversations"; "" for none.

    Kinds with none removed are left out; an erase that removed nothing reads "nothing (your memory was empty)".
    """
    if not isinstance(removed, Mapping) or not any(kind in removed for kind in _RECEIPT_KINDS):
        return ""
    parts = [_receipt_part(kind, removed[kind]) for kind in _RECEIPT_KINDS if removed.get(kind)]
    if not parts:
        return _("nothing (your memory was empty)")
    return _and_list(parts)


def erase_summary(removed: Mapping[str, int]) -> str:
    """An erase's receipt as one sentence: "Erased 2 profile entries and 1 earlier version."."""
    return _("Erased %(receipt)s.") % {"receipt": erase_receipt(removed)}


# Undo and restore (`agentmemory.versions`), as the person reads them on the
# memory page, in the chat and in the API's `detail`.
CHANGE_GONE = gettext_lazy(
    "This change is no longer kept (older changes are deleted after a while, and erasing memory "
    "deletes them all), so it cannot be undone or restored.")
UNDONE = gettext_lazy("Undone: your memory is as it was before that change.")
RESTORED = gettext_lazy("Restored: your memory is as that change left it.")
NOTHING_CHANGED = gettext_lazy("Your memory already held this, so nothing changed.")
# A change whose COMMIT's answer was lost (`store.CommitOutcomeUnknown`), once the database was asked:
# it confirmed the change absent, or did not answer in time (the chat turn says the same, `turn`).
COMMIT_NOT_STORED = gettext_lazy(
    "The connection to the database broke while saving, and the database has since confirmed "
    "that nothing was saved. Try again.")
COMMIT_UNCONFIRMED = OUTCOME_MESSAGES[UNCONFIRMED]
_CHANGE_AUTHORS = {"agent": gettext_lazy("The assistant, in a chat"), "user": gettext_lazy("You"),
                   "staff": gettext_lazy("Support staff"), "system": gettext_lazy("The system")}


def change_author(by: str, kind: str) -> str:
    """Say who made a change and how ("You, undoing a change"), for the History's list of changes."""
    who = str(_CHANGE_AUTHORS.get(by, _CHANGE_AUTHORS["system"]))
    if kind == "undo":
        return _("%(who)s, undoing an earlier change") % {"who": who}
    if kind == "restore":
        return _("%(who)s, restoring an earlier version") % {"who": who}
    return who


_UNDO_REFUSALS = {
    "conflict": gettext_lazy(
        "Something this change wrote has changed since, so nothing was undone. Correct or remove it by hand "
        "instead."),
    "nothing_to_undo": gettext_lazy(
        "Your memory already holds what undoing this would bring back; nothing changed."),
    "already_restored": gettext_lazy("Your memory already holds this version; nothing changed."),
}
_RESTORE_REFUSALS = {
    "conflict": gettext_lazy(
        "Your memory changed while this was being restored, so nothing was restored. Look again and try "
        "once more."),
}


def undo_message(code: str, *, action: str, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for an undo (`action` "undo") or a restore ("restore") that was refused."""
    if action == "restore" and code in _RESTORE_REFUSALS:
        return str(_RESTORE_REFUSALS[code])
    if code in _UNDO_REFUSALS:
        return str(_UNDO_REFUSALS[code])
    if code in ("no_match", "ambiguous_match", "entry_changed"):
        return str(_UNDO_REFUSALS["conflict"])
    if code == "replace_duplicate":
        return _("Another entry already says what this would bring back, so nothing changed.")
    if code == "batch_size":
        return _("This would change too much at once; nothing changed. Correct your memory by hand instead.")
    return rule_message(code, target=target, limits=limits)


# What the assistant tells the person when the tool refused its change (the
# tool's reply itself is written for the model and never shown). By code, then
# by document ("user": the person's profile; anything else: the assistant's notes).
_REFUSALS = {
    ("no_match", "user"): gettext_lazy("I could not find that in your profile, so nothing changed."),
    ("no_match", "memory"): gettext_lazy("I could not find that in my notes, so nothing changed."),
    ("ambiguous_match", "user"): gettext_lazy(
        "More than one entry in your profile matches that, so I changed nothing. Tell me which one you mean."),
    ("ambiguous_match", "memory"): gettext_lazy(
        "More than one entry in my notes matches that, so I changed nothing. Tell me which one you mean."),
    ("over_capacity", "user"): gettext_lazy(
        "That does not fit: your profile is full, so nothing was saved. "
        "You can review what I keep on your memory page."),
    ("over_capacity", "memory"): gettext_lazy(
        "That does not fit: my notes is full, so nothing was saved. "
        "You can review what I keep on your memory page."),
    ("replace_duplicate", "user"): gettext_lazy(
        "Another entry in your profile already says that, so nothing changed."),
    ("replace_duplicate", "memory"): gettext_lazy(
        "Another entry in my notes already says that, so nothing changed."),
}
_REFUSALS_ANYWHERE = {
    "stop_retrying": gettext_lazy("I could not change my memory this time, so nothing was saved."),
    "unavailable": gettext_lazy("My memory is not available right now, so nothing was saved."),
}
REFUSAL_FALLBACK = gettext_lazy("I could not change my memory, so nothing was saved.")


def refusal_sentence(code: str, *, target: str | None = None) -> str:
    """Return what an assistant tells the person when its memory change was refused (`code`)."""
    if code.startswith("threat_"):
        return _("I did not save that: it looks like %(threat)s, which memory does not keep.") % {
            "threat": threat_label(code.removeprefix("threat_"))}
    where = "user" if target == "user" else "memory"
    return str(_REFUSALS.get((code, where)) or _REFUSALS_ANYWHERE.get(code, REFUSAL_FALLBACK))


# "Ask before saving": a proposed change as the person reviews it, and why saving it failed.
PROPOSAL_ACTIONS = {
    ("add", "user"): gettext_lazy("Add to your profile"),
    ("add", "memory"): gettext_lazy("Add to your notes"),
    ("replace", "user"): gettext_lazy("Change in your profile"),
    ("replace", "memory"): gettext_lazy("Change in your notes"),
    ("remove", "user"): gettext_lazy("Remove from your profile"),
    ("remove", "memory"): gettext_lazy("Remove from your notes"),
}
# A write whose person no longer exists: the account was deleted while the request ran.
ACCOUNT_GONE = gettext_lazy("Nothing was saved: your account was deleted or is being deleted.")

PROPOSAL_STALE = gettext_lazy(
    "Your memory changed since this was proposed, so it no longer applies. Nothing was saved; you can discard it.")
PROPOSAL_GONE = gettext_lazy(
    "This proposed change is no longer waiting: it was saved, discarded or has expired.")
_STALE_CODES = frozenset({"conflict", "no_match", "ambiguous_match", "entry_changed", "replace_duplicate"})


def proposal_action(action: str, target: str) -> str:
    """Return e.g. "Add to your notes" for one operation of a proposal."""
    return str(PROPOSAL_ACTIONS.get((action, target), gettext_lazy("Change your memory")))


def you_said(quote: str) -> str:
    """Return "You said: “…”", the person's own sentence beside a question (`gate.said`), or "" without one."""
    return _("You said: “%(quote)s”") % {"quote": quote} if quote else ""


# Tidy up's proposal (`agentmemory.tidy`), line by line: a merge, a shorter wording, an entry folded into
# a merged line, an entry dropped; by document.
TIDY_ACTIONS = {
    ("merge", "user"): gettext_lazy("Merge into one line in your profile"),
    ("merge", "memory"): gettext_lazy("Merge into one line in your notes"),
    ("reword", "user"): gettext_lazy("Shorten in your profile"),
    ("reword", "memory"): gettext_lazy("Shorten in your notes"),
    ("folded", "user"): gettext_lazy("Part of a merged line, so removed from your profile"),
    ("folded", "memory"): gettext_lazy("Part of a merged line, so removed from your notes"),
    ("drop", "user"): gettext_lazy("Drop from your profile (repeated or out of date)"),
    ("drop", "memory"): gettext_lazy("Drop from your notes (repeated or out of date)"),
}


def tidy_action(kind: str, target: str) -> str:
    """Return e.g. "Merge into one line in your notes" for one line of a Tidy up's proposal."""
    if (kind, target) in TIDY_ACTIONS:
        return str(TIDY_ACTIONS[(kind, target)])
    if target == "user":
        return _("Change your profile")
    if target == "memory":
        return _("Change your notes")
    return _("Change your memory")


def proposal_message(code: str, *, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for a proposal that could not be saved (its rule's code)."""
    if code in _STALE_CODES:
        return str(PROPOSAL_STALE)
    return rule_message(code, target=target, limits=limits)


def _action_part(action: str, count: int, mode: str) -> str:
    """One action of a History row, e.g. "added 2 entries" (mode "done") or "add 2 entries" (tried, proposed)."""
    values = {"count": number(count)}
    if mode == "done":
        if action == "add":
            return ngettext("added %(count)s entry", "added %(count)s entries", count) % values
        if action == "replace":
            return ngettext("corrected %(count)s entry", "corrected %(count)s entries", count) % values
        if action == "expiry":
            return ngettext("changed the expiry of %(count)s entry", "changed the expiry of %(count)s entries",
                            count) % values
        return ngettext("removed %(count)s entry", "removed %(count)s entries", count) % values
    if action == "add":
        return ngettext("add %(count)s entry", "add %(count)s entries", count) % values
    if action == "replace":
        return ngettext("correct %(count)s entry", "correct %(count)s entries", count) % values
    if action == "expiry":
        return ngettext("change the expiry of %(count)s entry", "change the expiry of %(count)s entries",
                        count) % values
    return ngettext("remove %(count)s entry", "remove %(count)s entries", count) % values


_WHERE = {
    # The owner's words (History).
    ("to", ("user",), True): pgettext_lazy("added to", "to your profile"),
    ("to", ("memory",), True): pgettext_lazy("added to", "to your notes"),
    ("to", ("user", "memory"), True): pgettext_lazy("added to", "to your profile and your notes"),
    ("in", ("user",), True): pgettext_lazy("changed in", "in your profile"),
    ("in", ("memory",), True): pgettext_lazy("changed in", "in your notes"),
    ("in", ("user", "memory"), True): pgettext_lazy("changed in", "in your profile and your notes"),
    ("from", ("user",), True): pgettext_lazy("removed from", "from your profile"),
    ("from", ("memory",), True): pgettext_lazy("removed from", "from your notes"),
    ("from", ("user", "memory"), True): pgettext_lazy("removed from", "from your profile and your notes"),
    # The admin's words.
    ("to", ("user",), False): pgettext_lazy("added to", "to the profile"),
    ("to", ("memory",), False): pgettext_lazy("added to", "to the notes"),
    ("to", ("user", "memory"), False): pgettext_lazy("added to", "to the profile and the notes"),
    ("in", ("user",), False): pgettext_lazy("changed in", "in the profile"),
    ("in", ("memory",), False): pgettext_lazy("changed in", "in the notes"),
    ("in", ("user", "memory"), False): pgettext_lazy("changed in", "in the profile and the notes"),
    ("from", ("user",), False): pgettext_lazy("removed from", "from the profile"),
    ("from", ("memory",), False): pgettext_lazy("removed from", "from the notes"),
    ("from", ("user", "memory"), False): pgettext_lazy("removed from", "from the profile and the notes"),
}


_PREPOSITIONS = {"add": "to", "replace": "in", "expiry": "in", "remove": "from"}


def describe_changes(actions: Mapping[str, int], targets: Mapping[str, int], *, done: bool = True) -> str:
    """Return e.g. "Added 1 entry to your notes" from an event's counts.

    An event counts operations by action and by document, not both together,
    so a batch over several actions and documents reads "Added 1 entry and
    removed 2 entries in your profile and your notes". With `done` false the
    sentence says what was tried ("Tried to add 1 entry to your notes").
    """
    return _describe(actions, targets, "done" if done else "tried")


def _describe(actions: Mapping[str, int], targets: Mapping[str, int], mode: str, for_owner: bool = True) -> str:
    known = [(action, count) for action, count in sorted(actions.items(), key=_action_order)
             if action in _ACTIONS and count]
    if not known:
        return ""
    changes = _and_list([_action_part(action, count, mode) for action, count in known])
    documents = tuple(target for target in ("user", "memory") if targets.get(target))
    preposition = _PREPOSITIONS[known[0][0]] if len(known) == 1 else "in"
    where = str(_WHERE[(preposition, documents, for_owner)]) if documents else ""
    values = {"changes": changes, "where": where}
    if mode == "done":
        phrase = pgettext("history", "%(changes)s %(where)s") % values if where else changes
    elif mode == "tried":
        phrase = (_("Tried to %(changes)s %(where)s") if where else _("Tried to %(changes)s")) % values
    else:
        phrase = (_("Proposed to %(changes)s %(where)s") if where else _("Proposed to %(changes)s")) % values
    return capfirst(phrase)


def event_changes(outcome: str, actions: Mapping[str, int], targets: Mapping[str, int], viewed: str = "") -> str:
    """Return what an event changed (or tried to), as one phrase; for a staff read, what they viewed."""
    if outcome == "viewed":
        return staff_view(viewed, targets)
    if outcome == "erased":
        receipt = erase_receipt(actions)
        if receipt:
            return _("Erased %(receipt)s") % {"receipt": receipt}
        return _("Erased everything in your profile and your notes")
    if outcome in _SWITCH_CHANGES:
        return str(_SWITCH_CHANGES[outcome])
    if outcome == "proposed":
        return _describe(actions, targets, "proposed")
    return describe_changes(actions, targets, done=outcome == "committed")


def staff_changes(outcome: str, actions: Mapping[str, int], targets: Mapping[str, int], viewed: str = "") -> str:
    """`event_changes` as the admin lists it: "the profile" rather than "your profile"."""
    if outcome == "viewed":
        return staff_view(viewed, targets, for_owner=False)
    if outcome == "erased":
        receipt = erase_receipt(actions)
        if receipt:
            return _("Erased %(receipt)s") % {"receipt": receipt}
        return _("Erased everything in the profile and the notes")
    if outcome in _SWITCH_CHANGES:
        return str(_SWITCH_CHANGES[outcome])
    mode = "done" if outcome == "committed" else "proposed" if outcome == "proposed" else "tried"
    return _describe(actions, targets, mode, for_owner=False)


def staff_view(viewed: str, targets: Mapping[str, int], *, for_owner: bool = True) -> str:
    """Return what a staff member's read showed, e.g. "Support staff viewed your memory (your profile)".

    `for_owner` false: the admin's wording ("Viewed the memory (the profile)").
    """
    phrases = _VIEWED if for_owner else _VIEWED_FOR_STAFF
    phrase = str(phrases.get(viewed, phrases["memory"]))
    documents = tuple(target for target in ("user", "memory") if targets.get(target))
    if viewed in ("memory", "version") and documents:
        where = (_VIEWED_WHERE if for_owner else _VIEWED_WHERE_FOR_STAFF)[documents]
        phrase = pgettext("staff read", "%(phrase)s (%(where)s)") % {"phrase": phrase, "where": where}
    return phrase


_PROPOSED_REASON = gettext_lazy("Saved only if you choose Save (your memory page lists what waits).")


def event_reason(outcome: str, error_code: str) -> str:
    """Return why an event did not save, as a sentence; "" when it saved (or was a staff read)."""
    if outcome in ("committed", "erased", "viewed", *_SWITCH_CHANGES):
        return ""
    if outcome == "proposed":
        return str(_PROPOSED_REASON)
    if error_code:
        if error_code.startswith("threat_"):
            return _("It looked like %(threat)s, so nothing was saved.") % {
                "threat": threat_label(error_code.removeprefix("threat_"))}
        if error_code in REASONS:
            return str(REASONS[error_code])
    if outcome in _OUTCOME_REASONS:
        return str(_OUTCOME_REASONS[outcome])
    if outcome == "discarded":
        return str(OUTCOME_MESSAGES[DISCARDED])
    if outcome == "rejected":
        return str(REJECTED_FALLBACK)
    return str(FAILED_FALLBACK)


def _action_order(item: tuple[str, int]) -> int:
    return _ACTIONS.index(item[0]) if item[0] in _ACTIONS else len(_ACTIONS)


_SOURCE_ROLES = {
    "user": gettext_lazy("Written by you%(when)s"),
    "staff": gettext_lazy("Changed by support staff%(when)s"),
    "system": gettext_lazy("Set by the system%(when)s"),
}
_RESTORED_BY = {
    "user": gettext_lazy("Restored by you%(when)s"),
    "staff": gettext_lazy("Restored by support staff%(when)s"),
    "system": gettext_lazy("Restored by the system%(when)s"),
}


def source_text(source, link: Mapping | None = None) -> str:
    """Say where an entry came from ("From your chat “Trip planning”, 30 Nov"); "" when unknown.

    `source` is a `provenance.Source`; `link` the chat's {"title", "url"} when
    the conversation still exists (the page links the title).
    """
    if source is None:
        return ""
    when = _short_date(source.at)
    if source.restored:
        return str(_RESTORED_BY.get(source.by, _RESTORED_BY["system"])) % {"when": when}
    if source.tidied:
        return _("Tidied up by the assistant%(when)s, saved by you") % {"when": when}
    if source.imported:
        return _("Imported from %(source)s%(when)s") % {"source": import_source(source.imported), "when": when}
    if source.by == "agent":
        if link:
            return _("From your chat “%(title)s”%(when)s") % {"title": link["title"], "when": when}
        return _("From a chat with the assistant%(when)s") % {"when": when}
    return str(_SOURCE_ROLES.get(source.by, _SOURCE_ROLES["system"])) % {"when": when}


# A short date after a source: ", 30 Nov" this year, ", 30 Nov 2025" before (Django date format characters).
_DATE_THIS_YEAR = pgettext_lazy("date format of a source, this year", "j M")
_DATE_OTHER_YEAR = pgettext_lazy("date format of a source, another year", "j M Y")


# Beside an entry that expires: "until Fri 11 Dec" (Django date format characters).
_EXPIRY_THIS_YEAR = pgettext_lazy("date format of an expiry, this year", "D j M")
_EXPIRY_OTHER_YEAR = pgettext_lazy("date format of an expiry, another year", "D j M Y")


def expiry_text(value: str | None) -> str:
    """Say until when an entry holds ("Until Fri 11 Dec"); "" for one that does not expire."""
    day = expiry_day(value)
    return _("Until %(date)s") % {"date": day} if day else ""


def expiry_day(value: str | None) -> str:
    """An entry's last day as the person reads it ("Fri 11 Dec"); "" for no date."""
    try:
        day = datetime.strptime(value or "", "%Y-%m-%d").date()
    except ValueError:
        return ""
    shape = _EXPIRY_OTHER_YEAR if day.year != timezone.localdate().year else _EXPIRY_THIS_YEAR
    return date_format(day, str(shape))


def expiry_change_text(value: str) -> str:
    """The History's line for an expiry a change set, changed or cleared."""
    if not value:
        return _("Kept until you remove it")
    return _("Kept until %(date)s, then removed") % {"date": expiry_day(value)}


def expiry_removal_text(when: datetime) -> str:
    """The History's line for a removal by expiry ("Removed on 11 Dec: it was set to expire")."""
    return _("Removed on %(date)s: it was set to expire") % {
        "date": date_format(timezone.localtime(when) if timezone.is_aware(when) else when, str(_DATE_THIS_YEAR))}


def _short_date(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return ""
    if timezone.is_aware(moment):
        moment = timezone.localtime(moment)
    return ", " + date_format(moment, str(_DATE_OTHER_YEAR if moment.year != timezone.now().year else _DATE_THIS_YEAR))


# --- the memory passport: importing what another assistant kept (`agentmemory.importing`) ------------

# Where an import came from, after "Imported from" ("Imported from ChatGPT, 3 Dec").
_IMPORT_SOURCES = {
    "ours_json": gettext_lazy("a memory export"),
    "ours_markdown": gettext_lazy("memory files"),
    "mem0": "mem0",
    "letta": "Letta",
    "chatgpt": "ChatGPT",
    "plain": gettext_lazy("a list"),
}
# The formats the import recognises, as the page names them.
IMPORT_FORMATS = (
    gettext_lazy("ChatGPT's saved memories, as copied from its settings (one memory a line)"),
    gettext_lazy("Claude's memory files, or this site's Markdown export (/memories/profile.md and "
                 "/memories/notes.md)"),
    gettext_lazy("a mem0 export (JSON)"),
    gettext_lazy("a Letta agent's memory blocks (JSON)"),
    gettext_lazy("this site's JSON export"),
    gettext_lazy("a plain list: one fact a line, bullets allowed"),
)

# Why a whole import was refused (`passport.ImportRefused.code`); nothing of it was kept.
IMPORT_REFUSED = {
    "import_too_large": gettext_lazy("This import is too large: at most 256 KB are read. Nothing was imported. "
                                     "Split it, and import each part on its own."),
    "import_too_many": gettext_lazy("This import holds too many items: at most 200 are read at once. Nothing was "
                                    "imported. Split it, and import each part on its own."),
    "import_item_too_long": gettext_lazy("An item of this import is longer than 1,000 characters, longer than a "
                                         "memory entry should be. Nothing was imported. Shorten it and try again."),
    "import_encoding": gettext_lazy("This file is not text in UTF-8, so it could not be read. Nothing was imported. "
                                    "Save it as UTF-8 text and try again."),
    "import_invalid_json": gettext_lazy("This looks like JSON but could not be read (it may be cut short). Nothing "
                                        "was imported."),
    "import_unknown_format": gettext_lazy("This JSON is not a format the import knows. Nothing was imported."),
    "import_empty": gettext_lazy("No memory was found in this import. Paste the text, or choose a file."),
    "import_nothing_new": gettext_lazy("Nothing in this import can be added, so nothing was proposed: see why "
                                       "under each item."),
    "import_split_phrases": gettext_lazy("Several items of this import read as instructions to the assistant "
                                         "when read one after the other, so nothing was imported. Remove those "
                                         "lines and try again."),
}
IMPORT_REFUSED_FALLBACK = gettext_lazy("This import could not be read. Nothing was imported.")

# Why one item of an import is not proposed (the other items still are).
IMPORT_ITEM_REASONS = {
    "already_stored": gettext_lazy("Your memory already holds this."),
    "repeated": gettext_lazy("This is repeated in the import; it is proposed once."),
    "expiry_past": gettext_lazy("It was set to expire on a date that has passed."),
}


def import_source(code: str) -> str:
    """The name of an import's source, after "Imported from"."""
    return str(_IMPORT_SOURCES.get(code, _IMPORT_SOURCES["plain"]))


def import_refused(code: str) -> str:
    """The plain sentence for an import refused whole (`passport.ImportRefused.code`)."""
    return str(IMPORT_REFUSED.get(code, IMPORT_REFUSED_FALLBACK))


def import_item_reason(code: str) -> str:
    """The plain sentence for one refused item of an import (a rule's code, or one of IMPORT_ITEM_REASONS)."""
    if code in IMPORT_ITEM_REASONS:
        return str(IMPORT_ITEM_REASONS[code])
    if code.startswith("threat_"):
        return _("It looks like %(threat)s, which memory does not keep.") % {
            "threat": threat_label(code.removeprefix("threat_"))}
    return rule_message(code)


def import_route(target: str) -> str:
    """Where an imported item goes, as the review screen names it."""
    return str(_("Your profile") if target == "user" else _("Your notes"))


IMPORT_SKIP = gettext_lazy("Leave out")
IMPORT_SAVED = gettext_lazy("Your import is saved to your memory.")
IMPORT_THROTTLED = gettext_lazy("Too many imports, or views of an import, in a short time. Wait a minute and "
                                "try again.")
_IMPORT_SAVE_MESSAGES = {
    "import_all_skipped": gettext_lazy("Every item is left out, so there is nothing to save. Discard the import "
                                       "instead, or keep at least one item."),
    "invalid_route": gettext_lazy("Choose your profile, your notes, or Leave out for each item."),
    "invalid_route_key": gettext_lazy("Each route is keyed by an item's number in the import (1, 2, 3 ...)."),
    "erased": gettext_lazy("Your memory was erased while this import was read, so nothing was imported. "
                           "Import it again if you still want it."),
}


def import_save_message(code: str, *, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """The plain sentence for an import's proposal that could not be saved."""
    if code in _IMPORT_SAVE_MESSAGES:
        return str(_IMPORT_SAVE_MESSAGES[code])
    return proposal_message(code, target=target, limits=limits)
