"""Claude's memory tool (`memory_20250818`) over the two documents.

Claude models are trained on a client-side memory tool with six commands
(view, create, str_replace, insert, delete, rename) over files under
`/memories`. This module maps them onto agentmemory's two documents and
nothing else:

- `/memories/profile.md` is the USER profile, `/memories/notes.md` the
  MEMORY notes; each line of a file is one entry (blank lines, Markdown
  headings and list bullets are not kept).
- `view` shows a file with line numbers and its usage, or the directory.
- `create`, `str_replace`, `insert` and `delete` compute the file's new
  lines and turn the difference into pinned add / replace / remove
  operations, staged on the current turn's ledger through the same rules as
  `memory_update` (`agentmemory.rules`: normalisation, the threat scan,
  capacity after the whole batch, 20 operations a turn): nothing is written
  here; the turn commits after the answer.
- An entry that expires is shown with its note at the end of its line,
  " (until YYYY-MM-DD)", as in the prompt; a line written with such a note
  sets that expiry, and an entry's line written again without it clears it.
- Any other path, `rename` and directories are refused with a reply that
  says what the two files are and how to do the same thing with them.

The person is the one the trusted caller bound (`agentmemory.scope`); the
command carries no identity and unknown fields are refused. Replies are for
the model (they may quote its own memory); nothing here logs them, and the
`memory.tool` span carries counts only.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..conf import memory_settings
from ..rules import (
    CLEAR_EXPIRY,
    MAX_OPERATIONS,
    TARGETS,
    Applied,
    MemoryValidationError,
    Operation,
    Snapshot,
    Target,
    expiry_note,
    model_view,
    usage,
)
from ..scope import MemoryLedger, MemoryRequest, get_memory_request, stage_batch
from ..telemetry import memory_span
from ..threats import MAX_SCAN_CHARS, is_blocked
from ..tool import refuse_by_gate

TOOL_NAME = "memory"
TOOL_TYPE = "memory_20250818"
# The tool as the Messages API declares it: Anthropic defines its schema, Claude knows its commands.
MEMORY_TOOL = {"type": TOOL_TYPE, "name": TOOL_NAME}

ROOT = "/memories"
FILES: dict[str, Target] = {"/memories/profile.md": "user", "/memories/notes.md": "memory"}
PATHS = {target: path for path, target in FILES.items()}
ABOUT = {"user": "the user's profile: role, preferences, expertise, style",
         "memory": "your durable notes: project facts, conventions, environment, lessons"}
FIELDS = {
    "view": {"path", "view_range"},
    "create": {"path", "file_text"},
    "str_replace": {"path", "old_str", "new_str"},
    "insert": {"path", "insert_line", "insert_text"},
    "delete": {"path"},
    "rename": {"old_path", "new_path"},
}
LAYOUT = (
    "Memory here is exactly two files: /memories/profile.md (" + ABOUT["user"] + ") and /memories/notes.md ("
    + ABOUT["memory"] + "), one entry per line. There are no other files or directories."
)
PROMPT_NOTE = (
    "Your memory tool in this conversation is `memory` (memory_update is not available): /memories/profile.md "
    "holds the USER PROFILE above and /memories/notes.md the AGENT MEMORY, one entry per line. Wherever these "
    "instructions say memory_update, use the memory tool instead: insert a line to add a fact, str_replace to "
    "correct one, str_replace with an empty new_str to forget one. There is no need to view a file first: it "
    "shows what the block above shows. Changes are saved only when this turn completes."
)
_HEADING = re.compile(r"^#{1,6}\s")
_BULLET = re.compile(r"^(?:[-*+•])\s+")


@dataclass(frozen=True)
class CommandReply:
    """What goes back to the model for one command (`text`, `is_error`), and content-free metadata."""

    text: str
    is_error: bool = False
    status: str = "ok"  # viewed, staged, unchanged, refused, rejected, unavailable, stop_retrying
    operation_count: int = 0
    code: str = ""


def handle_memory_command(command: object) -> CommandReply:
    """Run one memory-tool command against the current turn's ledger; return the reply."""
    with memory_span("memory.tool", tool=TOOL_NAME) as span:
        reply = _handle(command)
        request = get_memory_request()
        ledger = request.ledger if request is not None else None
        span.set_metadata(
            outcome=reply.status, error_code=reply.code or None, operation_count=reply.operation_count,
            retry_count=ledger.failed_calls if ledger else None,
        )
        return reply


