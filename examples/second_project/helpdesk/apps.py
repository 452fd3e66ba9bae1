from django.apps import AppConfig


class HelpdeskConfig(AppConfig):
    name = "helpdesk"
    verbose_name = "Helpdesk"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # As docs/integration.md tells a host: receivers live in their own
        # module, connected when the app is ready.
        from . import receivers  # noqa: F401  (memory_committed -> MemoryChange)
