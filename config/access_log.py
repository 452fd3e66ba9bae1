"""daphne's access log, without query strings.

daphne writes one line per request (and per socket event) straight to its
stdout, not through `logging`, so LOGGING's redaction filter never sees it,
and the line holds the request's whole URI. A query string can carry what
someone typed: a staff member's search of conversations in the admin
(`?q=`) is words of people's messages. So the access log keeps the method,
the path, the status and the size, and says only that a query was there
(`/admin/chat/conversation/?[redacted]`): the rule the redaction filter
already applies to URLs in library log records (`agentmemory.telemetry.safe_url`).

`drop_query_strings` makes daphne's command line build `PathOnlyAccessLog`
instead of its own; config/asgi.py calls it when daphne loads the
application, before daphne builds its access logger. daphne's `runserver`
logs through `logging` and is redacted there. A front proxy's own access log
(nginx's `$request` holds the query) is the deployment's to set
(docs/privacy.md).
"""
from __future__ import annotations

from daphne.access import AccessLogGenerator

from agentmemory.telemetry import safe_url


class PathOnlyAccessLog(AccessLogGenerator):
    """daphne's NCSA-style access log, with every query string replaced by `?[redacted]`."""

    def __call__(self, protocol, action, details):
        if isinstance(details, dict) and isinstance(details.get("path"), str):
            details = {**details, "path": safe_url(details["path"])}
        return super().__call__(protocol, action, details)


def drop_query_strings() -> None:
    """Make daphne's command line use `PathOnlyAccessLog` (it names its logger class when the server starts)."""
    import daphne.cli

    daphne.cli.AccessLogGenerator = PathOnlyAccessLog
