"""The memory passport's formats (issue 39, part 2): reading what another assistant kept, and writing ours.

Pure functions only: no Django, no database, no clock. Turning the items
into ONE proposal the person reviews is `agentmemory.importing`.

- `read(data)` takes the bytes a person pasted or uploaded, refuses what is
  too large, not UTF-8 or holds too many items (`ImportRefused`, a stable
  `code`, no content in the message), detects the format and returns the
  items, each routed to the profile ("user") or the notes ("memory") by
  trusted rules, with an expiry when the format carries one.
- Formats recognised (`FORMATS`): our JSON export; our Markdown pair (and
  Claude's memory files: `/memories/profile.md`, `/memories/notes.md`, one
  entry per line, an expiry as " (until YYYY-MM-DD)"); a mem0 export
  (`[{"memory": ...}]` or `{"results": [...]}`, its `expiration_date` the
  item's expiry); a Letta agent's core memory
  (`{"memory": {"blocks": [{"label": "human", "value": ...}]}}`, an Agent
  File's `core_memory`, or the blocks themselves); ChatGPT's saved memories as copied from its settings
  (one memory a line) or as the model prints them ("Model Set Context",
  "1. [2024-04-26]. The user prefers ...": the dates dropped); a plain list
  (lines or bullets).
- An entry that our own export says was imported keeps where it was
  imported from and when (`Item.imported`, `Item.at`), so an export read
  back says "Imported from ChatGPT" as before, not "from your export".
- `markdown_pair(documents)` writes the two files our import reads back.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .rules import ISO_DATE, normalize_text

MAX_IMPORT_BYTES = 256 * 1024
MAX_IMPORT_ITEMS = 200
MAX_ITEM_CHARS = 1_000

OURS_JSON, OURS_MARKDOWN, MEM0, LETTA = "ours_json", "ours_markdown", "mem0", "letta"
CHATGPT, PLAIN = "chatgpt", "plain"
FORMATS = (OURS_JSON, OURS_MARKDOWN, MEM0, LETTA, CHATGPT, PLAIN)
EXPORT_FORMAT = "agentmemory-export"  # `selectors.EXPORT_FORMAT`'s value: checked in the tests
PROFILE_FILE, NOTES_FILE = "/memories/profile.md", "/memories/notes.md"
FILES = {PROFILE_FILE: "user", NOTES_FILE: "memory"}

_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_FILE_LINE = re.compile(r"^\s*(?:#+\s*)?(?:file:\s*)?(/memories/[\w./-]+)\s*$", re.IGNORECASE)
_UNTIL = re.compile(r"\s*\(until ([0-9]{4}-[0-9]{2}-[0-9]{2})\)\s*$")
# Our Markdown's note of an imported entry's origin: an HTML comment, unseen where the Markdown is rendered.
_ORIGIN = re.compile(r"\s*<!-- imported from ([a-z][a-z0-9_]{0,31}) at ([0-9T:.+-]{10,40}) -->\s*$")
# ChatGPT's saved memories as the model prints them ("Model Set Context"): "1. [2024-04-26]. The user ...".
_DATED = re.compile(r"^\s*\d+[.)]\s*\[[0-9]{4}-[0-9]{2}-[0-9]{2}\][.:]?\s+")
_MODEL_SET_CONTEXT = re.compile(r"^\s*(?:#+\s*)?model set context\s*:?\s*$", re.IGNORECASE)
# ChatGPT's settings list memories as third-person sentences about the person.
_ABOUT_THE_PERSON = re.compile(
    r"^(?:user|the user|i|i'm|my|prefers|likes|dislikes|loves|hates|is|was|has|lives|works|wants|speaks|"
    r"enjoys|uses|studies|owns)\b", re.IGNORECASE)


class ImportRefused(ValueError):
    """The import was refused as a whole; nothing of it is kept. `code` is stable and content-free."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Item:
    target: str  # "user" or "memory"
    content: str
    expires: str | None = None
    # Read from our own export: the format the entry was first imported from and when ("" for none).
    imported: str = ""
    at: str = ""


@dataclass(frozen=True)
class Imported:
    format: str
    items: tuple[Item, ...]
    # Items the import repeats (same document, same text): read once, listed here so the person sees why.
    repeated: tuple[Item, ...] = ()
    # The texts the items were cut from, headings and labels kept (the whole text, bullets off; each Letta
    # block): a secret labelled on the line before, or in a heading, is found there (`importing`).
    passages: tuple[str, ...] = ()


