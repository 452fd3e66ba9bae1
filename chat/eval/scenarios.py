"""The scenario suite: its file format, the kinds and turn roles, and the two halves.

Data only: loading and validating `scenarios.json`, and dealing the suite into
a tuning and a held-out half, per kind and language. Nothing here runs a turn
or scores one.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentmemory.rules import Snapshot

SCENARIOS_PATH = Path(__file__).resolve().parent / "scenarios.json"
TARGETS = ("user", "memory")
PEOPLE = ("a", "b")

# Turn roles: what a message may do to memory.
WRITE = "write"  # should (or may) change memory: a fact worth keeping, a correction, a forget request
NONE = "none"  # must not touch memory: a memory_update call here is spurious
GUARD = "guard"  # asks to store something that must never be stored (a secret, an injection)
ROLES = (WRITE, NONE, GUARD)

# Scenario kinds and the role of their turns unless a turn says otherwise.
KINDS: Mapping[str, str] = {
    "save_user": WRITE,
    "save_memory": WRITE,
    "explicit_remember": WRITE,
    "skip_task_progress": NONE,
    "skip_one_off": NONE,
    "skip_chat_summary": NONE,  # a recap of the chat on request: the answer, never a memory entry
    "skip_secret": NONE,
    "correction": WRITE,
    "forget": WRITE,
    "injection": NONE,
    "small_talk": NONE,
    "coding_question": NONE,
    "consolidation_when_full": WRITE,
    "isolation_two_people": WRITE,
    "recall_question": NONE,  # a question about what memory holds: answer from the prompt, call no tool
}

CHANGES = ("gain", "nothing", "replace", "remove", "absent", "answer", "unstored")
TASK_PROGRESS_KIND = "skip_task_progress"

# The language a scenario's messages are written in (ISO 639-1); the report gives figures per language.
DEFAULT_LANGUAGE = "en"
_LANGUAGE = re.compile(r"[a-z]{2}")
RECALL_KIND = "recall_question"
CONSOLIDATION_KIND = "consolidation_when_full"

# The two halves of the suite (`split_half`).
TUNING = "tuning"
HELD_OUT = "held-out"
HALVES = (TUNING, HELD_OUT)


@dataclass(frozen=True)
class Turn:
    text: str
    role: str
    person: str = "a"


@dataclass(frozen=True)
class Expectation:
    """What one person's memory should look like after the scenario.

    gain: `target` gained a new entry matching every keyword (regexes, case-insensitive).
    nothing: that person's memory never changed.
    replace: the entries containing `old` (before the last turn) are gone and a new
      entry in their document matches every keyword.
    remove: no entry contains `old`; every text in `keep` is still stored.
    absent: no stored entry and no answer of that person matches any keyword.
    answer: the last turn of that person was answered and the answer matches every keyword.
    unstored: no entry of that person, at any point, matches any keyword (a term the
      person negated, stored as if asserted: "spaces" from "tabs, not spaces").
    """

    change: str
    person: str = "a"
    target: str | None = None
    keywords: tuple[str, ...] = ()
    old: str | None = None
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    id: str
    kind: str
    turns: tuple[Turn, ...]
    expect: tuple[Expectation, ...] = ()
    seed: Mapping[str, Snapshot] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    injections: tuple[str, ...] = ()
    note: str = ""
    language: str = DEFAULT_LANGUAGE
    half: str = ""  # a half named by the scenario itself (see split_half); "" = dealt

    @property
    def people(self) -> tuple[str, ...]:
        named = {turn.person for turn in self.turns} | set(self.seed) | {e.person for e in self.expect}
        return tuple(person for person in PEOPLE if person in named)


class ScenarioError(ValueError):
    """The scenario file breaks the format; the message names the scenario and the field."""


def load_scenarios(path: Path | str = SCENARIOS_PATH) -> list[Scenario]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    scenarios = [_scenario(raw) for raw in data["scenarios"]]
    ids = Counter(scenario.id for scenario in scenarios)
    duplicated = sorted(name for name, count in ids.items() if count > 1)
    if duplicated:
        raise ScenarioError(f"duplicate scenario ids: {', '.join(duplicated)}")
    return scenarios


def _scenario(raw: Mapping) -> Scenario:
    name = raw.get("id") or "?"

    def fail(message: str) -> ScenarioError:
        return ScenarioError(f"scenario {name}: {message}")

    kind: str = raw.get("kind")  # type: ignore[assignment]  # checked against KINDS next
    if kind not in KINDS:
        raise fail(f"unknown kind {kind!r}")
    turns = []
    for item in raw.get("turns") or ():
        item = {"text": item} if isinstance(item, str) else dict(item)
        turn = Turn(text=item["text"], role=item.get("role", KINDS[kind]), person=item.get("person", "a"))
        if turn.role not in ROLES or turn.person not in PEOPLE or not turn.text.strip():
            raise fail("a turn needs text, a role in write/none/guard and a person a or b")
        turns.append(turn)
    if not turns:
        raise fail("no turns")
    expect = []
    for item in raw.get("expect") or ():
        expectation = Expectation(
            change=item["change"], person=item.get("person", "a"), target=item.get("target"),
            keywords=tuple(item.get("keywords") or ()), old=item.get("old"), keep=tuple(item.get("keep") or ()),
        )
        if expectation.change not in CHANGES or expectation.person not in PEOPLE:
            raise fail(f"unknown change {expectation.change!r} or person {expectation.person!r}")
        if expectation.change == "gain" and (expectation.target not in TARGETS or not expectation.keywords):
            raise fail("gain needs a target and keywords")
        if expectation.change in ("replace", "remove") and not expectation.old:
            raise fail(f"{expectation.change} needs old")
        if expectation.change in ("replace", "absent", "answer", "unstored") and not expectation.keywords:
            raise fail(f"{expectation.change} needs keywords")
        for pattern in expectation.keywords:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise fail(f"keyword is not a valid regex ({exc})") from None
        expect.append(expectation)
    language = raw.get("language", DEFAULT_LANGUAGE)
    if not isinstance(language, str) or not _LANGUAGE.fullmatch(language):
        raise fail(f"language {language!r} is not a two-letter ISO 639-1 code such as en or de")
    half = raw.get("half", "")
    if half and half not in HALVES:
        raise fail(f"half {half!r} is not {' or '.join(HALVES)}")
    seed = {}
    for person, documents in (raw.get("seed") or {}).items():
        if person not in PEOPLE:
            raise fail(f"unknown person {person!r} in seed")
        seed[person] = Snapshot(user=tuple(documents.get("user") or ()), memory=tuple(documents.get("memory") or ()))
    return Scenario(
        id=name, kind=kind, turns=tuple(turns), expect=tuple(expect), seed=seed,
        secrets=tuple(raw.get("secrets") or ()), injections=tuple(raw.get("injections") or ()),
        note=raw.get("note", ""), language=language, half=half,
    )


def split_half(scenarios: Sequence[Scenario], half: str) -> list[Scenario]:
    """Return the scenarios of one half of the suite: `tuning` or `held-out`.

    Stratified by kind and language: within each (kind, language) the
    scenarios are sorted by id and dealt alternately, the first to the tuning
    half, so every kind a language has two or more scenarios of is in both
    halves in that language (the tuning half takes the odd one).
    Deterministic, and independent of the suite's order; the result keeps
    the order of `scenarios`. A scenario added later keeps every other one in
    its half only if its id sorts after the others of its kind and language.

    A scenario that names its half (`"half": "tuning"`) is in that half but
    keeps its place in the dealing, so no other scenario changes half: a
    held-out scenario whose transcript was read to change a rule moves to
    the tuning half that way, and the fresh one written to replace it names
    `"half": "held-out"`.
    """
    if half not in HALVES:
        raise ValueError(f"unknown half {half!r}; use {' or '.join(HALVES)}")
    strata: dict[tuple[str, str], list[str]] = {}
    named = {scenario.id: scenario.half for scenario in scenarios if scenario.half}
    for scenario in scenarios:
        strata.setdefault((scenario.kind, scenario.language), []).append(scenario.id)
    dealt = {name: HALVES[i % 2] for ids in strata.values() for i, name in enumerate(sorted(ids))}
    chosen = {name for name, where in dealt.items() if named.get(name, where) == half}
    return [scenario for scenario in scenarios if scenario.id in chosen]
