"""ASGI entry point: HTTP through Django, WebSockets through Channels."""
import os

from django.core.asgi import get_asgi_application

from agentmemory.telemetry import setup_telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Tracing (only with OTEL_EXPORTER_OTLP_ENDPOINT) must wrap the middleware
# before the handler loads it.
setup_telemetry()
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chat.agents import lifespan_app  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402
from config.access_log import drop_query_strings  # noqa: E402
from config.origins import ExactOriginValidator  # noqa: E402
from config.parsers import BodyLimit, limit_daphne_bodies  # noqa: E402
from config.request_heads import bound_daphne_heads  # noqa: E402
from config.socket_auth import SessionAuthStack  # noqa: E402
from config.unavailable import answer_socket_outages  # noqa: E402

# Bodies over DATA_UPLOAD_MAX_MEMORY_SIZE are refused before they are read:
# by daphne's request (which otherwise reads a whole body before calling the
# application), and by BodyLimit under any other server (config/parsers.py).
limit_daphne_bodies()
# A long request head is served (up to 128 KiB) or answered 431, never dropped unanswered
# (config/request_heads.py); a socket handshake the database could not serve is a 503, as a
# page is (config/unavailable.py).
bound_daphne_heads()
answer_socket_outages()
# daphne's access log keeps paths, not query strings: a search term (the
# admin's `?q=` over conversations) is words of people's messages (config/access_log.py).
drop_query_strings()

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app),
        # Disposes the chat's model clients on servers that speak lifespan;
        # daphne does not, so chat.agents also hooks its reactor shutdown.
        "lifespan": lifespan_app,
        # Exact origins (scheme, host and port): config/origins.py; who is
        # signed in: config/socket_auth.py.
        "websocket": ExactOriginValidator(
            SessionAuthStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
