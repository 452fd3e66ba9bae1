"""The memory API's shapes, for responses and the OpenAPI schema.

Requests are not validated here: the operations body is parsed by
`rules.parse_operations`, the same strict parser the model's tool calls go
through, so the API cannot accept a field (such as `user_id`) that the tool
would refuse. `OperationBatchSerializer` only describes that contract.
"""
from rest_framework import serializers

from .rules import ACTIONS, MAX_OPERATIONS, MIN_OPERATIONS, TARGETS


class OperationSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=TARGETS, help_text="'user' (the profile) or 'memory' (notes).")
    action = serializers.ChoiceField(choices=ACTIONS)
    match = serializers.CharField(
        required=False, allow_null=True,
        help_text="replace/remove: a substring that only the intended entry contains.",
    )
    content = serializers.CharField(
        required=False, allow_null=True, help_text="add/replace: the complete new entry.",
    )
    expires = serializers.CharField(
        required=False, allow_null=True,
        help_text="add/replace: the entry's last day (YYYY-MM-DD), a phrase such as 'for a week' or 'until "
                  "Friday' read in your time zone, or 'never' to clear it. Absent: unchanged.",
    )


class OperationBatchSerializer(serializers.Serializer):
    operations = OperationSerializer(  # type: ignore[call-arg]  # many=True hands them to ListSerializer
        many=True, min_length=MIN_OPERATIONS, max_length=MAX_OPERATIONS
    )


class UsageSerializer(serializers.Serializer):
    used = serializers.IntegerField(help_text="Characters of the rendered document, delimiters included.")
    limit = serializers.IntegerField()
    percent = serializers.IntegerField()
    entries = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field named label
    level = serializers.ChoiceField(
        choices=["ok", "warn", "full"], help_text="ok below 75 %, warn below 90 %, full from 90 % (meter colours).",
    )


class DocumentSerializer(serializers.Serializer):
    title = serializers.CharField()
    entries = serializers.ListField(child=serializers.CharField())
    expires = serializers.ListField(
        child=serializers.CharField(allow_null=True),
        help_text="Each entry's last day (YYYY-MM-DD), in the order of entries; null: it never expires.",
    )
    usage = UsageSerializer()
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)


class DocumentsSerializer(serializers.Serializer):
    user = DocumentSerializer()
    memory = DocumentSerializer()


class MemoryStateSerializer(serializers.Serializer):
    schema_version = serializers.IntegerField()
    agent_memory_enabled = serializers.BooleanField(
        help_text="Whether the assistant reads and writes memory now. The API works either way.",
    )
    documents = DocumentsSerializer()


class CommitResponseSerializer(MemoryStateSerializer):
    outcome = serializers.ChoiceField(choices=["committed", "unchanged"])
    changed = serializers.ListField(
        child=serializers.CharField(), help_text="The documents this batch changed: 'user', 'memory', or none.",
    )


class MemoryErrorSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="A stable name of the rule that was broken.")
    position = serializers.IntegerField(
        allow_null=True, help_text="1-based index of the offending operation; null for the whole batch.",
    )
    detail = serializers.CharField(help_text="What went wrong and what to do next. Never holds memory content.")


class OriginSerializer(serializers.Serializer):
    by = serializers.ChoiceField(choices=["agent", "user", "staff", "system", "expiry"])
    at = serializers.CharField(help_text="When the entry was last set (ISO 8601).")
    conversation_id = serializers.IntegerField(required=False, help_text="The chat it came from, if any.")
    turn_id = serializers.CharField(required=False)
    restored = serializers.BooleanField(required=False, help_text="true: put back by an undo or a restore.")
    imported = serializers.CharField(required=False, help_text="Brought in by the person's import: the format it "
                                     "came from (chatgpt, mem0, letta, ours_json, ...).")


class SourceSerializer(OriginSerializer):
    tidied = serializers.BooleanField(required=False, help_text="true: written by Tidy up, from the entries whose "
                                      "sources are in merged.")
    merged = serializers.ListField(child=OriginSerializer(), required=False,
                                   help_text="Tidy up: where each entry this one came from came from.")
    expires = serializers.CharField(required=False, help_text="The entry's last day (YYYY-MM-DD), if it expires.")


class ExportDocumentSerializer(serializers.Serializer):
    title = serializers.CharField()
    entries = serializers.ListField(child=serializers.CharField())
    characters = serializers.IntegerField()
    created_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    sources = serializers.ListField(
        child=SourceSerializer(allow_null=True),
        help_text="Where each entry came from, in the order of entries (null: from before sources were kept).",
    )


class ExportDocumentsSerializer(serializers.Serializer):
    user = ExportDocumentSerializer()
    memory = ExportDocumentSerializer()


class LimitsSerializer(serializers.Serializer):
    user = serializers.IntegerField()
    memory = serializers.IntegerField()


class MemorySettingsSerializer(serializers.Serializer):
    """The person's own memory settings (`PUT` takes `use_memory` and/or `save_mode`; unknown fields are refused)."""

    use_memory = serializers.BooleanField(required=False,
        help_text="Use memory in chats. Off: chats neither read nor change memory and the assistant is not "
                  "offered its memory tool; what is stored is kept and stays editable here.",
    )
    save_mode = serializers.ChoiceField(
        choices=["auto", "ask"], required=False,
        help_text="auto: a finished reply saves its memory change. ask: it is proposed to you, and saved "
                  "only when you save the proposal (/api/memory/proposals/).",
    )
    agent_memory_enabled = serializers.BooleanField(
        read_only=True,
        help_text="Whether memory is rolled out on this deployment; when false no chat uses memory, "
                  "whatever use_memory says.",
    )