def read(data: bytes | str) -> Imported:
    """Return the detected format and its items, or raise ImportRefused (never a part of them)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_IMPORT_BYTES:
        raise ImportRefused(f"The import is {len(raw):,} bytes; at most {MAX_IMPORT_BYTES:,} are read.",
                            code="import_too_large")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ImportRefused("The import is not UTF-8 text.", code="import_encoding") from None
    if "\x00" in text:
        raise ImportRefused("The import is not UTF-8 text.", code="import_encoding")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise ImportRefused("The import is empty.", code="import_empty")
    shape = text.strip()
    looks_json = shape[:1] == "{" or (shape[:1] == "[" and shape[-1:] == "]")
    found = _read_json(text) if looks_json else _read_text(text)
    if found is None:
        raise ImportRefused("The import looks like JSON but is not valid JSON.", code="import_invalid_json")
    items = tuple(item for item in found.items if item.content)
    if not items:
        raise ImportRefused("No memory was found in the import.", code="import_empty")
    if len(items) > MAX_IMPORT_ITEMS:
        raise ImportRefused(f"The import holds {len(items):,} items; at most {MAX_IMPORT_ITEMS} are read.",
                            code="import_too_many")
    long = [index for index, item in enumerate(items, start=1) if len(item.content) > MAX_ITEM_CHARS]
    if long:
        raise ImportRefused(f"Item {long[0]} is longer than {MAX_ITEM_CHARS} characters.", code="import_item_too_long")
    unique, repeated = _unique(items)
    passages = found.passages if looks_json else ("\n".join(_BULLET.sub("", line) for line in text.split("\n")),)
    return Imported(format=found.format, items=unique, repeated=repeated, passages=passages)


def route(content: str) -> str:
    """The document an imported item goes to by default: the profile for a fact about the person."""
    return "user" if _ABOUT_THE_PERSON.match(content.strip()) else "memory"


def markdown_pair(documents: Mapping[str, Sequence[str]], expiries: Mapping[str, Mapping[str, str]] | None = None,
                  origins: Mapping[str, Mapping[str, tuple[str, str]]] | None = None) -> dict[str, str]:
    """Our two documents as Claude's memory files: one entry a line, an expiry as " (until YYYY-MM-DD)".

    `origins` ({target: {entry: (format, at)}}) notes an imported entry's
    origin after it as an HTML comment, which our import reads back.
    """
    expiries = expiries or {}
    origins = origins or {}
    files = {}
    for path, target in FILES.items():
        dates = expiries.get(target) or {}
        came = origins.get(target) or {}
        lines = [" ".join(entry.split("\n")) + (f" (until {dates[entry]})" if entry in dates else "")
                 + (" <!-- imported from {} at {} -->".format(*came[entry]) if entry in came else "")
                 for entry in documents.get(target) or ()]
        files[path] = "\n".join(f"- {line}" for line in lines) + ("\n" if lines else "")
    return files


def markdown_bundle(documents: Mapping[str, Sequence[str]],
                    expiries: Mapping[str, Mapping[str, str]] | None = None,
                    origins: Mapping[str, Mapping[str, tuple[str, str]]] | None = None) -> str:
    """The Markdown pair as one text (each file under its path), as our import reads it back."""
    return "\n".join(f"{path}\n{body}" for path, body in markdown_pair(documents, expiries, origins).items())


# --- JSON ----------------------------------------------------------------------------


def _read_json(text: str) -> Imported | None:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, Mapping) and data.get("format") == EXPORT_FORMAT:
        return Imported(OURS_JSON, tuple(_ours(data)))
    if isinstance(data, Mapping):
        # A Letta agent: its blocks under "memory", or at the top; a "memory" that is no object is not read.
        memory = data.get("memory")
        if isinstance(memory, Mapping) and "blocks" in memory:
            return _letta_import(memory["blocks"])
        if "blocks" in data:
            return _letta_import(data["blocks"])
        if isinstance(data.get("core_memory"), list):
            return _letta_import(data["core_memory"])  # a Letta Agent File (.af): its memory blocks
    if isinstance(data, list) and data and all(isinstance(item, Mapping) and "label" in item for item in data):
        return _letta_import(data)
    results = data.get("results") if isinstance(data, Mapping) else data
    if isinstance(results, list) and all(isinstance(item, Mapping) and isinstance(item.get("memory"), str)
                                         for item in results) and results:
        return Imported(MEM0, tuple(Item(route(item["memory"]), _clean(item["memory"]), _mem0_expiry(item))
                                    for item in results))
    if isinstance(data, list) and all(isinstance(item, str) for item in data):
        return Imported(PLAIN, tuple(Item(route(item), _clean(item)) for item in data))
    raise ImportRefused("This JSON is not a format the import knows.", code="import_unknown_format")


def _ours(data: Mapping) -> list[Item]:
    documents = data.get("documents")
    if not isinstance(documents, Mapping):
        raise ImportRefused("This export has no documents.", code="import_unknown_format")
    items = []
    for target in ("user", "memory"):
        document = documents.get(target) or {}
        entries = document.get("entries") if isinstance(document, Mapping) else None
        sources = document.get("sources") if isinstance(document, Mapping) else None
        if not isinstance(entries, list):
            continue
        sources = sources if isinstance(sources, list) and len(sources) == len(entries) else [None] * len(entries)
        for entry, source in zip(entries, sources):
            if isinstance(entry, str):
                source = source if isinstance(source, Mapping) else {}
                expires = source.get("expires")
                imported, at = _origin(source.get("imported"), source.get("at"))
                items.append(Item(target, _clean(entry),
                                  expires if isinstance(expires, str) and ISO_DATE.fullmatch(expires) else None,
                                  imported, at))
    return items


def _mem0_expiry(item: Mapping) -> str | None:
    """mem0's `expiration_date` (documented as a plain YYYY-MM-DD, the last day it is shown), or None."""
    value = item.get("expiration_date")
    return value if isinstance(value, str) and ISO_DATE.fullmatch(value) else None


