"""The two-row memory table and a metadata-only event table.

A person owns at most one row per document type. A row never holds empty
content: the store deletes a row when its last entry goes, and a missing row
is empty memory. Only `agentmemory.store` reads or writes MemoryDocument.
Idempotency records (`IdempotencyKey`) belong to `agentmemory.idempotency`.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

SCHEMA_VERSION = 1


class MemoryType(models.TextChoices):
    USER = "user", _("User profile")
    MEMORY = "memory", _("Agent memory")


class MemoryDocument(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_documents", verbose_name=_("user")
    )
    memory_type = models.CharField(_("memory type"), max_length=16, choices=MemoryType.choices)
    content = models.TextField(_("content"))
    # One source per entry, in order (`agentmemory.provenance`): who last set
    # it and when, ids only, never content. NULL for rows written before it.
    provenance = models.JSONField(null=True, blank=True)
    schema_version = models.PositiveSmallIntegerField(_("schema version"), default=SCHEMA_VERSION)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        db_table = "agentmemory_document"
        verbose_name = _("memory document")
        verbose_name_plural = _("memory documents")
        constraints = [
            models.UniqueConstraint(fields=["user", "memory_type"], name="agentmemory_one_row_per_type"),
            models.CheckConstraint(
                condition=Q(memory_type__in=["user", "memory"]), name="agentmemory_memory_type_valid"
            ),
            models.CheckConstraint(condition=~Q(content=""), name="agentmemory_content_not_empty"),
        ]
        permissions = [
            ("view_memory_content", _("Can view the content of people's memory")),
            ("erase_memory", _("Can erase a person's memory on their request")),
        ]

    def __str__(self):
        # The admin's titles and breadcrumbs: the person by username.
        return gettext("%(document)s of %(username)s") % {
            "document": self.get_memory_type_display(), "username": self.user.get_username()}

    @property
    def log_label(self) -> str:
        """The admin log's label: by id, so no username outlives a deleted account there."""
        return f"{self.get_memory_type_display()} of user {self.user_id}"


class Actor(models.TextChoices):
    AGENT = "agent", _("Agent")
    USER = "user", _("User")
    STAFF = "staff", _("Staff")
    SYSTEM = "system", _("System")
    # An entry reached the end of the date the person (or the assistant) gave it.
    EXPIRY = "expiry", _("Expiry")


class Outcome(models.TextChoices):
    COMMITTED = "committed", _("Committed")
    UNCHANGED = "unchanged", _("Nothing changed")
    REJECTED = "rejected", _("Rejected")
    CANCELLED = "cancelled", _("Cancelled")
    FAILED = "failed", _("Failed")
    DISCARDED = "discarded", _("Discarded")
    ERASED = "erased", _("Erased")
    # The person's "Use memory in chats" switch (MemoryPreference.use_memory).
    MEMORY_ON = "memory_on", _("Memory turned on")
    MEMORY_OFF = "memory_off", _("Memory turned off")
    # Ask before saving: a turn's change became a proposal; the save mode changed.
    PROPOSED = "proposed", _("Proposed")
    ASK_FIRST = "ask_first", _("Ask before saving")
    AUTO_SAVE = "auto_save", _("Save automatically")
    # Staff holding the content permission saw the person's content in the admin.
    VIEWED = "viewed", _("Viewed by staff")


class Viewed(models.TextChoices):
    """What a staff member's read showed (`MemoryEvent.viewed`, outcome "viewed"): a kind, never the text."""

    MEMORY = "memory", _("Memory document")
    PROPOSAL = "proposal", _("Memory proposal")
    CONVERSATION = "conversation", _("Conversation")
    SEARCH = "search", _("Search of conversations")
    VERSION = "version", _("Memory version")
    # A change the assistant saved, sampled for support staff's review (`agentmemory.review`).
    REVIEW = "review", _("Change sampled for review")


class SourceIntent(models.TextChoices):
    """What the person's latest message in the turn did (`gate.intent`), for an assistant's batch.

    The source message's role in the turn, never its words: support staff's
    review (`agentmemory.review`) shows it beside the change instead of the
    conversation. "" for batches of other actors.
    """

    EXPLICIT = "explicit", _("Asked the assistant to remember something")
    FORGET = "forget", _("Asked the assistant to forget something")
    CORRECT = "correct", _("Corrected something")
    STATEMENT = "statement", _("Said something, without asking to remember it")
    QUESTION = "question", _("Asked a question")
    REQUEST = "request", _("Asked for help with a task")
    UNKNOWN = "unknown", _("Not known (no message was given)")


class SaveMode(models.TextChoices):
    AUTO = "auto", _("Save changes automatically")
    ASK = "ask", _("Ask me before saving")