def _handle(command: object) -> CommandReply:
    request = get_memory_request()
    if request is None:
        return _refused("Memory is not available here; nothing was saved. Answer without it.", "no_scope",
                        status="unavailable")
    if not request.writes_enabled or request.ledger is None:
        return _refused("Memory is unavailable for this turn; nothing can be read or saved. Answer the user "
                        "without it.", "unavailable", status="unavailable")
    ledger = request.ledger
    limit = memory_settings().max_tool_failures
    if ledger.failed_calls >= limit:
        return _stop_retrying(limit)
    if not isinstance(command, Mapping) or command.get("command") not in FIELDS:
        return _failed(ledger, limit, "Unknown command. The memory tool takes view, create, str_replace, insert and "
                       "delete on /memories/profile.md and /memories/notes.md.", "unknown_command")
    name = command["command"]
    unknown = set(command) - FIELDS[name] - {"command"}
    if unknown:
        return _failed(ledger, limit, "Unknown field(s) in this command; send only the command's own fields. "
                       "Memory always belongs to the signed-in user.", "unknown_field")
    if name == "rename":
        return _failed(ledger, limit, "rename is not available. " + LAYOUT + " To move an entry, remove its line "
                       "from one file (str_replace with an empty new_str) and insert it into the other.", "rename")
    path = command.get("path")
    if name == "view":
        return _view(ledger.snapshot, path, command.get("view_range"), request)
    target = FILES.get(path.rstrip("/")) if isinstance(path, str) else None
    if target is None:
        if isinstance(path, str) and path.rstrip("/") == ROOT:
            what = ("The /memories directory itself cannot be deleted. To clear a file, delete the file: each of "
                    "its entries is removed." if name == "delete" else "/memories is a directory, not a file.")
            return _failed(ledger, limit, what + " " + LAYOUT, "directory")
        return _failed(ledger, limit, f"No such file here, so nothing was {_DONE.get(name, 'changed')}. " + LAYOUT
                       + " Use one of them.", "unknown_path")
    lines = _shown(ledger.snapshot.entries(target), ledger.snapshot.expiries(target))
    try:
        new_lines = _edited(name, command, lines, path)  # type: ignore[arg-type]  # a str: it named a file
    except _Refusal as refusal:
        return _failed(ledger, limit, refusal.text, refusal.code)
    return _stage(request, target, lines, new_lines, note=_NOTES.get(name, ""))


_DONE = {"create": "created", "str_replace": "replaced", "insert": "inserted", "delete": "deleted"}
_NOTES = {"insert": " New entries are kept at the end of the file."}


class _Refusal(Exception):
    def __init__(self, text: str, code: str) -> None:
        super().__init__(code)
        self.text, self.code = text, code


def _edited(name: str, command: Mapping, lines: list[str], path: str) -> list[str]:
    """Return the file's lines after the command (model text, not yet parsed into entries)."""
    if name == "delete":
        return []
    if name == "create":
        text = command.get("file_text")
        if not isinstance(text, str):
            raise _Refusal("create needs file_text: the whole new content of the file, one entry per line.",
                           "invalid_text")
        _refuse_oversized(text)
        return text.split("\n")
    if name == "insert":
        text, line = command.get("insert_text"), command.get("insert_line")
        if not isinstance(text, str) or not isinstance(line, int) or isinstance(line, bool):
            raise _Refusal("insert needs insert_line (a number) and insert_text.", "invalid_insert")
        _refuse_oversized(text)
        if not 0 <= line <= len(lines):
            raise _Refusal(f"Invalid `insert_line` parameter: {line}. It should be within the range "
                           f"[0, {len(lines)}].", "invalid_insert")
        return lines[:line] + text.split("\n") + lines[line:]
    old, new = command.get("old_str"), command.get("new_str")
    if not isinstance(old, str) or not old or not isinstance(new, str):
        raise _Refusal("str_replace needs old_str (text copied exactly from the file) and new_str (use an empty "
                       "new_str to remove it).", "invalid_replace")
    text = "\n".join(lines)
    count = text.count(old)
    if count == 0:
        raise _Refusal(f"No replacement was performed, old_str did not appear verbatim in {path}. Its content is:\n"
                       + _numbered(lines), "no_match")
    if count > 1:
        at = sorted({text[:index].count("\n") + 1 for index in _positions(text, old)})
        raise _Refusal("No replacement was performed. Multiple occurrences of old_str in lines: "
                       f"{', '.join(map(str, at))}. Please ensure it is unique.", "ambiguous_match")
    return text.replace(old, new, 1).split("\n")


def _refuse_oversized(text: str) -> None:
    """Refuse text no memory file could hold before reading it line by line (bounded work)."""
    if len(text) > MAX_SCAN_CHARS:
        raise _Refusal(f"This text is {len(text):,} characters; a memory file holds at most a few thousand. "
                       "Send only the entries to keep, one per line.", "too_large")


def _positions(text: str, part: str) -> list[int]:
    found, start = [], 0
    while (index := text.find(part, start)) != -1:
        found.append(index)
        start = index + 1
    return found


