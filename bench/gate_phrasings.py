"""The gate's word rules on everyday phrasings they were not written from (issue 52, "Other phrasings").

    .venv/bin/python bench/gate_phrasings.py

Each case is a message and an entry a small model might write for it, with
what should become of the add: "commit", or "hold" (asked or refused, never
committed). Written by hand after the rules, and not used to change them:
the figure is how the rules carry to phrasings they were not shown. Prints
the share right per language and kind, and every miss. Needs no database.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from django.conf import settings  # noqa: E402

settings.configure(USE_I18N=False)

from agentmemory import gate  # noqa: E402
from agentmemory.rules import Operation, Snapshot  # noqa: E402

# (language, kind, message, entry, expected)
CASES = [
    ("en", "progress", "Got the CSV importer working; tomorrow the PDF export.", "Got the CSV importer working", "hold"),
    ("en", "progress", "Wrapped up the auth refactor, moving to the admin pages after lunch.",
     "Wrapped up the auth refactor", "hold"),
    ("en", "progress", "The migration script is done. Next on my list is the cleanup job.",
     "Next on the list is the cleanup job", "hold"),
    ("en", "progress", "Almost there with the search page, just the pagination left.",
     "Search page nearly done; pagination left", "hold"),
    ("en", "progress", "I shipped the webhook retries this morning and I'm starting on rate limits.",
     "Shipped webhook retries; starting on rate limits", "hold"),
    ("en", "progress", "ok the flaky test is fixed. After that I'll look at the Docker image size.",
     "Fixed the flaky test", "hold"),
    ("en", "lasting", "We review every pull request within a day.", "Reviews every pull request within a day",
     "commit"),
    ("en", "lasting", "I'm a frontend developer and I mostly write TypeScript.",
     "Frontend developer who mostly writes TypeScript", "commit"),
    ("en", "lasting", "Our services talk to each other over gRPC.", "Services talk over gRPC", "commit"),
    ("en", "lasting", "I prefer answers with a short example first.", "Prefers a short example first", "commit"),
    ("en", "lasting", "Our main database is MariaDB 10.11.", "Main database is MariaDB 10.11", "commit"),
    ("en", "negated", "Use double quotes in Python, not single quotes.", "Prefers single quotes in Python", "hold"),
    ("en", "negated", "We're on Podman, never Docker.", "Uses Docker", "hold"),
    ("en", "negated", "I write Kotlin, not Java, for Android.", "Writes Kotlin, not Java, for Android", "commit"),
    ("en", "negated", "No ORMs please, we write raw SQL.", "Uses ORMs", "hold"),
    ("de", "progress", "Hab die Suche fertig, morgen geht's an die Paginierung.", "Suche ist fertig", "hold"),
    ("de", "progress", "Der Import läuft endlich, danach kümmere ich mich um den Export.",
     "Import läuft; danach Export", "hold"),
    ("de", "progress", "So, Auth-Refactoring erledigt. Als nächstes die Admin-Seiten.",
     "Auth-Refactoring erledigt", "hold"),
    ("de", "progress", "Ich bin gerade dabei, die Tests auf pytest umzustellen.",
     "Stellt die Tests auf pytest um", "hold"),
    ("de", "lasting", "Wir reviewen jeden Pull Request innerhalb eines Tages.",
     "Reviewt jeden Pull Request innerhalb eines Tages", "commit"),
    ("de", "lasting", "Ich bin Frontend-Entwickler und schreibe fast nur TypeScript.",
     "Frontend-Entwickler, schreibt fast nur TypeScript", "commit"),
    ("de", "lasting", "Unsere Services sprechen über gRPC miteinander.", "Services sprechen über gRPC", "commit"),
    ("de", "lasting", "Ich mag Antworten mit einem kurzen Beispiel zuerst.", "Mag ein kurzes Beispiel zuerst",
     "commit"),
    ("de", "negated", "Wir nutzen Podman, kein Docker.", "Nutzt Docker", "hold"),
    ("de", "negated", "Bitte nie Emojis in Antworten.", "Mag Emojis in Antworten", "hold"),
    ("de", "negated", "Ich schreibe Kotlin, nicht Java.", "Schreibt Kotlin, nicht Java", "commit"),
    ("other", "unread", "Piszę głównie w TypeScripcie i używam Reacta.", "Writes mostly TypeScript", "hold"),
    ("other", "unread", "Jeg skriver mest TypeScript på jobben.", "Writes mostly TypeScript", "hold"),
    ("other", "unread", "Je travaille surtout en TypeScript.", "Works mostly in TypeScript", "hold"),
    ("other", "asked", "Recuerda que trabajo sobre todo con TypeScript.", "Works mostly with TypeScript", "commit"),
]


def outcome(message: str, entry: str) -> str:
    sources = gate.TurnSources.from_messages([{"role": "user", "content": message}])
    operation = Operation(target="user", action="add", content=entry)
    held = gate.refusal(operation, sources) or gate.reason(operation, start=Snapshot(), sources=sources)
    return "hold" if held else "commit"


def main() -> None:
    tally: dict[tuple[str, str], list[int]] = {}
    for language, kind, message, entry, expected in CASES:
        got = outcome(message, entry)
        right = tally.setdefault((language, kind), [0, 0])
        right[0] += got == expected
        right[1] += 1
        if got != expected:
            print(f"  miss ({language}, {kind}): expected {expected}, got {got}: {message!r} -> {entry!r}")
    print("| language | kind | right |")
    print("| --- | --- | --- |")
    for (language, kind), (right, total) in tally.items():
        print(f"| {language} | {kind} | {right}/{total} |")
    print(f"| all | | {sum(r for r, _ in tally.values())}/{sum(t for _, t in tally.values())} |")


if __name__ == "__main__":
    main()
