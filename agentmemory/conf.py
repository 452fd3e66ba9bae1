"""The app's settings: one namespaced AGENTMEMORY dict with defaults.

Read through `memory_settings()` at call time, never at import time, so
tests and `override_settings` see the value in force.
"""
from dataclasses import dataclass
from types import MappingProxyType

from django.conf import settings

from .prompt import POLICY_VERSION

DEFAULTS = {
    # Rollout flag: off means no memory block, no tool, tables untouched.
    "ENABLED": False,
    "USER_LIMIT": 1375,
    "MEMORY_LIMIT": 2200,
    # Adds content to approved attributes of our own spans only.
    "CAPTURE_CONTENT": False,
    # Failed memory_update calls in one turn before the tool says stop.
    "MAX_TOOL_FAILURES": 3,
    # Attempts of one commit transaction when the database reports a deadlock
    # or serialization failure.
    "COMMIT_ATTEMPTS": 3,
    "RETRY_BACKOFF_SECONDS": 0.02,
    # How long a turn's memory read may wait (query, locks) before the turn
    # goes on without memory ("unavailable", writes off).
    "READ_TIMEOUT_SECONDS": 1.0,
    # How long a commit may wait for the person's lock (another writer, an
    # account deletion, a migration) before the write fails; the answer stands.
    "COMMIT_LOCK_TIMEOUT_SECONDS": 3.0,
    # When the connection fails at a commit's COMMIT, how long to keep trying
    # to ask the database whether the change is stored (`store.confirm`)
    # before telling the person it could not be confirmed.
    "COMMIT_CONFIRM_SECONDS": 10.0,
    # The reviewed memory policy the prompt uses (agentmemory/policy/memory_policy_<v>.md).
    "POLICY_VERSION": POLICY_VERSION,
    # "auto" saves a finished turn's change; "ask" makes it a proposal the
    # person saves or discards. Each person may choose their own.
    "DEFAULT_SAVE_MODE": "auto",
    # How long a pending proposal waits before `memory_expire_proposals` deletes it.
    "PROPOSAL_TTL_DAYS": 7,
    # Versions (`MemoryVersion`): how many changes each person can look back on
    # and undo, and for how long; older ones are pruned in the commit and by
    # `memory_prune_versions`.
    "VERSIONS_KEPT": 50,
    "VERSION_RETENTION_DAYS": 30,
    # How long an Idempotency-Key is remembered: a retry with it inside the
    # window gets the first result; `memory_expire_idempotency_keys` deletes older ones.
    "IDEMPOTENCY_WINDOW_HOURS": 24,
    # Dotted path of a callable (user_id, conversation_ids) -> {id: {"title", "url"}}
    # that names the chats entries came from on the memory page ("" = no links).
    "SOURCE_LINKS": "",
    # Dotted path of a callable (user_id) -> {kind: count} that deletes the
    # person's conversations, messages and their search index, for "Erase
    # memory and chats" ("" = the page offers only "Erase memory").
    "ERASE_CHATS": "",
    # Trusted judgement of a staged change's worth (`agentmemory.gate`): a
    # secret seen in the turn's messages is refused; a transient note, a chat
    # summary or an edit nobody asked for becomes a question to the person.
    # Off: every well-formed change the scan lets through is committed.
    "GATE": True,
    # Dotted path of a callable (messages) -> str that runs one model request
    # for "Tidy up" (`agentmemory.tidy`); "" = the memory page offers no Tidy up.
    "TIDY_MODEL": "",
    # Support staff's review of what the assistant saved (`agentmemory.review`):
    # at most this many changes a week are sampled, stratified by model and
    # policy version, drawn reproducibly from this seed.
    "REVIEW_SAMPLE_PER_WEEK": 50,
    "REVIEW_SEED": "agentmemory-review",
}


@dataclass(frozen=True)
class MemorySettings:
    enabled: bool
    limits: MappingProxyType
    capture_content: bool
    max_tool_failures: int
    commit_attempts: int
    retry_backoff_seconds: float
    read_timeout: float
    commit_lock_timeout: float
    commit_confirm_seconds: float
    policy_version: str
    default_save_mode: str
    proposal_ttl_days: float
    idempotency_window_hours: float
    source_links: str
    versions_kept: int
    version_retention_days: float
    erase_chats: str
    gate: bool
    tidy_model: str
    review_sample_per_week: int = 50
    review_seed: str = "agentmemory-review"


_built: tuple = (None, None)  # (the AGENTMEMORY dict it was built from, its MemorySettings)


def memory_settings() -> MemorySettings:
    """Return the settings in force, with defaults for what is not set.

    Built once per AGENTMEMORY dict (it is read on every commit and several
    times a turn) and built afresh when Django's `setting_changed` signal
    names AGENTMEMORY (`override_settings`, pytest-django's `settings`
    fixture: `reset`, connected in `apps.py`) or a new dict is assigned.
    An edit in place of the live dict is not seen until one of those.
    """
    global _built
    source = getattr(settings, "AGENTMEMORY", None)
    built_from, built = _built
    if built is not None and built_from is source:
        return built
    built = _build(source or {})
    _built = (source, built)
    return built


def reset(*, setting: str = "AGENTMEMORY", **kwargs) -> None:
    """Forget the built settings (a `setting_changed` receiver: only AGENTMEMORY resets them)."""
    global _built
    if setting == "AGENTMEMORY":
        _built = (None, None)


def _build(configured) -> MemorySettings:
    values = {**DEFAULTS, **configured}
    return MemorySettings(
        enabled=bool(values["ENABLED"]),
        limits=MappingProxyType({"user": int(values["USER_LIMIT"]), "memory": int(values["MEMORY_LIMIT"])}),
        capture_content=bool(values["CAPTURE_CONTENT"]),
        max_tool_failures=int(values["MAX_TOOL_FAILURES"]),
        commit_attempts=int(values["COMMIT_ATTEMPTS"]),
        retry_backoff_seconds=float(values["RETRY_BACKOFF_SECONDS"]),
        read_timeout=float(values["READ_TIMEOUT_SECONDS"]),
        commit_lock_timeout=float(values["COMMIT_LOCK_TIMEOUT_SECONDS"]),
        commit_confirm_seconds=float(values["COMMIT_CONFIRM_SECONDS"]),
        policy_version=str(values["POLICY_VERSION"]),
        default_save_mode=str(values["DEFAULT_SAVE_MODE"]),
        proposal_ttl_days=float(values["PROPOSAL_TTL_DAYS"]),
        idempotency_window_hours=float(values["IDEMPOTENCY_WINDOW_HOURS"]),
        source_links=str(values["SOURCE_LINKS"] or ""),
        versions_kept=int(values["VERSIONS_KEPT"]),
        version_retention_days=float(values["VERSION_RETENTION_DAYS"]),
        erase_chats=str(values["ERASE_CHATS"] or ""),
        gate=bool(values["GATE"]),
        tidy_model=str(values["TIDY_MODEL"] or ""),
        review_sample_per_week=int(values["REVIEW_SAMPLE_PER_WEEK"]),
        review_seed=str(values["REVIEW_SEED"]),
    )