def _shown(entries: tuple[str, ...], expiries: Mapping[str, str] | None = None) -> list[str]:
    """Each entry as one line of the file, as the model may see it (blocked entries as their marker).

    An entry that expires ends with its note, " (until YYYY-MM-DD)", as in the prompt.
    """
    expiries = expiries or {}
    return [" ".join(model_view(entry).split("\n")) + expiry_note(expiries.get(entry)) for entry in entries]


_UNTIL = re.compile(r"\s*\(until ([0-9]{4}-[0-9]{2}-[0-9]{2})\)\s*$")


def _split_until(line: str) -> tuple[str, str | None]:
    """A file line's entry text and the expiry its trailing "(until YYYY-MM-DD)" note gives (None: no note)."""
    found = _UNTIL.search(line)
    if found is None or not line[:found.start()].strip():
        return line, None
    return line[:found.start()].strip(), found.group(1)


def _parsed(lines: list[str]) -> list[str]:
    """The entries that lines of model text stand for: no blank lines, headings or bullets."""
    entries = []
    for line in lines:
        text = line.strip()
        if not text or _HEADING.match(text):
            continue
        text = _BULLET.sub("", text).strip()
        if text:
            entries.append(text)
    return entries


def _operations(target: Target, entries: tuple[str, ...], shown: list[str], new_lines: list[str],
                expiries: Mapping[str, str] | None = None) -> list[Operation]:
    """Pinned operations that turn `entries` into the file's new lines.

    A line that reads like an entry's current line keeps that entry; lines
    that went are paired, in order, with lines that came as replaces; the
    rest are removes and adds. A blocked entry (shown as its marker) is
    changed only by the person: it stays whatever the file says, and its
    marker line never stands for a new entry. Linear in the lines.

    Expiry: a line's trailing " (until YYYY-MM-DD)" note sets the entry's
    expiry; an entry's line written again without its note clears it.
    """
    expiries = expiries or {}
    blocked = {entry for entry in entries if is_blocked(entry)}
    markers = {line for line, entry in zip(shown, entries) if entry in blocked}
    stored_as = {line: entry for line, entry in zip(shown, entries) if entry not in blocked}
    dates: dict[str, str] = {}
    wanted = []
    for line in _parsed(new_lines):
        if line in markers:
            continue
        if line in stored_as:
            wanted.append(stored_as[line])
            continue
        text, date = _split_until(line)
        dates[text] = date or CLEAR_EXPIRY
        wanted.append(text)
    kept = set(wanted)
    gone = [entry for entry in entries if entry not in kept and entry not in blocked]
    current = set(entries)
    came: list[str] = []
    seen: set[str] = set()
    for line in wanted:
        if line not in current and line not in seen:
            seen.add(line)
            came.append(line)
    operations = [Operation(target=target, action="replace", match=old, content=new, entry=None, expires=dates.get(new))
                  for old, new in zip(gone, came)]
    operations += [Operation(target=target, action="remove", match=old) for old in gone[len(came):]]
    operations += [Operation(target=target, action="add", content=new,
                             expires=None if dates.get(new) == CLEAR_EXPIRY else dates.get(new))
                   for new in came[len(gone):]]
    operations += [Operation(target=target, action="replace", match=entry, entry=entry, expires=dates[entry])
                   for entry in dict.fromkeys(wanted) if entry in current and entry in dates and entry not in blocked
                   and (dates[entry] if dates[entry] != CLEAR_EXPIRY else "") != expiries.get(entry, "")]
    return operations


def _stage(
    request: MemoryRequest, target: Target, lines: list[str], new_lines: list[str], *, note: str
) -> CommandReply:
    ledger: MemoryLedger = request.ledger  # type: ignore[assignment]  # the caller checked it
    limit = memory_settings().max_tool_failures
    path = PATHS[target]
    operations = _operations(target, ledger.snapshot.entries(target), lines, new_lines,
                             ledger.snapshot.expiries(target))
    if not operations:
        return CommandReply(f"Nothing changed: {path} already reads like this. Do not repeat this command; answer "
                            "the user.", status="unchanged")
    try:
        applied = stage_batch(ledger, operations, request.limits, accept=_accepting(request), today=request.today)
    except MemoryValidationError as exc:
        if exc.code == "over_capacity":
            ledger.capacity_refused = True
        return _failed(ledger, limit, _rule_text(exc, path, request, len(operations)), exc.code,
                       status="rejected", count=len(operations))
    ledger.failed_calls = 0
    if not applied.changes:
        return CommandReply(f"Nothing changed: {path} already holds this. Answer the user.", status="unchanged")
    after = ledger.snapshot
    saved = ("proposed to the user when this turn completes (they review memory changes before they are saved); "
             "tell them you proposed it" if request.ask_first else "saved when this turn completes")
    return CommandReply(
        f"The memory file has been edited ({_count(len(applied.to_stage))} staged; {saved}). {path} now holds "
        f"{len(after.entries(target))} entries, {usage(after, target, request.limits)}.{note}\n"
        + (_numbered(_shown(after.entries(target), after.expiries(target))) or "(empty)"),
        status="staged", operation_count=len(applied.to_stage),
    )