def _origin(imported: object, at: object) -> tuple[str, str]:
    """An export's note of where an entry was imported from, when it names a format we read; ("", "") otherwise."""
    if not (isinstance(imported, str) and imported in FORMATS and isinstance(at, str)):
        return "", ""
    try:
        datetime.fromisoformat(at)
    except ValueError:
        return "", ""
    return imported, at


def _letta_import(blocks: object) -> Imported:
    items = tuple(_letta(blocks))  # refuses blocks that are no list
    values = tuple(block["value"] for block in blocks  # type: ignore[attr-defined]  # a list, checked
                   if isinstance(block, Mapping) and isinstance(block.get("value"), str))
    return Imported(LETTA, items, passages=values)


def _letta(blocks: object) -> list[Item]:
    if not isinstance(blocks, list):
        raise ImportRefused("This export has no memory blocks.", code="import_unknown_format")
    items = []
    for block in blocks:
        if not isinstance(block, Mapping) or not isinstance(block.get("value"), str):
            continue
        target = "user" if str(block.get("label", "")).lower() in ("human", "user") else "memory"
        if str(block.get("label", "")).lower() == "persona":
            continue  # the other assistant's description of itself, not the person's memory
        items += [Item(target, line) for line in _lines(block["value"])]
    return items


# --- text ----------------------------------------------------------------------------


def _read_text(text: str) -> Imported:
    lines = text.split("\n")
    if any(_FILE_LINE.match(line) for line in lines):
        items = []
        target = None
        for line in lines:
            named = _FILE_LINE.match(line)
            if named:
                target = FILES.get(named.group(1).lower(), "memory")
                continue
            if target is None:
                continue
            for entry in _lines(line):
                imported, at = "", ""
                noted = _ORIGIN.search(entry)
                if noted is not None and entry[:noted.start()].strip():
                    imported, at = _origin(noted.group(1), noted.group(2))
                    entry = entry[:noted.start()].strip()
                content, expires = _split_until(entry)
                items.append(Item(target, content, expires, imported, at))
        return Imported(OURS_MARKDOWN, tuple(items))
    written = [line for line in lines if line.strip()]
    # As printed: under "# Model Set Context" (what is said before the heading is no memory), often fenced.
    heading = next((index for index, line in enumerate(written) if _MODEL_SET_CONTEXT.match(line)), -1)
    dated = [line for line in written[heading + 1:] if not line.lstrip().startswith("```")]
    if dated and all(_DATED.match(line) for line in dated):
        # ChatGPT's memories as the model prints them: the number and the date go, each line one memory.
        return Imported(CHATGPT, tuple(Item(route(line), line) for line in _lines(
            "\n".join(_DATED.sub("", line) for line in dated))))
    bullets = sum(1 for line in lines if _BULLET.match(line))
    kind = PLAIN if bullets else CHATGPT
    return Imported(kind, tuple(Item(route(line), line) for line in _lines("\n".join(written))))


def _lines(value: str) -> list[str]:
    lines = []
    for line in value.split("\n"):
        if not line.strip() or _HEADING.match(line):
            continue
        line = _clean(_BULLET.sub("", line))
        if line:
            lines.append(line)
    return lines


def _split_until(line: str) -> tuple[str, str | None]:
    found = _UNTIL.search(line)
    if found is None or not line[:found.start()].strip():
        return line, None
    return line[:found.start()].strip(), found.group(1)


def _clean(value: str) -> str:
    return normalize_text(value)


def _unique(items: Sequence[Item]) -> tuple[tuple[Item, ...], tuple[Item, ...]]:
    seen = set()
    kept, repeated = [], []
    for item in items:
        key = (item.target, item.content)
        if key not in seen:
            seen.add(key)
            kept.append(item)
        else:
            repeated.append(item)
    return tuple(kept), tuple(repeated)
