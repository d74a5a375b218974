"""ASGI entry point: what the web server serves (uvicorn, or gunicorn's uvicorn workers).

Plain HTTP goes to Django; a WebSocket handshake goes through the same Django stack to a
view that takes WebSockets (``controlplane/websocket.py``), such as the Ray dashboard
proxy's log tail.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_application = get_asgi_application()

# A server that cannot serve its pages should not start (controlplane/checks.py).
from controlplane.checks import require_static_manifest  # noqa: E402
from controlplane.websocket import application as with_websockets  # noqa: E402

require_static_manifest()
application = with_websockets(django_application)

# Every view imported while the worker boots, not in its first request (as wsgi.py does).
from django.urls import get_resolver  # noqa: E402

get_resolver().url_patterns  # noqa: B018 (evaluated for its import)
