"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_asgi_application()

# A server that cannot serve its pages should not start (controlplane/checks.py).
from controlplane.checks import require_static_manifest  # noqa: E402

require_static_manifest()
