from django.contrib import admin
from django.urls import include, path

from . import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("ask/", views.ask, name="ask"),
    # The memory page (/memory/) and the memory API (/api/memory/).
    path("", include("agentmemory.urls")),
]
