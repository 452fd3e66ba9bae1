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
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from django.utils import timezone
from django.utils.formats import date_format

from . import threats
from .turn import CODE_MESSAGES, DISCARDED, OUTCOME_MESSAGES, UNCONFIRMED

# The two documents as the person knows them (the page's headings are the
# prompt's titles; the chat's usage line says "Profile" and "Notes").
DOCUMENTS = {"user": "your profile", "memory": "your notes"}

# Who acted, as the owner reads it in History.
ACTORS = {"agent": "Assistant", "user": "You", "staff": "Support staff", "system": "System"}

# `MemoryEvent.outcome`, in a word or two.
OUTCOMES = {
    "committed": "Saved",
    "unchanged": "Nothing changed",
    "rejected": "Not saved",
    "cancelled": "Stopped",
    "failed": "Not saved",
    "discarded": "Not saved",
    "erased": "Erased",
    "memory_on": "Setting changed",
    "memory_off": "Setting changed",
    "ask_first": "Setting changed",
    "auto_save": "Setting changed",
    "proposed": "Proposed",
    "viewed": "Viewed",
}

# The switch's events: what changed, in History.
_SWITCH_CHANGES = {
    "memory_on": "Turned on “Use memory in chats”",
    "memory_off": "Turned off “Use memory in chats”: chats neither use nor change memory",
    "ask_first": "Chose “Ask me before saving”: the assistant proposes changes for you to save",
    "auto_save": "Chose “Save automatically”: the assistant saves changes when its reply completes",
}

# A staff member's read in the admin (outcome "viewed"), by what it showed
# (`MemoryEvent.viewed`): as the person reads it in History, and as the admin lists it.
_VIEWED = {
    "memory": "Support staff viewed your memory",
    "proposal": "Support staff viewed a change the assistant proposed to your memory",
    "conversation": "Support staff viewed one of your conversations",
    "search": "Support staff searched conversations, and yours were among the results",
    "version": "Support staff viewed an earlier version of your memory",
}
_VIEWED_FOR_STAFF = {
    "memory": "Viewed the memory",
    "proposal": "Viewed a proposed change",
    "conversation": "Viewed a conversation",
    "search": "Searched conversations; this person's were among the results",
    "version": "Viewed an earlier version of the memory",
}

# Past tense when it happened, infinitive when it did not; and the preposition.
_ACTIONS = {
    "add": ("Added", "add", "to"),
    "replace": ("Corrected", "correct", "in"),
    "remove": ("Removed", "remove", "from"),
}

# How the page names a threat category: "it looks like ...".
THREAT_LABELS = {
    threats.PROMPT_INJECTION: "an instruction to the assistant (prompt injection)",
    threats.ROLE_HIJACK: "an attempt to change the assistant's role",
    "command_and_control": "an instruction to contact or obey an outside server",
    "hidden_content": "hidden text meant for the assistant",
    threats.EXFILTRATION: "a request to send data somewhere",
    threats.PERSISTENCE: "a change to login keys or agent settings",
    threats.SECRET: "a password, token or key",
    threats.INVISIBLE_UNICODE: "text with invisible or direction-changing characters",
    threats.OVERSIZED: "text too long to check",
}

_CHANGED_ON_PAGE = (
    "This entry was changed or removed since the page was loaded; nothing was saved. "
    "Reload the page to see the current memory."
)

