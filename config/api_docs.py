"""Who may read the API's schema (`/api/schema/`) and its docs page (`/api/docs/`).

Staff only, unless API_DOCS_PUBLIC is on: it defaults to DEBUG, so `make run`
shows them to everyone and a production server (DEBUG off) to its staff. The
schema lists every route, field and code of the API; people use the chat and
memory pages, and an API client's developer can ask the server's staff.
SPECTACULAR_SETTINGS' SERVE_PERMISSIONS names this class for both views; it
reads the setting on each request.
"""
from django.conf import settings
from django.utils.translation import gettext_lazy as _
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission


class ApiDocsReaders(BasePermission):
    message = _("The API documentation on this server is for staff only.")

    def has_permission(self, request, view) -> bool:
        if settings.API_DOCS_PUBLIC or (request.user and request.user.is_staff):
            return True
        # Raised here, so a visitor who is not signed in reads this sentence too (DRF would say
        # "Authentication credentials were not provided.").
        raise PermissionDenied(self.message)
