"""The ASGI entry point imports on its own, as daphne loads it (`python -m daphne config.asgi:application`,
the Procfile's web line and `make run`): nothing it imports before setting DJANGO_SETTINGS_MODULE may read
Django's settings (the telemetry once pulled in DRF's settings through the arguments parser)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_config_asgi_imports_without_django_settings_module_set():
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(DEBUG="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", "import config.asgi; print(type(config.asgi.application).__name__)"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("ProtocolTypeRouter")