# A rule's code as the person who typed the text reads it (memory page forms).
RULE_MESSAGES = {
    "invalid_content": "Write the fact itself before saving.",
    "empty_entry": "Write the fact itself before saving.",
    "add_without_content": "Write the fact itself before saving.",
    "incomplete_entry": "Write the whole fact before saving.",
    "delimiter_in_entry": (
        "An entry cannot have a line with only \u201c\u00a7\u201d on it. Save each fact as its own entry."
    ),
    "control_character": "The text has an invisible control character. Type it again as plain text.",
    "reserved_tag": "The text has a tag that only the assistant's memory block may use. Remove the tag.",
    "reserved_header": "A line looks like a heading of the assistant's memory (such as \u201cUSER PROFILE\u201d). "
                       "Write the fact without it.",
    "replace_duplicate": "Another entry already says exactly this. Remove this entry instead.",
    "entry_changed": _CHANGED_ON_PAGE,
    "conflict": _CHANGED_ON_PAGE,
    "no_match": _CHANGED_ON_PAGE,
    "ambiguous_match": _CHANGED_ON_PAGE,
    "batch_size": "Too many changes at once; nothing was saved. Make fewer changes at a time.",
    "turn_budget": "Too many changes at once; nothing was saved. Make fewer changes at a time.",
}
RULE_FALLBACK = "This change could not be saved; nothing was changed. Check the text and try again."

# Why an event did not save, as its owner reads it in History.
REASONS = {
    # a chat turn that did not complete (the reason its staged change was dropped)
    "cancelled": CODE_MESSAGES["cancelled"],
    "model_failed_after_staging": "The assistant failed before finishing its answer, so its memory change "
                                  "was not saved.",
    "model_incomplete": "The answer was cut off before it finished, so its memory change was not saved.",
    "model_error": "The assistant could not answer, so its memory change was not saved.",
    "model_unreachable": "The assistant could not be reached, so its memory change was not saved.",
    "model_empty": "The assistant gave no answer, so its memory change was not saved.",
    "turn_timeout": "The answer took too long and was stopped, so its memory change was not saved.",
    "turn_error": "Something went wrong on our side, so the memory change was not saved.",
    "internal_error": "Something went wrong on our side, so the memory change was not saved.",
    # a commit that did not go through
    "conflict": CODE_MESSAGES["conflict"],
    "database_error": "The database did not answer, so nothing was saved.",
    "memory_busy": CODE_MESSAGES["memory_busy"],
    "account_closed": CODE_MESSAGES["account_closed"],
    "session_ended": CODE_MESSAGES["session_ended"],
    "switched_off": CODE_MESSAGES["switched_off"],
    "proposal_discarded": "You discarded this proposed change, so nothing was saved.",
    "commit_failed": CODE_MESSAGES["commit_failed"],
    "entry_changed": "The entry had changed since the page was loaded, so nothing was saved.",
    "no_match": "The entry to change was no longer there, so nothing was saved.",
    "ambiguous_match": "It was not clear which entry to change, so nothing was saved.",
    "over_capacity": "It did not fit: memory would have gone over its limit, so nothing was saved.",
    "replace_duplicate": "Another entry already said the same, so nothing was saved.",
    "batch_size": "Too many changes at once, so nothing was saved.",
    "turn_budget": "Too many changes at once, so nothing was saved.",
}
REJECTED_FALLBACK = "The change broke one of memory's rules, so nothing was saved."
FAILED_FALLBACK = "Something went wrong while saving, so nothing was saved."

# Outcomes that say enough without a reason.
_OUTCOME_REASONS = {
    "unchanged": CODE_MESSAGES["unchanged"],
    "cancelled": CODE_MESSAGES["cancelled"],
}


def document_name(target: str | None) -> str:
    return DOCUMENTS.get(target or "", "your memory")


def actor_name(actor: str) -> str:
    return ACTORS.get(actor, "System")


def outcome_name(outcome: str) -> str:
    return OUTCOMES.get(outcome, "Not saved")


def threat_label(category: str) -> str:
    return THREAT_LABELS.get(category, "text that memory does not keep")