class MemoryPreference(models.Model):
    """A person's own memory settings; no row means the defaults.

    `use_memory` off: the person's chat turns neither read nor write memory
    and the tool is not offered; what is stored is kept, visible, editable
    and erasable. The deployment flag (AGENTMEMORY["ENABLED"]) still wins.
    Written only under the person's lock (`agentmemory.preferences`), which
    the agent's commit also takes, so a switch and a commit never cross.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="memory_preference"
    )
    use_memory = models.BooleanField(default=True)
    # "auto": a finished turn saves its change; "ask": it becomes a proposal
    # the person saves or discards. "" follows AGENTMEMORY["DEFAULT_SAVE_MODE"].
    save_mode = models.CharField(max_length=8, choices=SaveMode.choices, blank=True, default="")
    # How many times the person erased their memory. A turn reads it with its
    # memory and its commit checks it under the lock: a change staged before
    # an erase is never saved after it.
    erasures = models.PositiveIntegerField(default=0)
    # The person's time zone (an IANA name their browser reported), in which
    # an entry's expiry date and phrases such as "until Sunday" are read.
    # "" follows settings.TIME_ZONE (`agentmemory.expiry.time_zone_of`).
    time_zone = models.CharField(max_length=64, blank=True, default="", db_default="")
    # Whether support staff may sample what the assistant saved for this person
    # for review (`agentmemory.review`); on by default (docs/privacy.md says why).
    allow_review = models.BooleanField(default=True, db_default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agentmemory_preference"
        verbose_name = _("memory preference")
        verbose_name_plural = _("memory preferences")

    def __str__(self):
        return gettext("Memory preference of %(username)s") % {"username": self.user.get_username()}


class MemoryEvent(models.Model):
    """What happened to a person's memory, never what it said.

    Also each time staff read the person's content in the admin (outcome
    "viewed"): who, and what kind of thing (`viewed`), never what it said.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_events", verbose_name=_("user")
    )
    actor = models.CharField(_("actor"), max_length=16, choices=Actor.choices)
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    operation_count = models.PositiveSmallIntegerField(_("operation count"), default=0)
    targets = models.JSONField(default=dict, blank=True)
    actions = models.JSONField(default=dict, blank=True)
    user_characters = models.PositiveIntegerField(_("user characters"), null=True, blank=True)
    memory_characters = models.PositiveIntegerField(_("memory characters"), null=True, blank=True)
    retry_count = models.PositiveSmallIntegerField(_("retry count"), default=0)
    duration_ms = models.PositiveIntegerField(_("duration ms"), default=0)
    error_code = models.CharField(_("error code"), max_length=40, blank=True)
    # The staff member who acted, for actor "staff" (the admin's erase). The
    # username is kept as written at the time, so the record survives the
    # staff account's deletion (the link then becomes NULL).
    staff = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
    )
    staff_username = models.CharField(max_length=150, blank=True, default="", db_default="")
    # For outcome "viewed": what kind of thing the staff member read (`Viewed`);
    # `targets` then names the document. Empty for every other event.
    viewed = models.CharField(max_length=16, choices=Viewed.choices, blank=True, default="", db_default="")
    # For the assistant's batches: the model that staged it and the memory policy
    # version in force ("" when unknown), for the write-quality figures (`agentmemory.review`).
    model = models.CharField(_("model"), max_length=100, blank=True, default="", db_default="")
    policy_version = models.CharField(_("policy version"), max_length=16, blank=True, default="", db_default="")
    # For the assistant's batches: what the person's message in the turn did (`SourceIntent`), never its words.
    source_intent = models.CharField(_("source message"), max_length=16, choices=SourceIntent.choices, blank=True,
                                     default="", db_default="")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True, db_index=True)

    class Meta:
        db_table = "agentmemory_event"
        verbose_name = _("memory event")
        verbose_name_plural = _("memory events")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="agentmemory_event_user_time")]

    def __str__(self):
        return gettext("%(outcome)s by %(actor)s for %(username)s") % {
            "outcome": self.get_outcome_display(), "actor": str(self.get_actor_display()).lower(),
            "username": self.user.get_username()}


