"""The memory API: the caller's own memory, and nobody else's.

No route, query parameter or body field names a person; the owner is always
`request.user` (session with CSRF, or token). Writes take the operations
body of the model's `memory_update` tool, parsed by the same strict
`rules.parse_operations`, and commit through `services` with the person as
the actor. Like the page, the API works whatever the rollout flag says (see
`views`). Error bodies are `{"code", "position", "detail"}` and never carry
memory content. A write for an account deleted while the request ran
answers 410 `account_closed` (`MemoryAPIView.handle_exception`).

`POST /api/memory/operations/` takes an `Idempotency-Key` header
(`agentmemory.idempotency`): a batch sent again with the same key commits
nothing and answers the first outcome (`Idempotent-Replayed: true`), with the
memory as it is now (the record keeps no memory content, so nothing a person
removed or erased lives on in it); 409 while the first runs, 422 with another
body. A batch the rules refused is kept too (the same 400 again); a failure
that committed nothing and may pass on a retry (the database) frees the key.

The package: `base` (the view base class, its error shape, the write
throttle), `memory` (the documents, operations, export, erase, settings),
`proposals`, `changes`, `tidy` (Tidy up: one model request, one proposal) and
`passport` (import as one proposal; the Markdown pair export).
`agentmemory/urls.py` routes to the names here.
"""
from .base import MemoryAPIView, MemoryWriteThrottle, error_response
from .changes import ChangeAPIView, ChangeDetailView, ChangeListView, ChangeRestoreView, ChangeUndoView
from .memory import MemoryExportView, MemoryOperationsView, MemorySettingsView, MemoryView
from .passport import MemoryImportView, MemoryMarkdownExportView
from .proposals import ProposalDetailView, ProposalListView, ProposalSaveView
from .tidy import TidyThrottle, TidyView

__all__ = [
    "ChangeAPIView", "ChangeDetailView", "ChangeListView", "ChangeRestoreView", "ChangeUndoView",
    "MemoryAPIView", "MemoryExportView", "MemoryImportView", "MemoryMarkdownExportView",
    "MemoryOperationsView", "MemorySettingsView", "MemoryView",
    "MemoryWriteThrottle", "ProposalDetailView", "ProposalListView", "ProposalSaveView", "TidyThrottle", "TidyView",
    "error_response",
]
