"""Keeping each changed document's version inside the commit's transaction, and pruning old ones.

Only the write side: `agentmemory.versions` reads what is kept here (a
change's entry-by-entry diff, undo and restore).
"""
from __future__ import annotations

from datetime import datetime, timedelta

from .. import provenance
from ..models import SCHEMA_VERSION
from ..rules import Snapshot, render_document
from .reads import StoredMemory
from .statements import Statements, json_param


def keep_versions(cursor, sql: Statements, db, owner, change_id: int, stored: StoredMemory, targets, updated: Snapshot,
                   now, source: provenance.Source, *, kind: str, config, moment: datetime, sources=None) -> None:
    """Record each changed document's version for this change, then prune the person's oldest ones.

    `sources` are the per-entry sources the change left (with each entry's expiry); `moment` is the
    change's time, from which the retention counts back.
    """
    for target in targets:
        before = stored.snapshot.entries(target)
        before_sources = json_param(db, provenance.to_json(stored.sources.get(target) or ()) if before else None)
        after = updated.entries(target)
        after_sources = json_param(
            db, provenance.to_json((sources or {}).get(target) or ()) if after and sources else None)
        cursor.execute(sql.insert_version, [
            owner, change_id, target, render_document(before), before_sources,
            render_document(after), after_sources, str(kind), source.by, source.conversation_id,
            source.turn_id, SCHEMA_VERSION, now,
        ])
    cutoff = moment - timedelta(days=config.version_retention_days)
    cutoff = cutoff if sql.now_as_is else sql.now_field.get_db_prep_value(cutoff, db)  # type: ignore[attr-defined]
    cursor.execute(sql.prune_versions, [owner, cutoff, owner, max(1, config.versions_kept)])