class MemoryProposal(models.Model):
    """A change the assistant proposed in "ask" mode, waiting for the person.

    Memory content: covered by erase, export, the staff content permission
    and retention (`memory_expire_proposals`); never logged. `operations`
    are the turn's ordered, pinned operations (each replace/remove names the
    exact entry it matched), saved all-or-nothing through the same locked
    commit as the agent's, with the same stale-match rule. `conversation_id`
    and `turn_id` name where it came from, as the chat app gave them (no
    foreign key: agentmemory knows no chat); the chat clears the link when
    the conversation is deleted.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_proposals", verbose_name=_("user")
    )
    operations = models.JSONField()
    # Metadata: how many operations, for lists that must not load the text.
    operation_count = models.PositiveSmallIntegerField(_("operation count"), default=0)
    conversation_id = models.PositiveBigIntegerField(_("conversation id"), null=True, blank=True)
    turn_id = models.CharField(_("turn id"), max_length=64, blank=True, default="")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires at"), db_index=True)

    class Meta:
        db_table = "agentmemory_proposal"
        verbose_name = _("memory proposal")
        verbose_name_plural = _("memory proposals")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at"], name="agentmemory_proposal_user")]

    def __str__(self):
        return gettext("Memory proposal %(id)s of %(username)s") % {"id": self.pk, "username": self.user.get_username()}


class ChangeKind(models.TextChoices):
    """What kind of change a version records (`MemoryVersion.kind`)."""

    CHANGE = "change", _("Change")
    UNDO = "undo", _("Undo")
    RESTORE = "restore", _("Restore")


class MemoryVersion(models.Model):
    """One document as one committed change found it and left it.

    Memory content, the same privacy class as the documents: covered by
    erase, export, account deletion and the staff content permission; never
    logged, traced or put in an event. Written by `agentmemory.store` in the
    transaction of the change it records, one row per changed document, and
    bounded per person (AGENTMEMORY VERSIONS_KEPT and VERSION_RETENTION_DAYS,
    pruned in the commit and by `memory_prune_versions`).

    `before` is the document's previous content ("" when it was empty) with
    its per-entry provenance; `after` what the change left ("" when it
    emptied the document). `event` is the change's audit event: a History row
    and its versions are one change. `by`, `conversation_id` and `turn_id`
    say where the change came from (ids only, as `agentmemory.provenance`
    does); the chat clears `conversation_id` when that conversation goes.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_versions", verbose_name=_("user")
    )
    event = models.ForeignKey(MemoryEvent, on_delete=models.CASCADE, related_name="versions", verbose_name=_("event"))
    memory_type = models.CharField(_("memory type"), max_length=16, choices=MemoryType.choices)
    before = models.TextField(blank=True)
    before_provenance = models.JSONField(null=True, blank=True)
    after = models.TextField(blank=True)
    # The per-entry provenance the change left (for each entry's expiry: an
    # expiry-only change leaves the text as it was). NULL for older versions.
    after_provenance = models.JSONField(null=True, blank=True)
    kind = models.CharField(_("kind"), max_length=16, choices=ChangeKind.choices, default=ChangeKind.CHANGE)
    by = models.CharField(_("by"), max_length=16)
    conversation_id = models.PositiveBigIntegerField(_("conversation id"), null=True, blank=True)
    turn_id = models.CharField(_("turn id"), max_length=64, blank=True, default="")
    schema_version = models.PositiveSmallIntegerField(_("schema version"), default=SCHEMA_VERSION)
    created_at = models.DateTimeField(_("created at"))

    class Meta:
        db_table = "agentmemory_version"
        verbose_name = _("memory version")
        verbose_name_plural = _("memory versions")
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["user", "-id"], name="agentmemory_version_user"),
            models.Index(fields=["created_at"], name="agentmemory_version_time"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(memory_type__in=["user", "memory"]), name="agentmemory_version_type_valid"
            ),
        ]

    def __str__(self):
        return gettext("Version %(id)s of the %(document)s of %(username)s") % {
            "id": self.pk, "document": str(self.get_memory_type_display()).lower(),
            "username": self.user.get_username()}

    @property
    def log_label(self) -> str:
        """The admin log's label: by id, so no username outlives a deleted account there."""
        return f"Version {self.pk} of user {self.user_id}"


