"""WSGI entry point (gunicorn ``controlplane.wsgi:application``)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()

# A server that cannot serve its pages should not start (controlplane/checks.py).
from controlplane.checks import require_static_manifest  # noqa: E402

require_static_manifest()

# Import every view now, while the worker boots, rather than in its first request: Django
# loads the URLconf lazily, and that import (the API, its serializers, the Kubernetes
# client's models) costs about half a second of CPU, which each gunicorn worker otherwise
# spends inside a user's request, at the moment a restart puts it back under load.
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 (evaluated for its import)
