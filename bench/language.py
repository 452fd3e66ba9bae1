"""How well and how fast the gate tells the language of a short chat message.

    .venv/bin/python bench/language.py            # the gate's detector
    LINGUA=1 .venv/bin/python bench/language.py   # and lingua-language-detector, when it is importable

Accuracy per language on bench/_language_messages.py (messages in a language
the gate ships no words for count as right when they come out "unknown";
for lingua, restricted to the shipped languages plus Polish, Swedish and
Turkish, right when it names the language, a language we do not ship
counting as "unknown"), and the cost of one call on a fresh message (the
detector's cache cleared before each), p50 and p95 in microseconds.
Prints a Markdown table for docs/benchmarks.md. Needs no database.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _language_messages import MESSAGES  # noqa: E402

from agentmemory.gate import language  # noqa: E402
from agentmemory.gate.words import LANGUAGES  # noqa: E402

REPEAT = 50


def expected(code: str) -> str:
    return code if code in LANGUAGES else language.UNKNOWN


def measure(name: str, detect, clear=lambda: None) -> list[str]:
    rows, wrong, timings = [], [], []
    total = right = 0
    for code, messages in MESSAGES.items():
        hits = 0
        for message in messages:
            clear()
            got = detect(message)
            hits += got == expected(code)
            if got != expected(code):
                wrong.append(f"{code} -> {got}: {message}")
            for _ in range(REPEAT):
                clear()
                start = time.perf_counter_ns()
                detect(message)
                timings.append(time.perf_counter_ns() - start)
        rows.append(f"| {name} | {code} | {hits}/{len(messages)} |")
        total += len(messages)
        right += hits
    timings.sort()
    p50 = statistics.median(timings) / 1000
    p95 = timings[int(len(timings) * 0.95)] / 1000
    rows.append(f"| {name} | all | {right}/{total} ({100 * right / total:.0f} %) |")
    rows.append(f"| {name} | cost per call | p50 {p50:.1f} us, p95 {p95:.1f} us |")
    for line in wrong:
        print(f"  missed ({name}): {line}", file=sys.stderr)
    return rows


def lingua_detector():
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    shipped = [*LANGUAGES, "pl", "sv", "tr"]
    codes = [getattr(IsoCode639_1, code.upper()) for code in shipped]
    start = time.perf_counter()
    detector = LanguageDetectorBuilder.from_iso_codes_639_1(*codes).with_preloaded_language_models().build()
    loaded = time.perf_counter() - start

    def detect(text: str) -> str:
        found = detector.detect_language_of(text)
        code = found.iso_code_639_1.name.lower() if found is not None else language.UNKNOWN
        return code if code in LANGUAGES else language.UNKNOWN

    return detect, loaded


def main() -> None:
    print("| detector | language | right |")
    print("| --- | --- | --- |")
    for row in measure("gate (function words)", language.detect.__wrapped__):
        print(row)
    if os.environ.get("LINGUA"):
        detect, loaded = lingua_detector()
        for row in measure("lingua 2.1 (10 languages)", detect):
            print(row)
        print(f"| lingua 2.1 (10 languages) | model load | {loaded * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
