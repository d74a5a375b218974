"""WSGI entry point (gunicorn ``controlplane.wsgi:application``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()

# A server that cannot serve its pages should not start (controlplane/checks.py).
from controlplane.checks import require_static_manifest  # noqa: E402

require_static_manifest()
