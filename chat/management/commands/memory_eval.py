"""`manage.py memory_eval`: the memory curation eval against any endpoint.

    python manage.py memory_eval                      # the settings in force (demo model without a key)
    python manage.py memory_eval --base-url http://127.0.0.1:8080/v1 --model qwen2.5-coder-1.5b --runs 2
    python manage.py memory_eval --only correction --json /tmp/eval.json --write docs/curation.md
    python manage.py memory_eval --half tuning        # one half of the suite (the other: --half held-out)
    python manage.py memory_eval --gate off           # the trusted gate off for this run (before/after)
    python manage.py memory_eval --language de        # only the scenarios written in German

The report gives the headline figures per language of the scenarios (one
column a language) beside the figures of the whole run.

`--half tuning|held-out` runs one half of the suite (`curation.split_half`:
stratified by kind, so each kind with two or more scenarios is in both); the
half is recorded in the report and has its own section in `--write`.

`--gate on|off` switches the trusted judgement of staged changes
(`agentmemory.gate`, AGENTMEMORY GATE) for the run, by replacing the
AGENTMEMORY dict (agentmemory.conf rebuilds its settings per dict); without
it the setting in force is used. The state is recorded in the report, and a
gate-off run has its own section in `--write`.

`--base-url`, `--model` and `--api-key` replace OPENAI_BASE_URL, OPENAI_MODEL
and OPENAI_API_KEY for the run (before the chat agent is built), and memory is
forced on (AGENTMEMORY ENABLED). With `--base-url` and no `--api-key` a
placeholder key is sent, never the configured one (local servers accept any
key; `MEMORY_EVAL_API_KEY` in the environment is used when set). The fallback
model is off when the endpoint or model is overridden.

It needs a migrated database (DATABASE_URL, SQLite by default). Every scenario
runs with fresh `curation-<uuid>` accounts that are deleted afterwards. The
output — the console, `--json` and `--write` — holds figures, scenario ids,
kinds and outcome codes only: never memory content, prompts, answers, tool
arguments or the API key.
"""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.test.utils import override_settings
from django.utils import timezone

import chat.eval as curation

PLACEHOLDER_KEY = "memory-eval-no-key"


