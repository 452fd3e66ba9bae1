"""The app's settings (agentmemory/conf.py): built once per AGENTMEMORY dict, read afresh when it changes."""
from django.test import override_settings

from agentmemory.conf import DEFAULTS, memory_settings


def test_settings_are_built_once_and_follow_every_change(settings):
    first = memory_settings()
    assert memory_settings() is first  # read on every commit: not rebuilt each time

    with override_settings(AGENTMEMORY={"ENABLED": True, "MEMORY_LIMIT": 10}):
        inside = memory_settings()
        assert inside.enabled is True and inside.limits["memory"] == 10
        assert inside.limits["user"] == DEFAULTS["USER_LIMIT"]  # defaults fill what is not set
    assert memory_settings().limits == first.limits  # back to the value in force

    settings.AGENTMEMORY = {**settings.AGENTMEMORY, "COMMIT_ATTEMPTS": 7}
    assert memory_settings().commit_attempts == 7


def test_no_agentmemory_setting_means_the_defaults(settings):
    del settings.AGENTMEMORY
    built = memory_settings()
    assert built.enabled is DEFAULTS["ENABLED"] and built.limits["memory"] == DEFAULTS["MEMORY_LIMIT"]


def test_the_settings_are_built_again_when_django_says_agentmemory_changed(settings):
    """`setting_changed` resets them (as DRF and django-axes do), not only a new dict's identity."""
    from django.test import override_settings

    from agentmemory.conf import memory_settings

    config = {**settings.AGENTMEMORY, "MAX_TOOL_FAILURES": 3}
    with override_settings(AGENTMEMORY=config):
        assert memory_settings().max_tool_failures == 3
        config["MAX_TOOL_FAILURES"] = 9  # an edit in place: the same dict, so not seen yet
        assert memory_settings().max_tool_failures == 3
        with override_settings(AGENTMEMORY=config):  # Django signals the change: built afresh
            assert memory_settings().max_tool_failures == 9
    assert memory_settings().max_tool_failures == settings.AGENTMEMORY.get("MAX_TOOL_FAILURES", 3)


def test_the_package_names_its_version_and_entry_points():
    import agentmemory

    assert agentmemory.__version__ and agentmemory.__version__[0].isdigit()
    for entry in ("agentmemory.turn.MemoryTurn", "agentmemory.services", "agentmemory.testing"):
        assert entry in agentmemory.__doc__
