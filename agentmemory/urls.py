"""Routes of the memory page and the memory API; none takes a person's id."""
from django.urls import path
from django.views.i18n import JavaScriptCatalog

from . import api, views

app_name = "agentmemory"
urlpatterns = [
    path("memory/", views.memory_page, name="page"),
    # The memory page script's words (memory.js: gettext, interpolate), in the request's language.
    path("jsi18n/", JavaScriptCatalog.as_view(packages=["agentmemory"]), name="jsi18n"),
    path("memory/add/", views.add_entry, name="add"),
    path("memory/correct/", views.correct_entry, name="correct"),
    path("memory/remove/", views.remove_entry, name="remove"),
    path("memory/expiry/", views.set_expiry, name="expiry"),
    path("memory/erase/", views.erase, name="erase"),
    path("memory/settings/", views.memory_switch, name="settings"),
    path("memory/export/", views.export, name="export"),
    path("memory/save-mode/", views.save_mode, name="save-mode"),
    path("memory/proposals/<int:pk>/save/", views.save_proposal, name="proposal-save"),
    path("memory/proposals/<int:pk>/discard/", views.discard_proposal, name="proposal-discard"),
    path("memory/changes/<int:pk>/undo/", views.undo_change, name="change-undo"),
    path("memory/changes/<int:pk>/restore/", views.restore_change, name="change-restore"),
    path("memory/tidy/", views.tidy_up, name="tidy"),
    path("memory/import/", views.import_memory, name="import"),
    path("memory/import/<int:pk>/", views.import_review, name="import-review"),
    path("memory/import/<int:pk>/save/", views.import_save, name="import-save"),
    path("memory/export/markdown/", views.export_markdown, name="export-markdown"),
    path("memory/review-setting/", views.review_setting, name="review-setting"),
    path("memory/review-notices/<int:pk>/", views.review_notice, name="review-notice"),
    path("api/memory/", api.MemoryView.as_view(), name="api"),
    path("api/memory/operations/", api.MemoryOperationsView.as_view(), name="api-operations"),
    path("api/memory/export/", api.MemoryExportView.as_view(), name="api-export"),
    path("api/memory/export/markdown/", api.MemoryMarkdownExportView.as_view(), name="api-export-markdown"),
    path("api/memory/import/", api.MemoryImportView.as_view(), name="api-import"),
    path("api/memory/settings/", api.MemorySettingsView.as_view(), name="api-settings"),
    path("api/memory/proposals/", api.ProposalListView.as_view(), name="api-proposals"),
    path("api/memory/proposals/<str:pk>/", api.ProposalDetailView.as_view(), name="api-proposal"),
    path("api/memory/proposals/<str:pk>/save/", api.ProposalSaveView.as_view(), name="api-proposal-save"),
    path("api/memory/changes/", api.ChangeListView.as_view(), name="api-changes"),
    path("api/memory/changes/<str:pk>/", api.ChangeDetailView.as_view(), name="api-change"),
    path("api/memory/changes/<str:pk>/undo/", api.ChangeUndoView.as_view(), name="api-change-undo"),
    path("api/memory/changes/<str:pk>/restore/", api.ChangeRestoreView.as_view(), name="api-change-restore"),
    path("api/memory/tidy/", api.TidyView.as_view(), name="api-tidy"),
]
