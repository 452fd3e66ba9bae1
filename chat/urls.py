from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_update
from django.urls import path
from drf_spectacular.views import SpectacularSwaggerSplitView

from . import api, views

app_name = "chat"
urlpatterns = [
    path("", views.index, name="index"),
    path("api/chat/turns/", api.TurnView.as_view(), name="turns"),
    path("api/eval/turns/", api.EvalTurnView.as_view(), name="eval-turns"),
    path("api/conversations/", api.ConversationListView.as_view(), name="conversations"),
    path("api/conversations/<int:pk>/", api.ConversationDetailView.as_view(), name="conversation"),
    path("api/conversations/<int:pk>/messages/", api.ConversationMessagesView.as_view(), name="messages"),
    # Swagger UI from drf-spectacular-sidecar's static files: no CDN. The split
    # view serves its start-up script as a file (no inline script under the CSP);
    # its page keeps one inline <style>, allowed on this page only.
    path("api/docs/", csp_update({"style-src": [SELF, UNSAFE_INLINE]})(
        SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"),
]
