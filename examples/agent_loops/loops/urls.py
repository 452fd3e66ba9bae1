from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # The memory page (/memory/) and the memory API (/api/memory/).
    path("", include("agentmemory.urls")),
]