def rule_message(code: str, *, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for a rule a person's own edit broke.

    `code` is `MemoryValidationError.code`; its `message` is written for the
    model and is never passed here.
    """
    if code == "over_capacity":
        limit = (limits or {}).get(target or "")
        where = document_name(target)
        if limit:
            return (f"This does not fit: {where} would be over its limit of {limit:,} characters. "
                    "Shorten or remove another entry first.")
        return f"This does not fit: {where} is full. Shorten or remove another entry first."
    if code.startswith("threat_"):
        return (f"This was not saved: it looks like {threat_label(code.removeprefix('threat_'))}, "
                "which memory does not keep. Write the fact without it.")
    return RULE_MESSAGES.get(code, RULE_FALLBACK)


# An erase's receipt (`store.Erased.removed`), by kind, in the order people read it.
_RECEIPT_KINDS = (
    ("profile_entries", "profile entry", "profile entries"),
    ("notes_entries", "notes entry", "notes entries"),
    ("versions", "earlier version", "earlier versions"),
    ("proposals", "proposed change", "proposed changes"),
    ("conversations", "conversation", "conversations"),
    ("messages", "message", "messages"),
    ("search_index_rows", "search index row", "search index rows"),
)


def erase_receipt(removed: Mapping[str, int]) -> str:
    """Return what an erase removed, e.g. "2 profile entries, 1 earlier version and 3 conversations"; "" for none.

    Kinds with none removed are left out; an erase that removed nothing reads "nothing (your memory was empty)".
    """
    if not isinstance(removed, Mapping) or not any(kind in removed for kind, _, _ in _RECEIPT_KINDS):
        return ""
    parts = [f"{removed[kind]:,} {one if removed[kind] == 1 else many}"
             for kind, one, many in _RECEIPT_KINDS if removed.get(kind)]
    if not parts:
        return "nothing (your memory was empty)"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# Undo and restore (`agentmemory.versions`), as the person reads them on the
# memory page, in the chat and in the API's `detail`.
CHANGE_GONE = ("This change is no longer kept (older changes are deleted after a while, and erasing memory "
               "deletes them all), so it cannot be undone or restored.")
UNDONE = "Undone: your memory is as it was before that change."
RESTORED = "Restored: your memory is as that change left it."
NOTHING_CHANGED = "Your memory already held this, so nothing changed."
# A change whose COMMIT's answer was lost (`store.CommitOutcomeUnknown`), once the database was asked:
# it confirmed the change absent, or did not answer in time (the chat turn says the same, `turn`).
COMMIT_NOT_STORED = ("The connection to the database broke while saving, and the database has since confirmed "
                     "that nothing was saved. Try again.")
COMMIT_UNCONFIRMED = OUTCOME_MESSAGES[UNCONFIRMED]
_CHANGE_AUTHORS = {"agent": "The assistant, in a chat", "user": "You", "staff": "Support staff",
                   "system": "The system"}


def change_author(by: str, kind: str) -> str:
    """Say who made a change and how ("You, undoing a change"), for the History's list of changes."""
    who = _CHANGE_AUTHORS.get(by, "The system")
    if kind == "undo":
        return f"{who}, undoing an earlier change"
    if kind == "restore":
        return f"{who}, restoring an earlier version"
    return who


_UNDO_REFUSALS = {
    "conflict": "Something this change wrote has changed since, so nothing was undone. Correct or remove it "
                "by hand instead.",
    "nothing_to_undo": "Your memory already holds what undoing this would bring back; nothing changed.",
    "already_restored": "Your memory already holds this version; nothing changed.",
}
_RESTORE_REFUSALS = {
    "conflict": "Your memory changed while this was being restored, so nothing was restored. Look again and "
                "try once more.",
}


def undo_message(code: str, *, action: str, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for an undo (`action` "undo") or a restore ("restore") that was refused."""
    if action == "restore" and code in _RESTORE_REFUSALS:
        return _RESTORE_REFUSALS[code]
    if code in _UNDO_REFUSALS:
        return _UNDO_REFUSALS[code]
    if code in ("no_match", "ambiguous_match", "entry_changed"):
        return _UNDO_REFUSALS["conflict"]
    if code == "replace_duplicate":
        return "Another entry already says what this would bring back, so nothing changed."
    if code == "batch_size":
        return "This would change too much at once; nothing changed. Correct your memory by hand instead."
    return rule_message(code, target=target, limits=limits)


# What the assistant tells the person when the tool refused its change (the
# tool's reply itself is written for the model and never shown).
_REFUSALS = {
    "no_match": "I could not find that in {where}, so nothing changed.",
    "ambiguous_match": "More than one entry in {where} matches that, so I changed nothing. "
                       "Tell me which one you mean.",
    "over_capacity": "That does not fit: {where} is full, so nothing was saved. "
                     "You can review what I keep on your memory page.",
    "replace_duplicate": "Another entry in {where} already says that, so nothing changed.",
    "stop_retrying": "I could not change my memory this time, so nothing was saved.",
    "unavailable": "My memory is not available right now, so nothing was saved.",
}
REFUSAL_FALLBACK = "I could not change my memory, so nothing was saved."


def refusal_sentence(code: str, *, target: str | None = None) -> str:
    """Return what an assistant tells the person when its memory change was refused (`code`)."""
    if code.startswith("threat_"):
        return (f"I did not save that: it looks like {threat_label(code.removeprefix('threat_'))}, "
                "which memory does not keep.")
    where = "your profile" if target == "user" else "my notes"
    return _REFUSALS.get(code, REFUSAL_FALLBACK).format(where=where)


# "Ask before saving": a proposed change as the person reviews it, and why saving it failed.
PROPOSAL_ACTIONS = {
    ("add", "user"): "Add to your profile",
    ("add", "memory"): "Add to your notes",
    ("replace", "user"): "Change in your profile",
    ("replace", "memory"): "Change in your notes",
    ("remove", "user"): "Remove from your profile",
    ("remove", "memory"): "Remove from your notes",
}
# A write whose person no longer exists: the account was deleted while the request ran.
ACCOUNT_GONE = "Nothing was saved: your account was deleted or is being deleted."

PROPOSAL_STALE = ("Your memory changed since this was proposed, so it no longer applies. Nothing was saved; "
                  "you can discard it.")
PROPOSAL_GONE = "This proposed change is no longer waiting: it was saved, discarded or has expired."
_STALE_CODES = frozenset({"conflict", "no_match", "ambiguous_match", "entry_changed", "replace_duplicate"})


def proposal_action(action: str, target: str) -> str:
    """Return e.g. "Add to your notes" for one operation of a proposal."""
    return PROPOSAL_ACTIONS.get((action, target), "Change your memory")


# Tidy up's proposal (`agentmemory.tidy`), line by line: a merge, a shorter wording, an entry folded into
# a merged line, an entry dropped.
TIDY_ACTIONS = {
    "merge": "Merge into one line in {where}",
    "reword": "Shorten in {where}",
    "folded": "Part of a merged line, so removed from {where}",
    "drop": "Drop from {where} (repeated or out of date)",
}


def tidy_action(kind: str, target: str) -> str:
    """Return e.g. "Merge into one line in your notes" for one line of a Tidy up's proposal."""
    return TIDY_ACTIONS.get(kind, "Change {where}").format(where=DOCUMENTS.get(target, "your memory"))


def proposal_message(code: str, *, target: str | None = None, limits: Mapping[str, int] | None = None) -> str:
    """Return the plain sentence for a proposal that could not be saved (its rule's code)."""
    if code in _STALE_CODES:
        return PROPOSAL_STALE
    return rule_message(code, target=target, limits=limits)


def describe_changes(actions: Mapping[str, int], targets: Mapping[str, int], *, done: bool = True) -> str:
    """Return e.g. "Added 1 entry to your notes" from an event's counts.

    An event counts operations by action and by document, not both together,
    so a batch over several actions and documents reads "Added 1 entry and
    removed 2 entries in your profile and your notes". With `done` false the
    sentence says what was tried ("Tried to add 1 entry to your notes").
    """
    known = [(action, count) for action, count in sorted(actions.items(), key=_action_order)
             if action in _ACTIONS and count]
    if not known:
        return ""
    parts = []
    for index, (action, count) in enumerate(known):
        past, infinitive, _ = _ACTIONS[action]
        verb = past if done else infinitive
        if index:
            verb = verb.lower()
        parts.append(f"{verb} {count} {'entry' if count == 1 else 'entries'}")
    phrase = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    where = [document_name(target) for target in ("user", "memory") if targets.get(target)]
    if where:
        preposition = _ACTIONS[known[0][0]][2] if len(known) == 1 else "in"
        phrase = f"{phrase} {preposition} {' and '.join(where)}"
    if not done:
        phrase = "Tried to " + phrase
    return phrase


def event_changes(outcome: str, actions: Mapping[str, int], targets: Mapping[str, int], viewed: str = "") -> str:
    """Return what an event changed (or tried to), as one phrase; for a staff read, what they viewed."""
    if outcome == "viewed":
        return staff_view(viewed, targets)
    if outcome == "erased":
        return "Erased " + (erase_receipt(actions) or "everything in your profile and your notes")
    if outcome in _SWITCH_CHANGES:
        return _SWITCH_CHANGES[outcome]
    if outcome == "proposed":
        return "Proposed to " + describe_changes(actions, targets, done=False).removeprefix("Tried to ")
    return describe_changes(actions, targets, done=outcome == "committed")


def staff_view(viewed: str, targets: Mapping[str, int], *, for_owner: bool = True) -> str:
    """Return what a staff member's read showed, e.g. "Support staff viewed your memory (your profile)".

    `for_owner` false: the admin's wording ("Viewed the memory (the profile)").
    """
    phrases = _VIEWED if for_owner else _VIEWED_FOR_STAFF
    phrase = phrases.get(viewed, phrases["memory"])
    where = [document_name(target) for target in ("user", "memory") if targets.get(target)]
    if viewed in ("memory", "version") and where:
        where_text = " and ".join(where)
        phrase = f"{phrase} ({where_text if for_owner else where_text.replace('your ', 'the ')})"
    return phrase


def event_reason(outcome: str, error_code: str) -> str:
    """Return why an event did not save, as a sentence; "" when it saved (or was a staff read)."""
    if outcome in ("committed", "erased", "viewed", *_SWITCH_CHANGES):
        return ""
    if outcome == "proposed":
        return "Saved only if you choose Save (your memory page lists what waits)."
    if error_code:
        if error_code.startswith("threat_"):
            return f"It looked like {threat_label(error_code.removeprefix('threat_'))}, so nothing was saved."
        if error_code in REASONS:
            return REASONS[error_code]
    if outcome in _OUTCOME_REASONS:
        return _OUTCOME_REASONS[outcome]
    if outcome == "discarded":
        return OUTCOME_MESSAGES[DISCARDED]
    if outcome == "rejected":
        return REJECTED_FALLBACK
    return FAILED_FALLBACK


def _action_order(item: tuple[str, int]) -> int:
    return list(_ACTIONS).index(item[0]) if item[0] in _ACTIONS else len(_ACTIONS)


_SOURCE_ROLES = {
    "user": "Written by you",
    "staff": "Changed by support staff",
    "system": "Set by the system",
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
        return ("Restored by you" if source.by == "user" else "Restored by support staff"
                if source.by == "staff" else "Restored by the system") + when
    if source.tidied:
        return f"Tidied up by the assistant{when}, saved by you"
    if source.by == "agent":
        if link:
            return f"From your chat \u201c{link['title']}\u201d{when}"
        return f"From a chat with the assistant{when}"
    return _SOURCE_ROLES.get(source.by, "Set by the system") + when


def _short_date(value: str) -> str:
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return ""
    if timezone.is_aware(moment):
        moment = timezone.localtime(moment)
    return ", " + date_format(moment, "j M Y" if moment.year != timezone.now().year else "j M")