class ProposedOperationSerializer(serializers.Serializer):
    expires = serializers.CharField(allow_null=True, required=False,
                                    help_text="The expiry the operation sets (YYYY-MM-DD or 'never'); null: none.")
    position = serializers.IntegerField(help_text="1-based; an add's text can be edited at this position.")
    target = serializers.ChoiceField(choices=TARGETS)
    action = serializers.ChoiceField(choices=ACTIONS)
    content = serializers.CharField(allow_null=True, help_text="add/replace: the new entry.")
    entry = serializers.CharField(allow_null=True, help_text="replace/remove: the entry it changes, as it was.")
    reason = serializers.CharField(
        allow_blank=True,
        help_text="Why trusted code asked instead of saving (transient, chat_summary, pasted_copy, assistant_note, "
                  "unasked_edit, depends_on_question, tidy); empty when the person asks before every save.",
    )
    why = serializers.CharField(allow_blank=True, help_text="The reason as a plain sentence for the person.")
    said = serializers.CharField(
        allow_null=True, required=False,
        help_text="negated_term: the person's own sentence whose 'no' the entry drops (at most 200 characters); "
                  "null: none, or it would show a secret.",
    )
    you_said = serializers.CharField(allow_null=True, required=False,
                                     help_text="`said` as a plain sentence for the person (\"You said: …\").")


class ProposalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    operations = ProposedOperationSerializer(many=True)
    conversation_id = serializers.IntegerField(allow_null=True, help_text="The chat it came from (null once deleted).")
    turn_id = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class ProposalListSerializer(serializers.Serializer):
    proposals = ProposalSerializer(many=True)


class ProposalEditSerializer(serializers.Serializer):
    position = serializers.IntegerField(min_value=1)
    content = serializers.CharField()


class ProposalSaveSerializer(serializers.Serializer):
    edits = ProposalEditSerializer(many=True, required=False, help_text="New text for added facts, by position.")


class ChangedEntrySerializer(serializers.Serializer):
    before = serializers.CharField(help_text="The entry as it was.")
    after = serializers.CharField(help_text="The entry as the change left it.")


class ExpiryChangeSerializer(serializers.Serializer):
    entry = serializers.CharField(help_text="An entry whose expiry the change set, changed or cleared.")
    before = serializers.CharField(allow_null=True, help_text="Its last day before (YYYY-MM-DD); null: none.")
    after = serializers.CharField(allow_null=True, help_text="Its last day after (YYYY-MM-DD); null: none.")


class DocumentChangeSerializer(serializers.Serializer):
    before = serializers.ListField(child=serializers.CharField(), help_text="The document's entries before.")
    after = serializers.ListField(child=serializers.CharField(), help_text="The document's entries after.")
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = ChangedEntrySerializer(many=True)
    expiry_changed = ExpiryChangeSerializer(many=True, required=False)


class ChangeDocumentsSerializer(serializers.Serializer):
    user = DocumentChangeSerializer(required=False, help_text="Present when the change touched the profile.")
    memory = DocumentChangeSerializer(required=False, help_text="Present when the change touched the notes.")


class ChangeSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The change's id (its History event): what undo and restore name.")
    created_at = serializers.DateTimeField()
    by = serializers.ChoiceField(choices=["agent", "user", "staff", "system", "expiry"],
                                 help_text="Whose change it was (agent: the assistant in a chat; expiry: an entry "
                                           "removed on the date it was set to expire).")
    kind = serializers.ChoiceField(choices=["change", "undo", "restore"])
    conversation_id = serializers.IntegerField(allow_null=True, help_text="The chat it came from (null once deleted).")
    turn_id = serializers.CharField(allow_blank=True)
    documents = ChangeDocumentsSerializer()


class ChangeListSerializer(serializers.Serializer):
    changes = ChangeSerializer(many=True, help_text="Newest first; as many as AGENTMEMORY_VERSIONS_KEPT.")


class UndoResponseSerializer(CommitResponseSerializer):
    change_id = serializers.IntegerField(allow_null=True, help_text="The undo's or restore's own change (it can "
                                         "be undone too); null when nothing changed.")


class EraseReceiptSerializer(serializers.Serializer):
    erased_at = serializers.DateTimeField()
    removed = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Counts by kind: profile_entries, notes_entries, versions, proposals; with include=chats also "
                  "conversations, messages and search_index_rows.",
    )
    summary = serializers.CharField(help_text="The receipt as one plain sentence.")


class ReviewSerializer(serializers.Serializer):
    change_id = serializers.IntegerField(help_text="The change support staff judged (a change's id, as History's).")
    verdict = serializers.ChoiceField(choices=["keep", "not_worth", "sensitive", "wrong_document", "wrong_content"])
    reviewed_at = serializers.DateTimeField()
    notice_open = serializers.BooleanField(help_text="A sensitive verdict the memory page still asks about.")


class ExportSerializer(serializers.Serializer):
    format = serializers.CharField()
    schema_version = serializers.IntegerField()
    exported_at = serializers.DateTimeField()
    limits = LimitsSerializer()
    documents = ExportDocumentsSerializer()
    proposals = ProposalSerializer(many=True, help_text="Pending proposals (ask before saving).")
    changes = ChangeSerializer(many=True, help_text="The kept versions: each change with each document before "
                               "and after it, newest first.")
    reviews = ReviewSerializer(many=True, help_text="Support staff's verdicts on changes the assistant saved "
                               "(sampled for review); no content.")