def _changes(applied: Applied) -> bool:
    return applied.changes


def _accepting(request: MemoryRequest):
    """`_changes`, and with the turn's messages the gate's refusals, as memory_update has them (a secret the
    turn gave, in the person's words or a tool result, is never staged)."""
    sources = request.sources if memory_settings().gate else None
    if sources is None:
        return _changes

    def accept(applied: Applied) -> bool:
        refuse_by_gate(applied, sources)
        return applied.changes

    return accept


def _rule_text(exc: MemoryValidationError, path: str, request: MemoryRequest, count: int) -> str:
    """The rule a change broke, in the file's terms; nothing in this command was staged."""
    if exc.code == "over_capacity":
        target = FILES[path]
        text = (f"{path} would be {exc.excess or 0:,} characters over its limit of {request.limits[target]:,}. "
                "Shorten or delete lines in the same command (create the file again with related facts "
                "consolidated), then add the new fact.")
    elif exc.code in ("batch_size", "turn_budget"):
        left = request.ledger.operations_left  # type: ignore[union-attr]  # as in _stage
        text = (f"This command would change {count} lines, and a turn stages at most {MAX_OPERATIONS} changes in all "
                f"({left} left). " + ("Change fewer lines per command." if left else
                                      "Answer the user; the rest can wait for a later turn."))
    elif exc.code.startswith("threat_") or exc.code in ("reserved_tag", "reserved_header", "control_character",
                                                          "delimiter_in_entry"):
        text = "A line was refused: " + exc.message
    else:
        text = exc.message
    return text + " Nothing in this command was staged."



def _view(snapshot: Snapshot, path: object, view_range: object, request: MemoryRequest) -> CommandReply:
    if not isinstance(path, str):
        return _refused("view needs a path: /memories, /memories/profile.md or /memories/notes.md.", "invalid_path")
    if path.rstrip("/") == ROOT:
        rows = [f"{_size(snapshot, target)}\t{PATHS[target]}\t({ABOUT[target]}; {len(snapshot.entries(target))} "
                f"entries, {usage(snapshot, target, request.limits)})" for target in TARGETS]
        return CommandReply("Here're the files in /memories (there are no others; one entry per line):\n"
                            + "\n".join(rows), status="viewed")
    target = FILES.get(path.rstrip("/"))
    if target is None:
        return _refused(f"The path {path} does not exist. " + LAYOUT, "unknown_path")
    lines = _shown(snapshot.entries(target), snapshot.expiries(target))
    start, numbered = 1, lines
    if isinstance(view_range, (list, tuple)) and len(view_range) == 2 and all(isinstance(n, int) for n in view_range):
        start = max(1, view_range[0])
        end = len(lines) if view_range[1] == -1 else view_range[1]
        numbered = lines[start - 1:end]
    return CommandReply(
        f"Here's the content of {path} with line numbers ({usage(snapshot, target, request.limits)}; one entry per "
        "line):\n" + (_numbered(numbered, start) or "(empty)"), status="viewed",
    )


def _numbered(lines: list[str], start: int = 1) -> str:
    return "\n".join(f"{number:>6}\t{line}" for number, line in enumerate(lines, start=start))


def _size(snapshot: Snapshot, target: str) -> str:
    return f"{len(chr(10).join(_shown(snapshot.entries(target), snapshot.expiries(target))).encode())}B"


def _refused(text: str, code: str, *, status: str = "refused") -> CommandReply:
    return CommandReply(text, is_error=True, status=status, code=code)


def _failed(ledger: MemoryLedger, limit: int, text: str, code: str, *, status: str = "refused",
            count: int = 0) -> CommandReply:
    """A refused command counts toward the turn's consecutive failures, as memory_update's do."""
    ledger.failed_calls += 1
    if ledger.failed_calls >= limit:
        return _stop_retrying(limit)
    return CommandReply(text, is_error=True, status=status, operation_count=count, code=code)


def _stop_retrying(limit: int) -> CommandReply:
    return CommandReply(
        f"The memory tool failed {limit} times in this turn. Stop retrying: answer the user now and, if it "
        "matters, tell them the memory change was not made.", is_error=True, status="stop_retrying",
        code="stop_retrying",
    )


def _count(n: int) -> str:
    return f"{n} change" + ("" if n == 1 else "s")