def endpoint_kind(*, api_key: str, base_url: str) -> str:
    """demo (no key), local (loopback, private network, .local), or hosted."""
    if not api_key:
        return "demo"
    if not base_url:
        return "hosted"  # the SDK's default endpoint
    host = (urlsplit(base_url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith((".local", ".localhost", ".internal")):
        return "local"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "hosted"
    return "local" if address.is_loopback or address.is_private or address.is_link_local else "hosted"


def _without_credentials(url: str) -> str:
    """The URL without any user:password@ part."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port:
        netloc += f":{parts.port}"
    return parts._replace(netloc=netloc).geturl()


def _code_version() -> str:
    """The commit the run was made on, `+` when tracked files had uncommitted changes."""
    root = Path(settings.BASE_DIR)
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return head + ("+" if dirty else "")


def _languages(values) -> list[str]:
    return [code.strip() for value in values for code in value.split(",") if code.strip()]


def _first_of_each_kind(scenarios: list, count: int) -> list:
    taken: dict[str, int] = {}
    kept = []
    for scenario in scenarios:
        taken[scenario.kind] = taken.get(scenario.kind, 0) + 1
        if taken[scenario.kind] <= count:
            kept.append(scenario)
    return kept


def _policy_version() -> str:
    from agentmemory.conf import memory_settings

    return memory_settings().policy_version


def _gate_state() -> str:
    """Return "on" or "off": the gate setting in force (read inside the run's overrides)."""
    from agentmemory.conf import memory_settings

    return "on" if getattr(memory_settings(), "gate", False) else "off"


def _run(coroutine):
    """Run a coroutine to completion, also when the caller's thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:  # handed back to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="memory-eval")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class _QuietHttpLogs:
    """One INFO line per model request drowns the progress lines; keep those loggers at WARNING."""

    NAMES = ("httpx2", "httpx", "openai", "chat.agents")

    def __enter__(self):
        self._levels = {name: logging.getLogger(name).level for name in self.NAMES}
        for name in self.NAMES:
            logging.getLogger(name).setLevel(logging.WARNING)

    def __exit__(self, *exc_info):
        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)


class Command(BaseCommand):
    help = "Run the memory curation scenarios through the real chat turn and report figures (no content)."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
        parser.add_argument("--model", default="", help="model name at that endpoint")
        parser.add_argument("--api-key", default="", help="API key (default: $MEMORY_EVAL_API_KEY, or a placeholder "
                                                          "with --base-url); never printed or written")
        parser.add_argument("--runs", type=int, default=1, help="repeat every scenario N times (default 1)")
        parser.add_argument("--only", action="append", default=[], metavar="KIND",
                            help=f"run only these kinds (repeat or comma-separate): {', '.join(curation.KINDS)}")
        parser.add_argument("--write", default="", metavar="PATH",
                            help="write or update a report such as docs/curation.md")
        parser.add_argument("--json", default="", metavar="PATH",
                            help="write the figures and per-scenario outcomes as JSON")
        parser.add_argument("--scenarios", default="", metavar="PATH",
                            help="another scenario file (default: the suite)")
        parser.add_argument("--per-kind", type=int, default=0, metavar="N",
                            help="run only the first N scenarios of each kind (a quicker sample for slow models)")
        parser.add_argument("--half", default="", metavar="HALF",
                            help="run one half of the suite, stratified by kind and language: "
                                 f"{' or '.join(curation.HALVES)}")
        parser.add_argument("--language", action="append", default=[], metavar="CODE",
                            help="run only the scenarios in these languages (repeat or comma-separate), e.g. de")
        parser.add_argument("--gate", default="", choices=("", "on", "off"),
                            help="switch the trusted gate on or off for this run (default: the setting in force)")

    def handle(self, *args, **options):
        runs = options["runs"]
        if runs < 1:
            raise CommandError("--runs must be at least 1.")
        only = [kind.strip() for value in options["only"] for kind in value.split(",") if kind.strip()]
        unknown = sorted(set(only) - set(curation.KINDS))
        if unknown:
            raise CommandError(f"Unknown kind(s) {', '.join(unknown)}; known: {', '.join(curation.KINDS)}.")
        half = options["half"]
        if half and half not in curation.HALVES:
            raise CommandError(f"Unknown half {half!r}; use --half {' or --half '.join(curation.HALVES)}.")
        try:
            scenarios = curation.load_scenarios(options["scenarios"] or curation.SCENARIOS_PATH)
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"The scenario file could not be read: {exc}") from exc
        if half:  # on the whole suite, before any filter, so a scenario's half never depends on the filters
            scenarios = curation.split_half(scenarios, half)
        if only:
            scenarios = [scenario for scenario in scenarios if scenario.kind in only]
        languages = _languages(options["language"])
        if languages:
            scenarios = [scenario for scenario in scenarios if scenario.language in languages]
        if options["per_kind"] > 0:
            scenarios = _first_of_each_kind(scenarios, options["per_kind"])
        if not scenarios:
            raise CommandError("No scenario to run.")

        overrides = self._overrides(options)
        with override_settings(**overrides):
            api_key, base_url = settings.OPENAI_API_KEY, settings.OPENAI_BASE_URL
            endpoint = endpoint_kind(api_key=api_key, base_url=base_url)
            model = "demo" if endpoint == "demo" else settings.OPENAI_MODEL
            self.stdout.write(
                f"memory_eval: model {model} ({endpoint}), {len(scenarios)} scenarios × {runs} run(s)"
                f"{f', {half} half' if half else ''}, gate {_gate_state()}, database {connection.vendor}"
            )
            runner = curation.Runner()
            started = time.monotonic()
            quiet = _QuietHttpLogs() if options["verbosity"] < 2 else contextlib.nullcontext()
            try:
                with quiet:
                    results = _run(self._suite(scenarios, runs, runner))
            finally:
                if runner.live_users:  # interrupted mid-scenario: remove what it created
                    _run(asyncio.to_thread(curation.delete_users, sorted(runner.live_users)))
            duration = time.monotonic() - started
            demo_delay = settings.DEMO_MODEL_DELAY_MS if endpoint == "demo" else None
            gate = _gate_state()

        figures = curation.score(results)
        meta = {
            "model": model,
            "endpoint": endpoint,
            "date": timezone.now().strftime("%Y-%m-%d %H:%M UTC"),
            "command": self._command_line(options, only),
            "code": _code_version(),
            "policy": _policy_version(),
            "database": connection.vendor,
            "runs": runs,
            "half": half or None,
            "scenario_count": len(scenarios),
            "duration_s": round(duration, 2),
            "demo_delay_ms": demo_delay,
            "gate": gate,
        }
        self.stdout.write("")
        self.stdout.write(curation.text_table(curation.report_rows(figures)))
        self.stdout.write("")
        self.stdout.write(curation.text_grid(*curation.language_rows(figures)))
        self.stdout.write("")
        self.stdout.write(curation.text_table(curation.kind_rows(figures)))
        self.stdout.write(f"\n{figures.turns} turns in {duration:,.1f} s")
        if options["json"]:
            path = Path(options["json"])
            path.parent.mkdir(parents=True, exist_ok=True)
            report = json.dumps(curation.results_json(meta, figures, results), indent=2)
            path.write_text(report + "\n", encoding="utf-8")
            self.stdout.write(f"JSON written to {path}")
        if options["write"]:
            path = Path(options["write"])
            existing = path.read_text(encoding="utf-8") if path.exists() else ""
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(curation.render_doc(existing, meta, figures), encoding="utf-8")
            self.stdout.write(f"Report written to {path}")

    def _overrides(self, options) -> dict:
        # A new dict (never an edit of the configured one): agentmemory.conf rebuilds per dict.
        overrides: dict[str, Any] = {"AGENTMEMORY": {**getattr(settings, "AGENTMEMORY", {}), "ENABLED": True}}
        if options.get("gate"):
            overrides["AGENTMEMORY"]["GATE"] = options["gate"] == "on"
        api_key = options["api_key"] or os.environ.get("MEMORY_EVAL_API_KEY", "")
        if options["base_url"]:
            overrides["OPENAI_BASE_URL"] = options["base_url"]
            overrides["OPENAI_API_KEY"] = api_key or PLACEHOLDER_KEY
        elif api_key:
            overrides["OPENAI_API_KEY"] = api_key
        if options["model"]:
            overrides["OPENAI_MODEL"] = options["model"]
        if options["base_url"] or options["model"]:
            overrides["OPENAI_FALLBACK_MODEL"] = ""
        return overrides

    async def _suite(self, scenarios, runs, runner):
        from chat.agents import dispose

        try:
            return await curation.run_suite(scenarios, runs=runs, runner=runner, on_result=self._progress)
        finally:
            # The model clients belong to this event loop, which ends with the run.
            await dispose()

    def _progress(self, result: curation.ScenarioResult) -> None:
        self.stdout.write(curation.scenario_line(result))

    @staticmethod
    def _command_line(options, only) -> str:
        parts = ["python manage.py memory_eval"]
        if options["base_url"]:
            parts += ["--base-url", _without_credentials(options["base_url"])]
        if options["model"]:
            parts += ["--model", options["model"]]
        if options["api_key"]:
            parts += ["--api-key", "***"]
        if options["runs"] != 1:
            parts += ["--runs", str(options["runs"])]
        for kind in only:
            parts += ["--only", kind]
        if options["scenarios"]:
            parts += ["--scenarios", options["scenarios"]]
        if options.get("per_kind"):
            parts += ["--per-kind", str(options["per_kind"])]
        if options.get("half"):
            parts += ["--half", options["half"]]
        for language in _languages(options.get("language") or ()):
            parts += ["--language", language]
        if options.get("gate"):
            parts += ["--gate", options["gate"]]
        if options["write"]:
            parts += ["--write", options["write"]]
        return " ".join(parts)
