"""Secrets out of error reports: credentials inside URLs are masked.

Django's SafeExceptionReporterFilter hides settings whose *name* looks
secret (KEY, TOKEN, PASS...), but REDIS_URL, the channel layer's hosts, the
cache's LOCATION and a DATABASE_URL-style value carry the password inside
the value. This filter masks the user:password part of any URL it finds in
a setting or a local variable of the debug page (DEBUG=1) and of the error
mails or logs that use the reporter.
"""
from __future__ import annotations

import re

from django.views.debug import SafeExceptionReporterFilter

CREDENTIALS_IN_URL = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<credentials>[^@/\s'\"]+)@")


def mask_url_credentials(text: str) -> str:
    return CREDENTIALS_IN_URL.sub(lambda found: f"{found['scheme']}{SafeExceptionReporterFilter.cleansed_substitute}@",
                                  text)


class MaskedCredentialsFilter(SafeExceptionReporterFilter):
    def cleanse_setting(self, key, value):
        cleansed = super().cleanse_setting(key, value)
        return self._mask(cleansed)

    def get_traceback_frame_variables(self, request, tb_frame):
        return [(name, self._mask(value)) for name, value in super().get_traceback_frame_variables(request, tb_frame)]

    def _mask(self, value):
        # Exact types: lazy objects (the request's user) pass as they are.
        if type(value) is str:
            return mask_url_credentials(value)
        if type(value) is dict:
            return {key: self._mask(item) for key, item in value.items()}
        if type(value) in (list, tuple):
            return type(value)(self._mask(item) for item in value)
        return value