class IdempotencyKey(models.Model):
    """One Idempotency-Key a person sent, and what its request did; never what it said.

    Owned by `agentmemory.idempotency` (read its docstring for the rules).
    Content-free apart from what the person could already read: the key is
    kept as its SHA-256 (`key_digest`), the request as a fingerprint (a
    SHA-256 of method, path and canonical body, never the body), the result
    as a status and a body without memory content or reply text. A chat
    turn's reply is kept by reference (`response["message_id"]`, in
    `conversation_id`): the reply already lives in the person's own
    conversation, where deleting the conversation deletes it, so a copy here
    would outlive that deletion (and every "forget") for the whole window.
    `outcome` is the memory outcome of the one commit made under the key
    (status, counts, usage figures), written in that commit's transaction.
    Deleted with the person, when they erase their memory, with the
    conversation it refers to, and once `expires_at` passes
    (`memory_expire_idempotency_keys`).
    """

    class State(models.TextChoices):
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="idempotency_keys"
    )
    key_digest = models.CharField(max_length=64)
    # "" for a record a memory turn's commit made without a request claiming the key.
    fingerprint = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=8, choices=State.choices)
    # The attempt holding a running record: only it may finish or release it.
    token = models.CharField(max_length=32, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response = models.JSONField(null=True, blank=True)
    outcome = models.JSONField(null=True, blank=True)
    # The chat conversation a turn's result refers to (no foreign key: agentmemory knows no chat).
    conversation_id = models.PositiveBigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # A running record's lease: past it, a retry takes the key over.
    locked_until = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "agentmemory_idempotency_key"
        verbose_name = _("idempotency key")
        verbose_name_plural = _("idempotency keys")
        constraints = [
            models.UniqueConstraint(fields=["user", "key_digest"], name="agentmemory_one_record_per_key"),
            models.CheckConstraint(
                condition=Q(state__in=["running", "done"]), name="agentmemory_idempotency_state_valid"
            ),
        ]

    def __str__(self):
        return f"Idempotency key {self.pk} of user {self.user_id}"


class Verdict(models.TextChoices):
    """Support staff's one verdict on a change the assistant saved (`WriteReview.verdict`)."""

    KEEP = "keep", _("Worth keeping")
    NOT_WORTH = "not_worth", _("Should not have been saved")
    SENSITIVE = "sensitive", _("Secret or sensitive")
    WRONG_DOCUMENT = "wrong_document", _("Wrong document")
    WRONG_CONTENT = "wrong_content", _("Wrong content")


class WriteReview(models.Model):
    """Support staff's verdict on one change the assistant saved: metadata only, never content.

    Owned by `agentmemory.review`. `event` is the reviewed change (its audit
    event; one verdict per change); `week`, `model` and `policy_version` are
    copied from it so the figures do not move when versions are pruned.
    A "secret or sensitive" verdict leaves `notice_open` set until the person
    removes the entry or keeps it from their memory page. Deleted with the
    person, when they erase their memory, and exported with their data.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memory_reviews", verbose_name=_("user")
    )
    event = models.OneToOneField(MemoryEvent, on_delete=models.CASCADE, related_name="review",
                                 verbose_name=_("change"))
    verdict = models.CharField(_("verdict"), max_length=16, choices=Verdict.choices)
    week = models.DateField(_("week"))
    model = models.CharField(_("model"), max_length=100, blank=True, default="")
    policy_version = models.CharField(_("policy version"), max_length=16, blank=True, default="")
    staff = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
    )
    staff_username = models.CharField(max_length=150, blank=True, default="")
    notice_open = models.BooleanField(default=False)
    created_at = models.DateTimeField(_("reviewed at"), auto_now_add=True)

    class Meta:
        db_table = "agentmemory_write_review"
        verbose_name = _("write review")
        verbose_name_plural = _("write reviews")
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["week", "model", "policy_version"], name="agentmemory_review_stratum"),
                   models.Index(fields=["user", "notice_open"], name="agentmemory_review_notice")]
        constraints = [
            models.CheckConstraint(
                condition=Q(verdict__in=["keep", "not_worth", "sensitive", "wrong_document", "wrong_content"]),
                name="agentmemory_review_verdict_valid"),
        ]
        permissions = [
            ("review_memory_writes", _("Can review samples of what the assistant saved")),
        ]

    def __str__(self):
        return gettext("Review %(id)s") % {"id": self.pk}


class ReviewShowing(models.Model):
    """One change of a week's review sample, shown to one reviewer: what a verdict on it needs.

    Owned by `agentmemory.review`: the queue records a showing before its page
    is sent, for the change it drew from the week's sample, and
    `record_verdict` accepts a reviewer's verdict only on a change shown to
    them. Ids and a moment, no content; deleted with the change's event or the
    reviewer's account.
    """

    event = models.ForeignKey(MemoryEvent, on_delete=models.CASCADE, related_name="review_showings",
                              verbose_name=_("change"))
    staff = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+",
                              verbose_name=_("reviewer"))
    week = models.DateField(_("week"))
    shown_at = models.DateTimeField(_("shown at"), auto_now_add=True)

    class Meta:
        db_table = "agentmemory_review_showing"
        verbose_name = _("review showing")
        verbose_name_plural = _("review showings")
        constraints = [models.UniqueConstraint(fields=["event", "staff"], name="agentmemory_showing_once")]

    def __str__(self):
        return gettext("Showing %(id)s") % {"id": self.pk}
