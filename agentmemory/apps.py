from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentMemoryConfig(AppConfig):
    name = "agentmemory"
    verbose_name = _("Agent memory")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.core.signals import setting_changed

        from . import conf

        # Like DRF and django-axes: `override_settings` and the `settings` fixture rebuild the settings.
        setting_changed.connect(conf.reset, dispatch_uid="agentmemory_settings_reset")
        from . import (
            checks,  # noqa: F401  (registers the system checks)
            receivers,  # noqa: F401  (account deletion takes the memory lock; SQLite's secure_delete)
        )
