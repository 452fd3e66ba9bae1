"""WSGI entry point, for management tooling; the chat itself needs ASGI."""
import os

from django.core.wsgi import get_wsgi_application

from agentmemory.telemetry import setup_telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Tracing (only with OTEL_EXPORTER_OTLP_ENDPOINT) must wrap the middleware
# before the handler loads it.
setup_telemetry()
application = get_wsgi_application()
